/*
 * S1-S5: the closed, open and half-open states and the moves between
 * them (the isolated state of OP1-OP3 is tested in test_operator.c).
 */
#include "helpers.h"

/* ---- S1 ---------------------------------------------------------------------- */

Test(states, S1_new_breaker_is_closed_and_delivers_nothing)
{
    fx f;
    fx_new(&f, 4, 1, OPEN_FOR, PROBE_TO);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    cr_assert_eq(f.log.n, 0);
    cr_assert_eq(circuit_test_pending(f.b), 0);
    /* nothing is delivered for the creation, not even by the first calls */
    circuit_ticket t;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    cr_assert_eq(f.log.n, 0);
    cr_assert(circuit_done(&t, RS_OK));
    cr_assert_eq(f.log.n, 0);
    /* the first transition ever is generation 1, from closed */
    fx_call(&f, RS_FAIL);
    fx_call(&f, RS_FAIL);
    cr_assert_eq(f.log.n, 1);
    assert_tr(&f, 0, CIRCUIT_CLOSED, CIRCUIT_OPEN, 1);
    fx_free(&f);
}

/* ---- S2 ---------------------------------------------------------------------- */

Test(states, S2_closed_admits_every_call_and_asks_trip_after_each_failure)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0; /* never trips */
    fx_build(&f);
    /* S F F S F F ...: trip is asked after each failure and never after a
     * success, whatever the window holds (S2) */
    long failures = 0;
    for (int i = 0; i < 1000; i++) {
        circuit_ticket t;
        circuit_rejection rej;
        cr_assert(circuit_allow(f.b, NULL, &t, &rej), "call %d rejected", i);
        cr_assert(circuit_done(&t, i % 3 == 0 ? RS_OK : RS_FAIL));
        failures += i % 3 != 0;
        cr_assert_eq(f.p.trip_calls, failures, "trip asked %lld times after result %d",
                     (long long)f.p.trip_calls, i);
    }
    cr_assert_eq(f.p.probe_calls, 0);
    cr_assert_eq(f.log.n, 0);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    fx_free(&f);
}

Test(states, S2_trip_true_opens_on_the_result_it_was_asked_for)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 3;
    fx_build(&f);
    /* a success asks nothing (S2) */
    cr_assert(fx_call(&f, RS_OK));
    cr_assert_eq(f.p.trip_calls, 0);
    fx_call(&f, RS_FAIL);
    fx_call(&f, RS_FAIL);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    cr_assert_eq(f.log.n, 0);
    fx_call(&f, RS_FAIL);
    cr_assert_eq(f.p.trip_calls, 3);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    cr_assert_eq(f.log.n, 1);
    assert_tr(&f, 0, CIRCUIT_CLOSED, CIRCUIT_OPEN, 1);
    assert_counts(&f.log.tr[0].counts, 1, 3, 0, 3, 0);
    circuit_ticket t;
    cr_assert_not(circuit_allow(f.b, NULL, &t, NULL));
    fx_free(&f);
}

/* ---- S3 ---------------------------------------------------------------------- */

Test(states, S3_open_rejects_until_open_for)
{
    fx f;
    fx_new(&f, 4, 1, OPEN_FOR, PROBE_TO);
    circuit_test_clock_set(T0);
    fx_open(&f);
    int64_t offsets[] = {0, 1, 2, OPEN_FOR / 2, OPEN_FOR - 2, OPEN_FOR - 1};
    for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++) {
        circuit_test_clock_set(T0 + offsets[i]);
        circuit_ticket t;
        circuit_rejection rej = {0, -1};
        cr_assert_not(circuit_allow(f.b, NULL, &t, &rej), "admitted at +%lld", (long long)offsets[i]);
        assert_rejected(rej, CIRCUIT_OPEN, OPEN_FOR - offsets[i]);
        cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    }
    cr_assert_eq(f.log.n, 1);
    /* rej may be NULL */
    circuit_ticket t;
    cr_assert_not(circuit_allow(f.b, NULL, &t, NULL));
    /* exactly at opened_at + open_for: half-open, and this call is the probe */
    circuit_test_clock_set(T0 + OPEN_FOR);
    int ctx;
    cr_assert(circuit_allow(f.b, &ctx, &t, NULL));
    cr_assert_eq(f.log.n, 2, "open -> half-open not delivered before allow returned");
    assert_tr(&f, 1, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN, 2);
    assert_counts(&f.log.tr[1].counts, 0, 0, 0, 0, 0);
    cr_assert_eq(f.log.ctx[1], &ctx);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_HALF_OPEN);
    /* it is a probe: it holds the only slot */
    circuit_ticket u;
    circuit_rejection rej;
    cr_assert_not(circuit_allow(f.b, NULL, &u, &rej));
    assert_rejected(rej, CIRCUIT_HALF_OPEN, 0);
    cr_assert(circuit_done(&t, RS_OK));
    cr_assert_eq(f.p.probe_calls, 1);
    fx_free(&f);
}

Test(states, S3_open_period_starts_when_the_tripping_result_is_counted)
{
    fx f;
    fx_init(&f, 4, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 1;
    fx_build(&f);
    circuit_test_clock_set(T0);
    circuit_ticket t;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    circuit_test_clock_set(T0 + 300); /* the call took 300 ns */
    cr_assert(circuit_done(&t, RS_FAIL));
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    circuit_rejection rej;
    circuit_test_clock_set(T0 + 300 + OPEN_FOR - 1);
    cr_assert_not(circuit_allow(f.b, NULL, &t, &rej));
    assert_rejected(rej, CIRCUIT_OPEN, 1);
    circuit_test_clock_set(T0 + 300 + OPEN_FOR);
    cr_assert(circuit_allow(f.b, NULL, &t, &rej));
    circuit_release(&t);
    fx_free(&f);
}

Test(states, S3_only_one_call_makes_the_half_open_transition)
{
    fx f;
    fx_new(&f, 4, 3, OPEN_FOR, PROBE_TO);
    circuit_test_clock_set(T0);
    fx_open(&f);
    circuit_test_clock_set(T0 + OPEN_FOR + 12345); /* long after: still one transition */
    circuit_ticket t[3];
    for (int i = 0; i < 3; i++)
        cr_assert(circuit_allow(f.b, NULL, &t[i], NULL));
    cr_assert_eq(f.log.n, 2);
    assert_tr(&f, 1, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN, 2);
    for (int i = 0; i < 3; i++)
        circuit_release(&t[i]);
    fx_free(&f);
}

typedef struct s3_opener {
    fx *f;
    circuit_ticket t;
    circuit_rejection rej;
    bool admitted;
} s3_opener;

static void *s3_opener_thread(void *arg)
{
    s3_opener *o = arg;
    park_me_at(CIRCUIT_TP_AFTER_PUBLISH);
    o->admitted = circuit_allow(o->f->b, (void *)0x53, &o->t, &o->rej);
    return NULL;
}

/* The allow that makes open -> half-open is admitted, as the first probe,
 * in the same atomic step as the transition (its probe slot was reserved
 * before the CAS that made the state): stopped right after that CAS, while
 * the operator isolates the breaker, it is still admitted, in the
 * half-open generation it made, and its result is then late (T6). */
Test(states, S3_the_call_that_makes_half_open_is_admitted_even_if_isolated_at_once)
{
    fx f;
    fx_new(&f, 4, 1, OPEN_FOR, PROBE_TO);
    fx_half_open_due(&f); /* generation 1: open, its period over */
    park_setup();
    s3_opener o = {&f, CIRCUIT_TICKET_INIT, {0, 0}, false};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, s3_opener_thread, &o), 0);
    park_wait(); /* generation 2 made by the opener, not yet returned */
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_HALF_OPEN);
    circuit_ticket other;
    circuit_rejection rej;
    cr_assert_not(circuit_allow(f.b, NULL, &other, &rej), "probes = 1: the slot is the opener's");
    assert_rejected(rej, CIRCUIT_HALF_OPEN, 0);
    cr_assert_eq(circuit_isolate(f.b, NULL), 0); /* generation 3 */
    park_release();
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_assert(o.admitted, "the call that made half-open was rejected with %s",
              circuit_state_name(o.rej.state));
    assert_tr(&f, 1, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN, 2);
    assert_tr(&f, 2, CIRCUIT_HALF_OPEN, CIRCUIT_ISOLATED, 3);
    cr_assert_not(circuit_done(&o.t, RS_OK), "its result belongs to generation 2: late");
    circuit_stats s;
    circuit_get_stats(f.b, &s);
    cr_assert_eq(s.probes_in_flight, 0);
    cr_assert_eq(s.late, 1);
    fx_free(&f);
}

/* ---- S4 ---------------------------------------------------------------------- */

static void to_half_open(fx *f)
{
    circuit_test_clock_set(T0);
    fx_open(f);
    circuit_test_clock_set(T0 + OPEN_FOR);
}

Test(states, S4_half_open_admits_at_most_probes_in_flight)
{
    fx f;
    fx_init(&f, 8, 3, OPEN_FOR, PROBE_TO);
    f.p.close_run = 0;
    f.p.reopen_on_failure = false; /* keep probing */
    fx_build(&f);
    to_half_open(&f);
    circuit_ticket t[3], extra;
    circuit_rejection rej;
    for (int i = 0; i < 3; i++)
        cr_assert(circuit_allow(f.b, NULL, &t[i], &rej), "probe %d", i);
    for (int k = 0; k < 5; k++) {
        rej = (circuit_rejection){0, -1};
        cr_assert_not(circuit_allow(f.b, NULL, &extra, &rej));
        assert_rejected(rej, CIRCUIT_HALF_OPEN, 0);
    }
    /* each settled probe frees exactly one slot */
    cr_assert(circuit_done(&t[1], RS_OK));
    cr_assert(circuit_allow(f.b, NULL, &t[1], &rej));
    cr_assert_not(circuit_allow(f.b, NULL, &extra, &rej));
    cr_assert(circuit_done(&t[0], RS_FAIL));
    circuit_release(&t[2]);
    cr_assert(circuit_allow(f.b, NULL, &t[0], &rej));
    cr_assert(circuit_allow(f.b, NULL, &t[2], &rej));
    cr_assert_not(circuit_allow(f.b, NULL, &extra, &rej));
    assert_rejected(rej, CIRCUIT_HALF_OPEN, 0);
    cr_assert_eq(f.p.probe_calls, 2);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_HALF_OPEN);
    for (int i = 0; i < 3; i++)
        circuit_release(&t[i]);
    fx_free(&f);
}

Test(states, S4_probe_policy_closed_closes)
{
    fx f;
    fx_init(&f, 8, 2, OPEN_FOR, PROBE_TO);
    f.p.close_run = 2;
    fx_build(&f);
    to_half_open(&f);
    circuit_ticket a, b2;
    cr_assert(circuit_allow(f.b, NULL, &a, NULL));
    cr_assert(circuit_allow(f.b, NULL, &b2, NULL));
    cr_assert(circuit_done(&a, RS_OK));
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_HALF_OPEN);
    cr_assert(circuit_done(&b2, RS_OK));
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    cr_assert_eq(f.p.probe_calls, 2);
    assert_counts(&f.p.probe_seen[0], 1, 0, 1, 0, 0);
    assert_counts(&f.p.probe_seen[1], 2, 0, 2, 0, 0);
    cr_assert_eq(f.log.n, 3);
    assert_tr(&f, 2, CIRCUIT_HALF_OPEN, CIRCUIT_CLOSED, 3);
    assert_counts(&f.log.tr[2].counts, 2, 0, 2, 0, 0);
    /* closed again, with zero counts: admits everything and counts it */
    int64_t trips = f.p.trip_calls;
    for (int i = 0; i < 10; i++)
        fx_call(&f, RS_OK);
    cr_assert_eq(f.p.trip_calls, trips, "trip asked for a success into a healthy window");
    assert_counts(&f.seen[f.nseen - 1], 8, 0, 10, 0, 0);
    fx_free(&f);
}

Test(states, S4_probe_policy_open_reopens_for_a_fresh_period_from_the_result)
{
    fx f;
    fx_new(&f, 8, 1, OPEN_FOR, PROBE_TO);
    to_half_open(&f);
    circuit_ticket t;
    circuit_rejection rej;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    int64_t counted_at = T0 + OPEN_FOR + 100;
    circuit_test_clock_set(counted_at);
    cr_assert(circuit_done(&t, RS_FAIL));
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    cr_assert_eq(f.log.n, 3);
    assert_tr(&f, 2, CIRCUIT_HALF_OPEN, CIRCUIT_OPEN, 3);
    assert_counts(&f.log.tr[2].counts, 0, 1, 0, 1, 0);
    circuit_test_clock_set(counted_at + 150);
    cr_assert_not(circuit_allow(f.b, NULL, &t, &rej));
    assert_rejected(rej, CIRCUIT_OPEN, OPEN_FOR - 150);
    circuit_test_clock_set(counted_at + OPEN_FOR - 1);
    cr_assert_not(circuit_allow(f.b, NULL, &t, &rej));
    assert_rejected(rej, CIRCUIT_OPEN, 1);
    circuit_test_clock_set(counted_at + OPEN_FOR);
    cr_assert(circuit_allow(f.b, NULL, &t, &rej));
    assert_tr(&f, 3, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN, 4);
    circuit_release(&t);
    fx_free(&f);
}

Test(states, S4_probe_policy_half_open_keeps_probing)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.probe_forced = CIRCUIT_HALF_OPEN;
    fx_build(&f);
    to_half_open(&f);
    for (int i = 0; i < 20; i++)
        cr_assert(fx_call(&f, i % 2 ? RS_OK : RS_FAIL));
    cr_assert_eq(f.p.probe_calls, 20);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_HALF_OPEN);
    cr_assert_eq(f.log.n, 2);
    /* the counts keep growing within this half-open state */
    assert_counts(&f.p.probe_seen[19], 4, 4, 1, 0, 0);
    fx_free(&f);
}

static fx s4_fx;

static void s4_invalid_answer(void *arg)
{
    (void)arg;
    fx_init(&s4_fx, 8, 1, OPEN_FOR, PROBE_TO);
    fx_build(&s4_fx);
    to_half_open(&s4_fx);
    circuit_ticket t;
    cr_assert(circuit_allow(s4_fx.b, NULL, &t, NULL));
    s4_fx.p.probe_forced = 42; /* not a circuit_state */
    circuit_done(&t, RS_OK);
}

static void s4_invalid_answer_on_timeout(void *arg)
{
    (void)arg;
    fx_init(&s4_fx, 8, 1, OPEN_FOR, PROBE_TO);
    fx_build(&s4_fx);
    to_half_open(&s4_fx);
    circuit_ticket t;
    cr_assert(circuit_allow(s4_fx.b, NULL, &t, NULL));
    s4_fx.p.probe_forced = PROBE_ANSWER_ZERO; /* zero is not a state either */
    circuit_test_clock_advance(PROBE_TO);
    circuit_ticket u;
    circuit_allow(s4_fx.b, NULL, &u, NULL);
}

Test(states, S4_invalid_probe_answer_aborts, .signal = SIGABRT)
{
    expect_abort(s4_invalid_answer, NULL, "probe policy returned an invalid state");
    expect_abort(s4_invalid_answer_on_timeout, NULL, "probe policy returned an invalid state");
    s4_invalid_answer(NULL);
}

/* ---- S5 ---------------------------------------------------------------------- */

Test(states, S5_get_state_is_a_pure_read)
{
    fx f;
    fx_new(&f, 8, 1, OPEN_FOR, PROBE_TO);
    circuit_test_clock_set(T0);
    fx_open(&f);
    int64_t trips = f.p.trip_calls, classified = f.c.calls;
    circuit_test_clock_set(T0 + OPEN_FOR - 1);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    circuit_test_clock_set(T0 + OPEN_FOR);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(circuit_get_state(f.b), CIRCUIT_HALF_OPEN, "not half-open once open_for passed");
    /* it made no transition and asked nobody */
    cr_assert_eq(f.log.n, 1);
    cr_assert_eq(circuit_test_pending(f.b), 0);
    cr_assert_eq(f.p.trip_calls, trips);
    cr_assert_eq(f.p.probe_calls, 0);
    cr_assert_eq(f.c.calls, classified);
    /* the transition is still made by the next allow, with its call_ctx */
    int ctx;
    circuit_ticket t;
    cr_assert(circuit_allow(f.b, &ctx, &t, NULL));
    cr_assert_eq(f.log.n, 2);
    assert_tr(&f, 1, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN, 2);
    cr_assert_eq(f.log.ctx[1], &ctx);
    /* a due probe timeout is not processed by get_state either */
    circuit_test_clock_advance(PROBE_TO + 10);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_HALF_OPEN);
    cr_assert_eq(f.p.probe_calls, 0);
    circuit_ticket u;
    circuit_rejection rej;
    f.p.probe_forced = CIRCUIT_HALF_OPEN;
    cr_assert(circuit_allow(f.b, NULL, &u, &rej)); /* times t out, then admits u */
    cr_assert_eq(f.p.probe_calls, 1);
    assert_counts(&f.p.probe_seen[0], 0, 0, 0, 0, 1);
    circuit_release(&u);
    circuit_release(&t);
    fx_free(&f);
}

static void s5_observe(fx *f, void *call_ctx, const circuit_transition *t)
{
    (void)call_ctx;
    /* safe inside observe: reports the state now, changes nothing */
    circuit_state *seen = (circuit_state *)f->user;
    seen[t->generation] = circuit_get_state(f->b);
}

Test(states, S5_get_state_is_safe_inside_observe)
{
    fx f;
    circuit_state seen[8] = {0};
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.user = seen;
    f.log.extra = s5_observe;
    fx_build(&f);
    circuit_test_clock_set(T0);
    fx_open(&f);
    circuit_test_clock_set(T0 + OPEN_FOR);
    fx_call(&f, RS_OK);
    fx_call(&f, RS_OK);
    cr_assert_eq(f.log.n, 3);
    cr_assert_eq(seen[1], CIRCUIT_OPEN);
    cr_assert_eq(seen[2], CIRCUIT_HALF_OPEN);
    cr_assert_eq(seen[3], CIRCUIT_CLOSED);
    fx_free(&f);
}

Test(states, S5_names_of_states_and_outcomes)
{
    cr_assert_str_eq(circuit_state_name(CIRCUIT_CLOSED), "closed");
    cr_assert_str_eq(circuit_state_name(CIRCUIT_OPEN), "open");
    cr_assert_str_eq(circuit_state_name(CIRCUIT_HALF_OPEN), "half-open");
    cr_assert_str_eq(circuit_state_name((circuit_state)0), "invalid");
    cr_assert_str_eq(circuit_state_name(CIRCUIT_ISOLATED), "isolated");
    cr_assert_str_eq(circuit_state_name((circuit_state)5), "invalid");
    cr_assert_str_eq(circuit_outcome_name(CIRCUIT_SUCCESS), "success");
    cr_assert_str_eq(circuit_outcome_name(CIRCUIT_FAILURE), "failure");
    cr_assert_str_eq(circuit_outcome_name(CIRCUIT_IGNORED), "ignored");
    cr_assert_str_eq(circuit_outcome_name((circuit_outcome)0), "invalid");
    cr_assert_str_eq(circuit_outcome_name((circuit_outcome)-1), "invalid");
}

Test(states, S3_rejection_format)
{
    char buf[128];
    circuit_rejection r = {CIRCUIT_OPEN, INT64_C(1500000000)};
    int n = circuit_rejection_format(&r, buf, sizeof buf);
    cr_assert_str_eq(buf, "circuit open: retry after 1.500000000 s");
    cr_assert_eq(n, (int)strlen(buf));
    r = (circuit_rejection){CIRCUIT_OPEN, 1};
    circuit_rejection_format(&r, buf, sizeof buf);
    cr_assert_str_eq(buf, "circuit open: retry after 0.000000001 s");
    r = (circuit_rejection){CIRCUIT_HALF_OPEN, 0};
    n = circuit_rejection_format(&r, buf, sizeof buf);
    cr_assert_str_eq(buf, "circuit half-open: every probe slot is taken");
    /* snprintf-like: the full length, truncated output, nothing for len 0 */
    char small[8];
    memset(small, '#', sizeof small);
    cr_assert_eq(circuit_rejection_format(&r, small, 5), n);
    cr_assert_eq(memcmp(small, "circu", 4), 0);
    cr_assert_eq(small[4], '\0');
    cr_assert_eq(small[5], '#');
    cr_assert_eq(circuit_rejection_format(&r, NULL, 0), n);
    errno = 0;
    cr_assert_eq(circuit_rejection_format(NULL, buf, sizeof buf), -1);
    cr_assert_eq(errno, EINVAL);
    r = (circuit_rejection){CIRCUIT_CLOSED, 0};
    errno = 0;
    cr_assert_eq(circuit_rejection_format(&r, buf, sizeof buf), -1);
    cr_assert_eq(errno, EINVAL);
}

/* ==== a reopen after a lost CAS (S4) ====================================== */

/* ---- a probe's reopen after a lost CAS ------------------------------------ */

/* Two probes in half-open. P1's failure reads the clock (T0 + OPEN_FOR),
 * decides to reopen and stops before its CAS; the clock moves 5 open
 * periods on and P2's success is counted (keep probing). P1 then loses its
 * CAS, counts after P2 and reopens: its open period must start when it is
 * counted, now (S4), so an allow at the same instant is refused with the
 * whole period left. A reopen dated at P1's stale clock read would have its
 * period already over, and the allow would be admitted as a probe. */
typedef struct probe_done {
    circuit_ticket t;
    int result;
    bool counted;
} probe_done;

static void *stopped_probe_done(void *arg)
{
    probe_done *d = arg;
    park_me_at(CIRCUIT_TP_DONE_BEFORE_CAS);
    d->counted = circuit_done(&d->t, d->result);
    return NULL;
}

Test(states, S4_a_reopen_after_a_lost_cas_starts_its_open_period_when_it_is_counted)
{
    fx f;
    fx_init(&f, 4, 2, OPEN_FOR, 1000 * OPEN_FOR);
    f.p.trip_run = 1;
    f.p.reopen_on_failure = true;
    fx_build(&f);
    circuit_test_clock_set(T0);
    cr_assert(fx_call(&f, RS_FAIL)); /* generation 1: open */
    circuit_test_clock_set(T0 + OPEN_FOR);
    probe_done p1 = {CIRCUIT_TICKET_INIT, RS_FAIL, false};
    circuit_ticket p2;
    cr_assert(circuit_allow(f.b, NULL, &p1.t, NULL)); /* generation 2: half-open */
    cr_assert(circuit_allow(f.b, NULL, &p2, NULL));
    park_setup();
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, stopped_probe_done, &p1), 0);
    park_wait(); /* P1 decided to reopen, before its CAS */
    int64_t later = T0 + 6 * OPEN_FOR;
    circuit_test_clock_set(later);
    cr_assert(circuit_done(&p2, RS_OK)); /* counted first: keep probing */
    park_release();
    pthread_join(th, NULL);
    circuit_test_set_hook(NULL, NULL);
    cr_assert(p1.counted);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN, "the reopen's period is already over");
    circuit_ticket q;
    circuit_rejection rej;
    cr_assert_not(circuit_allow(f.b, NULL, &q, &rej), "admitted as a probe at the reopen's instant");
    cr_assert_eq(rej.state, CIRCUIT_OPEN);
    cr_assert_eq(rej.retry_after_ns, OPEN_FOR);
    assert_tr(&f, 2, CIRCUIT_HALF_OPEN, CIRCUIT_OPEN, 3);
    fx_free(&f);
}
