/*
 * Counting (counting.c): the result -> counts step. Its interface is listed
 * at the top of counting.c; the per-CPU lines (percpu.h) and the window's
 * ring (window.h) are its lower floor. Above transitions (a counted result
 * may trip, close or reopen the breaker), below probes and the public calls.
 */
#ifndef CIRCUIT_COUNTING_H
#define CIRCUIT_COUNTING_H

#include "percpu.h"

/* Counts one settled result of a ticket admitted in generation `gen`
 * (S2, P2, C1-C5, T2): CIRCUIT_SUCCESS or CIRCUIT_FAILURE through the state
 * word, CIRCUIT_IGNORED by its total only; adds the M1 total. `now` is read
 * lazily when !have_now (only a trip needs it). Returns false when the
 * result is late: the state left the ticket's generation. */
bool circuit__count(circuit_breaker *b, uint32_t gen, circuit_outcome o, void *call_ctx,
                    int64_t now, bool have_now);

/* The healthy closed success (L6): counted on this CPU's line when the word
 * is fast and still of generation `gen`. False: nothing was counted; count
 * it with circuit__count. Inline: the hot path of a healthy breaker makes
 * one call, into percpu.c. Adds no M1 total: a fold adds the successes
 * the records hold to the folded ledger. */
static inline bool circuit__count_fast(circuit_breaker *b, uint32_t gen)
{
    /* acquire: pairs with the CAS that entered the fast interval */
    uint64_t lo = circuit__ld128_lo_acq(&b->core);
    return circuit__fast(lo) && circuit__gen(lo) == gen && circuit__fast_success(b, lo);
}

/* Counts one probe timeout, due at `due`, into the half-open state of `gen`
 * (P1; the caller freed the slot) and asks the probe policy; a reopen starts
 * its open period at `due`. Returns true when the state word changed
 * generation (the timeout then counted into nothing further). */
bool circuit__count_timeout(circuit_breaker *b, uint32_t gen, int64_t due, void *call_ctx);

/* The counts the word c stands for: zero while open or isolated; in the
 * fast mode the successes its per-CPU records hold are added (read, not
 * folded). */
void circuit__counts(const circuit_breaker *b, circuit__u128 c, circuit_counts *out);
/* The same with the fast mode's pending successes given (`add`, read by the
 * caller from the records of c's interval; ignored unless c is fast). */
void circuit__counts_with(const circuit_breaker *b, circuit__u128 c, uint64_t add,
                          circuit_counts *out);

#endif
