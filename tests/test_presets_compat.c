/*
 * docs/MIGRATION.md ("Coming from another breaker"), the 0.2 rows: live stats, operator
 * control and open-period backoff, as gobreaker, resilience4j, Polly and
 * opossum users know them. One test per table row, named after it, each
 * driven through a real breaker on the test clock (TM3). The 0.1 rows
 * are in tests/test_compat.c.
 */
#include "helpers.h"

#include "circuit_presets.h"
#include "circuit_prometheus.h"

static void setup(void)
{
    circuit_test_clock_use_real(false);
    circuit_test_clock_set(T0);
}

TestSuite(compat02, .init = setup);

/* A breaker with the consecutive preset (failures, successes) and the spy
 * observe of helpers.h (every transition logged in f->log). */
static void consecutive_fx(fx *f, circuit_consecutive *pc, int64_t failures, int64_t successes,
                           int window, int probes, int64_t open_for)
{
    cr_assert_eq(circuit_consecutive_init(pc, failures, successes, NULL, 0), 0);
    fx_init(f, window, probes, open_for, PROBE_TO);
    f->spec.policy = circuit_consecutive_policy(pc);
    fx_build(f);
}

static circuit_stats stats_of(const fx *f)
{
    circuit_stats s;
    memset(&s, 0xa5, sizeof s);
    circuit_get_stats(f->b, &s);
    return s;
}

static circuit_rejection rejected(fx *f)
{
    circuit_ticket t;
    circuit_rejection rej;
    cr_assert(!circuit_allow(f->b, NULL, &t, &rej), "expected a rejection");
    return rej;
}

static const circuit_transition *last_tr(const fx *f)
{
    cr_assert_gt(f->log.n, 0, "no transition delivered");
    return &f->log.tr[f->log.n - 1];
}

/* ---- gobreaker ----------------------------------------------------------------- */

Test(compat02, gobreaker_counts_is_get_stats)
{
    circuit_consecutive pc;
    fx f;
    consecutive_fx(&f, &pc, 3, 1, 10, 1, OPEN_FOR);
    fx_call(&f, RS_OK);
    fx_call(&f, RS_FAIL);
    fx_call(&f, RS_OK);
    fx_call(&f, RS_FAIL);
    circuit_ticket in_flight;
    cr_assert(circuit_allow(f.b, NULL, &in_flight, NULL));

    circuit_stats s = stats_of(&f);
    cr_assert_eq(s.state, CIRCUIT_CLOSED);
    cr_assert_eq(s.generation, 0);
    /* Counts(): TotalSuccesses, TotalFailures, ConsecutiveSuccesses/Failures */
    assert_counts(&s.counts, 2, 2, 0, 1, 0);
    /* Requests: calls admitted, in flight included; here from the totals */
    cr_assert_eq(s.admitted, 5);
    uint64_t in_flight_now = s.admitted - s.successes - s.failures - s.ignored - s.late -
                             s.released;
    cr_assert_eq(in_flight_now, 1, "admitted = results + late + released + live (M1)");
    circuit_done(&in_flight, RS_OK);
    fx_free(&f);
}

/* ---- resilience4j -------------------------------------------------------------- */

Test(compat02, resilience4j_forced_open_is_isolate)
{
    circuit_consecutive pc;
    fx f;
    consecutive_fx(&f, &pc, 2, 1, 10, 1, OPEN_FOR);
    cr_assert_eq(circuit_isolate(f.b, NULL), 0);
    const circuit_transition *t = last_tr(&f);
    cr_assert_eq(t->from, CIRCUIT_CLOSED);
    cr_assert_eq(t->to, CIRCUIT_ISOLATED);
    cr_assert_eq(t->cause, CIRCUIT_CAUSE_OPERATOR);

    /* Every call is rejected, and no timer ends it. */
    for (int i = 0; i < 5; i++) {
        circuit_rejection rej = rejected(&f);
        assert_rejected(rej, CIRCUIT_ISOLATED, 0);
        cr_assert_eq(circuit_retry_after_s(&rej), 0, "no Retry-After while isolated");
        circuit_test_clock_advance(100 * OPEN_FOR);
    }
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_ISOLATED);
    cr_assert_eq(circuit_isolate(f.b, NULL), EALREADY);

    /* Only an operator ends it. */
    cr_assert_eq(circuit_reset(f.b, NULL), 0);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    fx_call(&f, RS_OK);
    fx_free(&f);
}

Test(compat02, resilience4j_reset_is_circuit_reset_closed_is_ealready)
{
    circuit_consecutive pc;
    fx f;
    consecutive_fx(&f, &pc, 2, 1, 10, 1, OPEN_FOR);
    fx_call(&f, RS_FAIL);
    fx_call(&f, RS_FAIL); /* trips */
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);

    cr_assert_eq(circuit_reset(f.b, NULL), 0);
    const circuit_transition *t = last_tr(&f);
    cr_assert_eq(t->from, CIRCUIT_OPEN);
    cr_assert_eq(t->to, CIRCUIT_CLOSED);
    cr_assert_eq(t->cause, CIRCUIT_CAUSE_OPERATOR);
    circuit_stats s = stats_of(&f);
    assert_counts(&s.counts, 0, 0, 0, 0, 0);

    /* resilience4j's reset() also clears a closed breaker's metrics;
     * circuit_reset on a closed breaker changes nothing. */
    fx_call(&f, RS_FAIL);
    int64_t before = f.log.n;
    cr_assert_eq(circuit_reset(f.b, NULL), EALREADY);
    cr_assert_eq(f.log.n, before, "no transition");
    s = stats_of(&f);
    assert_counts(&s.counts, 0, 1, 0, 1, 0);
    fx_free(&f);
}

Test(compat02, resilience4j_interval_function_exponential_is_the_backoff_preset)
{
    /* IntervalFunction.ofExponentialBackoff(1 s, 2.0) capped at 8 s, no
     * randomization: 1, 2, 4, 8, 8 s, the attempt counted since the last
     * close. */
    circuit_backoff_exponential bo;
    cr_assert_eq(circuit_backoff_exponential_init(&bo, CIRCUIT_S(1), CIRCUIT_S(8), 0.0, 0, NULL,
                                                  0),
                 0);
    circuit_consecutive pc;
    cr_assert_eq(circuit_consecutive_init(&pc, 1, 1, NULL, 0), 0);
    fx f;
    fx_init(&f, 10, 1, CIRCUIT_S(60), CIRCUIT_S(60));
    f.spec.policy = circuit_consecutive_policy(&pc);
    circuit_backoff_exponential_use(&f.spec, &bo);
    fx_build(&f);

    fx_call(&f, RS_FAIL); /* trips */
    const int64_t want[] = {CIRCUIT_S(1), CIRCUIT_S(2), CIRCUIT_S(4), CIRCUIT_S(8),
                            CIRCUIT_S(8)};
    for (size_t i = 0; i < 5; i++) {
        cr_assert_eq(last_tr(&f)->open_for_ns, want[i], "open period %zu", i);
        assert_rejected(rejected(&f), CIRCUIT_OPEN, want[i]);
        circuit_test_clock_advance(want[i]);
        if (i < 4)
            fx_call(&f, RS_FAIL); /* the probe fails: reopen */
    }
    /* A probe that succeeds closes; the next trip starts again at 1 s. */
    fx_call(&f, RS_OK);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    fx_call(&f, RS_FAIL);
    cr_assert_eq(last_tr(&f)->open_for_ns, CIRCUIT_S(1));
    fx_free(&f);
}

/* ---- Polly ----------------------------------------------------------------------- */

Test(compat02, polly_isolate_is_circuit_isolate)
{
    circuit_consecutive pc;
    fx f;
    consecutive_fx(&f, &pc, 1, 2, 10, 1, OPEN_FOR);
    fx_call(&f, RS_FAIL); /* trips */
    circuit_test_clock_advance(OPEN_FOR);
    circuit_ticket probe;
    cr_assert(circuit_allow(f.b, NULL, &probe, NULL), "the first probe");
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_HALF_OPEN);

    /* ManualControl.IsolateAsync(): from any state, held until CloseAsync */
    cr_assert_eq(circuit_isolate(f.b, NULL), 0);
    cr_assert_eq(last_tr(&f)->from, CIRCUIT_HALF_OPEN);
    /* StateProvider.CircuitState == Isolated */
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_ISOLATED);
    cr_assert_eq(stats_of(&f).state, CIRCUIT_ISOLATED);
    /* IsolatedCircuitException: a rejection that says so */
    circuit_rejection rej = rejected(&f);
    char text[128];
    circuit_rejection_format(&rej, text, sizeof text);
    cr_assert_str_eq(text, "circuit isolated by an operator: no retry time is known");
    /* the probe admitted before is late: it can neither close nor reopen */
    cr_assert(!circuit_done(&probe, RS_OK));
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_ISOLATED);
    fx_free(&f);
}

Test(compat02, polly_close_is_circuit_reset)
{
    circuit_consecutive pc;
    fx f;
    consecutive_fx(&f, &pc, 3, 1, 10, 1, OPEN_FOR);
    fx_call(&f, RS_FAIL);
    fx_call(&f, RS_FAIL);
    cr_assert_eq(circuit_isolate(f.b, NULL), 0);
    /* ManualControl.CloseAsync(): closes and resets the statistics */
    cr_assert_eq(circuit_reset(f.b, NULL), 0);
    cr_assert_eq(last_tr(&f)->from, CIRCUIT_ISOLATED);
    cr_assert_eq(last_tr(&f)->to, CIRCUIT_CLOSED);
    circuit_stats s = stats_of(&f);
    assert_counts(&s.counts, 0, 0, 0, 0, 0);
    /* the two failures before the isolation no longer count: three more trip */
    fx_call(&f, RS_FAIL);
    fx_call(&f, RS_FAIL);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    fx_call(&f, RS_FAIL);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    fx_free(&f);
}

/* BreakDurationGenerator(args) with args.HalfOpenAttempts and
 * args.FailureCount: (attempts + 1) * 100 ms, plus 1 ms per failure. */
static int64_t polly_like_generator(void *arg, const circuit_open_info *info)
{
    (void)arg;
    return (info->reopens + 1) * CIRCUIT_MS(100) + info->counts.failures * CIRCUIT_MS(1);
}

Test(compat02, polly_break_duration_generator_is_open_for)
{
    circuit_consecutive pc;
    fx f;
    cr_assert_eq(circuit_consecutive_init(&pc, 3, 1, NULL, 0), 0);
    fx_init(&f, 10, 1, CIRCUIT_S(30), CIRCUIT_S(30));
    f.spec.policy = circuit_consecutive_policy(&pc);
    f.spec.open_for = polly_like_generator;
    fx_build(&f);

    for (int i = 0; i < 3; i++)
        fx_call(&f, RS_FAIL); /* trips with 3 failures in the window */
    int64_t want = CIRCUIT_MS(100) + CIRCUIT_MS(3);
    cr_assert_eq(last_tr(&f)->open_for_ns, want);
    assert_rejected(rejected(&f), CIRCUIT_OPEN, want);

    circuit_test_clock_advance(want);
    fx_call(&f, RS_FAIL); /* probe fails: first reopen, 1 failure in half-open */
    want = 2 * CIRCUIT_MS(100) + CIRCUIT_MS(1);
    cr_assert_eq(last_tr(&f)->open_for_ns, want);
    assert_rejected(rejected(&f), CIRCUIT_OPEN, want);
    fx_free(&f);
}

/* ---- opossum ------------------------------------------------------------------- */

Test(compat02, opossum_stats_is_get_stats_totals)
{
    circuit_consecutive pc;
    fx f;
    consecutive_fx(&f, &pc, 3, 1, 10, 1, OPEN_FOR);
    fx_call(&f, RS_OK);
    fx_call(&f, RS_IGN);
    for (int i = 0; i < 3; i++)
        fx_call(&f, RS_FAIL); /* trips */
    (void)rejected(&f);
    (void)rejected(&f);

    circuit_stats s = stats_of(&f);
    /* fires = admitted + rejected; rejects; successes; failures */
    cr_assert_eq(s.admitted + s.rejected, 7);
    cr_assert_eq(s.rejected, 2);
    cr_assert_eq(s.successes, 1);
    cr_assert_eq(s.failures, 3);
    cr_assert_eq(s.ignored, 1);
    cr_assert_eq(s.transitions, 1);
    /* totals since circuit_new: no rolling window drops them */
    circuit_test_clock_advance(1000 * OPEN_FOR);
    cr_assert_eq(stats_of(&f).failures, 3);
    fx_free(&f);
}

Test(compat02, opossum_open_and_close_are_isolate_and_reset)
{
    circuit_consecutive pc;
    fx f;
    consecutive_fx(&f, &pc, 3, 1, 10, 1, OPEN_FOR);
    cr_assert_eq(circuit_isolate(f.b, NULL), 0);
    /* opossum's open() goes half-open after resetTimeout; an isolated
     * breaker does not */
    circuit_test_clock_advance(2 * OPEN_FOR);
    assert_rejected(rejected(&f), CIRCUIT_ISOLATED, 0);
    cr_assert_eq(circuit_reset(f.b, NULL), 0); /* close() */
    fx_call(&f, RS_OK);
    fx_free(&f);
}

Test(compat02, opossum_prometheus_is_the_formatter)
{
    circuit_consecutive pc;
    fx f;
    consecutive_fx(&f, &pc, 1, 1, 10, 1, OPEN_FOR);
    fx_call(&f, RS_FAIL);
    (void)rejected(&f);
    circuit_stats s = stats_of(&f);
    char text[8192];
    int n = circuit_stats_format_prometheus(&s, "orders", text, sizeof text);
    cr_assert_gt(n, 0);
    cr_assert_lt(n, (int)sizeof text);
    cr_assert_not_null(strstr(text, "\ncircuit_state{breaker=\"orders\",state=\"open\"} 1\n"));
    cr_assert_not_null(strstr(text, "\ncircuit_calls_rejected_total{breaker=\"orders\"} 1\n"));
    cr_assert_not_null(
        strstr(text, "\ncircuit_results_total{breaker=\"orders\",outcome=\"failure\"} 1\n"));
    fx_free(&f);
}
