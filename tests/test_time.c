/*
 * TM1-TM3: time. No thread and no timer (TM1), boundaries exact to the
 * nanosecond and periods that do not overflow (TM2), the real clock (TM3).
 */
#include <time.h>

#include "helpers.h"

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
    circuit_ticket t;
    circuit_rejection rej;
    int64_t before, after;
    bool admitted;
    /* the trip and the next call within half the open period: a stall of
     * this thread between them (a loaded machine, qemu) makes the next call
     * a probe, rightly; then the step is run again on a new breaker */
    for (int attempt = 0;; attempt++) {
        fx_init(&f, 4, 1, open_for, probe_to);
        f.p.trip_run = 1;
        f.p.probe_forced = CIRCUIT_HALF_OPEN;
        fx_build(&f);
        before = mono_now();
        fx_call(&f, RS_FAIL);
        admitted = circuit_allow(f.b, NULL, &t, &rej);
        after = mono_now();
        if (after - before < open_for / 2 || attempt == 9)
            break;
        if (admitted)
            circuit_release(&t);
        fx_free(&f);
    }
    cr_assert_not(admitted, "refused %lld ns after the trip",
                  (long long)(after - before));
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
