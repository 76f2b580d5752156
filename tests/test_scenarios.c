/*
 * Scenarios of a breaker in front of a service (a failing service,
 * consecutive failures, a trial call after the cool-down, late results of
 * an older generation), each named after the rules it exercises.
 */
#include "helpers.h"

/* The "service": counts how often it is really called. */
typedef struct service {
    int calls;
    bool healthy;
} service;

/* One guarded call: allow, call the service, done. Returns 1 when the
 * service ran and succeeded, 0 when it ran and failed, -1 when rejected. */
static int guarded(fx *f, service *s, circuit_rejection *rej)
{
    CIRCUIT_TICKET_GUARD(t);
    if (!circuit_allow(f->b, s, &t, rej))
        return -1;
    s->calls++;
    int rc = s->healthy ? RS_OK : RS_FAIL;
    circuit_done(&t, rc);
    return rc == RS_OK ? 1 : 0;
}

Test(scenarios, S2_S3_S4_trip_after_2_failures_reject_half_open_then_close_after_2_successes)
{
    fx f;
    fx_new(&f, 8, 1, OPEN_FOR, PROBE_TO);
    service s = {0, false};
    circuit_rejection rej;
    circuit_test_clock_set(T0);
    cr_assert_eq(guarded(&f, &s, &rej), 0);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    cr_assert_eq(guarded(&f, &s, &rej), 0);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN, "2 consecutive failures did not trip");
    assert_tr(&f, 0, CIRCUIT_CLOSED, CIRCUIT_OPEN, 1);
    /* open: rejected without calling the service */
    for (int i = 0; i < 5; i++) {
        circuit_test_clock_set(T0 + i * (OPEN_FOR / 5));
        cr_assert_eq(guarded(&f, &s, &rej), -1);
        assert_rejected(rej, CIRCUIT_OPEN, OPEN_FOR - i * (OPEN_FOR / 5));
    }
    cr_assert_eq(s.calls, 2);
    /* the service comes back; after open_for, the trial calls close it */
    s.healthy = true;
    circuit_test_clock_set(T0 + OPEN_FOR);
    cr_assert_eq(guarded(&f, &s, &rej), 1);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_HALF_OPEN);
    assert_tr(&f, 1, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN, 2);
    cr_assert_eq(guarded(&f, &s, &rej), 1);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED, "2 probe successes did not close");
    assert_tr(&f, 2, CIRCUIT_HALF_OPEN, CIRCUIT_CLOSED, 3);
    assert_counts(&f.log.tr[2].counts, 2, 0, 2, 0, 0);
    cr_assert_eq(guarded(&f, &s, &rej), 1);
    cr_assert_eq(s.calls, 5);
    cr_assert_eq(f.log.n, 3);
    fx_free(&f);
}

Test(scenarios, S2_failures_that_are_not_consecutive_do_not_trip)
{
    fx f;
    fx_new(&f, 8, 1, OPEN_FOR, PROBE_TO);
    static const int outcomes[] = {RS_FAIL, RS_OK, RS_FAIL, RS_OK, RS_FAIL, RS_OK};
    for (int i = 0; i < 6; i++)
        fx_call(&f, outcomes[i]);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    assert_counts(&f.p.trip_last, 2, 3, 0, 1, 0); /* asked after the last failure (S2, 0.3) */
    circuit_counts c = fx_counts(&f);
    assert_counts(&c, 3, 3, 1, 0, 0);
    fx_free(&f);
}

Test(scenarios, S4_a_failed_trial_reopens_for_another_full_cool_down)
{
    fx f;
    fx_new(&f, 8, 1, OPEN_FOR, PROBE_TO);
    service s = {0, false};
    circuit_rejection rej;
    circuit_test_clock_set(T0);
    guarded(&f, &s, &rej);
    guarded(&f, &s, &rej);
    circuit_test_clock_set(T0 + OPEN_FOR + 5);
    cr_assert_eq(guarded(&f, &s, &rej), 0); /* the trial fails */
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    circuit_test_clock_set(T0 + OPEN_FOR + 5 + OPEN_FOR - 1);
    cr_assert_eq(guarded(&f, &s, &rej), -1);
    assert_rejected(rej, CIRCUIT_OPEN, 1);
    cr_assert_eq(s.calls, 3);
    fx_free(&f);
}

Test(scenarios, C1_C2_a_run_of_failures_longer_than_the_window)
{
    fx f;
    fx_init(&f, 3, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    fx_build(&f);
    for (int i = 0; i < 10; i++)
        fx_call(&f, RS_FAIL);
    assert_counts(&f.p.trip_last, 0, 3, 0, 10, 0);
    fx_free(&f);
}

Test(scenarios, C5_ignored_results_in_closed_and_half_open)
{
    fx f;
    fx_new(&f, 8, 1, OPEN_FOR, PROBE_TO);
    circuit_test_clock_set(T0);
    fx_call(&f, RS_FAIL);
    cr_assert(fx_call(&f, RS_IGN));
    cr_assert(fx_call(&f, RS_IGN));
    cr_assert_eq(f.p.trip_calls, 1, "trip asked for ignored results");
    fx_call(&f, RS_FAIL); /* still the 2nd consecutive failure */
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    assert_counts(&f.log.tr[0].counts, 0, 2, 0, 2, 0);
    circuit_test_clock_set(T0 + OPEN_FOR);
    circuit_ticket t, u;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    cr_assert_not(circuit_allow(f.b, NULL, &u, NULL));
    cr_assert(circuit_done(&t, RS_IGN));
    cr_assert_eq(f.p.probe_calls, 0, "probe asked for an ignored result");
    cr_assert(circuit_allow(f.b, NULL, &u, NULL), "the ignored probe's slot was not freed");
    cr_assert(circuit_done(&u, RS_OK));
    assert_counts(&f.p.probe_last, 1, 0, 1, 0, 0);
    fx_free(&f);
}

Test(scenarios, T2_a_late_closed_result_after_opening_counts_nowhere)
{
    fx f;
    fx_new(&f, 8, 1, OPEN_FOR, PROBE_TO);
    circuit_test_clock_set(T0);
    circuit_ticket slow;
    cr_assert(circuit_allow(f.b, NULL, &slow, NULL)); /* a slow call, admitted while closed */
    fx_call(&f, RS_FAIL);
    fx_call(&f, RS_FAIL);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    int64_t trips = f.p.trip_calls;
    cr_assert_not(circuit_done(&slow, RS_FAIL), "a late result reported as counted");
    cr_assert_eq(f.p.trip_calls, trips);
    cr_assert_eq(f.log.n, 1);
    /* the new states' counts do not have it either */
    circuit_test_clock_set(T0 + OPEN_FOR);
    fx_call(&f, RS_OK);
    assert_counts(&f.p.probe_last, 1, 0, 1, 0, 0);
    fx_free(&f);
}

Test(scenarios, P2_a_probe_that_times_out_and_then_succeeds_still_counts)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.close_run = 1;
    fx_build(&f);
    fx_half_open_due(&f);
    circuit_ticket t;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    circuit_test_clock_advance(PROBE_TO + 50); /* slow: past its timeout */
    cr_assert(circuit_done(&t, RS_OK), "the state had not changed: the result must count");
    cr_assert_eq(f.p.probe_calls, 2);
    assert_counts(&f.p.probe_seen[0], 0, 0, 0, 0, 1);
    assert_counts(&f.p.probe_seen[1], 1, 0, 1, 0, 1);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    fx_free(&f);
}

Test(scenarios, T6_a_stale_ticket_whose_slot_was_reused_frees_nothing)
{
    fx f;
    fx_init(&f, 8, 2, OPEN_FOR, PROBE_TO);
    f.p.probe_forced = CIRCUIT_HALF_OPEN;
    fx_build(&f);
    fx_half_open_due(&f);
    circuit_ticket a, b, c, x;
    circuit_rejection rej;
    cr_assert(circuit_allow(f.b, NULL, &a, NULL)); /* slot 0 */
    circuit_test_clock_advance(10);
    cr_assert(circuit_allow(f.b, NULL, &b, NULL)); /* slot 1 */
    circuit_test_clock_advance(PROBE_TO - 10);
    cr_assert(circuit_allow(f.b, NULL, &c, NULL)); /* a timed out: c reuses slot 0 */
    cr_assert_not(circuit_allow(f.b, NULL, &x, &rej));
    assert_rejected(rej, CIRCUIT_HALF_OPEN, 0);
    circuit_release(&a); /* stale */
    cr_assert_not(circuit_allow(f.b, NULL, &x, &rej), "the stale release freed c's slot");
    cr_assert(circuit_done(&b, RS_OK)); /* b's own slot */
    cr_assert(circuit_allow(f.b, NULL, &x, NULL));
    circuit_ticket y;
    cr_assert_not(circuit_allow(f.b, NULL, &y, &rej));
    circuit_release(&c);
    circuit_release(&x);
    fx_free(&f);
}
