/*
 * docs/MIGRATION.md ("Coming from another breaker"): one test per table row,
 * each reproducing the documented behaviour through a real breaker on the
 * test clock (TM3). Test names follow the rows; a rule id appears where the
 * test pins that rule. The first part drives scenarios of calls (ROW); the
 * second (live stats, operator control, open-period backoff) uses the fx
 * fixture of helpers.h.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "circuit.h"
#include "circuit_presets.h"
#include "circuit_prometheus.h"
#include "helpers.h"
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

static circuit_breaker *breaker_with(circuit_config c, circuit_policy p,
                                     circuit_classify_fn classify,
                                     circuit_observe_fn obs, rec *r)
{
    circuit_spec s = {
        .config = c,
        .policy = p,
        .classify = classify,
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

static circuit_breaker *breaker(circuit_config c, circuit_policy p, circuit_classify_fn classify,
                                rec *r)
{
    return breaker_with(c, p, classify, observe_rec, r);
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

/* ---- scenarios: the shape most rows share ---------------------------------- */
/* Most rows build one breaker from a preset (or a policy of their own) and
 * drive it with whole calls, tickets held across steps, clock moves and
 * checks. Such a row is a table of steps that play() runs: ROW(name, ...)
 * defines the test `name` from one scenario; a row that needs more calls
 * play() itself. Every step that checks something is one assertion of the
 * row. */

#define MAX_STEPS 40
#define MAX_TICKETS 8

typedef enum step_op {
    OP_END,           /* the last step */
    OP_CALL,          /* n whole calls with result a: each admitted, each counted */
    OP_BEGIN,         /* allow into ticket n: admitted */
    OP_DONE,          /* done(ticket n, a): returns b (1: counted, 0: late) */
    OP_RELEASE,       /* release(ticket n) */
    OP_ADVANCE,       /* the test clock moves a ns */
    OP_STATE,         /* circuit_get_state is a */
    OP_REJECTED,      /* allow is rejected */
    OP_REJECTED_AS,   /* allow is rejected with state a */
    OP_RETRY_AFTER,   /* allow is rejected with retry_after_ns a */
    OP_REJECTION,     /* allow is rejected with state a, retry_after_ns b, and its
                         formatted text names `text` */
    OP_TRANSITION,    /* transition n (0-based) is from a to b, generation n + 1 */
    OP_COUNT,         /* transition n's final count `text` is a */
    OP_TRANSITIONS,   /* a transitions delivered */
    OP_NONE_TO,       /* no transition delivered so far went to state a */
    OP_NONE_PENDING,  /* circuit_test_pending is 0 */
} step_op;

typedef struct step {
    step_op     op;
    int         n;
    int64_t     a, b;
    size_t      field;  /* OP_COUNT: offsetof(circuit_counts, ...) */
    const char *text;
} step;

#define CALLS(n_, rc) {.op = OP_CALL, .n = (n_), .a = (rc)}
#define CALL(rc) CALLS(1, rc)
#define BEGIN(k) {.op = OP_BEGIN, .n = (k)}
#define DONE(k, rc) {.op = OP_DONE, .n = (k), .a = (rc), .b = 1}
#define DONE_LATE(k, rc) {.op = OP_DONE, .n = (k), .a = (rc), .b = 0}
#define RELEASE(k) {.op = OP_RELEASE, .n = (k)}
#define ADVANCE(ns) {.op = OP_ADVANCE, .a = (ns)}
#define STATE(s) {.op = OP_STATE, .a = CIRCUIT_##s}
#define REJECTED {.op = OP_REJECTED}
#define REJECTED_AS(s) {.op = OP_REJECTED_AS, .a = CIRCUIT_##s}
#define RETRY_AFTER(ns) {.op = OP_RETRY_AFTER, .a = (ns)}
#define REJECTION(s, ns, words) \
    {.op = OP_REJECTION, .a = CIRCUIT_##s, .b = (ns), .text = (words)}
#define TRANSITION(i, from, to) \
    {.op = OP_TRANSITION, .n = (i), .a = CIRCUIT_##from, .b = CIRCUIT_##to}
#define COUNT(i, f, v) \
    {.op = OP_COUNT, .n = (i), .a = (v), .field = offsetof(circuit_counts, f), .text = #f}
#define TRANSITIONS(k) {.op = OP_TRANSITIONS, .a = (k)}
#define NONE_TO(s) {.op = OP_NONE_TO, .a = CIRCUIT_##s}
#define NONE_PENDING {.op = OP_NONE_PENDING}

typedef struct scenario {
    circuit_config config;
    struct { int64_t failures, successes; } consecutive;   /* the preset, when failures > 0 */
    struct { int64_t min_results; double ratio; int64_t successes; } failure_rate; /* when ratio > 0 */
    circuit_policy policy;        /* otherwise */
    circuit_classify_fn classify; /* NULL: circuit_classify_errno */
    step steps[MAX_STEPS];
} scenario;

static void play(const scenario *s)
{
    circuit_consecutive cp;
    circuit_failure_rate fr;
    circuit_policy policy = s->policy;
    if (s->consecutive.failures > 0)
        policy = consecutive(&cp, s->consecutive.failures, s->consecutive.successes);
    else if (s->failure_rate.ratio > 0)
        policy = failure_rate(&fr, &s->config, s->failure_rate.min_results, s->failure_rate.ratio,
                           s->failure_rate.successes);
    rec r = {0};
    circuit_breaker *b = breaker(s->config, policy,
                                 s->classify ? s->classify : circuit_classify_errno, &r);
    circuit_ticket t[MAX_TICKETS];
    char text[128];
    for (int i = 0; i < MAX_STEPS && s->steps[i].op != OP_END; i++) {
        const step *st = &s->steps[i];
        circuit_rejection rej;
        switch (st->op) {
        case OP_END:
            break;
        case OP_CALL:
            for (int k = 0; k < st->n; k++)
                admitted(b, (int)st->a);
            break;
        case OP_BEGIN:
            begin(b, &t[st->n]);
            break;
        case OP_DONE:
            cr_assert_eq(circuit_done(&t[st->n], (int)st->a), st->b != 0,
                         "step %d: done(ticket %d, %d) %s", i, st->n, (int)st->a,
                         st->b ? "was discarded as late" : "counted a late result");
            break;
        case OP_RELEASE:
            circuit_release(&t[st->n]);
            break;
        case OP_ADVANCE:
            circuit_test_clock_advance(st->a);
            break;
        case OP_STATE:
            assert_state(b, (circuit_state)st->a);
            break;
        case OP_REJECTED:
            rejected(b);
            break;
        case OP_REJECTED_AS:
            cr_assert_eq(rejected(b).state, (circuit_state)st->a, "step %d", i);
            break;
        case OP_RETRY_AFTER:
            cr_assert_eq(rejected(b).retry_after_ns, st->a, "step %d", i);
            break;
        case OP_REJECTION:
            rej = rejected(b);
            cr_assert_eq(rej.state, (circuit_state)st->a, "step %d", i);
            cr_assert_eq(rej.retry_after_ns, st->b, "step %d", i);
            if (st->text != NULL) {
                cr_assert_gt(circuit_rejection_format(&rej, text, sizeof text), 0);
                cr_assert(strstr(text, st->text) != NULL, "%s", text);
            }
            break;
        case OP_TRANSITION:
            assert_transition(&r, st->n, (circuit_state)st->a, (circuit_state)st->b);
            break;
        case OP_COUNT: {
            int64_t v;
            memcpy(&v, (const char *)&r.t[st->n].counts + st->field, sizeof v);
            cr_assert_eq(v, st->a, "step %d: transition %d: %s = %lld, want %lld", i, st->n + 1,
                         st->text, (long long)v, (long long)st->a);
            break;
        }
        case OP_TRANSITIONS:
            cr_assert_eq(r.n, st->a, "step %d: %d transitions delivered", i, r.n);
            break;
        case OP_NONE_TO:
            for (int k = 0; k < r.n && k < MAX_REC; k++)
                cr_assert_neq(r.t[k].to, (circuit_state)st->a, "step %d: transition %d went to %s",
                              i, k + 1, circuit_state_name(r.t[k].to));
            break;
        case OP_NONE_PENDING:
            cr_assert_eq(circuit_test_pending(b), 0);
            break;
        }
    }
    circuit_free(b);
}

#define ROW(name, ...)                                                           \
    Test(compat, name)                                                           \
    {                                                                            \
        play(&(const scenario){__VA_ARGS__});                                    \
    }

/* ======================================================================== */
/* sony/gobreaker                                                            */
/* ======================================================================== */

ROW(gobreaker_ready_to_trip_default_more_than_5_consecutive,
    .config = {100, 1, 60 * SEC, 10 * SEC}, .consecutive = {6, 1},
    .steps = {CALLS(5, -EIO),
              CALL(0), /* a success ends the run: 5 failures are not "more than 5" */
              CALLS(5, -EIO), STATE(CLOSED), /* 10 failures in total, 5 in a row */
              TRANSITIONS(0),
              CALL(-EIO), /* the 6th in a row */
              STATE(OPEN), TRANSITION(0, CLOSED, OPEN), COUNT(0, consecutive_failures, 6),
              COUNT(0, failures, 11), COUNT(0, successes, 1), REJECTED_AS(OPEN)})

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

Test(compat, gobreaker_ready_to_trip_custom_counts_asked_after_every_failure)
{
    /* Like gobreaker's ReadyToTrip, trip is asked after each failure and
     * never after a success (S2): the success that
     * completes "3 results" opens nothing; the next failure does. */
    play(&(const scenario){
        .config = {3, 1, SEC, SEC},
        .policy = {.trip = trip_two_of_three, .probe = probe_close_on_success},
        .steps = {CALL(-EIO), CALL(-EIO), STATE(CLOSED), CALL(0), STATE(CLOSED), CALL(-EIO),
                  STATE(OPEN), TRANSITION(0, CLOSED, OPEN), COUNT(0, successes, 1),
                  COUNT(0, failures, 2)}});
    cr_assert_eq(g_asks, 3);
    const circuit_counts *last = &g_asked[2];
    cr_assert_eq(last->successes, 1);
    cr_assert_eq(last->failures, 2);
    cr_assert_eq(last->consecutive_successes, 0);
    cr_assert_eq(last->consecutive_failures, 1);
}

Test(compat, gobreaker_max_requests_is_probes_and_successes)
{
    /* MaxRequests = 3 -> probes = 3 and successes = 3 */
    play(&(const scenario){
        .config = {10, 3, SEC, 10 * SEC}, .consecutive = {1, 3},
        .steps = {CALL(-EIO), ADVANCE(SEC), BEGIN(0), BEGIN(1), BEGIN(2),
                  REJECTION(HALF_OPEN, 0, NULL), /* ErrTooManyRequests */
                  DONE(0, 0), STATE(HALF_OPEN),
                  /* the difference: a settled probe frees its slot (probes is "in flight") */
                  BEGIN(3), DONE(1, 0), STATE(HALF_OPEN),
                  DONE(2, 0), /* third success in a row closes */
                  STATE(CLOSED), TRANSITION(2, HALF_OPEN, CLOSED),
                  COUNT(2, consecutive_successes, 3),
                  DONE_LATE(3, 0), /* a probe settled after the close is late */
                  TRANSITIONS(3)}});

    /* gobreaker turns MaxRequests 0 into 1; libcircuit refuses it */
    circuit_consecutive p, q;
    rec r = {0};
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

ROW(gobreaker_half_open_failure_reopens_successes_close,
    .config = {10, 2, SEC, 10 * SEC}, .consecutive = {1, 2},
    .steps = {CALL(-EIO), ADVANCE(SEC), BEGIN(0), BEGIN(1), DONE(0, 0), ADVANCE(5 * MS),
              DONE(1, -EIO), /* S4: any failed probe reopens */
              STATE(OPEN), TRANSITION(2, HALF_OPEN, OPEN), COUNT(2, successes, 1),
              COUNT(2, failures, 1),
              RETRY_AFTER(SEC), /* a full open period from the failed probe */
              ADVANCE(SEC - 1), RETRY_AFTER(1), ADVANCE(1), CALL(0), STATE(HALF_OPEN),
              CALL(0), /* 2 in a row */
              STATE(CLOSED), TRANSITION(4, HALF_OPEN, CLOSED), COUNT(4, consecutive_successes, 2)})

Test(compat, gobreaker_timeout_is_open_for_ns_exact_and_required)
{
    play(&(const scenario){
        .config = {10, 1, 60 * SEC, SEC}, .consecutive = {1, 1},
        .steps = {CALL(-EIO), ADVANCE(60 * SEC - 1), REJECTION(OPEN, 1, NULL), /* TM2 */
                  ADVANCE(1), BEGIN(0), STATE(HALF_OPEN), TRANSITION(1, OPEN, HALF_OPEN),
                  DONE(0, 0)}});

    /* gobreaker turns Timeout <= 0 into 60 s; libcircuit refuses it (CFG1) */
    circuit_consecutive p;
    rec r = {0};
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
    /* consecutive: a run is not cut by time (any Interval would have
     * cleared the counts during the hour) */
    play(&(const scenario){
        .config = {10, 1, SEC, SEC}, .consecutive = {3, 1},
        .steps = {CALLS(2, -EIO), ADVANCE(3600 * SEC), CALL(-EIO), STATE(OPEN),
                  COUNT(0, consecutive_failures, 3)}});

    /* failure rate: the window forgets by results, not by time */
    play(&(const scenario){
        .config = {4, 1, SEC, SEC}, .failure_rate = {4, 0.5, 1},
        .steps = {CALL(-EIO), ADVANCE(3600 * SEC),
                  CALLS(4, 0), /* these push the old failure out */
                  CALL(-EIO), STATE(CLOSED), /* window: S S S F */
                  ADVANCE(3600 * SEC),
                  CALL(-EIO), /* window: S S F F, however far apart in time */
                  STATE(OPEN), COUNT(0, failures, 2), COUNT(0, successes, 2)}});
}

/* OnStateChange cannot call the breaker (it runs under the mutex); observe can
 * (O2). */
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

/* errno classification, but "not found" (-ENOENT) is a success, or ignored */
static circuit_outcome classify_enoent_as(circuit_outcome as, void *arg, void *call_ctx, int result)
{
    return result == -ENOENT ? as : circuit_classify_errno(arg, call_ctx, result);
}

static circuit_outcome classify_enoent_is_success(void *arg, void *call_ctx, int result)
{
    return classify_enoent_as(CIRCUIT_SUCCESS, arg, call_ctx, result);
}

static circuit_outcome classify_enoent_ignored(void *arg, void *call_ctx, int result)
{
    return classify_enoent_as(CIRCUIT_IGNORED, arg, call_ctx, result);
}

Test(compat, gobreaker_is_successful_is_classify)
{
    play(&(const scenario){
        .config = {10, 1, SEC, SEC}, .consecutive = {2, 1},
        .steps = {CALL(-EIO), CALL(0), /* default IsSuccessful: err == nil */
                  CALL(-EIO), STATE(CLOSED), CALL(-EIO), STATE(OPEN)}});

    /* a custom IsSuccessful: "not found" is a good answer */
    play(&(const scenario){
        .config = {10, 1, SEC, SEC}, .consecutive = {2, 1}, .classify = classify_enoent_is_success,
        .steps = {CALL(-EIO), CALL(-ENOENT), CALL(-EIO), STATE(CLOSED), CALL(-EIO), STATE(OPEN),
                  COUNT(0, successes, 1)}});
}

ROW(gobreaker_is_excluded_is_ignored,
    .config = {10, 1, SEC, 10 * SEC}, .consecutive = {2, 1},
    .steps = {CALL(-EIO), CALL(-ECANCELED), /* C5: neither counted nor ending the run */
              CALL(-EIO), STATE(OPEN), COUNT(0, failures, 2), COUNT(0, successes, 0),
              COUNT(0, consecutive_failures, 2),
              /* half-open: an ignored probe frees its slot and decides nothing */
              ADVANCE(SEC), BEGIN(0), REJECTED, DONE(0, -ECANCELED), STATE(HALF_OPEN), CALL(0),
              STATE(CLOSED), TRANSITION(2, HALF_OPEN, CLOSED), COUNT(2, successes, 1),
              COUNT(2, failures, 0)})

ROW(gobreaker_err_open_state_and_too_many_requests_are_rejections,
    .config = {10, 1, 2 * SEC, 10 * SEC}, .consecutive = {1, 1},
    .steps = {CALL(-EIO), ADVANCE(500 * MS),
              REJECTION(OPEN, 1500 * MS, "open"), /* ErrOpenState */
              ADVANCE(1500 * MS), BEGIN(0),
              REJECTION(HALF_OPEN, 0, "half-open"), /* ErrTooManyRequests */
              DONE(0, 0)})

ROW(gobreaker_two_step_is_allow_and_done_late_result_reported,
    .config = {10, 1, SEC, 10 * SEC}, .consecutive = {1, 1},
    .steps = {BEGIN(0), BEGIN(1), DONE(1, -EIO), /* trips */
              STATE(OPEN),
              DONE_LATE(0, 0), /* T2: gobreaker drops this silently; libcircuit says so */
              STATE(OPEN), TRANSITIONS(1),
              /* release settles without a result and frees the probe slot */
              ADVANCE(SEC), BEGIN(2), REJECTED, RELEASE(2), STATE(HALF_OPEN), CALL(0),
              STATE(CLOSED), COUNT(2, successes, 1)})

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

ROW(gobreaker_state_is_pure_read,
    .config = {10, 1, SEC, SEC}, .consecutive = {1, 1},
    .steps = {CALL(-EIO), ADVANCE(SEC - 1), STATE(OPEN), ADVANCE(1),
              STATE(HALF_OPEN), /* S5 */
              STATE(HALF_OPEN),
              TRANSITIONS(1), /* circuit_get_state made no transition */
              NONE_PENDING, CALL(0), TRANSITION(1, OPEN, HALF_OPEN),
              TRANSITION(2, HALF_OPEN, CLOSED)})

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

ROW(pybreaker_fail_max_opens_on_n_in_a_row_not_n_in_total,
    .config = {10, 1, 60 * SEC, SEC}, .consecutive = {2, 1},
    .steps = {CALL(-EIO), CALL(0), CALL(-EIO), CALL(0),
              STATE(CLOSED), /* 2 errors in total, never in a row */
              CALL(-EIO), CALL(-EIO), STATE(OPEN), COUNT(0, failures, 4),
              COUNT(0, consecutive_failures, 2)})

/* reset_timeout = 60 (s) -> open_for_ns = 60e9 */
ROW(pybreaker_reset_timeout_is_open_for_ns,
    .config = {10, 1, 60 * SEC, SEC}, .consecutive = {1, 1},
    .steps = {CALL(-EIO), RETRY_AFTER(60 * SEC), ADVANCE(60 * SEC - 1), RETRY_AFTER(1),
              ADVANCE(1), CALL(0), STATE(CLOSED)})

ROW(pybreaker_half_open_admits_one_trial_call,
    .config = {10, 1, SEC, 10 * SEC}, .consecutive = {1, 1},
    .steps = {CALL(-EIO), ADVANCE(SEC), BEGIN(0), REJECTION(HALF_OPEN, 0, NULL),
              REJECTION(HALF_OPEN, 0, NULL), REJECTION(HALF_OPEN, 0, NULL), DONE(0, 0), CALL(0),
              CALL(0)})

Test(compat, pybreaker_trial_success_closes)
{
    play(&(const scenario){
        .config = {10, 1, SEC, 10 * SEC}, .consecutive = {1, 1},
        .steps = {CALL(-EIO), ADVANCE(SEC), CALL(0), STATE(CLOSED),
                  TRANSITION(2, HALF_OPEN, CLOSED), COUNT(2, consecutive_successes, 1)}});

    /* success_threshold = 3 -> successes = 3: three trials in a row */
    play(&(const scenario){
        .config = {10, 1, SEC, 10 * SEC}, .consecutive = {1, 3},
        .steps = {CALL(-EIO), ADVANCE(SEC), CALL(0), CALL(0), STATE(HALF_OPEN), CALL(0),
                  STATE(CLOSED)}});
}

ROW(pybreaker_trial_failure_reopens_for_full_period,
    .config = {10, 1, 30 * SEC, 60 * SEC}, .consecutive = {1, 1},
    .steps = {CALL(-EIO), ADVANCE(30 * SEC), BEGIN(0),
              ADVANCE(7 * SEC), /* the trial takes a while */
              DONE(0, -EIO), STATE(OPEN),
              RETRY_AFTER(30 * SEC), /* from the failure, not the trial's start */
              ADVANCE(30 * SEC - 1), RETRY_AFTER(1), ADVANCE(1), CALL(0), STATE(CLOSED)})

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


Test(compat, pybreaker_exclude_is_classify_success)
{
    /* exclude=[NotFound]: counted as a success, so it resets the count */
    play(&(const scenario){
        .config = {10, 1, SEC, SEC}, .consecutive = {2, 1}, .classify = classify_enoent_is_success,
        .steps = {CALL(-EIO), CALL(-ENOENT), CALL(-EIO), STATE(CLOSED), CALL(-EIO),
                  STATE(OPEN)}});

    /* IGNORED is a different thing: the run goes on across it */
    play(&(const scenario){
        .config = {10, 1, SEC, SEC}, .consecutive = {2, 1}, .classify = classify_enoent_ignored,
        .steps = {CALL(-EIO), CALL(-ENOENT), CALL(-EIO), STATE(OPEN)}});
}

ROW(pybreaker_async_calls_started_before_settling_all_go_through,
    .config = {10, 1, 60 * SEC, SEC}, .consecutive = {2, 1},
    .steps = {BEGIN(0), BEGIN(1), BEGIN(2), BEGIN(3), BEGIN(4), /* nothing has settled yet */
              DONE(0, -EIO), DONE(1, -EIO), STATE(OPEN),
              /* the results of the closed state that come after it are not counted */
              DONE_LATE(2, -EIO), DONE_LATE(3, -EIO), DONE_LATE(4, -EIO),
              TRANSITIONS(1), COUNT(0, failures, 2), RETRY_AFTER(60 * SEC)})

ROW(pybreaker_async_only_one_trial_while_half_open,
    .config = {10, 1, SEC, 10 * SEC}, .consecutive = {1, 1},
    .steps = {CALL(-EIO), ADVANCE(SEC), BEGIN(0), REJECTED_AS(HALF_OPEN),
              REJECTED_AS(HALF_OPEN), REJECTED_AS(HALF_OPEN),
              DONE(0, -ECANCELED), /* settles, decides nothing */
              STATE(HALF_OPEN), BEGIN(1), REJECTED_AS(HALF_OPEN), DONE(1, 0), STATE(CLOSED)})

ROW(pybreaker_async_call_started_before_open_does_not_close_it,
    .config = {10, 1, SEC, 10 * SEC}, .consecutive = {2, 1},
    .steps = {BEGIN(0), BEGIN(1), CALL(-EIO), CALL(-EIO), STATE(OPEN),
              DONE_LATE(0, 0), /* T2: late, discarded */
              STATE(OPEN), ADVANCE(SEC),
              DONE_LATE(1, 0), /* even while half-open */
              STATE(HALF_OPEN),
              NONE_TO(CLOSED), /* a late success closed nothing */
              CALL(0), /* a real trial */
              STATE(CLOSED), TRANSITIONS(3), COUNT(2, successes, 1)})

Test(compat, pybreaker_async_trial_never_settling_is_abandoned_after_probe_timeout)
{
    /* reset_after = 30 s for both the open period and the abandoned trial */
    play(&(const scenario){
        .config = {10, 1, 30 * SEC, 30 * SEC}, .consecutive = {1, 1},
        .steps = {CALL(-EIO), ADVANCE(30 * SEC), BEGIN(0), ADVANCE(30 * SEC - 1),
                  REJECTED_AS(HALF_OPEN),
                  ADVANCE(1), /* P1: the lost trial (ticket 0) is abandoned */
                  BEGIN(1), STATE(HALF_OPEN), /* a timeout keeps probing */
                  DONE(1, 0), STATE(CLOSED), TRANSITION(2, HALF_OPEN, CLOSED),
                  COUNT(2, timed_out, 1), COUNT(2, successes, 1),
                  DONE_LATE(0, -EIO), /* the abandoned trial's late result */
                  STATE(CLOSED)}});

    /* P2: the abandoned trial's result still counts while still half-open */
    play(&(const scenario){
        .config = {10, 1, 30 * SEC, 30 * SEC}, .consecutive = {1, 1},
        .steps = {CALL(-EIO), ADVANCE(30 * SEC), BEGIN(0), ADVANCE(45 * SEC), DONE(0, 0),
                  STATE(CLOSED), COUNT(2, timed_out, 1), COUNT(2, successes, 1)}});
}

/* ======================================================================== */
/* resilience4j                                                              */
/* ======================================================================== */

Test(compat, resilience4j_failure_rate_threshold_equal_rate_trips)
{
    /* failureRateThreshold = 50 -> ratio 50 / 100.0, min 10, window 10 */
    play(&(const scenario){
        .config = {10, 1, SEC, SEC}, .failure_rate = {10, 50 / 100.0, 1},
        .steps = {CALLS(5, 0), CALLS(4, -EIO), STATE(CLOSED), /* 9 results: below the minimum */
                  CALL(-EIO), /* 5 of 10: exactly 50% */
                  STATE(OPEN), COUNT(0, failures, 5), COUNT(0, successes, 5)}});

    /* 4 of 10 stays closed */
    play(&(const scenario){
        .config = {10, 1, SEC, SEC}, .failure_rate = {10, 50 / 100.0, 1},
        .steps = {CALLS(6, 0), CALLS(4, -EIO), STATE(CLOSED)}});

    /* a threshold whose binary value is a hair off: 7% of 100 */
    play(&(const scenario){
        .config = {100, 1, SEC, SEC}, .failure_rate = {100, 7 / 100.0, 1},
        .steps = {CALLS(93, 0), CALLS(6, -EIO), STATE(CLOSED), CALL(-EIO), /* 7 of 100 */
                  STATE(OPEN)}});
}

Test(compat, resilience4j_minimum_number_of_calls_is_min_results)
{
    play(&(const scenario){
        .config = {10, 1, SEC, SEC}, .failure_rate = {4, 0.5, 1},
        .steps = {CALLS(3, -EIO), STATE(CLOSED), /* 100% of 3: below the minimum */
                  CALL(0), STATE(CLOSED), /* S2 (0.3): a success reaching it asks nothing */
                  CALL(-EIO), /* the next failure trips: 4 of 5 */
                  STATE(OPEN), COUNT(0, failures, 4), COUNT(0, successes, 1)}});

    /* a minimum above the window could never be reached: EINVAL */
    circuit_config c = config(10, 1, SEC, SEC);
    circuit_failure_rate fr;
    char err[256];
    cr_assert_eq(circuit_failure_rate_init(&fr, &c, 11, 0.5, 1, err, sizeof err), EINVAL);
    cr_assert(strstr(err, "min_results = 11 (must be 1..10") != NULL, "%s", err);
}

ROW(resilience4j_count_based_sliding_window_is_window,
    .config = {4, 1, SEC, SEC}, .failure_rate = {4, 0.5, 1},
    .steps = {CALLS(4, 0), CALL(-EIO), STATE(CLOSED), /* S S S F */
              CALL(-EIO), /* S S F F: 50%; over all 6 calls it would be 33% */
              STATE(OPEN), COUNT(0, successes, 2), /* C1 */
              COUNT(0, failures, 2)})

ROW(resilience4j_time_based_window_out_of_scope_results_do_not_age,
    .config = {4, 1, SEC, SEC}, .failure_rate = {4, 0.75, 1},
    .steps = {CALLS(2, -EIO),
              ADVANCE(86400 * SEC), /* a day later: a time window would be empty */
              CALL(0), STATE(CLOSED),
              CALL(-EIO), /* F F S F: 75% of the latest 4 results */
              STATE(OPEN), COUNT(0, failures, 3)})

ROW(resilience4j_slow_call_rate_out_of_scope_deadline_is_failure,
    .config = {4, 1, SEC, SEC}, .failure_rate = {4, 0.5, 1},
    .steps = {/* a slow call that succeeds is a success: libcircuit does not time calls */
              BEGIN(0), ADVANCE(3600 * SEC), DONE(0, 0), CALL(0),
              CALL(-ETIMEDOUT), /* the caller's deadline ran out: a failure */
              STATE(CLOSED), CALL(-ETIMEDOUT), STATE(OPEN), COUNT(0, failures, 2),
              COUNT(0, successes, 2)})

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

static r4j_half_open r4j_4_at_50 = {4, 50};

Test(compat, resilience4j_permitted_calls_in_half_open_rate_probe_policy)
{
    play(&(const scenario){
        .config = {10, 4, SEC, 10 * SEC},
        .policy = {.trip = trip_on_first_failure, .probe = r4j_probe, .arg = &r4j_4_at_50},
        .steps = {CALL(-EIO), ADVANCE(SEC), BEGIN(0), BEGIN(1), BEGIN(2), BEGIN(3),
                  REJECTED, /* 4 permitted calls in flight */
                  DONE(0, 0), DONE(1, -EIO), STATE(HALF_OPEN), /* no decision before 4 results */
                  DONE(2, 0), DONE(3, 0), /* 1 of 4 failed: 25% < 50% */
                  STATE(CLOSED), COUNT(2, failures, 1), COUNT(2, successes, 3),
                  CALL(-EIO), ADVANCE(SEC), BEGIN(0), BEGIN(1), BEGIN(2), BEGIN(3),
                  DONE(0, -EIO), DONE(1, 0), DONE(2, -EIO), STATE(HALF_OPEN),
                  DONE(3, 0), /* 2 of 4: 50% reopens */
                  STATE(OPEN)}});

    /* the preset decides at the first failed probe instead */
    play(&(const scenario){
        .config = {10, 4, SEC, 10 * SEC}, .failure_rate = {1, 0.5, 3},
        .steps = {CALL(-EIO), ADVANCE(SEC), BEGIN(0), BEGIN(1), BEGIN(2), BEGIN(3), DONE(0, 0),
                  DONE(1, -EIO), STATE(OPEN), DONE_LATE(2, 0), DONE_LATE(3, 0)}});
}

ROW(resilience4j_max_wait_in_half_open_is_probe_timeout_per_probe,
    .config = {10, 2, SEC, 5 * SEC}, .consecutive = {1, 1},
    .steps = {CALL(-EIO), ADVANCE(SEC), BEGIN(0), BEGIN(1), /* both stuck */
              ADVANCE(5 * SEC - 1), REJECTED_AS(HALF_OPEN),
              ADVANCE(1), /* both slots come back */
              BEGIN(2), BEGIN(3), RELEASE(2), RELEASE(3),
              /* no deadline on the half-open state: a day without traffic, then a probe */
              ADVANCE(86400 * SEC), STATE(HALF_OPEN), CALL(0), STATE(CLOSED),
              TRANSITION(2, HALF_OPEN, CLOSED), COUNT(2, timed_out, 2), RELEASE(0), RELEASE(1)})

ROW(resilience4j_wait_duration_in_open_state_is_open_for_ns,
    .config = {10, 1, 60 * SEC, SEC}, .consecutive = {1, 1},
    .steps = {CALL(-EIO), RETRY_AFTER(60 * SEC), ADVANCE(20 * SEC), RETRY_AFTER(40 * SEC),
              ADVANCE(40 * SEC - 1), RETRY_AFTER(1), ADVANCE(1), CALL(0)})

ROW(resilience4j_automatic_transition_get_state_reports_half_open_without_a_call,
    .config = {10, 1, 60 * SEC, SEC}, .consecutive = {1, 1},
    .steps = {CALL(-EIO), ADVANCE(67 * SEC),
              STATE(HALF_OPEN), /* S5: no call needed to see it */
              TRANSITIONS(1),   /* but nothing ran: no thread, no timer (TM1) */
              BEGIN(0),         /* O4: the next allow makes and delivers it */
              TRANSITION(1, OPEN, HALF_OPEN), COUNT(1, failures, 0), COUNT(1, successes, 0),
              DONE(0, 0)})

ROW(resilience4j_record_and_ignore_exceptions_is_classify,
    .config = {10, 1, SEC, SEC}, .failure_rate = {4, 0.5, 1}, .classify = circuit_classify_http,
    .steps = {CALL(503),        /* recorded */
              CALL(-ECANCELED), /* ignored */
              CALL(404),        /* neither: success */
              CALL(429),        /* recorded */
              CALL(-ECANCELED), STATE(CLOSED), /* 3 results */
              CALL(200), STATE(CLOSED), /* 2 of 4, reached by a success: S2 (0.3) */
              CALL(500), STATE(OPEN), /* 3 of 5 */
              COUNT(0, failures, 3), COUNT(0, successes, 2)})

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

static opossum_trip opossum_50_of_10 = {50, 10};

Test(compat, opossum_error_threshold_percentage_is_strictly_above)
{
    /* the two breakers see the same calls: 5 successes, then 5 failures */
    play(&(const scenario){
        .config = {10, 1, SEC, SEC}, .failure_rate = {10, 0.5, 1},
        .steps = {CALLS(5, 0), CALLS(5, -EIO), STATE(OPEN)}}); /* 50% >= 50% */
    play(&(const scenario){
        .config = {10, 1, SEC, SEC},
        .policy = {.trip = opossum_strictly_above, .probe = opossum_probe, .arg = &opossum_50_of_10},
        .steps = {CALLS(5, 0), CALLS(5, -EIO), STATE(CLOSED), /* 50% is not > 50% */
                  CALL(-EIO), /* window: 4 S, 6 F */
                  STATE(OPEN), COUNT(0, failures, 6)}});
}

ROW(opossum_volume_threshold_is_min_results,
    .config = {20, 1, SEC, SEC}, .failure_rate = {5, 0.5, 1},
    .steps = {CALLS(4, -EIO), CALL(-ECANCELED), /* not a result */
              STATE(CLOSED), CALL(-EIO), STATE(OPEN), COUNT(0, failures, 5)})

/* resetTimeout = 30000 (ms) */
ROW(opossum_reset_timeout_single_trial,
    .config = {10, 1, 30000 * MS, 10 * SEC}, .consecutive = {1, 1},
    .steps = {CALL(-EIO), ADVANCE(30000 * MS), BEGIN(0), REJECTED,
              DONE(0, -EIO), /* failure reopens */
              STATE(OPEN), ADVANCE(30000 * MS), BEGIN(0), REJECTED,
              DONE(0, 0), /* success closes */
              STATE(CLOSED), TRANSITIONS(5), TRANSITION(4, HALF_OPEN, CLOSED)})

/* opossum forgets failures older than its 10 s window; libcircuit keeps them
 * until newer results push them out */
ROW(opossum_rolling_count_timeout_out_of_scope_count_window,
    .config = {6, 1, SEC, SEC}, .failure_rate = {6, 0.5, 1},
    .steps = {CALLS(3, -EIO), ADVANCE(11 * SEC), CALL(0), CALL(0), STATE(CLOSED),
              CALL(0), STATE(CLOSED), /* F F F S S S: 50%, reached by a success (S2, 0.3) */
              CALL(-EIO), /* F F S S S F: still 50% of the window */
              STATE(OPEN), COUNT(0, failures, 3), COUNT(0, successes, 3)})

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

/* ==== live stats, operator control, open-period backoff ================== */

/* The rows about live stats, operator control and open-period backoff, as
 * gobreaker, resilience4j, Polly and opossum users know them. */

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

static circuit_rejection rejection_of(fx *f)
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

Test(compat, gobreaker_counts_is_get_stats)
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

Test(compat, resilience4j_forced_open_is_isolate)
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
        circuit_rejection rej = rejection_of(&f);
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

Test(compat, resilience4j_reset_is_circuit_reset_closed_is_ealready)
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

Test(compat, resilience4j_interval_function_exponential_is_the_backoff_preset)
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
        assert_rejected(rejection_of(&f), CIRCUIT_OPEN, want[i]);
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

Test(compat, polly_isolate_is_circuit_isolate)
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
    circuit_rejection rej = rejection_of(&f);
    char text[128];
    circuit_rejection_format(&rej, text, sizeof text);
    cr_assert_str_eq(text, "circuit isolated by an operator: no retry time is known");
    /* the probe admitted before is late: it can neither close nor reopen */
    cr_assert(!circuit_done(&probe, RS_OK));
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_ISOLATED);
    fx_free(&f);
}

Test(compat, polly_close_is_circuit_reset)
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

Test(compat, polly_break_duration_generator_is_open_for)
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
    assert_rejected(rejection_of(&f), CIRCUIT_OPEN, want);

    circuit_test_clock_advance(want);
    fx_call(&f, RS_FAIL); /* probe fails: first reopen, 1 failure in half-open */
    want = 2 * CIRCUIT_MS(100) + CIRCUIT_MS(1);
    cr_assert_eq(last_tr(&f)->open_for_ns, want);
    assert_rejected(rejection_of(&f), CIRCUIT_OPEN, want);
    fx_free(&f);
}

/* ---- opossum ------------------------------------------------------------------- */

Test(compat, opossum_stats_is_get_stats_totals)
{
    circuit_consecutive pc;
    fx f;
    consecutive_fx(&f, &pc, 3, 1, 10, 1, OPEN_FOR);
    fx_call(&f, RS_OK);
    fx_call(&f, RS_IGN);
    for (int i = 0; i < 3; i++)
        fx_call(&f, RS_FAIL); /* trips */
    (void)rejection_of(&f);
    (void)rejection_of(&f);

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

Test(compat, opossum_open_and_close_are_isolate_and_reset)
{
    circuit_consecutive pc;
    fx f;
    consecutive_fx(&f, &pc, 3, 1, 10, 1, OPEN_FOR);
    cr_assert_eq(circuit_isolate(f.b, NULL), 0);
    /* opossum's open() goes half-open after resetTimeout; an isolated
     * breaker does not */
    circuit_test_clock_advance(2 * OPEN_FOR);
    assert_rejected(rejection_of(&f), CIRCUIT_ISOLATED, 0);
    cr_assert_eq(circuit_reset(f.b, NULL), 0); /* close() */
    fx_call(&f, RS_OK);
    fx_free(&f);
}

Test(compat, opossum_prometheus_is_the_formatter)
{
    circuit_consecutive pc;
    fx f;
    consecutive_fx(&f, &pc, 1, 1, 10, 1, OPEN_FOR);
    fx_call(&f, RS_FAIL);
    (void)rejection_of(&f);
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
