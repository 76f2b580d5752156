/*
 * scheduler: a controlled scheduler for real C code (docs/CONTRACT.md V1-V5).
 *
 * A run starts one pthread per scenario thread; they run ONE AT A TIME. A
 * thread runs until it reaches a switch point (sched_point: in the checker's
 * build every operation of src/atomics.h, every clock read and every park
 * point calls it), where the strategy alone picks who runs next: each thread
 * waits on its own semaphore and the one running posts the next one's. The
 * same choices give the same run, so a run is named by its choice string
 * (the schedule) and one line replays it.
 *
 * Besides a thread, a choice can be
 *   - TICK: the test clock moves on by the scenario's tick (time is part of
 *     the schedule: open periods and probe timeouts fall due inside it);
 *   - DIE: the running thread dies here and is never scheduled again (its
 *     operation never ends; at the end of the run it exits by pthread_exit).
 *
 * Strategies (V2): RANDOM (uniform over the choices), PCT (Burckhardt et
 * al., ASPLOS 2010: random thread priorities, d - 1 random points where the
 * running thread's priority drops below every other), DFS (every schedule
 * with at most B preemptions, Musuvathi and Qadeer's iterative context
 * bounding, PLDI 2007: a thread keeps running until it ends unless the
 * schedule spends a preemption; a TICK or a DIE costs one as well), REPLAY
 * (a choice string).
 *
 * Lock-freedom (V5): a thread that runs more than `solo_bound` switch points
 * in a row inside one operation (every other thread stopped meanwhile) is
 * reported as a livelock.
 *
 * Thread-safety: one run at a time per process; sched_point may be called
 * from any thread (it returns at once outside a run, or on a thread that is
 * not a scenario thread, or inside sched_quiet).
 */
#ifndef CIRCUIT_SCHED_H
#define CIRCUIT_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SCHED_MAX_THREADS 6
#define SCHED_MAX_STEPS 200000

typedef enum sched_strategy { SCHED_RANDOM, SCHED_PCT, SCHED_DFS, SCHED_REPLAY } sched_strategy;

typedef struct sched_opts {
    sched_strategy strategy;
    uint64_t seed;        /* RANDOM and PCT: the run's seed */
    int pct_depth;        /* PCT: d (bugs of depth d); 2 or 3 */
    long pct_steps;       /* PCT: k, the expected run length in switch points */
    int max_preemptions;  /* DFS: B */
    int max_ticks;        /* TICK choices per run (0: the clock never moves) */
    int64_t tick_ns;      /* what one TICK adds to the test clock */
    int max_deaths;       /* DIE choices per run (0 or 1) */
    double tick_p, die_p; /* RANDOM: chance of a TICK / a DIE at a switch point */
    long solo_bound;      /* V5: own switch points in a row inside one operation */
    const char *replay;   /* REPLAY: the schedule string */
} sched_opts;

/* What a run came to. */
typedef enum sched_verdict {
    SCHED_OK,
    SCHED_FAILED,   /* sched_fail was called (an oracle or invariant) */
    SCHED_LIVELOCK, /* V5 */
    SCHED_TOO_LONG, /* more than SCHED_MAX_STEPS switch points */
    SCHED_DIVERGED, /* REPLAY/DFS: the run took another path than its prefix */
} sched_verdict;

typedef struct sched_result {
    sched_verdict verdict;
    long steps;             /* switch points passed */
    long switches;          /* choices that ran another thread */
    long points[SCHED_MAX_THREADS];
    char message[1024];     /* what failed */
    char schedule[262144];  /* the choice string: replays the run */
} sched_result;

typedef void (*sched_body_fn)(void *arg, int tid);

/* Runs the body on nthreads threads under one schedule. before_each is
 * called by every switch point with no thread switched in between (NULL:
 * none): the scenario's per-step invariants (call sched_fail from it). */
void sched_run(const sched_opts *o, int nthreads, sched_body_fn body, void *arg,
               void (*check)(void *arg), sched_result *out);

/* DFS: call between runs; true while schedules remain (the next sched_run
 * with the same opts follows the next one). sched_dfs_reset starts over. */
bool sched_dfs_next(void);
void sched_dfs_reset(void);

/* Inside a run: */
void sched_point(int kind, const void *addr); /* a switch point */
int sched_tid(void);           /* the calling scenario thread, -1 outside */
void sched_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool sched_failed(void);
void sched_op_begin(void);     /* the calling thread starts an operation (V5) */
void sched_op_end(void);
void sched_quiet(bool on);     /* this thread's switch points do nothing */
/* The CPU the calling thread is on (the checker's build of the core asks
 * it): its own number, or with sched_set_migrate(true) a new CPU at each
 * read (tid + reads) mod ncpu, so the CPU changes between a read and the
 * write that uses it. */
void sched_set_cpus(int ncpu, bool migrate);
void sched_set_clock(void (*tick)(int64_t ns));

/* Events in the run's total order (a counter every recorded event takes). */
uint64_t sched_event(void);
void sched_event_reset(void); /* back to 0 (the checker, before a run's setup) */
/* After a run: did thread tid end its body (false: it died or the run stopped)? */
bool sched_thread_ended(int tid);

const char *sched_verdict_name(sched_verdict v);
const char *sched_strategy_name(sched_strategy s);

#endif
