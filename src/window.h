/*
 * The count window's ring (window.c, C1): which of the latest `window`
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
 *   circuit__ring_start        before entering half-open: empty the records
 *                              an older state left under the same tag
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
/* Before the CAS that enters half-open in generation `gen` from the open
 * word whose low half is lo: empties every record tagged with gen's 30 bits
 * (an older half-open state's, 2^30 transitions ago: none of gen exists
 * yet), only while the word still holds lo (read X, check, CAS X).
 * O(window) loads. False when the word moved. */
bool circuit__ring_start(circuit_breaker *b, uint32_t gen, uint64_t lo);
/* Clears the record of failure `seq` of `gen` (a CAS from exactly it). */
void circuit__ring_clear(circuit_breaker *b, uint32_t gen, uint32_t seq);

#endif
