/*
 * bench_rmw: shared-line read-modify-writes per op (L8) of the closed
 * cases of bench_scale and bench_closed_mixed.
 *
 * SPDX-License-Identifier: MIT
 *
 * usage: bench_rmw [--ops N] [CASE...]
 *   CASE is NAME,WINDOW,EVERY (EVERY: 1 failure in EVERY results, seeded as
 *   bench_closed_mixed seeds them; 0: successes only); no CASE: successes
 *   and 1 in 10 000, 1 000, 100 and 10, windows 64 and 1024. For each CASE
 *   at 1 thread and at 2 threads (pinned to distinct CPUs when there are 2),
 *   each thread makes N allow + done (default 1000000) on one breaker whose
 *   trip policy never trips, and one table row is printed:
 *     | NAME | WINDOW | THREADS | OPS | FAILURES | RMWS | RMWS/op | RMWS/failure |
 *   RMWS: circuit_test_shared_rmws() after minus before: every RMW the
 *   counting paths make on a line that other CPUs write (the state word,
 *   descriptors, ring records, seals, the ledger, epoch ids); a success's
 *   count on its own CPU's cell is not one (docs/CONTRACT.md L8).
 *
 * A program of its own because the counter exists only in the test build
 * of the core (circuit_testable, linked statically here); the timed
 * programs measure the shared library. Counts, not time: the figures do not depend
 * on the machine's load, except that lost CAS races (which depend on the
 * interleaving) add RMWs at 2 threads.
 * Exit 0, or 1 on a bad argument, a breaker not built, or a breaker that
 * left closed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "circuit.h"
#include "gaps.h"
#include "testing.h"

typedef struct run {
    circuit_breaker *b;
    atomic_int       ready;
    atomic_bool      go;
} run;

typedef struct thr {
    run      *r;
    int       cpu; /* -1: unpinned */
    uint64_t  ops, every, failures, rejected;
    uint32_t  gaps[GAPS];
    pthread_t th;
} thr;

static int64_t trip_at;

static bool trip_never(void *arg, const circuit_counts *c)
{
    (void)arg;
    return c->failures >= trip_at;
}

static circuit_state probe_close(void *arg, const circuit_counts *c)
{
    (void)arg;
    (void)c;
    return CIRCUIT_CLOSED;
}

static circuit_outcome classify_zero_ok(void *arg, void *call_ctx, int rc)
{
    (void)arg;
    (void)call_ctx;
    return rc == 0 ? CIRCUIT_SUCCESS : CIRCUIT_FAILURE;
}

static void *thr_main(void *arg)
{
    thr *t = arg;
    if (t->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET((size_t)t->cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    }
    atomic_fetch_add(&t->r->ready, 1);
    while (!atomic_load(&t->r->go))
        sched_yield();
    uint64_t left = t->every ? t->gaps[0] : UINT64_MAX;
    uint32_t gi = 1;
    for (uint64_t i = 0; i < t->ops; i++) {
        circuit_ticket tk;
        if (!circuit_allow(t->r->b, NULL, &tk, NULL)) {
            t->rejected++;
            continue;
        }
        int rc = 0;
        if (--left == 0) {
            left = t->gaps[gi++ & (GAPS - 1)];
            rc = -1;
            t->failures++;
        }
        circuit_done(&tk, rc);
    }
    return NULL;
}

static int cpus[CPU_SETSIZE], ncpus;

static int one(const char *name, int window, uint64_t every, int threads, uint64_t ops)
{
    circuit_spec s;
    char err[256] = "";
    memset(&s, 0, sizeof s);
    s.config.window = window;
    s.config.probes = 1;
    s.config.open_for_ns = INT64_C(1000000000000000);
    s.config.probe_timeout_ns = INT64_C(1000000000000000);
    s.policy.trip = trip_never;
    s.policy.probe = probe_close;
    s.classify = classify_zero_ok;
    trip_at = window / 2 + 1; /* as the timed closed cases: never reached */
    static run r;
    int rc = circuit_new(&r.b, &s, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "bench_rmw: %s: circuit_new: %s: %s\n", name, strerror(rc), err);
        return -1;
    }
    atomic_init(&r.ready, 0);
    atomic_init(&r.go, false);
    static thr ts[2];
    for (int i = 0; i < threads; i++) {
        thr *t = &ts[i];
        t->r = &r;
        t->cpu = threads <= ncpus ? cpus[i] : -1;
        t->ops = ops;
        t->every = every;
        t->failures = t->rejected = 0;
        if (every)
            fill_gaps(t->gaps, every, gap_seed(i, every));
        if (pthread_create(&t->th, NULL, thr_main, t) != 0) {
            fprintf(stderr, "bench_rmw: pthread_create failed\n");
            exit(1);
        }
    }
    while (atomic_load(&r.ready) < threads)
        sched_yield();
    uint64_t rmw0 = circuit_test_shared_rmws();
    atomic_store(&r.go, true);
    uint64_t failures = 0, rejected = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(ts[i].th, NULL);
        failures += ts[i].failures;
        rejected += ts[i].rejected;
    }
    uint64_t rmws = circuit_test_shared_rmws() - rmw0;
    circuit_state st = circuit_get_state(r.b);
    circuit_free(r.b);
    if (rejected || st != CIRCUIT_CLOSED) {
        fprintf(stderr, "bench_rmw: %s window %d: %" PRIu64 " rejected, state %s (must "
                "stay closed)\n", name, window, rejected, circuit_state_name(st));
        return -1;
    }
    uint64_t all = ops * (uint64_t)threads;
    printf("| %s | %d | %d | %" PRIu64 " | %" PRIu64 " | %" PRIu64 " | %.4f | ", name, window,
           threads, all, failures, rmws, (double)rmws / (double)all);
    if (failures)
        printf("%.2f |\n", (double)rmws / (double)failures);
    else
        printf("- |\n");
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t ops = 1000000;
    cpu_set_t mask;
    CPU_ZERO(&mask);
    if (sched_getaffinity(0, sizeof mask, &mask) == 0)
        for (int i = 0; i < CPU_SETSIZE; i++)
            if (CPU_ISSET((size_t)i, &mask))
                cpus[ncpus++] = i;
    if (ncpus < 1)
        ncpus = 1;
    int bad = 0, ncase = 0;
    static const char *const defaults[] = {
        "closed_success,64,0",          "closed_success,1024,0",
        "closed_mixed_0.01pct,64,10000", "closed_mixed_0.01pct,1024,10000",
        "closed_mixed_0.1pct,64,1000",  "closed_mixed_0.1pct,1024,1000",
        "closed_mixed_1pct,64,100",     "closed_mixed_1pct,1024,100",
        "closed_mixed_10pct,64,10",     "closed_mixed_10pct,1024,10",
    };
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--ops") == 0)
            i++;
        else
            ncase++;
    printf("# bench_rmw: shared-line RMWs (L8), test build of the core\n\n"
           "| case | window | threads | ops | failures | shared RMWs | per op | per failure |\n"
           "|---|--:|--:|--:|--:|--:|--:|--:|\n");
    for (int i = 1; i < argc + (ncase ? 0 : (int)(sizeof defaults / sizeof defaults[0])); i++) {
        const char *arg = i < argc ? argv[i] : defaults[i - argc];
        if (i < argc && strcmp(arg, "--ops") == 0 && i + 1 < argc) {
            char *end;
            errno = 0;
            ops = strtoull(argv[++i], &end, 10);
            if (errno || *end || ops < 1) {
                fprintf(stderr, "bench_rmw: bad --ops '%s'\n", argv[i]);
                return 1;
            }
            continue;
        }
        char name[64];
        int window;
        unsigned long long every;
        if (sscanf(arg, "%63[^,],%d,%llu", name, &window, &every) != 3 || window < 1) {
            fprintf(stderr, "bench_rmw: bad case '%s' (NAME,WINDOW,EVERY)\n", arg);
            return 1;
        }
        for (int t = 1; t <= 2; t++)
            bad |= one(name, window, (uint64_t)every, t, ops) != 0;
    }
    return bad;
}
