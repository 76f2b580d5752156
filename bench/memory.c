/*
 * circuit-bench-memory: bytes per breaker (SPEC L5), the memory table of
 * circuit-bench (which runs this program unless --no-memory).
 *
 * SPDX-License-Identifier: MIT
 *
 * usage: circuit-bench-memory [--json FILE]   (FILE: JSON lines appended)
 *
 * A separate program because it reads circuit_test_footprint(), which only
 * the test build of the core (circuit_testable, linked statically here)
 * has; circuit-bench itself measures the shared library. For each (window,
 * probes) it reports
 *   - the breaker's footprint as the core counts it (circuit_test_footprint);
 *   - the per-CPU area (64 bytes per CPU, SPEC L5 as amended), stated apart;
 *   - what the allocator saw circuit_new take and circuit_free give back
 *     (tests/alloc_count.c, --wrap form: the bytes are malloc_usable_size);
 *   - the same allocator view for mutex_breaker, the reference model.
 * Exit 0, or 1 when a breaker could not be built or free left bytes behind.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "alloc_count.h"
#include "circuit.h"
#include "circuit_model.h"
#include "circuit_presets.h"
#include "testing.h"

#define PER_CPU_BYTES 64

static void observe_none(void *arg, void *call_ctx, const circuit_transition *t)
{
    (void)arg;
    (void)call_ctx;
    (void)t;
}

typedef struct measure {
    int64_t footprint;            /* circuit_test_footprint; -1 for the model */
    int64_t heap_bytes, heap_blocks; /* held after new */
    int64_t not_freed;            /* bytes still held after free */
} measure;

static int64_t live_bytes(void) { return __atomic_load_n(&alloc_live_bytes, __ATOMIC_SEQ_CST); }
static int64_t live_blocks(void) { return __atomic_load_n(&alloc_live, __ATOMIC_SEQ_CST); }

static int measure_one(bool model, int window, int probes, measure *m)
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
    cmodel *mb = NULL;
    int rc = model ? cmodel_new(&mb, &s, NULL, NULL, err, sizeof err)
                   : circuit_new(&cb, &s, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "circuit-bench-memory: %s new(%d, %d): %s: %s\n",
                model ? "mutex_breaker" : "circuit", window, probes, strerror(rc), err);
        return -1;
    }
    m->heap_bytes = live_bytes() - b0;
    m->heap_blocks = live_blocks() - k0;
    m->footprint = model ? -1 : (int64_t)circuit_test_footprint(cb);
    if (model)
        cmodel_free(mb);
    else
        circuit_free(cb);
    m->not_freed = live_bytes() - b0;
    return 0;
}

int main(int argc, char **argv)
{
    static const int sizes[][2] = {{64, 1}, {64, 64}, {65536, 65536}};
    FILE *json = NULL;
    if (argc == 3 && strcmp(argv[1], "--json") == 0) {
        if ((json = fopen(argv[2], "a")) == NULL) {
            fprintf(stderr, "circuit-bench-memory: %s: %s\n", argv[2], strerror(errno));
            return 1;
        }
    } else if (argc != 1) {
        fprintf(stderr, "usage: circuit-bench-memory [--json FILE]\n");
        return 2;
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
           "stated apart (SPEC L5). Heap: the blocks circuit_new / cmodel_new took, as the "
           "allocator saw them (%s; bytes are malloc_usable_size).\n\n",
           PER_CPU_BYTES, cpus, alloc_count_scope());
    printf("| variant | window | probes | footprint bytes | per-CPU area bytes | heap bytes "
           "after new | heap blocks | bytes not freed by free |\n");
    printf("|---|--:|--:|--:|--:|--:|--:|--:|\n");
    int failed = 0;
    for (int model = 0; model <= 1; model++) {
        const char *name = model ? "mutex_breaker" : "circuit";
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            int w = sizes[i][0], p = sizes[i][1];
            if (measure_one(model, w, p, &m) != 0) {
                failed = 1;
                continue;
            }
            failed |= m.not_freed != 0;
            char foot[32] = "-", pcpu[32] = "-";
            if (!model) {
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
                        name, w, p, model ? m.heap_bytes : m.footprint, model ? 0 : per_cpu,
                        cpus, m.heap_bytes, m.heap_blocks, m.not_freed);
        }
    }
    if (json && fclose(json) != 0) {
        fprintf(stderr, "circuit-bench-memory: %s\n", strerror(errno));
        return 1;
    }
    return failed;
}
