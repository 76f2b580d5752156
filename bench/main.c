/*
 * The timed programs' common main (bench_main): the command line, the
 * measurement of the program's cases at every thread count, its tables and
 * targets. What is measured: cases.c; how: runner.c; what is printed:
 * report.c. Each program (scale.c, closed_mixed.c, ...) names its cases.
 *
 * SPDX-License-Identifier: MIT
 *
 * Variants
 *   circuit        the installed-style shared library (libcircuit.so).
 *   mutex_breaker  the bench's own locked breaker (mutex_breaker.c): the
 *                  same semantics behind one pthread mutex, on the real
 *                  clock: what a simple, correct, locked breaker costs.
 *   no_breaker     a case's loop without any breaker (proxy_cycle: the work
 *                  alone), the reference of the breakers' overhead.
 *   baseline       atomic_floor, clock and empty (cases.c).
 */
#include "bench.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const bench_program *prog;
const char *bench_name = "bench";

static void usage(FILE *f)
{
    fprintf(f, "%s: %s\n", prog->name, prog->what);
    fprintf(f, "default cases: %s\n", prog->cases);
    fprintf(f,
        "usage: %s [options]\n"
        "  --quick           short runs for CI (0.04 s x 5 reps; the whole default set in < 1 min)\n"
        "  --seconds S       length of one repetition (default 0.5)\n"
        "  --reps N          repetitions per figure, median reported (default 5)\n"
        "  --warmup S        discarded warm-up run before each figure (default seconds/2; 0: none)\n"
        "  --threads LIST    comma list of thread counts (default 1,2,CPUs and 2xCPUs);\n"
        "                    counts above the CPUs run unpinned and are reported apart\n"
        "  --case LIST       comma list of case or baseline names to run (default: the\n"
        "                    program's); cases: closed_success, closed_mixed (the family:\n"
        "                    closed_mixed_0.01pct _0.1pct _1pct _10pct, each alone too),\n"
        "                    open_reject half_open_probe get_state get_stats churn\n"
        "                    proxy_cycle; baselines: atomic_floor clock empty\n"
        "  --variant LIST    circuit,mutex_breaker,no_breaker,baseline (default all)\n"
        "  --window LIST     only the breaker rows with these windows (1,64,1024,65536)\n"
        "  --probes LIST     only the breaker rows with these probe counts (1,64,65536)\n"
        "  --work-ns N       proxy_cycle: busy work between allow and done (default 1000),\n"
        "                    calibrated against the no_breaker loop to within 2 %%\n"
        "  --ops N           each thread runs exactly N ops (rounded up to %d) instead of\n"
        "                    --seconds: for valgrind --tool=callgrind, e.g.\n"
        "                    valgrind --tool=callgrind --toggle-collect=loop_circuit_allow_done \\\n"
        "                      bench_scale --variant circuit --window 64 --threads 1 \\\n"
        "                      --ops 1000000 --reps 1\n"
        "                    then divide the inclusive Ir by the ops printed on stderr\n"
        "  --json FILE       also write one JSON object per line per figure\n",
        prog->name, BATCH);
}


/* Every name of the comma list is one of `names` (n of them, a stride apart). */
static bool all_known(const char *list, const char *what, const char *const *names, size_t n,
                      size_t stride)
{
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        bool ok = false;
        for (size_t k = 0; k < n && !ok; k++) {
            const char *name = *(const char *const *)((const char *)names + k * stride);
            ok = strlen(name) == len && strncmp(p, name, len) == 0;
        }
        if (!ok) {
            fprintf(stderr, "bench: unknown %s in '%s'\n", what, list);
            return false;
        }
        p = e ? e + 1 : p + len;
    }
    return true;
}

static bool parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    if (errno || end == s || *end || !(d >= 0))
        return false;
    *out = d;
    return true;
}

static bool parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-')
        return false;
    *out = v;
    return true;
}

static int add_thread_count(options *o, int t)
{
    for (int i = 0; i < o->nthreads; i++)
        if (o->threads[i] == t)
            return 0;
    if (o->nthreads == (int)(sizeof o->threads / sizeof o->threads[0]))
        return -1;
    o->threads[o->nthreads++] = t;
    return 0;
}

static int parse_threads(options *o, const char *threads)
{
    if (threads == NULL) {
        add_thread_count(o, 1);
        if (n_cpus >= 2)
            add_thread_count(o, 2);
        add_thread_count(o, n_cpus);
        add_thread_count(o, 2 * n_cpus);
        return 0;
    }
    for (const char *p = threads; *p;) {
        char *end;
        long t = strtol(p, &end, 10);
        if (end == p || t < 1 || t > 1024 || (*end && *end != ',')) {
            fprintf(stderr, "bench: bad --threads '%s'\n", threads);
            return -1;
        }
        if (add_thread_count(o, (int)t) != 0)
            return -1;
        p = *end ? end + 1 : end;
    }
    return 0;
}

static int parse_args(int argc, char **argv, options *o)
{
    bool have_seconds = false, have_warmup = false;
    const char *threads = NULL;
    memset(o, 0, sizeof *o);
    o->cases = prog->cases;
    o->windows = prog->windows;
    o->seconds = 0.5;
    o->reps = 5;
    o->work_ns = 1000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t n;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(a, "--quick") == 0) {
            o->quick = true;
            continue;
        } else if (v == NULL) {
            fprintf(stderr, "%s: %s needs a value (or is unknown)\n", prog->name, a);
            return -1;
        }
        i++; /* every option below takes the next word */
        if (strcmp(a, "--seconds") == 0) {
            have_seconds = true;
            if (!parse_double(v, &o->seconds) || o->seconds <= 0)
                goto bad;
        } else if (strcmp(a, "--warmup") == 0) {
            have_warmup = true;
            if (!parse_double(v, &o->warmup))
                goto bad;
        } else if (strcmp(a, "--reps") == 0) {
            if (!parse_u64(v, &n) || n < 1 || n > MAX_REPS)
                goto bad;
            o->reps = (int)n;
        } else if (strcmp(a, "--ops") == 0) {
            if (!parse_u64(v, &o->ops) || o->ops < 1)
                goto bad;
        } else if (strcmp(a, "--work-ns") == 0) {
            if (!parse_u64(v, &n) || n > INT64_C(1000000000))
                goto bad;
            o->work_ns = (int64_t)n;
        } else if (strcmp(a, "--threads") == 0) {
            threads = v;
        } else if (strcmp(a, "--case") == 0) {
            o->cases = v;
        } else if (strcmp(a, "--window") == 0) {
            o->windows = v;
        } else if (strcmp(a, "--probes") == 0) {
            o->probes = v;
        } else if (strcmp(a, "--variant") == 0) {
            o->variants = v;
        } else if (strcmp(a, "--json") == 0) {
            o->json = v;
        } else {
            fprintf(stderr, "%s: unknown option %s\n", prog->name, a);
            usage(stderr);
            return -1;
        }
        continue;
    bad:
        fprintf(stderr, "%s: bad value for %s: '%s'\n", prog->name, a, v);
        return -1;
    }
    if (o->quick && !have_seconds)
        o->seconds = 0.04;
    if (!have_warmup)
        o->warmup = o->seconds / 2 < 0.02 ? 0.02 : o->seconds / 2;
    if (parse_threads(o, threads) != 0)
        return -1;
    const char *cases[64];
    size_t nc = 0;
    cases[nc++] = MIXED_FAMILY;
    for (size_t k = 0; k < n_cases; k++)
        cases[nc++] = case_table[k].name;
    for (size_t k = 0; k < n_baselines; k++)
        cases[nc++] = baseline_table[k].name;
    if (!all_known(o->variants, "variant", variant_names, V__COUNT, sizeof variant_names[0]) ||
        !all_known(o->cases, "case", cases, nc, sizeof cases[0]))
        return -1;
    return 0;
}

/* Rows of one case next to each other: by case, thread count, variant. */
static int cmp_result(const void *a, const void *b)
{
    const result *x = a, *y = b;
    if (x->order != y->order)
        return x->order - y->order;
    if (x->threads != y->threads)
        return x->threads - y->threads;
    return (int)x->v - (int)y->v;
}

/* Runs the group of subjects at every thread count; returns the broken
 * figures, or -1. */
static int measure_all_threads(const options *o, const subject *sub, int n)
{
    int broken = 0;
    for (int k = 0; n > 0 && k < o->nthreads; k++) {
        int b = measure_group(o, sub, n, o->threads[k]);
        if (b < 0)
            return -1;
        broken += b;
    }
    return broken;
}

int bench_main(int argc, char **argv, const bench_program *p)
{
    options o;
    prog = p;
    bench_name = p->name;
    runner_init();
    if (parse_args(argc, argv, &o) != 0)
        return 2;
    if (o.json) { /* fail now, not after the run */
        FILE *f = fopen(o.json, "w");
        if (f == NULL || fclose(f) != 0) {
            fprintf(stderr, "%s: %s: %s\n", prog->name, o.json, strerror(errno));
            return 2;
        }
    }
    /* proxy_cycle's work, calibrated before anything is measured (the
     * header says what it measured) */
    bool proxy = false;
    for (size_t i = 0; i < n_cases; i++)
        proxy |= case_table[i].loop == LOOP_PROXY && case_selected(o.cases, &case_table[i]);
    if (proxy && in_list(o.variants, "no_breaker") && calibrate_work(o.work_ns) != 0)
        fprintf(stderr, "%s: proxy_cycle: the no_breaker loop measured %.1f ns per op "
                "for %" PRId64 " ns asked after %d tries (not within 5 %%)\n", prog->name,
                work_calibrated_ns, o.work_ns, work_calibration_tries);
    else if (!proxy || !in_list(o.variants, "no_breaker")) {
        work_asked_ns = o.work_ns;
        work_ticks = (uint64_t)((double)o.work_ns * ticks_per_ns + 0.5); /* uncalibrated */
    }
    print_header(stdout, &o);
    fflush(stdout);

    int64_t t_start = now_ns();
    int failures = 0;
    /* The baselines are the reference of the ratio columns: those named in
     * --case (the program's own by default) run unless --variant leaves
     * them out. */
    bool only_named_baselines = true;
    if (in_list(o.variants, "baseline")) {
        static target tgs[MAX_GROUP];
        subject sub[MAX_GROUP];
        int n = 0;
        for (size_t i = 0; i < n_baselines; i++) {
            const case_def *c = &baseline_table[i];
            if (only_named_baselines && !in_list(o.cases, c->name))
                continue;
            target_setup(&tgs[n], V_BASELINE, c);
            sub[n] = (subject){&tgs[n], V_BASELINE, c, (int)i};
            n++;
        }
        if (measure_all_threads(&o, sub, n) < 0)
            return 1;
    }
    for (size_t i = 0; i < n_cases; i++) {
        const case_def *c = &case_table[i];
        char wbuf[16], pbuf[16];
        snprintf(wbuf, sizeof wbuf, "%d", c->window);
        snprintf(pbuf, sizeof pbuf, "%d", c->probes);
        if (!case_selected(o.cases, c) || !in_list(o.windows, wbuf) || !in_list(o.probes, pbuf))
            continue;
        target tgs[MAX_GROUP];
        subject sub[MAX_GROUP];
        int n = 0;
        for (int v = 0; v < V__COUNT; v++) {
            if (!(c->variants & 1u << v) || !in_list(o.variants, variant_names[v]))
                continue;
            if (target_setup(&tgs[n], (variant)v, c) != 0) {
                failures++;
                continue;
            }
            sub[n] = (subject){&tgs[n], (variant)v, c, (int)(n_baselines + i)};
            n++;
        }
        int broken = measure_all_threads(&o, sub, n);
        if (broken < 0)
            return 1;
        failures += broken;
        for (int k = 0; k < n; k++)
            target_free(&tgs[k]);
    }

    qsort(results, n_results, sizeof *results, cmp_result);
    print_tables(stdout);
    print_mixed_table(stdout);
    print_targets(stdout);
    fprintf(stdout, "\ntotal time %.1f s\n", (double)(now_ns() - t_start) / 1e9);
    if (o.json && write_json(o.json) != 0)
        return 2;
    if (failures) {
        fprintf(stderr, "%s: %d case(s) did not measure what they claim (see INVALID)\n",
                prog->name, failures);
        return 3;
    }
    return 0;
}
