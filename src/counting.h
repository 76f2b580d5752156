/*
 * Counting (counting.c): a settled result to the counts of the state its
 * ticket is admitted in, dispatched to closed.c or halfopen.c, and the
 * counts a state word stands for. Above closed.c and halfopen.c; below
 * probes.c and the public calls.
 */
#ifndef CIRCUIT_COUNTING_H
#define CIRCUIT_COUNTING_H

#include "closed.h"
#include "halfopen.h"

/* Counts one settled result of a ticket admitted in generation `gen`
 * (S2, P2, C1-C5, T2, L6): a probe's (probe = true) through the state word;
 * a closed success on this CPU's cell; a closed failure as an exact point
 * (closed.c; docs/design/closed.md); CIRCUIT_IGNORED by its total only; adds
 * the M1 total. `now` is read lazily when !have_now (only a trip needs it).
 * Returns false when the result is late: the state left the ticket's
 * generation. */
bool circuit__count(circuit_breaker *b, uint32_t gen, bool probe, circuit_outcome o,
                    void *call_ctx, int64_t now, bool have_now);

/* The counts the word c stands for: zero while open or isolated; closed:
 * its exact point's plus the successes the cells hold (read, not sealed). */
void circuit__counts(const circuit_breaker *b, circuit__u128 c, circuit_counts *out);

#endif
