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
 *   test_m1_stats_race [reads-per-reader [seed]]   exit 0: pass, 1: broken
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "circuit.h"
#include "testing.h"

#define LOAD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define ADD(p, v) __atomic_add_fetch((p), (v), __ATOMIC_SEQ_CST)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)

enum { PROBES = 2, READERS = 2, TRAFFIC = 2, OPERATORS = 1 };
static int WINDOW = 8;      /* argv[2] */
static uint64_t fail_one_in = 4; /* argv[3]: a failure one result in N */
static long closed_us = 0;       /* argv[4]: each closed state lasts about this long */
static int readers_in_traffic;   /* set with argv[4]: traffic threads read stats too */

typedef struct account {
    uint64_t admitted, rejected, successes, failures, late;
} account;

static circuit_breaker *b;
static account acct;               /* what the traffic threads were told */
static uint64_t op_begun, op_done; /* operator transitions begun / finished */
static int stop;
static int64_t violations;
#if defined(__SANITIZE_THREAD__)
#define SLOW_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SLOW_BUILD 1
#endif
#endif
#ifdef SLOW_BUILD
static long reads = 300000; /* TSan: about 10 times slower */
#else
static long reads = 2000000;
#endif

static void violation(const char *fmt, uint64_t a, uint64_t b_, uint64_t c)
{
    if (ADD(&violations, 1) <= 10) {
        fprintf(stderr, "test_m1_stats_race: ");
        fprintf(stderr, fmt, (unsigned long long)a, (unsigned long long)b_,
                (unsigned long long)c);
        fputc('\n', stderr);
    }
}

static bool never_trip(void *arg, const circuit_counts *c)
{
    (void)arg;
    (void)c;
    return false;
}
static circuit_state keep_probing(void *arg, const circuit_counts *c)
{
    (void)arg;
    (void)c;
    return CIRCUIT_HALF_OPEN;
}
static circuit_outcome classify(void *arg, void *ctx, int result)
{
    (void)arg;
    (void)ctx;
    return result ? CIRCUIT_FAILURE : CIRCUIT_SUCCESS;
}
static void observe(void *arg, void *ctx, const circuit_transition *t)
{
    (void)arg;
    (void)ctx;
    (void)t;
}

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void check_counts(const circuit_stats *sp)
{
    const circuit_stats s = *sp;
    const circuit_counts *c = &s.counts;
    if (s.state == CIRCUIT_ISOLATED &&
        (c->successes || c->failures || c->consecutive_successes ||
         c->consecutive_failures))
        violation("isolated (generation %llu) with counts %llu/%llu", s.generation,
                  (uint64_t)c->successes, (uint64_t)c->failures);
    if (c->successes < 0 || c->failures < 0 || c->successes + c->failures > WINDOW ||
        (c->consecutive_successes && c->consecutive_failures) ||
        c->consecutive_successes < 0 || c->consecutive_failures < 0)
        violation("counts successes %llu failures %llu of generation %llu",
                  (uint64_t)c->successes, (uint64_t)c->failures, s.generation);
    /* C1/C2 together: the newest min(run, results) results are of the
     * run's kind (a snapshot of counts the window never held, such as
     * successes 0, failures 2, a run of 1 success, fails here) */
    int64_t held = c->successes + c->failures;
    if (c->successes < (c->consecutive_successes < held ? c->consecutive_successes : held) ||
        c->failures < (c->consecutive_failures < held ? c->consecutive_failures : held))
        violation("counts never held together: successes %llu failures %llu, run %llu",
                  (uint64_t)c->successes, (uint64_t)c->failures,
                  (uint64_t)(c->consecutive_successes + c->consecutive_failures));
}

static void *traffic(void *arg)
{
    uint64_t rng = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15u + 1;
    while (!LOAD(&stop)) {
        if (readers_in_traffic) { /* the traffic threads read too */
            circuit_stats s;
            circuit_get_stats(b, &s);
            check_counts(&s);
        }
        circuit_ticket t;
        if (!circuit_allow(b, NULL, &t, NULL)) {
            ADD(&acct.rejected, 1);
            continue;
        }
        ADD(&acct.admitted, 1);
        bool fail = xorshift(&rng) % fail_one_in == 0;
        if (!circuit_done(&t, fail ? 1 : 0))
            ADD(&acct.late, 1);
        else
            ADD(fail ? &acct.failures : &acct.successes, 1);
    }
    return NULL;
}

static void *operator(void *arg)
{
    (void)arg;
    while (!LOAD(&stop)) {
        /* odd generations are isolated, even ones closed */
        bool isolate = LOAD(&op_done) % 2 == 0;
        if (isolate && closed_us > 0)
            nanosleep(&(struct timespec){0, closed_us * 1000}, NULL); /* many exact points */
        ADD(&op_begun, 1);
        if ((isolate ? circuit_isolate(b, NULL) : circuit_reset(b, NULL)) != 0) {
            violation("operator call refused at transition %llu%.0llu%.0llu", LOAD(&op_done), 0,
                      0);
            break;
        }
        ADD(&op_done, 1);
    }
    return NULL;
}

static void check_total(const char *name, uint64_t got, uint64_t lo, uint64_t hi,
                        uint64_t *last)
{
    if (got < lo || got > hi) {
        fprintf(stderr, "test_m1_stats_race: %s ", name);
        violation("= %llu, outside [%llu, %llu] of the account", got, lo, hi);
    }
    if (got < *last) {
        fprintf(stderr, "test_m1_stats_race: %s ", name);
        violation("went down: %llu after %llu%.0llu", got, *last, 0);
    }
    *last = got;
}

static void *reader(void *arg)
{
    (void)arg;
    uint64_t last_gen = 0;
    account last = {0, 0, 0, 0, 0};
    for (long i = 0; i < reads; i++) {
        account lo = {LOAD(&acct.admitted), LOAD(&acct.rejected), LOAD(&acct.successes),
                      LOAD(&acct.failures), LOAD(&acct.late)};
        uint64_t g_lo = LOAD(&op_done);
        circuit_stats s;
        circuit_get_stats(b, &s);
        uint64_t g_hi = LOAD(&op_begun);
        account hi = {LOAD(&acct.admitted) + TRAFFIC, LOAD(&acct.rejected) + TRAFFIC,
                      LOAD(&acct.successes) + TRAFFIC, LOAD(&acct.failures) + TRAFFIC,
                      LOAD(&acct.late) + TRAFFIC};

        if (s.generation < g_lo || s.generation > g_hi)
            violation("generation %llu outside [%llu, %llu]", s.generation, g_lo, g_hi);
        if (s.generation < last_gen)
            violation("generation went down: %llu after %llu%.0llu", s.generation, last_gen, 0);
        last_gen = s.generation;
        uint64_t t_lo = g_lo > TRAFFIC + OPERATORS ? g_lo - (TRAFFIC + OPERATORS) : 0;
        if (s.transitions < t_lo || s.transitions > g_hi)
            violation("transitions %llu outside [%llu, %llu]", s.transitions, t_lo, g_hi);
        circuit_state want = s.generation % 2 ? CIRCUIT_ISOLATED : CIRCUIT_CLOSED;
        if (s.state != want)
            violation("state %llu with generation %llu (never held together)%.0llu",
                      (uint64_t)s.state, s.generation, 0);
        check_counts(&s);
        if (s.counts.timed_out || s.probes_in_flight || s.retry_after_ns || s.timed_out)
            violation("a probe field set without probes: %llu %llu %llu",
                      (uint64_t)s.counts.timed_out, (uint64_t)s.probes_in_flight, s.timed_out);
        if (s.ignored || s.released)
            violation("ignored %llu released %llu never happened%.0llu", s.ignored, s.released,
                      0);
        check_total("admitted", s.admitted, lo.admitted, hi.admitted, &last.admitted);
        check_total("rejected", s.rejected, lo.rejected, hi.rejected, &last.rejected);
        check_total("successes", s.successes, lo.successes, hi.successes, &last.successes);
        check_total("failures", s.failures, lo.failures, hi.failures, &last.failures);
        check_total("late", s.late, lo.late, hi.late, &last.late);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strtol(argv[1], NULL, 10) > 0)
        reads = strtol(argv[1], NULL, 10);
    if (argc > 2)
        WINDOW = (int)strtol(argv[2], NULL, 10);
    if (argc > 3)
        fail_one_in = (uint64_t)strtoull(argv[3], NULL, 10);
    if (argc > 4)
        closed_us = strtol(argv[4], NULL, 10), readers_in_traffic = 1;
    if (WINDOW < 1 || fail_one_in < 1 || closed_us < 0) {
        fprintf(stderr, "usage: test_m1_stats_race [reads [window [fail_one_in [closed_us]]]]\n");
        return 2;
    }
    circuit_spec spec = {
        .config = {.window = WINDOW, .probes = PROBES, .open_for_ns = 1000,
                   .probe_timeout_ns = 1000},
        .policy = {.trip = never_trip, .probe = keep_probing},
        .classify = classify,
        .observe = observe,
    };
    char err[256];
    if (circuit_new(&b, &spec, err, sizeof err) != 0) {
        fprintf(stderr, "test_m1_stats_race: circuit_new: %s\n", err);
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
    STORE(&stop, 1);
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);

    /* quiescent: every field exact */
    circuit_stats s;
    circuit_get_stats(b, &s);
    if (s.generation != LOAD(&op_done) || s.transitions != LOAD(&op_done))
        violation("quiescent generation %llu transitions %llu, made %llu", s.generation,
                  s.transitions, LOAD(&op_done));
    if (s.admitted != acct.admitted || s.rejected != acct.rejected ||
        s.successes != acct.successes || s.failures != acct.failures || s.late != acct.late)
        violation("quiescent totals differ from the account (admitted %llu vs %llu)%.0llu",
                  s.admitted, acct.admitted, 0);
    printf("test_m1_stats_race: window %d, a failure 1 in %llu, %ld reads x %d readers, "
           "%llu operator transitions, %llu results: %s\n",
           WINDOW, (unsigned long long)fail_one_in, reads, READERS, (unsigned long long)op_done,
           (unsigned long long)(acct.successes + acct.failures + acct.late),
           violations ? "FAILED" : "ok");
    circuit_free(b);
    return violations ? 1 : 0;
}
