/*
 * bench_memory: bytes per breaker (L5).
 *
 * SPDX-License-Identifier: MIT
 *
 * usage: bench_memory [--json FILE]   (FILE: JSON lines appended)
 *
 * It reads circuit_test_footprint(), which only the test build of the core
 * (circuit_testable, linked statically here) has; the timed programs
 * measure the shared library. For each (window,
 * probes) it reports
 *   - the breaker's footprint as the core counts it (circuit_test_footprint);
 *   - the per-CPU area (CIRCUIT_FOOTPRINT_PER_CPU: 16 bytes per CPU in the
 *     per-CPU arena, L5), stated apart; the heap
 *     bytes include a whole arena chunk (8 breakers' units) for one breaker;
 *   - what the allocator saw circuit_new take and circuit_free give back
 *     (alloc_count.c: the bytes are malloc_usable_size);
 *   - the same allocator view for mutex_breaker, the locked baseline.
 * Then, at scale (many upstreams): the CPU time (CLOCK_PROCESS_CPUTIME_ID)
 * of building N (64, 1) breakers one after the other, and of freeing them
 * all, per breaker, with the heap they held together (--breakers N, default
 * 100000). Twice: "cold", on memory the process never touched (the kernel's
 * first-touch page faults are part of the CPU time, about 0.4 per breaker),
 * then "warm", on the memory the first round freed (malloc told not to give
 * it back to the kernel). This is the test build of the core with every
 * allocation counted (alloc_count.c), so it is an upper bound of what the
 * installed library costs.
 * Exit 0, or 1 when a breaker could not be built or free left bytes behind.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc_count.h"
#include "circuit.h"
#include "mutex_breaker.h"
#include "circuit_presets.h"
#include "testing.h"

#define PER_CPU_BYTES CIRCUIT_FOOTPRINT_PER_CPU

static void observe_none(void *arg, void *call_ctx, const circuit_transition *t)
{
    (void)arg;
    (void)call_ctx;
    (void)t;
}

typedef struct measure {
    int64_t footprint;            /* circuit_test_footprint; -1 for mutex_breaker */
    int64_t heap_bytes, heap_blocks; /* held after new */
    int64_t not_freed;            /* bytes still held after free */
} measure;

static int64_t live_bytes(void) { return __atomic_load_n(&alloc_live_bytes, __ATOMIC_SEQ_CST); }
static int64_t live_blocks(void) { return __atomic_load_n(&alloc_live, __ATOMIC_SEQ_CST); }

static int measure_one(bool locked, int window, int probes, measure *m)
{
    /* No call is made: any policy does; the presets' own. */
    static circuit_consecutive pol;
    char err[256] = "";
    circuit_consecutive_init(&pol, 1, 1, err, sizeof err);
    circuit_spec s = {
        .config = {.window = window, .probes = probes, .open_for_ns = 1000000,
                   .probe_timeout_ns = 1000000},
        .policy = circuit_consecutive_policy(&pol),
        .classify = circuit_classify_errno,
        .observe = observe_none,
    };
    int64_t b0 = live_bytes(), k0 = live_blocks();
    circuit_breaker *cb = NULL;
    mutex_breaker *mb = NULL;
    int rc = locked ? mutex_breaker_new(&mb, &s, NULL, NULL, err, sizeof err)
                   : circuit_new(&cb, &s, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "bench_memory: %s new(%d, %d): %s: %s\n",
                locked ? "mutex_breaker" : "circuit", window, probes, strerror(rc), err);
        return -1;
    }
    m->heap_bytes = live_bytes() - b0;
    m->heap_blocks = live_blocks() - k0;
    m->footprint = locked ? -1 : (int64_t)circuit_test_footprint(cb);
    if (locked)
        mutex_breaker_free(mb);
    else
        circuit_free(cb);
    m->not_freed = live_bytes() - b0;
    return 0;
}

static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Builds n (window, probes) breakers, then frees them all; CPU ns per
 * breaker for each phase, and the heap the n breakers held together. */
typedef struct at_scale {
    double create_ns, free_ns;
    int64_t heap_bytes;
    int64_t not_freed;
} at_scale;

static int measure_scale(bool locked, long n, int window, int probes, at_scale *r)
{
    static circuit_consecutive pol;
    char err[256] = "";
    circuit_consecutive_init(&pol, 1, 1, err, sizeof err);
    circuit_spec s = {
        .config = {.window = window, .probes = probes, .open_for_ns = 1000000,
                   .probe_timeout_ns = 1000000},
        .policy = circuit_consecutive_policy(&pol),
        .classify = circuit_classify_errno,
    };
    s.observe = locked ? observe_none : NULL; /* the core needs no observer (CFG4, 0.3) */
    circuit_breaker **cb = locked ? NULL : calloc((size_t)n, sizeof *cb);
    mutex_breaker **mb = locked ? calloc((size_t)n, sizeof *mb) : NULL;
    if (!cb && !mb)
        return -1;
    int64_t b0 = live_bytes();
    int64_t t0 = cpu_ns();
    long built = 0;
    for (; built < n; built++) {
        int rc = locked ? mutex_breaker_new(&mb[built], &s, NULL, NULL, err, sizeof err)
                       : circuit_new(&cb[built], &s, err, sizeof err);
        if (rc != 0) {
            fprintf(stderr, "bench_memory: breaker %ld of %ld: %s: %s\n", built, n,
                    strerror(rc), err);
            break;
        }
    }
    int64_t t1 = cpu_ns();
    r->heap_bytes = live_bytes() - b0;
    for (long i = 0; i < built; i++) {
        if (locked)
            mutex_breaker_free(mb[i]);
        else
            circuit_free(cb[i]);
    }
    int64_t t2 = cpu_ns();
    r->not_freed = live_bytes() - b0;
    free(cb);
    free(mb);
    if (built < n)
        return -1;
    r->create_ns = (double)(t1 - t0) / (double)n;
    r->free_ns = (double)(t2 - t1) / (double)n;
    return 0;
}

int main(int argc, char **argv)
{
    static const int sizes[][2] = {{64, 1}, {64, 64}, {65536, 65536}};
    FILE *json = NULL;
    long breakers = 100000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
            if ((json = fopen(argv[++i], "a")) == NULL) {
                fprintf(stderr, "bench_memory: %s: %s\n", argv[i], strerror(errno));
                return 1;
            }
        } else if (strcmp(argv[i], "--breakers") == 0 && i + 1 < argc) {
            breakers = strtol(argv[++i], NULL, 10);
            if (breakers < 1) {
                fprintf(stderr, "bench_memory: --breakers must be >= 1\n");
                return 2;
            }
        } else {
            fprintf(stderr, "usage: bench_memory [--json FILE] [--breakers N]\n");
            return 2;
        }
    }
    long cpus = sysconf(_SC_NPROCESSORS_CONF);
    if (cpus < 1)
        cpus = 1;
    int64_t per_cpu = PER_CPU_BYTES * (int64_t)cpus;

    /* A first new/free of each pays any one-time set-up outside the count. */
    measure m;
    measure_one(false, 64, 1, &m);
    measure_one(true, 64, 1, &m);

    printf("\n## Memory per breaker\n\n");
    printf("Footprint: what the core allocates for one breaker (circuit_test_footprint). "
           "Per-CPU area: %d bytes per CPU x %ld CPUs (sysconf(_SC_NPROCESSORS_CONF)), "
           "stated apart (L5). Heap: the blocks circuit_new / mutex_breaker_new took, as the "
           "allocator saw them (%s; bytes are malloc_usable_size).\n\n",
           PER_CPU_BYTES, cpus, alloc_count_scope());
    printf("| variant | window | probes | footprint bytes | per-CPU area bytes | heap bytes "
           "after new | heap blocks | bytes not freed by free |\n");
    printf("|---|--:|--:|--:|--:|--:|--:|--:|\n");
    int failed = 0;
    for (int locked = 0; locked <= 1; locked++) {
        const char *name = locked ? "mutex_breaker" : "circuit";
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            int w = sizes[i][0], p = sizes[i][1];
            if (measure_one(locked, w, p, &m) != 0) {
                failed = 1;
                continue;
            }
            failed |= m.not_freed != 0;
            char foot[32] = "-", pcpu[32] = "-";
            if (!locked) {
                snprintf(foot, sizeof foot, "%" PRId64, m.footprint);
                snprintf(pcpu, sizeof pcpu, "%" PRId64, per_cpu);
            }
            printf("| %s | %d | %d | %s | %s | %" PRId64 " | %" PRId64 " | %" PRId64 " |\n", name,
                   w, p, foot, pcpu, m.heap_bytes, m.heap_blocks, m.not_freed);
            if (json)
                fprintf(json,
                        "{\"case\":\"memory\",\"variant\":\"%s\",\"window\":%d,\"probes\":%d,"
                        "\"bytes\":%" PRId64 ",\"per_cpu_bytes\":%" PRId64 ",\"cpus\":%ld,"
                        "\"heap_bytes\":%" PRId64 ",\"heap_blocks\":%" PRId64
                        ",\"not_freed_bytes\":%" PRId64 "}\n",
                        name, w, p, locked ? m.heap_bytes : m.footprint, locked ? 0 : per_cpu,
                        cpus, m.heap_bytes, m.heap_blocks, m.not_freed);
        }
    }

    printf("\n## Create and free at scale\n\n");
    printf("%ld breakers (64, 1) built one after the other, then all freed: CPU time per "
           "breaker (CLOCK_PROCESS_CPUTIME_ID, user + system; the test build of the core, "
           "every allocation counted, so an upper bound), and the heap they held together, "
           "per breaker. cold: memory the process never touched (the first-touch page faults "
           "are in the time); warm: the memory the cold round freed.\n\n",
           breakers);
    printf("| variant | memory | breakers | create us/breaker | free us/breaker | "
           "heap bytes/breaker | bytes not freed |\n");
    printf("|---|---|--:|--:|--:|--:|--:|\n");
    /* keep freed memory in the process, so that the warm round reuses it */
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
    for (int locked = 0; locked <= 1; locked++) {
        const char *name = locked ? "mutex_breaker" : "circuit";
        /* mutex_breaker runs after circuit, on memory circuit freed: warm only */
        for (int warm = locked; warm <= 1; warm++) {
            at_scale r;
            if (measure_scale(locked, breakers, 64, 1, &r) != 0) {
                failed = 1;
                continue;
            }
            failed |= r.not_freed != 0;
            const char *mem = warm ? "warm" : "cold";
            printf("| %s | %s | %ld | %.2f | %.2f | %.0f | %" PRId64 " |\n", name, mem, breakers,
                   r.create_ns / 1000.0, r.free_ns / 1000.0,
                   (double)r.heap_bytes / (double)breakers, r.not_freed);
            if (json)
                fprintf(json,
                        "{\"case\":\"create_free\",\"variant\":\"%s\",\"memory\":\"%s\","
                        "\"window\":64,\"probes\":1,\"breakers\":%ld,\"cpus\":%ld,"
                        "\"create_ns\":%.1f,\"free_ns\":%.1f,\"heap_bytes\":%" PRId64
                        ",\"not_freed_bytes\":%" PRId64 "}\n",
                        name, mem, breakers, cpus, r.create_ns, r.free_ns, r.heap_bytes,
                        r.not_freed);
        }
    }

    if (json && fclose(json) != 0) {
        fprintf(stderr, "bench_memory: %s\n", strerror(errno));
        return 1;
    }
    return failed;
}
