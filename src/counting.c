/*
 * Counting: the result -> counts step (SPEC C1-C5, S2, P1, L6). A counted
 * success or failure, or a probe timeout, becomes the new counts of the
 * current state, and the policy asked with them decides whether the state
 * changes (through transition.c). Below it: the per-CPU lines (percpu.c)
 * and the window's ring (window.c), the lower floor of this layer.
 *
 * LAYER INTERFACE (counting.h; what the rest of the core asks of counting):
 *   circuit__count          count one settled result of a ticket admitted in
 *                           generation `gen` (success, failure or ignored),
 *                           with its M1 total; false when late (T2)
 *   circuit__count_fast     the healthy closed success (L6): counted on this
 *                           CPU's line without touching a shared line, or
 *                           false (then circuit__count does it)
 *   circuit__count_timeout  count one probe timeout (P1) and ask the probe
 *                           policy
 *   circuit__counts         the counts a word stands for (policies, stats,
 *                           the final counts of a transition); _with takes
 *                           the fast mode's pending successes as read by
 *                           the caller (stats, which validates its read)
 *   circuit__fold           (percpu.h) make the counts exact before an
 *                           operator's transition
 * Callers: breaker.c (count, count_fast, counts, fold), probes.c
 * (count_timeout), stats.c (counts). What sits under the interface (the
 * per-CPU lines, the window, the word's closed layout) is this layer's own
 * and may change without the callers changing.
 */
#include "counting.h"
#include "percpu.h"
#include "transition.h"
#include "window.h"

/* ConcurrencyKit's exponential backoff for lost CAS races on the state word.
 * Its builtins mode keeps the header free of inline assembly TSan would not
 * see (it only spins; it orders nothing). */
#ifdef CIRCUIT__TSAN
#define CK_USE_CC_BUILTINS 1
#endif
#include <ck_backoff.h>

/* First wait after a lost CAS, in ck_backoff iterations (doubles each loss,
 * up to CK_BACKOFF_CEILING). Short: a loss on the slow path usually means
 * one other result got in first. */
#define CAS_BACKOFF_FIRST 16u

/* The probe policy's answer, checked (S4: any other value aborts). */
static circuit_state ask_probe(circuit_breaker *b, const circuit_counts *c)
{
    circuit_state d;
    {
        CIRCUIT__CB_FRAME(frame, b, "probe");
        d = b->policy.probe(b->policy.arg, c);
    }
    if (d != CIRCUIT_CLOSED && d != CIRCUIT_OPEN && d != CIRCUIT_HALF_OPEN)
        circuit__abort("probe policy returned an invalid state (%d); it must return "
                       "CIRCUIT_CLOSED, CIRCUIT_OPEN or CIRCUIT_HALF_OPEN",
                       (int)d);
    return d;
}

/* The trip policy's answer (S2). */
static bool ask_trip(circuit_breaker *b, const circuit_counts *cnt)
{
    CIRCUIT__CB_FRAME(frame, b, "trip");
    return b->policy.trip(b->policy.arg, cnt);
}

void circuit__counts(const circuit_breaker *b, circuit__u128 c, circuit_counts *out)
{
    circuit__counts_with(b, c, circuit__fast(c.lo) ? circuit__fast_pending(b, c.lo) : 0, out);
}

void circuit__counts_with(const circuit_breaker *b, circuit__u128 c, uint64_t add,
                          circuit_counts *out)
{
    unsigned code = circuit__code(c.lo);
    if (code == CIRCUIT__ST_OPEN || code == CIRCUIT__ST_ISOLATED) {
        *out = (circuit_counts){0, 0, 0, 0, 0};
        return;
    }
    if (circuit__fast(c.lo)) {
        /* fast mode: the counts as of the interval's start plus `add`, the
         * successes the per-CPU records hold (read, not folded) */
        uint64_t seq = circuit__fhi_seq(c.hi);
        bool full = (c.hi & CIRCUIT__FHI_FULL) || seq + add >= b->window;
        uint64_t run = circuit__fhi_run(c.hi) + add;
        out->successes = full ? (int64_t)b->window : (int64_t)(seq + add);
        out->failures = 0;
        out->consecutive_successes = run > (uint64_t)CIRCUIT_RUN_MAX ? CIRCUIT_RUN_MAX : (int64_t)run;
        out->consecutive_failures = 0;
        out->timed_out = 0;
        return;
    }
    int64_t n = (c.hi & CIRCUIT__HI_FULL) ? (int64_t)b->window : (int64_t)circuit__seq(c.lo);
    int64_t f = circuit__hi_fail(c.hi);
    int64_t run = circuit__hi_run(c.hi);
    bool last_fail = (c.hi & CIRCUIT__HI_LAST_FAIL) != 0;
    out->successes = n - f;
    out->failures = f;
    out->consecutive_successes = last_fail ? 0 : run;
    out->consecutive_failures = last_fail ? run : 0;
    out->timed_out = circuit__hi_to(c.hi);
}

/* Counts one success or failure of generation `gen` through the state word
 * (the slow path). Returns false when late. */
static bool count_slow(circuit_breaker *b, uint32_t gen, bool failure, void *call_ctx,
                       int64_t now, bool have_now)
{
    circuit__u128 c = circuit__ld128_acq(&b->core); /* acquire: table core */
    ck_backoff_t backoff = CAS_BACKOFF_FIRST;
    for (;;) {
        if (circuit__gen(c.lo) != gen)
            return false; /* late: never touches a later generation (T2, T6) */
        unsigned code = circuit__code(c.lo);
        if (code != CIRCUIT__ST_CLOSED && code != CIRCUIT__ST_HALF_OPEN)
            return false; /* unreachable: no ticket is admitted into open/isolated */
        if (circuit__fast(c.lo)) {
            circuit__fold(b, &c); /* exact counts first (L6) */
            continue;
        }
        circuit__ring_help(b, c);
        circuit__u128 n;
        bool evicted_failure = circuit__append(b, c, failure, &n);
        /* acquire: after the ring read inside append */
        if (circuit__ld128_lo_acq(&b->core) != c.lo) {
            /* c went stale while we read its evicted record: the counts would
             * mix two states, and no policy may see that. */
            c = circuit__ld128_acq(&b->core);
            continue;
        }
        circuit_counts cnt;
        circuit__counts(b, n, &cnt);
        circuit__u128 before = c;
        if (code == CIRCUIT__ST_CLOSED) {
            /* S2: trip is asked after a failure, and after a success only
             * when the window held a failure before it */
            if ((failure || circuit__hi_fail(c.hi) > 0) && ask_trip(b, &cnt)) {
                if (!have_now) {
                    now = circuit__now();
                    have_now = true;
                }
                CIRCUIT__HOOK(CIRCUIT_TP_DONE_BEFORE_CAS);
                if (circuit__transition(b, &c, CIRCUIT_OPEN, CIRCUIT_CAUSE_POLICY, &cnt, now,
                                        call_ctx))
                    return true;
            } else if (circuit__hi_fail(n.hi) == 0) {
                /* no failure left in the window: back to the fast mode */
                CIRCUIT__HOOK(CIRCUIT_TP_DONE_BEFORE_CAS);
                if (circuit__enter_fast(b, &c, n)) {
                    circuit__ring_after_count(b, before, failure, evicted_failure);
                    return true;
                }
            } else {
                CIRCUIT__HOOK(CIRCUIT_TP_DONE_BEFORE_CAS);
                if (circuit__core_cas(b, &c, n)) {
                    circuit__ring_after_count(b, before, failure, evicted_failure);
                    return true;
                }
            }
        } else {
            circuit_state to = ask_probe(b, &cnt);
            CIRCUIT__HOOK(CIRCUIT_TP_DONE_BEFORE_CAS);
            if (to != CIRCUIT_HALF_OPEN) {
                if (circuit__transition(b, &c, to, CIRCUIT_CAUSE_POLICY, &cnt, now,
                                        call_ctx))
                    return true;
            } else if (circuit__core_cas(b, &c, n)) {
                circuit__ring_after_count(b, before, failure, evicted_failure);
                return true;
            }
        }
        /* Lost a CAS to another result: back off before the next try, so
         * two CPUs do not keep stealing the line from each other
         * (exponential; not a lock: no one waits for anyone). */
        ck_backoff_eb(&backoff);
    }
}


bool circuit__count(circuit_breaker *b, uint32_t gen, circuit_outcome o, void *call_ctx,
                    int64_t now, bool have_now)
{
    bool counted;
    if (o == CIRCUIT_IGNORED) {
        /* acquire: table core */
        counted = circuit__gen(circuit__ld128_lo_acq(&b->core)) == gen;
        circuit__total_add(b, counted ? CIRCUIT__T_IGNORED : CIRCUIT__T_LATE);
        return counted;
    }
    counted = count_slow(b, gen, o == CIRCUIT_FAILURE, call_ctx, now, have_now);
    circuit__total_add(b, !counted ? CIRCUIT__T_LATE
                          : o == CIRCUIT_FAILURE ? CIRCUIT__T_FAILURES
                                                 : CIRCUIT__T_SUCCESSES);
    return counted;
}

bool circuit__count_timeout(circuit_breaker *b, uint32_t gen, int64_t due, void *call_ctx)
{
    circuit__u128 c = circuit__ld128_acq(&b->core); /* acquire: table core */
    for (;;) {
        if (circuit__gen(c.lo) != gen || circuit__code(c.lo) != CIRCUIT__ST_HALF_OPEN)
            return true; /* the state changed first: the timeout is moot */
        circuit__u128 n = {c.lo, circuit__hi_add_timeout(c.hi)};
        circuit_counts cnt;
        circuit__counts(b, n, &cnt);
        circuit_state d = ask_probe(b, &cnt);
        if (d != CIRCUIT_HALF_OPEN) {
            if (circuit__transition(b, &c, d, CIRCUIT_CAUSE_POLICY, &cnt, due, call_ctx)) {
                circuit__faa_rlx(&b->timed_out, 1); /* relaxed: a total */
                return true;
            }
        } else if (circuit__core_cas(b, &c, n)) {
            circuit__faa_rlx(&b->timed_out, 1); /* relaxed: a total */
            return false;
        }
    }
}
