/*
 * Counting while half-open (halfopen.c), above transition.c: the window's
 * ring of failure records, a probe's result through the state word, and
 * one probe timeout's count. probes.c admits the probes and finds the
 * timeouts; counting.c dispatches results here.
 */
#ifndef CIRCUIT_HALFOPEN_H
#define CIRCUIT_HALFOPEN_H

#include "word.h"

/* Counts one probe's success or failure of generation `gen` through the
 * state word, asking the probe policy. Returns false when late. */
bool circuit__halfopen_count(circuit_breaker *b, uint32_t gen, bool failure, void *call_ctx,
                             int64_t now);

/* One attempt to count a probe timeout, due at `due`, into the half-open
 * word *c (P1): asks the probe policy with *c's counts plus the timeout,
 * then CASes the word from *c to the counted word, or makes the transition
 * the policy asked for (a reopen starts its open period at `due`).
 * COUNTED: this call's CAS won (the word holds the timeout, or left *c's
 * generation by it); SATURATED: timed_out is at CIRCUIT_TIMED_OUT_MAX and
 * the policy said stay, so there is nothing to write; LOST: the word moved,
 * *c is its new value. Adds no total: the caller (probes.c) makes sure each
 * timeout is counted once, and adds M1's total. */
typedef enum circuit__timeout_result {
    CIRCUIT__TIMEOUT_COUNTED,
    CIRCUIT__TIMEOUT_SATURATED,
    CIRCUIT__TIMEOUT_LOST
} circuit__timeout_result;
circuit__timeout_result circuit__count_timeout(circuit_breaker *b, circuit__u128 *c, int64_t due,
                                               void *call_ctx);

/* ---- the window's ring ---------------------------------------------------- */
/* Computes the word after appending one result to c (slow closed or
 * half-open). Returns true when the result it evicts is a failure recorded
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
