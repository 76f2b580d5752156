/*
 * OP1-OP3 (isolate, reset) and B1-B2 (the open period chosen), through the
 * core. circuit_get_stats (M1) is tested in test_stats.c.
 */
#include "helpers.h"

/* ---- OP1 ---------------------------------------------------------------- */

Test(operator, OP1_isolate_from_closed_rejects_everything_and_makes_earlier_tickets_late)
{
    fx f;
    fx_new(&f, 8, 1, OPEN_FOR, PROBE_TO);
    fx_call(&f, RS_OK);
    fx_call(&f, RS_FAIL);
    circuit_ticket early;
    cr_assert(circuit_allow(f.b, NULL, &early, NULL));
    int64_t trips = f.p.trip_calls;
    cr_assert_eq(circuit_isolate(f.b, (void *)0x77), 0);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_ISOLATED);
    assert_tr(&f, 0, CIRCUIT_CLOSED, CIRCUIT_ISOLATED, 1);
    cr_assert_eq(f.log.tr[0].cause, CIRCUIT_CAUSE_OPERATOR);
    cr_assert_eq(f.log.tr[0].open_for_ns, 0);
    cr_assert_eq(f.log.ctx[0], (void *)0x77, "O6: observe gets the operator's call_ctx");
    assert_counts(&f.log.tr[0].counts, 1, 1, 0, 1, 0); /* final counts of the state left */
    circuit_test_clock_advance(100 * OPEN_FOR); /* no time-driven change while isolated */
    for (int i = 0; i < 10; i++) {
        circuit_ticket t;
        circuit_rejection rej;
        cr_assert_not(circuit_allow(f.b, NULL, &t, &rej));
        assert_rejected(rej, CIRCUIT_ISOLATED, 0);
    }
    cr_assert_not(circuit_done(&early, RS_FAIL), "a ticket from before isolate is late");
    cr_assert_eq(f.p.trip_calls, trips, "no policy is asked while isolated");
    cr_assert_eq(f.p.probe_calls, 0);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_ISOLATED);
    cr_assert_eq(f.log.n, 1);
    char buf[128];
    circuit_rejection rej = {CIRCUIT_ISOLATED, 0};
    cr_assert_gt(circuit_rejection_format(&rej, buf, sizeof buf), 0);
    cr_assert(strstr(buf, "isolated"), "OP3: the rejection text names the state: %s", buf);
    fx_free(&f);
}

Test(operator, OP1_isolate_when_isolated_is_EALREADY_and_changes_nothing)
{
    fx f;
    fx_new(&f, 8, 1, OPEN_FOR, PROBE_TO);
    cr_assert_eq(circuit_isolate(f.b, NULL), 0);
    cr_assert_eq(circuit_isolate(f.b, NULL), EALREADY);
    cr_assert_eq(f.log.n, 1);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_ISOLATED);
    fx_free(&f);
}

Test(operator, OP1_isolate_from_half_open_carries_its_counts_and_frees_nothing_twice)
{
    fx f;
    fx_init(&f, 8, 2, OPEN_FOR, PROBE_TO);
    f.p.probe_forced = CIRCUIT_HALF_OPEN;
    fx_build(&f);
    fx_half_open_due(&f);
    circuit_ticket p, q;
    cr_assert(circuit_allow(f.b, NULL, &p, NULL));
    cr_assert(circuit_allow(f.b, NULL, &q, NULL));
    cr_assert(circuit_done(&p, RS_OK));
    cr_assert_eq(circuit_isolate(f.b, NULL), 0);
    assert_tr(&f, 2, CIRCUIT_HALF_OPEN, CIRCUIT_ISOLATED, 3);
    assert_counts(&f.log.tr[2].counts, 1, 0, 1, 0, 0);
    cr_assert_not(circuit_done(&q, RS_OK), "the probe of the state left is late");
    fx_free(&f);
}

/* Isolate first makes the time-driven change that fell due, as allow would. */
Test(operator, OP1_isolate_after_the_open_period_passes_through_half_open)
{
    fx f;
    fx_new(&f, 8, 1, OPEN_FOR, PROBE_TO);
    fx_half_open_due(&f);
    cr_assert_eq(circuit_isolate(f.b, NULL), 0);
    assert_tr(&f, 1, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN, 2);
    cr_assert_eq(f.log.tr[1].cause, CIRCUIT_CAUSE_TIMER);
    assert_tr(&f, 2, CIRCUIT_HALF_OPEN, CIRCUIT_ISOLATED, 3);
    fx_free(&f);
}

/* ---- OP2 ---------------------------------------------------------------- */

Test(operator, OP2_reset_closes_from_open_half_open_and_isolated_with_zero_counts)
{
    fx f;
    fx_new(&f, 8, 1, OPEN_FOR, PROBE_TO);
    cr_assert_eq(circuit_reset(f.b, NULL), EALREADY, "reset when closed");
    cr_assert_eq(f.log.n, 0);
    fx_open(&f);
    cr_assert_eq(circuit_reset(f.b, NULL), 0);
    assert_tr(&f, 1, CIRCUIT_OPEN, CIRCUIT_CLOSED, 2);
    cr_assert_eq(f.log.tr[1].cause, CIRCUIT_CAUSE_OPERATOR);
    circuit_counts c = fx_counts(&f);
    assert_counts(&c, 0, 0, 0, 0, 0);
    cr_assert(fx_call(&f, RS_OK), "admits at once");
    fx_half_open_due(&f);
    circuit_ticket p;
    cr_assert(circuit_allow(f.b, NULL, &p, NULL));
    cr_assert_eq(circuit_reset(f.b, NULL), 0);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    cr_assert_not(circuit_done(&p, RS_OK), "the probe is late after reset");
    cr_assert_eq(circuit_isolate(f.b, NULL), 0);
    cr_assert_eq(circuit_reset(f.b, NULL), 0);
    cr_assert_eq(f.log.tr[f.log.n - 1].from, CIRCUIT_ISOLATED);
    cr_assert_eq(f.log.tr[f.log.n - 1].to, CIRCUIT_CLOSED);
    cr_assert_eq(f.log.order_errors, 0);
    fx_free(&f);
}

/* ---- OP3 ---------------------------------------------------------------- */

static void op_from_observe(fx *f, void *ctx, const circuit_transition *t)
{
    (void)ctx;
    if (t->to == CIRCUIT_OPEN && t->cause == CIRCUIT_CAUSE_POLICY)
        cr_assert_eq(circuit_isolate(f->b, (void *)0x51), 0);
    if (t->to == CIRCUIT_ISOLATED)
        cr_assert_eq(circuit_reset(f->b, (void *)0x52), 0);
}

Test(operator, OP3_isolate_and_reset_from_observe_are_delivered_after_it_in_order)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.log.extra = op_from_observe;
    fx_build(&f);
    fx_call(&f, RS_FAIL);
    fx_call(&f, RS_FAIL); /* trips; observe isolates, then resets */
    cr_assert_eq(f.log.n, 3);
    assert_tr(&f, 0, CIRCUIT_CLOSED, CIRCUIT_OPEN, 1);
    assert_tr(&f, 1, CIRCUIT_OPEN, CIRCUIT_ISOLATED, 2);
    assert_tr(&f, 2, CIRCUIT_ISOLATED, CIRCUIT_CLOSED, 3);
    cr_assert_eq(f.log.ctx[1], (void *)0x51);
    cr_assert_eq(f.log.ctx[2], (void *)0x52);
    cr_assert_eq(f.log.max_inside, 1, "O2: observe never nested");
    cr_assert_eq(circuit_test_pending(f.b), 0);
    fx_free(&f);
}

typedef struct op_thread {
    fx *f;
    int n;
    int isolated, reset;
} op_thread;

static void *operator_loop(void *arg)
{
    op_thread *o = arg;
    for (int i = 0; i < o->n; i++) {
        if (circuit_isolate(o->f->b, NULL) == 0)
            o->isolated++;
        if (circuit_reset(o->f->b, NULL) == 0)
            o->reset++;
    }
    return NULL;
}

/* Operator calls on another thread while traffic flows: every transition is
 * delivered once, in order; the totals add up afterwards. */
Test(operator, OP3_operator_calls_race_traffic_lock_free)
{
    fx f;
    fx_init(&f, 16, 2, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 3;
    fx_build(&f);
    op_thread o = {&f, 2000, 0, 0};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, operator_loop, &o), 0);
    for (int i = 0; i < 20000; i++) {
        circuit_ticket t;
        if (circuit_allow(f.b, NULL, &t, NULL))
            circuit_done(&t, i % 7 == 0 ? RS_FAIL : RS_OK);
    }
    pthread_join(th, NULL);
    cr_assert_eq(f.log.order_errors, 0);
    cr_assert_eq(circuit_test_pending(f.b), 0, "O3: nothing stranded");
    cr_assert_geq(o.isolated, 1);
    cr_assert_geq(o.reset, 1);
    circuit_stats s;
    circuit_get_stats(f.b, &s);
    cr_assert_eq(s.transitions, (uint64_t)f.log.n);
    cr_assert_eq(s.admitted, s.successes + s.failures + s.ignored + s.late + s.released);
    cr_assert_eq(s.admitted + s.rejected, 20000);
    fx_free(&f);
}

/* ---- B1, B2 --------------------------------------------------------------- */

typedef struct period_spy {
    circuit_open_info seen[32];
    int n;
} period_spy;

static int64_t spy_open_for(void *arg, const circuit_open_info *info)
{
    period_spy *p = arg;
    if (p->n < 32)
        p->seen[p->n] = *info;
    p->n++;
    return 100 * (info->reopens + 1) + (int64_t)info->generation;
}

Test(operator, B1_open_period_is_chosen_by_open_for_and_followed_to_the_nanosecond)
{
    fx f;
    period_spy spy = {.n = 0};
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 1;
    f.spec.open_for = spy_open_for;
    f.spec.open_for_arg = &spy;
    fx_build(&f);
    circuit_test_clock_set(T0);
    fx_call(&f, RS_FAIL); /* gen 1: period 100 + 1 */
    cr_assert_eq(spy.n, 1);
    cr_assert_eq(spy.seen[0].generation, 1);
    cr_assert_eq(spy.seen[0].reopens, 0);
    assert_counts(&spy.seen[0].counts, 0, 1, 0, 1, 0);
    cr_assert_eq(f.log.tr[0].open_for_ns, 101);
    circuit_ticket t;
    circuit_rejection rej;
    circuit_test_clock_set(T0 + 100);
    cr_assert_not(circuit_allow(f.b, NULL, &t, &rej));
    assert_rejected(rej, CIRCUIT_OPEN, 1);
    circuit_stats s;
    circuit_get_stats(f.b, &s);
    cr_assert_eq(s.retry_after_ns, 1);
    circuit_test_clock_set(T0 + 101);
    cr_assert(circuit_allow(f.b, NULL, &t, NULL), "TM2: a probe at exactly the chosen period");
    fx_free(&f);
}

static int64_t bad_open_for(void *arg, const circuit_open_info *info)
{
    (void)arg;
    (void)info;
    return 0;
}

static void trip_with_bad_period(void *arg)
{
    fx *f = arg;
    fx_call(f, RS_FAIL);
}

Test(operator, B1_a_period_of_zero_aborts)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 1;
    f.spec.open_for = bad_open_for;
    fx_build(&f);
    expect_abort(trip_with_bad_period, &f, "open_for returned 0 ns");
    fx_free(&f);
}

Test(operator, B2_reopens_count_since_the_last_close_and_reset_zeroes_them)
{
    fx f;
    period_spy spy = {.n = 0};
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 1;
    f.p.reopen_on_failure = true;
    f.p.close_run = 1;
    f.spec.open_for = spy_open_for;
    f.spec.open_for_arg = &spy;
    fx_build(&f);
    circuit_test_clock_set(T0);
    fx_call(&f, RS_FAIL); /* trip: reopens 0 */
    for (int k = 1; k <= 3; k++) {
        circuit_test_clock_advance(10000);
        fx_call(&f, RS_FAIL); /* probe fails: the k-th reopen */
        cr_assert_eq(spy.seen[k].reopens, k);
        cr_assert_eq(f.log.tr[f.log.n - 1].open_for_ns, 100 * (k + 1) + (int64_t)spy.seen[k].generation);
    }
    circuit_test_clock_advance(10000);
    fx_call(&f, RS_OK); /* probe succeeds: closed */
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    fx_call(&f, RS_FAIL); /* a trip from closed again */
    cr_assert_eq(spy.seen[4].reopens, 0);
    circuit_test_clock_advance(10000);
    fx_call(&f, RS_FAIL);
    cr_assert_eq(spy.seen[5].reopens, 1);
    cr_assert_eq(circuit_reset(f.b, NULL), 0);
    fx_call(&f, RS_FAIL);
    cr_assert_eq(spy.seen[6].reopens, 0, "reset closes: the count starts again");
    fx_free(&f);
}

/* A failing call stops right after making its trip's intent (the breaker is
 * still closed until someone finishes it). An operator's reset then must
 * not answer EALREADY from the closed word: it finishes the trip first (as
 * any call does, L1) and resets the open breaker it leaves. 0.3 before this
 * test answered EALREADY, and the breaker opened once the failing call went
 * on: the operator asked for closed and got open. */
static void *op2_trip_maker(void *arg)
{
    fx *f = arg;
    park_me_at(CIRCUIT_TP_INTENT_MADE);
    circuit_ticket t;
    cr_assert(circuit_allow(f->b, NULL, &t, NULL));
    cr_assert(circuit_done(&t, RS_FAIL), "its failure is counted by the trip");
    return NULL;
}

Test(operator, OP2_a_reset_racing_a_trips_intent_finishes_the_trip_and_closes)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 1;
    fx_build(&f);
    park_setup();
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, op2_trip_maker, &f), 0);
    park_wait(); /* the trip's intent is in the word */
    int op_ctx;
    cr_assert_eq(circuit_reset(f.b, &op_ctx), 0, "EALREADY: the pending trip was ignored");
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    park_release();
    pthread_join(th, NULL);
    circuit_test_set_hook(NULL, NULL);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED, "the reset came after the trip");
    cr_assert_eq(f.log.n, 2);
    assert_tr(&f, 0, CIRCUIT_CLOSED, CIRCUIT_OPEN, 1);
    assert_tr(&f, 1, CIRCUIT_OPEN, CIRCUIT_CLOSED, 2);
    cr_assert_eq(f.log.tr[1].cause, CIRCUIT_CAUSE_OPERATOR);
    cr_assert_eq(f.log.ctx[1], &op_ctx);
    fx_free(&f);
}

/* An operator call stopped on a half-open word (decided, before its CAS);
 * meanwhile the probe's failure reopens the breaker, and that new open
 * period ends. The call then loses its CAS and decides again: on an open
 * word whose period is over, so the time-driven open -> half-open (TIMER)
 * comes first, then the operator's transition. A call that judges the new
 * open word by the clock it read at its start, before the reopen, leaves
 * open directly and skips the timer's transition: it fails here. */
typedef struct op_call {
    fx *f;
    bool isolate;
    int rc;
} op_call;

static void *op_stopped_call(void *arg)
{
    op_call *o = arg;
    park_me_at(CIRCUIT_TP_OPERATOR_BEFORE_CAS);
    o->rc = o->isolate ? circuit_isolate(o->f->b, NULL) : circuit_reset(o->f->b, NULL);
    return NULL;
}

static void op_stale_clock_run(bool isolate)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 1;
    f.p.reopen_on_failure = true;
    fx_build(&f);
    circuit_test_clock_set(T0);
    cr_assert(fx_call(&f, RS_FAIL)); /* generation 1: open */
    circuit_test_clock_set(T0 + OPEN_FOR);
    circuit_ticket p;
    cr_assert(circuit_allow(f.b, NULL, &p, NULL)); /* generation 2: half-open, a probe */
    park_setup();
    op_call o = {&f, isolate, -1};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, op_stopped_call, &o), 0);
    park_wait(); /* decided on the half-open word */
    circuit_test_clock_set(T0 + OPEN_FOR + 10);
    cr_assert(circuit_done(&p, RS_FAIL)); /* generation 3: reopened */
    circuit_test_clock_set(T0 + 3 * OPEN_FOR); /* its period is over */
    park_release();
    pthread_join(th, NULL);
    circuit_test_set_hook(NULL, NULL);
    cr_assert_eq(o.rc, 0);
    cr_assert_eq(f.log.n, 5);
    assert_tr(&f, 2, CIRCUIT_HALF_OPEN, CIRCUIT_OPEN, 3);
    assert_tr(&f, 3, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN, 4);
    cr_assert_eq(f.log.tr[3].cause, CIRCUIT_CAUSE_TIMER);
    assert_tr(&f, 4, CIRCUIT_HALF_OPEN, isolate ? CIRCUIT_ISOLATED : CIRCUIT_CLOSED, 5);
    cr_assert_eq(f.log.tr[4].cause, CIRCUIT_CAUSE_OPERATOR);
    fx_free(&f);
}

Test(operator, OP2_a_reset_that_lost_its_cas_reads_the_clock_again)
{
    op_stale_clock_run(false);
}

Test(operator, OP1_an_isolate_that_lost_its_cas_reads_the_clock_again)
{
    op_stale_clock_run(true);
}
