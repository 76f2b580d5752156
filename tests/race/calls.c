/*
 * Every public call of one breaker raced from several threads (L3), a
 * TSan-safe case:
 *
 *   every_call  allow, done, release, get_state and the test clock from
 *               several threads, the invariants checked as they run
 *
 * SPDX-License-Identifier: MIT
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "race.h"

/* ==== every_call: one breaker, every call, several threads ================ */

/*
 * L3 unit check: every public call of one breaker raced from several
 * threads, with the invariants checked as it runs. A plain program (no
 * Criterion, which cannot start under TSan): in the TSan build it is
 * ThreadSanitizer that judges it (a report makes it exit non-zero); in the
 * other builds the invariants do.
 *
 *   race_calls every_call [threads [iterations]]     exit 0: pass, 1: a rule broken
 */

enum { WINDOW = 8, PROBES = 3 };
static const int64_t open_for = 1000, probe_to = 700;

typedef struct world {
    circuit_breaker *b;
    /* observe's own state: only observe touches it, and observe never runs
     * concurrently with itself, so plain accesses must be race-free (TSan
     * checks that the library orders them) */
    uint64_t last_gen;
    circuit_state last_to;
    uint64_t delivered;
    int64_t inside;
    /* shared counters */
    int64_t violations;
    int64_t in_flight_probes;
    int iterations;
} world;

static world w;

static void violation(const char *what)
{
    fprintf(stderr, "race_calls every_call: %s\n", what);
    RACE_ADD(&w.violations, 1);
}

static void check_counts(const circuit_counts *c)
{
    if (c->successes < 0 || c->failures < 0 || c->successes + c->failures > WINDOW ||
        (c->consecutive_successes && c->consecutive_failures) || c->timed_out < 0)
    {
        fprintf(stderr, "counts s=%" PRId64 " f=%" PRId64 " cs=%" PRId64 " cf=%" PRId64
                        " to=%" PRId64 "\n",
                c->successes, c->failures, c->consecutive_successes, c->consecutive_failures,
                c->timed_out);
        violation("inconsistent counts given to a policy");
    }
}

static bool trip(void *arg, const circuit_counts *c)
{
    (void)arg;
    check_counts(c);
    if (c->timed_out != 0)
        violation("timed_out non-zero while closed");
    return c->consecutive_failures >= 3;
}

static circuit_state probe(void *arg, const circuit_counts *c)
{
    (void)arg;
    check_counts(c);
    if (c->consecutive_failures > 0 || c->timed_out >= 2)
        return CIRCUIT_OPEN;
    return c->consecutive_successes >= 2 ? CIRCUIT_CLOSED : CIRCUIT_HALF_OPEN;
}

static circuit_outcome classify(void *arg, void *call_ctx, int result)
{
    (void)arg;
    (void)call_ctx;
    return result == 0 ? CIRCUIT_SUCCESS : (result == 1 ? CIRCUIT_FAILURE : CIRCUIT_IGNORED);
}

static void observe(void *arg, void *call_ctx, const circuit_transition *t)
{
    (void)arg;
    (void)call_ctx;
    if (RACE_ADD(&w.inside, 1) != 1)
        violation("observe ran concurrently with itself");
    if (t->generation != w.last_gen + 1 || t->from != w.last_to || t->from == t->to)
        violation("transition out of order");
    if (t->from == CIRCUIT_OPEN &&
        (t->counts.successes || t->counts.failures || t->counts.timed_out))
        violation("open -> half-open with non-zero counts");
    (void)circuit_get_state(w.b);
    w.last_gen = t->generation;
    w.last_to = t->to;
    w.delivered++;
    RACE_ADD(&w.inside, -1);
}

static void *worker(void *arg)
{
    uint32_t x = (uint32_t)(uintptr_t)arg * 2654435761u + 7;
    for (int i = 0; i < w.iterations; i++) {
        x = x * 1103515245u + 12345u;
        uint32_t r = (x >> 8) % 32;
        if (r == 0) {
            circuit_test_clock_advance(open_for / 3);
            continue;
        }
        if (r == 1) {
            (void)circuit_get_state(w.b);
            continue;
        }
        CIRCUIT_TICKET_GUARD(t);
        circuit_rejection rej;
        if (!circuit_allow(w.b, arg, &t, &rej)) {
            /* >= 1 always; it may exceed open_for when this thread read the
             * clock before another one opened the breaker (opened_at > now) */
            if (rej.state == CIRCUIT_OPEN && rej.retry_after_ns < 1)
                violation("retry_after below 1 ns");
            if (rej.state == CIRCUIT_HALF_OPEN && rej.retry_after_ns != 0)
                violation("half-open rejection with a retry_after");
            continue;
        }
        if (r == 2)
            continue; /* the guard releases it */
        int result = r < 12 ? 1 : (r == 31 ? 2 : 0);
        circuit_done(&t, result);
    }
    return NULL;
}

static int every_call_main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    w.iterations = argc > 2 ? atoi(argv[2]) : 20000;
    if (threads < 1 || threads > 64 || w.iterations < 1) {
        fprintf(stderr, "usage: race_calls every_call [threads (1..64) [iterations]]\n");
        return 2;
    }
    w.last_to = CIRCUIT_CLOSED;
    circuit_spec spec = {
        .config = {.window = WINDOW, .probes = PROBES, .open_for_ns = open_for,
                   .probe_timeout_ns = probe_to},
        .policy = {.trip = trip, .probe = probe, .arg = NULL},
        .classify = classify,
        .observe = observe,
    };
    char err[256];
    if (circuit_new(&w.b, &spec, err, sizeof err) != 0) {
        fprintf(stderr, "circuit_new: %s\n", err);
        return 1;
    }
    pthread_t th[64];
    for (int i = 0; i < threads; i++)
        pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    /* every call has returned: every transition has been delivered (O3) */
    if (circuit_test_pending(w.b) != 0)
        violation("transitions stranded after every call returned");
    if (w.delivered != w.last_gen)
        violation("delivered count differs from the last generation");
    /* every probe slot is free again */
    circuit_test_clock_advance(open_for + probe_to);
    circuit_ticket t[PROBES + 1];
    int admitted = 0;
    for (int i = 0; i <= PROBES; i++)
        admitted += circuit_allow(w.b, NULL, &t[i], NULL);
    circuit_state s = circuit_get_state(w.b);
    if (s == CIRCUIT_HALF_OPEN && admitted != PROBES)
        violation("probe slots leaked");
    for (int i = 0; i < admitted; i++)
        circuit_release(&t[i]);
    circuit_free(w.b);
    printf("race_calls every_call: %d threads x %d calls, %" PRIu64 " transitions, %" PRId64
           " violations\n",
           threads, w.iterations, w.delivered, w.violations);
    return w.violations == 0 ? 0 : 1;
}

static const race_case cases[] = {
    {"every_call", every_call_main, "[threads [iterations]]"},
};

int main(int argc, char **argv)
{
    return race_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
