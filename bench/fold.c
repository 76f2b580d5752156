/*
 * bench_fold: the measured parts of the failure path's cost, and
 * their projection to machines with more CPUs than this one (16, 32, 64).
 *
 * SPDX-License-Identifier: MIT
 *
 * usage: bench_fold [--cpus LIST] [--seconds S] [--json FILE]
 *   (LIST: the CPU counts the core is built for, default 2,16,32,64,128;
 *   JSON lines appended to FILE)
 *
 * A closed failure (src/closed.c) reads one per-CPU cell per CPU the
 * breaker was built for (O(CPUs) loads, no write), slides the window over
 * the successes counted since the last exact point (clearing the failure
 * bits of the positions that leave: O(window / 64) words), asks the trip
 * policy and makes a few shared-line RMWs (L8: the state word's CAS, a
 * descriptor, the bitmap update). This program
 * measures those parts on this machine:
 *
 *   1. failure path by CPU count: the release core (circuit_static, linked
 *      statically with sysconf(_SC_NPROCESSORS_CONF) wrapped at link time:
 *      -Wl,--wrap=sysconf, so the core sizes its per-CPU array for N CPUs
 *      without any seam in src/), one thread, windows 64 and 1024: ns per
 *      failure when every result fails, and per failure on top of d
 *      successes (d = 9, 99, 999: 10 %, 1 %, 0.1 % failures), each failure
 *      timed alone, the median of thousands. One child process per N (the
 *      core reads the CPU count once per process). The lines are in this
 *      CPU's cache here; the slope in N is the per-cell read's own cost.
 *   2. a per-CPU line read when another CPU has just written it: N lines
 *      (one 64-byte line each, as the cells); a writer thread on the other
 *      CPU adds to every line, then a reader on this CPU sums all N
 *      (independent loads, as the fold's), in turns; the median sum, against
 *      the same sum with no writer (lines local).
 *   3. a shared-line RMW whose line the other CPU wrote last: two threads
 *      taking turns to add to one line (ping-pong), ns per hand-over.
 *
 * The projection (a projection: no machine with more than 2 CPUs was
 * available) is then
 *   T_fail(N) = F_1(2) + N x t_line + h x t_rmw
 * where F_1(2) is part 1's failure cost at 2 CPUs with its lines local,
 * t_line part 2's remote line read and t_rmw part 3's hand-over: every
 * other CPU's cell written since the last failure (busy CPUs), and the h
 * shared lines a failure RMWs, last written by another CPU: the state
 * word's line (the word, the descriptor and, for a window <= 64, the
 * window's bitmap: h = 1), plus the line of the bitmap words it changes for
 * a larger window (h = 2 for window 1024). Failures on one
 * breaker are ordered by the state word's CAS (one exact point at a time,
 * a loser reads again), so they cannot be made faster than 1 / T_fail(N)
 * per second: the failure rate at which the fold becomes the bottleneck.
 * Exit 0, or 1 when a child failed.
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "circuit.h"

/* ---- the CPU count the core sees (link-time wrap, this program only) ---- */

long __real_sysconf(int name);
long __wrap_sysconf(int name);
static long forced_cpus;

long __wrap_sysconf(int name)
{
    if (name == _SC_NPROCESSORS_CONF && forced_cpus > 0)
        return forced_cpus;
    return __real_sysconf(name);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}

/* Short intervals: the time stamp counter (this VM's CLOCK_MONOTONIC reads
 * in steps of about 10 ns), converted with ticks_per_ns. */
static double ticks_per_ns = 1.0;

static inline uint64_t tick(void)
{
#if defined(__x86_64__)
    uint32_t lo, hi;
    __asm__ volatile("lfence\n\trdtsc\n\tlfence" : "=a"(lo), "=d"(hi) : : "memory");
    return (uint64_t)hi << 32 | lo;
#elif defined(__aarch64__)
    uint64_t v;
    __asm__ volatile("isb\n\tmrs %0, cntvct_el0\n\tisb" : "=r"(v) : : "memory");
    return v;
#else
    return (uint64_t)now_ns();
#endif
}

static void calibrate_ticks(void)
{
    int64_t n0 = now_ns();
    uint64_t t0 = tick();
    while (now_ns() - n0 < 20000000) {
    }
    int64_t n1 = now_ns();
    uint64_t t1 = tick();
    ticks_per_ns = (double)(t1 - t0) / (double)(n1 - n0);
}

/* ns of a tick interval */
static inline double tns(uint64_t a, uint64_t b)
{
    return (double)(b - a) / ticks_per_ns;
}

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

static int cpus[CPU_SETSIZE], ncpus;
static const long line_counts[] = {16, 32, 64, 128};
static double line_ns[4]; /* ns per remote line in a sum, by line_counts */
static double seconds = 0.2;

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET((size_t)cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* ---- 1. the failure path by CPU count ----------------------------------- */

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

/* What an empty timed pair reads (median of 1001), in ns. */
static double pair_ns;

static void calibrate_pair(void)
{
    static double d[1001];
    calibrate_ticks();
    for (int i = 0; i < 1001; i++) {
        uint64_t t0 = tick();
        d[i] = tns(t0, tick());
    }
    pair_ns = median(d, 1001);
}

/* The failure path alone: d successes (untimed), then one failure timed by
 * itself (allow + done(failure)), many times; the median of the failures'
 * times minus an empty timed pair, so that other processes' load (which
 * hits a few of the samples) does not move it. *succ_ns: a success the
 * same way. */
static double failure_ns(circuit_breaker *b, long d, double *succ_ns)
{
    enum { SAMPLES = 20001 };
    static double f[SAMPLES], sc[SAMPLES];
    int n = 0;
    int64_t end = now_ns() + (int64_t)(seconds * 1e9);
    while (n < SAMPLES && (n < 2001 || now_ns() < end)) {
        circuit_ticket t;
        for (long i = 0; i < d - 1; i++)
            if (circuit_allow(b, NULL, &t, NULL))
                circuit_done(&t, 0);
        uint64_t t0 = tick();
        if (d > 0 && circuit_allow(b, NULL, &t, NULL))
            circuit_done(&t, 0);
        uint64_t t1 = tick();
        if (circuit_allow(b, NULL, &t, NULL))
            circuit_done(&t, -1);
        uint64_t t2 = tick();
        sc[n] = tns(t0, t1);
        f[n] = tns(t1, t2);
        n++;
    }
    *succ_ns = d > 0 ? median(sc, n) - pair_ns : 0;
    return median(f, n) - pair_ns;
}

/* One child: the core built for n CPUs; prints
 *   fail N WINDOW D NS_PER_FAILURE   (the successes' share taken out) */
static int child_fail(long n)
{
    forced_cpus = n;
    pin(cpus[0]);
    calibrate_pair();
    static const int windows[] = {64, 1024};
    for (int wi = 0; wi < 2; wi++) {
        circuit_spec s;
        char err[256] = "";
        memset(&s, 0, sizeof s);
        s.config.window = windows[wi];
        s.config.probes = 1;
        s.config.open_for_ns = INT64_C(1000000000000000);
        s.config.probe_timeout_ns = INT64_C(1000000000000000);
        s.policy.trip = trip_never;
        s.policy.probe = probe_close;
        s.classify = classify_zero_ok;
        trip_at = INT64_MAX;
        circuit_breaker *b;
        if (circuit_new(&b, &s, err, sizeof err) != 0) {
            fprintf(stderr, "bench_fold: circuit_new: %s\n", err);
            return 1;
        }
        static const long ds[] = {0, 9, 99, 999};
        for (int k = 0; k < 4; k++) {
            double succ;
            double c = failure_ns(b, ds[k], &succ);
            printf("fail %ld %d %ld %.2f %.2f\n", n, windows[wi], ds[k], c, succ);
        }
        if (circuit_get_state(b) != CIRCUIT_CLOSED) {
            fprintf(stderr, "bench_fold: the breaker left closed\n");
            return 1;
        }
        circuit_free(b);
    }
    fflush(stdout);
    return 0;
}

/* ---- 2. and 3. lines written by the other CPU -------------------------- */

typedef struct line {
    _Alignas(64) _Atomic uint64_t v;
} line;

static line *lines;
static long nlines;
/* the hand-shake: the writer writes every line then publishes pass p (odd);
 * the reader sums them and publishes p + 1 (even) */
static _Alignas(64) _Atomic uint64_t pass;
static _Atomic bool stop_writer;

static void *writer(void *arg)
{
    (void)arg;
    pin(cpus[1]);
    uint64_t p = 0;
    while (!atomic_load_explicit(&stop_writer, memory_order_relaxed)) {
        if (atomic_load_explicit(&pass, memory_order_acquire) != p)
            continue;
        for (long i = 0; i < nlines; i++)
            atomic_fetch_add_explicit(&lines[i].v, 1, memory_order_relaxed);
        atomic_store_explicit(&pass, p + 1, memory_order_release);
        p += 2;
    }
    return NULL;
}

/* Median ns of a sum of the n lines: right after the writer wrote every
 * one of them (remote), or with no writer (local). */
static double sum_lines(long n, bool remote)
{
    enum { SAMPLES = 4001 };
    static double d[SAMPLES];
    uint64_t sink = 0, p = 1;
    for (int k = 0; k < SAMPLES; k++) {
        if (remote) {
            while (atomic_load_explicit(&pass, memory_order_acquire) != p) {
            }
        }
        uint64_t t0 = tick();
        for (long i = 0; i < n; i++)
            sink += atomic_load_explicit(&lines[i].v, memory_order_relaxed);
        uint64_t t1 = tick();
        d[k] = tns(t0, t1) - pair_ns;
        if (remote) {
            atomic_store_explicit(&pass, p + 1, memory_order_release);
            p += 2;
        }
    }
    if (sink == 1)
        fputc(' ', stderr); /* keeps the loads */
    return median(d, SAMPLES);
}

static void lines_part(FILE *json)
{
    const long *ns_ = line_counts;
    printf("\n## A per-CPU line read when another CPU wrote it (part 2)\n\n");
    printf("| lines | sum, lines local: ns | per line | sum right after the other CPU wrote "
           "every line: ns | per line |\n|--:|--:|--:|--:|--:|\n");
    lines = aligned_alloc(64, sizeof(line) * 4096);
    memset(lines, 0, sizeof(line) * 4096);
    pin(cpus[0]);
    calibrate_pair();
    for (int k = 0; k < 4; k++) {
        nlines = ns_[k];
        double alone = sum_lines(nlines, false);
        atomic_store(&stop_writer, false);
        atomic_store(&pass, 0);
        pthread_t th;
        pthread_create(&th, NULL, writer, NULL);
        double with = sum_lines(nlines, true);
        atomic_store(&stop_writer, true);
        pthread_join(th, NULL);
        line_ns[k] = with / (double)nlines;
        printf("| %ld | %.1f | %.2f | %.1f | %.2f |\n", nlines, alone, alone / (double)nlines,
               with, with / (double)nlines);
        if (json)
            fprintf(json, "{\"case\":\"fold_parts\",\"part\":\"line_read\",\"lines\":%ld,"
                    "\"sum_local_ns\":%.4g,\"sum_remote_ns\":%.4g,\"ns_per_remote_line\":%.4g}\n",
                    nlines, alone, with, line_ns[k]);
    }
    free(lines);
}

static _Alignas(64) _Atomic uint64_t pp;
static _Atomic bool pp_go;
enum { PP_TOTAL = 2000000, PP_CHUNK = 1000 };
static int64_t pp_stamp[PP_TOTAL / PP_CHUNK + 1];

static void *pong(void *arg)
{
    uint64_t parity = (uint64_t)(uintptr_t)arg;
    pin(cpus[parity]);
    while (!atomic_load(&pp_go))
        sched_yield();
    for (;;) {
        uint64_t v = atomic_load_explicit(&pp, memory_order_acquire);
        if (v >= PP_TOTAL)
            break;
        if ((v & 1) == parity) {
            if (parity == 0 && v % PP_CHUNK == 0)
                pp_stamp[v / PP_CHUNK] = now_ns();
            atomic_fetch_add_explicit(&pp, 1, memory_order_acq_rel);
        }
    }
    return NULL;
}

/* ns per hand-over of one line between the two CPUs: the median over
 * chunks of 1000 hand-overs (a chunk in which a thread was descheduled
 * is an outlier, not the median). */
static double rmw_part(FILE *json)
{
    static double d[PP_TOTAL / PP_CHUNK];
    atomic_store(&pp, 0);
    atomic_store(&pp_go, false);
    pthread_t a, b;
    pthread_create(&a, NULL, pong, (void *)(uintptr_t)0);
    pthread_create(&b, NULL, pong, (void *)(uintptr_t)1);
    atomic_store(&pp_go, true);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    int n = 0;
    for (int i = 1; i < PP_TOTAL / PP_CHUNK; i++)
        d[n++] = (double)(pp_stamp[i] - pp_stamp[i - 1]) / PP_CHUNK;
    double m = median(d, n);
    printf("\n## A shared-line RMW handed over between the CPUs (part 3)\n\n"
           "ns per hand-over (two threads taking turns on one line; median over chunks of %d "
           "of %d hand-overs): %.1f\n", PP_CHUNK, PP_TOTAL, m);
    if (json)
        fprintf(json, "{\"case\":\"fold_parts\",\"part\":\"rmw_handover\",\"ns\":%.4g}\n", m);
    return m;
}

int main(int argc, char **argv)
{
    const char *list = "2,16,32,64,128", *json_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--cpus") == 0 && i + 1 < argc)
            list = argv[++i];
        else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
            json_path = argv[++i];
        else if (strcmp(argv[i], "--child") == 0 && i + 1 < argc)
            return child_fail(atol(argv[++i]));
        else {
            fprintf(stderr, "usage: bench_fold [--cpus LIST] [--seconds S] [--json FILE]\n");
            return 2;
        }
    }
    if (!(seconds > 0))
        seconds = 0.2;
    cpu_set_t mask;
    CPU_ZERO(&mask);
    if (sched_getaffinity(0, sizeof mask, &mask) == 0)
        for (int i = 0; i < CPU_SETSIZE; i++)
            if (CPU_ISSET((size_t)i, &mask))
                cpus[ncpus++] = i;
    if (ncpus < 2) {
        fprintf(stderr, "bench_fold: needs 2 CPUs in the affinity mask\n");
        return 1;
    }
    FILE *json = json_path ? fopen(json_path, "a") : NULL;
    if (json_path && json == NULL) {
        fprintf(stderr, "bench_fold: %s: %s\n", json_path, strerror(errno));
        return 1;
    }

    /* part 1: one child per CPU count (--child N), its lines on a pipe */
    printf("# bench_fold: the failure path's parts (a projection follows)\n\n");
    printf("## The failure path by the CPU count the core is built for (part 1; 1 thread, "
           "lines local)\n\n| CPUs | window | successes between failures | ns per failure | "
           "ns per success |\n|--:|--:|--:|--:|--:|\n");
    fflush(stdout);
    /* at the first N (2): ns per failure with 99 successes between (1 %),
     * windows 64 and 1024, and ns per success */
    double f1[2] = {0, 0}, succ_ns = 0;
    long first_n = 0;
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0)
        return 1;
    self[sl] = '\0';
    int bad = 0;
    for (const char *p = list; *p;) {
        long n = strtol(p, (char **)&p, 10);
        if (*p == ',')
            p++;
        if (n < 1)
            continue;
        if (first_n == 0)
            first_n = n;
        int fd[2];
        if (pipe(fd) != 0)
            return 1;
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            dup2(fd[1], 1);
            close(fd[0]);
            char nb[32], sb[32];
            snprintf(nb, sizeof nb, "%ld", n);
            snprintf(sb, sizeof sb, "%g", seconds);
            execl(self, self, "--seconds", sb, "--child", nb, (char *)NULL);
            _exit(127);
        }
        close(fd[1]);
        FILE *in = fdopen(fd[0], "r");
        char ln[256];
        while (in && fgets(ln, sizeof ln, in)) {
            long cn, d;
            int w;
            double ns, succ;
            if (sscanf(ln, "fail %ld %d %ld %lf %lf", &cn, &w, &d, &ns, &succ) != 5)
                continue;
            printf("| %ld | %d | %ld | %.1f | %.2f |\n", cn, w, d, ns, succ);
            if (json)
                fprintf(json, "{\"case\":\"fold_parts\",\"part\":\"failure_path\",\"cpus\":%ld,"
                        "\"window\":%d,\"successes_between\":%ld,\"ns_per_failure\":%.4g,"
                        "\"ns_per_success\":%.4g}\n", cn, w, d, ns, succ);
            if (cn == first_n && d == 99) {
                f1[w == 64 ? 0 : 1] = ns;
                succ_ns = succ;
            }
        }
        if (in)
            fclose(in);
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }

    lines_part(json);
    double t_rmw = rmw_part(json);

    printf("\n## Projection (NOT measured on such a machine: this one has %d CPUs)\n\n"
           "T_fail(N) = F_1 + N x t_line(N) + h x t_rmw, with F_1 the failure path at %ld CPUs "
           "with 99 successes between failures (part 1: %.1f ns window 64, %.1f ns window "
           "1024), t_line(N) part 2's ns per line in a sum of N lines another CPU wrote, t_rmw = %.1f ns "
           "(part 3), h the shared lines a failure RMWs (1 for window 64: the state word's line "
           "holds the word, the descriptor and the window's bitmap; 2 for window 1024: one "
           "more for its bitmap words). Failures on one breaker are ordered by its state "
           "word, so 1 / T_fail is "
           "the most failures per second one breaker can count; the last columns give the "
           "failure fraction at which that is reached when every CPU makes calls at a rate "
           "of r per second (r = %.1f M/s: this machine's 1-thread success loop, %.2f ns per "
           "call; r = 1 M/s: a call with 1 us of work).\n\n", ncpus, first_n, f1[0], f1[1],
           t_rmw, succ_ns > 0 ? 1e3 / succ_ns : 0, succ_ns);
    printf("| CPUs | t_line ns | window | T_fail ns | failures/s per breaker at most | "
           "bottleneck at failure fraction, r = loop | r = 1 M/s |\n"
           "|--:|--:|--:|--:|--:|--:|--:|\n");
    double r_loop = succ_ns > 0 ? 1e9 / succ_ns : 0;
    for (int k = 0; k < 3; k++) {
        long n = line_counts[k];
        double tl = line_ns[k] > 0 ? line_ns[k] : 0;
        for (int wi = 0; wi < 2; wi++) {
            double tf = f1[wi] + (double)n * tl + (wi ? 2 : 1) * t_rmw;
            double fmax = tf > 0 ? 1e9 / tf : 0;
            double p_loop = r_loop > 0 ? fmax / ((double)n * r_loop) : 0;
            double p_1us = fmax / ((double)n * 1e6);
            p_loop = p_loop > 1 ? 1 : p_loop;
            p_1us = p_1us > 1 ? 1 : p_1us;
            printf("| %ld | %.1f | %d | %.0f | %.3g | %.2g %% | %.2g %% |\n", n, tl,
                   wi ? 1024 : 64, tf, fmax, 100 * p_loop, 100 * p_1us);
            if (json)
                fprintf(json, "{\"case\":\"fold_projection\",\"cpus\":%ld,\"window\":%d,"
                        "\"t_line_ns\":%.4g,\"t_fail_ns\":%.4g,\"failures_per_s_max\":%.4g,"
                        "\"bottleneck_fraction_loop\":%.4g,\"bottleneck_fraction_1us\":%.4g}\n",
                        n, wi ? 1024 : 64, tl, tf, fmax, p_loop, p_1us);
        }
    }
    if (json)
        fclose(json);
    return bad;
}
