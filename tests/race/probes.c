/*
 * Probe timeouts and half-open states raced (P1, TM2, T6, C1, S4),
 * TSan-safe cases:
 *
 *   timeouts       a probe timeout that fell due is counted whichever call
 *                  notices it, while other threads admit, settle and move
 *                  the test clock
 *   raised_due     slot 0's reservation due raised under a scan is the due
 *                  the scan leaves in its hint
 *   raised_due_claimed  a raise after the timeout's claim cannot land: the
 *                  timeout is counted as of the due the claim checked
 *   halfopen_tags  what a half-open state leaves behind, tagged with the
 *                  generation's low 30 bits, is never read as its own by a
 *                  later half-open state with the same tag
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "race.h"

/* ==== timeouts: probe timeouts counted whoever notices them (P1) ========== */

/*
 * P1 race check: a probe timeout that fell due is counted (timed_out
 * grows, the probe policy is asked) whichever call notices it, while other
 * threads admit new probes in the same half-open state, settle probes with
 * circuit_done or circuit_release (some before their due time, some after)
 * and move the test clock.
 *
 * The probe policy always answers "go on probing", so after the first trip
 * the breaker stays half-open in one generation and every probe ends in
 * exactly one way: settled before its due time (no timeout) or timed out
 * (once). A sequential account bounds the timeouts from the clock readings
 * each thread takes around its own calls:
 *   - a probe settled by a call that started at or after
 *     (clock after its admission) + probe_timeout was certainly due before
 *     that call: it MUST be counted;
 *   - a probe whose settling call returned before
 *     (clock before its admission) + probe_timeout cannot have been due
 *     while it was held: it must NOT be counted.
 * At the end (every probe settled, the clock moved past every due time and
 * one more allow made): lower <= timed_out <= upper, timed_out of the
 * state's counts equals the total, the probe policy was asked at least once
 * per timeout, at most `probes` probes were ever in flight at once
 * (counted by the threads), and generation and transitions are 2.
 *
 * A plain program (no Criterion, which cannot start under TSan): it runs in
 * the TSan build too. Seeds vary the interleavings; more threads than CPUs.
 *
 *   race_probes timeouts [rounds [seed]]     exit 0: pass, 1: broken
 */

#if RACE_SLOW
static long timeouts_rounds = 40;
#else
static long timeouts_rounds = 200;
#endif

enum { THREADS = 4, OPS = 400, HOLD = 2 };
static int64_t timeouts_PT = 1000; /* probe_timeout_ns */
static bool timeouts_real_clock;

typedef struct held {
    circuit_ticket t;
    int64_t adm_before, adm_after;
    bool live;
} held;

typedef struct round_state {
    circuit_breaker *b;
    int probes;
    uint64_t lower, upper, probe_asks, admitted;
    int64_t in_flight, most_in_flight;
    int64_t violations;
} round_state;

static round_state timeouts_rs;

static bool trip_at_once(void *arg, const circuit_counts *c)
{
    (void)arg;
    (void)c;
    return true;
}
static circuit_state timeouts_keep_probing(void *arg, const circuit_counts *c)
{
    (void)arg;
    (void)c;
    RACE_ADD(&timeouts_rs.probe_asks, 1);
    return CIRCUIT_HALF_OPEN;
}
static circuit_outcome timeouts_classify(void *arg, void *ctx, int result)
{
    (void)arg;
    (void)ctx;
    return result ? CIRCUIT_FAILURE : CIRCUIT_SUCCESS;
}
static uint64_t timeouts_xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void timeouts_settle(held *h, bool done, bool fail)
{
    int64_t before = circuit_test_clock_now();
    /* the thread's own count of probes held: down before the call frees
     * the slot, so a new admission never sees it too high */
    RACE_ADD(&timeouts_rs.in_flight, -1);
    if (done)
        circuit_done(&h->t, fail ? 1 : 0);
    else
        circuit_release(&h->t);
    int64_t after = circuit_test_clock_now();
    if (before >= h->adm_after + timeouts_PT)
        RACE_ADD(&timeouts_rs.lower, 1); /* certainly due before the settling call */
    if (after >= h->adm_before + timeouts_PT)
        RACE_ADD(&timeouts_rs.upper, 1); /* may have been due while held */
    h->live = false;
}

static void *timeouts_worker(void *arg)
{
    uint64_t rng = (uint64_t)(uintptr_t)arg;
    held h[HOLD] = {0};
    for (int op = 0; op < OPS; op++) {
        uint64_t r = timeouts_xorshift(&rng);
        switch (r % 8) {
        case 0:
        case 1:
            if (timeouts_real_clock) {
                int64_t until = circuit_test_clock_now() + (int64_t)(r >> 8) % (timeouts_PT / 2);
                while (circuit_test_clock_now() < until)
                    ;
            } else {
                circuit_test_clock_advance((int64_t)(r >> 8) % (timeouts_PT / 2));
            }
            break;
        case 2:
        case 3:
        case 4: {
            int k = (int)((r >> 8) % HOLD);
            if (h[k].live)
                break;
            int64_t before = circuit_test_clock_now();
            if (circuit_allow(timeouts_rs.b, NULL, &h[k].t, NULL)) {
                int64_t n = RACE_ADD(&timeouts_rs.in_flight, 1);
                int64_t most = RACE_LOAD(&timeouts_rs.most_in_flight);
                while (n > most && !__atomic_compare_exchange_n(&timeouts_rs.most_in_flight, &most, n,
                                                                false, __ATOMIC_SEQ_CST,
                                                                __ATOMIC_SEQ_CST))
                    ;
                RACE_ADD(&timeouts_rs.admitted, 1);
                h[k].adm_before = before;
                h[k].adm_after = circuit_test_clock_now();
                h[k].live = true;
            }
            break;
        }
        default: {
            int k = (int)((r >> 8) % HOLD);
            if (h[k].live)
                timeouts_settle(&h[k], (r >> 20) % 3 != 0, (r >> 24) & 1);
            break;
        }
        }
    }
    for (int k = 0; k < HOLD; k++)
        if (h[k].live)
            timeouts_settle(&h[k], true, false);
    return NULL;
}

static void fail_round(long round, uint64_t seed, const char *what, long long a, long long b_,
                       long long c)
{
    fprintf(stderr, "race_probes timeouts: round %ld (seed %llu, probes %d): %s: %lld %lld %lld\n",
            round, (unsigned long long)seed, timeouts_rs.probes, what, a, b_, c);
    timeouts_rs.violations++;
}

static int run_round(long round, uint64_t seed)
{
    timeouts_rs = (round_state){0};
    timeouts_rs.probes = 1 + (int)(seed % 3);
    if (!timeouts_real_clock)
        circuit_test_clock_set(1000000000);
    circuit_spec spec = {
        .config = {.window = 4, .probes = timeouts_rs.probes, .open_for_ns = 10,
                   .probe_timeout_ns = timeouts_PT},
        .policy = {.trip = trip_at_once, .probe = timeouts_keep_probing},
        .classify = timeouts_classify,
        .observe = race_observe_nothing,
    };
    char err[256];
    if (circuit_new(&timeouts_rs.b, &spec, err, sizeof err) != 0) {
        fprintf(stderr, "race_probes timeouts: circuit_new: %s\n", err);
        return 1;
    }
    /* trip (generation 1), then half-open (2) for the rest of the round */
    circuit_ticket t;
    circuit_allow(timeouts_rs.b, NULL, &t, NULL);
    circuit_done(&t, 1);
    if (timeouts_real_clock) {
        int64_t until = circuit_test_clock_now() + 10;
        while (circuit_test_clock_now() < until)
            ;
    } else {
        circuit_test_clock_advance(10);
    }
    circuit_allow(timeouts_rs.b, NULL, &t, NULL);
    circuit_release(&t);

    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, timeouts_worker,
                       (void *)(uintptr_t)(seed * 0x9e3779b97f4a7c15u + (uint64_t)i + 1));
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    /* past every due time; one more call notices what fell due */
    if (timeouts_real_clock) {
        int64_t until = circuit_test_clock_now() + 2 * timeouts_PT;
        while (circuit_test_clock_now() < until)
            ;
    } else {
        circuit_test_clock_advance(2 * timeouts_PT);
    }
    if (circuit_allow(timeouts_rs.b, NULL, &t, NULL))
        circuit_done(&t, 0); /* frees its slot even if it is due by now */

    circuit_stats s;
    circuit_get_stats(timeouts_rs.b, &s);
    if (s.generation != 2 || s.transitions != 2 || s.state != CIRCUIT_HALF_OPEN)
        fail_round(round, seed, "generation, transitions, state", (long long)s.generation,
                   (long long)s.transitions, (long long)s.state);
    if (s.timed_out < timeouts_rs.lower)
        fail_round(round, seed, "timeouts lost: counted, certainly due, may be due",
                   (long long)s.timed_out, (long long)timeouts_rs.lower, (long long)timeouts_rs.upper);
    if (s.timed_out > timeouts_rs.upper)
        fail_round(round, seed, "timeouts invented: counted, certainly due, may be due",
                   (long long)s.timed_out, (long long)timeouts_rs.lower, (long long)timeouts_rs.upper);
    if ((uint64_t)s.counts.timed_out != s.timed_out)
        fail_round(round, seed, "counts.timed_out vs the total", (long long)s.counts.timed_out,
                   (long long)s.timed_out, 0);
    if (timeouts_rs.probe_asks < s.timed_out)
        fail_round(round, seed, "probe policy asked fewer times than timeouts counted",
                   (long long)timeouts_rs.probe_asks, (long long)s.timed_out, 0);
    if (s.probes_in_flight != 0) {
        circuit_rejection rej = {0, 0};
        bool again = circuit_allow(timeouts_rs.b, NULL, &t, &rej);
        if (again)
            circuit_done(&t, 0);
        circuit_stats s2;
        circuit_get_stats(timeouts_rs.b, &s2);
        fail_round(round, seed, "slots still held at the end (then: admitted, held, timed out)",
                   (long long)again, (long long)s2.probes_in_flight, (long long)s2.timed_out);
    }
    circuit_free(timeouts_rs.b);
    return timeouts_rs.violations ? 1 : 0;
}

static int timeouts_main(int argc, char **argv)
{
    uint64_t seed0 = 1;
    if (argc > 1)
        timeouts_rounds = strtol(argv[1], NULL, 10);
    if (argc > 2)
        seed0 = strtoull(argv[2], NULL, 10);
    if (argc > 3 && argv[3][0] == 'r') {
        timeouts_real_clock = true;
        timeouts_PT = 20000;
        circuit_test_clock_use_real(true);
    }
    long failed = 0;
    uint64_t timeouts = 0;
    for (long r = 0; r < timeouts_rounds; r++) {
        failed += run_round(r, seed0 + (uint64_t)r);
    }
    (void)timeouts;
    printf("race_probes timeouts: %ld rounds of %d threads x %d operations: %ld failed\n", timeouts_rounds,
           THREADS, OPS, failed);
    return failed ? 1 : 0;
}

/* ==== raised_due: a reservation's due raised under a scan (P1, TM2) ======= */

/*
 * P1, TM2: slot 0's reservation due raised under a scan.
 *
 * An allow W reserves slot 0 for the open -> half-open change (due +2000)
 * and stops before its CAS; a later allow R finds that reservation and
 * stops before the CAS that raises its due to its own clock + probe_timeout
 * (+2600). W wins the change: the reservation is its probe. At +2200 an
 * allow S scans, batches slot 0 with the due it read (+2000) and stops;
 * R's raise lands; S resumes and finds the same probe with a later due.
 * The scan must count that due in the hint it leaves: once the clock has
 * passed +2600 the probe times out (timed_out 1, the probe policy reopens),
 * instead of holding its slot for ever while every allow is refused
 * {HALF_OPEN, 0}. Plain program (runs under TSan too); exit 0 pass, 1 fail.
 *
 * raised_due_claimed: S stops later, just after CLAIMING the timeout
 * (CIRCUIT_TP_TIMEOUT_CLAIMED) of the due it read (+2000), and only then
 * may R's raise land. The claim cleared slot 0's reservation mark first,
 * so the raise fails: S counts the timeout as of +2000 and is refused
 * {OPEN, 800} (the reopen runs to +3000). Planted twin CLAIM_UNFROZEN (a
 * fresh review's repro): the raise lands after the claim, S counts the
 * timeout as of +2600, in its future, and is refused {OPEN, 1400} with
 * open_for 1000.
 */

enum { RAISED_W = 1, RAISED_R, RAISED_S }; /* the roles of the three allows */
static circuit_test_point raised_stop[] = {
    [RAISED_W] = CIRCUIT_TP_HALFOPEN_BEFORE_CAS,  /* W: before its half-open CAS */
    [RAISED_R] = CIRCUIT_TP_RESERVE_BEFORE_RAISE, /* R: before the CAS raising the due */
    [RAISED_S] = CIRCUIT_TP_TIMEOUT_IDLE_READ,    /* S: in its timeout scan (or just
                                                   * after its claim: raised_due_claimed) */
};
#define RAISED_T0 1000000000LL
#define OPEN_FOR_NS 1000
#define PROBE_TIMEOUT_NS 1000
static circuit_breaker *raised_b;

static bool trip_at_first_failure(void *a, const circuit_counts *c)
{
    (void)a;
    return c->failures >= 1;
}
static circuit_state probe_one_decides(void *a, const circuit_counts *c)
{
    (void)a;
    if (c->failures || c->timed_out)
        return CIRCUIT_OPEN;
    return c->successes >= 1 ? CIRCUIT_CLOSED : CIRCUIT_HALF_OPEN;
}
static circuit_outcome outcome_as_given(void *a, void *x, int r)
{
    (void)a;
    (void)x;
    return (circuit_outcome)r;
}

typedef struct raised_call {
    int role;
    bool ok;
    circuit_ticket t;
    circuit_rejection rej;
} raised_call;

static void *raised_run(void *p)
{
    raised_call *a = p;
    race_stop_at(a->role, raised_stop[a->role]);
    a->ok = circuit_allow(raised_b, a, &a->t, &a->rej);
    return NULL;
}

static int raised_due_run(bool claimed)
{
    raised_stop[RAISED_S] = claimed ? CIRCUIT_TP_TIMEOUT_CLAIMED : CIRCUIT_TP_TIMEOUT_IDLE_READ;
    circuit_test_clock_set(RAISED_T0);
    circuit_spec s = {0};
    s.config = (circuit_config){2, 1, OPEN_FOR_NS, PROBE_TIMEOUT_NS};
    s.policy.trip = trip_at_first_failure;
    s.policy.probe = probe_one_decides;
    s.classify = outcome_as_given;
    s.salt = 1;
    if (circuit_new(&raised_b, &s, NULL, 0) != 0)
        return 1;
    race_park_install();
    circuit_ticket t = CIRCUIT_TICKET_INIT;
    circuit_rejection rej;
    RACE_CHECK(circuit_allow(raised_b, NULL, &t, &rej), "the first allow is admitted");
    circuit_done(&t, CIRCUIT_FAILURE);          /* open at T0 until T0 + 1000 */
    circuit_test_clock_advance(OPEN_FOR_NS);    /* +1000 */

    pthread_t tw, tr, ts;
    raised_call w = {RAISED_W, false, CIRCUIT_TICKET_INIT, {0, 0}},
                r = {RAISED_R, false, CIRCUIT_TICKET_INIT, {0, 0}},
                sc = {RAISED_S, false, CIRCUIT_TICKET_INIT, {0, 0}};
    pthread_create(&tw, NULL, raised_run, &w);
    race_wait_stopped(RAISED_W, "W (before the half-open CAS)");
    circuit_test_clock_advance(600); /* +1600 */
    pthread_create(&tr, NULL, raised_run, &r);
    race_wait_stopped(RAISED_R, "R (before the raise)");
    race_go(RAISED_W);
    pthread_join(tw, NULL);
    RACE_CHECK(w.ok, "W is admitted: its CAS made the change with the reservation (S3)");
    circuit_test_clock_advance(600); /* +2200: the due W's reservation had (+2000) has passed */
    pthread_create(&ts, NULL, raised_run, &sc);
    race_wait_stopped(RAISED_S, "S (in its timeout scan)");
    race_go(RAISED_R);
    pthread_join(tr, NULL); /* the raise has landed: due +2600 */
    race_go(RAISED_S);
    pthread_join(ts, NULL);
    if (claimed) {
        circuit_stats cs;
        circuit_get_stats(raised_b, &cs);
        RACE_CHECK(!sc.ok && sc.rej.state == CIRCUIT_OPEN && sc.rej.retry_after_ns == 800,
                   "S at +2200, having claimed the timeout due at +2000: refused {OPEN, 800} "
                   "(the timeout as of +2000, P1, TM2); got %s {%s, %lld}, timed_out %llu",
                   sc.ok ? "admitted" : "refused", circuit_state_name(sc.rej.state),
                   (long long)sc.rej.retry_after_ns, (unsigned long long)cs.timed_out);
        RACE_CHECK(cs.timed_out == 1 && cs.retry_after_ns == 800,
                   "stats at +2200: timed_out 1, retry_after 800: %llu, %lld",
                   (unsigned long long)cs.timed_out, (long long)cs.retry_after_ns);
        race_park_remove();
        if (sc.ok)
            circuit_release(&sc.t);
        circuit_release(&w.t);
        if (r.ok)
            circuit_release(&r.t);
        circuit_free(raised_b);
        return race_failures() ? 1 : 0;
    }
    RACE_CHECK(!sc.ok && sc.rej.state == CIRCUIT_HALF_OPEN,
               "S at +2200: refused {HALF_OPEN}, W's probe is not due before +2600 (TM2)");
    race_park_remove();

    circuit_test_clock_advance(1000); /* +3200: W's probe is due */
    raised_call l = {0, false, CIRCUIT_TICKET_INIT, {0, 0}};
    l.ok = circuit_allow(raised_b, NULL, &l.t, &l.rej);
    circuit_stats st;
    circuit_get_stats(raised_b, &st);
    RACE_CHECK(st.timed_out == 1, "at +3200 W's probe has timed out (P1): timed_out %llu, state %s, probes in flight %lld",
          (unsigned long long)st.timed_out, circuit_state_name(st.state), (long long)st.probes_in_flight);
    RACE_CHECK(!l.ok && l.rej.state == CIRCUIT_OPEN && l.rej.retry_after_ns == 400,
          "at +3200 the timeout (at +2600) has reopened until +3600: %s {%s, %lld}", l.ok ? "admitted" : "refused",
          circuit_state_name(l.rej.state), (long long)l.rej.retry_after_ns);
    if (l.ok)
        circuit_release(&l.t);
    circuit_release(&w.t);
    if (r.ok)
        circuit_release(&r.t);
    circuit_free(raised_b);
    return race_failures() ? 1 : 0;
}

static int raised_due_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return raised_due_run(false);
}

static int raised_due_claimed_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return raised_due_run(true);
}

/* ==== halfopen_tags: the tags of older half-open states (T6, C1, P1, S4) ==== */

/*
 * T6 / C1 / P1 / S4: what a half-open state leaves behind is tagged with
 * the generation's low 30 bits, which come back after 2^30 transitions (an
 * operator isolate/reset loop reaches that in minutes). A later half-open
 * state with the same tag must not read it as its own:
 *   1. C1: a failure record its window left: the new state's window
 *      [F, S] must count 1 failure, not 0 (the old record made the append
 *      of seq 0 look done, and the eviction of seq 0 then took the new
 *      success for the old failure).
 *   2. P1 / S4: a probe slot left busy (its ticket released after its
 *      timeout fell due): the new state's first probe must get a fresh
 *      reservation (due a whole probe_timeout later), so that a second
 *      allow at the same instant is rejected with probes = 1 and no
 *      timeout is counted.
 * The 2^30 transitions are skipped with circuit_test_skip_generations (a
 * run of 2^29 isolate/reset cycles: about 220 s each).
 * A plain program (runs in every build, TSan included).
 *
 *   race_probes halfopen_tags     exit 0: pass, 1: a check failed
 */


#define tags_TAG_MASK ((UINT64_C(1) << 30) - 1)

static bool tags_trip(void *a, const circuit_counts *c)
{
    (void)a;
    (void)c;
    return true;
}
static circuit_state tags_keep_probing(void *a, const circuit_counts *c)
{
    (void)a;
    (void)c;
    return CIRCUIT_HALF_OPEN;
}
static circuit_outcome tags_classify(void *a, void *ctx, int r)
{
    (void)a;
    (void)ctx;
    return r ? CIRCUIT_FAILURE : CIRCUIT_SUCCESS;
}

static circuit_breaker *tags_build(int window, int probes, int64_t probe_to)
{
    circuit_spec sp = {0};
    sp.config = (circuit_config){window, probes, 10, probe_to};
    sp.policy.trip = tags_trip;
    sp.policy.probe = tags_keep_probing;
    sp.classify = tags_classify;
    circuit_breaker *b = NULL;
    if (circuit_new(&b, &sp, NULL, 0) != 0) {
        fprintf(stderr, "circuit_new failed\n");
        exit(1);
    }
    return b;
}

static void tags_call(circuit_breaker *b, int result)
{
    circuit_ticket t;
    circuit_rejection rej;
    if (!circuit_allow(b, NULL, &t, &rej)) {
        fprintf(stderr, "FAIL: rejected (%s)\n", circuit_state_name(rej.state));
        exit(1);
    }
    circuit_done(&t, result);
}

static uint64_t tags_generation(circuit_breaker *b)
{
    circuit_stats st;
    circuit_get_stats(b, &st);
    return st.generation;
}

/* From isolated: skip generations so that reset, trip and the end of the
 * open period make a half-open state whose tag is old_half_open's (or, with
 * alias false, one less: the control run). */
static void skip_to_alias(circuit_breaker *b, uint64_t old_half_open, bool alias)
{
    uint64_t gi = tags_generation(b); /* isolated */
    uint64_t target = old_half_open + (alias ? 0 : 1);
    uint64_t n = ((target - 3 - gi) & tags_TAG_MASK) + (UINT64_C(1) << 30);
    int rc = circuit_test_skip_generations(b, n);
    RACE_CHECK(rc == 0, "circuit_test_skip_generations: %d", rc);
}

/* 1. C1: the window's failure record */
static void window_record(bool alias)
{
    circuit_breaker *b = tags_build(2, 4, INT64_C(1) << 60);
    circuit_test_clock_set(1000);
    tags_call(b, 1); /* trips: open */
    circuit_test_clock_advance(10);
    tags_call(b, 1); /* half-open; a failure at seq 0, kept probing */
    uint64_t g_old = tags_generation(b);
    RACE_CHECK(circuit_isolate(b, NULL) == 0, "isolate");
    skip_to_alias(b, g_old, alias);
    RACE_CHECK(circuit_reset(b, NULL) == 0, "reset");
    tags_call(b, 1); /* trips */
    circuit_test_clock_advance(10);
    tags_call(b, 0); /* half-open: seq 0 success */
    tags_call(b, 1); /* seq 1 failure */
    tags_call(b, 0); /* seq 2 success, evicts seq 0 */
    circuit_stats st;
    circuit_get_stats(b, &st);
    RACE_CHECK(st.state == CIRCUIT_HALF_OPEN && (st.generation & tags_TAG_MASK) == ((g_old + !alias) & tags_TAG_MASK),
          "half-open at generation %" PRIu64 " (tag %" PRIu64 "), the old one %" PRIu64,
          st.generation, st.generation & tags_TAG_MASK, g_old);
    RACE_CHECK(st.counts.successes == 1 && st.counts.failures == 1 &&
              st.counts.consecutive_successes == 1,
          "%s: the window [F, S] counts successes %" PRId64 " failures %" PRId64
          " (C1: 1 and 1)",
          alias ? "same tag as an older half-open state" : "control", st.counts.successes,
          st.counts.failures);
    circuit_free(b);
}

/* 2. P1 / S4: a probe slot left busy */
static void probe_slot(bool alias)
{
    circuit_breaker *b = tags_build(2, 1, 1000);
    circuit_test_clock_set(1000);
    tags_call(b, 1); /* trips: open */
    circuit_test_clock_advance(10);
    circuit_ticket t, u;
    RACE_CHECK(circuit_allow(b, NULL, &t, NULL), "the first half-open state's probe");
    uint64_t g_old = tags_generation(b);
    RACE_CHECK(circuit_isolate(b, NULL) == 0, "isolate");
    circuit_test_clock_advance(2000);
    circuit_release(&t); /* after its due time: the slot stays busy */
    skip_to_alias(b, g_old, alias);
    RACE_CHECK(circuit_reset(b, NULL) == 0, "reset");
    tags_call(b, 1); /* trips */
    circuit_test_clock_advance(10);
    circuit_rejection rej = {CIRCUIT_CLOSED, -1};
    RACE_CHECK(circuit_allow(b, NULL, &t, NULL), "the new half-open state's first probe");
    bool second = circuit_allow(b, NULL, &u, &rej);
    circuit_stats st;
    circuit_get_stats(b, &st);
    RACE_CHECK(st.state == CIRCUIT_HALF_OPEN && (st.generation & tags_TAG_MASK) == ((g_old + !alias) & tags_TAG_MASK),
          "half-open at generation %" PRIu64 ", the old one %" PRIu64, st.generation, g_old);
    RACE_CHECK(!second && rej.state == CIRCUIT_HALF_OPEN,
          "%s: a second allow at the same instant was %s (S4, probes = 1: rejected)",
          alias ? "same tag as an older half-open state" : "control",
          second ? "admitted" : "rejected");
    RACE_CHECK(st.counts.timed_out == 0 && st.probes_in_flight == 1,
          "%s: timed_out %" PRId64 ", probes in flight %" PRId64 " (P1: 0 and 1)",
          alias ? "same tag" : "control", st.counts.timed_out, st.probes_in_flight);
    if (second)
        circuit_release(&u);
    circuit_test_clock_advance(999); /* one ns before its due time */
    RACE_CHECK(circuit_done(&t, 0), "the probe's success counts");
    circuit_free(b);
}

/* 3. S4 / P1 with two probes: slot 1's record left busy too. The new
 * state must admit exactly two probes (slot 1 is not the old one's) and
 * count no timeout of the old probes. */
static void two_slots(bool alias)
{
    circuit_breaker *b = tags_build(2, 2, 1000);
    circuit_test_clock_set(1000);
    tags_call(b, 1); /* trips: open */
    circuit_test_clock_advance(10);
    circuit_ticket t[3];
    RACE_CHECK(circuit_allow(b, NULL, &t[0], NULL) && circuit_allow(b, NULL, &t[1], NULL),
          "the first half-open state's two probes");
    uint64_t g_old = tags_generation(b);
    RACE_CHECK(circuit_isolate(b, NULL) == 0, "isolate");
    circuit_test_clock_advance(2000);
    circuit_release(&t[0]);
    circuit_release(&t[1]); /* after their due time: both slots stay busy */
    skip_to_alias(b, g_old, alias);
    RACE_CHECK(circuit_reset(b, NULL) == 0, "reset");
    tags_call(b, 1); /* trips */
    circuit_test_clock_advance(10);
    bool a0 = circuit_allow(b, NULL, &t[0], NULL);
    bool a1 = circuit_allow(b, NULL, &t[1], NULL);
    circuit_rejection rej = {CIRCUIT_CLOSED, -1};
    bool a2 = circuit_allow(b, NULL, &t[2], &rej);
    circuit_stats st;
    circuit_get_stats(b, &st);
    RACE_CHECK(a0 && a1 && !a2 && rej.state == CIRCUIT_HALF_OPEN,
          "%s: probes = 2 admitted %d %d %d (S4: two, then rejected)",
          alias ? "same tag as an older half-open state" : "control", a0, a1, a2);
    RACE_CHECK(st.counts.timed_out == 0 && st.probes_in_flight == 2,
          "%s: timed_out %" PRId64 ", probes in flight %" PRId64 " (P1: 0 and 2)",
          alias ? "same tag" : "control", st.counts.timed_out, st.probes_in_flight);
    circuit_test_clock_advance(500);
    circuit_get_stats(b, &st);
    RACE_CHECK(st.counts.timed_out == 0, "no timeout before the probes' due time (P1)");
    for (int i = 0; i < 3; i++)
        if ((i == 0 && a0) || (i == 1 && a1) || (i == 2 && a2))
            circuit_release(&t[i]);
    circuit_free(b);
}

/* 4. S4 / P1: the older state's slot-0 probe finished normally, so slot
 * 0's record is {its tag, not busy}. The new state's reservation must make
 * it busy again (left free, the next allow took slot 0 again, P + 1 probes
 * in flight and the first probe's timeout lost). Kept from the bitmap's
 * time (0.4 before finding F5), when bit 0 was the slot. */
static void slot0_bit_clear(bool alias, int probes)
{
    circuit_breaker *b = tags_build(2, probes, 1000);
    circuit_test_clock_set(1000);
    tags_call(b, 1); /* trips: open */
    circuit_test_clock_advance(10);
    tags_call(b, 0); /* half-open: a probe's success frees slot 0, kept probing */
    uint64_t g_old = tags_generation(b);
    RACE_CHECK(circuit_isolate(b, NULL) == 0, "isolate");
    skip_to_alias(b, g_old, alias);
    RACE_CHECK(circuit_reset(b, NULL) == 0, "reset");
    tags_call(b, 1); /* trips */
    circuit_test_clock_advance(10);
    circuit_ticket t[72];
    int admitted = 0;
    for (int i = 0; i < probes + 1; i++)
        if (circuit_allow(b, NULL, &t[admitted], NULL))
            admitted++;
    circuit_stats st;
    circuit_get_stats(b, &st);
    RACE_CHECK(admitted == probes && st.probes_in_flight == probes,
          "%s, probes = %d: %d admitted at one instant, %" PRId64 " in flight (S4: %d)",
          alias ? "same tag as an older half-open state" : "control", probes, admitted,
          st.probes_in_flight, probes);
    circuit_test_clock_advance(1000); /* every probe's due time */
    circuit_ticket u;
    bool more = circuit_allow(b, NULL, &u, NULL);
    circuit_get_stats(b, &st);
    RACE_CHECK(st.counts.timed_out == admitted,
          "%s, probes = %d: timed_out %" PRId64 " at the due time (P1: %d)",
          alias ? "same tag" : "control", probes, st.counts.timed_out, admitted);
    if (more)
        circuit_release(&u);
    for (int i = 0; i < admitted; i++)
        circuit_release(&t[i]);
    circuit_free(b);
}

static int tags_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int alias = 0; alias < 2; alias++) {
        window_record(alias);
        probe_slot(alias);
        two_slots(alias);
        static const int ps[] = {1, 2, 33, 70};
        for (int i = 0; i < 4; i++)
            slot0_bit_clear(alias, ps[i]);
    }
    printf("C1: a half-open window never reads an older state's failure record as its own\n");
    printf("P1/S4: a half-open state's first probe slot is never an older state's\n");
    printf("%ld failed checks\n", race_failures());
    return race_failures() ? 1 : 0;
}

static const race_case cases[] = {
    {"timeouts", timeouts_main, "[rounds [seed]]"},
    {"raised_due", raised_due_main, ""},
    {"raised_due_claimed", raised_due_claimed_main, ""},
    {"halfopen_tags", tags_main, ""},
};

int main(int argc, char **argv)
{
    return race_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
