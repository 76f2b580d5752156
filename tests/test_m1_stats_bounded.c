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
 *   test_m1_stats_bounded [reads]     exit 0: pass, 1: broken
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "circuit.h"
#include "testing.h"

#define LOAD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define ADD(p, v) __atomic_add_fetch((p), (v), __ATOMIC_SEQ_CST)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)

#if defined(__SANITIZE_THREAD__)
#define SLOW_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SLOW_BUILD 1
#endif
#endif
#ifdef SLOW_BUILD
static long reads = 50000;
#else
static long reads = 300000;
#endif

enum { WRITERS = 2, MAX_PASSES = 1 };

typedef struct storm {
    const char *name;
    int window;
    bool alternate; /* successes and failures in turn, else failures only */
} storm;

static circuit_breaker *b;
static const storm *cur;
static uint64_t acct_admitted, acct_successes, acct_failures;
static int stop;
static int64_t violations;

static void violation(const char *what, unsigned long long x, unsigned long long lo,
                      unsigned long long hi)
{
    if (ADD(&violations, 1) <= 10)
        fprintf(stderr, "test_m1_stats_bounded (%s): %s %llu, want [%llu, %llu]\n", cur->name,
                what, x, lo, hi);
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

static void *writer(void *arg)
{
    int turn = (int)(uintptr_t)arg;
    while (!LOAD(&stop)) {
        circuit_ticket t;
        if (!circuit_allow(b, NULL, &t, NULL)) {
            violation("a closed breaker rejected a call", 0, 0, 0);
            return NULL;
        }
        ADD(&acct_admitted, 1);
        bool fail = !cur->alternate || (turn++ & 1);
        if (!circuit_done(&t, fail ? 1 : 0))
            violation("a result was late in the only generation", 0, 0, 0);
        ADD(fail ? &acct_failures : &acct_successes, 1);
    }
    return NULL;
}

static void within(const char *what, uint64_t x, uint64_t lo, uint64_t hi, uint64_t *last)
{
    if (x < lo || x > hi)
        violation(what, x, lo, hi);
    if (x < *last)
        violation(what, x, *last, UINT64_MAX);
    *last = x;
}

static int run(const storm *s)
{
    cur = s;
    STORE(&stop, 0);
    acct_admitted = acct_successes = acct_failures = 0;
    circuit_spec spec = {
        .config = {.window = s->window, .probes = 1, .open_for_ns = 1000,
                   .probe_timeout_ns = 1000},
        .policy = {.trip = never_trip, .probe = keep_probing},
        .classify = classify,
        .observe = observe,
    };
    char err[256];
    if (circuit_new(&b, &spec, err, sizeof err) != 0) {
        fprintf(stderr, "test_m1_stats_bounded: circuit_new: %s\n", err);
        return 1;
    }
    pthread_t th[WRITERS];
    for (int i = 0; i < WRITERS; i++)
        pthread_create(&th[i], NULL, writer, (void *)(uintptr_t)i);
    /* wait until both writers are counting */
    while (LOAD(&acct_admitted) < 1000)
        ;

    uint64_t most = 0, total = 0;
    uint64_t last_adm = 0, last_s = 0, last_f = 0, last_cf = 0;
    for (long i = 0; i < reads; i++) {
        uint64_t adm0 = LOAD(&acct_admitted), s0 = LOAD(&acct_successes),
                 f0 = LOAD(&acct_failures);
        uint64_t p0 = circuit_test_stats_passes();
        circuit_stats st;
        circuit_get_stats(b, &st);
        uint64_t passes = circuit_test_stats_passes() - p0; /* the only reader */
        uint64_t adm1 = LOAD(&acct_admitted) + WRITERS, s1 = LOAD(&acct_successes) + WRITERS,
                 f1 = LOAD(&acct_failures) + WRITERS;
        total += passes;
        if (passes > most)
            most = passes;
        if (passes > MAX_PASSES)
            violation("passes over the per-CPU lines in one read:", passes, 1, MAX_PASSES);
        within("admitted", st.admitted, adm0, adm1, &last_adm);
        within("successes", st.successes, s0, s1, &last_s);
        within("failures", st.failures, f0, f1, &last_f);
        const circuit_counts *c = &st.counts;
        if (st.state != CIRCUIT_CLOSED || st.generation != 0 || st.transitions != 0)
            violation("state/generation/transitions", (unsigned long long)st.state,
                      st.generation, st.transitions);
        if (c->successes < 0 || c->failures < 0 || c->successes + c->failures > s->window ||
            (c->consecutive_successes && c->consecutive_failures) || c->timed_out)
            violation("counts (successes, failures)", (unsigned long long)c->successes,
                      (unsigned long long)c->failures, (unsigned long long)s->window);
        if (!s->alternate) {
            /* failures only: the run is every failure counted (never above
             * CIRCUIT_RUN_MAX here), the window full of failures */
            within("consecutive_failures", (uint64_t)c->consecutive_failures, f0, f1, &last_cf);
            if (c->successes != 0 ||
                c->failures != (c->consecutive_failures < s->window ? c->consecutive_failures
                                                                    : s->window))
                violation("window of failures", (unsigned long long)c->failures,
                          (unsigned long long)c->consecutive_failures,
                          (unsigned long long)s->window);
        } else if (c->consecutive_successes > 1 || c->consecutive_failures > 1) {
            /* two writers alternating each: a run of at most WRITERS + 1 */
            if (c->consecutive_successes > WRITERS + 1 || c->consecutive_failures > WRITERS + 1)
                violation("run length", (unsigned long long)(c->consecutive_successes +
                                                              c->consecutive_failures),
                          0, WRITERS + 1);
        }
    }
    STORE(&stop, 1);
    for (int i = 0; i < WRITERS; i++)
        pthread_join(th[i], NULL);
    circuit_stats st;
    circuit_get_stats(b, &st);
    if (st.successes != acct_successes || st.failures != acct_failures ||
        st.admitted != acct_admitted)
        violation("quiescent totals (successes) differ from the account", st.successes,
                  acct_successes, acct_successes);
    printf("test_m1_stats_bounded (%s): %ld reads against %d writers (%llu results): %llu "
           "passes, at most %llu in one read\n",
           s->name, reads, WRITERS, (unsigned long long)(acct_successes + acct_failures),
           (unsigned long long)total, (unsigned long long)most);
    circuit_free(b);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        reads = strtol(argv[1], NULL, 10);
    static const storm storms[] = {{"failures", 16, false}, {"flapping", 1, true}};
    for (size_t i = 0; i < sizeof storms / sizeof storms[0]; i++)
        if (run(&storms[i]))
            return 1;
    printf("test_m1_stats_bounded: %s\n", violations ? "FAILED" : "ok");
    return violations ? 1 : 0;
}
