/*
 * circuit_get_stats (docs/CONTRACT.md M1): a pure read. It takes no lock,
 * calls no callback, writes nothing and ends no epoch.
 *
 * INVARIANTS
 *   - every field is a value it held during the call: totals only grow, so
 *     a sum read counter by counter lies between its start and end values;
 *   - a closed success is counted once even while it moves from the cells
 *     of epoch E into the ledger: the cells of E, then the ledger, then the
 *     word again, each with acquire;
 *   - the state and generation reported are those of the word the counts
 *     belong to, and an open answer stands for a word that held across the
 *     clock read.
 * Why one pass is enough, case by case: docs/design/stats.md.
 */
#include <string.h>

#include "counting.h"
#include "percpu.h"
#include "probes.h"

void circuit_get_stats(const circuit_breaker *b, circuit_stats *out)
{
    circuit__check_breaker(b, "circuit_get_stats");
    if (!out)
        circuit__abort("circuit_get_stats: out is NULL");

    circuit_stats s;
again:
    memset(&s, 0, sizeof s);
    CIRCUIT__STATS_PASS();
    /* acquire: the records and the ledger read below are at least as new
     * as the word */
    circuit__u128 c = circuit__ld128_acq(&b->s->core);
    uint64_t tot[CIRCUIT__T_NPACKED];
    circuit__totals_read(b, tot); /* each a value it held (percpu.h) */
    s.admitted = tot[CIRCUIT__T_ADMITTED];
    s.rejected = tot[CIRCUIT__T_REJECTED];
    s.failures = tot[CIRCUIT__T_FAILURES];
    s.ignored = tot[CIRCUIT__T_IGNORED];
    s.late = tot[CIRCUIT__T_LATE];
    s.released = tot[CIRCUIT__T_RELEASED];
    s.successes = circuit__ld_rlx(&b->s->succ_slow); /* relaxed: a total (table) */
    circuit__u128 f;
    uint64_t cells = 0;
    bool with_cells = false;
    if (circuit__code(c.lo) == CIRCUIT__ST_CLOSED) {
        /* acquire loads of the cells, then the ledger and the word with
         * acquire: in this order, see the top comment */
        cells = circuit__cells_read(b, circuit__closed_epoch(c.lo));
        f = circuit__ld128_acq(&b->s->folded);
        circuit__u128 again = circuit__ld128_acq(&b->s->core);
        if (circuit__code(again.lo) == CIRCUIT__ST_CLOSED &&
            circuit__ledger_key(again.lo) == circuit__ledger_key(c.lo)) {
            with_cells = true;
            if (f.lo != circuit__ledger_key(c.lo))
                s.successes += cells; /* not yet in the ledger */
            c = again;
        } else {
            /* E ended meanwhile: the word as it is now, and the ledger
             * after it (acquire, in this order), which holds E */
            c = again;
            f = circuit__ld128_acq(&b->s->folded);
        }
    } else {
        f = circuit__ld128_acq(&b->s->folded); /* acquire: after the word */
    }
    s.successes += f.hi;
    if (circuit__code(c.lo) == CIRCUIT__ST_CLOSED) {
        CIRCUIT__HOOK(CIRCUIT_TP_STATS_BEFORE_COUNTS);
        /* the state and generation reported are those of the word the
         * counts belong to (it may have moved on during the read) */
        c = circuit__closed_counts_at(b, c, with_cells ? &cells : NULL, &s.counts);
    } else {
        circuit__counts(b, c, &s.counts);
    }
    CIRCUIT__HOOK(CIRCUIT_TP_STATS_READ);
    s.transitions = circuit__ld_rlx(&b->s->transitions); /* relaxed: totals (table) */
    s.timed_out = circuit__ld_rlx(&b->s->timed_out); /* relaxed: totals (table) */

    unsigned code = circuit__code(c.lo);
    uint32_t tag = circuit__gen(c.lo);
    s.state = circuit__pub_state(code);
    s.generation = circuit__gen_widen(b, tag);
    if (code == CIRCUIT__ST_OPEN) {
        int64_t now = circuit__now();
        /* The state reported is for the moment of the clock read: the word
         * must still be this open state after it, or a reset and a clock
         * past the old end would report a half-open that never existed (M1).
         * A transition came meanwhile: read again, which is lock-free
         * (each retry follows another thread's transition). acquire: table
         * core */
        if (!circuit__core_still(b, &c))
            goto again;
        if (circuit__open_over(c.hi, now)) {
            /* what circuit_get_state reports: half-open, not yet made */
            s.state = CIRCUIT_HALF_OPEN;
            s.generation++;
        } else {
            s.retry_after_ns = circuit__open_left(c.hi, now);
        }
    } else if (code == CIRCUIT__ST_HALF_OPEN) {
        s.probes_in_flight = circuit__probes_in_flight(b, c.lo);
    }
    *out = s;
}
