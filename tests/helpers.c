/*
 * The unit tests' shared fixtures: see helpers.h.
 *
 * SPDX-License-Identifier: MIT
 */
#include "helpers.h"

/* ---- the fixture ----------------------------------------------------------- */

void counts_check(pol *p, const circuit_counts *c)
{
    if (c->successes < 0 || c->failures < 0 || c->successes + c->failures > p->window ||
        (c->consecutive_successes != 0 && c->consecutive_failures != 0) ||
        c->consecutive_successes < 0 || c->consecutive_failures < 0 || c->timed_out < 0)
        A_ADD(&p->sum_violations, 1);
}

bool spy_trip(void *arg, const circuit_counts *c)
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

circuit_state spy_probe(void *arg, const circuit_counts *c)
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

circuit_outcome spy_classify(void *arg, void *call_ctx, int result)
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

void spy_observe(void *arg, void *call_ctx, const circuit_transition *t)
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
void fx_init(fx *f, int window, int probes, int64_t open_for, int64_t probe_to)
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

void fx_build(fx *f)
{
    char err[256] = "";
    int rc = circuit_new(&f->b, &f->spec, err, sizeof err);
    cr_assert_eq(rc, 0, "circuit_new failed: %d (%s)", rc, err);
    cr_assert_not_null(f->b);
}

void fx_new(fx *f, int window, int probes, int64_t open_for, int64_t probe_to)
{
    fx_init(f, window, probes, open_for, probe_to);
    fx_build(f);
}

void fx_free(fx *f)
{
    circuit_free(f->b);
    f->b = NULL;
}

/* allow + done: the call must be admitted; returns what circuit_done returned. */
bool fx_call_ctx(fx *f, void *ctx, int result)
{
    circuit_ticket t;
    circuit_rejection rej;
    bool ok = circuit_allow(f->b, ctx, &t, &rej);
    cr_assert(ok, "call not admitted (state %s, retry_after %lld)",
              circuit_state_name(rej.state), (long long)rej.retry_after_ns);
    bool counted = circuit_done(&t, result);
    if (f->nseen < SPY_MAX)
        f->seen[f->nseen] = fx_counts(f);
    f->nseen++;
    return counted;
}

circuit_counts fx_counts(fx *f)
{
    circuit_stats s;
    circuit_get_stats(f->b, &s);
    return s.counts;
}

bool fx_call(fx *f, int result) { return fx_call_ctx(f, NULL, result); }

/* Trips the breaker with the default rule (2 failures); clock unchanged. */
void fx_open(fx *f)
{
    cr_assert_eq(circuit_get_state(f->b), CIRCUIT_CLOSED);
    while (circuit_get_state(f->b) == CIRCUIT_CLOSED)
        fx_call(f, RS_FAIL);
    cr_assert_eq(circuit_get_state(f->b), CIRCUIT_OPEN);
}

/* Opens f's breaker at T0 (one failure with the trip rule set to 1 for the
 * occasion) and sets the clock to T0 + OPEN_FOR: the next allow makes the
 * open -> half-open transition and is the first probe. */
void fx_half_open_due(fx *f)
{
    int64_t keep = f->p.trip_run;
    f->p.trip_run = 1;
    circuit_test_clock_set(T0);
    fx_call(f, RS_FAIL);
    cr_assert_eq(circuit_get_state(f->b), CIRCUIT_OPEN);
    f->p.trip_run = keep;
    circuit_test_clock_set(T0 + OPEN_FOR);
}

/* ---- abort checks ---------------------------------------------------------- */

/* Runs fn(arg) in a forked child whose stderr goes to a pipe; asserts the
 * child was killed by SIGABRT after printing "libcircuit: " and `cause`. */
void expect_abort(abort_fn fn, void *arg, const char *cause)
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

static void park_hook(circuit_test_point point, void *arg)
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

void park_setup(void)
{
    sem_init(&park_g.parked, 0, 0);
    sem_init(&park_g.resume, 0, 0);
    circuit_test_set_hook(park_hook, NULL);
}

/* The calling thread will stop the next time it passes `point`. */
void park_me_at(circuit_test_point point)
{
    park_here = (int)point;
    park_count = 1;
}

void park_wait(void)
{
    while (sem_wait(&park_g.parked) != 0)
        ;
}

void park_release(void) { sem_post(&park_g.resume); }

/* ---- threads ---------------------------------------------------------------- */

/* Threads of this process: the entries of /proc/self/task (TM1). */
int thread_count(void)
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
