/*
 * model_selftest: the reference model checked on its own, against scenarios
 * worked out by hand from docs/CONTRACT.md, so that the oracle of the differential
 * test is not trusted blindly. Test names carry the rule ids (docs/CONTRACT.md).
 *
 * SPDX-License-Identifier: MIT
 *
 * Plain program (runs under TSan, unlike Criterion): exit 0 when every check
 * passes, 1 otherwise. Abort cases run in a forked child.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "circuit_model.h"

static int failures, checks;
static const char *cur_test;

#define CHECK(c)                                                                                 \
    do {                                                                                         \
        checks++;                                                                                \
        if (!(c)) {                                                                              \
            fprintf(stderr, "%s:%d: %s: CHECK(%s) failed\n", __FILE__, __LINE__, cur_test, #c); \
            failures++;                                                                          \
        }                                                                                        \
    } while (0)

#define CHECK_EQ(a, b)                                                                                 \
    do {                                                                                               \
        int64_t a_ = (int64_t)(a), b_ = (int64_t)(b);                                                  \
        checks++;                                                                                      \
        if (a_ != b_) {                                                                                \
            fprintf(stderr, "%s:%d: %s: %s == %s failed: %" PRId64 " != %" PRId64 "\n", __FILE__, __LINE__, \
                    cur_test, #a, #b, a_, b_);                                                         \
            failures++;                                                                                \
        }                                                                                              \
    } while (0)

static void check_counts_eq(int line, const circuit_counts *c, int64_t s, int64_t f, int64_t cs, int64_t cf,
                            int64_t to)
{
    checks++;
    if (c->successes != s || c->failures != f || c->consecutive_successes != cs ||
        c->consecutive_failures != cf || c->timed_out != to) {
        fprintf(stderr,
                "%s:%d: %s: counts {s=%" PRId64 " f=%" PRId64 " cs=%" PRId64 " cf=%" PRId64 " to=%" PRId64
                "}, expected {s=%" PRId64 " f=%" PRId64 " cs=%" PRId64 " cf=%" PRId64 " to=%" PRId64 "}\n",
                __FILE__, line, cur_test, c->successes, c->failures, c->consecutive_successes,
                c->consecutive_failures, c->timed_out, s, f, cs, cf, to);
        failures++;
    }
}
#define CHECK_COUNTS(c, s, f, cs, cf, to) check_counts_eq(__LINE__, (c), s, f, cs, cf, to)

/* ---- fixture: a model with a settable clock and recording callbacks ----- */

#define MAX_TR 64

typedef struct fx fx;
struct fx {
    cmodel *m;
    int64_t now;
    /* policy: 0 disables a rule */
    int64_t trip_failures;    /* trip when failures >= */
    int64_t trip_successes;   /* trip when consecutive_successes >= */
    int64_t close_successes;  /* probe: close when successes >= */
    int64_t reopen_failures;  /* probe: reopen when failures >= */
    int64_t reopen_timed_out; /* probe: reopen when timed_out >= */
    int     probe_bad;        /* probe returns this invalid value when non-zero */
    /* open_for (B1): base + 100 * reopens + generation; `period_bad`
     * returned instead when non-zero */
    int64_t period_base;
    int64_t period_bad;
    /* policy.check (K1): the answer and the complaint */
    int         check_rc;
    const char *check_msg;
    int         n_check;
    /* what the callbacks saw */
    int                n_trip, n_probe, n_classify, n_open_for;
    circuit_counts     last_trip, last_probe;
    circuit_open_info  infos[MAX_TR];
    circuit_transition tr[MAX_TR];
    void              *tr_ctx[MAX_TR];
    int                n_tr;
    bool               in_observe;
    int                observe_reentered;
    void (*hook)(fx *f, const circuit_transition *t); /* run inside observe */
};

static int64_t fx_clock(void *arg)
{
    return ((fx *)arg)->now;
}

static bool fx_trip(void *arg, const circuit_counts *c)
{
    fx *f = arg;
    f->n_trip++;
    f->last_trip = *c;
    return (f->trip_failures > 0 && c->failures >= f->trip_failures) ||
           (f->trip_successes > 0 && c->consecutive_successes >= f->trip_successes);
}

static circuit_state fx_probe(void *arg, const circuit_counts *c)
{
    fx *f = arg;
    f->n_probe++;
    f->last_probe = *c;
    if (f->probe_bad)
        return (circuit_state)f->probe_bad;
    if (f->close_successes > 0 && c->successes >= f->close_successes)
        return CIRCUIT_CLOSED;
    if (f->reopen_failures > 0 && c->failures >= f->reopen_failures)
        return CIRCUIT_OPEN;
    if (f->reopen_timed_out > 0 && c->timed_out >= f->reopen_timed_out)
        return CIRCUIT_OPEN;
    return CIRCUIT_HALF_OPEN;
}

static int64_t fx_open_for(void *arg, const circuit_open_info *info)
{
    fx *f = arg;
    if (f->n_open_for < MAX_TR)
        f->infos[f->n_open_for] = *info;
    f->n_open_for++;
    if (f->period_bad != 0)
        return f->period_bad;
    return f->period_base + 100 * info->reopens + (int64_t)info->generation;
}

static int fx_check(void *arg, const circuit_config *cfg, char *errbuf, size_t errbuf_len)
{
    fx *f = arg;
    (void)cfg;
    f->n_check++;
    if (f->check_rc != 0 && f->check_msg != NULL)
        snprintf(errbuf, errbuf_len, "%s", f->check_msg);
    return f->check_rc;
}

/* result codes are the outcomes themselves; 99 is invalid */
static circuit_outcome fx_classify(void *arg, void *call_ctx, int result)
{
    (void)call_ctx;
    ((fx *)arg)->n_classify++;
    return (circuit_outcome)result;
}

static void fx_observe(void *arg, void *call_ctx, const circuit_transition *t)
{
    fx *f = arg;
    if (f->in_observe)
        f->observe_reentered++;
    f->in_observe = true;
    if (f->n_tr < MAX_TR) {
        f->tr[f->n_tr] = *t;
        f->tr_ctx[f->n_tr] = call_ctx;
    }
    f->n_tr++;
    if (f->hook != NULL)
        f->hook(f, t);
    f->in_observe = false;
}

static circuit_spec fx_spec(fx *f, int window, int probes, int64_t open_for, int64_t timeout)
{
    circuit_spec s = {.config = {window, probes, open_for, timeout},
                      .policy = {fx_trip, fx_probe, f, NULL},
                      .classify = fx_classify,
                      .classify_arg = f,
                      .observe = fx_observe,
                      .observe_arg = f};
    return s;
}

/* period_base > 0: open periods come from fx_open_for (B1) */
static void fx_init_backoff(fx *f, int window, int probes, int64_t open_for, int64_t timeout,
                            int64_t period_base)
{
    memset(f, 0, sizeof *f);
    f->now = 1000;
    f->period_base = period_base;
    circuit_spec s = fx_spec(f, window, probes, open_for, timeout);
    if (period_base > 0) {
        s.open_for = fx_open_for;
        s.open_for_arg = f;
    }
    int rc = cmodel_new(&f->m, &s, fx_clock, f, NULL, 0);
    if (rc != 0) {
        fprintf(stderr, "%s: cmodel_new failed: %d\n", cur_test, rc);
        exit(1);
    }
}

static void fx_init(fx *f, int window, int probes, int64_t open_for, int64_t timeout)
{
    fx_init_backoff(f, window, probes, open_for, timeout, 0);
}

static void fx_fini(fx *f)
{
    cmodel_free(f->m);
    f->m = NULL;
}

static bool allow(fx *f, cmodel_ticket *t)
{
    circuit_rejection r;
    return cmodel_allow(f->m, NULL, t, &r);
}

/* one admitted call settled with `o` */
static bool call(fx *f, circuit_outcome o)
{
    cmodel_ticket t = {0};
    if (!allow(f, &t))
        return false;
    return cmodel_done(&t, (int)o);
}

/* closed -> open by `n` failures (trip_failures = n), at f->now */
static void open_it(fx *f, int n)
{
    f->trip_failures = n;
    for (int i = 0; i < n; i++)
        call(f, CIRCUIT_FAILURE);
}

#define TEST(name) static void name(void)

/* ---- configuration ------------------------------------------------------- */

TEST(CFG1_CFG2_invalid_config_names_every_field)
{
    fx f;
    memset(&f, 0, sizeof f);
    circuit_spec s = fx_spec(&f, 0, 65537, 0, -1);
    char buf[512];
    cmodel *m = (cmodel *)&s;
    CHECK_EQ(cmodel_new(&m, &s, fx_clock, &f, buf, sizeof buf), EINVAL);
    CHECK(m == NULL);
    CHECK(strstr(buf, "window") && strstr(buf, "probes") && strstr(buf, "open_for_ns") &&
          strstr(buf, "probe_timeout_ns"));
    CHECK(strstr(buf, "65537") && strstr(buf, "(got 0)") && strstr(buf, "(got -1)"));
    CHECK(strstr(buf, "65536"));

    char small[10];
    memset(small, 'x', sizeof small);
    CHECK_EQ(cmodel_new(&m, &s, fx_clock, &f, small, sizeof small), EINVAL);
    CHECK_EQ(strlen(small), 9);
    CHECK_EQ(cmodel_new(&m, &s, fx_clock, &f, NULL, 0), EINVAL);
    small[0] = 'q';
    CHECK_EQ(cmodel_new(&m, &s, fx_clock, &f, small, 0), EINVAL);
    CHECK(small[0] == 'q');

    s = fx_spec(&f, 1, 1, 1, 1);
    CHECK_EQ(cmodel_new(&m, &s, fx_clock, &f, NULL, 0), 0);
    cmodel_free(m);
    s = fx_spec(&f, CIRCUIT_MAX_COUNT, CIRCUIT_MAX_COUNT, INT64_MAX, INT64_MAX);
    CHECK_EQ(cmodel_new(&m, &s, NULL, NULL, NULL, 0), 0);
    CHECK(cmodel_get_state(m) == CIRCUIT_CLOSED);
    cmodel_free(m);
    s = fx_spec(&f, 5, CIRCUIT_MAX_COUNT + 1, 1, 1);
    CHECK_EQ(cmodel_new(&m, &s, fx_clock, &f, buf, sizeof buf), EINVAL);
    CHECK(strstr(buf, "probes") && !strstr(buf, "window"));
    cmodel_free(NULL);
}

/* ---- states ---------------------------------------------------------------- */

TEST(S1_new_breaker_is_closed_without_transition)
{
    fx f;
    fx_init(&f, 4, 1, 100, 10);
    CHECK(cmodel_get_state(f.m) == CIRCUIT_CLOSED);
    CHECK(call(&f, CIRCUIT_SUCCESS));
    CHECK_EQ(f.n_tr, 0);
    fx_fini(&f);
}

TEST(S2_C4_O6_trip_opens_with_final_counts)
{
    fx f;
    fx_init(&f, 3, 1, 100, 10);
    f.trip_failures = 2;
    cmodel_ticket a = {0}, b = {0}, c = {0};
    CHECK(cmodel_allow(f.m, (void *)1, &a, NULL));
    CHECK(cmodel_allow(f.m, (void *)2, &b, NULL));
    CHECK(cmodel_allow(f.m, (void *)3, &c, NULL));
    CHECK(cmodel_done(&a, CIRCUIT_FAILURE));
    CHECK_COUNTS(&f.last_trip, 0, 1, 0, 1, 0);
    CHECK(cmodel_done(&b, CIRCUIT_SUCCESS));
    CHECK_EQ(f.n_trip, 1); /* S2 (0.3): a success asks nothing */
    CHECK_EQ(f.n_tr, 0);
    f.now = 1234;
    CHECK(cmodel_done(&c, CIRCUIT_FAILURE));
    CHECK_EQ(f.n_trip, 2);
    CHECK_EQ(f.n_tr, 1);
    CHECK(f.tr[0].from == CIRCUIT_CLOSED && f.tr[0].to == CIRCUIT_OPEN);
    CHECK_EQ(f.tr[0].generation, 1);
    CHECK_COUNTS(&f.tr[0].counts, 1, 2, 0, 1, 0);
    CHECK(f.tr_ctx[0] == (void *)3);
    /* opened at 1234: 100 ns open */
    circuit_rejection r;
    cmodel_ticket d = {0};
    CHECK(!cmodel_allow(f.m, NULL, &d, &r));
    CHECK(r.state == CIRCUIT_OPEN);
    CHECK_EQ(r.retry_after_ns, 100);
    fx_fini(&f);
}

TEST(S3_TM2_S5_open_boundary_exact)
{
    fx f;
    fx_init(&f, 4, 1, 100, 10);
    open_it(&f, 1); /* opened at 1000 */
    cmodel_ticket t = {0};
    circuit_rejection r = {0, 0};
    f.now = 1099;
    CHECK(cmodel_get_state(f.m) == CIRCUIT_OPEN);
    CHECK(!cmodel_allow(f.m, NULL, &t, &r));
    CHECK(r.state == CIRCUIT_OPEN);
    CHECK_EQ(r.retry_after_ns, 1);
    cmodel_release(&t); /* rejected: nothing */
    f.now = 1100;
    CHECK(cmodel_get_state(f.m) == CIRCUIT_HALF_OPEN); /* pure: changes nothing */
    CHECK_EQ(f.n_tr, 1);
    CHECK(cmodel_allow(f.m, (void *)7, &t, &r));
    CHECK_EQ(f.n_tr, 2);
    CHECK(f.tr[1].from == CIRCUIT_OPEN && f.tr[1].to == CIRCUIT_HALF_OPEN);
    CHECK_EQ(f.tr[1].generation, 2);
    CHECK_COUNTS(&f.tr[1].counts, 0, 0, 0, 0, 0);
    CHECK(f.tr_ctx[1] == (void *)7);
    CHECK(cmodel_get_state(f.m) == CIRCUIT_HALF_OPEN);
    cmodel_release(&t);
    fx_fini(&f);
}

TEST(S4_half_open_admits_at_most_probes)
{
    fx f;
    fx_init(&f, 4, 2, 100, 50);
    open_it(&f, 1);
    f.now += 100;
    cmodel_ticket a = {0}, b = {0}, c = {0};
    circuit_rejection r = {0, -1};
    CHECK(allow(&f, &a));
    CHECK(allow(&f, &b));
    CHECK(!cmodel_allow(f.m, NULL, &c, &r));
    CHECK(r.state == CIRCUIT_HALF_OPEN);
    CHECK_EQ(r.retry_after_ns, 0);
    CHECK(cmodel_done(&a, CIRCUIT_SUCCESS)); /* keeps probing, frees a's slot */
    CHECK_EQ(f.n_probe, 1);
    CHECK_COUNTS(&f.last_probe, 1, 0, 1, 0, 0);
    CHECK(allow(&f, &c));
    f.close_successes = 2;
    CHECK(cmodel_done(&b, CIRCUIT_SUCCESS));
    CHECK(f.tr[f.n_tr - 1].to == CIRCUIT_CLOSED);
    CHECK_COUNTS(&f.tr[f.n_tr - 1].counts, 2, 0, 2, 0, 0);
    CHECK(!cmodel_done(&c, CIRCUIT_FAILURE)); /* late: a closed state follows */
    CHECK_EQ(f.n_trip, 1);                    /* only open_it's */
    fx_fini(&f);
}

TEST(S4_probe_reopens_at_result_time)
{
    fx f;
    fx_init(&f, 4, 1, 100, 50);
    open_it(&f, 1);
    f.now += 100;
    f.reopen_failures = 1;
    cmodel_ticket a = {0};
    CHECK(allow(&f, &a));
    f.now += 7;
    CHECK(cmodel_done(&a, CIRCUIT_FAILURE));
    CHECK(f.tr[2].from == CIRCUIT_HALF_OPEN && f.tr[2].to == CIRCUIT_OPEN);
    CHECK_COUNTS(&f.tr[2].counts, 0, 1, 0, 1, 0);
    circuit_rejection r;
    CHECK(!cmodel_allow(f.m, NULL, &a, &r));
    CHECK_EQ(r.retry_after_ns, 100);
    fx_fini(&f);
}

/* ---- probes and time ---------------------------------------------------- */

TEST(P1_TM2_probe_timeout_exact)
{
    fx f;
    fx_init(&f, 4, 1, 100, 50);
    open_it(&f, 1);
    f.now = 1100;
    cmodel_ticket a = {0}, b = {0};
    CHECK(allow(&f, &a)); /* due at 1150 */
    f.now = 1149;
    CHECK(!allow(&f, &b));
    CHECK_EQ(f.n_probe, 0);
    f.now = 1150;
    CHECK(allow(&f, &b)); /* a timed out, b takes the slot */
    CHECK_EQ(f.n_probe, 1);
    CHECK_COUNTS(&f.last_probe, 0, 0, 0, 0, 1);
    /* P2: a's result still counts, the state has not changed */
    CHECK(cmodel_done(&a, CIRCUIT_SUCCESS));
    CHECK_COUNTS(&f.last_probe, 1, 0, 1, 0, 1);
    /* and a's done did not free b's slot (T6) */
    cmodel_ticket c = {0};
    CHECK(!allow(&f, &c));
    cmodel_release(&b);
    CHECK(allow(&f, &c));
    cmodel_release(&c);
    fx_fini(&f);
}

TEST(P1_reopen_as_of_due_moment_and_chain)
{
    fx f;
    fx_init(&f, 4, 1, 100, 50);
    open_it(&f, 1); /* gen 1 at 1000 */
    f.now = 1100;
    f.reopen_timed_out = 1;
    cmodel_ticket a = {0}, b = {0};
    CHECK(allow(&f, &a)); /* gen 2, due 1150 */
    f.now = 1155;
    circuit_rejection r;
    CHECK(!cmodel_allow(f.m, NULL, &b, &r)); /* reopened as of 1150 */
    CHECK(r.state == CIRCUIT_OPEN);
    CHECK_EQ(r.retry_after_ns, 95);
    CHECK_EQ(f.n_tr, 3);
    CHECK_COUNTS(&f.tr[2].counts, 0, 0, 0, 0, 1);
    CHECK(!cmodel_done(&a, CIRCUIT_SUCCESS)); /* late */
    /* chain: half-open at 1250, probe due 1300 (timed out, reopen), half-open at 1400 */
    f.now = 1250;
    CHECK(allow(&f, &a));
    CHECK(f.tr[3].to == CIRCUIT_HALF_OPEN);
    f.now = 1401;
    CHECK(allow(&f, &b));
    CHECK_EQ(f.n_tr, 6);
    CHECK(f.tr[4].from == CIRCUIT_HALF_OPEN && f.tr[4].to == CIRCUIT_OPEN);
    CHECK(f.tr[5].from == CIRCUIT_OPEN && f.tr[5].to == CIRCUIT_HALF_OPEN);
    CHECK_EQ(f.tr[5].generation, 6);
    CHECK(cmodel_get_state(f.m) == CIRCUIT_HALF_OPEN);
    cmodel_release(&b);
    fx_fini(&f);
}

TEST(P1_timeouts_in_due_order)
{
    fx f;
    fx_init(&f, 4, 3, 100, 50);
    open_it(&f, 1);
    f.now = 1100;
    f.reopen_timed_out = 2;
    cmodel_ticket a = {0}, b = {0}, c = {0};
    CHECK(allow(&f, &a)); /* due 1150 */
    f.now = 1110;
    CHECK(allow(&f, &b)); /* due 1160 */
    f.now = 1120;
    CHECK(allow(&f, &c)); /* due 1170 */
    f.now = 1259;
    circuit_rejection r;
    cmodel_ticket d = {0};
    /* a timed out at 1150 (keep probing), b at 1160 (reopen): open until 1260 */
    CHECK(!cmodel_allow(f.m, NULL, &d, &r));
    CHECK(r.state == CIRCUIT_OPEN);
    CHECK_EQ(r.retry_after_ns, 1);
    CHECK_EQ(f.n_probe, 2);
    CHECK_EQ(f.n_tr, 3);
    CHECK_COUNTS(&f.tr[2].counts, 0, 0, 0, 0, 2);
    /* c belonged to the half-open state left: it never times out later */
    f.now = 1260;
    CHECK(allow(&f, &d));
    CHECK_EQ(f.n_probe, 2);
    CHECK(!cmodel_done(&c, CIRCUIT_FAILURE));
    CHECK(cmodel_done(&d, CIRCUIT_IGNORED));
    CHECK_EQ(f.n_tr, 4);
    fx_fini(&f);
}

TEST(P1_release_after_due_leaves_the_timeout)
{
    fx f;
    fx_init(&f, 4, 1, 100, 50);
    open_it(&f, 1);
    f.now = 1100;
    cmodel_ticket a = {0}, b = {0};
    CHECK(allow(&f, &a)); /* due 1150 */
    f.now = 1150;
    cmodel_release(&a); /* due: the slot is left for the next call to time out */
    CHECK_EQ(f.n_probe, 0);
    CHECK(allow(&f, &b));
    CHECK_EQ(f.n_probe, 1);
    CHECK_COUNTS(&f.last_probe, 0, 0, 0, 0, 1);
    cmodel_release(&b); /* before its due: frees at once, no timeout */
    f.now = 1300;
    CHECK(allow(&f, &b));
    CHECK_EQ(f.n_probe, 1);
    cmodel_release(&b);
    fx_fini(&f);
}

TEST(P3_T3_release_frees_slot_calls_nothing)
{
    fx f;
    fx_init(&f, 4, 1, 100, 50);
    open_it(&f, 1);
    f.now = 1100;
    cmodel_ticket a = {0}, b = {0};
    CHECK(allow(&f, &a));
    int tr = f.n_tr, cl = f.n_classify;
    cmodel_release(&a);
    cmodel_release(&a); /* settled: nothing */
    CHECK_EQ(f.n_tr, tr);
    CHECK_EQ(f.n_classify, cl);
    CHECK_EQ(f.n_probe, 0);
    CHECK(allow(&f, &b));
    cmodel_release(&b);
    cmodel_ticket blank = {0};
    cmodel_release(&blank);
    fx_fini(&f);
}

TEST(T6_old_ticket_never_frees_a_later_probe_slot)
{
    fx f;
    fx_init(&f, 4, 1, 100, 50);
    open_it(&f, 1);
    f.now = 1100;
    f.reopen_timed_out = 1;
    cmodel_ticket a = {0}, b = {0}, c = {0};
    CHECK(allow(&f, &a)); /* gen 2, slot 0, due 1150 */
    f.now = 1250;         /* timed out at 1150 (reopen), half-open again at 1250 */
    CHECK(allow(&f, &b)); /* gen 4, slot 0 */
    CHECK_EQ(f.n_tr, 4);
    cmodel_release(&a); /* must not free b's slot */
    CHECK(!allow(&f, &c));
    CHECK(cmodel_done(&b, CIRCUIT_IGNORED));
    CHECK(allow(&f, &c));
    cmodel_release(&c);
    fx_fini(&f);
}

TEST(T2_late_result_is_discarded)
{
    fx f;
    fx_init(&f, 4, 1, 100, 50);
    f.trip_failures = 1;
    cmodel_ticket a = {0}, b = {0};
    CHECK(allow(&f, &a));
    CHECK(allow(&f, &b));
    CHECK(cmodel_done(&a, CIRCUIT_FAILURE));
    int trips = f.n_trip;
    CHECK(!cmodel_done(&b, CIRCUIT_FAILURE));
    CHECK_EQ(f.n_trip, trips);
    CHECK_EQ(f.n_classify, 2); /* classify still runs */
    fx_fini(&f);
}

/* ---- counts ------------------------------------------------------------- */

TEST(C1_C2_window_ring_and_runs)
{
    fx f;
    fx_init(&f, 3, 1, 100, 50);
    call(&f, CIRCUIT_SUCCESS);
    call(&f, CIRCUIT_FAILURE);
    call(&f, CIRCUIT_SUCCESS);
    call(&f, CIRCUIT_FAILURE);
    CHECK_COUNTS(&f.last_trip, 1, 2, 0, 1, 0);
    call(&f, CIRCUIT_FAILURE);
    call(&f, CIRCUIT_FAILURE);
    call(&f, CIRCUIT_FAILURE);
    CHECK_COUNTS(&f.last_trip, 0, 3, 0, 4, 0); /* run not bounded by the window */
    call(&f, CIRCUIT_SUCCESS);
    circuit_stats st;
    cmodel_get_stats(f.m, &st);
    CHECK_COUNTS(&st.counts, 1, 2, 1, 0, 0);
    fx_fini(&f);
}

TEST(C5_ignored_counts_nothing_frees_slot)
{
    fx f;
    fx_init(&f, 4, 1, 100, 50);
    call(&f, CIRCUIT_SUCCESS);
    call(&f, CIRCUIT_SUCCESS);
    int trips = f.n_trip;
    CHECK(call(&f, CIRCUIT_IGNORED));
    CHECK_EQ(f.n_trip, trips);
    call(&f, CIRCUIT_SUCCESS);
    CHECK_EQ(f.n_trip, trips); /* S2: a success asks nothing */
    circuit_stats st;
    cmodel_get_stats(f.m, &st);
    CHECK_COUNTS(&st.counts, 3, 0, 3, 0, 0); /* the run went on across the ignored */
    CHECK_EQ(st.ignored, 1);
    open_it(&f, 1); /* failures >= 1 */
    f.now += 100;
    cmodel_ticket a = {0}, b = {0};
    CHECK(allow(&f, &a));
    CHECK(cmodel_done(&a, CIRCUIT_IGNORED));
    CHECK_EQ(f.n_probe, 0);
    CHECK(allow(&f, &b));
    cmodel_release(&b);
    fx_fini(&f);
}

TEST(C2_C3_timeouts_touch_no_run)
{
    fx f;
    fx_init(&f, 4, 2, 100, 50);
    open_it(&f, 1);
    f.now += 100;
    cmodel_ticket a = {0}, b = {0};
    CHECK(allow(&f, &a));
    CHECK(allow(&f, &b));
    CHECK(cmodel_done(&a, CIRCUIT_SUCCESS));
    f.now += 50;
    CHECK(allow(&f, &a)); /* b timed out */
    CHECK_COUNTS(&f.last_probe, 1, 0, 1, 0, 1);
    cmodel_release(&a);
    fx_fini(&f);
}

TEST(C3_timed_out_saturates)
{
    /* 17 rounds of 1000 probes that all time out in one half-open state */
    enum { P = 1000, ROUNDS = 17 };
    fx f;
    fx_init(&f, 4, P, 100, 50);
    open_it(&f, 1);
    f.now += 100;
    cmodel_ticket *t = calloc(P, sizeof *t);
    CHECK(t != NULL);
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < P; i++) /* the first one times out the previous round */
            CHECK(allow(&f, &t[i]));
        f.now += 50;
        for (int i = 0; i < P; i++) /* due: the slots are left to time out */
            cmodel_release(&t[i]);
    }
    cmodel_ticket x = {0};
    CHECK(allow(&f, &x));
    CHECK_EQ(f.n_probe, P * ROUNDS);
    CHECK_EQ(f.last_probe.timed_out, CIRCUIT_TIMED_OUT_MAX);
    CHECK_EQ(f.n_tr, 2);
    CHECK(cmodel_done(&x, CIRCUIT_SUCCESS));
    CHECK_COUNTS(&f.last_probe, 1, 0, 1, 0, CIRCUIT_TIMED_OUT_MAX);
    free(t);
    fx_fini(&f);
}

/* ---- observing ---------------------------------------------------------- */

/* On entering half-open, observe runs a probe that fails (reopen): that
 * transition must come after this observe returns. */
static void nested_hook(fx *f, const circuit_transition *t)
{
    if (t->to != CIRCUIT_HALF_OPEN)
        return;
    CHECK(cmodel_get_state(f->m) == CIRCUIT_HALF_OPEN);
    cmodel_ticket n = {0};
    CHECK(cmodel_allow(f->m, (void *)0x99, &n, NULL));
    int before = f->n_tr;
    CHECK(cmodel_done(&n, CIRCUIT_FAILURE));
    CHECK_EQ(f->n_tr, before); /* not delivered yet */
}

TEST(O1_O2_O6_nested_transitions_after_observe_returns)
{
    fx f;
    fx_init(&f, 4, 2, 100, 50);
    open_it(&f, 1);
    f.reopen_failures = 1;
    f.hook = nested_hook;
    f.now += 100;
    cmodel_ticket a = {0};
    /* admitted as the first probe; observe (gen 2) then runs a nested probe
     * that fails and reopens (gen 3), delivered after observe returns */
    CHECK(cmodel_allow(f.m, (void *)0x42, &a, NULL));
    CHECK_EQ(f.n_tr, 3);
    CHECK(f.tr[1].to == CIRCUIT_HALF_OPEN && f.tr_ctx[1] == (void *)0x42);
    CHECK(f.tr[2].from == CIRCUIT_HALF_OPEN && f.tr[2].to == CIRCUIT_OPEN && f.tr_ctx[2] == (void *)0x99);
    CHECK_EQ(f.tr[2].generation, 3);
    CHECK_EQ(f.observe_reentered, 0);
    CHECK(!cmodel_done(&a, CIRCUIT_SUCCESS)); /* late */
    fx_fini(&f);
}

static fx *exit_fx;
static void exit_hook(fx *f, const circuit_transition *t)
{
    if (t->generation != 1)
        return;
    f->now += 100; /* nested allow makes open -> half-open (gen 2), queued */
    cmodel_ticket n = {0};
    CHECK(cmodel_allow(f->m, (void *)0x77, &n, NULL));
    cmodel_release(&n);
    pthread_exit(NULL);
}

/* Takes the only probe slot when half-open is delivered. */
static cmodel_ticket o4_ticket;
static void o4_hook(fx *f, const circuit_transition *t)
{
    if (t->to == CIRCUIT_HALF_OPEN)
        CHECK(cmodel_allow(f->m, (void *)0x44, &o4_ticket, NULL));
}

static void *exit_thread(void *arg)
{
    (void)arg;
    open_it(exit_fx, 1);
    return NULL;
}

TEST(O4_O5_observe_unwinding_leaves_rest_for_next_call)
{
    fx f;
    fx_init(&f, 4, 1, 100, 50);
    f.hook = exit_hook;
    exit_fx = &f;
    pthread_t th;
    int rc = pthread_create(&th, NULL, exit_thread, NULL); /* not in CHECK: the thread counts checks */
    if (rc == 0)
        rc = pthread_join(th, NULL);
    CHECK_EQ(rc, 0);
    CHECK_EQ(f.n_tr, 1);
    f.hook = o4_hook;
    f.in_observe = false;
    /* O4: gen 2 is delivered before this allow decides, and its observe
     * takes the only probe slot */
    cmodel_ticket a = {0};
    circuit_rejection r = {0, -1};
    CHECK(!cmodel_allow(f.m, NULL, &a, &r));
    CHECK(r.state == CIRCUIT_HALF_OPEN);
    CHECK_EQ(f.n_tr, 2);
    CHECK(f.tr[1].to == CIRCUIT_HALF_OPEN && f.tr_ctx[1] == (void *)0x77);
    cmodel_release(&o4_ticket);
    fx_fini(&f);
}

/* ---- S2 ----------------------------------------------------- */

static void stats(fx *f, circuit_stats *st)
{
    memset(st, 0x5a, sizeof *st);
    cmodel_get_stats(f->m, st);
}

TEST(S2_success_never_asks_trip)
{
    fx f;
    fx_init(&f, 3, 1, 100, 50);
    CHECK(call(&f, CIRCUIT_SUCCESS));
    CHECK(call(&f, CIRCUIT_SUCCESS));
    CHECK(call(&f, CIRCUIT_SUCCESS));
    CHECK_EQ(f.n_trip, 0); /* window S S S: nothing asked */
    CHECK(call(&f, CIRCUIT_FAILURE));
    CHECK_EQ(f.n_trip, 1);
    CHECK_COUNTS(&f.last_trip, 2, 1, 0, 1, 0); /* F evicted an S */
    CHECK(call(&f, CIRCUIT_SUCCESS)); /* the window holds a failure: still nothing asked */
    CHECK(call(&f, CIRCUIT_SUCCESS));
    CHECK(call(&f, CIRCUIT_SUCCESS)); /* evicts the failure */
    CHECK(call(&f, CIRCUIT_SUCCESS));
    CHECK(call(&f, CIRCUIT_IGNORED));
    CHECK_EQ(f.n_trip, 1);
    circuit_stats st;
    stats(&f, &st);
    CHECK_COUNTS(&st.counts, 3, 0, 4, 0, 0); /* counted all the same (C1, C2) */
    CHECK(call(&f, CIRCUIT_FAILURE));
    CHECK_EQ(f.n_trip, 2);
    CHECK_COUNTS(&f.last_trip, 2, 1, 0, 1, 0); /* exact, including the failure */
    fx_fini(&f);
}

TEST(S2_window_one_asks_after_each_failure_only)
{
    fx f;
    fx_init(&f, 1, 1, 100, 50);
    CHECK(call(&f, CIRCUIT_SUCCESS));
    CHECK_EQ(f.n_trip, 0);
    CHECK(call(&f, CIRCUIT_FAILURE));
    CHECK_COUNTS(&f.last_trip, 0, 1, 0, 1, 0);
    CHECK(call(&f, CIRCUIT_SUCCESS)); /* evicts the failure: not asked */
    CHECK_EQ(f.n_trip, 1);
    CHECK(call(&f, CIRCUIT_FAILURE));
    CHECK_EQ(f.n_trip, 2);
    CHECK_COUNTS(&f.last_trip, 0, 1, 0, 1, 0);
    fx_fini(&f);
}

/* a success-counting trip policy never opens on a success (the behaviour
 * S2's amendment in 0.3 changes); it is asked after failures only, and a
 * failure resets the run it counts */
TEST(S2_success_policy_never_opens)
{
    fx f;
    fx_init(&f, 8, 1, 100, 50);
    f.trip_successes = 3; /* a policy that opens on a run of successes */
    for (int i = 0; i < 5; i++)
        CHECK(call(&f, CIRCUIT_SUCCESS));
    CHECK(call(&f, CIRCUIT_FAILURE)); /* asked: cs = 0, stays closed */
    for (int i = 0; i < 5; i++)
        CHECK(call(&f, CIRCUIT_SUCCESS));
    CHECK_EQ(f.n_trip, 1);
    CHECK_EQ(f.n_tr, 0);
    fx_fini(&f);
}

/* ---- 0.2: operator calls ---------------------------------------------------- */

TEST(OP1_isolate_from_closed_makes_earlier_results_late)
{
    fx f;
    fx_init(&f, 4, 1, 100, 50);
    f.trip_failures = 2;
    cmodel_ticket a = {0}, b = {0}, c = {0};
    CHECK(allow(&f, &a));
    CHECK(allow(&f, &b));
    CHECK(call(&f, CIRCUIT_FAILURE));
    CHECK(call(&f, CIRCUIT_SUCCESS));
    int trips = f.n_trip;
    CHECK_EQ(cmodel_isolate(f.m, (void *)0x15), 0);
    CHECK_EQ(f.n_tr, 1);
    CHECK(f.tr[0].from == CIRCUIT_CLOSED && f.tr[0].to == CIRCUIT_ISOLATED);
    CHECK_EQ(f.tr[0].generation, 1);
    CHECK(f.tr[0].cause == CIRCUIT_CAUSE_OPERATOR);
    CHECK_EQ(f.tr[0].open_for_ns, 0);
    CHECK_COUNTS(&f.tr[0].counts, 1, 1, 1, 0, 0);
    CHECK(f.tr_ctx[0] == (void *)0x15);
    CHECK(cmodel_get_state(f.m) == CIRCUIT_ISOLATED);
    /* already isolated: EALREADY, nothing changes */
    CHECK_EQ(cmodel_isolate(f.m, NULL), EALREADY);
    CHECK_EQ(f.n_tr, 1);
    /* every allow rejected {ISOLATED, 0}; nothing asked; earlier results late */
    circuit_rejection r = {0, -1};
    CHECK(!cmodel_allow(f.m, NULL, &c, &r));
    CHECK(r.state == CIRCUIT_ISOLATED);
    CHECK_EQ(r.retry_after_ns, 0);
    CHECK(!cmodel_done(&a, CIRCUIT_FAILURE));
    cmodel_release(&b);
    CHECK_EQ(f.n_trip, trips);
    CHECK_EQ(f.n_probe, 0);
    circuit_stats st;
    stats(&f, &st);
    CHECK(st.state == CIRCUIT_ISOLATED);
    CHECK_EQ(st.generation, 1);
    CHECK_COUNTS(&st.counts, 0, 0, 0, 0, 0);
    CHECK_EQ(st.admitted, 4);
    CHECK_EQ(st.rejected, 1);
    CHECK_EQ(st.late, 1);
    CHECK_EQ(st.released, 1);
    CHECK_EQ(st.transitions, 1);
    fx_fini(&f);
}

TEST(OP1_isolated_has_no_time_driven_change)
{
    fx f;
    fx_init(&f, 4, 2, 100, 50);
    open_it(&f, 1);
    f.now += 100;
    cmodel_ticket a = {0}, b = {0};
    CHECK(allow(&f, &a)); /* half-open, gen 2, a probe due at now + 50 */
    CHECK(call(&f, CIRCUIT_SUCCESS));
    CHECK_EQ(cmodel_isolate(f.m, NULL), 0);
    CHECK(f.tr[2].from == CIRCUIT_HALF_OPEN && f.tr[2].to == CIRCUIT_ISOLATED);
    CHECK_COUNTS(&f.tr[2].counts, 1, 0, 1, 0, 0);
    int probes = f.n_probe;
    f.now += 1000000; /* far past every boundary */
    CHECK(cmodel_get_state(f.m) == CIRCUIT_ISOLATED);
    CHECK(!allow(&f, &b));
    CHECK_EQ(f.n_tr, 3);
    CHECK_EQ(f.n_probe, probes); /* the probe never times out */
    CHECK(!cmodel_done(&a, CIRCUIT_SUCCESS));
    circuit_stats st;
    stats(&f, &st);
    CHECK_EQ(st.timed_out, 0);
    CHECK_EQ(st.probes_in_flight, 0);
    CHECK_EQ(st.retry_after_ns, 0);
    fx_fini(&f);
}

TEST(OP1_isolate_from_open_carries_zero_counts)
{
    fx f;
    fx_init(&f, 4, 1, 100, 50);
    open_it(&f, 1);
    f.now += 10;
    CHECK_EQ(cmodel_isolate(f.m, NULL), 0);
    CHECK_EQ(f.n_tr, 2);
    CHECK(f.tr[1].from == CIRCUIT_OPEN && f.tr[1].to == CIRCUIT_ISOLATED);
    CHECK_COUNTS(&f.tr[1].counts, 0, 0, 0, 0, 0);
    fx_fini(&f);
}

/* the model's reading of P1 for operator calls: what fell due is made first,
 * so the operator's transition starts from the state get_state reported */
TEST(OP1_P1_isolate_makes_due_changes_first)
{
    fx f;
    fx_init(&f, 4, 1, 100, 50);
    open_it(&f, 1); /* open at 1000 until 1100 */
    f.now = 1100;
    CHECK(cmodel_get_state(f.m) == CIRCUIT_HALF_OPEN);
    CHECK_EQ(cmodel_isolate(f.m, (void *)3), 0);
    CHECK_EQ(f.n_tr, 3);
    CHECK(f.tr[1].from == CIRCUIT_OPEN && f.tr[1].to == CIRCUIT_HALF_OPEN);
    CHECK(f.tr[1].cause == CIRCUIT_CAUSE_TIMER);
    CHECK(f.tr[2].from == CIRCUIT_HALF_OPEN && f.tr[2].to == CIRCUIT_ISOLATED);
    CHECK(f.tr_ctx[1] == (void *)3 && f.tr_ctx[2] == (void *)3);
    CHECK_EQ(cmodel_reset(f.m, NULL), 0);

    /* a probe timed out before the reset: timed out first (probe asked) */
    open_it(&f, 1);
    f.now += 100;
    cmodel_ticket a = {0};
    CHECK(allow(&f, &a));
    int probes = f.n_probe;
    f.now += 50;
    CHECK_EQ(cmodel_reset(f.m, NULL), 0);
    CHECK_EQ(f.n_probe, probes + 1);
    CHECK_COUNTS(&f.tr[f.n_tr - 1].counts, 0, 0, 0, 0, 1);
    circuit_stats st;
    stats(&f, &st);
    CHECK_EQ(st.timed_out, 1);
    CHECK(!cmodel_done(&a, CIRCUIT_SUCCESS));
    fx_fini(&f);
}

TEST(OP2_reset_closes_with_zero_counts)
{
    fx f;
    fx_init(&f, 4, 2, 100, 50);
    CHECK_EQ(cmodel_reset(f.m, NULL), EALREADY); /* closed */
    CHECK_EQ(f.n_tr, 0);
    open_it(&f, 1);
    CHECK_EQ(cmodel_reset(f.m, (void *)9), 0); /* from open */
    CHECK_EQ(f.n_tr, 2);
    CHECK(f.tr[1].from == CIRCUIT_OPEN && f.tr[1].to == CIRCUIT_CLOSED);
    CHECK(f.tr[1].cause == CIRCUIT_CAUSE_OPERATOR);
    CHECK_EQ(f.tr[1].open_for_ns, 0);
    CHECK(f.tr_ctx[1] == (void *)9);
    CHECK(cmodel_get_state(f.m) == CIRCUIT_CLOSED);
    CHECK_EQ(cmodel_reset(f.m, NULL), EALREADY);
    /* from half-open: the transition carries the half-open counts, outstanding
     * probes become late, the closed state starts from zero */
    open_it(&f, 1);
    f.now += 100;
    cmodel_ticket a = {0}, b = {0};
    CHECK(allow(&f, &a));
    CHECK(allow(&f, &b));
    CHECK(cmodel_done(&a, CIRCUIT_SUCCESS));
    CHECK_EQ(cmodel_reset(f.m, NULL), 0);
    CHECK(f.tr[f.n_tr - 1].from == CIRCUIT_HALF_OPEN && f.tr[f.n_tr - 1].to == CIRCUIT_CLOSED);
    CHECK_COUNTS(&f.tr[f.n_tr - 1].counts, 1, 0, 1, 0, 0);
    CHECK(!cmodel_done(&b, CIRCUIT_FAILURE));
    circuit_stats st;
    stats(&f, &st);
    CHECK(st.state == CIRCUIT_CLOSED);
    CHECK_COUNTS(&st.counts, 0, 0, 0, 0, 0);
    /* from isolated */
    CHECK_EQ(cmodel_isolate(f.m, NULL), 0);
    CHECK_EQ(cmodel_reset(f.m, NULL), 0);
    CHECK(f.tr[f.n_tr - 1].from == CIRCUIT_ISOLATED && f.tr[f.n_tr - 1].to == CIRCUIT_CLOSED);
    CHECK(call(&f, CIRCUIT_SUCCESS));
    fx_fini(&f);
}

/* isolate and reset inside observe: their transitions are delivered after it
 * returns, numbered and ordered like any other */
static void op3_hook(fx *f, const circuit_transition *t)
{
    if (t->generation == 1) {
        int before = f->n_tr;
        CHECK_EQ(cmodel_isolate(f->m, (void *)0x31), 0);
        CHECK_EQ(f->n_tr, before);
        CHECK(cmodel_get_state(f->m) == CIRCUIT_ISOLATED);
        CHECK_EQ(cmodel_reset(f->m, (void *)0x32), 0);
        CHECK_EQ(cmodel_reset(f->m, (void *)0x33), EALREADY);
    }
}

TEST(OP3_operator_calls_from_observe)
{
    fx f;
    fx_init(&f, 4, 1, 100, 50);
    f.hook = op3_hook;
    open_it(&f, 1);
    CHECK_EQ(f.n_tr, 3);
    CHECK_EQ(f.observe_reentered, 0);
    CHECK(f.tr[1].from == CIRCUIT_OPEN && f.tr[1].to == CIRCUIT_ISOLATED && f.tr_ctx[1] == (void *)0x31);
    CHECK(f.tr[2].from == CIRCUIT_ISOLATED && f.tr[2].to == CIRCUIT_CLOSED && f.tr_ctx[2] == (void *)0x32);
    CHECK_EQ(f.tr[2].generation, 3);
    fx_fini(&f);
}

/* ---- 0.2: open-period backoff ---------------------------------------------- */

TEST(B1_TM2_open_period_chosen_and_exact)
{
    fx f;
    fx_init_backoff(&f, 4, 1, 100, 50, 1000); /* period = 1000 + 100*reopens + gen */
    open_it(&f, 1);                           /* gen 1 at 1000: 1001 ns */
    CHECK_EQ(f.n_open_for, 1);
    CHECK_EQ(f.tr[0].open_for_ns, 1001);
    CHECK_COUNTS(&f.infos[0].counts, 0, 1, 0, 1, 0);
    CHECK_EQ(f.infos[0].generation, 1);
    CHECK_EQ(f.infos[0].reopens, 0);
    circuit_rejection r;
    cmodel_ticket a = {0};
    CHECK(!cmodel_allow(f.m, NULL, &a, &r));
    CHECK_EQ(r.retry_after_ns, 1001);
    circuit_stats st;
    stats(&f, &st);
    CHECK_EQ(st.retry_after_ns, 1001);
    f.now = 1000 + 1000; /* config's open_for_ns passed, the chosen one not */
    CHECK(cmodel_get_state(f.m) == CIRCUIT_OPEN);
    f.now = 1000 + 1000; /* 1 ns left */
    CHECK(!cmodel_allow(f.m, NULL, &a, &r));
    CHECK_EQ(r.retry_after_ns, 1);
    f.now = 2001;
    CHECK(allow(&f, &a)); /* exactly at the chosen boundary: a probe */
    CHECK(f.tr[1].to == CIRCUIT_HALF_OPEN && f.tr[1].cause == CIRCUIT_CAUSE_TIMER);
    CHECK_EQ(f.tr[1].open_for_ns, 0);
    f.reopen_failures = 1;
    f.now = 2011;
    CHECK(cmodel_done(&a, CIRCUIT_FAILURE)); /* reopen, gen 3: 1000 + 100 + 3 */
    CHECK(f.tr[2].to == CIRCUIT_OPEN && f.tr[2].cause == CIRCUIT_CAUSE_POLICY);
    CHECK_EQ(f.tr[2].open_for_ns, 1103);
    CHECK_EQ(f.infos[1].reopens, 1);
    CHECK_EQ(f.infos[1].generation, 3);
    CHECK_COUNTS(&f.infos[1].counts, 0, 1, 0, 1, 0);
    f.now = 2011 + 1102;
    CHECK(!cmodel_allow(f.m, NULL, &a, &r));
    CHECK_EQ(r.retry_after_ns, 1);
    f.now = 2011 + 1103;
    CHECK(cmodel_get_state(f.m) == CIRCUIT_HALF_OPEN);
    fx_fini(&f);
}

TEST(B1_without_open_for_the_config_period)
{
    fx f;
    fx_init(&f, 4, 1, 321, 50);
    open_it(&f, 1);
    CHECK_EQ(f.tr[0].open_for_ns, 321);
    CHECK_EQ(f.n_open_for, 0);
    fx_fini(&f);
}

TEST(B2_reopens_since_last_close)
{
    fx f;
    fx_init_backoff(&f, 4, 1, 100, 50, 1000);
    open_it(&f, 1); /* reopens 0 */
    f.reopen_failures = 1;
    f.reopen_timed_out = 1;
    /* reopen by a probe failure, then by a probe timeout */
    f.now += 2000;
    CHECK(call(&f, CIRCUIT_FAILURE));
    f.now += 2000;
    cmodel_ticket a = {0};
    CHECK(allow(&f, &a));
    f.now += 50;
    cmodel_ticket b = {0};
    CHECK(!allow(&f, &b)); /* a timed out: reopened as of its due time */
    CHECK(!cmodel_done(&a, CIRCUIT_SUCCESS));
    CHECK_EQ(f.n_open_for, 3);
    CHECK_EQ(f.infos[1].reopens, 1);
    CHECK_EQ(f.infos[2].reopens, 2);
    CHECK_COUNTS(&f.infos[2].counts, 0, 0, 0, 0, 1);
    /* closed by the probe policy: the next trip is reopens 0 again */
    f.reopen_failures = 0;
    f.reopen_timed_out = 0;
    f.close_successes = 1;
    f.now += 2000;
    CHECK(call(&f, CIRCUIT_SUCCESS));
    CHECK(cmodel_get_state(f.m) == CIRCUIT_CLOSED);
    CHECK(call(&f, CIRCUIT_FAILURE));
    CHECK_EQ(f.infos[3].reopens, 0);
    /* one reopen, then reset: the next trip counts from 0 */
    f.close_successes = 0;
    f.reopen_failures = 1;
    f.now += 2000;
    CHECK(call(&f, CIRCUIT_FAILURE));
    CHECK_EQ(f.infos[4].reopens, 1);
    CHECK_EQ(cmodel_reset(f.m, NULL), 0);
    CHECK(call(&f, CIRCUIT_FAILURE));
    CHECK_EQ(f.infos[5].reopens, 0);
    /* isolate from half-open, reset, trip: 0 */
    f.now += 2000;
    CHECK(call(&f, CIRCUIT_FAILURE)); /* reopen 1 */
    f.now += 2000;
    CHECK(allow(&f, &a));
    CHECK_EQ(cmodel_isolate(f.m, NULL), 0);
    CHECK_EQ(cmodel_reset(f.m, NULL), 0);
    CHECK(call(&f, CIRCUIT_FAILURE));
    CHECK_EQ(f.infos[7].reopens, 0);
    CHECK_EQ(f.infos[7].generation, f.tr[f.n_tr - 1].generation);
    CHECK_EQ(f.n_open_for, 8);
    fx_fini(&f);
}

/* ---- 0.2: stats ------------------------------------------------------------- */

TEST(M1_stats_totals_are_exact_and_add_up)
{
    fx f;
    fx_init(&f, 4, 2, 100, 50);
    circuit_stats st;
    stats(&f, &st);
    CHECK(st.state == CIRCUIT_CLOSED);
    CHECK_EQ(st.generation, 0);
    CHECK_EQ(st.admitted + st.rejected + st.successes + st.failures + st.ignored + st.late + st.released +
                 st.timed_out + st.transitions,
             0);
    int trans = f.n_tr;
    cmodel_ticket live = {0}, a = {0}, b = {0};
    CHECK(allow(&f, &live));
    CHECK(call(&f, CIRCUIT_SUCCESS));
    CHECK(call(&f, CIRCUIT_IGNORED));
    CHECK(allow(&f, &a));
    cmodel_release(&a);
    cmodel_release(&a); /* settled: not counted again */
    open_it(&f, 2);
    CHECK(!allow(&f, &a));
    stats(&f, &st);
    CHECK(st.state == CIRCUIT_OPEN);
    CHECK_EQ(st.generation, 1);
    CHECK_EQ(st.retry_after_ns, 100);
    CHECK_EQ(st.admitted, 6);
    CHECK_EQ(st.rejected, 1);
    CHECK_EQ(st.successes, 1);
    CHECK_EQ(st.failures, 2);
    CHECK_EQ(st.ignored, 1);
    CHECK_EQ(st.released, 1);
    CHECK_EQ(st.transitions, (uint64_t)(f.n_tr - trans));
    CHECK_EQ(st.admitted, st.successes + st.failures + st.ignored + st.late + st.released + 1);
    CHECK(!cmodel_done(&live, CIRCUIT_SUCCESS)); /* late */
    /* open past its period: reported as the half-open state it has become
     * (S5), nothing made */
    f.now += 100;
    stats(&f, &st);
    CHECK(st.state == CIRCUIT_HALF_OPEN);
    CHECK_EQ(st.generation, 2);
    CHECK_EQ(st.retry_after_ns, 0);
    CHECK_EQ(st.transitions, 1);
    CHECK(allow(&f, &a));
    CHECK(allow(&f, &b));
    stats(&f, &st);
    CHECK_EQ(st.probes_in_flight, 2);
    CHECK_EQ(st.generation, 2);
    CHECK_EQ(st.transitions, 2);
    f.now += 50; /* both due: in flight until an allow or done makes the timeouts */
    stats(&f, &st);
    CHECK_EQ(st.probes_in_flight, 2);
    CHECK_EQ(st.timed_out, 0);
    CHECK(cmodel_done(&a, CIRCUIT_SUCCESS)); /* both time out first, then a's result counts (P2) */
    stats(&f, &st);
    CHECK_EQ(st.timed_out, 2);
    CHECK_EQ(st.counts.timed_out, 2);
    CHECK_EQ(st.probes_in_flight, 0);
    CHECK_COUNTS(&st.counts, 1, 0, 1, 0, 2);
    cmodel_release(&b);
    stats(&f, &st);
    CHECK_EQ(st.late, 1);
    CHECK_EQ(st.admitted, st.successes + st.failures + st.ignored + st.late + st.released);
    fx_fini(&f);
}

/* ---- 0.2: policy check -------------------------------------------------------- */

TEST(K1_policy_check_joins_the_message)
{
    fx f;
    memset(&f, 0, sizeof f);
    circuit_spec s = fx_spec(&f, 0, 1, 1, 1);
    s.policy.check = fx_check;
    f.check_rc = EINVAL;
    f.check_msg = "min_results 50 is more than window";
    char buf[512];
    cmodel *m = (cmodel *)&s;
    CHECK_EQ(cmodel_new(&m, &s, fx_clock, &f, buf, sizeof buf), EINVAL);
    CHECK(m == NULL);
    CHECK_EQ(f.n_check, 1);
    CHECK(strstr(buf, "window") && strstr(buf, "min_results 50 is more than window"));
    CHECK(strstr(buf, "window") < strstr(buf, "min_results"));
    s = fx_spec(&f, 4, 1, 1, 1);
    s.policy.check = fx_check;
    CHECK_EQ(cmodel_new(&m, &s, fx_clock, &f, buf, sizeof buf), EINVAL); /* the policy alone */
    CHECK(strstr(buf, "min_results"));
    f.check_rc = 0;
    CHECK_EQ(cmodel_new(&m, &s, fx_clock, &f, buf, sizeof buf), 0);
    CHECK_EQ(f.n_check, 3);
    cmodel_free(m);
}

/* ---- aborts (CFG4, T1, T4) ------------------------------------------------ */

static void expect_abort(const char *what, void (*fn)(void), const char *needle)
{
    checks++;
    int pfd[2];
    if (pipe(pfd) != 0) {
        perror("pipe");
        exit(1);
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], 2);
        fn();
        _exit(0);
    }
    close(pfd[1]);
    char buf[1024];
    size_t n = 0;
    ssize_t k;
    while (n < sizeof buf - 1 && (k = read(pfd[0], buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)k;
    buf[n] = '\0';
    close(pfd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGABRT || strstr(buf, needle) == NULL) {
        fprintf(stderr, "%s: %s: expected an abort saying \"%s\"; got status %d, stderr \"%s\"\n", cur_test,
                what, needle, st, buf);
        failures++;
    }
}

static fx afx;
static void done_twice(void)
{
    fx_init(&afx, 4, 1, 100, 50);
    cmodel_ticket t = {0};
    allow(&afx, &t);
    cmodel_done(&t, CIRCUIT_SUCCESS);
    cmodel_done(&t, CIRCUIT_SUCCESS);
}
static void done_after_release(void)
{
    fx_init(&afx, 4, 1, 100, 50);
    cmodel_ticket t = {0};
    allow(&afx, &t);
    cmodel_release(&t);
    cmodel_done(&t, CIRCUIT_SUCCESS);
}
static void done_rejected(void)
{
    fx_init(&afx, 4, 1, 100, 50);
    open_it(&afx, 1);
    cmodel_ticket t = {0};
    allow(&afx, &t);
    cmodel_done(&t, CIRCUIT_SUCCESS);
}
static void done_blank(void)
{
    cmodel_ticket t = {0};
    cmodel_done(&t, CIRCUIT_SUCCESS);
}
static void classify_invalid(void)
{
    fx_init(&afx, 4, 1, 100, 50);
    cmodel_ticket t = {0};
    allow(&afx, &t);
    cmodel_done(&t, 99);
}
static void probe_invalid(void)
{
    fx_init(&afx, 4, 1, 100, 50);
    open_it(&afx, 1);
    afx.now += 100;
    afx.probe_bad = 7;
    call(&afx, CIRCUIT_SUCCESS);
}
static void allow_live(void)
{
    fx_init(&afx, 4, 1, 100, 50);
    cmodel_ticket t = {0};
    allow(&afx, &t);
    allow(&afx, &t);
}
static void null_model(void)
{
    cmodel_get_state(NULL);
}

static void open_for_nonpositive(void)
{
    fx_init_backoff(&afx, 4, 1, 100, 50, 1000);
    afx.period_bad = -5;
    open_it(&afx, 1);
}
static void check_bad_answer(void)
{
    circuit_spec s = fx_spec(&afx, 1, 1, 1, 1);
    s.policy.check = fx_check;
    afx.check_rc = 7;
    cmodel *m;
    cmodel_new(&m, &s, NULL, NULL, NULL, 0);
}

TEST(CFG4_T1_T4_programming_errors_abort)
{
    expect_abort("done after done", done_twice, "already settled by done");
    expect_abort("done after release", done_after_release, "already settled by release");
    expect_abort("done on a rejected ticket", done_rejected, "rejected");
    expect_abort("done on a blank ticket", done_blank, "not filled by cmodel_allow");
    expect_abort("classify invalid", classify_invalid, "classify returned an invalid outcome");
    expect_abort("probe invalid", probe_invalid, "probe policy returned an invalid state");
    expect_abort("allow on a live ticket", allow_live, "live");
    expect_abort("NULL model", null_model, "NULL model");
    expect_abort("open_for <= 0 (B1)", open_for_nonpositive, "open_for returned a period <= 0 (-5)");
    expect_abort("policy.check answers 7 (K1)", check_bad_answer, "policy.check returned 7");
}

/* ---- threads: the model as a baseline must be race-free (run under TSan) -- */

typedef struct mt {
    cmodel         *m;
    _Atomic int64_t clock;
    _Atomic long    bad, transitions, admitted;
    uint64_t        last_gen; /* observe only: never concurrent with itself */
    circuit_state   last_to;
} mt;

static int64_t mt_clock(void *arg)
{
    return atomic_load(&((mt *)arg)->clock);
}

static bool mt_trip(void *arg, const circuit_counts *c)
{
    mt *x = arg;
    if (c->successes + c->failures > 16 || c->timed_out != 0 ||
        (c->consecutive_successes && c->consecutive_failures))
        atomic_fetch_add(&x->bad, 1);
    return c->failures >= 5;
}

static circuit_state mt_probe(void *arg, const circuit_counts *c)
{
    mt *x = arg;
    if (c->successes + c->failures > 16)
        atomic_fetch_add(&x->bad, 1);
    if (c->failures >= 1 || c->timed_out >= 2)
        return CIRCUIT_OPEN;
    return c->successes >= 3 ? CIRCUIT_CLOSED : CIRCUIT_HALF_OPEN;
}

static circuit_outcome mt_classify(void *arg, void *call_ctx, int result)
{
    (void)arg;
    (void)call_ctx;
    return result % 3 == 0 ? CIRCUIT_FAILURE : result % 7 == 0 ? CIRCUIT_IGNORED : CIRCUIT_SUCCESS;
}

static void mt_observe(void *arg, void *call_ctx, const circuit_transition *t)
{
    (void)call_ctx;
    mt *x = arg;
    if (t->generation != x->last_gen + 1 || t->from != x->last_to)
        atomic_fetch_add(&x->bad, 1);
    x->last_gen = t->generation;
    x->last_to = t->to;
    atomic_fetch_add(&x->transitions, 1);
    (void)cmodel_get_state(x->m);
}

static void *mt_worker(void *arg)
{
    mt *x = arg;
    unsigned seed = (unsigned)(uintptr_t)pthread_self();
    for (int i = 0; i < 20000; i++) {
        cmodel_ticket t = {0};
        if (cmodel_allow(x->m, NULL, &t, NULL)) {
            atomic_fetch_add(&x->admitted, 1);
            seed = seed * 1103515245u + 12345u;
            if ((seed >> 16) % 5 == 0)
                cmodel_release(&t);
            else
                cmodel_done(&t, (int)((seed >> 8) % 1000));
        }
        if (i % 64 == 0)
            atomic_fetch_add(&x->clock, 17);
    }
    return NULL;
}

TEST(L4_O1_threads_keep_order_and_invariants)
{
    static mt x;
    memset(&x, 0, sizeof x);
    x.last_to = CIRCUIT_CLOSED;
    atomic_store(&x.clock, 1000);
    circuit_spec s = {.config = {16, 3, 200, 100},
                      .policy = {mt_trip, mt_probe, &x, NULL},
                      .classify = mt_classify,
                      .observe = mt_observe,
                      .observe_arg = &x};
    CHECK_EQ(cmodel_new(&x.m, &s, mt_clock, &x, NULL, 0), 0);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        CHECK_EQ(pthread_create(&th[i], NULL, mt_worker, &x), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    CHECK_EQ(atomic_load(&x.bad), 0);
    CHECK(atomic_load(&x.transitions) > 10);
    CHECK_EQ((int64_t)x.last_gen, atomic_load(&x.transitions)); /* none stranded (O3) */
    cmodel_free(x.m);
}

int main(void)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } tests[] = {
#define T(n) {#n, n}
        T(CFG1_CFG2_invalid_config_names_every_field),
        T(S1_new_breaker_is_closed_without_transition),
        T(S2_C4_O6_trip_opens_with_final_counts),
        T(S3_TM2_S5_open_boundary_exact),
        T(S4_half_open_admits_at_most_probes),
        T(S4_probe_reopens_at_result_time),
        T(P1_TM2_probe_timeout_exact),
        T(P1_reopen_as_of_due_moment_and_chain),
        T(P1_timeouts_in_due_order),
        T(P1_release_after_due_leaves_the_timeout),
        T(P3_T3_release_frees_slot_calls_nothing),
        T(T6_old_ticket_never_frees_a_later_probe_slot),
        T(T2_late_result_is_discarded),
        T(C1_C2_window_ring_and_runs),
        T(C5_ignored_counts_nothing_frees_slot),
        T(C2_C3_timeouts_touch_no_run),
        T(C3_timed_out_saturates),
        T(O1_O2_O6_nested_transitions_after_observe_returns),
        T(O4_O5_observe_unwinding_leaves_rest_for_next_call),
        T(S2_success_never_asks_trip),
        T(S2_window_one_asks_after_each_failure_only),
        T(S2_success_policy_never_opens),
        T(OP1_isolate_from_closed_makes_earlier_results_late),
        T(OP1_isolated_has_no_time_driven_change),
        T(OP1_isolate_from_open_carries_zero_counts),
        T(OP1_P1_isolate_makes_due_changes_first),
        T(OP2_reset_closes_with_zero_counts),
        T(OP3_operator_calls_from_observe),
        T(B1_TM2_open_period_chosen_and_exact),
        T(B1_without_open_for_the_config_period),
        T(B2_reopens_since_last_close),
        T(M1_stats_totals_are_exact_and_add_up),
        T(K1_policy_check_joins_the_message),
        T(CFG4_T1_T4_programming_errors_abort),
        T(L4_O1_threads_keep_order_and_invariants),
#undef T
    };
    int failed_tests = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        int before = failures;
        cur_test = tests[i].name;
        tests[i].fn();
        if (failures != before)
            failed_tests++;
    }
    int n = (int)(sizeof tests / sizeof tests[0]);
    printf("model_selftest: %d checks, %d tests: %d passed, %d failed\n", checks, n, n - failed_tests,
           failed_tests);
    return failed_tests ? 1 : 0;
}
