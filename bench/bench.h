/*
 * What the timed programs (bench_scale, bench_closed_mixed, bench_reads,
 * bench_half_open, bench_churn, bench_proxy) share:
 *
 *   cases.c          what is measured: the case table, the breakers' setup,
 *                    the measured loops (one function per variant and loop)
 *   runner.c         how: threads, timed repetitions, latency samples,
 *                    medians, the checks that a case measured what it claims
 *   report.c         what is printed: the Markdown tables, the targets, the
 *                    JSON lines
 *   main.c           the command line and bench_main()
 *   bench.c          the ground floor: settings, the clock, list matching
 *   mutex_breaker.c  the locked baseline breaker
 *   alloc_count.c    heap allocations counted on the measured path
 *   gaps.c           the seeded failure pattern (shared with rmw.c)
 * Each program is one small file naming its cases (scale.c, ...). The
 * programs of their own: memory.c (bench_memory), rmw.c (bench_rmw,
 * shared-line RMWs on the test build), fold.c (bench_fold, the failure
 * path's parts and a projection), prometheus.c (bench_prometheus).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CIRCUIT_BENCH_H
#define CIRCUIT_BENCH_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <pthread.h>

#include "circuit.h"
#include "mutex_breaker.h"
#include "gaps.h"

#define NOINLINE __attribute__((noinline))

/* ---- variants and cases (cases.c) ------------------------------------------ */

typedef enum variant {
    V_CIRCUIT,   /* libcircuit.so */
    V_MUTEX,     /* mutex_breaker: the same semantics behind one mutex */
    V_BASELINE,  /* atomic_floor, clock, empty: no breaker at all */
    V_NONE,      /* no_breaker: a case's own loop without the breaker (proxy_cycle) */
    V__COUNT
} variant;
extern const char *const variant_names[V__COUNT];

typedef enum setup_kind {
    SETUP_NONE,      /* baselines, no_breaker */
    SETUP_CLOSED,    /* new breaker, never trips */
    SETUP_OPEN,      /* tripped once, open for 1e15 ns */
    SETUP_HALF_OPEN, /* tripped, open for 1 ns, one probe admitted and settled */
    SETUP_CHURN      /* trips and closes every few hundred calls */
} setup_kind;

typedef enum loop_kind {
    LOOP_ALLOW_DONE, LOOP_ALLOW, LOOP_STATE, LOOP_STATS, LOOP_PROXY,
    LOOP_ATOMIC, LOOP_CLOCK, LOOP_EMPTY
} loop_kind;

typedef struct case_def {
    const char *name;
    setup_kind  setup;
    loop_kind   loop;
    int         window, probes; /* 0 for baselines */
    uint64_t    fail_every;     /* 1 failure in N admitted calls (see fail_seeded); 0: none */
    unsigned    variants;       /* 1u << variant: which variants run it */
    bool        fail_seeded;    /* true: each result fails with probability 1/fail_every,
                                 * seeded pseudo-random per thread (geometric gaps);
                                 * false: exactly every fail_every-th (churn) */
} case_def;

/* The family of the closed_mixed_* cases, the name --case also accepts. */
#define MIXED_FAMILY "closed_mixed"
/* "closed_mixed" for a case of that family, else NULL. */
const char *case_family(const case_def *c);
/* A case's failure fraction (0: none). */
double case_failure_fraction(const case_def *c);

extern const case_def case_table[];
extern const size_t n_cases;
extern const case_def baseline_table[];
extern const size_t n_baselines;

typedef struct policy_arg {
    int64_t trip_failures; /* open at this many failures in the window */
} policy_arg;

/* One breaker of either variant (or none), with its transition count. */
typedef struct target {
    variant              v;
    circuit_breaker     *cb;
    mutex_breaker              *mb;
    policy_arg           pol;
    atomic_uint_fast64_t transitions;
} target;

/* Builds the breaker of case `c` for variant `v` and brings it to the case's
 * state (nothing for no_breaker). Returns 0, or prints why not and returns -1. */
int  target_setup(target *tg, variant v, const case_def *c);
void target_free(target *tg);

/* ---- threads and their loops (cases.c runs them, runner.c starts them) ----- */

#define BATCH 64      /* ops between two looks at the stop flag; one of them timed */
#define LAT_CAP 65536 /* latency samples kept per thread and run (a ring) */

typedef struct run_ctl {
    alignas(128) atomic_int ready;
    alignas(128) atomic_bool go;
    atomic_bool stop;
} run_ctl;

typedef struct worker worker;
typedef void (*loop_fn)(worker *w);

struct worker {
    alignas(128) run_ctl *run;
    target   *tg;
    loop_fn   fn;
    int       cpu;          /* -1: unpinned */
    uint64_t  limit;        /* stop after this many ops (UINT64_MAX: on the stop flag) */
    uint64_t  fail_every;   /* 0: never fail */
    uint64_t  fail_left;    /* admitted calls until the next failure */
    const uint32_t *gaps;   /* fail_seeded: GAPS gaps between failures, used in turn */
    uint64_t  work_ticks;   /* proxy_cycle: busy work between allow and done, in ticks */
    uint32_t *lat;          /* LAT_CAP latency samples in ticks (NULL: not sampled) */
    uint64_t *marks;        /* the tick at each batch's start (nmarks_cap of them, with lat) */
    uint64_t  nmarks_cap;
    /* results */
    uint64_t  ops, admitted, odd, allocs, nlat;
    int64_t   t0, t1;
    int64_t   cpu_ns;       /* the thread's CPU time over the run (CLOCK_THREAD_CPUTIME_ID) */
    pthread_t th;
};

loop_fn pick_loop(variant v, loop_kind k);

/* ---- time (runner.c) --------------------------------------------------------- */

int64_t now_ns(void);
void    sleep_s(double seconds);

/* A cheap, ordered time stamp: the TSC on x86-64, the virtual counter on
 * aarch64, CLOCK_MONOTONIC elsewhere; ticks_per_ns converts. */
static inline uint64_t bench_tick(void)
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
extern double ticks_per_ns;
extern double tick_overhead_ns; /* an empty timed pair: included in every sample */
const char *tick_source(void);

/* proxy_cycle's busy work: spin on the time stamp counter until `ticks`
 * have passed. Time, not a count of loop turns: a turn's time moves with
 * the load on this vCPU's sibling and with the clock speed, so a calibrated
 * count of turns came out anywhere from 0.55x to 1.3x the work asked on
 * this machine; a deadline is the same wall time whatever the CPU does
 * meanwhile (as an upstream's answer would be). */
static inline uint64_t work_tick(void)
{
#if defined(__x86_64__)
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi) : : "memory");
    return (uint64_t)hi << 32 | lo;
#elif defined(__aarch64__)
    uint64_t v;
    __asm__ volatile("mrs %0, cntvct_el0" : "=r"(v) : : "memory");
    return v;
#else
    return (uint64_t)now_ns();
#endif
}
static inline void bench_work(uint64_t ticks)
{
    uint64_t t0 = work_tick();
    while (work_tick() - t0 < ticks)
        __asm__ volatile("" : : : "memory");
}
/* proxy_cycle's work per op in ticks, calibrated against the no_breaker
 * loop itself (calibrate_work) until its measured time per op is --work-ns
 * within 2 %; work_calibrated_ns is that last measurement (0: not done). */
extern uint64_t work_ticks;
extern int64_t  work_asked_ns;      /* --work-ns */
extern double   work_calibrated_ns;
extern int      work_calibration_tries;
int calibrate_work(int64_t work_ns); /* 0, or -1 when never within 5 % */

/* ---- options (main.c) ------------------------------------------------------ */

#define MAX_REPS 1000

typedef struct options {
    double   seconds, warmup;
    int      reps;
    uint64_t ops;            /* --ops: fixed ops per thread instead of --seconds */
    int      threads[64];
    int      nthreads;
    bool     quick;
    int64_t  work_ns;        /* proxy_cycle's work between allow and done */
    const char *cases;       /* comma list, NULL: all */
    const char *windows;     /* comma list of window sizes, NULL: all */
    const char *probes;      /* comma list of probe counts, NULL: all */
    const char *variants;    /* comma list, NULL: all */
    const char *json;
} options;

/* A timed program: its name, what it measures, and the cases (and
 * baselines) it runs by default (a --case list). */
typedef struct bench_program {
    const char *name;
    const char *what;
    const char *cases;
    const char *windows; /* its default --window list (NULL: every window) */
} bench_program;

/* The program's main: parses the options, measures the cases at every
 * thread count, prints the tables and the targets. Exit status: 0; 2 on a
 * usage or I/O error; 3 when a case did not measure what it claims. */
int bench_main(int argc, char **argv, const bench_program *p);
extern const char *bench_name; /* the running program's name */

bool in_list(const char *list, const char *name);
/* The case is named in --case (by its name or its family's). */
bool case_selected(const char *list, const case_def *c);

/* ---- measuring (runner.c) ------------------------------------------------------ */

extern int n_cpus;                /* CPUs in the affinity mask */
extern int cpu_ids[];             /* their ids */

void runner_init(void); /* CPUs, tick and spin calibration */

/* One figure: a subject (a breaker of one variant in one case, or a baseline)
 * at one thread count, over o->reps interleaved repetitions. */
typedef struct result {
    const case_def *c;
    int      order;   /* table position: baselines first, then the cases */
    variant  v;
    int      threads;
    bool     pinned;
    int      reps;
    double   ns_med, ns_min, ns_max, mops_med, trans_med;
    double   p50_ns, p99_ns, p999_ns; /* medians over the reps; 0: not sampled */
    double   fairness;                /* median over the reps of fewest / most ops of a thread */
    double   cpu_ns_med;              /* median over the reps of the threads' CPU time per op */
    double   cpu_share;               /* median over the reps of CPU time / wall time, the
                                       * threads' mean: < 1 when other processes took the CPUs */
    double   mops_together;           /* median over the reps of the aggregate Mops/s while
                                       * every thread was running (0: not sampled) */
    double   together_share;          /* median over the reps: that time / the run's time */
    double   overhead;                /* proxy_cycle: median of (ns - no_breaker ns) / no_breaker ns */
    bool     has_overhead;
    uint64_t ops, admitted, odd, allocs, transitions; /* summed over the reps */
    char     broken[160];                              /* "" or why the case is invalid */
} result;

extern result *results;
extern size_t  n_results;

typedef struct subject {
    target         *tg;
    variant         v;
    const case_def *c;
    int             order;
} subject;

#define MAX_GROUP 4

/* Measures the subjects of one group at one thread count, their reps
 * interleaved. Returns how many of them are broken, or -1 on error. */
int measure_group(const options *o, const subject *sub, int n, int threads);

const result *find_result(const char *name, variant v, int window, int probes, int threads);

/* aggregate Mops/s at N threads / (N x the 1-thread Mops/s); 0: no 1-thread figure */
double scaling_of(const result *r);

/* ---- reporting (report.c) ------------------------------------------------------ */

void print_header(FILE *f, const options *o);
void print_tables(FILE *f);
void print_targets(FILE *f);
void print_mixed_table(FILE *f);
int  write_json(const char *path);

#endif
