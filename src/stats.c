/*
 * circuit_get_stats (SPEC M1): a pure read. It takes no lock, calls no
 * callback, writes nothing, and does not fold the per-CPU counters: the
 * fast mode's pending successes are read from the records (percpu.c).
 *
 * Totals are per-CPU counters (admitted, rejected, successes and failures
 * counted on the slow path, ignored, late, released) summed here, plus the
 * ledger of successes folded from the fast mode, plus the records of the
 * current fast interval, plus two shared totals kept on paths that already
 * write a shared line (transitions, probe timeouts). The word is read before
 * and after: if a fold or an entry happened meanwhile the successes could be
 * counted twice or missed, so the read is repeated (a retry means another
 * thread made progress: lock-free).
 */
#include "counting.h"
#include "percpu.h"
#include "probes.h"

void circuit_get_stats(const circuit_breaker *b, circuit_stats *out)
{
    circuit__check_breaker(b, "circuit_get_stats");
    if (!out)
        circuit__abort("circuit_get_stats: out is NULL");

    circuit_stats s;
    circuit__u128 c;
    for (;;) {
        s = (circuit_stats){0};
        /* acquire: the records and the ledger read below are at least as new
         * as the word */
        c = circuit__ld128_acq(&b->core);
        for (uint32_t i = 0; i < b->ncpu; i++) {
            const circuit__pcpu *p = &b->pcpu[i];
            /* acquire: each a value it held, and all of them read before the
             * word is read again below (a relaxed load could be satisfied
             * after that later load on a weakly ordered CPU) */
            s.admitted += circuit__ld_acq(&p->admitted);
            s.rejected += circuit__ld_acq(&p->rejected);
            s.successes += circuit__ld_acq(&p->successes);
            s.failures += circuit__ld_acq(&p->failures);
            s.ignored += circuit__ld_acq(&p->ignored);
            s.late += circuit__ld_acq(&p->late);
            s.released += circuit__ld_acq(&p->released);
        }
        circuit__u128 f = circuit__ld128_acq(&b->folded);
        s.successes += f.hi;
        /* the counts of the current state from this same snapshot (in the
         * fast mode they add the records, read with acquire) */
        circuit__counts(b, c, &s.counts);
        if (circuit__fast(c.lo) && f.lo != circuit__ledger_key(c.lo))
            s.successes += circuit__fast_pending(b, c.lo); /* not yet folded */
        /* acquire, after every read above: if the word is unchanged, no fold
         * or entry ran between (ids are unique), so the records, the ledger
         * and the word agree */
        circuit__u128 again = circuit__ld128_acq(&b->core);
        if (again.lo == c.lo && again.hi == c.hi)
            break;
    }
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
