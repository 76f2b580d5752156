/*
 * checker: scenarios of the real core under the controlled scheduler, and
 * their oracle (docs/CONTRACT.md V3).
 *
 * A scenario is a few threads, each with a short script of public calls on
 * one breaker, after a single-threaded setup. Every call is recorded in a
 * history (start and end in the run's total order, arguments, answers). The
 * oracle then
 *   - after every switch point: reads circuit_get_stats (a pure read, M1)
 *     and checks the scenario's invariants: probes in flight <= P and 0
 *     unless half-open; totals, generation and transitions never decrease;
 *     the M1 identity within what the calls begun and ended allow
 *     (admitted - settled between the tickets surely live and those maybe
 *     live);
 *   - at the end: searches for a linearization of the history (Wing and
 *     Gong): an order of the calls that respects real time (a call that
 *     ended before another began comes first) in which the sequential
 *     reference model (tests/model) gives every call the answer the real
 *     core gave, the same transitions (from, to, generation, cause, counts,
 *     the call_ctx of policy and operator ones) and, once every thread has
 *     ended, the same final stats, every field. A dead thread's unfinished
 *     call may take effect or not.
 */
#ifndef CIRCUIT_SCHED_CHECKER_H
#define CIRCUIT_SCHED_CHECKER_H

#include "circuit.h"
#include "scheduler.h"

typedef struct scenario {
    const char *name;
    const char *rules;            /* the rule ids it checks */
    const char *about;
    circuit_config config;
    int trip_failures;            /* trip: failures >= this */
    int close_successes;          /* probe: close after this many successes */
    const char *setup;            /* single-threaded script before the threads */
    const char *threads[SCHED_MAX_THREADS];
    int ncpu;                     /* CPUs of the breaker (circuit_test_set_cpus) */
    bool migrate;                 /* a thread changes CPU at every CPU read */
    int max_ticks;
    int64_t tick_ns;
    int max_deaths;
    uint64_t skip_generations;    /* after `setup`: isolate, move on this many, reset; the
                                   * model starts there and `setup2` follows */
    const char *setup2;
    bool probe_stay;              /* the probe policy keeps probing (reopens on nothing) */
    bool no_model;                /* invariants and liveness only (setups too long to replay) */
    bool no_step_check;           /* no get_stats at every switch point (a planted livelock
                                   * would spin inside the check, where nothing can stop it) */
    const char *open_finding;     /* an open finding (README.md) makes it fail: run only when
                                   * named, never by --scenario all */
    bool shared;                  /* SH1-SH5: the breaker in a shared region; each thread is
                                   * a process with its own attached handle (observe, O6
                                   * records, delivery) and proc id tid + 1, so a thread
                                   * that dies is a dead process */
    bool share01;                 /* shared: threads 0 and 1 are one process (one handle,
                                   * proc id 1): SH3's per-process order with two makers */
    bool arena;                   /* shared: the breaker's per-CPU part is unit 1 of an
                                   * arena whose unit 0 is a neighbour breaker nobody
                                   * calls: it must end with every count 0 (L5) */
} scenario;

/*
 * Scripts: one letter per call.
 *   a        circuit_allow; an admitted ticket joins the thread's queue
 *   s f i    circuit_done(oldest ticket of the queue, success/failure/ignored)
 *   r        circuit_release(oldest ticket)
 *   S F I R  the same on the oldest ticket admitted by the setup (late settlers)
 *   g        circuit_get_state          x  circuit_get_stats
 *   o        circuit_isolate            e  circuit_reset
 *   n        circuit_new + circuit_free of another breaker (the arena)
 *   t        setup only: move the clock by the scenario's tick
 *   k        setup only: 8192 closed states (isolate + reset, no model)
 *   K        8191 x (reset, a failure that trips), then a reset: one step of
 *            the schedule (no switch point inside; no model)
 * A settle letter with no ticket in its queue does nothing.
 */

const scenario *checker_find(const char *name);
const scenario *checker_all(int *n);

typedef struct checker_stats {
    long runs, failed;
    long steps_total, switches_total;
    long points_max;
    long linearize_nodes;
    double seconds;
} checker_stats;

/* Compare a closed get_stats' counts too (known finding F1: they can
 * fail; tests/sched/README.md). */
extern bool checker_strict_closed_stats;
/* Time never runs backwards along a linearization (finding F2 makes the
 * shipped core fail it; tests/sched/README.md). */
extern bool checker_monotone_time;

/* One schedule of the scenario; false when it failed (r says why). */
bool checker_run(const scenario *sc, const sched_opts *o, sched_result *r, long *lin_nodes);

#endif
