/*
 * The torture harness shared by the stress programs (tests/stress/).
 *
 * SPDX-License-Identifier: MIT
 *
 * One breaker, many threads, and invariants checked while they race and once
 * they have joined. What is checked, and why each check is sound, is written
 * in stress.c next to the code; the short list:
 *
 *   O1  transitions delivered in order, no gap, each `from` = previous `to`,
 *       only legal moves; the counts a transition carries make the policy
 *       give that very decision (C4, policies are pure)
 *   O2  observe never overlaps itself (in-observe flag); nested calls made by
 *       observe are delivered after it returns
 *   O3  once every call has returned, nothing is pending; the state read
 *       equals the last `to` delivered
 *   O6  observe and classify get one of this harness's call contexts
 *   C1-C3 every counts snapshot a policy sees: all >= 0, successes + failures
 *       <= window, at most one non-zero run, timed_out 0 when trip is asked
 *   S4  probes in flight per generation never above `probes` (plus, where
 *       probes can time out, the timeouts of that generation)
 *   T2  a result is counted exactly once, in the generation it was admitted
 *       in: per generation the tallies of done() == true equal the counts
 *       its transition carries; done() == false only for a generation that
 *       has ended; classify runs exactly once per done
 *   T1  rejections: OPEN with 1 <= retry_after <= open_for (+ clock skew of
 *       the call), HALF_OPEN with 0
 *   P1  a probe settled by a done that started at least probe_timeout after
 *       its admission and still counted in its generation had timed out
 *       there: per generation, the timed_out it ends with is at least the
 *       number of such probes (timeouts are never lost)
 *   M1  every stats snapshot: the generation no lower than the last
 *       transition delivered before the read, no higher than those made by
 *       its end, never lower than the thread's previous read; the state the
 *       one that generation had; totals never decreasing; counts of C1-C3;
 *       timed_out never above what its generation ends with
 *   a ticket is admitted only in a generation whose state is closed or
 *   half-open, and in that state.
 */
#ifndef STRESS_H
#define STRESS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "circuit.h"
#include "testing.h"

#define STRESS_MAX_THREADS 256

/* ---- command line, scale, random numbers -------------------------------- */

typedef struct stress_args {
    int threads;            /* worker threads */
    long ops;               /* operations per thread (already scaled) */
    uint64_t seed;
    double scale;           /* CIRCUIT_STRESS_SCALE (default 1) */
} stress_args;

/* `prog [threads] [ops-per-thread] [seed] [flags...]`: missing or 0 values
 * take the defaults given; ops is multiplied by CIRCUIT_STRESS_SCALE. Flags
 * (argv[4..]) are left to the program: *first_flag is their index. */
void stress_parse(int argc, char **argv, int def_threads, long def_ops, stress_args *a,
                  int *first_flag);

static inline uint64_t stress_rnd(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static inline uint64_t stress_below(uint64_t *s, uint64_t n) { return stress_rnd(s) % n; }

int64_t stress_mono_ns(void);     /* CLOCK_MONOTONIC, for deadlines */
void stress_sleep_ns(int64_t ns); /* nanosleep, restarted on EINTR */

/* ---- failures -------------------------------------------------------------- */

/* Reports one invariant violation: printed at once on stderr (the first 30;
 * then only counted) with the run's name and seed. Thread-safe. */
__attribute__((format(printf, 1, 2))) void stress_fail(const char *fmt, ...);
long stress_failures(void);
/* A test-setup problem (not a library bug): printed, exit 1. */
__attribute__((noreturn, format(printf, 1, 2))) void stress_die(const char *fmt, ...);

/* ---- one run ---------------------------------------------------------------- */

/* probe_timeout_ns of a run in which no probe can time out: the test clock
 * never moves that far, so S4 is checked strictly (<= probes at every
 * instant) and timed_out must stay 0. */
#define STRESS_NO_TIMEOUT INT64_C(1000000000000000) /* 11.6 days */

typedef struct stress_config {
    const char *name;          /* printed in messages, e.g. "test-clock p3 w4" */
    int window, probes;
    int64_t open_for_ns, probe_timeout_ns;
    bool real_clock;           /* variant A: CLOCK_MONOTONIC; else the test clock */
    bool clock_ops;            /* workers advance the test clock (variant B) */
    int64_t clock_step_ns;     /* largest step of one clock op */
    bool nested;               /* observe makes nested calls (allow/done/get_state) */
    int fail_pct, ignore_pct;  /* outcome mix of done (rest: success) */
    bool handoff;              /* odd threads settle tickets on another thread */
    int operator_pm;           /* isolate / reset per mille of operations (OP1-OP3) */
    int stats_pct;             /* circuit_get_stats reads, % of operations (0: 4 %) */
    bool hold_probes;          /* probes are mostly settled only once their timeout fell
                                * due, so done meets due timeouts (P1) */
} stress_config;

/* A call context: every allow/done of the harness passes one (O6). */
#define STRESS_CTX_MAGIC UINT64_C(0x5354524553534358)
typedef struct stress_ctx {
    uint64_t magic;
    int owner;                 /* thread index, -1 main */
    int code;                  /* the result the next done passes (classify checks it) */
    int classify_calls;        /* classify calls during the current done */
} stress_ctx;

/* A ticket as the harness tracks it. */
typedef struct stress_ticket {
    circuit_ticket t;
    stress_ctx ctx;
    uint32_t gen;              /* generation tag it was admitted in */
    int64_t adm_after;         /* the clock just after its circuit_allow returned */
    unsigned state;            /* state it was admitted in */
    bool live;
    int owner;
} stress_ticket;

typedef struct stress_worker {
    int idx;
    uint64_t rng;
    _Atomic long ops;          /* operations completed */
    atomic_int in_call;        /* which API call it is in (diagnostics of a hang) */
    atomic_bool finished;
    pthread_t tid;
    long target;               /* ops to run */
    stress_ticket tk[4];       /* tickets held across operations */
} stress_worker;

/* In-call markers. */
enum { IN_NONE, IN_ALLOW, IN_DONE, IN_RELEASE, IN_GET_STATE, IN_CLOCK, IN_QUEUE, IN_PAUSE, IN_OPERATOR, IN_STATS };

/* Builds the breaker for `cfg`, resets every record. Returns 0 or aborts the
 * program (a setup problem). */
void stress_begin(const stress_config *cfg, const stress_args *a);
circuit_breaker *stress_breaker(void);
const stress_config *stress_cfg(void);

/* One random operation of the standard mix by worker w (allow into a free
 * ticket, done with a random outcome, release, done then release, get_state,
 * a clock step in variant B). In handoff mode, odd workers instead allow and
 * queue, or settle a ticket another thread allowed. */
void stress_step(stress_worker *w);
/* Settles every ticket w still holds. */
void stress_settle_all(stress_worker *w);

/* The basic calls, with every per-call check and the bookkeeping. */
bool stress_allow(stress_ticket *s, int owner);
bool stress_allow_rej(stress_ticket *s, int owner, circuit_rejection *rej); /* rej: a copy */
void stress_done(stress_ticket *s, int code);
void stress_release(stress_ticket *s);

/* Settles the tickets still in the hand-off queue (main thread, after join;
 * the main thread allowed none of them). */
void stress_drain_queue(void);

/* After every worker has joined: the O3 checks, a last call, driving the
 * breaker back to closed, the per-generation checks, circuit_free. Returns
 * true when this run had no failure. */
bool stress_end(void);

/* A team of worker threads: stress_team_start runs `fn` (default
 * stress_worker_main: stress_step until ops_each) on each; stress_team_join
 * waits with a watchdog that reports a hang, then joins. */
typedef struct stress_team {
    stress_worker *w;
    int n;
} stress_team;
void stress_team_start(stress_team *team, int n, long ops_each, uint64_t seed,
                       void *(*fn)(void *));
void *stress_worker_main(void *arg); /* the default worker: stress_step to target */
void stress_thread_init(int idx);    /* first thing a custom worker function calls */
void stress_team_join(stress_team *team, int64_t timeout_ns);
/* Waits until every worker has finished (not joined); a hang is reported
 * with each thread's position and the program exits 1. */
void stress_team_wait(stress_team *team, int64_t timeout_ns);
void stress_team_free(stress_team *team);
void stress_report_hang(stress_team *team, const char *why);

/* Transitions delivered so far, and the last one; calls admitted and
 * results that reached their generation (done() == true) so far. */
uint64_t stress_delivered(void);
uint64_t stress_admitted(void);
uint64_t stress_counted(void);
circuit_state stress_last_to(void);

/* The summary line: `<prog>: <ops> ops, <threads> threads, seed <seed>:
 * <passed> passed, <failed> failed`, then the exit code (0 or 1). */
int stress_summary(const char *prog, long ops, int threads, uint64_t seed, int passed,
                   int failed);

#endif
