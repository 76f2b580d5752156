/*
 * circuit_get_stats raced (M1), TSan-safe cases:
 *
 *   readers   readers racing operator transitions (isolate/reset) and
 *             traffic: every field of every snapshot a value it held
 *   bounded   a read against two writers that count results as fast as
 *             they can finishes in a bounded number of passes, and is a
 *             consistent snapshot
 *
 * SPDX-License-Identifier: MIT
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "race.h"

/* ==== readers: snapshots racing operator transitions and traffic ========== */

/*
 * M1 race check: circuit_get_stats readers racing operator transitions
 * (isolate/reset) and traffic (allow + done, successes and failures). Each
 * field of every snapshot must be a value it held during the read:
 *
 *   - (state, generation) a pair the breaker held: the trip policy never
 *     trips, so every transition is the operator's, alternating isolate
 *     (odd generations, isolated) and reset (even generations, closed);
 *   - generation between the operator transitions finished before the read
 *     and those begun by its end, and never lower than the reader's last;
 *   - transitions the same (it is the generation here), except that the
 *     total is counted by the thread that made the transition's CAS, after
 *     it: with the 0.3 counting an isolate from closed may be completed by a
 *     traffic thread (L6's intent), and the operator's call can return
 *     before that thread has added its one; so the lower bound allows one
 *     uncounted transition per thread that can make one (TRAFFIC +
 *     OPERATORS). A lost count still fails the quiescent check at the end;
 *   - every total between the traffic's own account before and after the
 *     read (it counts each answer after the call returns, so "after" adds
 *     one call in flight per traffic thread), never decreasing per reader;
 *   - counts those of a state: zero while isolated, at most `window`
 *     results while closed, one run at a time, no timeout, no probe.
 *
 * A plain program (no Criterion, which cannot start under TSan), so it also
 * runs in the TSan build. The threads outnumber the CPUs on the CI machines,
 * so readers are preempted at every point of the read.
 *
 *   race_stats readers [reads [window [fail_one_in [closed_us]]]]   exit 0: pass, 1: broken
 */

enum { PROBES = 2, READERS = 2, TRAFFIC = 2, OPERATORS = 1 };
static int WINDOW = 8;      /* argv[2] */
static uint64_t fail_one_in = 4; /* argv[3]: a failure one result in N */
static long closed_us = 0;       /* argv[4]: each closed state lasts about this long */
static int readers_in_traffic;   /* set with argv[4]: traffic threads read stats too */

typedef struct account {
    uint64_t admitted, rejected, successes, failures, late;
} account;

static circuit_breaker *readers_b;
static account acct;               /* what the traffic threads were told */
static uint64_t op_begun, op_done; /* operator transitions begun / finished */
static int readers_stop;
static int64_t readers_violations;
#if RACE_SLOW
static long readers_reads = 300000; /* TSan: about 10 times slower */
#else
static long readers_reads = 2000000;
#endif

static void readers_violation(const char *fmt, uint64_t a, uint64_t b_, uint64_t c)
{
    if (RACE_ADD(&readers_violations, 1) <= 10) {
        fprintf(stderr, "race_stats readers: ");
        fprintf(stderr, fmt, (unsigned long long)a, (unsigned long long)b_,
                (unsigned long long)c);
        fputc('\n', stderr);
    }
}

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void readers_check_counts(const circuit_stats *sp)
{
    const circuit_stats s = *sp;
    const circuit_counts *c = &s.counts;
    if (s.state == CIRCUIT_ISOLATED &&
        (c->successes || c->failures || c->consecutive_successes ||
         c->consecutive_failures))
        readers_violation("isolated (generation %llu) with counts %llu/%llu", s.generation,
                  (uint64_t)c->successes, (uint64_t)c->failures);
    if (c->successes < 0 || c->failures < 0 || c->successes + c->failures > WINDOW ||
        (c->consecutive_successes && c->consecutive_failures) ||
        c->consecutive_successes < 0 || c->consecutive_failures < 0)
        readers_violation("counts successes %llu failures %llu of generation %llu",
                  (uint64_t)c->successes, (uint64_t)c->failures, s.generation);
    /* C1/C2 together: the newest min(run, results) results are of the
     * run's kind (a snapshot of counts the window never held, such as
     * successes 0, failures 2, a run of 1 success, fails here) */
    int64_t held = c->successes + c->failures;
    if (c->successes < (c->consecutive_successes < held ? c->consecutive_successes : held) ||
        c->failures < (c->consecutive_failures < held ? c->consecutive_failures : held))
        readers_violation("counts never held together: successes %llu failures %llu, run %llu",
                  (uint64_t)c->successes, (uint64_t)c->failures,
                  (uint64_t)(c->consecutive_successes + c->consecutive_failures));
}

static void *traffic(void *arg)
{
    uint64_t rng = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15u + 1;
    while (!RACE_LOAD(&readers_stop)) {
        if (readers_in_traffic) { /* the traffic threads read too */
            circuit_stats s;
            circuit_get_stats(readers_b, &s);
            readers_check_counts(&s);
        }
        circuit_ticket t;
        if (!circuit_allow(readers_b, NULL, &t, NULL)) {
            RACE_ADD(&acct.rejected, 1);
            continue;
        }
        RACE_ADD(&acct.admitted, 1);
        bool fail = xorshift(&rng) % fail_one_in == 0;
        if (!circuit_done(&t, fail ? 1 : 0))
            RACE_ADD(&acct.late, 1);
        else
            RACE_ADD(fail ? &acct.failures : &acct.successes, 1);
    }
    return NULL;
}

static void *operator(void *arg)
{
    (void)arg;
    while (!RACE_LOAD(&readers_stop)) {
        /* odd generations are isolated, even ones closed */
        bool isolate = RACE_LOAD(&op_done) % 2 == 0;
        if (isolate && closed_us > 0)
            nanosleep(&(struct timespec){0, closed_us * 1000}, NULL); /* many exact points */
        RACE_ADD(&op_begun, 1);
        if ((isolate ? circuit_isolate(readers_b, NULL) : circuit_reset(readers_b, NULL)) != 0) {
            readers_violation("operator call refused at transition %llu%.0llu%.0llu", RACE_LOAD(&op_done), 0,
                      0);
            break;
        }
        RACE_ADD(&op_done, 1);
    }
    return NULL;
}

static void check_total(const char *name, uint64_t got, uint64_t lo, uint64_t hi,
                        uint64_t *last)
{
    if (got < lo || got > hi) {
        fprintf(stderr, "race_stats readers: %s ", name);
        readers_violation("= %llu, outside [%llu, %llu] of the account", got, lo, hi);
    }
    if (got < *last) {
        fprintf(stderr, "race_stats readers: %s ", name);
        readers_violation("went down: %llu after %llu%.0llu", got, *last, 0);
    }
    *last = got;
}

static void *reader(void *arg)
{
    (void)arg;
    uint64_t last_gen = 0;
    account last = {0, 0, 0, 0, 0};
    for (long i = 0; i < readers_reads; i++) {
        account lo = {RACE_LOAD(&acct.admitted), RACE_LOAD(&acct.rejected), RACE_LOAD(&acct.successes),
                      RACE_LOAD(&acct.failures), RACE_LOAD(&acct.late)};
        uint64_t g_lo = RACE_LOAD(&op_done);
        circuit_stats s;
        circuit_get_stats(readers_b, &s);
        uint64_t g_hi = RACE_LOAD(&op_begun);
        account hi = {RACE_LOAD(&acct.admitted) + TRAFFIC, RACE_LOAD(&acct.rejected) + TRAFFIC,
                      RACE_LOAD(&acct.successes) + TRAFFIC, RACE_LOAD(&acct.failures) + TRAFFIC,
                      RACE_LOAD(&acct.late) + TRAFFIC};

        if (s.generation < g_lo || s.generation > g_hi)
            readers_violation("generation %llu outside [%llu, %llu]", s.generation, g_lo, g_hi);
        if (s.generation < last_gen)
            readers_violation("generation went down: %llu after %llu%.0llu", s.generation, last_gen, 0);
        last_gen = s.generation;
        uint64_t t_lo = g_lo > TRAFFIC + OPERATORS ? g_lo - (TRAFFIC + OPERATORS) : 0;
        if (s.transitions < t_lo || s.transitions > g_hi)
            readers_violation("transitions %llu outside [%llu, %llu]", s.transitions, t_lo, g_hi);
        circuit_state want = s.generation % 2 ? CIRCUIT_ISOLATED : CIRCUIT_CLOSED;
        if (s.state != want)
            readers_violation("state %llu with generation %llu (never held together)%.0llu",
                      (uint64_t)s.state, s.generation, 0);
        readers_check_counts(&s);
        if (s.counts.timed_out || s.probes_in_flight || s.retry_after_ns || s.timed_out)
            readers_violation("a probe field set without probes: %llu %llu %llu",
                      (uint64_t)s.counts.timed_out, (uint64_t)s.probes_in_flight, s.timed_out);
        if (s.ignored || s.released)
            readers_violation("ignored %llu released %llu never happened%.0llu", s.ignored, s.released,
                      0);
        check_total("admitted", s.admitted, lo.admitted, hi.admitted, &last.admitted);
        check_total("rejected", s.rejected, lo.rejected, hi.rejected, &last.rejected);
        check_total("successes", s.successes, lo.successes, hi.successes, &last.successes);
        check_total("failures", s.failures, lo.failures, hi.failures, &last.failures);
        check_total("late", s.late, lo.late, hi.late, &last.late);
    }
    return NULL;
}

static int readers_main(int argc, char **argv)
{
    if (argc > 1 && strtol(argv[1], NULL, 10) > 0)
        readers_reads = strtol(argv[1], NULL, 10);
    if (argc > 2)
        WINDOW = (int)strtol(argv[2], NULL, 10);
    if (argc > 3)
        fail_one_in = (uint64_t)strtoull(argv[3], NULL, 10);
    if (argc > 4)
        closed_us = strtol(argv[4], NULL, 10), readers_in_traffic = 1;
    if (WINDOW < 1 || fail_one_in < 1 || closed_us < 0) {
        fprintf(stderr, "usage: race_stats readers [reads [window [fail_one_in [closed_us]]]]\n");
        return 2;
    }
    circuit_spec spec = {
        .config = {.window = WINDOW, .probes = PROBES, .open_for_ns = 1000,
                   .probe_timeout_ns = 1000},
        .policy = {.trip = race_never_trip, .probe = race_keep_probing},
        .classify = race_classify,
        .observe = race_observe_nothing,
    };
    char err[256];
    if (circuit_new(&readers_b, &spec, err, sizeof err) != 0) {
        fprintf(stderr, "race_stats readers: circuit_new: %s\n", err);
        return 1;
    }
    pthread_t th[READERS + TRAFFIC + OPERATORS];
    int n = 0;
    for (int i = 0; i < TRAFFIC; i++)
        pthread_create(&th[n++], NULL, traffic, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < OPERATORS; i++)
        pthread_create(&th[n++], NULL, operator, NULL);
    pthread_t rd[READERS];
    for (int i = 0; i < READERS; i++)
        pthread_create(&rd[i], NULL, reader, NULL);
    for (int i = 0; i < READERS; i++)
        pthread_join(rd[i], NULL);
    RACE_STORE(&readers_stop, 1);
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);

    /* quiescent: every field exact */
    circuit_stats s;
    circuit_get_stats(readers_b, &s);
    if (s.generation != RACE_LOAD(&op_done) || s.transitions != RACE_LOAD(&op_done))
        readers_violation("quiescent generation %llu transitions %llu, made %llu", s.generation,
                  s.transitions, RACE_LOAD(&op_done));
    if (s.admitted != acct.admitted || s.rejected != acct.rejected ||
        s.successes != acct.successes || s.failures != acct.failures || s.late != acct.late)
        readers_violation("quiescent totals differ from the account (admitted %llu vs %llu)%.0llu",
                  s.admitted, acct.admitted, 0);
    printf("race_stats readers: window %d, a failure 1 in %llu, %ld reads x %d readers, "
           "%llu operator transitions, %llu results: %s\n",
           WINDOW, (unsigned long long)fail_one_in, readers_reads, READERS, (unsigned long long)op_done,
           (unsigned long long)(acct.successes + acct.failures + acct.late),
           readers_violations ? "FAILED" : "ok");
    circuit_free(readers_b);
    return readers_violations ? 1 : 0;
}

/* ==== bounded: a read against a storm of writers ========================== */

/*
 * M1, bounded read: circuit_get_stats against two writers that count
 * results as fast as they can must finish in a bounded number of passes
 * over the per-CPU lines, and still report a consistent snapshot. Counted
 * through the test build (circuit_test_stats_passes), never timed.
 *
 *   storm "failures": window 16, every result a failure, the trip policy
 *       never trips: every counted result changes the state word;
 *   storm "flapping": window 1, successes and failures alternating: the
 *       breaker enters and leaves the per-CPU fast mode (a fold) at every
 *       other result.
 *
 * Each snapshot: the totals within the writers' own account (before the
 * read, and after it plus one call in flight per writer) and never
 * decreasing; the counts those of a closed window; generation 0 (nothing
 * trips). A plain program (no Criterion), so it also runs under TSan.
 *
 *   race_stats bounded [reads]     exit 0: pass, 1: broken
 */

#if RACE_SLOW
static long bounded_reads = 50000;
#else
static long bounded_reads = 300000;
#endif

enum { WRITERS = 2, MAX_PASSES = 1 };

typedef struct storm {
    const char *name;
    int window;
    bool alternate; /* successes and failures in turn, else failures only */
} storm;

static circuit_breaker *bounded_b;
static const storm *bounded_cur;
static uint64_t acct_admitted, acct_successes, acct_failures;
static int bounded_stop;
static int64_t bounded_violations;

static void bounded_violation(const char *what, unsigned long long x, unsigned long long lo,
                      unsigned long long hi)
{
    if (RACE_ADD(&bounded_violations, 1) <= 10)
        fprintf(stderr, "race_stats bounded (%s): %s %llu, want [%llu, %llu]\n", bounded_cur->name,
                what, x, lo, hi);
}

static void *writer(void *arg)
{
    int turn = (int)(uintptr_t)arg;
    while (!RACE_LOAD(&bounded_stop)) {
        circuit_ticket t;
        if (!circuit_allow(bounded_b, NULL, &t, NULL)) {
            bounded_violation("a closed breaker rejected a call", 0, 0, 0);
            return NULL;
        }
        RACE_ADD(&acct_admitted, 1);
        bool fail = !bounded_cur->alternate || (turn++ & 1);
        if (!circuit_done(&t, fail ? 1 : 0))
            bounded_violation("a result was late in the only generation", 0, 0, 0);
        RACE_ADD(fail ? &acct_failures : &acct_successes, 1);
    }
    return NULL;
}

static void within(const char *what, uint64_t x, uint64_t lo, uint64_t hi, uint64_t *last)
{
    if (x < lo || x > hi)
        bounded_violation(what, x, lo, hi);
    if (x < *last)
        bounded_violation(what, x, *last, UINT64_MAX);
    *last = x;
}

static int bounded_run(const storm *s)
{
    bounded_cur = s;
    RACE_STORE(&bounded_stop, 0);
    acct_admitted = acct_successes = acct_failures = 0;
    circuit_spec spec = {
        .config = {.window = s->window, .probes = 1, .open_for_ns = 1000,
                   .probe_timeout_ns = 1000},
        .policy = {.trip = race_never_trip, .probe = race_keep_probing},
        .classify = race_classify,
        .observe = race_observe_nothing,
    };
    char err[256];
    if (circuit_new(&bounded_b, &spec, err, sizeof err) != 0) {
        fprintf(stderr, "race_stats bounded: circuit_new: %s\n", err);
        return 1;
    }
    pthread_t th[WRITERS];
    for (int i = 0; i < WRITERS; i++)
        pthread_create(&th[i], NULL, writer, (void *)(uintptr_t)i);
    /* wait until both writers are counting */
    while (RACE_LOAD(&acct_admitted) < 1000)
        ;

    uint64_t most = 0, total = 0;
    uint64_t last_adm = 0, last_s = 0, last_f = 0, last_cf = 0;
    for (long i = 0; i < bounded_reads; i++) {
        uint64_t adm0 = RACE_LOAD(&acct_admitted), s0 = RACE_LOAD(&acct_successes),
                 f0 = RACE_LOAD(&acct_failures);
        uint64_t p0 = circuit_test_stats_passes();
        circuit_stats st;
        circuit_get_stats(bounded_b, &st);
        uint64_t passes = circuit_test_stats_passes() - p0; /* the only reader */
        uint64_t adm1 = RACE_LOAD(&acct_admitted) + WRITERS, s1 = RACE_LOAD(&acct_successes) + WRITERS,
                 f1 = RACE_LOAD(&acct_failures) + WRITERS;
        total += passes;
        if (passes > most)
            most = passes;
        if (passes > MAX_PASSES)
            bounded_violation("passes over the per-CPU lines in one read:", passes, 1, MAX_PASSES);
        within("admitted", st.admitted, adm0, adm1, &last_adm);
        within("successes", st.successes, s0, s1, &last_s);
        within("failures", st.failures, f0, f1, &last_f);
        const circuit_counts *c = &st.counts;
        if (st.state != CIRCUIT_CLOSED || st.generation != 0 || st.transitions != 0)
            bounded_violation("state/generation/transitions", (unsigned long long)st.state,
                      st.generation, st.transitions);
        if (c->successes < 0 || c->failures < 0 || c->successes + c->failures > s->window ||
            (c->consecutive_successes && c->consecutive_failures) || c->timed_out)
            bounded_violation("counts (successes, failures)", (unsigned long long)c->successes,
                      (unsigned long long)c->failures, (unsigned long long)s->window);
        if (!s->alternate) {
            /* failures only: the run is every failure counted (never above
             * CIRCUIT_RUN_MAX here), the window full of failures */
            within("consecutive_failures", (uint64_t)c->consecutive_failures, f0, f1, &last_cf);
            if (c->successes != 0 ||
                c->failures != (c->consecutive_failures < s->window ? c->consecutive_failures
                                                                    : s->window))
                bounded_violation("window of failures", (unsigned long long)c->failures,
                          (unsigned long long)c->consecutive_failures,
                          (unsigned long long)s->window);
        } else if (c->consecutive_successes > 1 || c->consecutive_failures > 1) {
            /* two writers alternating each: a run of at most WRITERS + 1 */
            if (c->consecutive_successes > WRITERS + 1 || c->consecutive_failures > WRITERS + 1)
                bounded_violation("run length", (unsigned long long)(c->consecutive_successes +
                                                              c->consecutive_failures),
                          0, WRITERS + 1);
        }
    }
    RACE_STORE(&bounded_stop, 1);
    for (int i = 0; i < WRITERS; i++)
        pthread_join(th[i], NULL);
    circuit_stats st;
    circuit_get_stats(bounded_b, &st);
    if (st.successes != acct_successes || st.failures != acct_failures ||
        st.admitted != acct_admitted)
        bounded_violation("quiescent totals (successes) differ from the account", st.successes,
                  acct_successes, acct_successes);
    printf("race_stats bounded (%s): %ld reads against %d writers (%llu results): %llu "
           "passes, at most %llu in one read\n",
           s->name, bounded_reads, WRITERS, (unsigned long long)(acct_successes + acct_failures),
           (unsigned long long)total, (unsigned long long)most);
    circuit_free(bounded_b);
    return 0;
}

static int bounded_main(int argc, char **argv)
{
    if (argc > 1)
        bounded_reads = strtol(argv[1], NULL, 10);
    static const storm storms[] = {{"failures", 16, false}, {"flapping", 1, true}};
    for (size_t i = 0; i < sizeof storms / sizeof storms[0]; i++)
        if (bounded_run(&storms[i]))
            return 1;
    printf("race_stats bounded: %s\n", bounded_violations ? "FAILED" : "ok");
    return bounded_violations ? 1 : 0;
}

static const race_case cases[] = {
    {"readers", readers_main, "[reads [window [fail_one_in [closed_us]]]]"},
    {"bounded", bounded_main, "[reads]"},
};

int main(int argc, char **argv)
{
    return race_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
