/*
 * circuit-bench: how fast one shared breaker is under 1..N threads, next to
 * the baselines it has to be judged against, in one binary and one run.
 *
 * SPDX-License-Identifier: MIT
 *
 * Variants
 *   circuit        the installed-style shared library (libcircuit.so).
 *   mutex_breaker  the sequential reference model (tests/model) behind its one
 *                  pthread mutex, on the real clock: what a simple, correct,
 *                  locked breaker costs.
 *   baseline       atomic_floor (one atomic_fetch_add on one shared counter
 *                  per op), clock (one clock_gettime(CLOCK_MONOTONIC) per op)
 *                  and empty (the measuring loop alone).
 *
 * Cases (every thread works on ONE shared breaker)
 *   closed_success   allow + done(success); trip never trips.
 *   closed_mixed     allow + done, 1 failure in 10 per thread; never trips.
 *   open_reject      allow on a breaker that was tripped once at setup and
 *                    stays open (open_for 1e15 ns).
 *   half_open_probe  allow + done(success) in half-open; the probe policy
 *                    keeps probing; probe_timeout 1e15 ns.
 *   get_state        circuit_get_state on a closed breaker (a metrics read).
 *   churn            trip on the first failure, 1 failure in 256 calls per
 *                    thread, open_for 1 ns, one probe that closes on success
 *                    and reopens on failure: transitions and their delivery
 *                    are on the measured path (transitions/s reported).
 *   Scale rows: closed_success with window 1, 64, 65536; half_open_probe with
 *   probes 1, 64, 65536.
 *
 * Method
 *   Each figure is the median of --reps repetitions (5 by default) of
 *   --seconds each (0.5 by default), after one discarded warm-up run. The
 *   repetitions of the two variants of a case (and of the three baselines)
 *   are interleaved, so that load from other processes hits them alike. Threads are pinned to
 *   distinct CPUs of the process's affinity mask when there are enough;
 *   runs with more threads than CPUs are unpinned and reported apart.
 *   ns/op is per thread: the threads' summed run time over their summed ops.
 *   Mops/s is aggregate: the sum of each thread's ops per second.
 *   An op is one allow (+ one done when admitted), one get_state, one atomic
 *   add, one clock read, or one empty loop turn.
 *
 * The binary also counts heap allocations (it interposes malloc and friends,
 * passing them on to glibc) to report the bytes each breaker allocates and to
 * check that the hot path allocates nothing.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "circuit.h"
#include "circuit_model.h"

#define NOINLINE __attribute__((noinline))

/* ------------------------------------------------------------------------ */
/* Heap accounting: every allocation function is interposed here and passed */
/* on to glibc's own entry points. Each thread counts its allocation calls   */
/* (hot-path check); while `track_on` is set (single-threaded, around        */
/* circuit_new / circuit_free) each block is recorded with its size.         */
/* ------------------------------------------------------------------------ */

#ifndef CIRCUIT_BENCH_NO_MALLOC_HOOKS
#define CIRCUIT_BENCH_NO_MALLOC_HOOKS 0
#endif

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t nmemb, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);
extern void  __libc_free(void *ptr);
extern void *__libc_memalign(size_t alignment, size_t size);

#define TRACK_MAX 4096

static _Thread_local uint64_t tl_alloc_calls;
static atomic_bool track_on;
static struct {
    size_t calls, bytes;        /* allocations recorded */
    size_t frees, freed_bytes;  /* recorded blocks freed */
    size_t untracked_frees;     /* frees of blocks not recorded */
    size_t overflow;            /* blocks that did not fit live[] */
    size_t nlive;
    struct { void *p; size_t n; } live[TRACK_MAX];
} track;

#if !CIRCUIT_BENCH_NO_MALLOC_HOOKS /* off in sanitizer builds: they own malloc */
static void note_alloc(void *p, size_t n)
{
    tl_alloc_calls++;
    if (p == NULL || !atomic_load_explicit(&track_on, memory_order_relaxed))
        return;
    track.calls++;
    track.bytes += n;
    if (track.nlive < TRACK_MAX) {
        track.live[track.nlive].p = p;
        track.live[track.nlive].n = n;
        track.nlive++;
    } else {
        track.overflow++;
    }
}

static void note_free(void *p)
{
    if (p == NULL || !atomic_load_explicit(&track_on, memory_order_relaxed))
        return;
    for (size_t i = 0; i < track.nlive; i++) {
        if (track.live[i].p == p) {
            track.frees++;
            track.freed_bytes += track.live[i].n;
            track.live[i] = track.live[--track.nlive];
            return;
        }
    }
    track.untracked_frees++;
}

void *malloc(size_t size)
{
    void *p = __libc_malloc(size);
    note_alloc(p, size);
    return p;
}

void *calloc(size_t nmemb, size_t size)
{
    void *p = __libc_calloc(nmemb, size);
    note_alloc(p, nmemb * size);  /* glibc fails on overflow: p is NULL then */
    return p;
}

void *realloc(void *ptr, size_t size)
{
    note_free(ptr);
    void *p = __libc_realloc(ptr, size);
    note_alloc(p, size);
    return p;
}

void free(void *ptr)
{
    note_free(ptr);
    __libc_free(ptr);
}

void *memalign(size_t alignment, size_t size)
{
    void *p = __libc_memalign(alignment, size);
    note_alloc(p, size);
    return p;
}

void *aligned_alloc(size_t alignment, size_t size)
{
    return memalign(alignment, size);
}

int posix_memalign(void **memptr, size_t alignment, size_t size)
{
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0)
        return EINVAL;
    void *p = memalign(alignment, size);
    if (p == NULL)
        return ENOMEM;
    *memptr = p;
    return 0;
}

void *valloc(size_t size)
{
    return memalign((size_t)sysconf(_SC_PAGESIZE), size);
}

void *pvalloc(size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return memalign(page, (size + page - 1) / page * page);
}
#endif

static void track_begin(void)
{
    memset(&track, 0, sizeof track);
    atomic_store_explicit(&track_on, true, memory_order_relaxed);
}

static void track_end(void)
{
    atomic_store_explicit(&track_on, false, memory_order_relaxed);
}

static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* ------------------------------------------------------------------------ */
/* Time                                                                     */
/* ------------------------------------------------------------------------ */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}

static void sleep_s(double seconds)
{
    struct timespec ts;
    ts.tv_sec = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* The model reads its time through a callback: here, the real clock. */
static int64_t real_clock(void *arg)
{
    (void)arg;
    return now_ns();
}

/* ------------------------------------------------------------------------ */
/* Cases                                                                    */
/* ------------------------------------------------------------------------ */

typedef enum variant { V_CIRCUIT, V_MUTEX, V_BASELINE } variant;
static const char *const variant_names[] = {"circuit", "mutex_breaker", "baseline"};

typedef enum setup_kind {
    SETUP_NONE,      /* baselines */
    SETUP_CLOSED,    /* new breaker, never trips */
    SETUP_OPEN,      /* tripped once, open for 1e15 ns */
    SETUP_HALF_OPEN, /* tripped, open for 1 ns, one probe admitted and settled */
    SETUP_CHURN      /* trips and closes every few hundred calls */
} setup_kind;

typedef enum loop_kind {
    LOOP_ALLOW_DONE, LOOP_ALLOW, LOOP_STATE, LOOP_ATOMIC, LOOP_CLOCK, LOOP_EMPTY
} loop_kind;

typedef struct case_def {
    const char *name;
    setup_kind  setup;
    loop_kind   loop;
    int         window, probes; /* 0 for baselines */
    uint64_t    fail_every;     /* one failure every N admitted calls; 0: none */
} case_def;

static const case_def case_table[] = {
    {"closed_success",  SETUP_CLOSED,    LOOP_ALLOW_DONE, 1,     1,     0},
    {"closed_success",  SETUP_CLOSED,    LOOP_ALLOW_DONE, 64,    1,     0},
    {"closed_success",  SETUP_CLOSED,    LOOP_ALLOW_DONE, 65536, 1,     0},
    {"closed_mixed",    SETUP_CLOSED,    LOOP_ALLOW_DONE, 64,    1,     10},
    {"open_reject",     SETUP_OPEN,      LOOP_ALLOW,      64,    1,     0},
    {"half_open_probe", SETUP_HALF_OPEN, LOOP_ALLOW_DONE, 64,    1,     0},
    {"half_open_probe", SETUP_HALF_OPEN, LOOP_ALLOW_DONE, 64,    64,    0},
    {"half_open_probe", SETUP_HALF_OPEN, LOOP_ALLOW_DONE, 64,    65536, 0},
    {"get_state",       SETUP_CLOSED,    LOOP_STATE,      64,    1,     0},
    {"churn",           SETUP_CHURN,     LOOP_ALLOW_DONE, 64,    1,     256},
};
#define N_CASES (sizeof case_table / sizeof case_table[0])

static const case_def baseline_table[] = {
    {"atomic_floor", SETUP_NONE, LOOP_ATOMIC, 0, 0, 0},
    {"clock",        SETUP_NONE, LOOP_CLOCK,  0, 0, 0},
    {"empty",        SETUP_NONE, LOOP_EMPTY,  0, 0, 0},
};
#define N_BASELINES (sizeof baseline_table / sizeof baseline_table[0])

/* ---- policies and callbacks (pure, as SPEC L4 asks) ---- */

typedef struct policy_arg {
    int64_t trip_failures; /* trip_on_failures: open at this many failures in the window */
} policy_arg;

static bool trip_on_failures(void *arg, const circuit_counts *c)
{
    const policy_arg *p = arg;
    return c->failures >= p->trip_failures;
}

static bool trip_on_first_failure(void *arg, const circuit_counts *c)
{
    (void)arg;
    return c->consecutive_failures >= 1;
}

static circuit_state probe_keep_probing(void *arg, const circuit_counts *c)
{
    (void)arg;
    (void)c;
    return CIRCUIT_HALF_OPEN;
}

static circuit_state probe_close_on_success(void *arg, const circuit_counts *c)
{
    (void)arg;
    if (c->consecutive_failures > 0)
        return CIRCUIT_OPEN;
    if (c->consecutive_successes > 0)
        return CIRCUIT_CLOSED;
    return CIRCUIT_HALF_OPEN;
}

static circuit_outcome classify_zero_ok(void *arg, void *call_ctx, int result)
{
    (void)arg;
    (void)call_ctx;
    return result == 0 ? CIRCUIT_SUCCESS : CIRCUIT_FAILURE;
}

/* One breaker of either variant, with its transition count. */
typedef struct target {
    variant              v;
    circuit_breaker     *cb;
    cmodel              *mb;
    policy_arg           pol;
    atomic_uint_fast64_t transitions;
} target;

static void observe_count(void *arg, void *call_ctx, const circuit_transition *t)
{
    (void)call_ctx;
    (void)t;
    target *tg = arg;
    atomic_fetch_add_explicit(&tg->transitions, 1, memory_order_relaxed);
}

static void fill_spec(circuit_spec *s, target *tg, const case_def *c, int64_t open_for,
                      int64_t probe_timeout)
{
    memset(s, 0, sizeof *s);
    s->config.window = c->window;
    s->config.probes = c->probes;
    s->config.open_for_ns = open_for;
    s->config.probe_timeout_ns = probe_timeout;
    s->policy.arg = &tg->pol;
    s->classify = classify_zero_ok;
    s->observe = observe_count;
    s->observe_arg = tg;
    switch (c->setup) {
    case SETUP_CLOSED:
        tg->pol.trip_failures = c->window / 2 + 1;
        s->policy.trip = trip_on_failures;
        s->policy.probe = probe_close_on_success;
        break;
    case SETUP_OPEN:
        tg->pol.trip_failures = 1;
        s->policy.trip = trip_on_failures;
        s->policy.probe = probe_close_on_success;
        break;
    case SETUP_HALF_OPEN:
        tg->pol.trip_failures = 1;
        s->policy.trip = trip_on_failures;
        s->policy.probe = probe_keep_probing;
        break;
    case SETUP_CHURN:
    case SETUP_NONE:
        s->policy.trip = trip_on_first_failure;
        s->policy.probe = probe_close_on_success;
        break;
    }
}

/* Setup-time calls, variant-generic (never on the measured path). */
typedef union any_ticket {
    circuit_ticket c;
    cmodel_ticket  m;
} any_ticket;

static bool tg_allow(target *tg, any_ticket *t)
{
    circuit_rejection rej;
    if (tg->v == V_CIRCUIT)
        return circuit_allow(tg->cb, NULL, &t->c, &rej);
    return cmodel_allow(tg->mb, NULL, &t->m, &rej);
}

static void tg_done(target *tg, any_ticket *t, int rc)
{
    if (tg->v == V_CIRCUIT)
        circuit_done(&t->c, rc);
    else
        cmodel_done(&t->m, rc);
}

static circuit_state tg_state(target *tg)
{
    return tg->v == V_CIRCUIT ? circuit_get_state(tg->cb) : cmodel_get_state(tg->mb);
}

static int tg_new(target *tg, const circuit_spec *s, char *err, size_t errlen)
{
    if (tg->v == V_CIRCUIT)
        return circuit_new(&tg->cb, s, err, errlen);
    return cmodel_new(&tg->mb, s, real_clock, NULL, err, errlen);
}

static void tg_free(target *tg)
{
    if (tg->v == V_CIRCUIT)
        circuit_free(tg->cb);
    else
        cmodel_free(tg->mb);
    tg->cb = NULL;
    tg->mb = NULL;
}

/* Builds the breaker of case `c` and brings it to the case's state.
 * Returns 0, or prints why not and returns -1. */
static int target_setup(target *tg, variant v, const case_def *c)
{
    circuit_spec s;
    char err[256] = "";
    int64_t open_for = INT64_C(1000000000000000);   /* 1e15 ns: ~11.6 days */
    int64_t probe_timeout = INT64_C(1000000000000000);

    memset(tg, 0, sizeof *tg);
    tg->v = v;
    atomic_init(&tg->transitions, 0);
    if (c->setup == SETUP_HALF_OPEN)
        open_for = 1;
    if (c->setup == SETUP_CHURN) {
        open_for = 1;
        probe_timeout = INT64_C(1000000000);
    }
    fill_spec(&s, tg, c, open_for, probe_timeout);
    int rc = tg_new(tg, &s, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "circuit-bench: %s: %s new failed (%s): %s\n", c->name,
                variant_names[v], strerror(rc), err);
        return -1;
    }

    any_ticket t;
    memset(&t, 0, sizeof t);
    circuit_state want = CIRCUIT_CLOSED;
    if (c->setup == SETUP_OPEN || c->setup == SETUP_HALF_OPEN) {
        if (!tg_allow(tg, &t))
            goto bad;
        tg_done(tg, &t, -1); /* the one failure that trips */
        want = CIRCUIT_OPEN;
        if (c->setup == SETUP_HALF_OPEN) {
            sleep_s(0.001); /* open_for is 1 ns */
            if (!tg_allow(tg, &t))  /* open -> half-open, admitted as a probe */
                goto bad;
            tg_done(tg, &t, 0);     /* keep probing */
            want = CIRCUIT_HALF_OPEN;
        }
    }
    if (tg_state(tg) != want)
        goto bad;
    return 0;
bad:
    fprintf(stderr, "circuit-bench: %s: %s: setup did not reach state %s (state %s)\n", c->name,
            variant_names[v], circuit_state_name(want), circuit_state_name(tg_state(tg)));
    tg_free(tg);
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Measured loops. One function per (variant, loop) so that callgrind's     */
/* --toggle-collect and perf can name them. Each checks the stop flag once   */
/* per BATCH ops.                                                           */
/* ------------------------------------------------------------------------ */

#define BATCH 64

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
    /* results */
    uint64_t  ops, admitted, odd, allocs;
    int64_t   t0, t1;
    pthread_t th;
};

#define BENCH_LOOP(w, ...)                                                         \
    do {                                                                           \
        uint64_t ops_ = 0;                                                         \
        while (!atomic_load_explicit(&(w)->run->stop, memory_order_relaxed)) {    \
            for (int k_ = 0; k_ < BATCH; k_++) {                                   \
                __VA_ARGS__                                                        \
            }                                                                      \
            ops_ += BATCH;                                                         \
            if (ops_ >= (w)->limit)                                                \
                break;                                                             \
        }                                                                          \
        (w)->ops = ops_;                                                           \
    } while (0)

static NOINLINE void loop_circuit_allow_done(worker *w)
{
    circuit_breaker *b = w->tg->cb;
    circuit_ticket t = CIRCUIT_TICKET_INIT;
    circuit_rejection rej;
    uint64_t left = w->fail_left, every = w->fail_every, admitted = 0;
    BENCH_LOOP(w,
        if (circuit_allow(b, w, &t, &rej)) {
            int rc = 0;
            if (--left == 0) {
                left = every;
                rc = -1;
            }
            circuit_done(&t, rc);
            admitted++;
        });
    w->admitted = admitted;
}

static NOINLINE void loop_circuit_allow(worker *w)
{
    circuit_breaker *b = w->tg->cb;
    circuit_ticket t = CIRCUIT_TICKET_INIT;
    circuit_rejection rej;
    uint64_t admitted = 0;
    BENCH_LOOP(w,
        if (circuit_allow(b, w, &t, &rej)) { /* not expected: the case is broken */
            circuit_release(&t);
            admitted++;
        });
    w->admitted = admitted;
}

static NOINLINE void loop_circuit_state(worker *w)
{
    const circuit_breaker *b = w->tg->cb;
    uint64_t odd = 0;
    BENCH_LOOP(w, odd += circuit_get_state(b) != CIRCUIT_CLOSED;);
    w->odd = odd;
}

static NOINLINE void loop_mutex_allow_done(worker *w)
{
    cmodel *m = w->tg->mb;
    cmodel_ticket t;
    circuit_rejection rej;
    uint64_t left = w->fail_left, every = w->fail_every, admitted = 0;
    memset(&t, 0, sizeof t);
    BENCH_LOOP(w,
        if (cmodel_allow(m, w, &t, &rej)) {
            int rc = 0;
            if (--left == 0) {
                left = every;
                rc = -1;
            }
            cmodel_done(&t, rc);
            admitted++;
        });
    w->admitted = admitted;
}

static NOINLINE void loop_mutex_allow(worker *w)
{
    cmodel *m = w->tg->mb;
    cmodel_ticket t;
    circuit_rejection rej;
    uint64_t admitted = 0;
    memset(&t, 0, sizeof t);
    BENCH_LOOP(w,
        if (cmodel_allow(m, w, &t, &rej)) {
            cmodel_release(&t);
            admitted++;
        });
    w->admitted = admitted;
}

static NOINLINE void loop_mutex_state(worker *w)
{
    cmodel *m = w->tg->mb;
    uint64_t odd = 0;
    BENCH_LOOP(w, odd += cmodel_get_state(m) != CIRCUIT_CLOSED;);
    w->odd = odd;
}

static struct {
    alignas(128) atomic_uint_fast64_t n;
} floor_counter;

static NOINLINE void loop_atomic_floor(worker *w)
{
    BENCH_LOOP(w, atomic_fetch_add(&floor_counter.n, 1););
}

static NOINLINE void loop_clock(worker *w)
{
    uint64_t sink = 0;
    BENCH_LOOP(w, {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        sink += (uint64_t)ts.tv_nsec;
    });
    w->odd = sink & 1; /* keeps the reads; meaningless */
}

static NOINLINE void loop_empty(worker *w)
{
    BENCH_LOOP(w, __asm__ volatile("" ::: "memory"););
}

static loop_fn pick_loop(variant v, loop_kind k)
{
    switch (k) {
    case LOOP_ALLOW_DONE: return v == V_CIRCUIT ? loop_circuit_allow_done : loop_mutex_allow_done;
    case LOOP_ALLOW:      return v == V_CIRCUIT ? loop_circuit_allow : loop_mutex_allow;
    case LOOP_STATE:      return v == V_CIRCUIT ? loop_circuit_state : loop_mutex_state;
    case LOOP_ATOMIC:     return loop_atomic_floor;
    case LOOP_CLOCK:      return loop_clock;
    case LOOP_EMPTY:      return loop_empty;
    }
    return loop_empty;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    atomic_fetch_add_explicit(&w->run->ready, 1, memory_order_release);
    while (!atomic_load_explicit(&w->run->go, memory_order_acquire))
        sched_yield();
    uint64_t a0 = tl_alloc_calls;
    w->t0 = now_ns();
    w->fn(w);
    w->t1 = now_ns();
    w->allocs = tl_alloc_calls - a0;
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Runner                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct options {
    double   seconds, warmup;
    int      reps;
    uint64_t ops;            /* --ops: fixed ops per thread instead of --seconds */
    int      threads[64];
    int      nthreads;
    bool     quick;
    const char *cases;       /* comma list, NULL: all */
    const char *windows;     /* comma list of window sizes, NULL: all */
    const char *probes;      /* comma list of probe counts, NULL: all */
    const char *variants;    /* comma list, NULL: all */
    const char *json;
    bool     memory;
} options;

static int  n_cpus;          /* CPUs in the affinity mask */
static int  cpu_ids[CPU_SETSIZE];

typedef struct rep {
    double   ns_per_op, mops, trans_per_s;
    uint64_t ops, admitted, odd, allocs, transitions;
} rep;

/* One timed run of `threads` threads on `tg`. */
static int run_once(target *tg, variant v, const case_def *c, int threads, double seconds,
                    uint64_t limit, rep *out)
{
    run_ctl *ctl = aligned_alloc(alignof(run_ctl), sizeof *ctl);
    worker *ws = aligned_alloc(alignof(worker), sizeof *ws * (size_t)threads);
    if (ctl == NULL || ws == NULL) {
        free(ctl);
        free(ws);
        fprintf(stderr, "circuit-bench: out of memory\n");
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
        w->fail_every = c->fail_every;
        /* Spread the threads' failures across the pattern. */
        w->fail_left = c->fail_every == 0
                           ? UINT64_MAX
                           : c->fail_every - ((uint64_t)i * 7u) % c->fail_every;
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
            fprintf(stderr, "circuit-bench: pthread_create: %s\n", strerror(rc));
            atomic_store(&ctl->stop, true);
            atomic_store(&ctl->go, true);
            for (int j = 0; j < i; j++)
                pthread_join(ws[j].th, NULL);
            free(ws);
            free(ctl);
            return -1;
        }
    }
    while (atomic_load_explicit(&ctl->ready, memory_order_acquire) < threads)
        sched_yield();

    uint64_t tr0 = tg ? atomic_load(&tg->transitions) : 0;
    atomic_store_explicit(&ctl->go, true, memory_order_release);
    if (limit == UINT64_MAX) {
        sleep_s(seconds);
        atomic_store_explicit(&ctl->stop, true, memory_order_relaxed);
    }
    for (int i = 0; i < threads; i++)
        pthread_join(ws[i].th, NULL);
    uint64_t tr1 = tg ? atomic_load(&tg->transitions) : 0;

    memset(out, 0, sizeof *out);
    double busy_ns = 0, ops = 0, per_ns = 0;
    int64_t start = INT64_MAX, end = INT64_MIN;
    for (int i = 0; i < threads; i++) {
        const worker *w = &ws[i];
        double el = (double)(w->t1 - w->t0);
        if (el <= 0)
            el = 1;
        busy_ns += el;
        ops += (double)w->ops;
        per_ns += (double)w->ops / el;
        if (w->t0 < start)
            start = w->t0;
        if (w->t1 > end)
            end = w->t1;
        out->ops += w->ops;
        out->admitted += w->admitted;
        out->odd += w->odd;
        out->allocs += w->allocs;
    }
    out->ns_per_op = ops > 0 ? busy_ns / ops : 0;
    out->mops = per_ns * 1e3;
    out->transitions = tr1 - tr0;
    out->trans_per_s = end > start ? (double)out->transitions * 1e9 / (double)(end - start) : 0;
    free(ws);
    free(ctl);
    return 0;
}

typedef struct result {
    const case_def *c;
    int      order;   /* table position: baselines first, then the cases */
    variant  v;
    int      threads;
    bool     pinned;
    int      reps;
    double   ns_med, ns_min, ns_max, mops_med, trans_med;
    uint64_t ops, admitted, odd, allocs, transitions; /* summed over the reps */
    char     broken[160];                              /* "" or why the case is invalid */
} result;

static result *results;
static size_t  n_results, cap_results;

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

/* Whether the case measured what it claims (checked on the totals). */
static void check_case(result *r)
{
    const case_def *c = r->c;
    if (r->v == V_BASELINE)
        return;
    switch (c->setup) {
    case SETUP_CLOSED:
        if (r->transitions != 0)
            snprintf(r->broken, sizeof r->broken, "made %" PRIu64 " transitions (must stay closed)",
                     r->transitions);
        else if (c->loop == LOOP_STATE && r->odd != 0)
            snprintf(r->broken, sizeof r->broken, "get_state said not-closed %" PRIu64 " times",
                     r->odd);
        else if (c->loop == LOOP_ALLOW_DONE && r->admitted != r->ops)
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

/* What one figure measures: a breaker of one variant in one case, or a
 * baseline (tg NULL). */
typedef struct subject {
    target         *tg;
    variant         v;
    const case_def *c;
    int             order;
} subject;

#define MAX_GROUP 4
#define MAX_REPS  1000

/* Measures the subjects of one group at one thread count. Their runs are
 * interleaved (warm-ups first, then rep 1 of each, rep 2 of each, ...) so
 * that a burst of load from other processes hits all of them alike and the
 * ratios between them stay meaningful on a shared machine. Returns the
 * number of subjects whose case is broken, or -1 on error. */
static int measure_group(const options *o, const subject *sub, int n, int threads)
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
    static double ns[MAX_GROUP][MAX_REPS], mops[MAX_GROUP][MAX_REPS], trans[MAX_GROUP][MAX_REPS];
    result *res = &results[n_results];
    uint64_t limit = o->ops ? o->ops : UINT64_MAX;
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
        if (o->warmup > 0 && !o->ops &&
            run_once(sub[k].tg, sub[k].v, sub[k].c, threads, o->warmup, limit, &x) != 0)
            return -1;
    }
    for (int i = 0; i < o->reps; i++) {
        for (int k = 0; k < n; k++) {
            result *r = &res[k];
            if (run_once(sub[k].tg, sub[k].v, sub[k].c, threads, o->seconds, limit, &x) != 0)
                return -1;
            ns[k][i] = x.ns_per_op;
            mops[k][i] = x.mops;
            trans[k][i] = x.trans_per_s;
            r->ops += x.ops;
            r->admitted += x.admitted;
            r->odd += x.odd;
            r->allocs += x.allocs;
            r->transitions += x.transitions;
        }
    }
    int broken = 0;
    for (int k = 0; k < n; k++) {
        result *r = &res[k];
        r->ns_min = r->ns_max = ns[k][0];
        for (int i = 1; i < o->reps; i++) {
            if (ns[k][i] < r->ns_min)
                r->ns_min = ns[k][i];
            if (ns[k][i] > r->ns_max)
                r->ns_max = ns[k][i];
        }
        r->ns_med = median(ns[k], o->reps);
        r->mops_med = median(mops[k], o->reps);
        r->trans_med = median(trans[k], o->reps);
        check_case(r);
        broken += r->broken[0] != 0;
        fprintf(stderr, "  %-16s %-13s w=%-5d p=%-5d threads=%-3d %9.2f ns/op %9.2f Mops/s %12" PRIu64
                " ops%s%s\n", r->c->name, variant_names[r->v], r->c->window, r->c->probes, threads,
                r->ns_med, r->mops_med, r->ops, r->broken[0] ? "  INVALID: " : "", r->broken);
    }
    n_results += (size_t)n;
    return broken;
}

/* ------------------------------------------------------------------------ */
/* Reporting                                                                */
/* ------------------------------------------------------------------------ */

static const result *find(const char *name, variant v, int window, int probes, int threads)
{
    for (size_t i = 0; i < n_results; i++) {
        const result *r = &results[i];
        if (r->v == v && r->threads == threads && strcmp(r->c->name, name) == 0 &&
            (v == V_BASELINE || (r->c->window == window && r->c->probes == probes)))
            return r;
    }
    return NULL;
}

static void ratio_cell(char *buf, size_t len, const result *r, const result *ref)
{
    if (ref == NULL || ref->ns_med <= 0)
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%.2f", r->ns_med / ref->ns_med);
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

static void print_table(FILE *f, bool pinned)
{
    fprintf(f, "| case | variant | threads | window | probes | ns/op (median) | min | max | "
               "Mops/s (aggregate) | x mutex_breaker | x atomic_floor | x clock | notes |\n");
    fprintf(f, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n");
    for (size_t i = 0; i < n_results; i++) {
        const result *r = &results[i];
        if (r->pinned != pinned)
            continue;
        char wm[16] = "-", pb[16] = "-", xm[16], xa[16], xc[16], notes[256] = "";
        if (r->v != V_BASELINE) {
            snprintf(wm, sizeof wm, "%d", r->c->window);
            snprintf(pb, sizeof pb, "%d", r->c->probes);
        }
        const result *mref = r->v == V_BASELINE
                                 ? NULL
                                 : find(r->c->name, V_MUTEX, r->c->window, r->c->probes, r->threads);
        ratio_cell(xm, sizeof xm, r, mref);
        ratio_cell(xa, sizeof xa, r, find("atomic_floor", V_BASELINE, 0, 0, r->threads));
        ratio_cell(xc, sizeof xc, r, find("clock", V_BASELINE, 0, 0, r->threads));
        size_t n = 0;
        if (r->c->setup == SETUP_CHURN)
            n += (size_t)snprintf(notes + n, sizeof notes - n, "%.3g transitions/s; ", r->trans_med);
        if (r->c->setup == SETUP_HALF_OPEN && r->ops > 0)
            n += (size_t)snprintf(notes + n, sizeof notes - n, "%.1f%% admitted; ",
                                  100.0 * (double)r->admitted / (double)r->ops);
        if (r->allocs)
            n += (size_t)snprintf(notes + n, sizeof notes - n, "%" PRIu64 " heap allocs in %" PRIu64
                                  " ops; ", r->allocs, r->ops);
        if (r->broken[0] && n < sizeof notes)
            snprintf(notes + n, sizeof notes - n, "INVALID: %s", r->broken);
        fprintf(f, "| %s | %s | %d | %s | %s | %.2f | %.2f | %.2f | %.2f | %s | %s | %s | %s |\n",
                r->c->name, variant_names[r->v], r->threads, wm, pb, r->ns_med, r->ns_min,
                r->ns_max, r->mops_med, xm, xa, xc, notes);
    }
}

static void write_json(FILE *f)
{
    for (size_t i = 0; i < n_results; i++) {
        const result *r = &results[i];
        fprintf(f,
                "{\"case\":\"%s\",\"variant\":\"%s\",\"threads\":%d,\"window\":%d,\"probes\":%d,"
                "\"ns_per_op\":%.6g,\"mops\":%.6g,\"min_ns\":%.6g,\"max_ns\":%.6g,\"reps\":%d",
                r->c->name, variant_names[r->v], r->threads, r->c->window, r->c->probes, r->ns_med,
                r->mops_med, r->ns_min, r->ns_max, r->reps);
        if (r->c->setup == SETUP_CHURN)
            fprintf(f, ",\"transitions_per_s\":%.1f", r->trans_med);
        fprintf(f, "}\n");
    }
}

/* One target line: "met" / "MISSED" with the measured ratio. */
static void target_line(FILE *f, const char *what, const result *a, const result *b, bool use_mops,
                        double bound, bool upper)
{
    if (a == NULL || b == NULL)
        return; /* not measured in this run */
    double ratio = use_mops ? a->mops_med / b->mops_med : a->ns_med / b->ns_med;
    bool ok = upper ? ratio <= bound : ratio >= bound;
    fprintf(f, "| %s | %.2f | %s |\n", what, ratio, ok ? "met" : "MISSED");
}

static void print_targets(FILE *f)
{
    char what[200];
    if (find("closed_success", V_CIRCUIT, 64, 1, 1) == NULL &&
        find("closed_success", V_CIRCUIT, 64, 1, 2) == NULL &&
        find("open_reject", V_CIRCUIT, 64, 1, 1) == NULL &&
        find("get_state", V_CIRCUIT, 64, 1, 1) == NULL &&
        find("half_open_probe", V_CIRCUIT, 64, 65536, 1) == NULL)
        return;
    fprintf(f, "\n## Targets (informational: medians on a shared, noisy machine; not pass/fail;\n"
               "rows whose figures were not measured in this run are left out)\n\n");
    fprintf(f, "| target | measured ratio | status |\n|---|--:|---|\n");
    const result *cs1 = find("closed_success", V_CIRCUIT, 64, 1, 1);
    target_line(f, "closed_success 1 thread ns/op <= 3x atomic_floor", cs1,
                find("atomic_floor", V_BASELINE, 0, 0, 1), false, 3.0, true);
    target_line(f, "closed_success 1 thread ns/op <= 0.5x mutex_breaker", cs1,
                find("closed_success", V_MUTEX, 64, 1, 1), false, 0.5, true);
    const result *cs2 = find("closed_success", V_CIRCUIT, 64, 1, 2);
    target_line(f, "closed_success 2 threads Mops/s >= 2x mutex_breaker", cs2,
                find("closed_success", V_MUTEX, 64, 1, 2), true, 2.0, false);
    target_line(f, "closed_success 2 threads Mops/s >= 0.5x atomic_floor", cs2,
                find("atomic_floor", V_BASELINE, 0, 0, 2), true, 0.5, false);
    int tl[3] = {1, 2, n_cpus};
    for (int i = 0; i < 3; i++) {
        if (i == 2 && (n_cpus == 1 || n_cpus == 2))
            break;
        int t = tl[i];
        const result *clk = find("clock", V_BASELINE, 0, 0, t);
        snprintf(what, sizeof what, "open_reject %d thread(s) ns/op <= 1.5x clock", t);
        target_line(f, what, find("open_reject", V_CIRCUIT, 64, 1, t), clk, false, 1.5, true);
        snprintf(what, sizeof what, "get_state %d thread(s) ns/op <= 1.5x clock", t);
        target_line(f, what, find("get_state", V_CIRCUIT, 64, 1, t), clk, false, 1.5, true);
        snprintf(what, sizeof what, "half_open_probe %d thread(s) probes=65536 ns/op <= 2x probes=64",
                 t);
        target_line(f, what, find("half_open_probe", V_CIRCUIT, 64, 65536, t),
                    find("half_open_probe", V_CIRCUIT, 64, 64, t), false, 2.0, true);
        const result *w[3] = {find("closed_success", V_CIRCUIT, 1, 1, t),
                              find("closed_success", V_CIRCUIT, 64, 1, t),
                              find("closed_success", V_CIRCUIT, 65536, 1, t)};
        snprintf(what, sizeof what,
                 "closed_success %d thread(s) flat window 1..65536: max/min ns/op <= 1.10", t);
        if (w[0] && w[1] && w[2]) {
            double lo = w[0]->ns_med, hi = w[0]->ns_med;
            for (int k = 1; k < 3; k++) {
                if (w[k]->ns_med < lo)
                    lo = w[k]->ns_med;
                if (w[k]->ns_med > hi)
                    hi = w[k]->ns_med;
            }
            fprintf(f, "| %s | %.2f | %s |\n", what, hi / lo, hi / lo <= 1.10 ? "met" : "MISSED");
        }
    }
}

/* Bytes each breaker allocates, and whether free returns them all. */
static void memory_report(FILE *f, bool want_circuit, bool want_mutex)
{
    static const int sizes[][2] = {{64, 1}, {64, 64}, {65536, 65536}};
    fprintf(f, "\n## Memory per breaker (heap, counted by interposing malloc/calloc/realloc/"
               "aligned_alloc/posix_memalign/free)\n\n");
    fprintf(f, "| variant | window | probes | allocation calls in new | bytes held after new "
               "(requested) | heap in use (mallinfo2 delta) | circuit.h estimate | blocks freed by free "
               "| bytes not freed |\n");
    fprintf(f, "|---|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    if (CIRCUIT_BENCH_NO_MALLOC_HOOKS) {
        fprintf(f, "\n(not measured: allocation counting is off in sanitizer builds)\n");
        return;
    }
    for (int v = V_CIRCUIT; v <= V_MUTEX; v++) {
        if ((v == V_CIRCUIT && !want_circuit) || (v == V_MUTEX && !want_mutex))
            continue;
        /* A first new/free pays any one-time library set-up outside the count. */
        case_def warm = {"memory", SETUP_CLOSED, LOOP_ALLOW_DONE, 64, 1, 0};
        target tg;
        if (target_setup(&tg, (variant)v, &warm) == 0)
            tg_free(&tg);
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            case_def c = {"memory", SETUP_CLOSED, LOOP_ALLOW_DONE, sizes[i][0], sizes[i][1], 0};
            size_t h0 = heap_in_use();
            track_begin();
            int rc = target_setup(&tg, (variant)v, &c);
            track_end();
            size_t h1 = heap_in_use();
            if (rc != 0)
                continue;
            size_t calls = track.calls, overflow = track.overflow, nlive = track.nlive, held = 0;
            for (size_t k = 0; k < nlive; k++)
                held += track.live[k].n;
            /* Re-arm with the blocks new left, to match them at free. */
            track.frees = track.freed_bytes = track.untracked_frees = 0;
            atomic_store_explicit(&track_on, true, memory_order_relaxed);
            tg_free(&tg);
            track_end();
            char est[32] = "-";
            if (v == V_CIRCUIT)
                /* circuit.h: 8 bytes per window slot (none for a window of
                 * 1), 16.25 per probe slot, plus about 6 KiB */
                snprintf(est, sizeof est, "%d",
                         (c.window > 1 ? 8 * c.window : 0) + (65 * c.probes + 3) / 4 + 6144);
            fprintf(f, "| %s | %d | %d | %zu | %zu | %zd | %s | %zu of %zu | %zu%s |\n",
                    variant_names[v], c.window, c.probes, calls, held,
                    (ssize_t)h1 - (ssize_t)h0, est, track.frees, nlive, held - track.freed_bytes,
                    overflow ? " (table overflow: partial)" : "");
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Command line                                                             */
/* ------------------------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(f,
        "usage: circuit-bench [options]\n"
        "  --quick           short runs for CI (0.04 s x 5 reps; the whole default set in < 30 s)\n"
        "  --seconds S       length of one repetition (default 0.5)\n"
        "  --reps N          repetitions per figure, median reported (default 5)\n"
        "  --warmup S        discarded warm-up run before each figure (default seconds/2; 0: none)\n"
        "  --threads LIST    comma list of thread counts (default 1,2,CPUs and 2xCPUs);\n"
        "                    counts above the CPUs run unpinned and are reported apart\n"
        "  --case LIST       comma list of case or baseline names to run (default all);\n"
        "                    cases: closed_success closed_mixed open_reject half_open_probe\n"
        "                    get_state churn; baselines: atomic_floor clock empty\n"
        "                    (the baselines always run unless one is named)\n"
        "  --variant LIST    circuit,mutex_breaker,baseline (default all)\n"
        "  --window LIST     only the breaker rows with these windows (1,64,65536)\n"
        "  --probes LIST     only the breaker rows with these probe counts (1,64,65536)\n"
        "  --ops N           each thread runs exactly N ops (rounded up to %d) instead of\n"
        "                    --seconds: for valgrind --tool=callgrind, e.g.\n"
        "                    valgrind --tool=callgrind --toggle-collect=loop_circuit_allow_done \\\n"
        "                      circuit-bench --case closed_success --variant circuit \\\n"
        "                      --window 64 --threads 1 --ops 1000000 --reps 1 --no-memory\n"
        "                    then divide the inclusive Ir by the ops printed on stderr\n"
        "  --no-memory       skip the memory report\n"
        "  --json FILE       also write one JSON object per line per figure\n",
        BATCH);
}

static bool in_list(const char *list, const char *name)
{
    if (list == NULL)
        return true;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0)
            return true;
        if (!e)
            break;
        p = e + 1;
    }
    return false;
}

static bool names_a_baseline(const char *list)
{
    for (size_t i = 0; i < N_BASELINES; i++)
        if (list && in_list(list, baseline_table[i].name))
            return true;
    return false;
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

static int parse_args(int argc, char **argv, options *o)
{
    bool have_seconds = false, have_warmup = false;
    const char *threads = NULL;
    memset(o, 0, sizeof *o);
    o->seconds = 0.5;
    o->reps = 5;
    o->memory = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool need = true;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(a, "--quick") == 0) {
            o->quick = true;
            need = false;
        } else if (strcmp(a, "--no-memory") == 0) {
            o->memory = false;
            need = false;
        } else if (v == NULL) {
            fprintf(stderr, "circuit-bench: %s needs a value (or is unknown)\n", a);
            return -1;
        } else if (strcmp(a, "--seconds") == 0) {
            if (!parse_double(v, &o->seconds) || o->seconds <= 0)
                goto bad;
            have_seconds = true;
        } else if (strcmp(a, "--warmup") == 0) {
            if (!parse_double(v, &o->warmup))
                goto bad;
            have_warmup = true;
        } else if (strcmp(a, "--reps") == 0) {
            uint64_t n;
            if (!parse_u64(v, &n) || n < 1 || n > MAX_REPS)
                goto bad;
            o->reps = (int)n;
        } else if (strcmp(a, "--ops") == 0) {
            if (!parse_u64(v, &o->ops) || o->ops < 1)
                goto bad;
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
            fprintf(stderr, "circuit-bench: unknown option %s\n", a);
            usage(stderr);
            return -1;
        }
        if (need)
            i++;
        continue;
    bad:
        fprintf(stderr, "circuit-bench: bad value for %s: '%s'\n", a, v);
        return -1;
    }
    if (o->quick && !have_seconds)
        o->seconds = 0.04;
    if (!have_warmup)
        o->warmup = o->seconds / 2 < 0.02 ? 0.02 : o->seconds / 2;

    if (threads) {
        for (const char *p = threads; *p;) {
            char *end;
            long t = strtol(p, &end, 10);
            if (end == p || t < 1 || t > 1024 || (*end && *end != ',')) {
                fprintf(stderr, "circuit-bench: bad --threads '%s'\n", threads);
                return -1;
            }
            if (add_thread_count(o, (int)t) != 0)
                return -1;
            p = *end ? end + 1 : end;
        }
    } else {
        add_thread_count(o, 1);
        if (n_cpus >= 2)
            add_thread_count(o, 2);
        add_thread_count(o, n_cpus);
        add_thread_count(o, 2 * n_cpus);
    }
    for (const char *p = o->variants; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        bool ok = false;
        for (int k = 0; k < 3; k++)
            ok |= strlen(variant_names[k]) == len && strncmp(p, variant_names[k], len) == 0;
        if (!ok) {
            fprintf(stderr, "circuit-bench: unknown variant in '%s'\n", o->variants);
            return -1;
        }
        p = e ? e + 1 : p + len;
    }
    for (const char *p = o->cases; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        bool ok = false;
        for (size_t k = 0; k < N_CASES; k++)
            ok |= strlen(case_table[k].name) == len && strncmp(p, case_table[k].name, len) == 0;
        for (size_t k = 0; k < N_BASELINES; k++)
            ok |= strlen(baseline_table[k].name) == len &&
                  strncmp(p, baseline_table[k].name, len) == 0;
        if (!ok) {
            fprintf(stderr, "circuit-bench: unknown case in '%s'\n", o->cases);
            return -1;
        }
        p = e ? e + 1 : p + len;
    }
    return 0;
}

static void print_header(FILE *f, const options *o)
{
    char model[128] = "?";
    FILE *ci = fopen("/proc/cpuinfo", "r");
    if (ci) {
        char line[256];
        while (fgets(line, sizeof line, ci)) {
            if (strncmp(line, "model name", 10) == 0) {
                const char *p = strchr(line, ':');
                if (p) {
                    snprintf(model, sizeof model, "%s", p + 2);
                    model[strcspn(model, "\n")] = 0;
                }
                break;
            }
        }
        fclose(ci);
    }
    char load[64] = "?";
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) {
        if (fgets(load, sizeof load, la))
            load[strcspn(load, "\n")] = 0;
        fclose(la);
    }
    /* Which object circuit_allow comes from: the shared library, not a
     * static test build linked in by mistake. */
    Dl_info di;
    bool (*fp)(circuit_breaker *, void *, circuit_ticket *, circuit_rejection *) = circuit_allow;
    void *addr;
    memcpy(&addr, &fp, sizeof addr);
    const char *lib = dladdr(addr, &di) && di.dli_fname ? di.dli_fname : "?";

    fprintf(f, "# circuit-bench\n\n");
    fprintf(f, "- cpu: %s; %d CPUs in the affinity mask (%ld online)\n", model, n_cpus,
            sysconf(_SC_NPROCESSORS_ONLN));
    fprintf(f, "- circuit_allow from: %s\n", lib);
#ifdef NDEBUG
    fprintf(f, "- bench built with NDEBUG (release)\n");
#else
    fprintf(f, "- bench built WITHOUT NDEBUG (not a release build?)\n");
#endif
    fprintf(f, "- load average at start: %s\n", load);
    if (o->ops)
        fprintf(f, "- fixed %" PRIu64 " ops per thread per run, %d rep(s)\n", o->ops, o->reps);
    else
        fprintf(f, "- each figure: median of %d reps of %.3g s after a %.3g s warm-up; "
                   "min and max shown\n", o->reps, o->seconds, o->warmup);
    fprintf(f, "- the reps of circuit and mutex_breaker (and of the three baselines) are "
               "interleaved, so that load bursts hit them alike\n");
    fprintf(f, "- ns/op is per thread; Mops/s is aggregate; x columns are ns/op ratios "
               "(lower is better) against the same thread count\n");
    fprintf(f, "- the machine is shared and noisy (others compile on it): read medians, and "
               "the min-max spread as the noise\n\n");
}

int main(int argc, char **argv)
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

    options o;
    if (parse_args(argc, argv, &o) != 0)
        return 2;
    FILE *json = NULL;
    if (o.json && (json = fopen(o.json, "w")) == NULL) {
        fprintf(stderr, "circuit-bench: %s: %s\n", o.json, strerror(errno));
        return 2;
    }
    print_header(stdout, &o);
    fflush(stdout);

    int64_t t_start = now_ns();
    /* The baselines are the reference of the ratio columns: they run unless
     * --variant leaves them out; naming some in --case runs only those. */
    bool only_named_baselines = names_a_baseline(o.cases);
    int failures = 0;
    if (in_list(o.variants, "baseline")) {
        subject sub[MAX_GROUP];
        int n = 0;
        for (size_t i = 0; i < N_BASELINES; i++) {
            const case_def *c = &baseline_table[i];
            if (only_named_baselines && !in_list(o.cases, c->name))
                continue;
            sub[n++] = (subject){NULL, V_BASELINE, c, (int)i};
        }
        for (int k = 0; n > 0 && k < o.nthreads; k++)
            if (measure_group(&o, sub, n, o.threads[k]) < 0)
                return 1;
    }
    for (size_t i = 0; i < N_CASES; i++) {
        const case_def *c = &case_table[i];
        char wbuf[16], pbuf[16];
        snprintf(wbuf, sizeof wbuf, "%d", c->window);
        snprintf(pbuf, sizeof pbuf, "%d", c->probes);
        if (!in_list(o.cases, c->name) || !in_list(o.windows, wbuf) || !in_list(o.probes, pbuf))
            continue;
        target tgs[2];
        subject sub[2];
        int n = 0;
        for (int v = V_CIRCUIT; v <= V_MUTEX; v++) {
            if (!in_list(o.variants, variant_names[v]))
                continue;
            if (target_setup(&tgs[n], (variant)v, c) != 0) {
                failures++;
                continue;
            }
            sub[n] = (subject){&tgs[n], (variant)v, c, (int)(N_BASELINES + i)};
            n++;
        }
        for (int k = 0; n > 0 && k < o.nthreads; k++) {
            int broken = measure_group(&o, sub, n, o.threads[k]);
            if (broken < 0)
                return 1;
            failures += broken;
        }
        for (int k = 0; k < n; k++)
            tg_free(&tgs[k]);
    }

    qsort(results, n_results, sizeof *results, cmp_result);
    fprintf(stdout, "## Threads pinned to distinct CPUs\n\n");
    print_table(stdout, true);
    bool any_over = false;
    for (size_t i = 0; i < n_results; i++)
        any_over |= !results[i].pinned;
    if (any_over) {
        fprintf(stdout, "\n## Oversubscribed (more threads than CPUs, unpinned)\n\n");
        print_table(stdout, false);
    }
    print_targets(stdout);
    if (o.memory && !o.ops)
        memory_report(stdout, in_list(o.variants, "circuit"), in_list(o.variants, "mutex_breaker"));
    fprintf(stdout, "\ntotal time %.1f s\n", (double)(now_ns() - t_start) / 1e9);
    if (json) {
        write_json(json);
        if (fclose(json) != 0) {
            fprintf(stderr, "circuit-bench: %s: %s\n", o.json, strerror(errno));
            return 2;
        }
    }
    if (failures) {
        fprintf(stderr, "circuit-bench: %d case(s) did not measure what they claim (see INVALID)\n",
                failures);
        return 3;
    }
    return 0;
}
