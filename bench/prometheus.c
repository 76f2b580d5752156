/*
 * bench_prometheus: the cost of the Prometheus exposition of many
 * breakers (include/circuit_prometheus.h), per breaker, at 10^3, 10^4 and
 * 10^5 breakers: the buffer form (a sizing call, then the call that fills a
 * buffer of that size) and the stream form (chunks handed to a writer that
 * discards them). Linear in the text means the time per breaker stays flat
 * as the count grows; the program prints the ratio of the largest to the
 * smallest.
 *
 * SPDX-License-Identifier: MIT
 *
 * usage: bench_prometheus [--max N] [--out FILE] [--json FILE]
 *   --max N    largest count (default 100000; the counts are 10^3, 10^4, ...
 *              up to N)
 *   --out FILE write the largest exposition there, through the stream form
 *              (for `promtool check metrics < FILE`)
 *   --json FILE  append one JSON line per (count, form)
 * Exit 0, or 1 when a call failed. Timing never decides the exit status.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "circuit.h"
#include "circuit_prometheus.h"

static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int discard(void *arg, const char *data, size_t len)
{
    (void)data;
    *(size_t *)arg += len;
    return 0;
}

static int to_file(void *arg, const char *data, size_t len)
{
    return fwrite(data, 1, len, (FILE *)arg) == len ? 0 : EIO;
}

int main(int argc, char **argv)
{
    size_t max = 100000;
    const char *out = NULL;
    FILE *json = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--max") == 0 && i + 1 < argc) {
            max = (size_t)strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out = argv[++i];
        } else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
            if ((json = fopen(argv[++i], "a")) == NULL) {
                fprintf(stderr, "bench_prometheus: %s: %s\n", argv[i], strerror(errno));
                return 1;
            }
        } else {
            fprintf(stderr, "usage: bench_prometheus [--max N] [--out FILE] "
                            "[--json FILE]\n");
            return 2;
        }
    }
    if (max < 1000)
        max = 1000;

    /* Names like a proxy's upstreams; every state. */
    circuit_stats *st = calloc(max, sizeof *st);
    char **names = calloc(max, sizeof *names);
    if (!st || !names)
        return 1;
    for (size_t i = 0; i < max; i++) {
        st[i] = (circuit_stats){.state = (circuit_state)(1 + i % 4), .generation = i % 17,
                                .admitted = i * 1000, .successes = i * 990, .failures = i * 10,
                                .transitions = i % 17};
        names[i] = malloc(64);
        if (!names[i])
            return 1;
        snprintf(names[i], 64, "upstream-%zu.pool-%zu.example.com:8443", i, i % 97);
    }
    const char *const *nm = (const char *const *)names;

    printf("\n## Prometheus exposition of many breakers\n\n");
    printf("CPU time per breaker (CLOCK_PROCESS_CPUTIME_ID), best of 3. buffer: the sizing "
           "call plus the call that fills a buffer of that size (already touched); stream: "
           "circuit_stats_write_prometheus_many to a writer that discards the chunks.\n\n");
    printf("| breakers | text bytes | buffer ns/breaker | stream ns/breaker |\n");
    printf("|--:|--:|--:|--:|\n");
    double first_buf = 0, first_str = 0, last_buf = 0, last_str = 0;
    int failed = 0;
    for (size_t n = 1000; n <= max; n *= 10) {
        double best_buf = 1e300, best_str = 1e300;
        size_t bytes = 0;
        for (int rep = 0; rep < 3; rep++) {
            /* The buffer is touched before the fill call is timed: a handler
             * reuses its buffer, and the first touch of fresh pages is the
             * kernel's cost, not the formatter's. */
            int64_t t0 = cpu_ns();
            int len = circuit_stats_format_prometheus_many(st, nm, n, NULL, 0);
            int64_t ts = cpu_ns();
            char *buf = len >= 0 ? malloc((size_t)len + 1) : NULL;
            if (buf)
                memset(buf, 1, (size_t)len + 1);
            int64_t tf = cpu_ns();
            int len2 = buf ? circuit_stats_format_prometheus_many(st, nm, n, buf, (size_t)len + 1)
                           : -1;
            int64_t t1 = cpu_ns() - (tf - ts);
            free(buf);
            if (len < 0 || len2 != len) {
                fprintf(stderr, "bench_prometheus: buffer form, %zu breakers: %s\n", n,
                        strerror(errno));
                failed = 1;
                break;
            }
            size_t streamed = 0;
            int64_t t2 = cpu_ns();
            int rc = circuit_stats_write_prometheus_many(st, nm, n, discard, &streamed);
            int64_t t3 = cpu_ns();
            if (rc != 0 || streamed != (size_t)len) {
                fprintf(stderr, "bench_prometheus: stream form, %zu breakers: %s\n", n,
                        strerror(rc));
                failed = 1;
                break;
            }
            bytes = streamed;
            double b = (double)(t1 - t0) / (double)n, s = (double)(t3 - t2) / (double)n;
            best_buf = b < best_buf ? b : best_buf;
            best_str = s < best_str ? s : best_str;
        }
        if (failed)
            break;
        printf("| %zu | %zu | %.0f | %.0f |\n", n, bytes, best_buf, best_str);
        if (json)
            fprintf(json,
                    "{\"case\":\"prometheus\",\"breakers\":%zu,\"bytes\":%zu,"
                    "\"buffer_ns_per_breaker\":%.1f,\"stream_ns_per_breaker\":%.1f}\n",
                    n, bytes, best_buf, best_str);
        if (n == 1000) {
            first_buf = best_buf;
            first_str = best_str;
        }
        last_buf = best_buf;
        last_str = best_str;
        if (n > max / 10)
            break;
    }
    if (!failed)
        printf("\nLargest / smallest count, time per breaker: buffer %.2fx, stream %.2fx "
               "(linear: about 1).\n",
               last_buf / first_buf, last_str / first_str);

    if (out && !failed) {
        FILE *f = fopen(out, "w");
        int rc = f ? circuit_stats_write_prometheus_many(st, nm, max, to_file, f) : errno;
        if (f && fclose(f) != 0 && rc == 0)
            rc = errno;
        if (rc != 0) {
            fprintf(stderr, "bench_prometheus: %s: %s\n", out, strerror(rc));
            failed = 1;
        } else {
            printf("%zu breakers written to %s (check: promtool check metrics < %s)\n", max, out,
                   out);
        }
    }
    for (size_t i = 0; i < max; i++)
        free(names[i]);
    free(names);
    free(st);
    if (json)
        fclose(json);
    return failed;
}
