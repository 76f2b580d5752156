/*
 * Counting (counting.h; docs/CONTRACT.md C1-C5, S2, T2, M1): one settled
 * result goes to the counts of its own generation, or is late. A probe's
 * result goes through the state word (halfopen.c), a closed success to its
 * CPU's cell and a closed failure to an exact point (closed.c); an ignored
 * result counts only its total. Each result adds exactly one M1 total.
 */
#include "counting.h"

void circuit__counts(const circuit_breaker *b, circuit__u128 c, circuit_counts *out)
{
    if (circuit__code(c.lo) == CIRCUIT__ST_CLOSED) {
        /* the exact point's counts plus the cells since, read only */
        uint64_t cells = circuit__cells_read(b, circuit__closed_epoch(c.lo));
        (void)circuit__closed_counts_at(b, c, &cells, out);
        return;
    }
    circuit__word_counts(b, c, out);
}

bool circuit__count(circuit_breaker *b, uint32_t gen, bool probe, circuit_outcome o,
                    void *call_ctx, int64_t now, bool have_now)
{
    bool counted;
    if (o == CIRCUIT_IGNORED) {
        /* acquire: table core */
        counted = circuit__gen(circuit__ld128_lo_acq(&b->s->core)) == gen;
        circuit__total_add(b, counted ? CIRCUIT__T_IGNORED : CIRCUIT__T_LATE);
        return counted;
    }
    if (probe) {
        counted = circuit__halfopen_count(b, gen, o == CIRCUIT_FAILURE, call_ctx, now);
        circuit__total_add(b, !counted ? CIRCUIT__T_LATE
                              : o == CIRCUIT_FAILURE ? CIRCUIT__T_FAILURES
                                                     : CIRCUIT__T_SUCCESSES);
        return counted;
    }
    if (o == CIRCUIT_FAILURE) {
        /* an exact point: S2 asks trip */
        counted = circuit__closed_failure(b, gen, &now, &have_now, call_ctx) == CIRCUIT__COUNTED;
        circuit__total_add(b, counted ? CIRCUIT__T_FAILURES : CIRCUIT__T_LATE);
        return counted;
    }
    /* a closed success is counted by circuit_done on the cell of its
     * ticket's unit, never here */
    circuit__abort("internal error: circuit__count given a closed success");
}
