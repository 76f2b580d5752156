/*
 * circuit_get_stats (SPEC M1): a pure read. It takes no lock, calls no
 * callback, writes nothing, and does not fold the per-CPU counters: the
 * fast mode's pending successes are read from the records (percpu.c).
 *
 * Totals are per-CPU counters (admitted, rejected, successes and failures
 * counted on the slow path, ignored, late, released) summed here, plus the
 * ledger of successes folded from the fast mode, plus the records of the
 * current fast interval, plus two shared totals kept on paths that already
 * write a shared line (transitions, probe timeouts).
 *
 * ONE PASS, NO RETRY (M1 asks for a value each field held during the call,
 * so only what is reported needs to agree, and a reader must not be starved
 * by writers, whose every counted result changes the word in the slow
 * mode). Each total only grows, one at a time, so a sum of per-CPU counters
 * read one after the other lies between the totals at the start and at the
 * end of the read: a value it held. The one thing that can break this is a
 * success MOVING from the records of a fast interval X into the ledger (a
 * fold) while it is read: counted twice, or not at all. So:
 *   - word not fast: no records hold uncounted successes (the word leaves X
 *     only by the fold's CAS, after the ledger holds X): ledger + counters;
 *   - word fast X: the records of X, then the ledger, then the word's low
 *     half again. Still X: no entry can have reset a record yet (an entry
 *     resets records only after the word left X, with release, and the
 *     records are read with acquire before the word is), so the records were
 *     X's; the ledger holds X's sum (key X: a fold in progress) or none of
 *     it, and the records are added only in the second case. The counts are
 *     the word's plus those records.
 *     Moved on: X was folded, and the ledger read after the word re-read
 *     holds X; the snapshot is the new word, whose counts, if it is fast
 *     again (interval Y), are those as of Y's entry (records not added):
 *     Y was entered during this call, so that is a value the counts held.
 */
#include "counting.h"
#include "percpu.h"
#include "probes.h"

void circuit_get_stats(const circuit_breaker *b, circuit_stats *out)
{
    circuit__check_breaker(b, "circuit_get_stats");
    if (!out)
        circuit__abort("circuit_get_stats: out is NULL");

    circuit_stats s = {0};
#ifdef CIRCUIT_TESTING
    circuit__test_count_stats_pass();
#endif
    /* acquire: the records and the ledger read below are at least as new
     * as the word */
    circuit__u128 c = circuit__ld128_acq(&b->core);
    for (uint32_t i = 0; i < b->ncpu; i++) {
        const circuit__pcpu *p = &b->pcpu[i];
        /* relaxed: each a value it held; a total orders nothing, and no
         * other read here depends on when these are made */
        s.admitted += circuit__ld_rlx(&p->admitted);
        s.rejected += circuit__ld_rlx(&p->rejected);
        s.successes += circuit__ld_rlx(&p->successes);
        s.failures += circuit__ld_rlx(&p->failures);
        s.ignored += circuit__ld_rlx(&p->ignored);
        s.late += circuit__ld_rlx(&p->late);
        s.released += circuit__ld_rlx(&p->released);
    }
    uint64_t pending = 0;
    circuit__u128 f;
    if (circuit__fast(c.lo)) {
        /* acquire loads (fast_pending), then the ledger and the word with
         * acquire: in this order, see the top comment */
        uint64_t recs = circuit__fast_pending(b, c.lo);
        f = circuit__ld128_acq(&b->folded);
        if (circuit__ld128_lo_acq(&b->core) == c.lo) {
            pending = recs;
            if (f.lo != circuit__ledger_key(c.lo))
                s.successes += recs; /* not yet in the ledger */
        } else {
            /* X was folded meanwhile: the word as it is now, and the ledger
             * after it (acquire, in this order), which holds X */
            c = circuit__ld128_acq(&b->core);
            f = circuit__ld128_acq(&b->folded);
        }
    } else {
        f = circuit__ld128_acq(&b->folded); /* acquire: after the word */
    }
    s.successes += f.hi;
    circuit__counts_with(b, c, pending, &s.counts);
    CIRCUIT__HOOK(CIRCUIT_TP_STATS_READ);
    s.transitions = circuit__ld_rlx(&b->transitions); /* relaxed: totals (table) */
    s.timed_out = circuit__ld_rlx(&b->timed_out); /* relaxed: totals (table) */

    unsigned code = circuit__code(c.lo);
    uint32_t tag = circuit__gen(c.lo);
    s.state = circuit__pub_state(code);
    s.generation = circuit__gen_widen(b, tag);
    if (code == CIRCUIT__ST_OPEN) {
        int64_t now = circuit__now();
        if (circuit__open_over(c.hi, now)) {
            /* what circuit_get_state reports: half-open, not yet made */
            s.state = CIRCUIT_HALF_OPEN;
            s.generation++;
        } else {
            s.retry_after_ns = circuit__open_left(c.hi, now);
        }
    } else if (code == CIRCUIT__ST_HALF_OPEN) {
        s.probes_in_flight = circuit__probes_in_flight(b, tag);
    }
    *out = s;
}
