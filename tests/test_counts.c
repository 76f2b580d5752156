/*
 * C1-C5: what the counts hold, as seen by the policies and carried by
 * the transitions.
 */
#include "helpers.h"

static void never_trips(fx *f, int window, int probes)
{
    fx_init(f, window, probes, OPEN_FOR, PROBE_TO);
    f->p.trip_run = 0;
    fx_build(f);
}

/* ---- C1 ---------------------------------------------------------------------- */

Test(counts, C1_window_covers_the_latest_results)
{
    fx f;
    never_trips(&f, 3, 1);
    /* S F S F F S: (s, f, cs, cf) after each */
    static const int res[] = {RS_OK, RS_FAIL, RS_OK, RS_FAIL, RS_FAIL, RS_OK, RS_OK, RS_OK};
    static const int64_t want[][4] = {{1, 0, 1, 0}, {1, 1, 0, 1}, {2, 1, 1, 0}, {1, 2, 0, 1},
                                      {1, 2, 0, 2}, {1, 2, 1, 0}, {2, 1, 2, 0}, {3, 0, 3, 0}};
    for (int i = 0; i < 8; i++) {
        fx_call(&f, res[i]);
        assert_counts(&f.seen[i], want[i][0], want[i][1], want[i][2], want[i][3], 0);
    }
    fx_free(&f);
}

Test(counts, C1_window_of_one_holds_the_last_result)
{
    fx f;
    never_trips(&f, 1, 1);
    static const int res[] = {RS_OK, RS_FAIL, RS_FAIL, RS_OK, RS_FAIL};
    for (int i = 0; i < 5; i++) {
        fx_call(&f, res[i]);
        const circuit_counts *c = &f.seen[i];
        cr_assert_eq(c->successes, res[i] == RS_OK ? 1 : 0, "result %d", i);
        cr_assert_eq(c->failures, res[i] == RS_FAIL ? 1 : 0, "result %d", i);
    }
    assert_counts(&f.seen[2], 0, 1, 0, 2, 0);
    fx_free(&f);
}

Test(counts, C1_sum_never_exceeds_window)
{
    fx f;
    never_trips(&f, 5, 1);
    uint32_t x = 12345;
    int hist[5] = {0};
    int n = 0;
    for (int i = 0; i < 2000; i++) {
        x = x * 1103515245u + 12345u;
        int r = (x >> 16) % 3 == 0 ? RS_FAIL : RS_OK;
        hist[n % 5] = r;
        n++;
        fx_call(&f, r);
        if (i < SPY_MAX) {
            int64_t fails = 0, total = n < 5 ? n : 5;
            for (int k = 0; k < total; k++)
                fails += hist[k] == RS_FAIL;
            assert_counts(&f.seen[i], total - fails, fails, f.seen[i].consecutive_successes,
                          f.seen[i].consecutive_failures, 0);
        }
    }
    cr_assert_eq(f.p.sum_violations, 0);
    fx_free(&f);
}

Test(counts, C1_half_open_window_counts_only_its_own_results)
{
    fx f;
    fx_init(&f, 3, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    f.p.close_run = 0;
    f.p.reopen_on_failure = false;
    fx_build(&f);
    fx_call(&f, RS_OK);
    fx_call(&f, RS_OK);
    fx_half_open_due(&f);
    fx_call(&f, RS_FAIL);
    assert_counts(&f.p.probe_seen[0], 0, 1, 0, 1, 0);
    fx_call(&f, RS_OK);
    fx_call(&f, RS_OK);
    fx_call(&f, RS_OK);
    assert_counts(&f.p.probe_seen[3], 3, 0, 3, 0, 0);
    fx_free(&f);
}

/* ---- C2 ---------------------------------------------------------------------- */

Test(counts, C2_runs_are_not_bounded_by_the_window)
{
    fx f;
    never_trips(&f, 3, 1);
    for (int i = 0; i < 10; i++)
        fx_call(&f, RS_FAIL);
    assert_counts(&f.seen[9], 0, 3, 0, 10, 0);
    fx_call(&f, RS_OK);
    assert_counts(&f.seen[10], 1, 2, 1, 0, 0);
    for (int i = 0; i < 6; i++)
        fx_call(&f, RS_OK);
    assert_counts(&f.seen[16], 3, 0, 7, 0, 0);
    fx_free(&f);
}

static void saturate(fx *f, circuit_outcome kind, int result)
{
    cr_assert_eq(circuit_test_force_counts(f->b, kind, CIRCUIT_RUN_MAX - 2, 0), 0);
    const circuit_counts *seen;
    for (int i = 0; i < 4; i++) {
        fx_call(f, result);
        seen = &f->seen[f->nseen - 1];
        int64_t want = i == 0 ? CIRCUIT_RUN_MAX - 1 : CIRCUIT_RUN_MAX;
        int64_t run = kind == CIRCUIT_FAILURE ? seen->consecutive_failures
                                              : seen->consecutive_successes;
        int64_t other = kind == CIRCUIT_FAILURE ? seen->consecutive_successes
                                                : seen->consecutive_failures;
        cr_assert_eq(run, want, "result %d past the forced run: run %lld", i, (long long)run);
        cr_assert_eq(other, 0);
    }
    /* the other outcome starts a new run of 1 */
    fx_call(f, result == RS_OK ? RS_FAIL : RS_OK);
    seen = &f->seen[f->nseen - 1];
    cr_assert_eq(seen->consecutive_failures + seen->consecutive_successes, 1);
}

Test(counts, C2_runs_saturate_at_RUN_MAX_and_never_wrap)
{
    cr_assert_geq(CIRCUIT_RUN_MAX, INT64_C(2147483647));
    fx f;
    never_trips(&f, 4, 1);
    fx_call(&f, RS_OK);
    saturate(&f, CIRCUIT_FAILURE, RS_FAIL);
    saturate(&f, CIRCUIT_SUCCESS, RS_OK);
    fx_free(&f);
}

Test(counts, C2_runs_saturate_while_half_open_too)
{
    fx f;
    fx_init(&f, 4, 1, OPEN_FOR, PROBE_TO);
    f.p.probe_forced = CIRCUIT_HALF_OPEN;
    fx_build(&f);
    fx_half_open_due(&f);
    fx_call(&f, RS_OK);
    saturate(&f, CIRCUIT_SUCCESS, RS_OK);
    saturate(&f, CIRCUIT_FAILURE, RS_FAIL);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_HALF_OPEN);
    fx_free(&f);
}

Test(counts, C2_a_saturated_run_reaches_the_transition)
{
    fx f;
    fx_init(&f, 4, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = CIRCUIT_RUN_MAX;
    fx_build(&f);
    fx_call(&f, RS_FAIL);
    cr_assert_eq(circuit_test_force_counts(f.b, CIRCUIT_FAILURE, CIRCUIT_RUN_MAX - 1, 0), 0);
    fx_call(&f, RS_FAIL);
    cr_assert_eq(f.log.n, 1);
    cr_assert_eq(f.log.tr[0].counts.consecutive_failures, CIRCUIT_RUN_MAX);
    cr_assert_eq(f.log.tr[0].counts.consecutive_successes, 0);
    fx_free(&f);
}

/* ---- C3 ---------------------------------------------------------------------- */

Test(counts, C3_timed_out_counts_probe_timeouts_of_this_half_open_state)
{
    fx f;
    fx_init(&f, 8, 3, OPEN_FOR, PROBE_TO);
    f.p.close_run = 1;
    fx_build(&f);
    fx_half_open_due(&f);
    circuit_ticket t[3];
    for (int i = 0; i < 3; i++)
        cr_assert(circuit_allow(f.b, NULL, &t[i], NULL));
    circuit_test_clock_advance(PROBE_TO);
    circuit_ticket u;
    cr_assert(circuit_allow(f.b, NULL, &u, NULL)); /* times out all three */
    cr_assert_eq(f.p.probe_calls, 3);
    for (int i = 0; i < 3; i++)
        assert_counts(&f.p.probe_seen[i], 0, 0, 0, 0, i + 1);
    cr_assert(circuit_done(&u, RS_OK)); /* closes */
    assert_counts(&f.p.probe_seen[3], 1, 0, 1, 0, 3);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    assert_counts(&f.log.tr[2].counts, 1, 0, 1, 0, 3);
    /* zero while closed */
    fx_call(&f, RS_FAIL);
    cr_assert_eq(f.p.trip_seen[f.p.trip_calls - 1].timed_out, 0);
    for (int i = 0; i < 3; i++)
        cr_assert_not(circuit_done(&t[i], RS_OK), "late probe %d counted", i);
    /* and from zero again in the next half-open state */
    fx_half_open_due(&f);
    fx_call(&f, RS_FAIL); /* reopens */
    assert_counts(&f.p.probe_seen[4], 0, 1, 0, 1, 0);
    fx_free(&f);
}

Test(counts, C3_timed_out_is_zero_while_closed)
{
    fx f;
    never_trips(&f, 4, 1);
    for (int i = 0; i < 50; i++)
        fx_call(&f, i % 2 ? RS_OK : RS_FAIL);
    for (int i = 0; i < 50; i++)
        cr_assert_eq(f.p.trip_seen[i].timed_out, 0);
    /* the seam refuses to set it while closed */
    cr_assert_eq(circuit_test_force_counts(f.b, CIRCUIT_FAILURE, 1, 1), EINVAL);
    fx_free(&f);
}

Test(counts, C3_timed_out_saturates_at_TIMED_OUT_MAX)
{
    fx f;
    fx_init(&f, 4, 1, OPEN_FOR, PROBE_TO);
    f.p.probe_forced = CIRCUIT_HALF_OPEN;
    fx_build(&f);
    fx_half_open_due(&f);
    circuit_ticket first;
    cr_assert(circuit_allow(f.b, NULL, &first, NULL)); /* makes open -> half-open */
    circuit_release(&first);
    cr_assert_eq(circuit_test_force_counts(f.b, CIRCUIT_SUCCESS, 0, CIRCUIT_TIMED_OUT_MAX - 1), 0);
    circuit_stats st0;
    circuit_get_stats(f.b, &st0);
    for (int i = 0; i < 3; i++) {
        circuit_ticket t, u;
        cr_assert(circuit_allow(f.b, NULL, &t, NULL));
        circuit_test_clock_advance(PROBE_TO);
        cr_assert(circuit_allow(f.b, NULL, &u, NULL)); /* times t out */
        cr_assert_eq(f.p.probe_calls, i + 1);
        /* P1, M1: the state's count cannot show it, the total still does */
        circuit_stats st;
        circuit_get_stats(f.b, &st);
        cr_assert_eq(st.timed_out, st0.timed_out + (uint64_t)i + 1, "timeout %d: total %llu", i,
                     (unsigned long long)st.timed_out);
        cr_assert_eq(st.counts.timed_out, CIRCUIT_TIMED_OUT_MAX);
        cr_assert_eq(f.p.probe_seen[i].timed_out, CIRCUIT_TIMED_OUT_MAX, "timeout %d: %lld", i,
                     (long long)f.p.probe_seen[i].timed_out);
        circuit_release(&u);
        cr_assert(circuit_done(&t, RS_IGN)); /* same state: reaches it, counts nothing */
    }
    fx_free(&f);
}

/* ---- C4 ---------------------------------------------------------------------- */

Test(counts, C4_every_state_change_starts_from_zero)
{
    fx f;
    fx_init(&f, 5, 1, OPEN_FOR, PROBE_TO);
    f.p.reopen_timeouts = 2;
    fx_build(&f);
    circuit_test_clock_set(T0);
    fx_call(&f, RS_OK);
    fx_call(&f, RS_FAIL);
    fx_call(&f, RS_FAIL); /* trips */
    assert_tr(&f, 0, CIRCUIT_CLOSED, CIRCUIT_OPEN, 1);
    assert_counts(&f.log.tr[0].counts, 1, 2, 0, 2, 0);
    circuit_test_clock_set(T0 + OPEN_FOR);
    circuit_ticket t;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    assert_tr(&f, 1, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN, 2);
    assert_counts(&f.log.tr[1].counts, 0, 0, 0, 0, 0);
    cr_assert(circuit_done(&t, RS_OK));
    assert_counts(&f.p.probe_seen[0], 1, 0, 1, 0, 0); /* not 2 successes + closed counts */
    /* a timeout, then the second timeout reopens: the transition includes it */
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    circuit_test_clock_advance(PROBE_TO);
    circuit_ticket u;
    cr_assert(circuit_allow(f.b, NULL, &u, NULL));
    assert_counts(&f.p.probe_seen[1], 1, 0, 1, 0, 1);
    circuit_test_clock_advance(PROBE_TO);
    circuit_ticket v;
    cr_assert_not(circuit_allow(f.b, NULL, &v, NULL));
    cr_assert_eq(f.log.n, 3);
    assert_tr(&f, 2, CIRCUIT_HALF_OPEN, CIRCUIT_OPEN, 3);
    assert_counts(&f.log.tr[2].counts, 1, 0, 1, 0, 2);
    circuit_release(&t);
    cr_assert_not(circuit_done(&u, RS_OK));
    /* next half-open: zero again; a success closes with its own counts only */
    circuit_test_clock_advance(OPEN_FOR);
    fx_call(&f, RS_OK);
    assert_counts(&f.p.probe_seen[3], 1, 0, 1, 0, 0);
    fx_call(&f, RS_OK);
    assert_tr(&f, 4, CIRCUIT_HALF_OPEN, CIRCUIT_CLOSED, 5);
    assert_counts(&f.log.tr[4].counts, 2, 0, 2, 0, 0);
    /* closed from zero: not the 1 success + 2 failures of the first closed state */
    int64_t k = f.p.trip_calls;
    fx_call(&f, RS_FAIL);
    assert_counts(&f.p.trip_seen[k], 0, 1, 0, 1, 0);
    fx_free(&f);
}

/* ---- C5 ---------------------------------------------------------------------- */

Test(counts, C5_ignored_result_is_not_counted_while_closed)
{
    fx f;
    fx_new(&f, 4, 1, OPEN_FOR, PROBE_TO);
    cr_assert(fx_call(&f, RS_OK));
    cr_assert(fx_call(&f, RS_IGN), "an ignored result that reached its generation returns true");
    assert_counts(&f.seen[1], 1, 0, 1, 0, 0); /* not counted */
    cr_assert(fx_call(&f, RS_OK));
    assert_counts(&f.seen[2], 2, 0, 2, 0, 0); /* the run was neither ended nor extended */
    cr_assert_eq(f.p.trip_calls, 0, "trip asked for an ignored result or a healthy success");
    fx_call(&f, RS_FAIL);
    cr_assert_eq(f.p.trip_calls, 1);
    for (int i = 0; i < 10; i++)
        fx_call(&f, RS_IGN);
    cr_assert_eq(f.p.trip_calls, 1, "trip asked for an ignored result");
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    fx_call(&f, RS_FAIL); /* the run of 2 failures trips, across ignored results */
    cr_assert_eq(f.p.trip_calls, 2);
    assert_counts(&f.p.trip_seen[1], 2, 2, 0, 2, 0);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    cr_assert_eq(f.c.calls, 15);
    fx_free(&f);
}

Test(counts, C5_ignored_probe_is_not_counted_and_frees_its_slot)
{
    fx f;
    fx_new(&f, 4, 1, OPEN_FOR, PROBE_TO);
    fx_half_open_due(&f);
    fx_call(&f, RS_OK);
    circuit_ticket t, u;
    circuit_rejection rej;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    cr_assert_not(circuit_allow(f.b, NULL, &u, &rej));
    cr_assert(circuit_done(&t, RS_IGN));
    cr_assert_eq(f.p.probe_calls, 1, "probe asked for an ignored result");
    cr_assert(circuit_allow(f.b, NULL, &u, &rej), "the ignored probe kept its slot");
    cr_assert(circuit_done(&u, RS_OK)); /* second success: closes */
    assert_counts(&f.p.probe_seen[1], 2, 0, 2, 0, 0);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    fx_free(&f);
}
