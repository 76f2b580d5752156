/*
 * Counting while closed (closed.c), above transition.c: a success on its
 * CPU's cell, a failure's exact point, the intents that end an epoch
 * (trip, isolate, fold) and the stats reader's counts. Protocol:
 * docs/design/closed.md.
 */
#ifndef CIRCUIT_CLOSED_H
#define CIRCUIT_CLOSED_H

#include "closed_state.h"

typedef enum circuit__closed_result { CIRCUIT__COUNTED, CIRCUIT__LATE } circuit__closed_result;
/* Completes the intent of closed word wi (anyone may; the same decision). */
void circuit__complete(circuit_breaker *b, circuit__u128 wi, int64_t *now, bool *have_now,
                       void *call_ctx);
/* A closed success's count (docs/design/closed.md, A SUCCESS): the fast path here,
 * inlined into circuit_done; everything else out of line. */
/* the rest of a closed success: the mirror m is shut, or the cell sealed,
 * of another epoch or at its limit */
circuit__closed_result circuit__closed_success_slow(circuit_breaker *b, uint32_t gen,
                                                   void *call_ctx, uint64_t m, uint64_t *cell);
/* One more closed success on this CPU's cell (L6), while the cell is of the
 * epoch in bits 32-62 of `hi` (a mirror value, or circuit__cell_make(e, 0)),
 * unsealed and below its limit: then v + 1 has the same high half as `hi`
 * (the count does not carry into it), one compare. False, with *v the cell
 * as last read, as soon as one of those fails. The one home of the cell's
 * count loop: circuit_done's fast path, circuit__closed_success and its
 * slow path all count through it. */
static inline bool circuit__cell_add(uint64_t *cell, uint64_t hi, uint64_t *v)
{
    *v = circuit__ld_rlx(cell); /* relaxed: the CAS below decides */
    CIRCUIT__HOOK(CIRCUIT_TP_FAST_BEFORE_COUNT);
    while (((*v + 1) ^ hi) >> 32 == 0) {
        /* relaxed: a seal is an RMW on this cell, so it reads this count or
         * makes this CAS fail (table: pcpu[].cell) */
        if (circuit__cas_rlx(cell, v, *v + 1))
            return true;
    }
    return false;
}

static inline circuit__closed_result circuit__closed_success(circuit_breaker *b, uint32_t gen,
                                                             void *call_ctx, circuit__pcpu *unit)
{
    uint64_t *cell = &unit->cell;
    /* The closed mirror (docs/design/mirror.md): open for (gen, e) only while the word is
     * closed in gen, epoch e, and the cell of e is sealed before e ends. So
     * an unsealed cell of e counts the success in gen without reading the
     * word, whose line every failure takes. acquire: the epoch's cells as
     * its start left them. */
    uint64_t m = circuit__mirror_ld(b), v;
    if (circuit__code(m) == CIRCUIT__ST_CLOSED && circuit__gen(m) == gen &&
        circuit__cell_add(cell, circuit__cell_make(circuit__closed_epoch(m), 0), &v))
        return CIRCUIT__COUNTED; /* L6: on this CPU's line */
    return circuit__closed_success_slow(b, gen, call_ctx, m, cell);
}
circuit__closed_result circuit__closed_failure(circuit_breaker *b, uint32_t gen, int64_t *now,
                                               bool *have_now, void *call_ctx);
/* isolate from closed (an intent); false when *w moved first (re-read). */
bool circuit__closed_isolate(circuit_breaker *b, circuit__u128 *w, int64_t now, void *call_ctx);
/* ends the epoch of closed word *w (a fold intent, tests and count limits) */
bool circuit__closed_fold(circuit_breaker *b, circuit__u128 *w);
uint64_t circuit__cells_read(const circuit_breaker *b, uint32_t epoch);
/* a reader's counts at closed word w plus `cells` successes since its point;
 * returns the word they belong to (a newer one, maybe not closed, when w is
 * overtaken during the read): report its state and generation */
circuit__u128 circuit__closed_counts_at(const circuit_breaker *b, circuit__u128 w,
                                        const uint64_t *cells, circuit_counts *out);

#endif
