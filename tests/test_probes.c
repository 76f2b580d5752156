/*
 * P1-P3 (probes and their timeouts) and TM1-TM3 (time).
 */
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

/* ---- TM1 --------------------------------------------------------------------- */

static int count_lines(const char *path)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return -1;
    int n = 0, ch;
    while ((ch = fgetc(fp)) != EOF)
        n += ch == '\n';
    fclose(fp);
    return n;
}

Test(time, TM1_no_thread_and_no_timer_is_started)
{
    int threads0 = thread_count();
    int timers0 = count_lines("/proc/self/timers");
    struct sigaction alrm0;
    sigaction(SIGALRM, NULL, &alrm0);
    fx f;
    fx_init(&f, 8, 2, OPEN_FOR, PROBE_TO);
    f.p.reopen_timeouts = 2;
    fx_build(&f);
    cr_assert_eq(thread_count(), threads0, "circuit_new started a thread");
    circuit_test_clock_set(T0);
    for (int cycle = 0; cycle < 1000; cycle++) {
        fx_call(&f, RS_FAIL);
        fx_call(&f, RS_FAIL);
        circuit_test_clock_advance(OPEN_FOR);
        if (cycle % 2) {
            fx_call(&f, RS_OK);
            fx_call(&f, RS_OK);
        } else {
            circuit_ticket a, b, x;
            cr_assert(circuit_allow(f.b, NULL, &a, NULL));
            cr_assert(circuit_allow(f.b, NULL, &b, NULL));
            circuit_test_clock_advance(PROBE_TO);
            cr_assert_not(circuit_allow(f.b, NULL, &x, NULL)); /* 2 timeouts reopen */
            circuit_release(&a);
            circuit_release(&b);
            circuit_test_clock_advance(OPEN_FOR);
            fx_call(&f, RS_OK);
            fx_call(&f, RS_OK);
        }
    }
    cr_assert_geq(f.log.n, 3000);
    cr_assert_eq(thread_count(), threads0, "the library started a thread");
    cr_assert_eq(count_lines("/proc/self/timers"), timers0, "the library created a timer");
    struct sigaction alrm1;
    sigaction(SIGALRM, NULL, &alrm1);
    cr_assert_eq(alrm1.sa_handler, alrm0.sa_handler, "the library installed a SIGALRM handler");
    fx_free(&f);
    cr_assert_eq(thread_count(), threads0);
}

/* ---- TM2 --------------------------------------------------------------------- */

Test(time, TM2_open_for_boundary_is_exact_to_the_nanosecond)
{
    const int64_t open_for = INT64_C(3000000007); /* 3 s + 7 ns */
    fx f;
    fx_init(&f, 4, 1, open_for, PROBE_TO);
    f.p.trip_run = 1;
    fx_build(&f);
    const int64_t opened = INT64_C(5000000000000); /* 5000 s */
    circuit_test_clock_set(opened);
    fx_call(&f, RS_FAIL);
    circuit_ticket t;
    circuit_rejection rej;
    circuit_test_clock_set(opened + open_for - 1);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    cr_assert_not(circuit_allow(f.b, NULL, &t, &rej));
    assert_rejected(rej, CIRCUIT_OPEN, 1);
    cr_assert_eq(f.log.n, 1);
    circuit_test_clock_set(opened + open_for);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_HALF_OPEN);
    cr_assert(circuit_allow(f.b, NULL, &t, &rej), "not a probe at exactly open_for");
    cr_assert_eq(f.log.n, 2);
    assert_tr(&f, 1, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN, 2);
    assert_counts(&f.log.tr[1].counts, 0, 0, 0, 0, 0);
    circuit_release(&t);
    fx_free(&f);
}

Test(time, TM2_probe_timeout_boundary_is_exact_to_the_nanosecond)
{
    const int64_t probe_to = INT64_C(2000000003);
    fx f;
    fx_init(&f, 4, 1, OPEN_FOR, probe_to);
    f.p.probe_forced = CIRCUIT_HALF_OPEN;
    fx_build(&f);
    fx_half_open_due(&f);
    int64_t admitted = T0 + OPEN_FOR + 1;
    circuit_test_clock_set(admitted);
    circuit_ticket t, u;
    circuit_rejection rej;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    circuit_test_clock_set(admitted + probe_to - 1);
    cr_assert_not(circuit_allow(f.b, NULL, &u, &rej), "probe timed out 1 ns early");
    assert_rejected(rej, CIRCUIT_HALF_OPEN, 0);
    cr_assert_eq(f.p.probe_calls, 0);
    circuit_test_clock_set(admitted + probe_to);
    cr_assert(circuit_allow(f.b, NULL, &u, &rej), "probe not timed out at probe_timeout");
    cr_assert_eq(f.p.probe_calls, 1);
    cr_assert_eq(f.p.probe_seen[0].timed_out, 1);
    /* the same for a probe admitted while already half-open (u; t was the
     * call that made the transition) */
    int64_t second = admitted + probe_to;
    circuit_ticket v;
    circuit_test_clock_set(second + probe_to - 1);
    cr_assert_not(circuit_allow(f.b, NULL, &v, &rej), "second probe timed out 1 ns early");
    cr_assert_eq(f.p.probe_calls, 1);
    circuit_test_clock_set(second + probe_to);
    cr_assert(circuit_allow(f.b, NULL, &v, &rej), "second probe not timed out at probe_timeout");
    cr_assert_eq(f.p.probe_calls, 2);
    cr_assert_eq(f.p.probe_seen[1].timed_out, 2);
    circuit_release(&v);
    circuit_release(&u);
    circuit_release(&t);
    fx_free(&f);
}

Test(time, TM2_huge_periods_do_not_overflow)
{
    fx f;
    fx_init(&f, 4, 1, INT64_MAX, INT64_MAX);
    f.p.trip_run = 1;
    fx_build(&f);
    circuit_test_clock_set(T0);
    fx_call(&f, RS_FAIL);
    circuit_ticket t;
    circuit_rejection rej;
    circuit_test_clock_set(T0 + 5);
    cr_assert_not(circuit_allow(f.b, NULL, &t, &rej));
    assert_rejected(rej, CIRCUIT_OPEN, INT64_MAX - 5);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    fx_free(&f);
}

/* ---- TM3 --------------------------------------------------------------------- */

static int64_t mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ns(int64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
        ;
}

Test(time, TM3_real_clock)
{
    /* 300 ms, 150 ms: wide enough that a loaded machine running ASan does
     * not take the whole period between the trip and the next call (2 ms
     * flaked under load, and under qemu) */
    const int64_t open_for = 300000000, probe_to = 150000000;
    circuit_test_clock_use_real(true);
    int64_t a = mono_now();
    int64_t b = circuit_test_clock_now();
    int64_t c = mono_now();
    cr_assert(a <= b && b <= c, "the seam does not read CLOCK_MONOTONIC");
    fx f;
    fx_init(&f, 4, 1, open_for, probe_to);
    f.p.trip_run = 1;
    f.p.probe_forced = CIRCUIT_HALF_OPEN;
    fx_build(&f);
    int64_t before = mono_now();
    fx_call(&f, RS_FAIL);
    circuit_ticket t;
    circuit_rejection rej;
    cr_assert_not(circuit_allow(f.b, NULL, &t, &rej));
    int64_t after = mono_now();
    cr_assert_eq(rej.state, CIRCUIT_OPEN);
    cr_assert(rej.retry_after_ns >= 1 && rej.retry_after_ns <= open_for, "retry_after %lld",
              (long long)rej.retry_after_ns);
    cr_assert_geq(rej.retry_after_ns, open_for - (after - before));
    /* once open_for has surely passed: half-open, and the next call a probe */
    sleep_ns(open_for);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_HALF_OPEN);
    cr_assert(circuit_allow(f.b, NULL, &t, &rej));
    cr_assert_eq(f.log.n, 2);
    assert_tr(&f, 1, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN, 2);
    /* a probe held past probe_timeout times out on the real clock */
    sleep_ns(probe_to);
    circuit_ticket u;
    cr_assert(circuit_allow(f.b, NULL, &u, &rej));
    cr_assert_eq(f.p.probe_calls, 1);
    cr_assert_eq(f.p.probe_seen[0].timed_out, 1);
    circuit_release(&u);
    circuit_release(&t);
    fx_free(&f);
    circuit_test_clock_use_real(false);
}
