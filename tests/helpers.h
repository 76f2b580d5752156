/*
 * Shared fixtures of the Criterion unit tests (tests/test_*.c): declared
 * here, defined in tests/helpers.c, which every test program links (see
 * tests/CMakeLists.txt). What it offers:
 *
 *   fx            a breaker with a spy on every callback:
 *                   - observe logs every transition (and its call_ctx) and
 *                     checks generation order and from == previous to online;
 *                   - classify maps 0 -> success, 1 -> failure, 2 -> ignored,
 *                     any other value -> that value cast (an invalid outcome);
 *                   - trip / probe are configurable rules (pol) that log every
 *                     circuit_counts they are asked with.
 *   expect_abort  forks, runs a function in the child with stderr sent to a
 *                 pipe, and asserts the child died of SIGABRT printing
 *                 "libcircuit: " and the expected cause.
 *   park_*        makes one chosen thread stop at one of the core's park
 *                 points (src/testing.h) until the test lets it go.
 *   alloc_*       counts (and can fail) the heap allocations the CORE makes:
 *                 tests/alloc_count.h, linked in its --wrap form, so that
 *                 calls from the static circuit_testable library are counted.
 *
 * The settable clock starts at T0 in every test that uses time (tests run in
 * their own process, so the clock is not shared between tests).
 */
#ifndef CIRCUIT_TEST_HELPERS_H
#define CIRCUIT_TEST_HELPERS_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "circuit.h"
#include "testing.h"
#include "alloc_count.h"

/* ---- time ---------------------------------------------------------------- */

#define T0 INT64_C(1000000000)     /* where every time-driven test starts */
#define OPEN_FOR INT64_C(1000)     /* default open_for_ns */
#define PROBE_TO INT64_C(500)      /* default probe_timeout_ns */

/* ---- results understood by the spy classifier ---------------------------- */

#define RS_OK 0   /* success */
#define RS_FAIL 1 /* failure */
#define RS_IGN 2  /* ignored */

/* ---- small atomics on plain integers --------------------------------------- */

#define A_LOAD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define A_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)
#define A_ADD(p, v) __atomic_add_fetch((p), (v), __ATOMIC_SEQ_CST)

static inline void a_max(int64_t *p, int64_t v)
{
    int64_t cur = A_LOAD(p);
    while (cur < v && !__atomic_compare_exchange_n(p, &cur, v, false, __ATOMIC_SEQ_CST,
                                                    __ATOMIC_SEQ_CST))
        ;
}

/* ---- the fixture ----------------------------------------------------------- */

#define LOG_MAX 512
#define PROBE_ANSWER_ZERO 1000
#define SPY_MAX 512

typedef struct fx fx;

/* Called by the spy observe after it logged t (optional, per test). */
typedef void (*observe_extra_fn)(fx *f, void *call_ctx, const circuit_transition *t);

typedef struct tlog {
    circuit_transition tr[LOG_MAX];
    void *ctx[LOG_MAX];
    int64_t n;            /* transitions delivered */
    int64_t order_errors; /* generation != previous + 1, or from != previous to */
    int64_t inside;       /* observe calls running now */
    int64_t max_inside;   /* most observe calls ever running at once */
    uint64_t last_gen;
    circuit_state last_to;
    observe_extra_fn extra;
    void *extra_arg;
} tlog;

typedef struct pol {
    /* trip: open when consecutive_failures >= trip_run (<= 0: never) or when
     * failures >= trip_failures (<= 0: never) or ... */
    int64_t trip_run;
    int64_t trip_failures;
    int64_t trip_total; /* open when successes + failures >= trip_total (<= 0: never) */
    /* probe: reopen on a failure if reopen_on_failure; close when
     * consecutive_successes >= close_run (<= 0: never); reopen when
     * timed_out >= reopen_timeouts (<= 0: never); otherwise keep probing. */
    int64_t close_run;
    bool reopen_on_failure;
    int64_t reopen_timeouts;
    /* when set, the probe policy answers script[0], script[1], ... first */
    const circuit_state *script;
    int64_t script_len;
    int64_t script_pos;
    /* when nonzero, probe always answers this (it may be invalid);
     * PROBE_ANSWER_ZERO makes it answer 0 */
    int probe_forced;
    /* spies */
    circuit_counts trip_seen[SPY_MAX]; /* the first SPY_MAX calls */
    circuit_counts trip_last;          /* the latest call (single-threaded tests) */
    int64_t trip_calls;
    circuit_counts probe_seen[SPY_MAX];
    circuit_counts probe_last;
    int64_t probe_calls;
    int64_t inside;     /* policy calls running now (L4) */
    int64_t max_inside; /* most policy calls running at once */
    int64_t sum_violations; /* successes + failures > window, or both runs set */
    int64_t window;
} pol;

typedef struct cls {
    int64_t calls;
    void *last_ctx;
    void *last_arg;
    int last_result;
    void (*extra)(fx *f, void *call_ctx, int result);
} cls;

struct fx {
    circuit_breaker *b;
    circuit_spec spec;
    tlog log;
    pol p;
    cls c;
    /* counts after each fx_call (circuit_get_stats, M1): since 0.2 the
     * trip policy is not asked for a success into a window with no failure
     * (S2), so the policy spies no longer see every count */
    circuit_counts seen[SPY_MAX];
    int64_t nseen;
    void *user; /* free for the test */
};

/* Counts the calls a policy is asked with that break C1/C2 (sum_violations). */
void counts_check(pol *p, const circuit_counts *c);

/* The spy callbacks fx_init installs (arg: the pol, or the fx). */
bool spy_trip(void *arg, const circuit_counts *c);
circuit_state spy_probe(void *arg, const circuit_counts *c);
circuit_outcome spy_classify(void *arg, void *call_ctx, int result);
void spy_observe(void *arg, void *call_ctx, const circuit_transition *t);

/* Builds f's breaker. Default rules: trip after 2 consecutive failures;
 * while half-open reopen on a failure, close after 2 consecutive successes,
 * keep probing after a timeout. fx_init fills f->spec only (change it, then
 * fx_build); fx_new does both. */
void fx_init(fx *f, int window, int probes, int64_t open_for, int64_t probe_to);
void fx_build(fx *f);
void fx_new(fx *f, int window, int probes, int64_t open_for, int64_t probe_to);
void fx_free(fx *f);

/* The counts of the current state now (circuit_get_stats). */
circuit_counts fx_counts(fx *f);

/* allow + done: the call must be admitted; returns what circuit_done returned.
 * Records the counts afterwards in f->seen[f->nseen++] (first SPY_MAX). */
bool fx_call_ctx(fx *f, void *ctx, int result);
bool fx_call(fx *f, int result);

/* Trips the breaker with the default rule (2 failures); clock unchanged. */
void fx_open(fx *f);

/* Opens f's breaker at T0 (one failure with the trip rule set to 1 for the
 * occasion) and sets the clock to T0 + OPEN_FOR: the next allow makes the
 * open -> half-open transition and is the first probe. */
void fx_half_open_due(fx *f);

/* Checks one logged transition. */
#define assert_tr(f, i, from_, to_, gen_)                                                   \
    do {                                                                                     \
        cr_assert_gt((f)->log.n, (i), "transition %d not delivered (only %lld)", (int)(i),  \
                     (long long)(f)->log.n);                                                 \
        const circuit_transition *tr_ = &(f)->log.tr[(i)];                                   \
        cr_assert_eq(tr_->from, (from_), "transition %d: from %s", (int)(i),                \
                     circuit_state_name(tr_->from));                                         \
        cr_assert_eq(tr_->to, (to_), "transition %d: to %s", (int)(i),                      \
                     circuit_state_name(tr_->to));                                           \
        cr_assert_eq(tr_->generation, (uint64_t)(gen_), "transition %d: generation %llu",   \
                     (int)(i), (unsigned long long)tr_->generation);                         \
    } while (0)

#define assert_counts(cp, s, f_, cs, cf, to_)                                              \
    do {                                                                                    \
        const circuit_counts *c_ = (cp);                                                    \
        cr_assert_eq(c_->successes, (int64_t)(s), "successes %lld", (long long)c_->successes); \
        cr_assert_eq(c_->failures, (int64_t)(f_), "failures %lld", (long long)c_->failures); \
        cr_assert_eq(c_->consecutive_successes, (int64_t)(cs), "consecutive_successes %lld", \
                     (long long)c_->consecutive_successes);                                 \
        cr_assert_eq(c_->consecutive_failures, (int64_t)(cf), "consecutive_failures %lld",  \
                     (long long)c_->consecutive_failures);                                  \
        cr_assert_eq(c_->timed_out, (int64_t)(to_), "timed_out %lld",                       \
                     (long long)c_->timed_out);                                             \
    } while (0)

#define assert_rejected(rej, st, retry)                                                     \
    do {                                                                                    \
        cr_assert_eq((rej).state, (st), "rejection state %s", circuit_state_name((rej).state)); \
        cr_assert_eq((rej).retry_after_ns, (int64_t)(retry), "retry_after_ns %lld",         \
                     (long long)(rej).retry_after_ns);                                      \
    } while (0)

/* The totals of circuit_get_stats (M1): successes and failures counted. */
#define assert_counts_stats(f, s_, f_)                                                      \
    do {                                                                                    \
        circuit_stats st_;                                                                  \
        circuit_get_stats((f)->b, &st_);                                                    \
        cr_assert_eq(st_.successes, (uint64_t)(s_), "successes counted %llu",                \
                     (unsigned long long)st_.successes);                                    \
        cr_assert_eq(st_.failures, (uint64_t)(f_), "failures counted %llu",                  \
                     (unsigned long long)st_.failures);                                     \
    } while (0)

/* ---- abort checks ---------------------------------------------------------- */

typedef void (*abort_fn)(void *arg);

/* Runs fn(arg) in a forked child whose stderr goes to a pipe; asserts the
 * child was killed by SIGABRT after printing "libcircuit: " and `cause`. */
void expect_abort(abort_fn fn, void *arg, const char *cause);

/* ---- parking a thread at a core park point ------------------------------- */

/* Installs the park hook (call once per test, before park_me_at). */
void park_setup(void);
/* The calling thread will stop the next time it passes `point`. */
void park_me_at(circuit_test_point point);
/* Waits until a thread has stopped; park_release lets it go on. */
void park_wait(void);
void park_release(void);

/* ---- threads ---------------------------------------------------------------- */

/* Threads of this process: the entries of /proc/self/task (TM1). */
int thread_count(void);

#endif
