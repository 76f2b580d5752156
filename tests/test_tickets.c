/*
 * T1-T7: tickets, settling them, and what allow/done/release may touch.
 */
#include <setjmp.h>

#include "helpers.h"

/* ---- T1 ---------------------------------------------------------------------- */

Test(tickets, T1_allow_admits_or_fills_the_rejection)
{
    fx f;
    fx_new(&f, 4, 1, OPEN_FOR, PROBE_TO);
    circuit_ticket t;
    circuit_rejection rej;
    cr_assert(circuit_allow(f.b, NULL, &t, &rej));
    cr_assert(circuit_done(&t, RS_FAIL));
    circuit_test_clock_set(T0);
    fx_call(&f, RS_FAIL);
    circuit_test_clock_set(T0 + 10);
    rej = (circuit_rejection){CIRCUIT_CLOSED, -1};
    cr_assert_not(circuit_allow(f.b, NULL, &t, &rej));
    assert_rejected(rej, CIRCUIT_OPEN, OPEN_FOR - 10);
    cr_assert_not(circuit_allow(f.b, NULL, &t, NULL)); /* rej may be NULL */
    /* a rejected ticket may be passed to allow again (it is not live) */
    circuit_test_clock_set(T0 + OPEN_FOR);
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    cr_assert(circuit_done(&t, RS_OK));
    /* settled ticket memory may be reused too */
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    circuit_release(&t);
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    circuit_release(&t);
    fx_free(&f);
}

static fx t1_fx;
static circuit_ticket t1_ticket;

static void t1_done_on_rejected(void *arg)
{
    (void)arg;
    fx_new(&t1_fx, 4, 1, OPEN_FOR, PROBE_TO);
    circuit_test_clock_set(T0);
    fx_open(&t1_fx);
    cr_assert_not(circuit_allow(t1_fx.b, NULL, &t1_ticket, NULL));
    circuit_release(&t1_ticket); /* does nothing */
    circuit_release(&t1_ticket);
    circuit_done(&t1_ticket, RS_OK);
}

Test(tickets, T1_done_on_a_rejected_ticket_aborts, .signal = SIGABRT)
{
    expect_abort(t1_done_on_rejected, NULL, "rejected by circuit_allow");
    t1_done_on_rejected(NULL);
}

/* No "allow on a live ticket" abort: circuit_allow writes into caller memory
 * that is usually uninitialised stack, which can hold any bytes (a spilled
 * constant of an earlier call included), so the library cannot tell a live
 * ticket from garbage there. */

Test(tickets, T1_allow_does_not_read_the_tickets_old_contents)
{
    fx f;
    fx_new(&f, 8, 1, OPEN_FOR, PROBE_TO);
    /* an uninitialised stack ticket may hold anything, even the bytes of a
     * live ticket left by an earlier frame */
    circuit_ticket live, t;
    cr_assert(circuit_allow(f.b, NULL, &live, NULL));
    memcpy(&t, &live, sizeof t);
    cr_assert(circuit_allow(f.b, NULL, &t, NULL), "allow looked at the old contents");
    cr_assert(circuit_done(&t, RS_OK));
    cr_assert(circuit_done(&live, RS_OK));
    for (int fill = 0; fill < 256; fill += 85) {
        memset(&t, fill, sizeof t);
        cr_assert(circuit_allow(f.b, NULL, &t, NULL), "fill %#x", fill);
        cr_assert(circuit_done(&t, RS_OK));
    }
    assert_counts_stats(&f, 6, 0);
    fx_free(&f);
}

Test(tickets, T1_allow_on_a_live_ticket_overwrites_it_and_its_probe_times_out)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.probe_forced = CIRCUIT_HALF_OPEN;
    fx_build(&f);
    /* closed: the first admission is simply never settled */
    circuit_ticket t, u;
    circuit_rejection rej;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    cr_assert(circuit_done(&t, RS_OK));
    assert_counts_stats(&f, 1, 0);
    /* half-open: the overwritten admission keeps its slot until its timeout */
    fx_half_open_due(&f);
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    cr_assert_not(circuit_allow(f.b, NULL, &t, &rej)); /* t is now a rejected ticket */
    assert_rejected(rej, CIRCUIT_HALF_OPEN, 0);
    circuit_release(&t); /* does nothing: that probe cannot be reached any more */
    cr_assert_not(circuit_allow(f.b, NULL, &u, &rej));
    circuit_test_clock_advance(PROBE_TO);
    cr_assert(circuit_allow(f.b, NULL, &u, &rej));
    cr_assert_eq(f.p.probe_calls, 1);
    assert_counts(&f.p.probe_last, 0, 0, 0, 0, 1);
    circuit_release(&u);
    fx_free(&f);
}

/* ---- T2 ---------------------------------------------------------------------- */

Test(tickets, T2_classify_gets_its_arg_the_call_ctx_and_the_result)
{
    fx f;
    fx_new(&f, 4, 1, OPEN_FOR, PROBE_TO);
    int ctx_a, ctx_b;
    circuit_ticket a, b;
    cr_assert(circuit_allow(f.b, &ctx_a, &a, NULL));
    cr_assert(circuit_allow(f.b, &ctx_b, &b, NULL));
    cr_assert_eq(f.c.calls, 0, "classify called by allow");
    cr_assert(circuit_done(&b, RS_IGN));
    cr_assert_eq(f.c.calls, 1);
    cr_assert_eq(f.c.last_arg, &f);
    cr_assert_eq(f.c.last_ctx, &ctx_b);
    cr_assert_eq(f.c.last_result, RS_IGN);
    cr_assert(circuit_done(&a, RS_FAIL));
    cr_assert_eq(f.c.calls, 2);
    cr_assert_eq(f.c.last_ctx, &ctx_a);
    cr_assert_eq(f.c.last_result, RS_FAIL);
    circuit_ticket r;
    cr_assert(circuit_allow(f.b, NULL, &r, NULL));
    circuit_release(&r);
    cr_assert_eq(f.c.calls, 2, "classify called by release");
    fx_free(&f);
}

/* classify calls the breaker: possible only if it runs outside every
 * internal critical region */
static void t2_reenter(fx *f, void *call_ctx, int result)
{
    (void)result;
    if (call_ctx != NULL)
        return; /* the nested call itself */
    int64_t *nested = (int64_t *)f->user;
    circuit_state s = circuit_get_state(f->b);
    (void)s;
    circuit_ticket t;
    circuit_rejection rej;
    if (circuit_allow(f->b, nested, &t, &rej)) {
        circuit_done(&t, RS_OK);
        A_ADD(nested, 1);
    }
}

Test(tickets, T2_classify_runs_outside_every_critical_region)
{
    fx f;
    int64_t nested = 0;
    fx_init(&f, 8, 2, OPEN_FOR, PROBE_TO);
    f.user = &nested;
    f.c.extra = t2_reenter;
    f.p.trip_run = 0;
    f.p.close_run = 0;
    f.p.reopen_on_failure = false;
    fx_build(&f);
    for (int i = 0; i < 5; i++)
        fx_call(&f, RS_FAIL);
    cr_assert_eq(nested, 5);
    /* the nested success runs inside classify, before its outer failure is
     * counted: trip is asked after each outer failure only (S2, 0.3) */
    cr_assert_eq(f.p.trip_calls, 5);
    assert_counts_stats(&f, 5, 5);
    fx_half_open_due(&f);
    circuit_ticket t;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    cr_assert(circuit_done(&t, RS_OK));
    cr_assert_eq(nested, 6 + 1, "nested probe not admitted");
    cr_assert_eq(f.p.probe_calls, 2);
    fx_free(&f);
}

Test(tickets, T2_late_closed_result_is_discarded)
{
    fx f;
    fx_new(&f, 8, 1, OPEN_FOR, PROBE_TO);
    circuit_test_clock_set(T0);
    circuit_ticket late1, late2, late3;
    cr_assert(circuit_allow(f.b, NULL, &late1, NULL));
    cr_assert(circuit_allow(f.b, NULL, &late2, NULL));
    cr_assert(circuit_allow(f.b, NULL, &late3, NULL));
    fx_call(&f, RS_FAIL);
    fx_call(&f, RS_FAIL); /* opens */
    int64_t trips = f.p.trip_calls;
    cr_assert_not(circuit_done(&late1, RS_FAIL), "late result reported as counted");
    cr_assert_not(circuit_done(&late2, RS_IGN), "late ignored result reported as reached");
    cr_assert_eq(f.p.trip_calls, trips);
    cr_assert_eq(f.p.probe_calls, 0);
    cr_assert_eq(f.c.calls, 4, "classify is still called for a late result");
    cr_assert_eq(f.log.n, 1);
    /* late into half-open: counts nothing there either */
    circuit_test_clock_set(T0 + OPEN_FOR);
    circuit_ticket p;
    cr_assert(circuit_allow(f.b, NULL, &p, NULL));
    cr_assert_not(circuit_done(&late3, RS_OK));
    cr_assert_eq(f.p.probe_calls, 0);
    cr_assert(circuit_done(&p, RS_OK));
    assert_counts(&f.p.probe_seen[0], 1, 0, 1, 0, 0);
    fx_free(&f);
}

Test(tickets, T2_late_result_never_closes_or_reopens_a_later_state)
{
    fx f;
    fx_init(&f, 8, 3, OPEN_FOR, PROBE_TO);
    f.p.close_run = 1;
    fx_build(&f);
    fx_half_open_due(&f);
    circuit_ticket a, b, c;
    cr_assert(circuit_allow(f.b, NULL, &a, NULL));
    cr_assert(circuit_allow(f.b, NULL, &b, NULL));
    cr_assert(circuit_allow(f.b, NULL, &c, NULL));
    cr_assert(circuit_done(&a, RS_FAIL)); /* reopens: generation 3 */
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    cr_assert_not(circuit_done(&b, RS_OK), "a late success must not close");
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    circuit_test_clock_advance(OPEN_FOR);
    circuit_ticket d;
    cr_assert(circuit_allow(f.b, NULL, &d, NULL)); /* half-open again: generation 4 */
    cr_assert_eq(f.log.n, 4);
    int64_t asked = f.p.probe_calls;
    cr_assert_not(circuit_done(&c, RS_OK), "a late success closed a later half-open state");
    cr_assert_eq(f.p.probe_calls, asked);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_HALF_OPEN);
    cr_assert_eq(f.log.n, 4);
    circuit_release(&d);
    /* and a late failure never reopens a closed state */
    circuit_ticket e;
    cr_assert(circuit_allow(f.b, NULL, &e, NULL));
    circuit_ticket g;
    cr_assert(circuit_allow(f.b, NULL, &g, NULL));
    cr_assert(circuit_done(&g, RS_OK)); /* closes */
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    int64_t trips = f.p.trip_calls;
    cr_assert_not(circuit_done(&e, RS_FAIL));
    cr_assert_eq(f.p.trip_calls, trips);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    fx_free(&f);
}

/* ---- T3 ---------------------------------------------------------------------- */

Test(tickets, T3_release_settles_without_a_result)
{
    fx f;
    fx_new(&f, 8, 1, OPEN_FOR, PROBE_TO);
    circuit_test_clock_set(T0);
    fx_call(&f, RS_FAIL);
    circuit_ticket t;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    circuit_release(&t);
    circuit_release(&t); /* settled: nothing */
    cr_assert_eq(f.c.calls, 1);
    cr_assert_eq(f.p.trip_calls, 1);
    fx_call(&f, RS_FAIL); /* the run of failures was not ended by the release */
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    assert_counts(&f.log.tr[0].counts, 0, 2, 0, 2, 0);
    /* after done, release does nothing */
    circuit_test_clock_set(T0 + OPEN_FOR);
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    cr_assert(circuit_done(&t, RS_OK));
    circuit_release(&t);
    cr_assert_eq(f.p.probe_calls, 1);
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    circuit_release(&t);
    cr_assert_eq(f.p.probe_calls, 1, "release asked the probe policy");
    cr_assert_eq(f.c.calls, 3, "release called classify");
    fx_free(&f);
}

/* An observe that makes a nested transition and a live probe, then leaves by
 * pthread_exit: one transition stays pending. */
typedef struct t3_ctx {
    fx f;
    circuit_ticket nested;
    int fired;
} t3_ctx;

static void t3_observe(fx *f, void *call_ctx, const circuit_transition *t)
{
    (void)call_ctx;
    t3_ctx *c = (t3_ctx *)f->user;
    if (t->generation != 1 || c->fired++)
        return;
    circuit_test_clock_set(T0 + OPEN_FOR);
    cr_assert(circuit_allow(f->b, NULL, &c->nested, NULL)); /* open -> half-open, pending */
    pthread_exit(NULL);
}

static void *t3_thread(void *arg)
{
    t3_ctx *c = (t3_ctx *)arg;
    circuit_test_clock_set(T0);
    fx_call(&c->f, RS_FAIL);
    fx_call(&c->f, RS_FAIL);
    return NULL;
}

Test(tickets, T3_release_calls_no_callback_and_delivers_nothing)
{
    static t3_ctx c;
    fx_init(&c.f, 8, 1, OPEN_FOR, PROBE_TO);
    c.f.user = &c;
    c.f.log.extra = t3_observe;
    fx_build(&c.f);
    pthread_t th;
    pthread_create(&th, NULL, t3_thread, &c);
    pthread_join(th, NULL);
    cr_assert_eq(c.f.log.n, 1);
    cr_assert_eq(circuit_test_pending(c.f.b), 1);
    int64_t classified = c.f.c.calls, trips = c.f.p.trip_calls;
    circuit_release(&c.nested);
    cr_assert_eq(c.f.log.n, 1, "release delivered a transition");
    cr_assert_eq(circuit_test_pending(c.f.b), 1);
    cr_assert_eq(c.f.c.calls, classified);
    cr_assert_eq(c.f.p.trip_calls, trips);
    cr_assert_eq(c.f.p.probe_calls, 0);
    /* the slot was freed: the next allow delivers, then admits */
    circuit_ticket t;
    cr_assert(circuit_allow(c.f.b, NULL, &t, NULL));
    cr_assert_eq(c.f.log.n, 2);
    assert_tr(&c.f, 1, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN, 2);
    circuit_release(&t);
    fx_free(&c.f);
}

/* ---- T4 ---------------------------------------------------------------------- */

static fx t4_fx;
static circuit_ticket t4_ticket;

static void t4_done_twice(void *arg)
{
    bool half_open = arg != NULL;
    fx_new(&t4_fx, 8, 1, OPEN_FOR, PROBE_TO);
    if (half_open)
        fx_half_open_due(&t4_fx);
    cr_assert(circuit_allow(t4_fx.b, NULL, &t4_ticket, NULL));
    circuit_done(&t4_ticket, RS_OK);
    circuit_done(&t4_ticket, RS_OK);
}

static void t4_done_after_release(void *arg)
{
    bool half_open = arg != NULL;
    fx_new(&t4_fx, 8, 1, OPEN_FOR, PROBE_TO);
    if (half_open)
        fx_half_open_due(&t4_fx);
    cr_assert(circuit_allow(t4_fx.b, NULL, &t4_ticket, NULL));
    circuit_release(&t4_ticket);
    circuit_done(&t4_ticket, RS_OK);
}

Test(tickets, T4_done_after_done_aborts, .signal = SIGABRT)
{
    expect_abort(t4_done_twice, NULL, "already settled by done");
    expect_abort(t4_done_twice, (void *)1, "already settled by done");
    t4_done_twice(NULL);
}

Test(tickets, T4_done_after_release_aborts, .signal = SIGABRT)
{
    expect_abort(t4_done_after_release, NULL, "already settled by release");
    expect_abort(t4_done_after_release, (void *)1, "already settled by release");
    t4_done_after_release((void *)1);
}

static void t4_guard_then_done(void *arg)
{
    (void)arg;
    fx_new(&t4_fx, 8, 1, OPEN_FOR, PROBE_TO);
    cr_assert(circuit_allow(t4_fx.b, NULL, &t4_ticket, NULL));
    circuit_ticket_guard_release(&t4_ticket); /* what CIRCUIT_TICKET_GUARD runs */
    circuit_done(&t4_ticket, RS_OK);
}

Test(tickets, T4_done_after_the_guard_fired_aborts, .signal = SIGABRT)
{
    expect_abort(t4_guard_then_done, NULL, "already settled by release");
    t4_guard_then_done(NULL);
}

/* ---- T5 ---------------------------------------------------------------------- */

typedef struct race {
    fx f;
    circuit_ticket t;
    int ready; /* racers at the start line */
    int done_ret; /* -1: done has not returned */
} race;

static sigjmp_buf race_jmp;
static volatile sig_atomic_t race_done_aborted;

static void race_on_abort(int sig)
{
    (void)sig;
    siglongjmp(race_jmp, 1); /* back into the done thread */
}

static void *race_done(void *arg)
{
    race *r = (race *)arg;
    if (sigsetjmp(race_jmp, 1) == 0) {
        A_ADD(&r->ready, 1);
        while (A_LOAD(&r->ready) < 2) /* two-party spin barrier */
            ;
        bool ok = circuit_done(&r->t, RS_OK);
        A_STORE(&r->done_ret, ok ? 1 : 0);
    } else {
        race_done_aborted = 1;
    }
    return NULL;
}

static void *race_release(void *arg)
{
    race *r = (race *)arg;
    A_ADD(&r->ready, 1);
    while (A_LOAD(&r->ready) < 2)
        ;
    circuit_release(&r->t);
    return NULL;
}

#define T5_CHILDREN 4
#define T5_PER_CHILD 50

/* One trial. Returns 0 when done won, 1 when release won; exits the
 * (forked) process with 3..7 when a rule is broken (the reason on stderr). */
static int race_trial(int trial)
{
    static race r;
    fx_init(&r.f, 8, 1, OPEN_FOR, PROBE_TO);
    r.f.p.probe_forced = CIRCUIT_HALF_OPEN; /* keep probing */
    fx_build(&r.f);
    fx_half_open_due(&r.f);
    if (!circuit_allow(r.f.b, NULL, &r.t, NULL))
        _exit(2);
    r.f.c.calls = 0; /* count only the race's classify calls */
    r.ready = 0;
    r.done_ret = -1;
    race_done_aborted = 0;
    pthread_t a, b;
    if (trial % 2) {
        pthread_create(&a, NULL, race_done, &r);
        pthread_create(&b, NULL, race_release, &r);
    } else {
        pthread_create(&b, NULL, race_release, &r);
        pthread_create(&a, NULL, race_done, &r);
    }
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    bool done_won = A_LOAD(&r.done_ret) != -1;
    if (done_won == (race_done_aborted != 0)) {
        fprintf(stderr, "done returned %d and aborted %d\n", r.done_ret, (int)race_done_aborted);
        _exit(3);
    }
    if (done_won) {
        if (r.done_ret != 1 || r.f.p.probe_calls != 1 || r.f.c.calls != 1 ||
            r.f.p.probe_seen[0].consecutive_successes != 1) {
            fprintf(stderr, "done won: returned %d, probe asked %lld times, classify %lld\n",
                    r.done_ret, (long long)r.f.p.probe_calls, (long long)r.f.c.calls);
            _exit(4);
        }
    } else if (r.f.p.probe_calls != 0) {
        /* classify may have run (it runs while the ticket is still live, so
         * that a classify that unwinds leaves the ticket to the guard), but
         * nothing was counted */
        fprintf(stderr, "release won but the result was counted\n");
        _exit(5);
    }
    /* the slot was freed exactly once: one new probe, not two */
    circuit_ticket u, v;
    circuit_rejection rej;
    if (!circuit_allow(r.f.b, NULL, &u, &rej)) {
        fprintf(stderr, "the slot was not freed\n");
        _exit(6);
    }
    if (circuit_allow(r.f.b, NULL, &v, &rej)) {
        fprintf(stderr, "a second probe was admitted with probes = 1\n");
        _exit(7);
    }
    circuit_release(&u);
    circuit_free(r.f.b);
    return done_won ? 0 : 1;
}

/* A forked child runs T5_PER_CHILD trials: the losing done's abort is caught
 * (SIGABRT handler, siglongjmp back into its thread) so that the child can
 * check the breaker afterwards and go on. It prints how often release won. */
static void race_child(int child)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = race_on_abort;
    sigaction(SIGABRT, &sa, NULL);
    int release_won = 0;
    for (int i = 0; i < T5_PER_CHILD; i++)
        release_won += race_trial(child * T5_PER_CHILD + i);
    fprintf(stderr, "\nrelease won %d\n", release_won);
    fflush(stderr);
    _exit(0);
}

static int count_of(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what))
        n++;
    return n;
}

Test(tickets, T5_done_racing_release_settles_once_and_frees_the_slot_once)
{
    for (int child = 0; child < T5_CHILDREN; child++) {
        int fds[2];
        cr_assert_eq(pipe(fds), 0);
        fflush(NULL);
        pid_t pid = fork();
        cr_assert_neq(pid, -1);
        if (pid == 0) {
            close(fds[0]);
            dup2(fds[1], STDERR_FILENO);
            close(fds[1]);
            race_child(child);
        }
        close(fds[1]);
        static char text[32768];
        size_t used = 0;
        ssize_t k;
        while (used < sizeof text - 1 &&
               (k = read(fds[0], text + used, sizeof text - 1 - used)) > 0)
            used += (size_t)k;
        text[used] = '\0';
        close(fds[0]);
        int status;
        waitpid(pid, &status, 0);
        cr_assert(WIFEXITED(status), "child %d died of signal %d: %s", child,
                  WIFSIGNALED(status) ? WTERMSIG(status) : 0, text);
        cr_assert_eq(WEXITSTATUS(status), 0, "child %d: %s", child, text);
        const char *summary = strstr(text, "\nrelease won ");
        cr_assert_not_null(summary, "child %d: %s", child, text);
        int release_won = atoi(summary + strlen("\nrelease won "));
        /* each losing done said why, and only those */
        cr_assert_eq(count_of(text, "libcircuit: "), release_won, "child %d: %s", child, text);
        cr_assert_eq(count_of(text, "already settled by release"), release_won, "child %d: %s",
                     child, text);
    }
}

/* Deterministic interleavings of the same race, with the park points. */
static void t5_done_again(void *arg)
{
    circuit_done((circuit_ticket *)arg, RS_OK);
}

static void *release_parked(void *arg)
{
    park_me_at(CIRCUIT_TP_RELEASE_BEFORE_CAS);
    circuit_release((circuit_ticket *)arg);
    return NULL;
}

Test(tickets, T5_release_that_loses_to_done_frees_nothing)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.probe_forced = CIRCUIT_HALF_OPEN;
    fx_build(&f);
    park_setup();
    fx_half_open_due(&f);
    circuit_ticket t, u, v;
    circuit_rejection rej;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    pthread_t th;
    pthread_create(&th, NULL, release_parked, &t);
    park_wait(); /* release has read the ticket as live */
    cr_assert(circuit_done(&t, RS_OK));
    cr_assert_eq(f.p.probe_calls, 1);
    cr_assert(circuit_allow(f.b, NULL, &u, NULL), "done did not free the slot");
    park_release(); /* release resumes: it must lose and free nothing */
    pthread_join(th, NULL);
    cr_assert_not(circuit_allow(f.b, NULL, &v, &rej), "the slot was freed twice");
    assert_rejected(rej, CIRCUIT_HALF_OPEN, 0);
    /* the ticket stays settled by done: release did not settle it again */
    expect_abort(t5_done_again, &t, "already settled by done");
    cr_assert(circuit_done(&u, RS_OK));
    cr_assert(circuit_allow(f.b, NULL, &v, NULL));
    circuit_release(&v);
    fx_free(&f);
}

static void *done_parked(void *arg)
{
    park_me_at(CIRCUIT_TP_DONE_BEFORE_CAS);
    bool *ok = (bool *)((void **)arg)[1];
    *ok = circuit_done((circuit_ticket *)((void **)arg)[0], RS_OK);
    return NULL;
}

Test(tickets, T5_release_during_done_does_nothing)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.probe_forced = CIRCUIT_HALF_OPEN;
    fx_build(&f);
    park_setup();
    fx_half_open_due(&f);
    circuit_ticket t, u;
    circuit_rejection rej;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    bool ok = false;
    void *args[2] = {&t, &ok};
    pthread_t th;
    pthread_create(&th, NULL, done_parked, args);
    park_wait(); /* done owns the ticket and is about to count */
    circuit_release(&t);
    cr_assert_not(circuit_allow(f.b, NULL, &u, &rej), "release freed a slot done still holds");
    park_release();
    pthread_join(th, NULL);
    cr_assert(ok);
    cr_assert_eq(f.p.probe_calls, 1);
    cr_assert(circuit_allow(f.b, NULL, &u, NULL));
    cr_assert_not(circuit_allow(f.b, NULL, &t, &rej));
    circuit_release(&u);
    fx_free(&f);
}

/* ---- T6 ---------------------------------------------------------------------- */

Test(tickets, T6_stale_ticket_does_not_free_a_reused_slot_in_the_same_generation)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.probe_forced = CIRCUIT_HALF_OPEN;
    fx_build(&f);
    fx_half_open_due(&f);
    circuit_ticket t, u, w, x;
    circuit_rejection rej;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    circuit_test_clock_advance(PROBE_TO);
    cr_assert(circuit_allow(f.b, NULL, &u, NULL)); /* t timed out; u takes slot 0 */
    cr_assert_eq(f.p.probe_calls, 1);
    cr_assert_eq(f.log.n, 2, "still the same half-open state");
    circuit_release(&t); /* stale: must leave u's slot alone */
    cr_assert_not(circuit_allow(f.b, NULL, &x, &rej), "a stale release freed another probe's slot");
    assert_rejected(rej, CIRCUIT_HALF_OPEN, 0);
    circuit_test_clock_advance(PROBE_TO);
    cr_assert(circuit_allow(f.b, NULL, &w, NULL)); /* u timed out; w takes slot 0 */
    cr_assert(circuit_done(&u, RS_OK), "P2: state unchanged, the result counts");
    cr_assert_not(circuit_allow(f.b, NULL, &x, &rej), "a stale done freed another probe's slot");
    assert_rejected(rej, CIRCUIT_HALF_OPEN, 0);
    cr_assert(circuit_done(&w, RS_OK));
    cr_assert(circuit_allow(f.b, NULL, &x, NULL));
    circuit_release(&x);
    fx_free(&f);
}

Test(tickets, T6_ticket_of_an_older_generation_never_touches_a_later_one)
{
    fx f;
    fx_init(&f, 8, 3, OPEN_FOR, PROBE_TO);
    f.p.close_run = 0;
    fx_build(&f);
    fx_half_open_due(&f);
    circuit_ticket t, s, p, q[3], x;
    circuit_rejection rej;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL)); /* slot 0 */
    cr_assert(circuit_allow(f.b, NULL, &s, NULL)); /* slot 1 */
    cr_assert(circuit_allow(f.b, NULL, &p, NULL)); /* slot 2 */
    cr_assert(circuit_done(&p, RS_FAIL));          /* reopens */
    circuit_test_clock_advance(OPEN_FOR);
    for (int i = 0; i < 3; i++)
        cr_assert(circuit_allow(f.b, NULL, &q[i], NULL), "probe %d of the new state", i);
    cr_assert_eq(f.log.n, 4);
    int64_t asked = f.p.probe_calls;
    cr_assert_not(circuit_done(&t, RS_FAIL), "late result counted");
    circuit_release(&s);
    cr_assert_eq(f.p.probe_calls, asked);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_HALF_OPEN, "a late failure reopened");
    cr_assert_not(circuit_allow(f.b, NULL, &x, &rej), "a stale ticket freed a new probe's slot");
    assert_rejected(rej, CIRCUIT_HALF_OPEN, 0);
    for (int i = 0; i < 3; i++) {
        cr_assert(circuit_done(&q[i], RS_IGN));
        cr_assert(circuit_allow(f.b, NULL, &q[i], NULL));
        cr_assert_not(circuit_allow(f.b, NULL, &x, &rej));
    }
    for (int i = 0; i < 3; i++)
        circuit_release(&q[i]);
    fx_free(&f);
}

/* ---- T7 ---------------------------------------------------------------------- */

Test(tickets, T7_allow_done_release_make_no_heap_allocation)
{
    fx f;
    fx_init(&f, 16, 4, OPEN_FOR, PROBE_TO);
    f.p.reopen_timeouts = 3;
    fx_build(&f);
    int64_t before = A_LOAD(&alloc_calls);
    circuit_test_clock_set(T0);
    for (int cycle = 0; cycle < 300; cycle++) {
        circuit_ticket t[5];
        circuit_rejection rej;
        for (int i = 0; i < 5; i++)
            fx_call(&f, RS_OK);
        fx_call(&f, RS_IGN);
        fx_call(&f, RS_FAIL);
        cr_assert(circuit_allow(f.b, NULL, &t[0], NULL));
        circuit_release(&t[0]);
        fx_call(&f, RS_FAIL); /* opens */
        cr_assert_not(circuit_allow(f.b, NULL, &t[0], &rej));
        (void)circuit_get_state(f.b);
        circuit_test_clock_advance(OPEN_FOR);
        for (int i = 0; i < 4; i++)
            cr_assert(circuit_allow(f.b, NULL, &t[i], NULL));
        cr_assert_not(circuit_allow(f.b, NULL, &t[4], &rej));
        circuit_release(&t[3]);
        cr_assert(circuit_done(&t[2], RS_IGN));
        if (cycle % 2) {
            cr_assert(circuit_done(&t[0], RS_OK));
            cr_assert(circuit_done(&t[1], RS_OK)); /* closes */
        } else {
            circuit_test_clock_advance(PROBE_TO);
            cr_assert(circuit_allow(f.b, NULL, &t[2], NULL)); /* 2 timeouts */
            circuit_test_clock_advance(PROBE_TO);
            cr_assert_not(circuit_allow(f.b, NULL, &t[3], &rej)); /* the 3rd reopens */
            cr_assert_not(circuit_done(&t[0], RS_OK));
            circuit_release(&t[1]);
            circuit_release(&t[2]);
            circuit_test_clock_advance(OPEN_FOR);
            fx_call(&f, RS_OK);
            fx_call(&f, RS_OK); /* closes */
        }
        cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    }
    cr_assert_eq(f.log.order_errors, 0);
    cr_assert_gt(f.log.n, 900);
    cr_assert_eq(A_LOAD(&alloc_calls) - before, 0, "%lld heap allocations on the call paths",
                 (long long)(A_LOAD(&alloc_calls) - before));
    fx_free(&f);
}

/* An observe that, on generation 1 only, makes 3 * T7_CYCLES transitions by
 * nested calls: they are all pending until it returns. */
#define T7_CYCLES 30

typedef struct t7_state {
    int fired;
    int64_t peak_pending;
} t7_state;

static void t7_observe(fx *f, void *call_ctx, const circuit_transition *t)
{
    (void)call_ctx;
    t7_state *st = (t7_state *)f->user;
    if (t->generation != 1 || st->fired++)
        return;
    for (int i = 0; i < T7_CYCLES; i++) { /* starts and ends open */
        circuit_test_clock_advance(OPEN_FOR);
        fx_call(f, RS_OK); /* open -> half-open, then one success */
        fx_call(f, RS_OK); /* half-open -> closed */
        fx_call(f, RS_FAIL);
        fx_call(f, RS_FAIL); /* closed -> open */
    }
    st->peak_pending = circuit_test_pending(f->b);
}

Test(tickets, T7_transitions_beyond_the_pool_allocate_and_are_recycled)
{
    fx f;
    t7_state st = {0, 0};
    int64_t live0 = A_LOAD(&alloc_live);
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.user = &st;
    f.log.extra = t7_observe;
    fx_build(&f);
    int64_t live1 = A_LOAD(&alloc_live);
    int64_t calls0 = A_LOAD(&alloc_calls);
    fx_call(&f, RS_FAIL);
    fx_call(&f, RS_FAIL); /* trips; observe makes 90 more while this one is delivered */
    cr_assert_eq(st.peak_pending, 3 * T7_CYCLES, "pending while observe ran: %lld",
                 (long long)st.peak_pending);
    cr_assert_eq(circuit_test_pending(f.b), 0);
    cr_assert_eq(f.log.n, 1 + 3 * T7_CYCLES);
    cr_assert_eq(f.log.order_errors, 0);
    int64_t allocs = A_LOAD(&alloc_calls) - calls0;
    /* records in use at the peak: the one being delivered + 90 pending */
    cr_assert_gt(allocs, 0, "more than the pool pending, yet nothing allocated");
    cr_assert_leq(allocs, 1 + 3 * T7_CYCLES - CIRCUIT_TRANSITION_POOL,
                  "%lld allocations: the pool was not used first", (long long)allocs);
    cr_assert_eq(A_LOAD(&alloc_live), live1, "overflow records not freed after delivery");
    /* back under the pool: the pool was recycled, no allocation at all */
    calls0 = A_LOAD(&alloc_calls);
    for (int i = 0; i < 200; i++) {
        circuit_test_clock_advance(OPEN_FOR);
        fx_call(&f, RS_OK);
        fx_call(&f, RS_OK);
        fx_call(&f, RS_FAIL);
        fx_call(&f, RS_FAIL);
    }
    cr_assert_eq(f.log.n, 1 + 3 * T7_CYCLES + 600);
    cr_assert_eq(A_LOAD(&alloc_calls), calls0);
    fx_free(&f);
    cr_assert_eq(A_LOAD(&alloc_live), live0, "circuit_free left %lld blocks",
                 (long long)(A_LOAD(&alloc_live) - live0));
}

/* Every bit of the generation tag goes into a ticket: with the tag past
 * 2^27 (the epoch's width, which a ticket once cut the tag to), a closed
 * failure still counts and trips, and a probe's result still counts and
 * frees its slot (T6's 30-bit tags; S2, P3). */
Test(tickets, T6_S2_P3_tickets_keep_every_bit_of_the_generation_tag)
{
    fx f;
    fx_new(&f, 4, 1, OPEN_FOR, PROBE_TO);
    cr_assert_eq(circuit_isolate(f.b, NULL), 0);
    cr_assert_eq(circuit_test_skip_generations(f.b, (UINT64_C(1) << 27) + 5), 0);
    cr_assert_eq(circuit_reset(f.b, NULL), 0);
    circuit_stats st;
    circuit_get_stats(f.b, &st);
    cr_assert_gt(st.generation, UINT64_C(1) << 27);
    cr_assert(fx_call(&f, RS_OK), "a closed success counts");
    cr_assert(fx_call(&f, RS_FAIL), "a closed failure past tag 2^27 counts");
    cr_assert(fx_call(&f, RS_FAIL), "and the second one trips");
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    circuit_test_clock_advance(OPEN_FOR);
    circuit_ticket t;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL), "the first probe");
    circuit_get_stats(f.b, &st);
    cr_assert_eq(st.probes_in_flight, 1);
    cr_assert(circuit_done(&t, RS_OK), "a probe's result past tag 2^27 counts");
    circuit_get_stats(f.b, &st);
    cr_assert_eq(st.probes_in_flight, 0, "and frees its slot");
    cr_assert_eq(st.late, 0);
    fx_free(&f);
}
