/*
 * K1: policy.check is asked once by circuit_new; its EINVAL answer joins
 * CFG2's single message (every invalid config field, then the policy's
 * complaint) and nothing is built; any other answer but 0 aborts. The
 * failure-rate preset's check refuses a window smaller than min_results.
 *
 * check is called even when the config has invalid fields (so one message
 * holds every complaint); tests below pin that choice.
 */
#include "helpers.h"

#include "circuit_presets.h"

TestSuite(k1);

/* ---- a check that records how it was called ------------------------------ */

typedef struct check_spy {
    int calls;
    int answer;            /* what it returns */
    const char *complaint; /* what it writes (NULL: nothing) */
    circuit_config seen;   /* the config of the last call */
    size_t errbuf_len;     /* errbuf_len of the last call */
    bool errbuf_was_empty; /* errbuf held "" when the check began */
    void *arg_seen;
} check_spy;

static int spy_check(void *arg, const circuit_config *cfg, char *errbuf, size_t errbuf_len)
{
    /* arg is the pol of the fx (the policy's arg); the spy sits in fx.user. */
    fx *f = (fx *)((char *)arg - offsetof(fx, p));
    check_spy *s = f->user;
    s->calls++;
    s->seen = *cfg;
    s->errbuf_len = errbuf_len;
    s->errbuf_was_empty = errbuf != NULL && errbuf_len >= 1 && errbuf[0] == '\0';
    s->arg_seen = arg;
    if (s->complaint)
        snprintf(errbuf, errbuf_len, "%s", s->complaint);
    return s->answer;
}

/* An fx whose spec carries spy_check; the breaker is not built. */
static void spec_with_check(fx *f, check_spy *s, int window, int probes)
{
    fx_init(f, window, probes, OPEN_FOR, PROBE_TO);
    f->user = s;
    f->spec.policy.check = spy_check;
}

/* ---- the hook ------------------------------------------------------------- */

Test(k1, K1_check_is_called_once_with_the_config_and_may_accept)
{
    fx f;
    check_spy s = {.answer = 0};
    spec_with_check(&f, &s, 10, 3);
    char err[256] = "junk";
    cr_assert_eq(circuit_new(&f.b, &f.spec, err, sizeof err), 0, "%s", err);
    cr_assert_not_null(f.b);
    cr_assert_str_empty(err);
    cr_assert_eq(s.calls, 1);
    cr_assert_eq(s.seen.window, 10);
    cr_assert_eq(s.seen.probes, 3);
    cr_assert_eq(s.seen.open_for_ns, OPEN_FOR);
    cr_assert_eq(s.seen.probe_timeout_ns, PROBE_TO);
    cr_assert_eq(s.arg_seen, f.spec.policy.arg, "check gets the policy's arg");
    cr_assert_geq(s.errbuf_len, 1);
    cr_assert(s.errbuf_was_empty, "the check's errbuf starts as an empty string");

    /* Traffic never asks it again. */
    for (int i = 0; i < 5; i++)
        fx_call(&f, i % 2 ? RS_FAIL : RS_OK);
    fx_call(&f, RS_FAIL);
    fx_call(&f, RS_FAIL); /* trips */
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    cr_assert_eq(s.calls, 1);
    fx_free(&f);
}

Test(k1, K1_check_is_called_even_without_an_errbuf)
{
    fx f;
    check_spy s = {.answer = EINVAL, .complaint = "no"};
    spec_with_check(&f, &s, 10, 1);
    circuit_breaker *b = (circuit_breaker *)&f; /* must be overwritten with NULL */
    cr_assert_eq(circuit_new(&b, &f.spec, NULL, 0), EINVAL);
    cr_assert_null(b);
    cr_assert_eq(s.calls, 1);
}

Test(k1, K1_einval_is_the_last_clause_of_the_config_message)
{
    fx f;
    check_spy s = {.answer = EINVAL, .complaint = "needs at least 4 probes"};
    spec_with_check(&f, &s, 10, 1);
    char err[256];
    circuit_breaker *b = NULL;
    cr_assert_eq(circuit_new(&b, &f.spec, err, sizeof err), EINVAL);
    cr_assert_null(b);
    cr_assert_str_eq(err, "invalid circuit_config: policy: needs at least 4 probes");
    cr_assert_eq(s.calls, 1);
}

Test(k1, K1_every_complaint_in_one_message_check_called_on_an_invalid_config)
{
    fx f;
    check_spy s = {.answer = EINVAL, .complaint = "min_results = 50 exceeds window = 0"};
    spec_with_check(&f, &s, 0, 0);
    f.spec.config.probe_timeout_ns = -1;
    char err[512];
    circuit_breaker *b = NULL;
    cr_assert_eq(circuit_new(&b, &f.spec, err, sizeof err), EINVAL);
    cr_assert_null(b);
    cr_assert_eq(s.calls, 1, "asked once, although the config is invalid");
    cr_assert_eq(s.seen.window, 0, "the check sees the config as given");
    cr_assert_str_eq(err, "invalid circuit_config: window = 0 (must be 1..65536); probes = 0 "
                          "(must be 1..65536); probe_timeout_ns = -1 (must be > 0); "
                          "policy: min_results = 50 exceeds window = 0");
}

Test(k1, K1_a_check_that_accepts_does_not_hide_an_invalid_field)
{
    fx f;
    check_spy s = {.answer = 0};
    spec_with_check(&f, &s, 10, 1);
    f.spec.config.open_for_ns = 0;
    char err[256];
    circuit_breaker *b = NULL;
    cr_assert_eq(circuit_new(&b, &f.spec, err, sizeof err), EINVAL);
    cr_assert_null(b);
    cr_assert_eq(s.calls, 1);
    cr_assert_str_eq(err, "invalid circuit_config: open_for_ns = 0 (must be > 0)");
}

Test(k1, K1_a_refusal_without_a_reason_still_says_who_refused)
{
    fx f;
    check_spy s = {.answer = EINVAL};
    spec_with_check(&f, &s, 10, 1);
    char err[256];
    circuit_breaker *b = NULL;
    cr_assert_eq(circuit_new(&b, &f.spec, err, sizeof err), EINVAL);
    cr_assert_str_eq(err,
                     "invalid circuit_config: policy: refused by policy.check (no reason given)");
}

Test(k1, K1_a_refusal_builds_nothing_and_leaks_nothing)
{
    fx f;
    check_spy s = {.answer = EINVAL, .complaint = "no"};
    spec_with_check(&f, &s, 100, 8);
    int64_t live = A_LOAD(&alloc_live);
    int64_t calls = A_LOAD(&alloc_calls);
    circuit_breaker *b = NULL;
    cr_assert_eq(circuit_new(&b, &f.spec, NULL, 0), EINVAL);
    cr_assert_null(b);
    cr_assert_eq(A_LOAD(&alloc_live), live, "a refused breaker holds no memory");
    cr_assert_eq(A_LOAD(&alloc_calls), calls, "the check is asked before anything is allocated");
}

Test(k1, K1_the_message_is_truncated_safely_like_CFG2)
{
    fx f;
    check_spy s = {.answer = EINVAL, .complaint = "a long complaint from the policy check"};
    spec_with_check(&f, &s, 0, 1);
    const char *full = "invalid circuit_config: window = 0 (must be 1..65536); policy: a long "
                       "complaint from the policy check";
    for (size_t len = 1; len <= strlen(full) + 2; len++) {
        char err[160];
        memset(err, '#', sizeof err);
        circuit_breaker *b = NULL;
        cr_assert_eq(circuit_new(&b, &f.spec, err, len), EINVAL);
        size_t want = len - 1 < strlen(full) ? len - 1 : strlen(full);
        cr_assert_eq(strlen(err), want, "errbuf_len %zu", len);
        cr_assert_eq(strncmp(err, full, want), 0, "errbuf_len %zu: %s", len, err);
        for (size_t i = len; i < sizeof err; i++)
            cr_assert_eq(err[i], '#', "errbuf_len %zu wrote byte %zu", len, i);
    }
}

/* A complaint longer than the scratch space the check is given is cut there,
 * and still NUL-terminated, whatever the check does with the length. */
static int long_check(void *arg, const circuit_config *cfg, char *errbuf, size_t errbuf_len)
{
    (void)arg;
    (void)cfg;
    memset(errbuf, 'x', errbuf_len); /* no NUL at all */
    return EINVAL;
}

Test(k1, K1_a_check_that_forgets_the_nul_is_cut_at_its_errbuf_len)
{
    fx f;
    fx_init(&f, 10, 1, OPEN_FOR, PROBE_TO);
    f.spec.policy.check = long_check;
    static char err[8192];
    circuit_breaker *b = NULL;
    cr_assert_eq(circuit_new(&b, &f.spec, err, sizeof err), EINVAL);
    const char *prefix = "invalid circuit_config: policy: ";
    cr_assert_eq(strncmp(err, prefix, strlen(prefix)), 0, "%s", err);
    size_t xs = strlen(err) - strlen(prefix);
    cr_assert_gt(xs, 0);
    cr_assert_lt(xs, 4096, "the complaint is bounded by the check's errbuf_len");
    cr_assert_eq(strspn(err + strlen(prefix), "x"), xs);
}

/* ---- any other answer aborts (CFG4) ----------------------------------------- */

static int answer_of_the_abort_test;

static int bad_check(void *arg, const circuit_config *cfg, char *errbuf, size_t errbuf_len)
{
    (void)arg;
    (void)cfg;
    (void)errbuf;
    (void)errbuf_len;
    return answer_of_the_abort_test;
}

static void new_with_bad_check(void *arg)
{
    answer_of_the_abort_test = *(int *)arg;
    fx f;
    fx_init(&f, 10, 1, OPEN_FOR, PROBE_TO);
    f.spec.policy.check = bad_check;
    circuit_breaker *b = NULL;
    (void)circuit_new(&b, &f.spec, NULL, 0);
}

Test(k1, K1_a_check_answer_other_than_0_or_einval_aborts_naming_it)
{
    int answers[] = {42, -EINVAL, ENOMEM, 1};
    for (size_t i = 0; i < sizeof answers / sizeof answers[0]; i++) {
        char want[160];
        snprintf(want, sizeof want,
                 "circuit_new: policy.check returned %d; it must return 0 (accept) or EINVAL "
                 "(%d, refuse)",
                 answers[i], EINVAL);
        expect_abort(new_with_bad_check, &answers[i], want);
    }
}

/* ---- the failure-rate preset's check ----------------------------------------- */

/* A failure-rate policy made for a window of 100 (min_results 50, 50%). */
static circuit_failure_rate rate_for_100(void)
{
    circuit_config made_for = {100, 1, OPEN_FOR, PROBE_TO};
    circuit_failure_rate p;
    char err[256];
    cr_assert_eq(circuit_failure_rate_init(&p, &made_for, 50, 0.5, 1, err, sizeof err), 0, "%s",
                 err);
    return p;
}

static void quiet_observe(void *arg, void *call_ctx, const circuit_transition *t)
{
    (void)arg;
    (void)call_ctx;
    (void)t;
}

static circuit_spec rate_spec(const circuit_failure_rate *p, int window)
{
    circuit_spec spec = {
        .config = {window, 1, OPEN_FOR, PROBE_TO},
        .policy = circuit_failure_rate_policy(p),
        .classify = circuit_classify_errno,
        .observe = quiet_observe,
    };
    return spec;
}

Test(k1, K1_failure_rate_refuses_a_window_smaller_than_min_results)
{
    circuit_failure_rate p = rate_for_100();
    cr_assert_not_null(circuit_failure_rate_policy(&p).check);
    circuit_spec spec = rate_spec(&p, 10);
    char err[512];
    circuit_breaker *b = NULL;
    cr_assert_eq(circuit_new(&b, &spec, err, sizeof err), EINVAL,
                 "the issue's silent trap: a window of 10 could never trip this policy");
    cr_assert_null(b);
    cr_assert_str_eq(err, "invalid circuit_config: policy: circuit_failure_rate min_results = "
                          "50 exceeds window = 10 (the window never holds that many results, "
                          "so the policy would never trip)");
}

Test(k1, K1_failure_rate_window_equal_to_min_results_is_accepted_and_trips)
{
    circuit_failure_rate p = rate_for_100();
    fx f;
    fx_init(&f, 50, 1, OPEN_FOR, PROBE_TO);
    f.spec.policy = circuit_failure_rate_policy(&p);
    char err[256];
    cr_assert_eq(circuit_new(&f.b, &f.spec, err, sizeof err), 0, "%s", err);

    circuit_spec too_small = rate_spec(&p, 49);
    circuit_breaker *b = NULL;
    cr_assert_eq(circuit_new(&b, &too_small, err, sizeof err), EINVAL);
    cr_assert(strstr(err, "min_results = 50 exceeds window = 49") != NULL, "%s", err);

    /* With the window the check allowed, 50 failures open the breaker. */
    for (int i = 0; i < 50; i++)
        fx_call(&f, RS_FAIL);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    fx_free(&f);
}

Test(k1, K1_failure_rate_check_joins_the_config_complaints)
{
    circuit_failure_rate p = rate_for_100();
    circuit_spec spec = rate_spec(&p, 10);
    spec.config.probes = 0;
    spec.config.open_for_ns = -5;
    char err[512];
    circuit_breaker *b = NULL;
    cr_assert_eq(circuit_new(&b, &spec, err, sizeof err), EINVAL);
    cr_assert_str_eq(err, "invalid circuit_config: probes = 0 (must be 1..65536); open_for_ns = "
                          "-5 (must be > 0); policy: circuit_failure_rate min_results = 50 "
                          "exceeds window = 10 (the window never holds that many results, so "
                          "the policy would never trip)");
}

Test(k1, K1_failure_rate_check_leaves_an_out_of_range_window_to_circuit_new)
{
    circuit_failure_rate p = rate_for_100();
    char err[512];
    circuit_breaker *b = NULL;
    circuit_spec zero = rate_spec(&p, 0);
    cr_assert_eq(circuit_new(&b, &zero, err, sizeof err), EINVAL);
    cr_assert_str_eq(err, "invalid circuit_config: window = 0 (must be 1..65536)");
    circuit_spec huge = rate_spec(&p, CIRCUIT_MAX_COUNT + 1);
    cr_assert_eq(circuit_new(&b, &huge, err, sizeof err), EINVAL);
    cr_assert_str_eq(err, "invalid circuit_config: window = 65537 (must be 1..65536)");
}

Test(k1, K1_failure_rate_check_is_pure_and_callable_directly)
{
    circuit_failure_rate p = rate_for_100();
    circuit_failure_rate before = p;
    circuit_policy rp = circuit_failure_rate_policy(&p);
    circuit_config small = {10, 1, OPEN_FOR, PROBE_TO}, big = {100, 1, OPEN_FOR, PROBE_TO};
    char e1[256], e2[256];
    cr_assert_eq(rp.check(rp.arg, &small, e1, sizeof e1), EINVAL);
    cr_assert_eq(rp.check(rp.arg, &small, e2, sizeof e2), EINVAL);
    cr_assert_str_eq(e1, e2);
    char untouched[8] = "keep";
    cr_assert_eq(rp.check(rp.arg, &big, untouched, sizeof untouched), 0);
    cr_assert_str_eq(untouched, "keep", "an accepting check writes nothing");
    cr_assert_eq(memcmp(&before, &p, sizeof p), 0, "the struct is only read");
}

Test(k1, K1_consecutive_has_no_check)
{
    circuit_consecutive c;
    cr_assert_eq(circuit_consecutive_init(&c, 3, 1, NULL, 0), 0);
    cr_assert_null(circuit_consecutive_policy(&c).check,
                   "the consecutive policy never looks at the window");
}
