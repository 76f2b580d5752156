/*
 * Transitions (transition.c): the ONE function every change of state goes
 * through. It builds the new word (asking spec.open_for for an open period,
 * B1, and keeping the reopen count of B2), CASes it, raises gen64 and
 * publishes the transition for delivery (O1). Above the state word, the
 * per-CPU lines (a new closed state enters the fast mode) and delivery;
 * below counting, probes and the public calls, which decide and call it.
 */
#ifndef CIRCUIT_TRANSITION_H
#define CIRCUIT_TRANSITION_H

#include "word.h"

/* Makes the transition to `to` from the word `*c` it is decided from.
 * `counts` are the final counts of the state left (including what caused
 * it); `at` the moment it takes effect (an open period starts then).
 * Returns true with *c the new word, or false, with *c re-read, when the
 * CAS lost. Not for open -> half-open: circuit__transition_half_open. */
bool circuit__transition(circuit_breaker *b, circuit__u128 *c, circuit_state to,
                         circuit_cause cause, const circuit_counts *counts, int64_t at,
                         void *call_ctx);

/* The time-driven open -> half-open transition (cause TIMER, zero counts)
 * from the open word `*c`, the caller having reserved probe slot 0
 * (probes.c). `slot0_probe`: the caller is an allow, and that reservation
 * becomes its probe in this CAS; otherwise the new word carries
 * CIRCUIT__LO_NO_PROBE0 and the reservation is no probe (P1, S4).
 * Returns as circuit__transition. */
bool circuit__transition_half_open(circuit_breaker *b, circuit__u128 *c, bool slot0_probe,
                                   int64_t at, void *call_ctx);

#endif
