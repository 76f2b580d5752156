/*
 * Unit tests of include/circuit_presets.h: validation and messages, every
 * boundary of both policies (asked directly with hand-made counts), the
 * classifiers, purity (L4), and each preset driven through a real
 * breaker on the test clock (TM3).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "circuit.h"
#include "circuit_presets.h"
#include "testing.h"

#define SEC INT64_C(1000000000)
#define MS INT64_C(1000000)
#define RUN_MAX_TEXT "2147483647"

static void setup(void)
{
    circuit_test_clock_use_real(false);
    circuit_test_clock_set(SEC);
}

TestSuite(presets, .init = setup);

/* ---- helpers ------------------------------------------------------------- */

static circuit_counts counts(int64_t successes, int64_t failures, int64_t consecutive_successes,
                             int64_t consecutive_failures, int64_t timed_out)
{
    circuit_counts c = {successes, failures, consecutive_successes, consecutive_failures,
                        timed_out};
    return c;
}

/* Counts of a closed window holding `s` successes and `f` failures (the run
 * does not matter to the failure-rate policy). */
static circuit_counts window(int64_t s, int64_t f)
{
    return counts(s, f, 0, f > 0 ? 1 : 0, 0);
}

static circuit_failure_rate rate(int window_size, int64_t min_results, double ratio)
{
    circuit_config c = {window_size, 1, SEC, SEC};
    circuit_failure_rate p;
    char err[256];
    int rc = circuit_failure_rate_init(&p, &c, min_results, ratio, 1, err, sizeof err);
    cr_assert_eq(rc, 0, "%s", err);
    return p;
}

static bool rate_trips(const circuit_failure_rate *p, int64_t s, int64_t f)
{
    circuit_policy pol = circuit_failure_rate_policy(p);
    circuit_counts c = window(s, f);
    return pol.trip(pol.arg, &c);
}

/* Runs fn(arg) in a child with stderr captured; asserts that it aborted and
 * that stderr holds `want`. */
static void expect_abort(void (*fn)(void *), void *arg, const char *want)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        fn(arg);
        _exit(0);
    }
    close(fds[1]);
    char out[1024];
    size_t used = 0;
    ssize_t n;
    while (used < sizeof out - 1 && (n = read(fds[0], out + used, sizeof out - 1 - used)) > 0)
        used += (size_t)n;
    out[used] = '\0';
    close(fds[0]);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "did not abort; stderr: %s",
              out);
    cr_assert(strncmp(out, "libcircuit: ", 12) == 0, "stderr: %s", out);
    cr_assert(strstr(out, want) != NULL, "stderr %s lacks %s", out, want);
}

/* ======================================================================== */
/* circuit_consecutive_init                                                  */
/* ======================================================================== */

Test(presets, consecutive_init_fills_the_struct_and_clears_errbuf)
{
    circuit_consecutive p = {-7, -7};
    char err[64] = "stale";
    cr_assert_eq(circuit_consecutive_init(&p, 5, 2, err, sizeof err), 0);
    cr_assert_eq(p.failures, 5);
    cr_assert_eq(p.successes, 2);
    cr_assert_str_eq(err, "");
}

Test(presets, consecutive_init_bounds_are_1_to_run_max)
{
    circuit_consecutive p;
    int64_t good[] = {1, 2, CIRCUIT_RUN_MAX};
    int64_t bad[] = {INT64_MIN, -1, 0, CIRCUIT_RUN_MAX + 1, INT64_MAX};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        cr_assert_eq(circuit_consecutive_init(&p, good[i], 1, NULL, 0), 0, "failures %lld",
                     (long long)good[i]);
        cr_assert_eq(circuit_consecutive_init(&p, 1, good[i], NULL, 0), 0, "successes %lld",
                     (long long)good[i]);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(circuit_consecutive_init(&p, bad[i], 1, NULL, 0), EINVAL, "failures %lld",
                     (long long)bad[i]);
        cr_assert_eq(circuit_consecutive_init(&p, 1, bad[i], NULL, 0), EINVAL, "successes %lld",
                     (long long)bad[i]);
    }
}

Test(presets, consecutive_init_one_message_names_every_bad_field)
{
    circuit_consecutive p = {3, 3};
    char err[256];
    cr_assert_eq(circuit_consecutive_init(&p, 0, -1, err, sizeof err), EINVAL);
    cr_assert_str_eq(err, "invalid circuit_consecutive: failures = 0 (must be 1.." RUN_MAX_TEXT
                          "); successes = -1 (must be 1.." RUN_MAX_TEXT ")");
    cr_assert_eq(p.failures, 0, "a failed init must zero the struct");
    cr_assert_eq(p.successes, 0);

    cr_assert_eq(circuit_consecutive_init(&p, 1, CIRCUIT_RUN_MAX + 1, err, sizeof err), EINVAL);
    cr_assert_str_eq(err, "invalid circuit_consecutive: successes = 2147483648 (must be 1.."
                          RUN_MAX_TEXT ")");
}

Test(presets, init_errbuf_may_be_null_empty_or_short)
{
    circuit_consecutive p;
    cr_assert_eq(circuit_consecutive_init(&p, 0, 0, NULL, 123), EINVAL);
    char buf[16];
    memset(buf, 'z', sizeof buf);
    cr_assert_eq(circuit_consecutive_init(&p, 0, 0, buf, 0), EINVAL);
    for (size_t i = 0; i < sizeof buf; i++)
        cr_assert_eq(buf[i], 'z', "errbuf_len 0 wrote byte %zu", i);
    cr_assert_eq(circuit_consecutive_init(&p, 0, 0, buf, 12), EINVAL);
    cr_assert_str_eq(buf, "invalid cir");
    cr_assert_eq(buf[12], 'z', "wrote past errbuf_len");
    cr_assert_eq(circuit_consecutive_init(&p, 0, 0, buf, 1), EINVAL);
    cr_assert_str_eq(buf, "");
}

static void consecutive_init_null(void *arg)
{
    (void)arg;
    circuit_consecutive_init(NULL, 1, 1, NULL, 0);
}

static void consecutive_policy_null(void *arg)
{
    (void)arg;
    circuit_consecutive_policy(NULL);
}

static void consecutive_policy_of(void *arg)
{
    circuit_consecutive_policy(arg);
}

Test(presets, CFG4_consecutive_aborts_on_null_and_uninitialised)
{
    expect_abort(consecutive_init_null, NULL, "circuit_consecutive_init: p is NULL");
    expect_abort(consecutive_policy_null, NULL, "circuit_consecutive_policy: p is NULL");
    circuit_consecutive p;
    cr_assert_eq(circuit_consecutive_init(&p, 0, 1, NULL, 0), EINVAL);
    expect_abort(consecutive_policy_of, &p, "circuit_consecutive_init");
    circuit_consecutive q = {1, 0};
    expect_abort(consecutive_policy_of, &q, "invalid values");
    circuit_consecutive big = {CIRCUIT_RUN_MAX + 1, 1};
    expect_abort(consecutive_policy_of, &big, "invalid values");
}

Test(presets, consecutive_policy_points_at_the_struct)
{
    circuit_consecutive p;
    cr_assert_eq(circuit_consecutive_init(&p, 2, 1, NULL, 0), 0);
    circuit_policy pol = circuit_consecutive_policy(&p);
    cr_assert_not_null(pol.trip);
    cr_assert_not_null(pol.probe);
    cr_assert_eq(pol.arg, (void *)&p, "the policy must use the caller's struct, not a copy");
}

/* ======================================================================== */
/* consecutive: trip and probe                                               */
/* ======================================================================== */

Test(presets, consecutive_trips_at_exactly_n_in_a_row)
{
    circuit_consecutive p;
    cr_assert_eq(circuit_consecutive_init(&p, 3, 1, NULL, 0), 0);
    circuit_policy pol = circuit_consecutive_policy(&p);
    circuit_counts c;
    c = counts(0, 2, 0, 2, 0);
    cr_assert_not(pol.trip(pol.arg, &c));
    c = counts(0, 3, 0, 3, 0);
    cr_assert(pol.trip(pol.arg, &c));
    c = counts(0, 4, 0, 4, 0);
    cr_assert(pol.trip(pol.arg, &c));
    /* many failures in the window, but the run was ended by a success */
    c = counts(1, 50, 1, 0, 0);
    cr_assert_not(pol.trip(pol.arg, &c));
    c = counts(1, 50, 0, 2, 0);
    cr_assert_not(pol.trip(pol.arg, &c));
}

Test(presets, consecutive_one_failure_and_run_max_boundaries)
{
    circuit_consecutive p;
    cr_assert_eq(circuit_consecutive_init(&p, 1, 1, NULL, 0), 0);
    circuit_policy pol = circuit_consecutive_policy(&p);
    circuit_counts c = counts(0, 0, 0, 0, 0);
    cr_assert_not(pol.trip(pol.arg, &c));
    c = counts(9, 1, 0, 1, 0);
    cr_assert(pol.trip(pol.arg, &c));

    /* C2: runs saturate at CIRCUIT_RUN_MAX, which must still trip */
    circuit_consecutive q;
    cr_assert_eq(circuit_consecutive_init(&q, CIRCUIT_RUN_MAX, CIRCUIT_RUN_MAX, NULL, 0), 0);
    pol = circuit_consecutive_policy(&q);
    c = counts(0, 100, 0, CIRCUIT_RUN_MAX - 1, 0);
    cr_assert_not(pol.trip(pol.arg, &c));
    c = counts(0, 100, 0, CIRCUIT_RUN_MAX, 0);
    cr_assert(pol.trip(pol.arg, &c));
    c = counts(100, 0, CIRCUIT_RUN_MAX - 1, 0, 0);
    cr_assert_eq(pol.probe(pol.arg, &c), CIRCUIT_HALF_OPEN);
    c = counts(100, 0, CIRCUIT_RUN_MAX, 0, 0);
    cr_assert_eq(pol.probe(pol.arg, &c), CIRCUIT_CLOSED);
}

/* The half-open rule shared by both presets, checked on a given policy. */
static void check_probe_rule(circuit_policy pol, int64_t successes)
{
    circuit_counts c;
    /* S4: any failed probe reopens, whatever came before */
    c = counts(0, 1, 0, 1, 0);
    cr_assert_eq(pol.probe(pol.arg, &c), CIRCUIT_OPEN);
    c = counts(successes - 1, 1, 0, 1, 3);
    cr_assert_eq(pol.probe(pol.arg, &c), CIRCUIT_OPEN);
    /* one short of the run keeps probing; the run closes */
    c = counts(successes - 1, 0, successes - 1, 0, 0);
    cr_assert_eq(pol.probe(pol.arg, &c), CIRCUIT_HALF_OPEN);
    c = counts(successes, 0, successes, 0, 0);
    cr_assert_eq(pol.probe(pol.arg, &c), CIRCUIT_CLOSED);
    /* P1: a probe timeout keeps probing, however many there were */
    for (int64_t to = 1; to <= 4; to++) {
        c = counts(0, 0, 0, 0, to);
        cr_assert_eq(pol.probe(pol.arg, &c), CIRCUIT_HALF_OPEN, "timed_out %lld", (long long)to);
    }
    c = counts(0, 0, 0, 0, CIRCUIT_TIMED_OUT_MAX);
    cr_assert_eq(pol.probe(pol.arg, &c), CIRCUIT_HALF_OPEN);
    c = counts(successes - 1, 0, successes - 1, 0, 2);
    cr_assert_eq(pol.probe(pol.arg, &c), CIRCUIT_HALF_OPEN);
    /* a timeout does not stand in the way of a run that closes */
    c = counts(successes, 0, successes, 0, 2);
    cr_assert_eq(pol.probe(pol.arg, &c), CIRCUIT_CLOSED);
}

Test(presets, S4_consecutive_probe_reopens_on_failure_closes_on_run_keeps_on_timeout)
{
    circuit_consecutive p;
    cr_assert_eq(circuit_consecutive_init(&p, 1, 3, NULL, 0), 0);
    check_probe_rule(circuit_consecutive_policy(&p), 3);
    cr_assert_eq(circuit_consecutive_init(&p, 7, 1, NULL, 0), 0);
    check_probe_rule(circuit_consecutive_policy(&p), 1);
}

/* ======================================================================== */
/* circuit_failure_rate_init                                                 */
/* ======================================================================== */

Test(presets, failure_rate_init_fills_the_struct_and_clears_errbuf)
{
    circuit_config c = {100, 1, SEC, SEC};
    circuit_failure_rate p = {-1, -1.0, -1};
    char err[64] = "stale";
    cr_assert_eq(circuit_failure_rate_init(&p, &c, 20, 0.35, 4, err, sizeof err), 0);
    cr_assert_eq(p.min_results, 20);
    cr_assert(p.ratio == 0.35);
    cr_assert_eq(p.successes, 4);
    cr_assert_str_eq(err, "");
}

Test(presets, failure_rate_init_min_results_bounds_follow_the_window)
{
    circuit_config c = {10, 1, SEC, SEC};
    circuit_failure_rate p;
    cr_assert_eq(circuit_failure_rate_init(&p, &c, 1, 0.5, 1, NULL, 0), 0);
    cr_assert_eq(circuit_failure_rate_init(&p, &c, 10, 0.5, 1, NULL, 0), 0);
    cr_assert_eq(circuit_failure_rate_init(&p, &c, 11, 0.5, 1, NULL, 0), EINVAL);
    cr_assert_eq(circuit_failure_rate_init(&p, &c, 0, 0.5, 1, NULL, 0), EINVAL);
    cr_assert_eq(circuit_failure_rate_init(&p, &c, -1, 0.5, 1, NULL, 0), EINVAL);
    cr_assert_eq(circuit_failure_rate_init(&p, &c, INT64_MAX, 0.5, 1, NULL, 0), EINVAL);
    c.window = CIRCUIT_MAX_COUNT;
    cr_assert_eq(circuit_failure_rate_init(&p, &c, CIRCUIT_MAX_COUNT, 0.5, 1, NULL, 0), 0);
    cr_assert_eq(circuit_failure_rate_init(&p, &c, CIRCUIT_MAX_COUNT + 1, 0.5, 1, NULL, 0),
                 EINVAL);
    c.window = 1;
    cr_assert_eq(circuit_failure_rate_init(&p, &c, 1, 0.5, 1, NULL, 0), 0);
    cr_assert_eq(circuit_failure_rate_init(&p, &c, 2, 0.5, 1, NULL, 0), EINVAL);
}

/* 0.3: initialised from its own parameters (cfg NULL), min_results bounded
 * by CIRCUIT_MAX_COUNT; the window is checked when a breaker is built (K1). */
Test(presets, K1_failure_rate_from_its_own_parameters_window_checked_at_build)
{
    circuit_failure_rate p;
    char err[256] = "stale";
    cr_assert_eq(circuit_failure_rate_init(&p, NULL, 50, 0.5, 2, err, sizeof err), 0);
    cr_assert_str_eq(err, "");
    cr_assert_eq(p.min_results, 50);
    cr_assert_eq(circuit_failure_rate_init(&p, NULL, CIRCUIT_MAX_COUNT, 0.5, 2, NULL, 0), 0);
    cr_assert_eq(circuit_failure_rate_init(&p, NULL, CIRCUIT_MAX_COUNT + 1, 0.5, 2, err,
                                           sizeof err),
                 EINVAL);
    cr_assert_str_eq(err, "invalid circuit_failure_rate: min_results = 65537 (must be 1..65536)");
    cr_assert_eq(circuit_failure_rate_init(&p, NULL, 0, 2.0, 2, err, sizeof err), EINVAL);
    cr_assert_str_eq(err, "invalid circuit_failure_rate: min_results = 0 (must be 1..65536); "
                          "ratio = 2 (must be in (0, 1])");

    cr_assert_eq(circuit_failure_rate_init(&p, NULL, 50, 0.5, 2, NULL, 0), 0);
    circuit_spec spec = {
        .config = {.window = 10, .probes = 1, .open_for_ns = SEC, .probe_timeout_ns = SEC},
        .policy = circuit_failure_rate_policy(&p),
        .classify = circuit_classify_errno,
    };
    circuit_breaker *b = NULL;
    cr_assert_eq(circuit_new(&b, &spec, err, sizeof err), EINVAL);
    cr_assert_null(b);
    cr_assert(strstr(err, "policy: circuit_failure_rate min_results = 50 exceeds window = 10") !=
                  NULL,
              "%s", err);
    spec.config.window = 50;
    cr_assert_eq(circuit_new(&b, &spec, err, sizeof err), 0, "%s", err);
    circuit_free(b);
}

Test(presets, failure_rate_init_ratio_is_in_zero_exclusive_one_inclusive)
{
    circuit_config c = {10, 1, SEC, SEC};
    circuit_failure_rate p;
    double good[] = {1.0, 0.5, 1e-9, DBL_MIN, 4.9406564584124654e-324 /* smallest */,
                     nextafter(1.0, 0.0)};
    double bad[] = {0.0, -0.0, -0.5, nextafter(1.0, 2.0), 1.5, INFINITY, -INFINITY, NAN, -NAN};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        cr_assert_eq(circuit_failure_rate_init(&p, &c, 1, good[i], 1, NULL, 0), 0, "ratio %a",
                     good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(circuit_failure_rate_init(&p, &c, 1, bad[i], 1, NULL, 0), EINVAL,
                     "ratio %a", bad[i]);
}

Test(presets, failure_rate_init_successes_bounds)
{
    circuit_config c = {10, 1, SEC, SEC};
    circuit_failure_rate p;
    cr_assert_eq(circuit_failure_rate_init(&p, &c, 1, 0.5, 1, NULL, 0), 0);
    cr_assert_eq(circuit_failure_rate_init(&p, &c, 1, 0.5, CIRCUIT_RUN_MAX, NULL, 0), 0);
    cr_assert_eq(circuit_failure_rate_init(&p, &c, 1, 0.5, 0, NULL, 0), EINVAL);
    cr_assert_eq(circuit_failure_rate_init(&p, &c, 1, 0.5, -3, NULL, 0), EINVAL);
    cr_assert_eq(circuit_failure_rate_init(&p, &c, 1, 0.5, CIRCUIT_RUN_MAX + 1, NULL, 0), EINVAL);
}

Test(presets, failure_rate_init_one_message_names_every_bad_field)
{
    circuit_config c = {10, 1, SEC, SEC};
    circuit_failure_rate p = {5, 0.5, 5};
    char err[512];
    cr_assert_eq(circuit_failure_rate_init(&p, &c, 11, 1.5, 0, err, sizeof err), EINVAL);
    cr_assert_str_eq(err, "invalid circuit_failure_rate: min_results = 11 (must be 1..10, the "
                          "config's window); ratio = 1.5 (must be in (0, 1]); successes = 0 "
                          "(must be 1.." RUN_MAX_TEXT ")");
    cr_assert_eq(p.min_results, 0, "a failed init must zero the struct");
    cr_assert(p.ratio == 0.0);
    cr_assert_eq(p.successes, 0);

    /* one bad field: one clause, no stray separator */
    cr_assert_eq(circuit_failure_rate_init(&p, &c, 0, 0.5, 1, err, sizeof err), EINVAL);
    cr_assert_str_eq(err, "invalid circuit_failure_rate: min_results = 0 (must be 1..10, the "
                          "config's window)");
}

Test(presets, failure_rate_init_message_shows_the_ratio_given)
{
    circuit_config c = {10, 1, SEC, SEC};
    circuit_failure_rate p;
    char err[512];
    struct {
        double ratio;
        const char *text;
    } cases[] = {
        {NAN, "ratio = nan (must be in (0, 1])"},
        {0.0, "ratio = 0 (must be in (0, 1])"},
        {-0.0, "ratio = -0 (must be in (0, 1])"},
        {INFINITY, "ratio = inf (must be in (0, 1])"},
        {-0.25, "ratio = -0.25 (must be in (0, 1])"},
        /* shown exactly enough to read back, not rounded to "1" */
        {1.0000000001, "ratio = 1.0000000001 (must be in (0, 1])"},
        {50.0, "ratio = 50 (must be in (0, 1])"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_eq(circuit_failure_rate_init(&p, &c, 1, cases[i].ratio, 1, err, sizeof err),
                     EINVAL);
        char want[256];
        snprintf(want, sizeof want, "invalid circuit_failure_rate: %s", cases[i].text);
        cr_assert_str_eq(err, want);
    }
}

Test(presets, failure_rate_init_reports_an_invalid_window_too)
{
    circuit_config c = {0, 1, SEC, SEC};
    circuit_failure_rate p;
    char err[512];
    cr_assert_eq(circuit_failure_rate_init(&p, &c, 0, 0.5, 1, err, sizeof err), EINVAL);
    cr_assert_str_eq(err, "invalid circuit_failure_rate: cfg->window = 0 (must be 1..65536); "
                          "min_results = 0 (must be 1..65536)");
    c.window = CIRCUIT_MAX_COUNT + 1;
    cr_assert_eq(circuit_failure_rate_init(&p, &c, 5, 0.5, 1, err, sizeof err), EINVAL);
    cr_assert_str_eq(err, "invalid circuit_failure_rate: cfg->window = 65537 (must be 1..65536)");
}

static void failure_rate_init_null_p(void *arg)
{
    circuit_failure_rate_init(NULL, arg, 1, 0.5, 1, NULL, 0);
}


static void failure_rate_policy_of(void *arg)
{
    circuit_failure_rate_policy(arg);
}

Test(presets, CFG4_failure_rate_aborts_on_null_and_uninitialised)
{
    circuit_config c = {10, 1, SEC, SEC};
    expect_abort(failure_rate_init_null_p, &c, "circuit_failure_rate_init: p is NULL");
    expect_abort(failure_rate_policy_of, NULL, "circuit_failure_rate_policy: p is NULL");
    circuit_failure_rate p;
    cr_assert_eq(circuit_failure_rate_init(&p, &c, 0, 0.5, 1, NULL, 0), EINVAL);
    expect_abort(failure_rate_policy_of, &p, "circuit_failure_rate_init");
    circuit_failure_rate bad_ratio = {1, NAN, 1};
    expect_abort(failure_rate_policy_of, &bad_ratio, "invalid values");
    circuit_failure_rate bad_min = {CIRCUIT_MAX_COUNT + 1, 0.5, 1};
    expect_abort(failure_rate_policy_of, &bad_min, "invalid values");
    circuit_failure_rate bad_succ = {1, 0.5, 0};
    expect_abort(failure_rate_policy_of, &bad_succ, "invalid values");
}

/* ======================================================================== */
/* failure rate: trip                                                        */
/* ======================================================================== */

Test(presets, failure_rate_exactly_half_trips_a_half_policy)
{
    circuit_failure_rate p = rate(10, 1, 0.5);
    cr_assert(rate_trips(&p, 5, 5));
    cr_assert_not(rate_trips(&p, 6, 4));
    cr_assert(rate_trips(&p, 1, 1));
    cr_assert_not(rate_trips(&p, 2, 1));
    cr_assert(rate_trips(&p, 0, 1));
    /* odd totals: 3 of 5 is above, 2 of 5 below */
    cr_assert(rate_trips(&p, 2, 3));
    cr_assert_not(rate_trips(&p, 3, 2));
}

Test(presets, failure_rate_ratio_one_needs_every_result_failed)
{
    circuit_failure_rate p = rate(100, 1, 1.0);
    for (int64_t n = 1; n <= 100; n++) {
        cr_assert(rate_trips(&p, 0, n), "%lld of %lld", (long long)n, (long long)n);
        cr_assert_not(rate_trips(&p, 1, n - 1), "%lld of %lld", (long long)(n - 1), (long long)n);
    }
}

Test(presets, failure_rate_min_results_boundary)
{
    circuit_failure_rate p = rate(10, 5, 0.5);
    cr_assert_not(rate_trips(&p, 0, 4), "4 results, all failed, below the minimum of 5");
    cr_assert(rate_trips(&p, 2, 3));
    cr_assert_not(rate_trips(&p, 3, 2));
    cr_assert(rate_trips(&p, 0, 5));
    circuit_failure_rate all = rate(10, 10, 0.5);
    cr_assert_not(rate_trips(&all, 0, 9));
    cr_assert(rate_trips(&all, 5, 5));
}

Test(presets, failure_rate_no_failure_never_trips)
{
    /* the smallest positive ratio: any failure trips, none never does */
    circuit_failure_rate p = rate(CIRCUIT_MAX_COUNT, 1, 4.9406564584124654e-324);
    cr_assert_not(rate_trips(&p, 1, 0));
    cr_assert_not(rate_trips(&p, CIRCUIT_MAX_COUNT, 0));
    cr_assert(rate_trips(&p, CIRCUIT_MAX_COUNT - 1, 1));
    circuit_failure_rate q = rate(10, 1, 1e-9);
    cr_assert_not(rate_trips(&q, 1, 0));
    cr_assert(rate_trips(&q, 9, 1));
}

Test(presets, failure_rate_decimal_ratios_that_binary_rounds_up)
{
    /* In binary, 0.07 * 100 is 7.000000000000001 and 0.14 * 50 is
     * 7.000000000000001: a naive compare misses these exact boundaries. */
    cr_assert(0.07 * 100.0 > 7.0, "the premise of this test no longer holds");
    circuit_failure_rate p7 = rate(100, 1, 0.07);
    cr_assert(rate_trips(&p7, 93, 7));
    cr_assert_not(rate_trips(&p7, 94, 6));
    circuit_failure_rate p14 = rate(100, 1, 0.14);
    cr_assert(rate_trips(&p14, 43, 7));
    cr_assert_not(rate_trips(&p14, 44, 6));
    circuit_failure_rate p3 = rate(100, 1, 1.0 / 3.0);
    cr_assert(rate_trips(&p3, 2, 1));
    cr_assert(rate_trips(&p3, 66, 33));
    cr_assert_not(rate_trips(&p3, 67, 32));
}

Test(presets, failure_rate_tolerance_does_not_forgive_a_real_shortfall)
{
    /* just above one half, by more than the 2^-24 slack: 5 of 10 is short */
    circuit_failure_rate p = rate(10, 1, 0.5 + 0x1p-20);
    cr_assert_not(rate_trips(&p, 5, 5));
    cr_assert(rate_trips(&p, 4, 6));
    /* the closest fractions of the largest window: 32767/65536 vs 1/2 */
    circuit_failure_rate h = rate(CIRCUIT_MAX_COUNT, 1, 0.5);
    cr_assert_not(rate_trips(&h, 32769, 32767));
    cr_assert(rate_trips(&h, 32768, 32768));
    circuit_failure_rate n = rate(CIRCUIT_MAX_COUNT, 1, 32767.0 / 65535.0);
    cr_assert(rate_trips(&n, 32768, 32767));
    cr_assert_not(rate_trips(&n, 32769, 32766));
    /* neighbours 1/65536 apart at the far end */
    circuit_failure_rate top = rate(CIRCUIT_MAX_COUNT, 1, 65535.0 / 65536.0);
    cr_assert(rate_trips(&top, 1, 65535));
    cr_assert_not(rate_trips(&top, 2, 65534));
}

/* Boundary of an exact fraction a/b over n results: the least failure count
 * that trips, ceil(a * n / b). */
static int64_t least_failures(int64_t a, int64_t b, int64_t n)
{
    return (a * n + b - 1) / b;
}

static void check_boundary(const circuit_failure_rate *p, int64_t a, int64_t b, int64_t n,
                           const char *what)
{
    int64_t f = least_failures(a, b, n);
    cr_assert(rate_trips(p, n - f, f), "%s: %lld of %lld must trip", what, (long long)f,
              (long long)n);
    if (f >= 1)
        cr_assert_not(rate_trips(p, n - f + 1, f - 1), "%s: %lld of %lld must not trip", what,
                      (long long)(f - 1), (long long)n);
}

Test(presets, failure_rate_every_two_digit_decimal_at_every_total_up_to_100)
{
    for (int k = 1; k <= 100; k++) {
        char text[16];
        snprintf(text, sizeof text, "%d.%02d", k / 100, k % 100);
        circuit_failure_rate p = rate(100, 1, strtod(text, NULL));
        for (int64_t n = 1; n <= 100; n++)
            check_boundary(&p, k, 100, n, text);
    }
}

Test(presets, failure_rate_every_three_digit_decimal_at_every_total_up_to_1000)
{
    for (int k = 1; k <= 1000; k++) {
        char text[16];
        snprintf(text, sizeof text, "%d.%03d", k / 1000, k % 1000);
        circuit_failure_rate p = rate(1000, 1, strtod(text, NULL));
        for (int64_t n = 1; n <= 1000; n++)
            check_boundary(&p, k, 1000, n, text);
    }
}

Test(presets, failure_rate_percentages_with_two_decimals_divided_by_100)
{
    /* the way a resilience4j or opossum threshold is usually carried over */
    int64_t totals[] = {1, 3, 7, 100, 333, 1000, 9999, 10000, 12345, 65535, 65536};
    for (int k = 1; k <= 10000; k++) {
        char text[16];
        snprintf(text, sizeof text, "%d.%02d", k / 100, k % 100);
        circuit_failure_rate p = rate(CIRCUIT_MAX_COUNT, 1, strtod(text, NULL) / 100.0);
        for (size_t i = 0; i < sizeof totals / sizeof totals[0]; i++)
            check_boundary(&p, k, 10000, totals[i], text);
    }
}

Test(presets, failure_rate_small_fractions_at_small_and_largest_totals)
{
    for (int64_t b = 1; b <= 64; b++) {
        for (int64_t a = 1; a <= b; a++) {
            char what[32];
            snprintf(what, sizeof what, "%lld/%lld", (long long)a, (long long)b);
            circuit_failure_rate p = rate(CIRCUIT_MAX_COUNT, 1, (double)a / (double)b);
            for (int64_t n = 1; n <= 300; n++)
                check_boundary(&p, a, b, n, what);
            for (int64_t n = CIRCUIT_MAX_COUNT - 300; n <= CIRCUIT_MAX_COUNT; n++)
                check_boundary(&p, a, b, n, what);
        }
    }
}

Test(presets, S4_failure_rate_probe_reopens_on_failure_closes_on_run_keeps_on_timeout)
{
    circuit_config c = {10, 1, SEC, SEC};
    circuit_failure_rate p;
    cr_assert_eq(circuit_failure_rate_init(&p, &c, 10, 0.9, 3, NULL, 0), 0);
    check_probe_rule(circuit_failure_rate_policy(&p), 3);
    cr_assert_eq(circuit_failure_rate_init(&p, &c, 1, 1.0, 1, NULL, 0), 0);
    check_probe_rule(circuit_failure_rate_policy(&p), 1);
}

Test(presets, failure_rate_policy_points_at_the_struct)
{
    circuit_failure_rate p = rate(10, 1, 0.5);
    circuit_policy pol = circuit_failure_rate_policy(&p);
    cr_assert_not_null(pol.trip);
    cr_assert_not_null(pol.probe);
    cr_assert_eq(pol.arg, (void *)&p);
}

/* ======================================================================== */
/* classifiers                                                               */
/* ======================================================================== */

Test(presets, classify_errno_outcomes)
{
    struct {
        int result;
        circuit_outcome want;
    } cases[] = {
        {0, CIRCUIT_SUCCESS},
        {1, CIRCUIT_SUCCESS},
        {4096, CIRCUIT_SUCCESS},
        {INT_MAX, CIRCUIT_SUCCESS},
        {ECANCELED, CIRCUIT_SUCCESS}, /* documented: a positive value is a count */
        {-ECANCELED, CIRCUIT_IGNORED},
        {-ETIMEDOUT, CIRCUIT_FAILURE},
        {-ECONNREFUSED, CIRCUIT_FAILURE},
        {-ECONNRESET, CIRCUIT_FAILURE},
        {-EIO, CIRCUIT_FAILURE},
        {-1, CIRCUIT_FAILURE},
        {INT_MIN, CIRCUIT_FAILURE},
    };
    int ctx;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_eq(circuit_classify_errno(NULL, NULL, cases[i].result), cases[i].want,
                     "result %d", cases[i].result);
        cr_assert_eq(circuit_classify_errno(&ctx, &ctx, cases[i].result), cases[i].want,
                     "result %d with args", cases[i].result);
    }
}

Test(presets, classify_http_outcomes)
{
    struct {
        int result;
        circuit_outcome want;
    } cases[] = {
        {200, CIRCUIT_SUCCESS}, {204, CIRCUIT_SUCCESS}, {100, CIRCUIT_SUCCESS},
        {301, CIRCUIT_SUCCESS}, {304, CIRCUIT_SUCCESS}, {400, CIRCUIT_SUCCESS},
        {404, CIRCUIT_SUCCESS}, {428, CIRCUIT_SUCCESS}, {429, CIRCUIT_FAILURE},
        {430, CIRCUIT_SUCCESS}, {499, CIRCUIT_SUCCESS}, {500, CIRCUIT_FAILURE},
        {501, CIRCUIT_FAILURE}, {502, CIRCUIT_FAILURE}, {503, CIRCUIT_FAILURE},
        {504, CIRCUIT_FAILURE}, {599, CIRCUIT_FAILURE}, {600, CIRCUIT_SUCCESS},
        {0, CIRCUIT_SUCCESS},   {INT_MAX, CIRCUIT_SUCCESS},
        {-ECANCELED, CIRCUIT_IGNORED}, {-ETIMEDOUT, CIRCUIT_FAILURE},
        {-ECONNREFUSED, CIRCUIT_FAILURE}, {-1, CIRCUIT_FAILURE}, {INT_MIN, CIRCUIT_FAILURE},
    };
    int ctx;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_eq(circuit_classify_http(NULL, NULL, cases[i].result), cases[i].want,
                     "result %d", cases[i].result);
        cr_assert_eq(circuit_classify_http(&ctx, &ctx, cases[i].result), cases[i].want,
                     "result %d with args", cases[i].result);
    }
    /* every status in 100..599 */
    for (int s = 100; s <= 599; s++) {
        circuit_outcome want = (s == 429 || s >= 500) ? CIRCUIT_FAILURE : CIRCUIT_SUCCESS;
        cr_assert_eq(circuit_classify_http(NULL, NULL, s), want, "status %d", s);
    }
}

/* ======================================================================== */
/* L4: pure, read-only, safe to ask from several threads at once             */
/* ======================================================================== */

#define GRID 6

typedef struct answers {
    bool trip[GRID][GRID][GRID];
    circuit_state probe[GRID][GRID][GRID];
} answers;

/* Asks pol about a grid of counts (successes, failures, runs, timeouts). */
static void ask_grid(circuit_policy pol, answers *out)
{
    for (int s = 0; s < GRID; s++)
        for (int f = 0; f < GRID; f++)
            for (int run = 0; run < GRID; run++) {
                circuit_counts c = counts(s, f, f > 0 ? 0 : run, f > 0 ? run : 0, run % 3);
                out->trip[s][f][run] = pol.trip(pol.arg, &c);
                out->probe[s][f][run] = pol.probe(pol.arg, &c);
            }
}

Test(presets, L4_policies_do_not_write_their_parameters_and_answer_alike_twice)
{
    circuit_consecutive cp;
    cr_assert_eq(circuit_consecutive_init(&cp, 2, 2, NULL, 0), 0);
    circuit_failure_rate fp = rate(10, 3, 0.4);
    circuit_consecutive cp_before = cp;
    circuit_failure_rate fp_before = fp;
    circuit_policy pols[2] = {circuit_consecutive_policy(&cp), circuit_failure_rate_policy(&fp)};
    for (int i = 0; i < 2; i++) {
        answers a, b;
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        ask_grid(pols[i], &a);
        ask_grid(pols[i], &b);
        cr_assert(memcmp(&a, &b, sizeof a) == 0, "policy %d answered differently", i);
    }
    cr_assert(memcmp(&cp, &cp_before, sizeof cp) == 0);
    cr_assert(memcmp(&fp, &fp_before, sizeof fp) == 0);
}

typedef struct asker {
    circuit_policy pol;
    const answers *want;
    int rounds;
    long mismatches;
} asker;

static void *ask_concurrently(void *arg)
{
    asker *k = arg;
    for (int r = 0; r < k->rounds; r++) {
        answers got;
        memset(&got, 0, sizeof got);
        ask_grid(k->pol, &got);
        if (memcmp(&got, k->want, sizeof got) != 0)
            k->mismatches++;
    }
    return NULL;
}

Test(presets, L4_policies_answer_alike_from_concurrent_threads)
{
    circuit_consecutive cp;
    cr_assert_eq(circuit_consecutive_init(&cp, 3, 2, NULL, 0), 0);
    circuit_failure_rate fp = rate(10, 4, 0.5);
    circuit_policy pols[2] = {circuit_consecutive_policy(&cp), circuit_failure_rate_policy(&fp)};
    for (int i = 0; i < 2; i++) {
        answers want;
        memset(&want, 0, sizeof want);
        ask_grid(pols[i], &want);
        enum { THREADS = 4 };
        pthread_t th[THREADS];
        asker k[THREADS];
        for (int t = 0; t < THREADS; t++) {
            k[t] = (asker){pols[i], &want, 2000, 0};
            cr_assert_eq(pthread_create(&th[t], NULL, ask_concurrently, &k[t]), 0);
        }
        for (int t = 0; t < THREADS; t++) {
            cr_assert_eq(pthread_join(th[t], NULL), 0);
            cr_assert_eq(k[t].mismatches, 0, "policy %d thread %d", i, t);
        }
    }
}

/* ======================================================================== */
/* Through a real breaker                                                    */
/* ======================================================================== */

typedef struct rec {
    circuit_transition t[16];
    int n;
} rec;

static void observe_rec(void *arg, void *call_ctx, const circuit_transition *t)
{
    (void)call_ctx;
    rec *r = arg;
    if (r->n < 16)
        r->t[r->n] = *t;
    r->n++;
}

static circuit_breaker *breaker(circuit_config c, circuit_policy p, circuit_classify_fn cls,
                                rec *r)
{
    circuit_spec s = {.config = c, .policy = p, .classify = cls, .observe = observe_rec,
                      .observe_arg = r};
    circuit_breaker *b = NULL;
    char err[256] = "";
    cr_assert_eq(circuit_new(&b, &s, err, sizeof err), 0, "%s", err);
    return b;
}

static void call_ok(circuit_breaker *b, int result)
{
    circuit_ticket t;
    circuit_rejection rej;
    cr_assert(circuit_allow(b, NULL, &t, &rej), "rejected while %s",
              circuit_state_name(circuit_get_state(b)));
    cr_assert(circuit_done(&t, result));
}

static void begin(circuit_breaker *b, circuit_ticket *t)
{
    circuit_rejection rej;
    cr_assert(circuit_allow(b, NULL, t, &rej), "rejected while %s",
              circuit_state_name(circuit_get_state(b)));
}

static void reject(circuit_breaker *b, circuit_state why)
{
    circuit_ticket t;
    circuit_rejection rej;
    cr_assert_not(circuit_allow(b, NULL, &t, &rej));
    cr_assert_eq(rej.state, why);
}

Test(presets, S2_consecutive_in_a_breaker_a_success_ends_the_run)
{
    circuit_consecutive p;
    cr_assert_eq(circuit_consecutive_init(&p, 3, 1, NULL, 0), 0);
    rec r = {0};
    circuit_breaker *b = breaker((circuit_config){10, 1, SEC, SEC}, circuit_consecutive_policy(&p),
                                 circuit_classify_errno, &r);
    call_ok(b, -EIO);
    call_ok(b, -EIO);
    call_ok(b, 0);
    call_ok(b, -EIO);
    call_ok(b, -EIO);
    cr_assert_eq(circuit_get_state(b), CIRCUIT_CLOSED);
    call_ok(b, -EIO);
    cr_assert_eq(circuit_get_state(b), CIRCUIT_OPEN);
    cr_assert_eq(r.n, 1);
    cr_assert_eq(r.t[0].counts.consecutive_failures, 3);
    cr_assert_eq(r.t[0].counts.failures, 5);
    cr_assert_eq(r.t[0].counts.successes, 1);
    circuit_free(b);
}

/* S2: a failure-rate preset whose min_results is reached
 * by a success does not trip on that success (trip is asked only after
 * failures); it trips at the next failure if the rate still holds then,
 * and not if the rate fell below the threshold. */
Test(presets, S2_failure_rate_min_results_reached_by_a_success_trips_at_the_next_failure)
{
    circuit_config c = {10, 1, SEC, SEC};
    circuit_failure_rate p;
    cr_assert_eq(circuit_failure_rate_init(&p, &c, 4, 0.5, 1, NULL, 0), 0);
    rec r = {0};
    circuit_breaker *b = breaker(c, circuit_failure_rate_policy(&p), circuit_classify_errno, &r);
    call_ok(b, -EIO);
    call_ok(b, -EIO);
    call_ok(b, -EIO);
    cr_assert_eq(circuit_get_state(b), CIRCUIT_CLOSED);
    call_ok(b, 0); /* 3 of 4 at the minimum, reached by a success: not asked */
    cr_assert_eq(circuit_get_state(b), CIRCUIT_CLOSED);
    cr_assert_eq(r.n, 0);
    call_ok(b, -EIO); /* 4 of 5: the rate still holds */
    cr_assert_eq(circuit_get_state(b), CIRCUIT_OPEN);
    cr_assert_eq(r.t[0].counts.failures, 4);
    cr_assert_eq(r.t[0].counts.successes, 1);
    circuit_free(b);

    /* the rate fell below the threshold before the next failure: no trip */
    rec r2 = {0};
    b = breaker(c, circuit_failure_rate_policy(&p), circuit_classify_errno, &r2);
    call_ok(b, -EIO);
    call_ok(b, -EIO);
    call_ok(b, -EIO);
    for (int i = 0; i < 4; i++)
        call_ok(b, 0);
    call_ok(b, -EIO); /* 4 of 8 = 50 %: trips (>= threshold) */
    cr_assert_eq(circuit_get_state(b), CIRCUIT_OPEN);
    circuit_free(b);
    rec r3 = {0};
    b = breaker(c, circuit_failure_rate_policy(&p), circuit_classify_errno, &r3);
    call_ok(b, -EIO);
    call_ok(b, -EIO);
    call_ok(b, -EIO);
    for (int i = 0; i < 5; i++)
        call_ok(b, 0);
    call_ok(b, -EIO); /* 4 of 9 < 50 %: stays closed */
    cr_assert_eq(circuit_get_state(b), CIRCUIT_CLOSED);
    cr_assert_eq(r3.n, 0);
    circuit_free(b);
}

/* Both presets, same half-open behaviour, through a breaker. */
static circuit_policy preset_policy(int which, circuit_consecutive *cp, circuit_failure_rate *fp,
                                    const circuit_config *c, int64_t successes)
{
    if (which == 0) {
        cr_assert_eq(circuit_consecutive_init(cp, 1, successes, NULL, 0), 0);
        return circuit_consecutive_policy(cp);
    }
    cr_assert_eq(circuit_failure_rate_init(fp, c, 1, 1.0, successes, NULL, 0), 0);
    return circuit_failure_rate_policy(fp);
}

Test(presets, S4_failed_probe_reopens_for_a_fresh_period_both_presets)
{
    for (int which = 0; which < 2; which++) {
        circuit_test_clock_set(SEC);
        circuit_config c = {10, 2, 2 * SEC, 10 * SEC};
        circuit_consecutive cp;
        circuit_failure_rate fp;
        rec r = {0};
        circuit_breaker *b = breaker(c, preset_policy(which, &cp, &fp, &c, 2),
                                     circuit_classify_errno, &r);
        call_ok(b, -EIO);
        circuit_test_clock_advance(2 * SEC);
        circuit_ticket a, d;
        begin(b, &a);
        begin(b, &d);
        cr_assert(circuit_done(&a, 0));
        cr_assert_eq(circuit_get_state(b), CIRCUIT_HALF_OPEN, "preset %d", which);
        circuit_test_clock_advance(300 * MS);
        cr_assert(circuit_done(&d, -EIO));
        cr_assert_eq(circuit_get_state(b), CIRCUIT_OPEN, "preset %d", which);
        circuit_ticket t;
        circuit_rejection rej;
        cr_assert_not(circuit_allow(b, NULL, &t, &rej));
        cr_assert_eq(rej.retry_after_ns, 2 * SEC, "preset %d", which);
        cr_assert_eq(r.n, 3);
        cr_assert_eq(r.t[2].to, CIRCUIT_OPEN);
        cr_assert_eq(r.t[2].counts.successes, 1);
        cr_assert_eq(r.t[2].counts.failures, 1);
        circuit_free(b);
    }
}

Test(presets, P1_probe_timeout_keeps_probing_both_presets)
{
    for (int which = 0; which < 2; which++) {
        circuit_test_clock_set(SEC);
        circuit_config c = {10, 1, SEC, 500 * MS};
        circuit_consecutive cp;
        circuit_failure_rate fp;
        rec r = {0};
        circuit_breaker *b = breaker(c, preset_policy(which, &cp, &fp, &c, 1),
                                     circuit_classify_errno, &r);
        call_ok(b, -EIO);
        circuit_test_clock_advance(SEC);
        /* tickets of timed-out probes stay live for the caller (P2): each
         * needs its own */
        circuit_ticket lost[3], next;
        begin(b, &lost[0]);
        circuit_test_clock_advance(500 * MS - 1);
        reject(b, CIRCUIT_HALF_OPEN);
        circuit_test_clock_advance(1);
        begin(b, &lost[1]); /* the first probe timed out: its slot is ours */
        cr_assert_eq(circuit_get_state(b), CIRCUIT_HALF_OPEN, "preset %d reopened on a timeout",
                     which);
        cr_assert_eq(r.n, 2, "preset %d: a timeout made a transition", which);
        /* and again: many timeouts, still probing */
        circuit_test_clock_advance(500 * MS);
        begin(b, &lost[2]);
        cr_assert_eq(circuit_get_state(b), CIRCUIT_HALF_OPEN);
        cr_assert_eq(r.n, 2);
        circuit_test_clock_advance(500 * MS);
        begin(b, &next);
        cr_assert(circuit_done(&next, 0));
        cr_assert_eq(circuit_get_state(b), CIRCUIT_CLOSED);
        cr_assert_eq(r.t[2].counts.timed_out, 3);
        cr_assert_eq(r.t[2].counts.successes, 1);
        for (int i = 0; i < 3; i++)
            cr_assert_not(circuit_done(&lost[i], 0), "a result after the close counted");
        circuit_free(b);
    }
}

Test(presets, P2_timed_out_probe_result_still_counts_both_presets)
{
    for (int which = 0; which < 2; which++) {
        circuit_test_clock_set(SEC);
        circuit_config c = {10, 1, SEC, 500 * MS};
        circuit_consecutive cp;
        circuit_failure_rate fp;
        rec r = {0};
        circuit_breaker *b = breaker(c, preset_policy(which, &cp, &fp, &c, 1),
                                     circuit_classify_errno, &r);
        call_ok(b, -EIO);
        circuit_test_clock_advance(SEC);
        circuit_ticket slow;
        begin(b, &slow);
        circuit_test_clock_advance(2 * SEC);
        cr_assert(circuit_done(&slow, 0), "preset %d", which);
        cr_assert_eq(circuit_get_state(b), CIRCUIT_CLOSED, "preset %d", which);
        cr_assert_eq(r.t[2].counts.timed_out, 1);
        circuit_free(b);
    }
}

Test(presets, C5_cancelled_probe_is_ignored_and_frees_its_slot)
{
    circuit_consecutive p;
    cr_assert_eq(circuit_consecutive_init(&p, 1, 2, NULL, 0), 0);
    rec r = {0};
    circuit_breaker *b = breaker((circuit_config){10, 1, SEC, 10 * SEC},
                                 circuit_consecutive_policy(&p), circuit_classify_http, &r);
    call_ok(b, 503);
    circuit_test_clock_advance(SEC);
    circuit_ticket t;
    begin(b, &t);
    reject(b, CIRCUIT_HALF_OPEN);
    cr_assert(circuit_done(&t, -ECANCELED), "an ignored result reached its generation");
    cr_assert_eq(circuit_get_state(b), CIRCUIT_HALF_OPEN);
    cr_assert_eq(r.n, 2, "an ignored probe made a transition");
    call_ok(b, 200); /* the slot is free again */
    cr_assert_eq(circuit_get_state(b), CIRCUIT_HALF_OPEN);
    call_ok(b, 200);
    cr_assert_eq(circuit_get_state(b), CIRCUIT_CLOSED);
    cr_assert_eq(r.t[2].counts.successes, 2);
    cr_assert_eq(r.t[2].counts.consecutive_successes, 2);
    cr_assert_eq(r.t[2].counts.failures, 0);
    circuit_free(b);
}

Test(presets, classify_http_in_a_breaker_5xx_and_429_trip_4xx_do_not)
{
    circuit_consecutive p;
    cr_assert_eq(circuit_consecutive_init(&p, 3, 1, NULL, 0), 0);
    rec r = {0};
    circuit_breaker *b = breaker((circuit_config){10, 1, SEC, SEC}, circuit_consecutive_policy(&p),
                                 circuit_classify_http, &r);
    call_ok(b, 503);
    call_ok(b, 404); /* the dependency answered: ends the run */
    call_ok(b, 502);
    call_ok(b, -ECANCELED); /* neither */
    call_ok(b, 504);
    cr_assert_eq(circuit_get_state(b), CIRCUIT_CLOSED);
    call_ok(b, 429);
    cr_assert_eq(circuit_get_state(b), CIRCUIT_OPEN);
    cr_assert_eq(r.t[0].counts.failures, 4);
    cr_assert_eq(r.t[0].counts.successes, 1);
    cr_assert_eq(r.t[0].counts.consecutive_failures, 3);
    circuit_free(b);
}
