/*
 * P1-P3: probes and their timeouts, a scanner stopped in a timeout's claim,
 * only circuit_allow admits a probe, probes across generations. (Time,
 * TM1-TM3, is test_time.c.)
 */
#include <pthread.h>
#include <time.h>

#include "helpers.h"

/* A breaker half-open at T0 + OPEN_FOR whose probe policy keeps probing
 * unless told otherwise. */
static void probing(fx *f, int probes)
{
    fx_init(f, 8, probes, OPEN_FOR, PROBE_TO);
    f->p.close_run = 0;
    f->p.reopen_on_failure = false;
    fx_build(f);
    fx_half_open_due(f);
}

/* ---- P1 ---------------------------------------------------------------------- */

Test(probes, P1_probe_holds_its_slot_at_most_probe_timeout)
{
    fx f;
    probing(&f, 1);
    int64_t admitted = T0 + OPEN_FOR + 7;
    circuit_test_clock_set(admitted);
    circuit_ticket t, u;
    circuit_rejection rej;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    circuit_test_clock_set(admitted + PROBE_TO - 1);
    cr_assert_not(circuit_allow(f.b, NULL, &u, &rej), "slot freed before probe_timeout");
    assert_rejected(rej, CIRCUIT_HALF_OPEN, 0);
    cr_assert_eq(f.p.probe_calls, 0);
    circuit_test_clock_set(admitted + PROBE_TO);
    cr_assert(circuit_allow(f.b, NULL, &u, &rej), "slot still held at probe_timeout");
    cr_assert_eq(f.p.probe_calls, 1, "the probe policy was not asked about the timeout");
    assert_counts(&f.p.probe_seen[0], 0, 0, 0, 0, 1);
    cr_assert_eq(f.log.n, 2);
    circuit_release(&u);
    circuit_release(&t);
    fx_free(&f);
}

Test(probes, P1_timeouts_are_processed_in_due_order)
{
    /* b (slot 1, due first) and c (slot 0, due later) are found timed out by
     * one call. The first timeout processed reopens: the open period starts
     * at b's due time only if b was processed first. */
    fx f;
    probing(&f, 2);
    f.p.reopen_timeouts = 1;
    int64_t s = T0 + OPEN_FOR;
    circuit_ticket a, b, c, x;
    circuit_rejection rej;
    cr_assert(circuit_allow(f.b, NULL, &a, NULL)); /* slot 0 */
    circuit_test_clock_set(s + 10);
    cr_assert(circuit_allow(f.b, NULL, &b, NULL)); /* slot 1, due s + 10 + PROBE_TO */
    circuit_test_clock_set(s + 20);
    circuit_release(&a);
    circuit_test_clock_set(s + 30);
    cr_assert(circuit_allow(f.b, NULL, &c, NULL)); /* slot 0, due s + 30 + PROBE_TO */
    circuit_test_clock_set(s + 1000);
    cr_assert_not(circuit_allow(f.b, NULL, &x, &rej));
    cr_assert_eq(f.p.probe_calls, 1);
    assert_rejected(rej, CIRCUIT_OPEN, OPEN_FOR - (1000 - 10 - PROBE_TO));
    assert_tr(&f, 2, CIRCUIT_HALF_OPEN, CIRCUIT_OPEN, 3);
    assert_counts(&f.log.tr[2].counts, 0, 0, 0, 0, 1);
    circuit_release(&b);
    circuit_release(&c);
    fx_free(&f);
}

Test(probes, P1_timeouts_in_due_order_second_decides)
{
    /* Same, but the first timeout keeps probing and the second reopens: the
     * open period starts at the LATER due time (c's). */
    fx f;
    probing(&f, 2);
    f.p.reopen_timeouts = 2;
    int64_t s = T0 + OPEN_FOR;
    circuit_ticket a, b, c, x;
    circuit_rejection rej;
    cr_assert(circuit_allow(f.b, NULL, &a, NULL));
    circuit_test_clock_set(s + 10);
    cr_assert(circuit_allow(f.b, NULL, &b, NULL));
    circuit_test_clock_set(s + 20);
    circuit_release(&a);
    circuit_test_clock_set(s + 30);
    cr_assert(circuit_allow(f.b, NULL, &c, NULL));
    circuit_test_clock_set(s + 1000);
    cr_assert_not(circuit_allow(f.b, NULL, &x, &rej));
    cr_assert_eq(f.p.probe_calls, 2);
    assert_counts(&f.p.probe_seen[0], 0, 0, 0, 0, 1);
    assert_counts(&f.p.probe_seen[1], 0, 0, 0, 0, 2);
    assert_rejected(rej, CIRCUIT_OPEN, OPEN_FOR - (1000 - 30 - PROBE_TO));
    circuit_release(&b);
    circuit_release(&c);
    fx_free(&f);
}

Test(probes, P1_many_timeouts_found_at_once_are_processed_in_due_order)
{
    /* 200 probes (more than one scan batch): slots 0..199 admitted at
     * s + i; the even slots are then released and taken again later, so
     * the due order is the odd slots, then the even ones. */
    enum { N = 200 };
    fx f;
    probing(&f, N);
    f.p.reopen_timeouts = 150;
    int64_t s = T0 + OPEN_FOR;
    static circuit_ticket t[N];
    for (int i = 0; i < N; i++) {
        circuit_test_clock_set(s + i);
        cr_assert(circuit_allow(f.b, NULL, &t[i], NULL));
    }
    for (int i = 0; i < N; i += 2)
        circuit_release(&t[i]);
    for (int i = 0; i < N; i += 2) {
        circuit_test_clock_set(s + 300 + i / 2);
        cr_assert(circuit_allow(f.b, NULL, &t[i], NULL));
    }
    circuit_test_clock_set(s + 1400); /* all due (the last at s + 899 + PROBE_TO) */
    circuit_ticket x;
    circuit_rejection rej;
    cr_assert_not(circuit_allow(f.b, NULL, &x, &rej));
    cr_assert_eq(f.p.probe_calls, 150);
    for (int k = 0; k < 150; k++)
        cr_assert_eq(f.p.probe_seen[k].timed_out, k + 1);
    /* the 150th due: the 50th re-admitted probe, due at s + 300 + 49 + PROBE_TO */
    assert_rejected(rej, CIRCUIT_OPEN, OPEN_FOR - (1400 - 300 - 49 - PROBE_TO));
    for (int i = 0; i < N; i++)
        circuit_release(&t[i]);
    fx_free(&f);
}

Test(probes, P1_reopen_by_timeout_starts_at_the_due_time_whoever_notices)
{
    for (int who = 0; who < 2; who++) {
        fx f;
        probing(&f, 2);
        f.p.reopen_timeouts = 1;
        int64_t s = T0 + OPEN_FOR;
        circuit_ticket p1, p2, x;
        circuit_rejection rej;
        cr_assert(circuit_allow(f.b, NULL, &p1, NULL)); /* due s + PROBE_TO */
        circuit_test_clock_set(s + 400);
        cr_assert(circuit_allow(f.b, NULL, &p2, NULL)); /* due s + 400 + PROBE_TO */
        circuit_test_clock_set(s + PROBE_TO + 200);
        if (who == 0) {
            cr_assert_not(circuit_allow(f.b, NULL, &x, &rej)); /* allow notices */
            assert_rejected(rej, CIRCUIT_OPEN, OPEN_FOR - 200);
            cr_assert_not(circuit_done(&p2, RS_OK));
        } else {
            /* done of another probe notices: its own result is then late */
            cr_assert_not(circuit_done(&p2, RS_OK));
            cr_assert_not(circuit_allow(f.b, NULL, &x, &rej));
            assert_rejected(rej, CIRCUIT_OPEN, OPEN_FOR - 200);
        }
        cr_assert_eq(f.p.probe_calls, 1, "who %d", who);
        cr_assert_eq(f.log.n, 3);
        assert_counts(&f.log.tr[2].counts, 0, 0, 0, 0, 1);
        circuit_test_clock_set(s + PROBE_TO + OPEN_FOR - 1);
        cr_assert_not(circuit_allow(f.b, NULL, &x, &rej));
        assert_rejected(rej, CIRCUIT_OPEN, 1);
        circuit_test_clock_set(s + PROBE_TO + OPEN_FOR);
        cr_assert(circuit_allow(f.b, NULL, &x, &rej));
        circuit_release(&x);
        circuit_release(&p1);
        fx_free(&f);
    }
}

Test(probes, P1_release_after_the_due_time_leaves_the_timeout_to_be_counted)
{
    fx f;
    probing(&f, 1);
    int64_t s = T0 + OPEN_FOR;
    circuit_ticket t, u;
    circuit_rejection rej;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    circuit_test_clock_set(s + PROBE_TO + 3);
    circuit_release(&t); /* too late: the timeout already fell due */
    cr_assert_eq(f.p.probe_calls, 0, "release asked the policy");
    cr_assert(circuit_allow(f.b, NULL, &u, &rej));
    cr_assert_eq(f.p.probe_calls, 1, "the timeout that fell due before the release was lost");
    assert_counts(&f.p.probe_seen[0], 0, 0, 0, 0, 1);
    circuit_release(&u);
    fx_free(&f);
}

Test(probes, P1_release_after_the_due_time_then_done_counts_the_timeout)
{
    fx f;
    probing(&f, 2);
    f.p.reopen_timeouts = 1;
    int64_t s = T0 + OPEN_FOR;
    circuit_ticket t, u, x;
    circuit_rejection rej;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    circuit_test_clock_set(s + 100);
    cr_assert(circuit_allow(f.b, NULL, &u, NULL));
    circuit_test_clock_set(s + PROBE_TO + 50); /* t due at s + PROBE_TO, u not yet */
    circuit_release(&t);
    cr_assert_not(circuit_done(&u, RS_OK), "u counted although t's timeout reopened first");
    cr_assert_eq(f.p.probe_calls, 1);
    cr_assert_not(circuit_allow(f.b, NULL, &x, &rej));
    assert_rejected(rej, CIRCUIT_OPEN, OPEN_FOR - 50);
    fx_free(&f);
}

Test(probes, P1_release_before_the_due_time_frees_at_once_and_counts_no_timeout)
{
    fx f;
    probing(&f, 1);
    int64_t s = T0 + OPEN_FOR;
    circuit_ticket t, u;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    circuit_test_clock_set(s + PROBE_TO - 1);
    circuit_release(&t);
    cr_assert(circuit_allow(f.b, NULL, &u, NULL));
    circuit_test_clock_set(s + 2 * PROBE_TO - 2);
    circuit_release(&u); /* 1 ns before its due time */
    circuit_test_clock_set(s + 10 * PROBE_TO);
    circuit_ticket v;
    cr_assert(circuit_allow(f.b, NULL, &v, NULL));
    cr_assert_eq(f.p.probe_calls, 0, "a released probe was timed out later");
    circuit_release(&v);
    fx_free(&f);
}

Test(probes, P1_done_times_out_its_own_probe_first)
{
    fx f;
    probing(&f, 1);
    int64_t s = T0 + OPEN_FOR;
    circuit_ticket t;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    circuit_test_clock_set(s + PROBE_TO);
    cr_assert(circuit_done(&t, RS_OK));
    cr_assert_eq(f.p.probe_calls, 2);
    assert_counts(&f.p.probe_seen[0], 0, 0, 0, 0, 1); /* the timeout, then */
    assert_counts(&f.p.probe_seen[1], 1, 0, 1, 0, 1); /* the result (P2) */
    fx_free(&f);
}

Test(probes, P1_no_timeout_is_counted_once_the_state_has_changed)
{
    fx f;
    probing(&f, 2);
    f.p.close_run = 1;
    circuit_ticket a, b, x;
    cr_assert(circuit_allow(f.b, NULL, &a, NULL));
    cr_assert(circuit_allow(f.b, NULL, &b, NULL));
    cr_assert(circuit_done(&a, RS_OK)); /* closes */
    circuit_test_clock_advance(10 * PROBE_TO);
    for (int i = 0; i < 3; i++)
        fx_call(&f, RS_OK);
    cr_assert(circuit_allow(f.b, NULL, &x, NULL));
    circuit_release(&x);
    cr_assert_eq(f.p.probe_calls, 1, "b timed out in the closed state");
    cr_assert_not(circuit_done(&b, RS_OK));
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    fx_free(&f);
}

/* P1, S4 (amended in 0.4; finding F3, tests/sched/README.md): an allow
 * that has taken a probe slot is admitted, even when the state moves on
 * before it returns (its result is then late, T2). Before the fix it gave
 * the slot back and answered open, after another allow had been refused
 * {HALF_OPEN} for it: refused for a probe never admitted. Staged with
 * probes = 2: A holds slot 0, X is stopped just after taking slot 1's bit
 * (CIRCUIT_TP_PROBE_TAKEN), R is refused, A's failure reopens, X goes
 * on. The planted twin CIRCUIT_PLANT_PASSING_BIT fails it. */
#define F3_CTX_X ((void *)0x33)

typedef struct f3_allow {
    circuit_breaker *b;
    circuit_ticket t;
    circuit_rejection rej;
    bool admitted;
} f3_allow;

static void *f3_allow_parked(void *arg)
{
    f3_allow *x = arg;
    park_me_at(CIRCUIT_TP_PROBE_TAKEN);
    x->admitted = circuit_allow(x->b, F3_CTX_X, &x->t, &x->rej);
    return NULL;
}

Test(probes, P1_S4_an_allow_that_took_a_slot_is_admitted_when_the_state_moves_on, .timeout = 60)
{
    fx f;
    fx_init(&f, 8, 2, OPEN_FOR, PROBE_TO); /* reopen on a failure, close after 2 */
    fx_build(&f);
    fx_half_open_due(&f);
    circuit_ticket a, r;
    circuit_rejection rej = {0, 0};
    cr_assert(circuit_allow(f.b, NULL, &a, NULL), "A: the first probe (slot 0)");

    park_setup();
    f3_allow x = {f.b, CIRCUIT_TICKET_INIT, {0, 0}, false};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, f3_allow_parked, &x), 0);
    park_wait(); /* X holds slot 1's bit */

    cr_assert_not(circuit_allow(f.b, NULL, &r, &rej), "R: both slots are taken (A and X)");
    assert_rejected(rej, CIRCUIT_HALF_OPEN, 0);
    cr_assert(circuit_done(&a, RS_FAIL), "A's failure counts");
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN, "A's failure reopened");

    park_release();
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_assert(x.admitted, "X took a slot before the reopen, and R was refused for it: X is a "
                          "probe (refused {%s, %lld})",
              circuit_state_name(x.rej.state), (long long)x.rej.retry_after_ns);
    cr_assert_eq(f.log.n, 3, "closed -> open -> half-open -> open, no more");
    assert_tr(&f, 2, CIRCUIT_HALF_OPEN, CIRCUIT_OPEN, 3);

    circuit_stats st;
    circuit_get_stats(f.b, &st);
    cr_assert_eq(st.state, CIRCUIT_OPEN);
    cr_assert_eq(st.probes_in_flight, 0, "probes in flight %lld while open",
                 (long long)st.probes_in_flight);
    cr_assert_not(circuit_done(&x.t, RS_OK), "X's result is late: its state has ended (T2)");
    circuit_get_stats(f.b, &st);
    cr_assert_eq(st.state, CIRCUIT_OPEN, "a late result changes nothing");
    cr_assert_eq(st.timed_out, 0);
    cr_assert_eq(st.late, 1);
    cr_assert_eq(st.admitted, st.successes + st.failures + st.ignored + st.late + st.released,
                 "M1: admitted %llu", (unsigned long long)st.admitted);
    cr_assert_eq(f.log.order_errors, 0);
    fx_free(&f);
}

/* ---- P2 ---------------------------------------------------------------------- */

Test(probes, P2_timed_out_probe_result_counts_while_the_state_is_unchanged)
{
    fx f;
    probing(&f, 1);
    f.p.close_run = 2;
    circuit_ticket t, u;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    circuit_test_clock_advance(PROBE_TO);
    cr_assert(circuit_allow(f.b, NULL, &u, NULL)); /* times t out, keeps probing */
    cr_assert_eq(f.p.probe_calls, 1);
    cr_assert(circuit_done(&t, RS_OK), "a timed-out probe's result was discarded");
    cr_assert_eq(f.p.probe_calls, 2);
    assert_counts(&f.p.probe_seen[1], 1, 0, 1, 0, 1);
    cr_assert(circuit_done(&u, RS_OK)); /* second success: closes */
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    assert_counts(&f.log.tr[2].counts, 2, 0, 2, 0, 1);
    fx_free(&f);
}

Test(probes, P2_timed_out_probe_result_is_late_once_the_timeout_changed_the_state)
{
    fx f;
    probing(&f, 1);
    f.p.reopen_timeouts = 1;
    circuit_ticket t, u;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    circuit_test_clock_advance(PROBE_TO);
    cr_assert_not(circuit_allow(f.b, NULL, &u, NULL)); /* reopened by the timeout */
    cr_assert_not(circuit_done(&t, RS_OK));
    cr_assert_eq(f.p.probe_calls, 1);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    fx_free(&f);
}

/* ---- P3 ---------------------------------------------------------------------- */

typedef struct p3_ctx {
    fx f;
    sem_t admitted;
    sem_t never;
    int kind; /* 0: pthread_exit, 1: cancelled */
} p3_ctx;

static void *p3_thread(void *arg)
{
    p3_ctx *c = (p3_ctx *)arg;
    CIRCUIT_TICKET_GUARD(t);
    if (!circuit_allow(c->f.b, NULL, &t, NULL))
        return (void *)1;
    if (c->kind == 0)
        pthread_exit(NULL); /* unwinds through the guarded scope */
    sem_post(&c->admitted);
    while (sem_wait(&c->never) != 0) /* a cancellation point */
        ;
    circuit_done(&t, RS_FAIL);
    return NULL;
}

static void p3_run(int kind, bool half_open)
{
    static p3_ctx c;
    fx_init(&c.f, 8, 1, OPEN_FOR, PROBE_TO);
    c.f.p.trip_run = 1;
    c.f.p.close_run = 0;
    fx_build(&c.f);
    c.kind = kind;
    sem_init(&c.admitted, 0, 0);
    sem_init(&c.never, 0, 0);
    if (half_open) {
        fx_half_open_due(&c.f);
        circuit_ticket t;
        cr_assert(circuit_allow(c.f.b, NULL, &t, NULL)); /* makes the transition */
        circuit_release(&t);
    }
    int64_t trips = c.f.p.trip_calls, classified = c.f.c.calls, delivered = c.f.log.n;
    pthread_t th;
    pthread_create(&th, NULL, p3_thread, &c);
    if (kind == 1) {
        while (sem_wait(&c.admitted) != 0)
            ;
        pthread_cancel(th);
    }
    void *ret = (void *)2;
    pthread_join(th, &ret);
    cr_assert_eq(ret, kind == 1 ? PTHREAD_CANCELED : NULL);
    /* the slot is free at once (long before probe_timeout) */
    circuit_ticket u, v;
    circuit_rejection rej;
    cr_assert(circuit_allow(c.f.b, NULL, &u, &rej), "the unwound probe kept its slot");
    if (half_open)
        cr_assert_not(circuit_allow(c.f.b, NULL, &v, &rej));
    circuit_release(&u);
    /* nothing was counted */
    cr_assert_eq(c.f.c.calls, classified);
    cr_assert_eq(c.f.p.trip_calls, trips);
    cr_assert_eq(c.f.p.probe_calls, 0);
    cr_assert_eq(c.f.log.n, delivered);
    /* not even a timeout, later */
    circuit_test_clock_advance(10 * PROBE_TO);
    cr_assert(circuit_allow(c.f.b, NULL, &u, &rej));
    circuit_release(&u);
    cr_assert_eq(c.f.p.probe_calls, 0);
    fx_free(&c.f);
}

Test(probes, P3_pthread_exit_in_a_guarded_scope_frees_the_slot_and_counts_nothing)
{
    p3_run(0, true);
}

Test(probes, P3_pthread_cancel_in_a_guarded_scope_frees_the_slot_and_counts_nothing,
     .timeout = 20)
{
    p3_run(1, true);
}

Test(probes, P3_unwinding_while_closed_counts_nothing)
{
    p3_run(0, false);
    p3_run(1, false);
}

/* classify leaves by pthread_exit: it runs while the ticket is still live,
 * so the guard releases it and the probe slot is free at once. */
static void p3_classify_exits(fx *f, void *call_ctx, int result)
{
    (void)f;
    (void)call_ctx;
    (void)result;
    pthread_exit(NULL);
}

static void *p3_classify_thread(void *arg)
{
    fx *f = (fx *)arg;
    CIRCUIT_TICKET_GUARD(t);
    if (circuit_allow(f->b, NULL, &t, NULL))
        circuit_done(&t, RS_FAIL);
    return (void *)1;
}

Test(probes, P3_classify_that_exits_the_thread_leaves_the_ticket_to_the_guard)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.close_run = 1;
    fx_build(&f);
    fx_half_open_due(&f);
    circuit_ticket first;
    cr_assert(circuit_allow(f.b, NULL, &first, NULL)); /* makes the transition */
    circuit_release(&first);
    f.c.extra = p3_classify_exits;
    pthread_t th;
    void *ret = (void *)2;
    pthread_create(&th, NULL, p3_classify_thread, &f);
    pthread_join(th, &ret);
    cr_assert_null(ret);
    f.c.extra = NULL;
    cr_assert_eq(f.c.calls, 2);
    cr_assert_eq(f.p.probe_calls, 0, "a result whose classify unwound was counted");
    circuit_ticket u;
    cr_assert(circuit_allow(f.b, NULL, &u, NULL), "the probe slot stayed taken");
    circuit_test_clock_advance(10 * PROBE_TO);
    cr_assert(circuit_done(&u, RS_OK));
    cr_assert_eq(f.p.probe_calls, 2, "the unwound probe also timed out later");
    cr_assert_eq(f.p.probe_seen[0].timed_out, 1); /* u's own timeout */
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    fx_free(&f);
}

static bool p3_early_return(fx *f, int path)
{
    CIRCUIT_TICKET_GUARD(t);
    if (!circuit_allow(f->b, NULL, &t, NULL))
        return false;
    for (int i = 0; i < 3; i++) {
        if (path == 1)
            break; /* leaves the loop, then the function */
        if (path == 2)
            goto out;
        if (path == 0)
            return true;
    }
out:
    return true;
}

Test(probes, P3_guard_releases_on_return_break_and_goto)
{
    fx f;
    probing(&f, 1);
    for (int path = 0; path < 3; path++) {
        cr_assert(p3_early_return(&f, path), "path %d not admitted: slot still held", path);
    }
    cr_assert_eq(f.p.probe_calls, 0);
    /* after done, the guard does nothing */
    {
        CIRCUIT_TICKET_GUARD(t);
        cr_assert(circuit_allow(f.b, NULL, &t, NULL));
        cr_assert(circuit_done(&t, RS_OK));
    }
    cr_assert_eq(f.p.probe_calls, 1);
    fx_free(&f);
}

/* ==== a scanner stopped in a probe timeout's claim (P1) =================== */

/*
 * P1 with a thread stopped in the middle of a probe timeout: the timeout
 * that fell due is counted exactly once, whatever runs while the thread
 * that found it is stopped, and at whichever step it is stopped.
 *
 * A scanner thread calls circuit_allow once probe A's timeout has fallen
 * due; its scan finds the timeout and is stopped at one of the steps of
 * the timeout's claim (src/testing.h, CIRCUIT_TP_TIMEOUT_*: before the
 * claim, claimed, slot taken, counted, slot freed). Meanwhile this thread
 * runs one of: A's own done, another probe admitted to A's slot whose
 * success closes the breaker, an operator isolate, or an allow whose
 * timeout reopens the breaker. The scanner is then let go. Whatever the
 * step and the interference, the account is the sequential one: A timed
 * out once (the timed_out total is 1), the state or the transition that
 * ended it carries timed_out 1, the probe policy was asked for the timeout
 * once, and the transitions are the ones that account implies (their cause
 * and counts).
 *
 * A scan that frees A's slot and only then counts the timeout fails here:
 * stopped in between (the step called "slot taken"), the other probe takes
 * the slot and closes the breaker, and the timeout is dropped (the total
 * stays 0 and the closing transition carries timed_out 0).
 */

static const circuit_test_point steps[] = {
    CIRCUIT_TP_TIMEOUT_BEFORE_CLAIM, CIRCUIT_TP_TIMEOUT_CLAIMED, CIRCUIT_TP_TIMEOUT_TAKEN,
    CIRCUIT_TP_TIMEOUT_COUNTED,      CIRCUIT_TP_TIMEOUT_FREED,
};
static const char *const step_names[] = {"before claim", "claimed", "slot taken", "counted",
                                         "slot freed"};
#define NSTEPS ((int)(sizeof steps / sizeof steps[0]))

typedef struct scanner {
    fx *f;
    circuit_test_point at;
    circuit_ticket t;
    circuit_rejection rej;
    bool admitted;
} scanner;

static void *scanner_thread(void *arg)
{
    scanner *s = arg;
    park_me_at(s->at);
    s->admitted = circuit_allow(s->f->b, NULL, &s->t, &s->rej);
    return NULL;
}

/* Half-open at HALF_AT = T0 + OPEN_FOR with probe A admitted (the first probe,
 * due at HALF_AT + PROBE_TO); the clock is then at A's due time. */
#define HALF_AT (T0 + OPEN_FOR)
static void half_open_with_a(fx *f, int probes, circuit_ticket *a)
{
    fx_init(f, 4, probes, OPEN_FOR, PROBE_TO);
    f->p.close_run = 0;
    f->p.reopen_on_failure = false;
    f->p.reopen_timeouts = 0;
    fx_build(f);
    fx_half_open_due(f);
    cr_assert(circuit_allow(f->b, NULL, a, NULL));
    cr_assert_eq(f->log.n, 2, "closed -> open -> half-open");
    circuit_test_clock_set(HALF_AT + PROBE_TO);
}

/* Starts the scanner and waits until it is stopped at step i. */
static pthread_t stop_scanner(scanner *s, fx *f, int i)
{
    *s = (scanner){f, steps[i], CIRCUIT_TICKET_INIT, {0, 0}, false};
    park_setup();
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, scanner_thread, s), 0);
    park_wait();
    return th;
}

static void resume_scanner(scanner *s, pthread_t th)
{
    park_release();
    cr_assert_eq(pthread_join(th, NULL), 0);
    if (s->admitted)
        circuit_release(&s->t);
}

/* The probe policy's asks made for A's timeout alone: the counts it holds
 * are the timeout and nothing else. */
static int64_t timeout_asks(const fx *f)
{
    int64_t n = 0;
    for (int64_t k = 0; k < f->p.probe_calls && k < SPY_MAX; k++) {
        const circuit_counts *c = &f->p.probe_seen[k];
        if (c->timed_out == 1 && c->successes == 0 && c->failures == 0)
            n++;
    }
    return n;
}

static uint64_t timed_out_total(const fx *f)
{
    circuit_stats st;
    circuit_get_stats(f->b, &st);
    return st.timed_out;
}

/* A's own done runs while the scanner is stopped: done applies what fell
 * due first (A's timeout), then counts A's success in the same half-open
 * state (P2). */
Test(probes, P1_stopped_scanner_and_the_probes_own_done_count_the_timeout_once,
     .timeout = 60)
{
    for (int i = 0; i < NSTEPS; i++) {
        fx f;
        circuit_ticket a;
        half_open_with_a(&f, 1, &a);
        scanner s;
        pthread_t th = stop_scanner(&s, &f, i);
        cr_assert(circuit_done(&a, RS_OK), "%s: A's result counts (P2)", step_names[i]);
        resume_scanner(&s, th);
        circuit_counts c = fx_counts(&f);
        cr_assert_eq(circuit_get_state(f.b), CIRCUIT_HALF_OPEN, "%s", step_names[i]);
        cr_assert_eq(c.timed_out, 1, "%s: the state's timed_out is %lld", step_names[i],
                     (long long)c.timed_out);
        cr_assert_eq(c.successes, 1, "%s: A's success", step_names[i]);
        cr_assert_eq(timed_out_total(&f), 1, "%s: the timed_out total is %llu", step_names[i],
                     (unsigned long long)timed_out_total(&f));
        cr_assert_eq(timeout_asks(&f), 1, "%s: the probe policy was asked %lld times for the "
                     "timeout", step_names[i], (long long)timeout_asks(&f));
        cr_assert_eq(f.log.n, 2, "%s: no transition", step_names[i]);
        fx_free(&f);
    }
}

/* Another probe B takes A's slot (probes = 1) and its success closes the
 * breaker while the scanner is stopped: B's allow applies A's timeout
 * first, so the closing transition carries it. */
Test(probes, P1_stopped_scanner_and_a_probe_reusing_the_slot_count_the_timeout_once,
     .timeout = 60)
{
    for (int i = 0; i < NSTEPS; i++) {
        fx f;
        circuit_ticket a, bt;
        half_open_with_a(&f, 1, &a);
        f.p.close_run = 1;
        scanner s;
        pthread_t th = stop_scanner(&s, &f, i);
        cr_assert(circuit_allow(f.b, NULL, &bt, NULL), "%s: B is admitted to A's slot",
                  step_names[i]);
        cr_assert(circuit_done(&bt, RS_OK), "%s", step_names[i]);
        cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED, "%s", step_names[i]);
        resume_scanner(&s, th);
        cr_assert_not(circuit_done(&a, RS_OK), "%s: A's result is late (T6)", step_names[i]);
        cr_assert_eq(f.log.n, 3, "%s: %lld transitions", step_names[i], (long long)f.log.n);
        assert_tr(&f, 2, CIRCUIT_HALF_OPEN, CIRCUIT_CLOSED, 3);
        cr_assert_eq(f.log.tr[2].cause, CIRCUIT_CAUSE_POLICY, "%s", step_names[i]);
        /* B's success and A's timeout: successes 1, run 1, timed_out 1 */
        cr_assert_eq(f.log.tr[2].counts.timed_out, 1, "%s: the closing transition carries "
                     "timed_out %lld", step_names[i], (long long)f.log.tr[2].counts.timed_out);
        assert_counts(&f.log.tr[2].counts, 1, 0, 1, 0, 1);
        cr_assert_eq(timed_out_total(&f), 1, "%s: the timed_out total is %llu", step_names[i],
                     (unsigned long long)timed_out_total(&f));
        cr_assert_eq(timeout_asks(&f), 1, "%s", step_names[i]);
        fx_free(&f);
    }
}

/* An operator isolates the breaker while the scanner is stopped: isolate
 * applies A's timeout first, so the transition's final counts hold it. */
Test(probes, P1_stopped_scanner_and_an_isolate_count_the_timeout_once, .timeout = 60)
{
    for (int i = 0; i < NSTEPS; i++) {
        fx f;
        circuit_ticket a;
        half_open_with_a(&f, 1, &a);
        scanner s;
        pthread_t th = stop_scanner(&s, &f, i);
        cr_assert_eq(circuit_isolate(f.b, NULL), 0);
        resume_scanner(&s, th);
        cr_assert_not(s.admitted, "%s: the scanner's allow while isolated", step_names[i]);
        cr_assert_not(circuit_done(&a, RS_OK), "%s: A's result is late", step_names[i]);
        cr_assert_eq(f.log.n, 3, "%s: %lld transitions", step_names[i], (long long)f.log.n);
        assert_tr(&f, 2, CIRCUIT_HALF_OPEN, CIRCUIT_ISOLATED, 3);
        cr_assert_eq(f.log.tr[2].cause, CIRCUIT_CAUSE_OPERATOR, "%s", step_names[i]);
        assert_counts(&f.log.tr[2].counts, 0, 0, 0, 0, 1);
        cr_assert_eq(timed_out_total(&f), 1, "%s: the timed_out total is %llu", step_names[i],
                     (unsigned long long)timed_out_total(&f));
        cr_assert_eq(timeout_asks(&f), 1, "%s", step_names[i]);
        fx_free(&f);
    }
}

/* The timeout itself reopens the breaker (the policy reopens after one):
 * whether the scanner or this thread's allow makes the reopen, it is made
 * once, as of A's due time, and carries the one timeout. */
Test(probes, P1_stopped_scanner_and_an_allow_make_the_timeouts_reopen_once,
     .timeout = 60)
{
    for (int i = 0; i < NSTEPS; i++) {
        fx f;
        circuit_ticket a, x;
        half_open_with_a(&f, 1, &a);
        f.p.reopen_timeouts = 1;
        scanner s;
        pthread_t th = stop_scanner(&s, &f, i);
        circuit_test_clock_advance(100);
        circuit_rejection rej;
        cr_assert_not(circuit_allow(f.b, NULL, &x, &rej), "%s", step_names[i]);
        /* the open period started at A's due time, 100 ns ago */
        assert_rejected(rej, CIRCUIT_OPEN, OPEN_FOR - 100);
        resume_scanner(&s, th);
        cr_assert_not(s.admitted, "%s", step_names[i]);
        cr_assert_not(circuit_done(&a, RS_OK), "%s: A's result is late", step_names[i]);
        cr_assert_eq(f.log.n, 3, "%s: %lld transitions", step_names[i], (long long)f.log.n);
        assert_tr(&f, 2, CIRCUIT_HALF_OPEN, CIRCUIT_OPEN, 3);
        cr_assert_eq(f.log.tr[2].cause, CIRCUIT_CAUSE_POLICY, "%s", step_names[i]);
        assert_counts(&f.log.tr[2].counts, 0, 0, 0, 0, 1);
        cr_assert_eq(timed_out_total(&f), 1, "%s: the timed_out total is %llu", step_names[i],
                     (unsigned long long)timed_out_total(&f));
        cr_assert_eq(timeout_asks(&f), 1, "%s", step_names[i]);
        /* and it is open until due + OPEN_FOR, not longer */
        circuit_test_clock_set(HALF_AT + PROBE_TO + OPEN_FOR);
        cr_assert(circuit_allow(f.b, NULL, &x, &rej), "%s", step_names[i]);
        circuit_release(&x);
        fx_free(&f);
    }
}

/* Two probes due, the scanner stopped on the first (the earlier): the
 * other thread's call counts both, in due order, and the scanner adds
 * nothing when it resumes. */
Test(probes, P1_stopped_scanner_two_due_timeouts_each_counted_once_in_due_order,
     .timeout = 60)
{
    for (int i = 0; i < NSTEPS; i++) {
        fx f;
        circuit_ticket a, a2, x;
        half_open_with_a(&f, 2, &a);
        circuit_test_clock_set(HALF_AT + 10);
        cr_assert(circuit_allow(f.b, NULL, &a2, NULL)); /* due HALF_AT + 10 + PROBE_TO */
        circuit_test_clock_set(HALF_AT + 10 + PROBE_TO);
        scanner s;
        pthread_t th = stop_scanner(&s, &f, i);
        cr_assert(circuit_allow(f.b, NULL, &x, NULL), "%s", step_names[i]);
        circuit_counts c = fx_counts(&f);
        cr_assert_eq(c.timed_out, 2, "%s: timed_out %lld", step_names[i], (long long)c.timed_out);
        resume_scanner(&s, th);
        c = fx_counts(&f);
        cr_assert_eq(c.timed_out, 2, "%s: timed_out %lld after the scanner resumed", step_names[i],
                     (long long)c.timed_out);
        cr_assert_eq(timed_out_total(&f), 2, "%s: the timed_out total is %llu", step_names[i],
                     (unsigned long long)timed_out_total(&f));
        /* the policy saw timed_out 1, then 2, once each */
        int64_t ones = 0, twos = 0;
        for (int64_t k = 0; k < f.p.probe_calls; k++) {
            ones += f.p.probe_seen[k].timed_out == 1;
            twos += f.p.probe_seen[k].timed_out == 2;
            if (f.p.probe_seen[k].timed_out == 2)
                cr_assert_eq(ones, 1, "%s: timed_out 2 asked before 1", step_names[i]);
        }
        cr_assert_eq(ones, 1, "%s", step_names[i]);
        cr_assert_eq(twos, 1, "%s", step_names[i]);
        cr_assert(circuit_done(&x, RS_OK));
        cr_assert(circuit_done(&a, RS_OK), "%s: P2", step_names[i]);
        cr_assert(circuit_done(&a2, RS_OK), "%s: P2", step_names[i]);
        cr_assert_eq(f.log.n, 2, "%s", step_names[i]);
        fx_free(&f);
    }
}

/* ---- two threads stopped at once ------------------------------------------- */

/* One gate per thread: the thread stops the first time it passes its own
 * point, until the test opens the gate. */
typedef struct gate {
    sem_t stopped, go;
    int point;
    int left;
} gate;
static _Thread_local gate *my_gate;

static void gate_hook(circuit_test_point p, void *arg)
{
    (void)arg;
    gate *g = my_gate;
    if (g && g->left > 0 && (int)p == g->point) {
        g->left = 0;
        sem_post(&g->stopped);
        while (sem_wait(&g->go) != 0)
            ;
    }
}

static void gate_init(gate *g, circuit_test_point p)
{
    sem_init(&g->stopped, 0, 0);
    sem_init(&g->go, 0, 0);
    g->point = (int)p;
    g->left = 1;
}

static void gate_wait(gate *g)
{
    while (sem_wait(&g->stopped) != 0)
        ;
}

typedef struct gated_call {
    fx *f;
    gate g;
    circuit_ticket t;
    bool admitted;
    int rc;
} gated_call;

static void *gated_isolate(void *arg)
{
    gated_call *c = arg;
    my_gate = &c->g;
    c->rc = circuit_isolate(c->f->b, NULL);
    return NULL;
}

static void *gated_allow(void *arg)
{
    gated_call *c = arg;
    my_gate = &c->g;
    c->admitted = circuit_allow(c->f->b, NULL, &c->t, NULL);
    return NULL;
}

/* An isolate's scan reads the claim word idle and is stopped; a scanner then
 * claims A's timeout, takes its slot and is stopped before counting it. The
 * isolate resumes and finds A's slot taken: the timeout is being counted,
 * not counted, so it must finish that claim before it isolates (a first
 * version of the claim took a taken slot for done here, and the isolate's
 * final counts missed the timeout: tests/model/spin/timeout.pml's
 * PLANT_TAKEN_IS_DONE). */
Test(probes, P1_a_scan_that_finds_the_slot_taken_finishes_that_claim_first,
     .timeout = 60)
{
    fx f;
    circuit_ticket a;
    half_open_with_a(&f, 1, &a);
    gated_call iso = {&f, .rc = -1}, scan = {&f, .t = CIRCUIT_TICKET_INIT};
    gate_init(&iso.g, CIRCUIT_TP_TIMEOUT_IDLE_READ);
    gate_init(&scan.g, CIRCUIT_TP_TIMEOUT_TAKEN);
    circuit_test_set_hook(gate_hook, NULL);
    pthread_t ti, ts;
    cr_assert_eq(pthread_create(&ti, NULL, gated_isolate, &iso), 0);
    gate_wait(&iso.g); /* the isolate has read the claim word: idle */
    cr_assert_eq(pthread_create(&ts, NULL, gated_allow, &scan), 0);
    gate_wait(&scan.g); /* A's timeout claimed, its slot taken, not counted */
    sem_post(&iso.g.go);
    cr_assert_eq(pthread_join(ti, NULL), 0);
    cr_assert_eq(iso.rc, 0);
    cr_assert_eq(f.log.n, 3, "%lld transitions", (long long)f.log.n);
    assert_tr(&f, 2, CIRCUIT_HALF_OPEN, CIRCUIT_ISOLATED, 3);
    cr_assert_eq(f.log.tr[2].counts.timed_out, 1, "the isolate's final counts carry timed_out "
                 "%lld", (long long)f.log.tr[2].counts.timed_out);
    sem_post(&scan.g.go);
    cr_assert_eq(pthread_join(ts, NULL), 0);
    circuit_test_set_hook(NULL, NULL);
    cr_assert_not(scan.admitted, "the scanner's allow while isolated");
    cr_assert_eq(timed_out_total(&f), 1, "the timed_out total is %llu",
                 (unsigned long long)timed_out_total(&f));
    cr_assert_eq(timeout_asks(&f), 1);
    cr_assert_not(circuit_done(&a, RS_OK), "A's result is late");
    fx_free(&f);
}


/* ==== only circuit_allow admits a probe (P1, S4) ========================== */

/*
 * P1 and S4: only circuit_allow admits a probe. A call
 * that is not an allow (a late circuit_done, circuit_isolate, circuit_reset)
 * and makes the open -> half-open change leaves no reserved probe slot that
 * can time out, hold a slot or be counted, even when it is stopped right
 * after the CAS that made the change.
 *
 * The maker thread runs that call once the open period is over and is
 * stopped just after its transition's CAS (CIRCUIT_TP_AFTER_PUBLISH: the
 * half-open state is made, the call has not returned). Meanwhile this
 * thread:
 *   - moves the clock to the moment a probe admitted by that change would
 *     time out (open end + probe_timeout) and calls allow: it is admitted
 *     as a probe, timed_out stays 0 (state and total) and the probe policy
 *     is not asked about a timeout;
 *   - or, at the open end itself, reads the stats (no probe in flight) and
 *     calls allow: admitted at once, not refused {HALF_OPEN, 0}; that probe
 *     then times out like any other (one timeout, one policy call).
 * The maker is then let go, and the account is checked again.
 *
 * Built with -DCIRCUIT_PLANT_PHANTOM_PROBE, the core reserves slot 0 as a
 * probe whoever makes the change, and a non-allow maker frees it only after
 * its CAS: stopped in between, the reservation times out (timed_out 1, the
 * probe policy asked) and, with probes = 1, every allow is refused
 * {HALF_OPEN, 0} while probes_in_flight reads 1. These tests fail there.
 */

#define CTX_MAKER ((void *)0x31)
#define CTX_PROBE ((void *)0x32)
#define OPEN_END (T0 + OPEN_FOR)

typedef enum maker_kind { BY_LATE_SUCCESS, BY_LATE_FAILURE, BY_ISOLATE, BY_RESET } maker_kind;
static const char *const kind_names[] = {"late done (success)", "late done (failure)",
                                         "isolate", "reset"};
#define NKINDS 4

typedef struct maker {
    fx *f;
    maker_kind kind;
    circuit_ticket late; /* admitted while closed, settled after the trip */
    int rc;
    bool done_rv;
} maker;

static void *maker_thread(void *arg)
{
    maker *m = arg;
    park_me_at(CIRCUIT_TP_AFTER_PUBLISH);
    switch (m->kind) {
    case BY_LATE_SUCCESS: m->done_rv = circuit_done(&m->late, RS_OK); break;
    case BY_LATE_FAILURE: m->done_rv = circuit_done(&m->late, RS_FAIL); break;
    case BY_ISOLATE: m->rc = circuit_isolate(m->f->b, CTX_MAKER); break;
    case BY_RESET: m->rc = circuit_reset(m->f->b, CTX_MAKER); break;
    }
    return NULL;
}

/* A breaker opened at T0 with the clock at its open end, a closed ticket
 * still live; the maker makes open -> half-open and is stopped right after
 * that transition's CAS. */
static pthread_t start_maker(fx *f, maker *m, maker_kind kind, int probes)
{
    fx_init(f, 4, probes, OPEN_FOR, PROBE_TO);
    fx_build(f);
    *m = (maker){f, kind, CIRCUIT_TICKET_INIT, -1, true};
    circuit_test_clock_set(T0);
    cr_assert(circuit_allow(f->b, CTX_MAKER, &m->late, NULL));
    fx_half_open_due(f); /* opened at T0; the clock at OPEN_END */
    park_setup();
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, maker_thread, m), 0);
    park_wait();
    circuit_stats st;
    circuit_get_stats(f->b, &st);
    cr_assert_eq(st.state, CIRCUIT_HALF_OPEN, "%s: stopped after its CAS", kind_names[kind]);
    cr_assert_eq(st.generation, 2, "%s: closed -> open -> half-open", kind_names[kind]);
    return th;
}

/* Lets the maker finish its call, and checks what that call answered. */
static void finish_maker(maker *m, pthread_t th)
{
    park_release();
    cr_assert_eq(pthread_join(th, NULL), 0);
    const char *name = kind_names[m->kind];
    switch (m->kind) {
    case BY_LATE_SUCCESS:
    case BY_LATE_FAILURE:
        cr_assert_not(m->done_rv, "%s: its result is late (T2)", name);
        break;
    default:
        cr_assert_eq(m->rc, 0, "%s: made its transition", name);
        break;
    }
}

/* Probe-policy calls about a timeout: counts that hold timeouts and no
 * result (every result in these tests is counted after the timeouts). */
static int64_t asks_about_timeouts(const fx *f)
{
    int64_t n = 0;
    for (int64_t k = 0; k < f->p.probe_calls && k < SPY_MAX; k++) {
        const circuit_counts *c = &f->p.probe_seen[k];
        if (c->timed_out > 0 && c->successes == 0 && c->failures == 0)
            n++;
    }
    return n;
}

static circuit_stats stats(const fx *f)
{
    circuit_stats st;
    circuit_get_stats(f->b, &st);
    return st;
}

/* The state after the maker's call returned: its own transition, if any. */
static void check_maker_state(const fx *f, maker_kind kind)
{
    circuit_state want = kind == BY_ISOLATE ? CIRCUIT_ISOLATED
                         : kind == BY_RESET ? CIRCUIT_CLOSED
                                            : CIRCUIT_HALF_OPEN;
    cr_assert_eq(circuit_get_state(f->b), want, "%s: state %s", kind_names[kind],
                 circuit_state_name(circuit_get_state(f->b)));
}

/* Past the moment a probe admitted by the change would time out, the next
 * allow is a probe, and nothing timed out. */
Test(probes,
     P1_S4_a_half_open_change_by_another_call_leaves_no_probe_to_time_out, .timeout = 60)
{
    static const int probes[] = {1, 3};
    for (int pi = 0; pi < 2; pi++) {
        for (int k = 0; k < NKINDS; k++) {
            fx f;
            maker m;
            const char *name = kind_names[k];
            pthread_t th = start_maker(&f, &m, (maker_kind)k, probes[pi]);

            circuit_test_clock_set(OPEN_END + PROBE_TO);
            circuit_ticket p;
            circuit_rejection rej = {0, 0};
            bool admitted = circuit_allow(f.b, CTX_PROBE, &p, &rej);
            circuit_stats st = stats(&f);
            cr_assert_eq(st.timed_out, 0,
                         "%s, probes %d: timed_out total %llu for a probe never admitted", name,
                         probes[pi], (unsigned long long)st.timed_out);
            cr_assert_eq(st.counts.timed_out, 0, "%s, probes %d: the state's timed_out %lld",
                         name, probes[pi], (long long)st.counts.timed_out);
            cr_assert_eq(asks_about_timeouts(&f), 0,
                         "%s, probes %d: the probe policy was asked %lld times about a timeout",
                         name, probes[pi], (long long)asks_about_timeouts(&f));
            cr_assert(admitted, "%s, probes %d: the allow is a probe (refused {%s, %lld})", name,
                      probes[pi], circuit_state_name(rej.state), (long long)rej.retry_after_ns);
            cr_assert_eq(st.state, CIRCUIT_HALF_OPEN, "%s, probes %d", name, probes[pi]);
            cr_assert_eq(st.probes_in_flight, 1, "%s, probes %d: probes in flight %lld", name,
                         probes[pi], (long long)st.probes_in_flight);
            cr_assert_eq(f.log.n, 2, "%s, probes %d: closed -> open -> half-open, no more",
                         name, probes[pi]);
            assert_tr(&f, 1, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN, 2);
            cr_assert_eq(f.log.ctx[1], CTX_MAKER, "%s: O6, the maker's call_ctx", name);
            if (probes[pi] == 1) {
                circuit_ticket q;
                circuit_rejection rq = {0, 0};
                cr_assert_not(circuit_allow(f.b, NULL, &q, &rq), "%s: the one slot is p's", name);
                assert_rejected(rq, CIRCUIT_HALF_OPEN, 0);
            }

            finish_maker(&m, th);
            check_maker_state(&f, (maker_kind)k);
            bool in_time = k == BY_LATE_SUCCESS || k == BY_LATE_FAILURE;
            cr_assert_eq(circuit_done(&p, RS_OK), in_time,
                         "%s: the probe's success counts while its state lasts (T2)", name);
            st = stats(&f);
            cr_assert_eq(st.timed_out, 0, "%s, probes %d: timed_out total %llu at the end", name,
                         probes[pi], (unsigned long long)st.timed_out);
            cr_assert_eq(asks_about_timeouts(&f), 0, "%s, probes %d: no policy call about a timeout",
                         name, probes[pi]);
            cr_assert_eq(f.p.probe_calls, in_time ? 1 : 0,
                         "%s, probes %d: the probe policy asked %lld times (p's success only)",
                         name, probes[pi], (long long)f.p.probe_calls);
            cr_assert_eq(f.log.order_errors, 0);
            fx_free(&f);
        }
    }
}

/* At the open end itself: nothing is in flight, the next allow is admitted
 * at once (probes = 1: not refused for a probe never admitted), and the
 * probe it is times out as any probe does. */
Test(probes,
     P1_S4_a_half_open_change_by_another_call_refuses_no_allow_and_holds_no_slot,
     .timeout = 60)
{
    for (int k = 0; k < NKINDS; k++) {
        fx f;
        maker m;
        const char *name = kind_names[k];
        pthread_t th = start_maker(&f, &m, (maker_kind)k, 1);

        circuit_stats st = stats(&f);
        cr_assert_eq(st.probes_in_flight, 0, "%s: probes in flight %lld, none admitted", name,
                     (long long)st.probes_in_flight);
        circuit_ticket p;
        circuit_rejection rej = {0, 0};
        cr_assert(circuit_allow(f.b, CTX_PROBE, &p, &rej), "%s: refused {%s, %lld}", name,
                  circuit_state_name(rej.state), (long long)rej.retry_after_ns);
        st = stats(&f);
        cr_assert_eq(st.probes_in_flight, 1, "%s: p in flight", name);
        cr_assert_eq(st.timed_out, 0, "%s", name);

        /* p's own timeout: counted once, the policy asked once */
        circuit_test_clock_set(OPEN_END + PROBE_TO);
        circuit_ticket q;
        cr_assert(circuit_allow(f.b, NULL, &q, &rej), "%s: p timed out, q takes its slot", name);
        st = stats(&f);
        cr_assert_eq(st.timed_out, 1, "%s: p's timeout (total %llu)", name,
                     (unsigned long long)st.timed_out);
        cr_assert_eq(st.counts.timed_out, 1, "%s: p's timeout (state)", name);
        cr_assert_eq(asks_about_timeouts(&f), 1, "%s: the policy asked about p's timeout", name);
        cr_assert_eq(st.probes_in_flight, 1, "%s: q in flight", name);

        finish_maker(&m, th);
        check_maker_state(&f, (maker_kind)k);
        circuit_release(&q);
        bool in_time = k == BY_LATE_SUCCESS || k == BY_LATE_FAILURE;
        cr_assert_eq(circuit_done(&p, RS_OK), in_time,
                     "%s: p's result counts while its state lasts (P2, T2)", name);
        st = stats(&f);
        cr_assert_eq(st.timed_out, 1, "%s: one timeout in all (total %llu)", name,
                     (unsigned long long)st.timed_out);
        cr_assert_eq(asks_about_timeouts(&f), 1, "%s: one policy call about a timeout", name);
        fx_free(&f);
    }
}


/* ==== probes across generations (P1, T6) ================================== */

typedef struct stale_allow {
    fx *f;
    circuit_ticket t;
    bool admitted;
} stale_allow;

static void *stale_allow_thread(void *arg)
{
    stale_allow *s = arg;
    park_me_at(CIRCUIT_TP_SLOT_HELD);
    s->admitted = circuit_allow(s->f->b, (void *)0x5, &s->t, NULL);
    return NULL;
}

/* An allow makes open -> half-open (generation 2), which admits it with the
 * reservation of probe slot 0 (S3), and is stopped before returning.
 * Meanwhile the breaker reopens (3) and becomes half-open again (4), where
 * call Q takes slot 0. The stopped allow then resumes. It is a probe of
 * generation 2 (its result is late, T6), and must not overwrite Q's slot
 * record (Q must still time out at its due time and its slot be freed). */
Test(probes, T6_P1_allow_stopped_across_generations_never_takes_a_later_probes_slot)
{
    fx f;
    fx_init(&f, 4, 2, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 1;
    f.p.reopen_on_failure = true;
    fx_build(&f);
    circuit_test_clock_set(T0);
    cr_assert(fx_call(&f, RS_FAIL)); /* gen 1: open at T0 */
    circuit_test_clock_set(T0 + OPEN_FOR);

    park_setup();
    stale_allow s = {&f, CIRCUIT_TICKET_INIT, false};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, stale_allow_thread, &s), 0);
    park_wait(); /* S made gen 2 and holds the slot-0 reservation */
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_HALF_OPEN);

    circuit_ticket p, q;
    cr_assert(circuit_allow(f.b, NULL, &p, NULL));
    cr_assert(circuit_done(&p, RS_FAIL)); /* gen 3: reopened at T0 + OPEN_FOR */
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    circuit_test_clock_set(T0 + 2 * OPEN_FOR);
    cr_assert(circuit_allow(f.b, (void *)0x9, &q, NULL)); /* gen 4, slot 0 */

    park_release();
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_assert(s.admitted, "the allow that made generation 2 is its first probe (S3)");
    int64_t asks = f.p.probe_calls;
    cr_assert_not(circuit_done(&s.t, RS_OK), "its result belongs to generation 2: late");
    cr_assert_eq(f.p.probe_calls, asks, "a late result asks no policy");

    /* Q never settles: past its due time it must time out and free its slot */
    circuit_test_clock_set(T0 + 2 * OPEN_FOR + 10 * PROBE_TO);
    asks = f.p.probe_calls;
    circuit_ticket x, y;
    bool ax = circuit_allow(f.b, NULL, &x, NULL);
    cr_assert_eq(f.p.probe_calls, asks + 1, "Q's timeout was not counted");
    cr_assert_eq(f.p.probe_last.timed_out, 1);
    bool ay = circuit_allow(f.b, NULL, &y, NULL);
    cr_assert(ax && ay, "both probe slots must be usable once Q timed out");
    circuit_release(&x);
    circuit_release(&y);
    cr_assert(circuit_done(&q, RS_OK), "P2: Q's late result still counts");
    fx_free(&f);
}

/* A scan for due probes that started in an older generation must not raise
 * the timeout hint past a probe of the newer one: after many generations
 * with probes in flight, every probe still times out at its due time. */
Test(probes, P1_every_generations_probes_time_out_at_their_due_time)
{
    fx f;
    fx_init(&f, 4, 3, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 1;
    f.p.reopen_timeouts = 1; /* the first timeout reopens */
    fx_build(&f);
    circuit_test_clock_set(T0);
    fx_call(&f, RS_FAIL);
    int64_t now = T0;
    for (int round = 0; round < 50; round++) {
        now += OPEN_FOR;
        circuit_test_clock_set(now);
        circuit_ticket t[3];
        for (int i = 0; i < 3; i++)
            cr_assert(circuit_allow(f.b, NULL, &t[i], NULL), "round %d probe %d", round, i);
        circuit_test_clock_set(now + PROBE_TO - 1);
        cr_assert_eq(circuit_get_state(f.b), CIRCUIT_HALF_OPEN);
        circuit_ticket u;
        cr_assert_not(circuit_allow(f.b, NULL, &u, NULL), "round %d: a slot freed early", round);
        now += PROBE_TO;
        circuit_test_clock_set(now);
        cr_assert_not(circuit_allow(f.b, NULL, &u, NULL)); /* times out, reopens at now */
        cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN, "round %d: no timeout at due time",
                     round);
        for (int i = 0; i < 3; i++)
            circuit_release(&t[i]);
    }
    fx_free(&f);
}
