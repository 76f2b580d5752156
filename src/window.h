/*
 * The count window's ring (window.c, SPEC C1): which of the latest `window`
 * results of the current state were failures. Part of the counting layer
 * (counting.h is its upper floor and its only caller); calls only the state
 * word below it.
 *
 * LAYER INTERFACE:
 *   circuit__append            the word after one more result, and whether
 *                              the result it evicts was a recorded failure
 *   circuit__ring_help         write the newest failure's record if its
 *                              appender has not yet (before appending)
 *   circuit__ring_after_count  after the CAS that counted a result: record
 *                              its failure, or clear the failure it evicted
 */
#ifndef CIRCUIT_WINDOW_H
#define CIRCUIT_WINDOW_H

#include "word.h"

/* Computes the word after appending one result to c (slow closed or
 * half-open). Returns true when the result it evicts was a failure recorded
 * in the ring (the caller clears that record once its CAS succeeds). When c
 * is stale the result is garbage, and the caller's CAS from c fails. */
bool circuit__append(circuit_breaker *b, circuit__u128 c, bool failure, circuit__u128 *out);
void circuit__ring_help(circuit_breaker *b, circuit__u128 c);
void circuit__ring_after_count(circuit_breaker *b, circuit__u128 c, bool failure,
                               bool evicted_failure);
/* Clears the record of failure `seq` of `gen` (a CAS from exactly it). */
void circuit__ring_clear(circuit_breaker *b, uint32_t gen, uint32_t seq);

#endif
