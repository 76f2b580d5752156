/*
 * "Coming from another breaker" (README): one test per table row, each
 * reproducing the documented behaviour through a real breaker on the test
 * clock (SPEC TM3). Test names follow the rows; a SPEC rule id appears where
 * the test pins that rule.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "circuit.h"
#include "circuit_presets.h"
#include "testing.h"

#define NS INT64_C(1)
#define MS INT64_C(1000000)
#define SEC INT64_C(1000000000)
#define START_NS INT64_C(1000000000)

/* ---- helpers ------------------------------------------------------------- */

#define MAX_REC 32

typedef struct rec {
    circuit_transition t[MAX_REC];
    int n;
    circuit_breaker *b;   /* for observers that call back into the breaker */
    const char *name;     /* gobreaker's Settings.Name, carried in observe_arg */
    circuit_state seen_state[MAX_REC];
    bool nested_allow_admitted[MAX_REC];
} rec;

static void observe_rec(void *arg, void *call_ctx, const circuit_transition *t)
{
    (void)call_ctx;
    rec *r = arg;
    if (r->n < MAX_REC)
        r->t[r->n] = *t;
    r->n++;
}

static void setup(void)
{
    circuit_test_clock_use_real(false);
    circuit_test_clock_set(START_NS);
}

TestSuite(compat, .init = setup);

static circuit_config config(int window, int probes, int64_t open_for_ns, int64_t probe_timeout_ns)
{
    circuit_config c = {window, probes, open_for_ns, probe_timeout_ns};
    return c;
}

static circuit_breaker *breaker_with(circuit_config c, circuit_policy p, circuit_classify_fn cls,
                                     circuit_observe_fn obs, rec *r)
{
    circuit_spec s = {
        .config = c,
        .policy = p,
        .classify = cls,
        .classify_arg = NULL,
        .observe = obs,
        .observe_arg = r,
    };
    circuit_breaker *b = NULL;
    char err[256] = "";
    int rc = circuit_new(&b, &s, err, sizeof err);
    cr_assert_eq(rc, 0, "circuit_new: %d %s", rc, err);
    cr_assert_not_null(b);
    if (r != NULL)
        r->b = b;
    return b;
}

static circuit_breaker *breaker(circuit_config c, circuit_policy p, circuit_classify_fn cls, rec *r)
{
    return breaker_with(c, p, cls, observe_rec, r);
}

static circuit_policy consecutive(circuit_consecutive *p, int64_t failures, int64_t successes)
{
    char err[256];
    cr_assert_eq(circuit_consecutive_init(p, failures, successes, err, sizeof err), 0, "%s", err);
    return circuit_consecutive_policy(p);
}

static circuit_policy failure_rate(circuit_failure_rate *p, const circuit_config *c,
                                   int64_t min_results, double ratio, int64_t successes)
{
    char err[256];
    cr_assert_eq(circuit_failure_rate_init(p, c, min_results, ratio, successes, err, sizeof err),
                 0, "%s", err);
    return circuit_failure_rate_policy(p);
}

/* One whole call: allow, then done straight away. Returns whether it was
 * admitted; an admitted call's result must reach its own generation. */
static bool call(circuit_breaker *b, int result)
{
    circuit_ticket t;
    circuit_rejection rej;
    if (!circuit_allow(b, NULL, &t, &rej))
        return false;
    cr_assert(circuit_done(&t, result), "a result settled at once was discarded");
    return true;
}

static void admitted(circuit_breaker *b, int result)
{
    cr_assert(call(b, result), "call rejected while %s", circuit_state_name(circuit_get_state(b)));
}

static circuit_rejection rejected(circuit_breaker *b)
{
    circuit_ticket t;
    circuit_rejection rej = {0, -1};
    cr_assert_not(circuit_allow(b, NULL, &t, &rej), "call admitted while %s",
                  circuit_state_name(circuit_get_state(b)));
    return rej;
}

static void begin(circuit_breaker *b, circuit_ticket *t)
{
    circuit_rejection rej;
    cr_assert(circuit_allow(b, NULL, t, &rej), "call rejected while %s",
              circuit_state_name(circuit_get_state(b)));
}

static void assert_transition(const rec *r, int i, circuit_state from, circuit_state to)
{
    cr_assert_gt(r->n, i, "transition %d not delivered (%d so far)", i + 1, r->n);
    cr_assert_eq(r->t[i].from, from, "transition %d from %s, want %s", i + 1,
                 circuit_state_name(r->t[i].from), circuit_state_name(from));
    cr_assert_eq(r->t[i].to, to, "transition %d to %s, want %s", i + 1,
                 circuit_state_name(r->t[i].to), circuit_state_name(to));
    cr_assert_eq(r->t[i].generation, (uint64_t)(i + 1));
}

static void assert_state(circuit_breaker *b, circuit_state want)
{
    circuit_state s = circuit_get_state(b);
    cr_assert_eq(s, want, "state %s, want %s", circuit_state_name(s), circuit_state_name(want));
}

/* ======================================================================== */
/* sony/gobreaker                                                            */
/* ======================================================================== */

Test(compat, gobreaker_ready_to_trip_default_more_than_5_consecutive)
{
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(100, 1, 60 * SEC, 10 * SEC), consecutive(&p, 6, 1),
                                 circuit_classify_errno, &r);
    for (int i = 0; i < 5; i++)
        admitted(b, -EIO);
    admitted(b, 0); /* a success ends the run: 5 failures are not "more than 5" */
    for (int i = 0; i < 5; i++)
        admitted(b, -EIO);
    assert_state(b, CIRCUIT_CLOSED); /* 10 failures in total, 5 in a row */
    cr_assert_eq(r.n, 0);
    admitted(b, -EIO); /* the 6th in a row */
    assert_state(b, CIRCUIT_OPEN);
    assert_transition(&r, 0, CIRCUIT_CLOSED, CIRCUIT_OPEN);
    cr_assert_eq(r.t[0].counts.consecutive_failures, 6);
    cr_assert_eq(r.t[0].counts.failures, 11);
    cr_assert_eq(r.t[0].counts.successes, 1);
    cr_assert_eq(rejected(b).state, CIRCUIT_OPEN);
    circuit_free(b);
}

/* A gobreaker-style ReadyToTrip: "at least 3 results, at least 2 failures". */
static circuit_counts g_asked[64];
static int g_asks;

static bool trip_two_of_three(void *arg, const circuit_counts *c)
{
    (void)arg;
    if (g_asks < 64)
        g_asked[g_asks] = *c;
    g_asks++;
    return c->successes + c->failures >= 3 && c->failures >= 2;
}

static circuit_state probe_close_on_success(void *arg, const circuit_counts *c)
{
    (void)arg;
    if (c->failures > 0)
        return CIRCUIT_OPEN;
    return c->successes > 0 ? CIRCUIT_CLOSED : CIRCUIT_HALF_OPEN;
}

Test(compat, gobreaker_ready_to_trip_custom_counts_asked_after_every_result)
{
    rec r = {0};
    circuit_policy pol = {trip_two_of_three, probe_close_on_success, NULL};
    circuit_breaker *b = breaker(config(3, 1, SEC, SEC), pol, circuit_classify_errno, &r);
    admitted(b, -EIO);
    admitted(b, -EIO);
    assert_state(b, CIRCUIT_CLOSED);
    /* gobreaker would not ask ReadyToTrip after a success; libcircuit does
     * (SPEC S2), so this success trips: the window now holds 3 results. */
    admitted(b, 0);
    assert_state(b, CIRCUIT_OPEN);
    cr_assert_geq(g_asks, 3);
    const circuit_counts *last = &g_asked[(g_asks < 64 ? g_asks : 64) - 1];
    cr_assert_eq(last->successes, 1);
    cr_assert_eq(last->failures, 2);
    cr_assert_eq(last->consecutive_successes, 1);
    cr_assert_eq(last->consecutive_failures, 0);
    assert_transition(&r, 0, CIRCUIT_CLOSED, CIRCUIT_OPEN);
    cr_assert_eq(r.t[0].counts.successes, 1);
    cr_assert_eq(r.t[0].counts.failures, 2);
    circuit_free(b);
}

Test(compat, gobreaker_max_requests_is_probes_and_successes)
{
    /* MaxRequests = 3 -> probes = 3 and successes = 3 */
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 3, SEC, 10 * SEC), consecutive(&p, 1, 3),
                                 circuit_classify_errno, &r);
    admitted(b, -EIO);
    circuit_test_clock_advance(SEC);
    circuit_ticket a, bb, c, d;
    begin(b, &a);
    begin(b, &bb);
    begin(b, &c);
    circuit_rejection rej = rejected(b); /* ErrTooManyRequests */
    cr_assert_eq(rej.state, CIRCUIT_HALF_OPEN);
    cr_assert_eq(rej.retry_after_ns, 0);
    cr_assert(circuit_done(&a, 0));
    assert_state(b, CIRCUIT_HALF_OPEN);
    /* the difference: a settled probe frees its slot (probes is "in flight") */
    begin(b, &d);
    cr_assert(circuit_done(&bb, 0));
    assert_state(b, CIRCUIT_HALF_OPEN);
    cr_assert(circuit_done(&c, 0)); /* third success in a row closes */
    assert_state(b, CIRCUIT_CLOSED);
    assert_transition(&r, 2, CIRCUIT_HALF_OPEN, CIRCUIT_CLOSED);
    cr_assert_eq(r.t[2].counts.consecutive_successes, 3);
    cr_assert_not(circuit_done(&d, 0), "a probe settled after the close is late");
    cr_assert_eq(r.n, 3);
    circuit_free(b);

    /* gobreaker turns MaxRequests 0 into 1; libcircuit refuses it */
    circuit_consecutive q;
    char err[256];
    cr_assert_eq(circuit_consecutive_init(&q, 1, 0, err, sizeof err), EINVAL);
    cr_assert(strstr(err, "successes = 0") != NULL, "%s", err);
    circuit_spec s = {.config = config(10, 0, SEC, SEC),
                      .policy = consecutive(&p, 1, 1),
                      .classify = circuit_classify_errno,
                      .observe = observe_rec,
                      .observe_arg = &r};
    circuit_breaker *nb = (circuit_breaker *)(uintptr_t)1; /* CFG2: set to NULL */
    cr_assert_eq(circuit_new(&nb, &s, err, sizeof err), EINVAL);
    cr_assert_null(nb);
    cr_assert(strstr(err, "probes") != NULL, "%s", err);
}

Test(compat, gobreaker_half_open_failure_reopens_successes_close)
{
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 2, SEC, 10 * SEC), consecutive(&p, 1, 2),
                                 circuit_classify_errno, &r);
    admitted(b, -EIO);
    circuit_test_clock_advance(SEC);
    circuit_ticket a, c;
    begin(b, &a);
    begin(b, &c);
    cr_assert(circuit_done(&a, 0));
    circuit_test_clock_advance(5 * MS);
    cr_assert(circuit_done(&c, -EIO)); /* S4: any failed probe reopens */
    assert_state(b, CIRCUIT_OPEN);
    assert_transition(&r, 2, CIRCUIT_HALF_OPEN, CIRCUIT_OPEN);
    cr_assert_eq(r.t[2].counts.successes, 1);
    cr_assert_eq(r.t[2].counts.failures, 1);
    /* a full open period from the failed probe */
    cr_assert_eq(rejected(b).retry_after_ns, SEC);
    circuit_test_clock_advance(SEC - 1);
    cr_assert_eq(rejected(b).retry_after_ns, 1);
    circuit_test_clock_advance(1);
    admitted(b, 0);
    assert_state(b, CIRCUIT_HALF_OPEN);
    admitted(b, 0); /* 2 in a row */
    assert_state(b, CIRCUIT_CLOSED);
    assert_transition(&r, 4, CIRCUIT_HALF_OPEN, CIRCUIT_CLOSED);
    cr_assert_eq(r.t[4].counts.consecutive_successes, 2);
    circuit_free(b);
}

Test(compat, gobreaker_timeout_is_open_for_ns_exact_and_required)
{
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 1, 60 * SEC, SEC), consecutive(&p, 1, 1),
                                 circuit_classify_errno, &r);
    admitted(b, -EIO);
    circuit_test_clock_advance(60 * SEC - 1);
    circuit_rejection rej = rejected(b); /* TM2 */
    cr_assert_eq(rej.state, CIRCUIT_OPEN);
    cr_assert_eq(rej.retry_after_ns, 1);
    circuit_test_clock_advance(1);
    circuit_ticket t;
    begin(b, &t);
    assert_state(b, CIRCUIT_HALF_OPEN);
    assert_transition(&r, 1, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN);
    cr_assert(circuit_done(&t, 0));
    circuit_free(b);

    /* gobreaker turns Timeout <= 0 into 60 s; libcircuit refuses it (CFG1) */
    int64_t bad[] = {0, -1};
    for (size_t i = 0; i < 2; i++) {
        circuit_spec s = {.config = config(10, 1, bad[i], SEC),
                          .policy = consecutive(&p, 1, 1),
                          .classify = circuit_classify_errno,
                          .observe = observe_rec,
                          .observe_arg = &r};
        circuit_breaker *nb = NULL;
        char err[256] = "";
        cr_assert_eq(circuit_new(&nb, &s, err, sizeof err), EINVAL);
        cr_assert_null(nb);
        cr_assert(strstr(err, "open_for_ns") != NULL, "%s", err);
    }
}

Test(compat, gobreaker_interval_no_equivalent_counts_survive_idle_time)
{
    /* consecutive: a run is not cut by time */
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 1, SEC, SEC), consecutive(&p, 3, 1),
                                 circuit_classify_errno, &r);
    admitted(b, -EIO);
    admitted(b, -EIO);
    circuit_test_clock_advance(3600 * SEC); /* any Interval would have cleared the counts */
    admitted(b, -EIO);
    assert_state(b, CIRCUIT_OPEN);
    cr_assert_eq(r.t[0].counts.consecutive_failures, 3);
    circuit_free(b);

    /* failure rate: the window forgets by results, not by time */
    circuit_failure_rate fr;
    rec r2 = {0};
    circuit_config c = config(4, 1, SEC, SEC);
    circuit_breaker *b2 = breaker(c, failure_rate(&fr, &c, 4, 0.5, 1), circuit_classify_errno, &r2);
    admitted(b2, -EIO);
    circuit_test_clock_advance(3600 * SEC);
    for (int i = 0; i < 4; i++)
        admitted(b2, 0); /* these push the old failure out */
    admitted(b2, -EIO);
    assert_state(b2, CIRCUIT_CLOSED); /* window: S S S F */
    circuit_test_clock_advance(3600 * SEC);
    admitted(b2, -EIO); /* window: S S F F, however far apart in time */
    assert_state(b2, CIRCUIT_OPEN);
    cr_assert_eq(r2.t[0].counts.failures, 2);
    cr_assert_eq(r2.t[0].counts.successes, 2);
    circuit_free(b2);
}

/* OnStateChange cannot call the breaker (it runs under the mutex); observe can
 * (SPEC O2). */
static void observe_calls_back(void *arg, void *call_ctx, const circuit_transition *t)
{
    rec *r = arg;
    int i = r->n;
    observe_rec(arg, call_ctx, t);
    if (i >= MAX_REC)
        return;
    r->seen_state[i] = circuit_get_state(r->b);
    /* While half-open the only probe slot belongs to the call that made the
     * transition; ask for a call only in the other states. */
    if (t->to == CIRCUIT_HALF_OPEN)
        return;
    circuit_ticket nt;
    circuit_rejection rej;
    r->nested_allow_admitted[i] = circuit_allow(r->b, NULL, &nt, &rej);
    if (r->nested_allow_admitted[i])
        circuit_release(&nt);
}

Test(compat, gobreaker_on_state_change_is_observe_and_may_call_the_breaker)
{
    circuit_consecutive p;
    rec r = {0};
    r.name = "payments";
    circuit_breaker *b = breaker_with(config(10, 1, SEC, SEC), consecutive(&p, 2, 1),
                                      circuit_classify_errno, observe_calls_back, &r);
    admitted(b, -EIO);
    admitted(b, -EIO);
    assert_transition(&r, 0, CIRCUIT_CLOSED, CIRCUIT_OPEN);
    cr_assert_eq(r.t[0].counts.failures, 2);
    cr_assert_eq(r.seen_state[0], CIRCUIT_OPEN);
    cr_assert_not(r.nested_allow_admitted[0], "open breaker admitted a call from observe");
    circuit_test_clock_advance(SEC);
    admitted(b, 0);
    assert_transition(&r, 1, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN);
    assert_transition(&r, 2, CIRCUIT_HALF_OPEN, CIRCUIT_CLOSED);
    cr_assert_eq(r.seen_state[2], CIRCUIT_CLOSED);
    cr_assert(r.nested_allow_admitted[2], "closed breaker rejected a call from observe");
    cr_assert_eq(r.n, 3);
    circuit_free(b);
}

static circuit_outcome classify_enoent_is_success(void *arg, void *call_ctx, int result)
{
    if (result == -ENOENT)
        return CIRCUIT_SUCCESS;
    return circuit_classify_errno(arg, call_ctx, result);
}

Test(compat, gobreaker_is_successful_is_classify)
{
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 1, SEC, SEC), consecutive(&p, 2, 1),
                                 circuit_classify_errno, &r);
    admitted(b, -EIO);
    admitted(b, 0); /* default IsSuccessful: err == nil */
    admitted(b, -EIO);
    assert_state(b, CIRCUIT_CLOSED);
    admitted(b, -EIO);
    assert_state(b, CIRCUIT_OPEN);
    circuit_free(b);

    /* a custom IsSuccessful: "not found" is a good answer */
    rec r2 = {0};
    circuit_breaker *b2 = breaker(config(10, 1, SEC, SEC), consecutive(&p, 2, 1),
                                  classify_enoent_is_success, &r2);
    admitted(b2, -EIO);
    admitted(b2, -ENOENT);
    admitted(b2, -EIO);
    assert_state(b2, CIRCUIT_CLOSED);
    admitted(b2, -EIO);
    assert_state(b2, CIRCUIT_OPEN);
    cr_assert_eq(r2.t[0].counts.successes, 1);
    circuit_free(b2);
}

Test(compat, gobreaker_is_excluded_is_ignored)
{
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 1, SEC, 10 * SEC), consecutive(&p, 2, 1),
                                 circuit_classify_errno, &r);
    admitted(b, -EIO);
    admitted(b, -ECANCELED); /* C5: neither counted nor ending the run */
    admitted(b, -EIO);
    assert_state(b, CIRCUIT_OPEN);
    cr_assert_eq(r.t[0].counts.failures, 2);
    cr_assert_eq(r.t[0].counts.successes, 0);
    cr_assert_eq(r.t[0].counts.consecutive_failures, 2);

    /* half-open: an ignored probe frees its slot and decides nothing */
    circuit_test_clock_advance(SEC);
    circuit_ticket t;
    begin(b, &t);
    rejected(b);
    cr_assert(circuit_done(&t, -ECANCELED));
    assert_state(b, CIRCUIT_HALF_OPEN);
    admitted(b, 0);
    assert_state(b, CIRCUIT_CLOSED);
    assert_transition(&r, 2, CIRCUIT_HALF_OPEN, CIRCUIT_CLOSED);
    cr_assert_eq(r.t[2].counts.successes, 1);
    cr_assert_eq(r.t[2].counts.failures, 0);
    circuit_free(b);
}

Test(compat, gobreaker_err_open_state_and_too_many_requests_are_rejections)
{
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 1, 2 * SEC, 10 * SEC), consecutive(&p, 1, 1),
                                 circuit_classify_errno, &r);
    admitted(b, -EIO);
    circuit_test_clock_advance(500 * MS);
    circuit_rejection rej = rejected(b); /* ErrOpenState */
    cr_assert_eq(rej.state, CIRCUIT_OPEN);
    cr_assert_eq(rej.retry_after_ns, 1500 * MS);
    char text[128];
    cr_assert_gt(circuit_rejection_format(&rej, text, sizeof text), 0);
    cr_assert(strstr(text, "open") != NULL, "%s", text);
    circuit_test_clock_advance(1500 * MS);
    circuit_ticket t;
    begin(b, &t);
    rej = rejected(b); /* ErrTooManyRequests */
    cr_assert_eq(rej.state, CIRCUIT_HALF_OPEN);
    cr_assert_eq(rej.retry_after_ns, 0);
    cr_assert_gt(circuit_rejection_format(&rej, text, sizeof text), 0);
    cr_assert(strstr(text, "half-open") != NULL, "%s", text);
    cr_assert(circuit_done(&t, 0));
    circuit_free(b);
}

Test(compat, gobreaker_two_step_is_allow_and_done_late_result_reported)
{
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 1, SEC, 10 * SEC), consecutive(&p, 1, 1),
                                 circuit_classify_errno, &r);
    circuit_ticket a, c;
    begin(b, &a);
    begin(b, &c);
    cr_assert(circuit_done(&c, -EIO)); /* trips */
    assert_state(b, CIRCUIT_OPEN);
    /* T2: gobreaker drops this silently; libcircuit says so */
    cr_assert_not(circuit_done(&a, 0));
    assert_state(b, CIRCUIT_OPEN);
    cr_assert_eq(r.n, 1);

    /* release settles without a result and frees the probe slot */
    circuit_test_clock_advance(SEC);
    circuit_ticket t;
    begin(b, &t);
    rejected(b);
    circuit_release(&t);
    assert_state(b, CIRCUIT_HALF_OPEN);
    admitted(b, 0);
    assert_state(b, CIRCUIT_CLOSED);
    cr_assert_eq(r.t[2].counts.successes, 1);
    circuit_free(b);
}

/* The shape of gobreaker's Execute in C: the guard settles the ticket on any
 * way out of the scope. */
static bool guarded_call_that_bails_out(circuit_breaker *b)
{
    CIRCUIT_TICKET_GUARD(t);
    circuit_rejection rej;
    if (!circuit_allow(b, NULL, &t, &rej))
        return false;
    return true; /* left without circuit_done: the "panic" path */
}

static void *thread_exits_between_allow_and_done(void *arg)
{
    circuit_breaker *b = arg;
    CIRCUIT_TICKET_GUARD(t);
    circuit_rejection rej;
    if (circuit_allow(b, NULL, &t, &rej))
        pthread_exit((void *)1);
    return NULL;
}

Test(compat, gobreaker_execute_panic_is_guard_counts_nothing)
{
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 1, SEC, 10 * SEC), consecutive(&p, 1, 1),
                                 circuit_classify_errno, &r);
    cr_assert(guarded_call_that_bails_out(b));
    assert_state(b, CIRCUIT_CLOSED); /* gobreaker would have counted a failure and opened */
    admitted(b, -EIO);
    circuit_test_clock_advance(SEC);

    /* P3: half-open, the guard frees the only probe slot at once */
    cr_assert(guarded_call_that_bails_out(b));
    assert_state(b, CIRCUIT_HALF_OPEN);
    pthread_t th;
    void *ret = NULL;
    cr_assert_eq(pthread_create(&th, NULL, thread_exits_between_allow_and_done, b), 0);
    cr_assert_eq(pthread_join(th, &ret), 0);
    cr_assert_eq(ret, (void *)1, "the thread was not admitted as a probe");
    assert_state(b, CIRCUIT_HALF_OPEN);
    admitted(b, 0);
    assert_state(b, CIRCUIT_CLOSED);
    assert_transition(&r, 2, CIRCUIT_HALF_OPEN, CIRCUIT_CLOSED);
    cr_assert_eq(r.t[2].counts.successes, 1);
    cr_assert_eq(r.t[2].counts.failures, 0);
    cr_assert_eq(r.t[2].counts.timed_out, 0);
    circuit_free(b);
}

Test(compat, gobreaker_state_is_pure_read)
{
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 1, SEC, SEC), consecutive(&p, 1, 1),
                                 circuit_classify_errno, &r);
    admitted(b, -EIO);
    circuit_test_clock_advance(SEC - 1);
    assert_state(b, CIRCUIT_OPEN);
    circuit_test_clock_advance(1);
    assert_state(b, CIRCUIT_HALF_OPEN); /* S5 */
    assert_state(b, CIRCUIT_HALF_OPEN);
    cr_assert_eq(r.n, 1, "circuit_get_state made a transition");
    cr_assert_eq(circuit_test_pending(b), 0);
    admitted(b, 0);
    assert_transition(&r, 1, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN);
    assert_transition(&r, 2, CIRCUIT_HALF_OPEN, CIRCUIT_CLOSED);
    circuit_free(b);
}

Test(compat, gobreaker_distributed_no_equivalent_breakers_are_independent)
{
    circuit_consecutive p;
    rec r1 = {0}, r2 = {0};
    circuit_breaker *host1 = breaker(config(10, 1, SEC, SEC), consecutive(&p, 3, 1),
                                     circuit_classify_errno, &r1);
    circuit_breaker *host2 = breaker(config(10, 1, SEC, SEC), consecutive(&p, 3, 1),
                                     circuit_classify_errno, &r2);
    for (int i = 0; i < 3; i++)
        admitted(host1, -EIO);
    assert_state(host1, CIRCUIT_OPEN);
    assert_state(host2, CIRCUIT_CLOSED);
    admitted(host2, -EIO);
    admitted(host2, -EIO);
    assert_state(host2, CIRCUIT_CLOSED);
    admitted(host2, -EIO); /* its own third failure */
    assert_state(host2, CIRCUIT_OPEN);
    cr_assert_eq(r1.n, 1);
    cr_assert_eq(r2.n, 1);
    circuit_free(host1);
    circuit_free(host2);
}

/* ======================================================================== */
/* pybreaker and its R port                                                  */
/* ======================================================================== */

Test(compat, pybreaker_fail_max_opens_on_n_in_a_row_not_n_in_total)
{
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 1, 60 * SEC, SEC), consecutive(&p, 2, 1),
                                 circuit_classify_errno, &r);
    admitted(b, -EIO);
    admitted(b, 0);
    admitted(b, -EIO);
    admitted(b, 0);
    assert_state(b, CIRCUIT_CLOSED); /* 2 errors in total, never in a row */
    admitted(b, -EIO);
    admitted(b, -EIO);
    assert_state(b, CIRCUIT_OPEN);
    cr_assert_eq(r.t[0].counts.failures, 4);
    cr_assert_eq(r.t[0].counts.consecutive_failures, 2);
    circuit_free(b);
}

Test(compat, pybreaker_reset_timeout_is_open_for_ns)
{
    /* reset_timeout = 60 (s) -> open_for_ns = 60e9 */
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 1, 60 * SEC, SEC), consecutive(&p, 1, 1),
                                 circuit_classify_errno, &r);
    admitted(b, -EIO);
    cr_assert_eq(rejected(b).retry_after_ns, 60 * SEC);
    circuit_test_clock_advance(60 * SEC - 1);
    cr_assert_eq(rejected(b).retry_after_ns, 1);
    circuit_test_clock_advance(1);
    admitted(b, 0);
    assert_state(b, CIRCUIT_CLOSED);
    circuit_free(b);
}

Test(compat, pybreaker_half_open_admits_one_trial_call)
{
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 1, SEC, 10 * SEC), consecutive(&p, 1, 1),
                                 circuit_classify_errno, &r);
    admitted(b, -EIO);
    circuit_test_clock_advance(SEC);
    circuit_ticket trial;
    begin(b, &trial);
    for (int i = 0; i < 3; i++) {
        circuit_rejection rej = rejected(b);
        cr_assert_eq(rej.state, CIRCUIT_HALF_OPEN);
        cr_assert_eq(rej.retry_after_ns, 0);
    }
    cr_assert(circuit_done(&trial, 0));
    admitted(b, 0);
    admitted(b, 0);
    circuit_free(b);
}

Test(compat, pybreaker_trial_success_closes)
{
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 1, SEC, 10 * SEC), consecutive(&p, 1, 1),
                                 circuit_classify_errno, &r);
    admitted(b, -EIO);
    circuit_test_clock_advance(SEC);
    admitted(b, 0);
    assert_state(b, CIRCUIT_CLOSED);
    assert_transition(&r, 2, CIRCUIT_HALF_OPEN, CIRCUIT_CLOSED);
    cr_assert_eq(r.t[2].counts.consecutive_successes, 1);
    circuit_free(b);

    /* success_threshold = 3 -> successes = 3: three trials in a row */
    rec r2 = {0};
    circuit_breaker *b2 = breaker(config(10, 1, SEC, 10 * SEC), consecutive(&p, 1, 3),
                                  circuit_classify_errno, &r2);
    admitted(b2, -EIO);
    circuit_test_clock_advance(SEC);
    admitted(b2, 0);
    admitted(b2, 0);
    assert_state(b2, CIRCUIT_HALF_OPEN);
    admitted(b2, 0);
    assert_state(b2, CIRCUIT_CLOSED);
    circuit_free(b2);
}

Test(compat, pybreaker_trial_failure_reopens_for_full_period)
{
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 1, 30 * SEC, 60 * SEC), consecutive(&p, 1, 1),
                                 circuit_classify_errno, &r);
    admitted(b, -EIO);
    circuit_test_clock_advance(30 * SEC);
    circuit_ticket trial;
    begin(b, &trial);
    circuit_test_clock_advance(7 * SEC); /* the trial takes a while */
    cr_assert(circuit_done(&trial, -EIO));
    assert_state(b, CIRCUIT_OPEN);
    cr_assert_eq(rejected(b).retry_after_ns, 30 * SEC); /* from the failure, not the trial's start */
    circuit_test_clock_advance(30 * SEC - 1);
    cr_assert_eq(rejected(b).retry_after_ns, 1);
    circuit_test_clock_advance(1);
    admitted(b, 0);
    assert_state(b, CIRCUIT_CLOSED);
    circuit_free(b);
}

/* The guarded function counts its runs, like `calls` in the R vignette. */
static int g_service_runs;

static int service_down(void)
{
    g_service_runs++;
    return -EIO;
}

/* Returns the call's own result, or sets *was_rejected. */
static int guarded(circuit_breaker *b, int (*fn)(void), bool *was_rejected, circuit_rejection *rej)
{
    CIRCUIT_TICKET_GUARD(t);
    *was_rejected = !circuit_allow(b, NULL, &t, rej);
    if (*was_rejected)
        return 0;
    int rc = fn();
    circuit_done(&t, rc);
    return rc;
}

Test(compat, pybreaker_rejection_is_told_apart_from_the_call_error)
{
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 1, SEC, SEC), consecutive(&p, 2, 1),
                                 circuit_classify_errno, &r);
    bool rej_flag;
    circuit_rejection rej;
    cr_assert_eq(guarded(b, service_down, &rej_flag, &rej), -EIO);
    cr_assert_not(rej_flag);
    /* the call that trips still returns its own error, never a rewritten one */
    cr_assert_eq(guarded(b, service_down, &rej_flag, &rej), -EIO);
    cr_assert_not(rej_flag);
    assert_state(b, CIRCUIT_OPEN);
    guarded(b, service_down, &rej_flag, &rej);
    cr_assert(rej_flag);
    cr_assert_eq(rej.state, CIRCUIT_OPEN);
    cr_assert_eq(g_service_runs, 2, "the service ran while the circuit was open");
    char text[128];
    cr_assert_gt(circuit_rejection_format(&rej, text, sizeof text), 0);
    cr_assert(strncmp(text, "circuit open", 12) == 0, "%s", text);
    circuit_free(b);
}

static circuit_outcome classify_enoent_ignored(void *arg, void *call_ctx, int result)
{
    if (result == -ENOENT)
        return CIRCUIT_IGNORED;
    return circuit_classify_errno(arg, call_ctx, result);
}

Test(compat, pybreaker_exclude_is_classify_success)
{
    /* exclude=[NotFound]: counted as a success, so it resets the count */
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 1, SEC, SEC), consecutive(&p, 2, 1),
                                 classify_enoent_is_success, &r);
    admitted(b, -EIO);
    admitted(b, -ENOENT);
    admitted(b, -EIO);
    assert_state(b, CIRCUIT_CLOSED);
    admitted(b, -EIO);
    assert_state(b, CIRCUIT_OPEN);
    circuit_free(b);

    /* IGNORED is a different thing: the run goes on across it */
    rec r2 = {0};
    circuit_breaker *b2 = breaker(config(10, 1, SEC, SEC), consecutive(&p, 2, 1),
                                  classify_enoent_ignored, &r2);
    admitted(b2, -EIO);
    admitted(b2, -ENOENT);
    admitted(b2, -EIO);
    assert_state(b2, CIRCUIT_OPEN);
    circuit_free(b2);
}

Test(compat, pybreaker_async_calls_started_before_settling_all_go_through)
{
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 1, 60 * SEC, SEC), consecutive(&p, 2, 1),
                                 circuit_classify_errno, &r);
    circuit_ticket t[5];
    for (int i = 0; i < 5; i++)
        begin(b, &t[i]); /* nothing has settled yet: all go through */
    cr_assert(circuit_done(&t[0], -EIO));
    cr_assert(circuit_done(&t[1], -EIO));
    assert_state(b, CIRCUIT_OPEN);
    for (int i = 2; i < 5; i++)
        cr_assert_not(circuit_done(&t[i], -EIO), "result %d of the closed state counted after it", i);
    cr_assert_eq(r.n, 1);
    cr_assert_eq(r.t[0].counts.failures, 2);
    cr_assert_eq(rejected(b).retry_after_ns, 60 * SEC);
    circuit_free(b);
}

Test(compat, pybreaker_async_only_one_trial_while_half_open)
{
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 1, SEC, 10 * SEC), consecutive(&p, 1, 1),
                                 circuit_classify_errno, &r);
    admitted(b, -EIO);
    circuit_test_clock_advance(SEC);
    circuit_ticket trial;
    begin(b, &trial);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(rejected(b).state, CIRCUIT_HALF_OPEN);
    cr_assert(circuit_done(&trial, -ECANCELED)); /* settles, decides nothing */
    assert_state(b, CIRCUIT_HALF_OPEN);
    circuit_ticket trial2;
    begin(b, &trial2);
    cr_assert_eq(rejected(b).state, CIRCUIT_HALF_OPEN);
    cr_assert(circuit_done(&trial2, 0));
    assert_state(b, CIRCUIT_CLOSED);
    circuit_free(b);
}

Test(compat, pybreaker_async_call_started_before_open_does_not_close_it)
{
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 1, SEC, 10 * SEC), consecutive(&p, 2, 1),
                                 circuit_classify_errno, &r);
    circuit_ticket early1, early2;
    begin(b, &early1);
    begin(b, &early2);
    admitted(b, -EIO);
    admitted(b, -EIO);
    assert_state(b, CIRCUIT_OPEN);
    cr_assert_not(circuit_done(&early1, 0)); /* T2: late, discarded */
    assert_state(b, CIRCUIT_OPEN);
    circuit_test_clock_advance(SEC);
    cr_assert_not(circuit_done(&early2, 0)); /* even while half-open */
    assert_state(b, CIRCUIT_HALF_OPEN);
    for (int i = 0; i < r.n; i++)
        cr_assert_neq(r.t[i].to, CIRCUIT_CLOSED, "a late success closed the breaker");
    admitted(b, 0); /* a real trial */
    assert_state(b, CIRCUIT_CLOSED);
    cr_assert_eq(r.n, 3);
    cr_assert_eq(r.t[2].counts.successes, 1);
    circuit_free(b);
}

Test(compat, pybreaker_async_trial_never_settling_is_abandoned_after_probe_timeout)
{
    /* reset_after = 30 s for both the open period and the abandoned trial */
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 1, 30 * SEC, 30 * SEC), consecutive(&p, 1, 1),
                                 circuit_classify_errno, &r);
    admitted(b, -EIO);
    circuit_test_clock_advance(30 * SEC);
    circuit_ticket lost;
    begin(b, &lost);
    circuit_test_clock_advance(30 * SEC - 1);
    cr_assert_eq(rejected(b).state, CIRCUIT_HALF_OPEN);
    circuit_test_clock_advance(1); /* P1: the lost trial is abandoned */
    circuit_ticket next;
    begin(b, &next);
    assert_state(b, CIRCUIT_HALF_OPEN); /* a timeout keeps probing */
    cr_assert(circuit_done(&next, 0));
    assert_state(b, CIRCUIT_CLOSED);
    assert_transition(&r, 2, CIRCUIT_HALF_OPEN, CIRCUIT_CLOSED);
    cr_assert_eq(r.t[2].counts.timed_out, 1);
    cr_assert_eq(r.t[2].counts.successes, 1);
    cr_assert_not(circuit_done(&lost, -EIO), "the abandoned trial's late result counted");
    assert_state(b, CIRCUIT_CLOSED);
    circuit_free(b);

    /* P2: the abandoned trial's result still counts while still half-open */
    rec r2 = {0};
    circuit_breaker *b2 = breaker(config(10, 1, 30 * SEC, 30 * SEC), consecutive(&p, 1, 1),
                                  circuit_classify_errno, &r2);
    admitted(b2, -EIO);
    circuit_test_clock_advance(30 * SEC);
    begin(b2, &lost);
    circuit_test_clock_advance(45 * SEC);
    cr_assert(circuit_done(&lost, 0));
    assert_state(b2, CIRCUIT_CLOSED);
    cr_assert_eq(r2.t[2].counts.timed_out, 1);
    cr_assert_eq(r2.t[2].counts.successes, 1);
    circuit_free(b2);
}

/* ======================================================================== */
/* resilience4j                                                              */
/* ======================================================================== */

Test(compat, resilience4j_failure_rate_threshold_equal_rate_trips)
{
    /* failureRateThreshold = 50 -> ratio 50 / 100.0, min 10, window 10 */
    circuit_config c = config(10, 1, SEC, SEC);
    circuit_failure_rate fr;
    rec r = {0};
    circuit_breaker *b = breaker(c, failure_rate(&fr, &c, 10, 50 / 100.0, 1),
                                 circuit_classify_errno, &r);
    for (int i = 0; i < 5; i++)
        admitted(b, 0);
    for (int i = 0; i < 4; i++)
        admitted(b, -EIO);
    assert_state(b, CIRCUIT_CLOSED); /* 9 results: below the minimum */
    admitted(b, -EIO);               /* 5 of 10: exactly 50% */
    assert_state(b, CIRCUIT_OPEN);
    cr_assert_eq(r.t[0].counts.failures, 5);
    cr_assert_eq(r.t[0].counts.successes, 5);
    circuit_free(b);

    /* 4 of 10 stays closed */
    rec r2 = {0};
    circuit_breaker *b2 = breaker(c, failure_rate(&fr, &c, 10, 50 / 100.0, 1),
                                  circuit_classify_errno, &r2);
    for (int i = 0; i < 6; i++)
        admitted(b2, 0);
    for (int i = 0; i < 4; i++)
        admitted(b2, -EIO);
    assert_state(b2, CIRCUIT_CLOSED);
    circuit_free(b2);

    /* a threshold whose binary value is a hair off: 7% of 100 */
    circuit_config c100 = config(100, 1, SEC, SEC);
    circuit_failure_rate fr7;
    rec r3 = {0};
    circuit_breaker *b3 = breaker(c100, failure_rate(&fr7, &c100, 100, 7 / 100.0, 1),
                                  circuit_classify_errno, &r3);
    for (int i = 0; i < 93; i++)
        admitted(b3, 0);
    for (int i = 0; i < 6; i++)
        admitted(b3, -EIO);
    assert_state(b3, CIRCUIT_CLOSED);
    admitted(b3, -EIO); /* 7 of 100 */
    assert_state(b3, CIRCUIT_OPEN);
    circuit_free(b3);
}

Test(compat, resilience4j_minimum_number_of_calls_is_min_results)
{
    circuit_config c = config(10, 1, SEC, SEC);
    circuit_failure_rate fr;
    rec r = {0};
    circuit_breaker *b = breaker(c, failure_rate(&fr, &c, 4, 0.5, 1), circuit_classify_errno, &r);
    admitted(b, -EIO);
    admitted(b, -EIO);
    admitted(b, -EIO);
    assert_state(b, CIRCUIT_CLOSED); /* 100% of 3: below the minimum */
    admitted(b, 0);                  /* S2: the 4th result trips, though a success */
    assert_state(b, CIRCUIT_OPEN);
    cr_assert_eq(r.t[0].counts.failures, 3);
    cr_assert_eq(r.t[0].counts.successes, 1);
    circuit_free(b);

    /* a minimum above the window could never be reached: EINVAL */
    char err[256];
    cr_assert_eq(circuit_failure_rate_init(&fr, &c, 11, 0.5, 1, err, sizeof err), EINVAL);
    cr_assert(strstr(err, "min_results = 11 (must be 1..10") != NULL, "%s", err);
}

Test(compat, resilience4j_count_based_sliding_window_is_window)
{
    circuit_config c = config(4, 1, SEC, SEC);
    circuit_failure_rate fr;
    rec r = {0};
    circuit_breaker *b = breaker(c, failure_rate(&fr, &c, 4, 0.5, 1), circuit_classify_errno, &r);
    for (int i = 0; i < 4; i++)
        admitted(b, 0);
    admitted(b, -EIO);
    assert_state(b, CIRCUIT_CLOSED); /* S S S F */
    admitted(b, -EIO);               /* S S F F: 50%; over all 6 calls it would be 33% */
    assert_state(b, CIRCUIT_OPEN);
    cr_assert_eq(r.t[0].counts.successes, 2); /* C1 */
    cr_assert_eq(r.t[0].counts.failures, 2);
    circuit_free(b);
}

Test(compat, resilience4j_time_based_window_out_of_scope_results_do_not_age)
{
    circuit_config c = config(4, 1, SEC, SEC);
    circuit_failure_rate fr;
    rec r = {0};
    circuit_breaker *b = breaker(c, failure_rate(&fr, &c, 4, 0.75, 1), circuit_classify_errno, &r);
    admitted(b, -EIO);
    admitted(b, -EIO);
    circuit_test_clock_advance(86400 * SEC); /* a day later: a time window would be empty */
    admitted(b, 0);
    assert_state(b, CIRCUIT_CLOSED);
    admitted(b, -EIO); /* F F S F: 75% of the latest 4 results */
    assert_state(b, CIRCUIT_OPEN);
    cr_assert_eq(r.t[0].counts.failures, 3);
    circuit_free(b);
}

Test(compat, resilience4j_slow_call_rate_out_of_scope_deadline_is_failure)
{
    circuit_config c = config(4, 1, SEC, SEC);
    circuit_failure_rate fr;
    rec r = {0};
    circuit_breaker *b = breaker(c, failure_rate(&fr, &c, 4, 0.5, 1), circuit_classify_errno, &r);
    /* a slow call that succeeds is a success: libcircuit does not time calls */
    circuit_ticket t;
    begin(b, &t);
    circuit_test_clock_advance(3600 * SEC);
    cr_assert(circuit_done(&t, 0));
    admitted(b, 0);
    admitted(b, -ETIMEDOUT); /* the caller's deadline ran out: a failure */
    assert_state(b, CIRCUIT_CLOSED);
    admitted(b, -ETIMEDOUT);
    assert_state(b, CIRCUIT_OPEN);
    cr_assert_eq(r.t[0].counts.failures, 2);
    cr_assert_eq(r.t[0].counts.successes, 2);
    circuit_free(b);
}

/* resilience4j's half-open rule as a probe function: wait for `permitted`
 * results, then reopen if the failure rate is at or above the threshold. */
typedef struct r4j_half_open {
    int64_t permitted;
    int64_t threshold_pct;
} r4j_half_open;

static bool trip_on_first_failure(void *arg, const circuit_counts *c)
{
    (void)arg;
    return c->failures > 0;
}

static circuit_state r4j_probe(void *arg, const circuit_counts *c)
{
    const r4j_half_open *p = arg;
    int64_t n = c->successes + c->failures;
    if (n < p->permitted)
        return CIRCUIT_HALF_OPEN;
    return 100 * c->failures >= p->threshold_pct * n ? CIRCUIT_OPEN : CIRCUIT_CLOSED;
}

Test(compat, resilience4j_permitted_calls_in_half_open_rate_probe_policy)
{
    r4j_half_open h = {4, 50};
    circuit_policy pol = {trip_on_first_failure, r4j_probe, &h};
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 4, SEC, 10 * SEC), pol, circuit_classify_errno, &r);
    admitted(b, -EIO);
    circuit_test_clock_advance(SEC);
    circuit_ticket t[4];
    for (int i = 0; i < 4; i++)
        begin(b, &t[i]);
    rejected(b); /* 4 permitted calls in flight */
    cr_assert(circuit_done(&t[0], 0));
    cr_assert(circuit_done(&t[1], -EIO));
    assert_state(b, CIRCUIT_HALF_OPEN); /* no decision before 4 results */
    cr_assert(circuit_done(&t[2], 0));
    cr_assert(circuit_done(&t[3], 0)); /* 1 of 4 failed: 25% < 50% */
    assert_state(b, CIRCUIT_CLOSED);
    cr_assert_eq(r.t[2].counts.failures, 1);
    cr_assert_eq(r.t[2].counts.successes, 3);

    admitted(b, -EIO);
    circuit_test_clock_advance(SEC);
    for (int i = 0; i < 4; i++)
        begin(b, &t[i]);
    cr_assert(circuit_done(&t[0], -EIO));
    cr_assert(circuit_done(&t[1], 0));
    cr_assert(circuit_done(&t[2], -EIO));
    assert_state(b, CIRCUIT_HALF_OPEN);
    cr_assert(circuit_done(&t[3], 0)); /* 2 of 4: 50% reopens */
    assert_state(b, CIRCUIT_OPEN);
    circuit_free(b);

    /* the preset decides at the first failed probe instead */
    circuit_failure_rate fr;
    circuit_config c = config(10, 4, SEC, 10 * SEC);
    rec r2 = {0};
    circuit_breaker *b2 = breaker(c, failure_rate(&fr, &c, 1, 0.5, 3), circuit_classify_errno, &r2);
    admitted(b2, -EIO);
    circuit_test_clock_advance(SEC);
    for (int i = 0; i < 4; i++)
        begin(b2, &t[i]);
    cr_assert(circuit_done(&t[0], 0));
    cr_assert(circuit_done(&t[1], -EIO));
    assert_state(b2, CIRCUIT_OPEN);
    cr_assert_not(circuit_done(&t[2], 0));
    cr_assert_not(circuit_done(&t[3], 0));
    circuit_free(b2);
}

Test(compat, resilience4j_max_wait_in_half_open_is_probe_timeout_per_probe)
{
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 2, SEC, 5 * SEC), consecutive(&p, 1, 1),
                                 circuit_classify_errno, &r);
    admitted(b, -EIO);
    circuit_test_clock_advance(SEC);
    circuit_ticket stuck1, stuck2, t1, t2;
    begin(b, &stuck1);
    begin(b, &stuck2);
    circuit_test_clock_advance(5 * SEC - 1);
    cr_assert_eq(rejected(b).state, CIRCUIT_HALF_OPEN);
    circuit_test_clock_advance(1); /* both slots come back */
    begin(b, &t1);
    begin(b, &t2);
    circuit_release(&t1);
    circuit_release(&t2);
    /* no deadline on the half-open state: a day without traffic, then a probe */
    circuit_test_clock_advance(86400 * SEC);
    assert_state(b, CIRCUIT_HALF_OPEN);
    admitted(b, 0);
    assert_state(b, CIRCUIT_CLOSED);
    assert_transition(&r, 2, CIRCUIT_HALF_OPEN, CIRCUIT_CLOSED);
    cr_assert_eq(r.t[2].counts.timed_out, 2);
    circuit_release(&stuck1);
    circuit_release(&stuck2);
    circuit_free(b);
}

Test(compat, resilience4j_wait_duration_in_open_state_is_open_for_ns)
{
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 1, 60 * SEC, SEC), consecutive(&p, 1, 1),
                                 circuit_classify_errno, &r);
    admitted(b, -EIO);
    cr_assert_eq(rejected(b).retry_after_ns, 60 * SEC);
    circuit_test_clock_advance(20 * SEC);
    cr_assert_eq(rejected(b).retry_after_ns, 40 * SEC);
    circuit_test_clock_advance(40 * SEC - 1);
    cr_assert_eq(rejected(b).retry_after_ns, 1);
    circuit_test_clock_advance(1);
    admitted(b, 0);
    circuit_free(b);
}

Test(compat, resilience4j_automatic_transition_get_state_reports_half_open_without_a_call)
{
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 1, 60 * SEC, SEC), consecutive(&p, 1, 1),
                                 circuit_classify_errno, &r);
    admitted(b, -EIO);
    circuit_test_clock_advance(67 * SEC);
    assert_state(b, CIRCUIT_HALF_OPEN); /* S5: no call needed to see it */
    cr_assert_eq(r.n, 1);                /* but nothing ran: no thread, no timer (TM1) */
    circuit_ticket t;
    begin(b, &t); /* O4: the next allow makes and delivers it */
    assert_transition(&r, 1, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN);
    cr_assert_eq(r.t[1].counts.failures, 0);
    cr_assert_eq(r.t[1].counts.successes, 0);
    cr_assert(circuit_done(&t, 0));
    circuit_free(b);
}

Test(compat, resilience4j_record_and_ignore_exceptions_is_classify)
{
    circuit_config c = config(10, 1, SEC, SEC);
    circuit_failure_rate fr;
    rec r = {0};
    circuit_breaker *b = breaker(c, failure_rate(&fr, &c, 4, 0.5, 1), circuit_classify_http, &r);
    admitted(b, 503);         /* recorded */
    admitted(b, -ECANCELED);  /* ignored */
    admitted(b, 404);         /* neither: success */
    admitted(b, 429);         /* recorded */
    admitted(b, -ECANCELED);
    assert_state(b, CIRCUIT_CLOSED); /* 3 results */
    admitted(b, 200);
    assert_state(b, CIRCUIT_OPEN); /* 2 of 4 */
    cr_assert_eq(r.t[0].counts.failures, 2);
    cr_assert_eq(r.t[0].counts.successes, 2);
    circuit_free(b);
}

/* ======================================================================== */
/* opossum                                                                   */
/* ======================================================================== */

typedef struct opossum_trip {
    int64_t pct;
    int64_t volume;
} opossum_trip;

static bool opossum_strictly_above(void *arg, const circuit_counts *c)
{
    const opossum_trip *o = arg;
    int64_t n = c->successes + c->failures;
    return n >= o->volume && 100 * c->failures > o->pct * n;
}

static circuit_state opossum_probe(void *arg, const circuit_counts *c)
{
    (void)arg;
    return probe_close_on_success(NULL, c);
}

Test(compat, opossum_error_threshold_percentage_is_strictly_above)
{
    circuit_config c = config(10, 1, SEC, SEC);
    circuit_failure_rate fr;
    rec r1 = {0}, r2 = {0};
    circuit_breaker *preset = breaker(c, failure_rate(&fr, &c, 10, 0.5, 1),
                                      circuit_classify_errno, &r1);
    opossum_trip o = {50, 10};
    circuit_policy pol = {opossum_strictly_above, opossum_probe, &o};
    circuit_breaker *opossum = breaker(c, pol, circuit_classify_errno, &r2);
    for (int i = 0; i < 5; i++) {
        admitted(preset, 0);
        admitted(opossum, 0);
    }
    for (int i = 0; i < 5; i++) {
        admitted(preset, -EIO);
        admitted(opossum, -EIO);
    }
    assert_state(preset, CIRCUIT_OPEN);    /* 50% >= 50% */
    assert_state(opossum, CIRCUIT_CLOSED); /* 50% is not > 50% */
    admitted(opossum, -EIO);               /* window: 4 S, 6 F */
    assert_state(opossum, CIRCUIT_OPEN);
    cr_assert_eq(r2.t[0].counts.failures, 6);
    circuit_free(preset);
    circuit_free(opossum);
}

Test(compat, opossum_volume_threshold_is_min_results)
{
    circuit_config c = config(20, 1, SEC, SEC);
    circuit_failure_rate fr;
    rec r = {0};
    circuit_breaker *b = breaker(c, failure_rate(&fr, &c, 5, 0.5, 1), circuit_classify_errno, &r);
    for (int i = 0; i < 4; i++)
        admitted(b, -EIO);
    admitted(b, -ECANCELED); /* not a result */
    assert_state(b, CIRCUIT_CLOSED);
    admitted(b, -EIO);
    assert_state(b, CIRCUIT_OPEN);
    cr_assert_eq(r.t[0].counts.failures, 5);
    circuit_free(b);
}

Test(compat, opossum_reset_timeout_single_trial)
{
    /* resetTimeout = 30000 (ms) */
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 1, 30000 * MS, 10 * SEC), consecutive(&p, 1, 1),
                                 circuit_classify_errno, &r);
    admitted(b, -EIO);
    circuit_test_clock_advance(30000 * MS);
    circuit_ticket trial;
    begin(b, &trial);
    rejected(b);
    cr_assert(circuit_done(&trial, -EIO)); /* failure reopens */
    assert_state(b, CIRCUIT_OPEN);
    circuit_test_clock_advance(30000 * MS);
    begin(b, &trial);
    rejected(b);
    cr_assert(circuit_done(&trial, 0)); /* success closes */
    assert_state(b, CIRCUIT_CLOSED);
    cr_assert_eq(r.n, 5);
    assert_transition(&r, 4, CIRCUIT_HALF_OPEN, CIRCUIT_CLOSED);
    circuit_free(b);
}

Test(compat, opossum_rolling_count_timeout_out_of_scope_count_window)
{
    /* opossum forgets failures older than its 10 s window; libcircuit keeps
     * them until newer results push them out */
    circuit_config c = config(6, 1, SEC, SEC);
    circuit_failure_rate fr;
    rec r = {0};
    circuit_breaker *b = breaker(c, failure_rate(&fr, &c, 6, 0.5, 1), circuit_classify_errno, &r);
    for (int i = 0; i < 3; i++)
        admitted(b, -EIO);
    circuit_test_clock_advance(11 * SEC);
    admitted(b, 0);
    admitted(b, 0);
    assert_state(b, CIRCUIT_CLOSED);
    admitted(b, 0); /* F F F S S S: 50% of the window */
    assert_state(b, CIRCUIT_OPEN);
    cr_assert_eq(r.t[0].counts.failures, 3);
    cr_assert_eq(r.t[0].counts.successes, 3);
    circuit_free(b);
}

/* ======================================================================== */
/* Retries: the breaker goes outside them                                    */
/* ======================================================================== */

static int g_attempts;

static int attempt_fails(void)
{
    g_attempts++;
    return -EIO;
}

static int with_retries(int (*fn)(void), int tries)
{
    int rc = 0;
    for (int i = 0; i < tries; i++) {
        rc = fn();
        if (rc == 0)
            break;
    }
    return rc;
}

Test(compat, retry_outside_the_breaker_counts_each_call_once)
{
    circuit_consecutive p;
    rec r = {0};
    circuit_breaker *b = breaker(config(10, 1, SEC, SEC), consecutive(&p, 3, 1),
                                 circuit_classify_errno, &r);
    for (int call_no = 1; call_no <= 4; call_no++) {
        CIRCUIT_TICKET_GUARD(t);
        circuit_rejection rej;
        if (!circuit_allow(b, NULL, &t, &rej)) {
            cr_assert_eq(call_no, 4, "call %d rejected", call_no);
            continue;
        }
        cr_assert_lt(call_no, 4, "call 4 admitted");
        circuit_done(&t, with_retries(attempt_fails, 3));
    }
    cr_assert_eq(g_attempts, 9); /* 3 calls x 3 attempts; none for the 4th */
    assert_state(b, CIRCUIT_OPEN);
    cr_assert_eq(r.t[0].counts.failures, 3);
    circuit_free(b);
}

/* the wrong way round: every attempt goes through the breaker */
static circuit_breaker *g_inner;
static int g_inner_rejections;

static int attempt_through_breaker(void)
{
    circuit_ticket t;
    circuit_rejection rej;
    if (!circuit_allow(g_inner, NULL, &t, &rej)) {
        g_inner_rejections++;
        return -EAGAIN;
    }
    int rc = attempt_fails();
    circuit_done(&t, rc);
    return rc;
}

Test(compat, retry_inside_the_breaker_trips_on_attempts_and_retries_rejections)
{
    circuit_consecutive p;
    rec r = {0};
    g_inner = breaker(config(10, 1, SEC, SEC), consecutive(&p, 3, 1), circuit_classify_errno, &r);
    with_retries(attempt_through_breaker, 3); /* one call */
    assert_state(g_inner, CIRCUIT_OPEN);       /* opened by a single call's attempts */
    cr_assert_eq(g_attempts, 3);
    with_retries(attempt_through_breaker, 3); /* the next call */
    cr_assert_eq(g_inner_rejections, 3, "the retry loop spent its attempts on rejections");
    cr_assert_eq(g_attempts, 3);
    circuit_free(g_inner);
}
