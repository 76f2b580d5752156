/*
 * How the timed programs measure: threads pinned to distinct CPUs, timed
 * repetitions interleaved across the subjects of a group, latency samples,
 * medians, and the checks that a case measured what it claims.
 *
 * SPDX-License-Identifier: MIT
 *
 * Method
 *   Each figure is the median of --reps repetitions (5 by default) of
 *   --seconds each (0.5 by default), after one discarded warm-up run. The
 *   repetitions of the variants of a case (and of the three baselines) are
 *   interleaved, so that load from other processes hits them alike. Threads
 *   are pinned to distinct CPUs of the process's affinity mask when there are
 *   enough; runs with more threads than CPUs are unpinned and reported apart.
 *   ns/op is per thread: the threads' summed run time over their summed ops.
 *   Mops/s is aggregate: the sum of each thread's ops per second.
 *   An op is one allow (+ one done when admitted), one get_state or
 *   get_stats, one proxy cycle, one atomic add, one clock read, or one empty
 *   loop turn.
 *   Latency: one op in BATCH (64) is timed alone with bench_tick(); p50, p99
 *   and p99.9 are taken over the samples of all threads of one repetition,
 *   then the median over the repetitions is reported. Fairness: the fewest
 *   ops of any thread over the most ops of any thread in one repetition
 *   (median over the repetitions). CPU time: each thread's
 *   CLOCK_THREAD_CPUTIME_ID over its run; cpu ns/op = the threads' summed
 *   CPU time over their summed ops, cpu share = summed CPU time / summed run
 *   time (1 when nothing else ran on the threads' CPUs; on a machine shared
 *   with other jobs, the wall-clock figures are inflated by 1 / share).
 */
#include "bench.h"

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc_count.h"

static size_t cap_results;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Ticks per ns against CLOCK_MONOTONIC, over 20 ms of spinning. */
static double calibrate_ticks(void)
{
    int64_t n0 = now_ns();
    uint64_t t0 = bench_tick();
    while (now_ns() - n0 < 20000000) {
    }
    int64_t n1 = now_ns();
    uint64_t t1 = bench_tick();
    return n1 > n0 && t1 > t0 ? (double)(t1 - t0) / (double)(n1 - n0) : 1.0;
}

/* What timing nothing reads: the median of 1001 empty timed pairs, in ns. */
static double calibrate_tick_overhead(void)
{
    static double d[1001];
    for (int i = 0; i < 1001; i++) {
        uint64_t t0 = bench_tick();
        d[i] = (double)(bench_tick() - t0) / ticks_per_ns;
    }
    return median(d, 1001);
}

void runner_init(void)
{
    cpu_set_t mask;
    CPU_ZERO(&mask);
    if (sched_getaffinity(0, sizeof mask, &mask) != 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        for (long i = 0; i < n && i < CPU_SETSIZE; i++)
            CPU_SET((size_t)i, &mask);
    }
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET((size_t)i, &mask))
            cpu_ids[n_cpus++] = i;
    if (n_cpus < 1)
        n_cpus = 1;
    ticks_per_ns = calibrate_ticks();
    tick_overhead_ns = calibrate_tick_overhead();
}

/* ---- one timed run ------------------------------------------------------------------ */

static void *worker_main(void *arg)
{
    worker *w = arg;
    atomic_fetch_add_explicit(&w->run->ready, 1, memory_order_release);
    while (!atomic_load_explicit(&w->run->go, memory_order_acquire))
        sched_yield();
    uint64_t a0 = alloc_thread_calls();
    struct timespec c0, c1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    w->t0 = now_ns();
    w->fn(w);
    w->t1 = now_ns();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    w->cpu_ns = (int64_t)(c1.tv_sec - c0.tv_sec) * INT64_C(1000000000) + (c1.tv_nsec - c0.tv_nsec);
    w->allocs = alloc_thread_calls() - a0;
    return NULL;
}

typedef struct rep {
    double   ns_per_op, mops, trans_per_s, fairness, cpu_ns_per_op, cpu_share;
    double   mops_together, together_share;
    double   p50, p99, p999; /* ns; 0 when not sampled */
    uint64_t ops, admitted, odd, allocs, transitions;
} rep;

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* p50, p99, p99.9 of the threads' samples, in ns (all 0 without samples). */
static void percentiles(const worker *ws, int threads, rep *out)
{
    size_t n = 0;
    for (int i = 0; i < threads; i++)
        n += ws[i].nlat < LAT_CAP ? ws[i].nlat : LAT_CAP;
    if (n == 0)
        return;
    uint32_t *all = malloc(n * sizeof *all);
    if (all == NULL)
        return;
    size_t k = 0;
    for (int i = 0; i < threads; i++) {
        size_t m = ws[i].nlat < LAT_CAP ? ws[i].nlat : LAT_CAP;
        memcpy(all + k, ws[i].lat, m * sizeof *all);
        k += m;
    }
    qsort(all, n, sizeof *all, cmp_u32);
    out->p50 = (double)all[(n - 1) * 500 / 1000] / ticks_per_ns;
    out->p99 = (double)all[(n - 1) * 990 / 1000] / ticks_per_ns;
    out->p999 = (double)all[(n - 1) * 999 / 1000] / ticks_per_ns;
    free(all);
}

/* ---- throughput while every thread ran --------------------------------------------- */

typedef struct span {
    uint64_t a, b;
} span;

/* The stretches in which a thread made progress: its batch marks with no
 * gap above g between them. Returns how many (into out, cap of them). */
static size_t runs_of(const uint64_t *m, size_t n, uint64_t g, span *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i + 1 < n && k < cap; i++) {
        if (m[i + 1] - m[i] > g)
            continue;
        if (k > 0 && out[k - 1].b == m[i])
            out[k - 1].b = m[i + 1];
        else
            out[k++] = (span){m[i], m[i + 1]};
    }
    return k;
}

/* x = x intersect y (both sorted, disjoint); returns the new count. */
static size_t intersect(span *x, size_t nx, const span *y, size_t ny, span *tmp)
{
    size_t i = 0, j = 0, k = 0;
    while (i < nx && j < ny) {
        uint64_t a = x[i].a > y[j].a ? x[i].a : y[j].a;
        uint64_t b = x[i].b < y[j].b ? x[i].b : y[j].b;
        if (a < b)
            tmp[k++] = (span){a, b};
        if (x[i].b < y[j].b)
            i++;
        else
            j++;
    }
    memcpy(x, tmp, k * sizeof *x);
    return k;
}

/* Aggregate Mops/s over the time in which EVERY thread was making progress
 * (each thread's batch marks at most g apart), and that time's share of the
 * run: on a machine shared with other jobs the threads are descheduled for
 * milliseconds at a time, and a figure over the whole run mixes 2 threads
 * running together with 1 running alone; this one counts only the batches
 * that began and ended while all were running. 0 when not sampled or a
 * thread's marks overflowed. */
static void together(const worker *ws, int threads, rep *out)
{
    out->mops_together = out->together_share = 0;
    uint64_t g = (uint64_t)(20000.0 * ticks_per_ns); /* 20 us */
    size_t total = 0;
    for (int i = 0; i < threads; i++) {
        const worker *w = &ws[i];
        if (w->marks == NULL || w->nlat < 2 || w->nlat > w->nmarks_cap)
            return;
        /* a batch may be slow by itself (proxy_cycle: 64 us): 8 x the median gap */
        uint64_t d[257];
        size_t nd = 0;
        for (size_t k = 1; k < w->nlat && nd < 257; k += 1 + w->nlat / 257)
            d[nd++] = w->marks[k] - w->marks[k - 1];
        for (size_t a = 1; a < nd; a++)
            for (size_t b = a; b > 0 && d[b - 1] > d[b]; b--) {
                uint64_t t = d[b];
                d[b] = d[b - 1];
                d[b - 1] = t;
            }
        if (nd > 0 && 8 * d[nd / 2] > g)
            g = 8 * d[nd / 2];
        total += w->nlat;
    }
    span *all = malloc(total * sizeof *all), *mine = malloc(total * sizeof *mine),
         *tmp = malloc(total * sizeof *tmp);
    if (all == NULL || mine == NULL || tmp == NULL) {
        free(all);
        free(mine);
        free(tmp);
        return;
    }
    size_t na = runs_of(ws[0].marks, ws[0].nlat, g, all, total);
    for (int i = 1; i < threads; i++) {
        size_t nm = runs_of(ws[i].marks, ws[i].nlat, g, mine, total);
        na = intersect(all, na, mine, nm, tmp);
    }
    uint64_t t_all = 0, first = UINT64_MAX, last = 0;
    for (size_t k = 0; k < na; k++)
        t_all += all[k].b - all[k].a;
    double ops = 0;
    for (int i = 0; i < threads; i++) {
        const uint64_t *m = ws[i].marks;
        size_t j = 0;
        first = m[0] < first ? m[0] : first;
        last = m[ws[i].nlat - 1] > last ? m[ws[i].nlat - 1] : last;
        for (size_t k = 0; k + 1 < ws[i].nlat; k++) {
            while (j < na && all[j].b < m[k + 1])
                j++;
            if (j < na && all[j].a <= m[k] && m[k + 1] <= all[j].b)
                ops += BATCH;
        }
    }
    if (t_all > 0)
        out->mops_together = ops / ((double)t_all / ticks_per_ns) * 1e3;
    if (last > first)
        out->together_share = (double)t_all / (double)(last - first);
    free(all);
    free(mine);
    free(tmp);
}

/* One timed run of `threads` threads on `tg`. */
static int run_once(target *tg, variant v, const case_def *c, int threads, double seconds,
                    uint64_t limit, uint64_t ticks, rep *out)
{
    run_ctl *ctl = aligned_alloc(alignof(run_ctl), sizeof *ctl);
    worker *ws = aligned_alloc(alignof(worker), sizeof *ws * (size_t)threads);
    bool sampled = v != V_BASELINE;
    /* progress marks for the closed loops: one per batch, at most ~2.5e6
     * batches per second and thread; one buffer kept across runs and
     * touched before the run, so that no page fault lands in one */
    static uint64_t *marks;
    static size_t marks_len;
    size_t cap = sampled && (c->loop == LOOP_ALLOW_DONE || c->loop == LOOP_PROXY) && limit == UINT64_MAX
                     ? (size_t)(seconds * 2.5e6) + 1024
                     : 0;
    if (cap * (size_t)threads > marks_len) {
        free(marks);
        marks_len = cap * (size_t)threads;
        marks = malloc(marks_len * sizeof *marks);
        if (marks == NULL)
            marks_len = 0;
        else
            memset(marks, 0, marks_len * sizeof *marks);
    }
    if (marks == NULL)
        cap = 0;
    uint32_t *lat = sampled ? malloc(sizeof *lat * LAT_CAP * (size_t)threads) : NULL;
    uint32_t *gaps = c->fail_seeded ? malloc(sizeof *gaps * GAPS * (size_t)threads) : NULL;
    if (ctl == NULL || ws == NULL || (sampled && lat == NULL) || (c->fail_seeded && gaps == NULL)) {
        free(ctl);
        free(ws);
        free(lat);
        free(gaps);
        fprintf(stderr, "bench: out of memory\n");
        return -1;
    }
    atomic_init(&ctl->ready, 0);
    atomic_init(&ctl->go, false);
    atomic_init(&ctl->stop, false);
    bool pinned = threads <= n_cpus;

    for (int i = 0; i < threads; i++) {
        worker *w = &ws[i];
        memset(w, 0, sizeof *w);
        w->run = ctl;
        w->tg = tg;
        w->fn = pick_loop(v, c->loop);
        w->cpu = pinned ? cpu_ids[i] : -1;
        w->limit = limit;
        w->work_ticks = ticks;
        w->lat = lat ? lat + (size_t)i * LAT_CAP : NULL;
        w->marks = cap ? marks + (size_t)i * cap : NULL;
        w->nmarks_cap = w->marks ? cap : 0;
        w->fail_every = c->fail_every;
        if (c->fail_seeded && c->fail_every > 0) {
            /* Each thread its own seeded sequence: the threads' failures
             * fall independently, as they would under real traffic. */
            uint32_t *g = gaps + (size_t)i * GAPS;
            fill_gaps(g, c->fail_every, gap_seed(i, c->fail_every));
            w->gaps = g;
            w->fail_left = g[0];
        } else {
            /* Periodic (churn): spread the threads' failures across the pattern. */
            w->fail_left = c->fail_every == 0
                               ? UINT64_MAX
                               : c->fail_every - ((uint64_t)i * 7u) % c->fail_every;
        }
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        if (pinned) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET((size_t)w->cpu, &set);
            pthread_attr_setaffinity_np(&attr, sizeof set, &set);
        }
        int rc = pthread_create(&w->th, &attr, worker_main, w);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            fprintf(stderr, "bench: pthread_create: %s\n", strerror(rc));
            atomic_store(&ctl->stop, true);
            atomic_store(&ctl->go, true);
            for (int j = 0; j < i; j++)
                pthread_join(ws[j].th, NULL);
            free(gaps);
            free(lat);
            free(ws);
            free(ctl);
            return -1;
        }
    }
    while (atomic_load_explicit(&ctl->ready, memory_order_acquire) < threads)
        sched_yield();

    uint64_t tr0 = atomic_load(&tg->transitions);
    atomic_store_explicit(&ctl->go, true, memory_order_release);
    if (limit == UINT64_MAX) {
        sleep_s(seconds);
        atomic_store_explicit(&ctl->stop, true, memory_order_relaxed);
    }
    for (int i = 0; i < threads; i++)
        pthread_join(ws[i].th, NULL);
    uint64_t tr1 = atomic_load(&tg->transitions);

    memset(out, 0, sizeof *out);
    double busy_ns = 0, ops = 0, per_ns = 0, cpu_ns = 0;
    uint64_t fewest = UINT64_MAX, most = 0;
    int64_t start = INT64_MAX, end = INT64_MIN;
    for (int i = 0; i < threads; i++) {
        const worker *w = &ws[i];
        double el = (double)(w->t1 - w->t0);
        if (el <= 0)
            el = 1;
        busy_ns += el;
        cpu_ns += (double)w->cpu_ns;
        ops += (double)w->ops;
        per_ns += (double)w->ops / el;
        if (w->t0 < start)
            start = w->t0;
        if (w->t1 > end)
            end = w->t1;
        if (w->ops < fewest)
            fewest = w->ops;
        if (w->ops > most)
            most = w->ops;
        out->ops += w->ops;
        out->admitted += w->admitted;
        out->odd += w->odd;
        out->allocs += w->allocs;
    }
    out->ns_per_op = ops > 0 ? busy_ns / ops : 0;
    out->cpu_ns_per_op = ops > 0 ? cpu_ns / ops : 0;
    out->cpu_share = busy_ns > 0 ? cpu_ns / busy_ns : 0;
    out->mops = per_ns * 1e3;
    out->fairness = most > 0 ? (double)fewest / (double)most : 0;
    out->transitions = tr1 - tr0;
    out->trans_per_s = end > start ? (double)out->transitions * 1e9 / (double)(end - start) : 0;
    percentiles(ws, threads, out);
    together(ws, threads, out);
    free(gaps);
    free(lat);
    free(ws);
    free(ctl);
    return 0;
}

static double min_of(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

/* ---- proxy_cycle's work ------------------------------------------------------------ */

/* Calibrates proxy_cycle's work against the no_breaker loop itself, with
 * the thread count the target is judged at (2 threads, pinned, when there
 * are 2 CPUs), the very loop the figures run: 0.2 calibrated a bare spin
 * loop, asked 1000 ns and the no_breaker loop measured 530-590. Each try
 * makes 3 runs of 30 ms and takes the FASTEST run's ns/op (load from other
 * processes only makes a run slower, so the fastest is the least moved;
 * 0.3's first cut matched the p50 of one op's own time instead, which
 * leaves out the loop's per-op cost: the no_breaker loop then measured
 * 5-7 % over the work asked); the deadline moves by (asked - measured)
 * until within 2 %. work_calibrated_ns is that ns/op. Returns 0, or -1
 * when 12 tries never came within 5 %. */
int calibrate_work(int64_t work_ns)
{
    const case_def *pc = NULL;
    for (size_t i = 0; i < n_cases; i++)
        if (case_table[i].loop == LOOP_PROXY)
            pc = &case_table[i];
    double want = (double)work_ns;
    work_asked_ns = work_ns;
    work_ticks = (uint64_t)(want * ticks_per_ns + 0.5);
    work_calibrated_ns = 0;
    work_calibration_tries = 0;
    if (pc == NULL || work_ns <= 0)
        return 0;
    target tg;
    if (target_setup(&tg, V_NONE, pc) != 0)
        return -1;
    double err = 1, ticks = (double)work_ticks, nominal = ticks;
    int threads = n_cpus >= 2 ? 2 : 1;
    for (int t = 0; t < 12; t++) {
        double per[3];
        for (int k = 0; k < 3; k++) {
            rep x;
            if (run_once(&tg, V_NONE, pc, threads, 0.03, UINT64_MAX, work_ticks, &x) != 0)
                return -1;
            per[k] = x.ns_per_op;
        }
        double m = min_of(per, 3);
        work_calibration_tries = t + 1;
        work_calibrated_ns = m;
        err = m / want - 1;
        if (err < 0.02 && err > -0.02)
            return 0;
        ticks += (want - m) * ticks_per_ns;
        ticks = ticks < nominal / 2 ? nominal / 2 : ticks > nominal * 2 ? nominal * 2 : ticks;
        work_ticks = (uint64_t)(ticks + 0.5);
    }
    return err < 0.05 && err > -0.05 ? 0 : -1;
}

/* ---- one figure per subject ------------------------------------------------------------ */

/* Whether the case measured what it claims (checked on the totals). */
static void check_case(result *r)
{
    const case_def *c = r->c;
    if (r->v == V_BASELINE || r->v == V_NONE)
        return;
    switch (c->setup) {
    case SETUP_CLOSED:
        if (r->transitions != 0)
            snprintf(r->broken, sizeof r->broken, "made %" PRIu64 " transitions (must stay closed)",
                     r->transitions);
        else if ((c->loop == LOOP_STATE || c->loop == LOOP_STATS) && r->odd != 0)
            snprintf(r->broken, sizeof r->broken, "the state read said not-closed %" PRIu64
                     " times", r->odd);
        else if ((c->loop == LOOP_ALLOW_DONE || c->loop == LOOP_PROXY) && r->admitted != r->ops)
            snprintf(r->broken, sizeof r->broken, "rejected %" PRIu64 " calls while closed",
                     r->ops - r->admitted);
        break;
    case SETUP_OPEN:
        if (r->admitted != 0 || r->transitions != 0)
            snprintf(r->broken, sizeof r->broken,
                     "admitted %" PRIu64 ", %" PRIu64 " transitions (must stay open)", r->admitted,
                     r->transitions);
        break;
    case SETUP_HALF_OPEN:
        if (r->transitions != 0 || r->admitted == 0)
            snprintf(r->broken, sizeof r->broken,
                     "admitted %" PRIu64 ", %" PRIu64 " transitions (must stay half-open)",
                     r->admitted, r->transitions);
        break;
    case SETUP_CHURN:
        if (r->transitions == 0)
            snprintf(r->broken, sizeof r->broken, "made no transition");
        break;
    case SETUP_NONE:
        break;
    }
}

static double max_of(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

/* Measures the subjects of one group at one thread count. Their runs are
 * interleaved (warm-ups first, then rep 1 of each, rep 2 of each, ...) so
 * that a burst of load from other processes hits all of them alike and the
 * ratios between them stay meaningful on a shared machine. A no_breaker
 * subject in the group is the reference of the others' overhead, rep by
 * rep. Returns the number of subjects whose case is broken, or -1. */
int measure_group(const options *o, const subject *sub, int n, int threads)
{
    if (n_results + (size_t)n > cap_results) {
        size_t cap = cap_results ? cap_results * 2 : 64;
        while (cap < n_results + (size_t)n)
            cap *= 2;
        result *nr = realloc(results, cap * sizeof *nr);
        if (nr == NULL)
            return -1;
        results = nr;
        cap_results = cap;
    }
    enum { NS, MOPS, TRANS, FAIR, P50, P99, P999, OVER, CPU, SHARE, TOG, TOGS, N_SERIES };
    static double series[MAX_GROUP][N_SERIES][MAX_REPS];
    result *res = &results[n_results];
    uint64_t limit = o->ops ? o->ops : UINT64_MAX;
    int none = -1;
    rep x;
    for (int k = 0; k < n; k++) {
        result *r = &res[k];
        memset(r, 0, sizeof *r);
        r->c = sub[k].c;
        r->order = sub[k].order;
        r->v = sub[k].v;
        r->threads = threads;
        r->pinned = threads <= n_cpus;
        r->reps = o->reps;
        if (sub[k].v == V_NONE)
            none = k;
        if (o->warmup > 0 && !o->ops &&
            run_once(sub[k].tg, sub[k].v, sub[k].c, threads, o->warmup, limit, work_ticks,
                     &x) != 0)
            return -1;
    }
    for (int i = 0; i < o->reps; i++) {
        for (int k = 0; k < n; k++) {
            result *r = &res[k];
            if (run_once(sub[k].tg, sub[k].v, sub[k].c, threads, o->seconds, limit, work_ticks,
                         &x) != 0)
                return -1;
            double *s[N_SERIES];
            for (int j = 0; j < N_SERIES; j++)
                s[j] = &series[k][j][i];
            *s[NS] = x.ns_per_op;
            *s[MOPS] = x.mops;
            *s[TRANS] = x.trans_per_s;
            *s[FAIR] = x.fairness;
            *s[P50] = x.p50;
            *s[P99] = x.p99;
            *s[P999] = x.p999;
            *s[CPU] = x.cpu_ns_per_op;
            *s[SHARE] = x.cpu_share;
            *s[TOG] = x.mops_together;
            *s[TOGS] = x.together_share;
            r->ops += x.ops;
            r->admitted += x.admitted;
            r->odd += x.odd;
            r->allocs += x.allocs;
            r->transitions += x.transitions;
        }
        for (int k = 0; none >= 0 && k < n; k++) {
            double base = series[none][NS][i];
            series[k][OVER][i] = base > 0 ? (series[k][NS][i] - base) / base : 0;
        }
    }
    int broken = 0;
    for (int k = 0; k < n; k++) {
        result *r = &res[k];
        double (*s)[MAX_REPS] = series[k];
        r->ns_min = min_of(s[NS], o->reps);
        r->ns_max = max_of(s[NS], o->reps);
        r->ns_med = median(s[NS], o->reps);
        r->mops_med = median(s[MOPS], o->reps);
        r->trans_med = median(s[TRANS], o->reps);
        r->fairness = median(s[FAIR], o->reps);
        r->p50_ns = median(s[P50], o->reps);
        r->p99_ns = median(s[P99], o->reps);
        r->p999_ns = median(s[P999], o->reps);
        r->cpu_ns_med = median(s[CPU], o->reps);
        r->cpu_share = median(s[SHARE], o->reps);
        r->mops_together = median(s[TOG], o->reps);
        r->together_share = median(s[TOGS], o->reps);
        r->has_overhead = none >= 0 && k != none;
        r->overhead = r->has_overhead ? median(s[OVER], o->reps) : 0;
        check_case(r);
        broken += r->broken[0] != 0;
        fprintf(stderr, "  %-16s %-13s w=%-5d p=%-5d threads=%-3d %9.2f ns/op %9.2f Mops/s"
                " p99.9 %8.0f ns %12" PRIu64 " ops%s%s\n", r->c->name, variant_names[r->v],
                r->c->window, r->c->probes, threads, r->ns_med, r->mops_med, r->p999_ns, r->ops,
                r->broken[0] ? "  INVALID: " : "", r->broken);
    }
    n_results += (size_t)n;
    return broken;
}

const result *find_result(const char *name, variant v, int window, int probes, int threads)
{
    for (size_t i = 0; i < n_results; i++) {
        const result *r = &results[i];
        if (r->v == v && r->threads == threads && strcmp(r->c->name, name) == 0 &&
            (v == V_BASELINE || (r->c->window == window && r->c->probes == probes)))
            return r;
    }
    return NULL;
}

double scaling_of(const result *r)
{
    const result *one = find_result(r->c->name, r->v, r->c->window, r->c->probes, 1);
    if (one == NULL || one->mops_med <= 0)
        return 0;
    return r->mops_med / ((double)r->threads * one->mops_med);
}
