/*
 * Shared fixtures of the Criterion unit tests (tests/test_*.c).
 *
 * Everything here is static: each test file includes it once and becomes one
 * executable. What it offers:
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
 *                 the test executables are linked with
 *                 -Wl,--wrap=malloc,--wrap=calloc,... so that calls from the
 *                 static circuit_testable library come here first.
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
    void *user; /* free for the test */
};

static inline void counts_check(pol *p, const circuit_counts *c)
{
    if (c->successes < 0 || c->failures < 0 || c->successes + c->failures > p->window ||
        (c->consecutive_successes != 0 && c->consecutive_failures != 0) ||
        c->consecutive_successes < 0 || c->consecutive_failures < 0 || c->timed_out < 0)
        A_ADD(&p->sum_violations, 1);
}

static inline bool spy_trip(void *arg, const circuit_counts *c)
{
    pol *p = (pol *)arg;
    a_max(&p->max_inside, A_ADD(&p->inside, 1));
    counts_check(p, c);
    int64_t i = A_ADD(&p->trip_calls, 1) - 1;
    if (i < SPY_MAX)
        p->trip_seen[i] = *c;
    p->trip_last = *c;
    bool open = (p->trip_run > 0 && c->consecutive_failures >= p->trip_run) ||
                (p->trip_failures > 0 && c->failures >= p->trip_failures) ||
                (p->trip_total > 0 && c->successes + c->failures >= p->trip_total);
    A_ADD(&p->inside, -1);
    return open;
}

static inline circuit_state spy_probe(void *arg, const circuit_counts *c)
{
    pol *p = (pol *)arg;
    a_max(&p->max_inside, A_ADD(&p->inside, 1));
    counts_check(p, c);
    int64_t i = A_ADD(&p->probe_calls, 1) - 1;
    if (i < SPY_MAX)
        p->probe_seen[i] = *c;
    p->probe_last = *c;
    circuit_state d = CIRCUIT_HALF_OPEN;
    if (p->probe_forced) {
        d = (circuit_state)(p->probe_forced == PROBE_ANSWER_ZERO ? 0 : p->probe_forced);
    } else if (p->script && p->script_pos < p->script_len) {
        d = p->script[p->script_pos++];
    } else if (p->reopen_on_failure && c->consecutive_failures > 0) {
        d = CIRCUIT_OPEN;
    } else if (p->reopen_timeouts > 0 && c->timed_out >= p->reopen_timeouts) {
        d = CIRCUIT_OPEN;
    } else if (p->close_run > 0 && c->consecutive_successes >= p->close_run) {
        d = CIRCUIT_CLOSED;
    }
    A_ADD(&p->inside, -1);
    return d;
}

static inline circuit_outcome spy_classify(void *arg, void *call_ctx, int result)
{
    fx *f = (fx *)arg;
    A_ADD(&f->c.calls, 1);
    f->c.last_ctx = call_ctx;
    f->c.last_arg = arg;
    f->c.last_result = result;
    if (f->c.extra)
        f->c.extra(f, call_ctx, result);
    switch (result) {
    case RS_OK: return CIRCUIT_SUCCESS;
    case RS_FAIL: return CIRCUIT_FAILURE;
    case RS_IGN: return CIRCUIT_IGNORED;
    default: return (circuit_outcome)result;
    }
}

static inline void spy_observe(void *arg, void *call_ctx, const circuit_transition *t)
{
    fx *f = (fx *)arg;
    tlog *l = &f->log;
    a_max(&l->max_inside, A_ADD(&l->inside, 1));
    if (t->generation != l->last_gen + 1 || t->from != l->last_to)
        A_ADD(&l->order_errors, 1);
    l->last_gen = t->generation;
    l->last_to = t->to;
    int64_t i = A_LOAD(&l->n);
    if (i < LOG_MAX) {
        l->tr[i] = *t;
        l->ctx[i] = call_ctx;
    }
    A_ADD(&l->inside, -1);
    A_STORE(&l->n, i + 1);
    if (l->extra)
        l->extra(f, call_ctx, t);
}

/* Builds f's breaker. Default rules: trip after 2 consecutive failures;
 * while half-open reopen on a failure, close after 2 consecutive successes,
 * keep probing after a timeout. */
static inline void fx_init(fx *f, int window, int probes, int64_t open_for, int64_t probe_to)
{
    memset(f, 0, sizeof *f);
    f->log.last_to = CIRCUIT_CLOSED;
    f->p.trip_run = 2;
    f->p.close_run = 2;
    f->p.reopen_on_failure = true;
    f->p.window = window;
    f->spec = (circuit_spec){
        .config = {.window = window, .probes = probes, .open_for_ns = open_for,
                   .probe_timeout_ns = probe_to},
        .policy = {.trip = spy_trip, .probe = spy_probe, .arg = &f->p},
        .classify = spy_classify,
        .classify_arg = f,
        .observe = spy_observe,
        .observe_arg = f,
    };
}

static inline void fx_build(fx *f)
{
    char err[256] = "";
    int rc = circuit_new(&f->b, &f->spec, err, sizeof err);
    cr_assert_eq(rc, 0, "circuit_new failed: %d (%s)", rc, err);
    cr_assert_not_null(f->b);
}

static inline void fx_new(fx *f, int window, int probes, int64_t open_for, int64_t probe_to)
{
    fx_init(f, window, probes, open_for, probe_to);
    fx_build(f);
}

static inline void fx_free(fx *f)
{
    circuit_free(f->b);
    f->b = NULL;
}

/* allow + done: the call must be admitted; returns what circuit_done returned. */
static inline bool fx_call_ctx(fx *f, void *ctx, int result)
{
    circuit_ticket t;
    circuit_rejection rej;
    bool ok = circuit_allow(f->b, ctx, &t, &rej);
    cr_assert(ok, "call not admitted (state %s, retry_after %lld)",
              circuit_state_name(rej.state), (long long)rej.retry_after_ns);
    return circuit_done(&t, result);
}

static inline bool fx_call(fx *f, int result) { return fx_call_ctx(f, NULL, result); }

/* Trips the breaker with the default rule (2 failures); clock unchanged. */
static inline void fx_open(fx *f)
{
    cr_assert_eq(circuit_get_state(f->b), CIRCUIT_CLOSED);
    while (circuit_get_state(f->b) == CIRCUIT_CLOSED)
        fx_call(f, RS_FAIL);
    cr_assert_eq(circuit_get_state(f->b), CIRCUIT_OPEN);
}

/* Opens f's breaker at T0 (one failure with the trip rule set to 1 for the
 * occasion) and sets the clock to T0 + OPEN_FOR: the next allow makes the
 * open -> half-open transition and is the first probe. */
static inline void fx_half_open_due(fx *f)
{
    int64_t keep = f->p.trip_run;
    f->p.trip_run = 1;
    circuit_test_clock_set(T0);
    fx_call(f, RS_FAIL);
    cr_assert_eq(circuit_get_state(f->b), CIRCUIT_OPEN);
    f->p.trip_run = keep;
    circuit_test_clock_set(T0 + OPEN_FOR);
}

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

/* ---- abort checks ---------------------------------------------------------- */

typedef void (*abort_fn)(void *arg);

/* Runs fn(arg) in a forked child whose stderr goes to a pipe; asserts the
 * child was killed by SIGABRT after printing "libcircuit: " and `cause`. */
static inline void expect_abort(abort_fn fn, void *arg, const char *cause)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], STDERR_FILENO);
        close(fds[1]);
        fn(arg);
        _exit(0); /* did not abort */
    }
    close(fds[1]);
    char text[2048];
    size_t used = 0;
    for (;;) {
        ssize_t k = read(fds[0], text + used, sizeof text - 1 - used);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        used += (size_t)k;
        if (used == sizeof text - 1)
            break;
    }
    text[used] = '\0';
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
              "expected an abort naming \"%s\"; the child %s %d; stderr: %s", cause,
              WIFSIGNALED(status) ? "died of signal" : "exited with",
              WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), text);
    cr_assert_not_null(strstr(text, "libcircuit: "), "no \"libcircuit: \" prefix: %s", text);
    cr_assert_not_null(strstr(text, cause), "the message does not name \"%s\": %s", cause, text);
}

/* ---- parking a thread at a core park point ------------------------------- */

typedef struct park_ctl {
    sem_t parked;      /* posted by the parked thread when it stops */
    sem_t resume;      /* posted by the test to let it go */
} park_ctl;

static park_ctl park_g;
static _Thread_local int park_here; /* the point this thread stops at (0: none) */
static _Thread_local int park_count; /* how many more times to stop (default 1) */

static inline void park_hook(circuit_test_point point, void *arg)
{
    (void)arg;
    if (park_here != 0 && (int)point == park_here) {
        if (--park_count <= 0)
            park_here = 0;
        sem_post(&park_g.parked);
        while (sem_wait(&park_g.resume) != 0)
            ;
    }
}

static inline void park_setup(void)
{
    sem_init(&park_g.parked, 0, 0);
    sem_init(&park_g.resume, 0, 0);
    circuit_test_set_hook(park_hook, NULL);
}

/* The calling thread will stop the next time it passes `point`. */
static inline void park_me_at(circuit_test_point point)
{
    park_here = (int)point;
    park_count = 1;
}

static inline void park_wait(void)
{
    while (sem_wait(&park_g.parked) != 0)
        ;
}

static inline void park_release(void) { sem_post(&park_g.resume); }

/* ---- heap allocations made by the core (linked with --wrap) ---------------- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t k, size_t n);
void *__wrap_realloc(void *p, size_t n);
int __wrap_posix_memalign(void **p, size_t align, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);
void __wrap_free(void *p);

static int64_t alloc_calls;   /* allocations attempted */
static int64_t alloc_live;    /* allocated and not yet freed */
static int64_t alloc_fail_at; /* the n-th attempt (1-based) fails; 0: none */

/* true when this attempt must fail */
static inline bool alloc_attempt(void)
{
    int64_t n = A_ADD(&alloc_calls, 1);
    return A_LOAD(&alloc_fail_at) != 0 && n == A_LOAD(&alloc_fail_at);
}

/* A thread that sets alloc_park stops in its next malloc (the core mallocs
 * only a transition record beyond the pool: between the CAS that made the
 * transition and queueing it) until alloc_release(). */
static _Thread_local int alloc_park;
static sem_t alloc_parked, alloc_resume;

static inline void alloc_park_setup(void)
{
    sem_init(&alloc_parked, 0, 0);
    sem_init(&alloc_resume, 0, 0);
}

static inline void alloc_wait(void)
{
    while (sem_wait(&alloc_parked) != 0)
        ;
}

static inline void alloc_release(void) { sem_post(&alloc_resume); }

void *__wrap_malloc(size_t n)
{
    if (alloc_park) {
        alloc_park = 0;
        sem_post(&alloc_parked);
        while (sem_wait(&alloc_resume) != 0)
            ;
    }
    if (alloc_attempt())
        return NULL;
    void *p = __real_malloc(n);
    if (p)
        A_ADD(&alloc_live, 1);
    return p;
}

void *__wrap_calloc(size_t k, size_t n)
{
    if (alloc_attempt())
        return NULL;
    void *p = __real_calloc(k, n);
    if (p)
        A_ADD(&alloc_live, 1);
    return p;
}

void *__wrap_realloc(void *p, size_t n)
{
    if (alloc_attempt())
        return NULL;
    void *q = __real_realloc(p, n);
    if (q && !p)
        A_ADD(&alloc_live, 1);
    return q;
}

int __wrap_posix_memalign(void **p, size_t align, size_t n)
{
    if (alloc_attempt())
        return ENOMEM;
    int rc = __real_posix_memalign(p, align, n);
    if (rc == 0)
        A_ADD(&alloc_live, 1);
    return rc;
}

void *__wrap_aligned_alloc(size_t align, size_t n)
{
    if (alloc_attempt())
        return NULL;
    void *p = __real_aligned_alloc(align, n);
    if (p)
        A_ADD(&alloc_live, 1);
    return p;
}

void __wrap_free(void *p)
{
    if (p)
        A_ADD(&alloc_live, -1);
    __real_free(p);
}

/* ---- threads ---------------------------------------------------------------- */

/* Threads of this process: the entries of /proc/self/task (SPEC TM1). */
static inline int thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

#endif
