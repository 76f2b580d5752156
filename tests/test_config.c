/*
 * The configuration: CFG1-CFG4 (checks, messages, out of memory, and the
 * programming errors that abort) and K1 (the policy's own check, asked by
 * circuit_new).
 */
#include <limits.h>

#include "helpers.h"

#include "circuit_presets.h"

static circuit_spec valid_spec(fx *f)
{
    fx_init(f, 4, 2, OPEN_FOR, PROBE_TO);
    return f->spec;
}

static int try_new(circuit_spec *s, circuit_breaker **out, char *err, size_t len)
{
    *out = (circuit_breaker *)(uintptr_t)0x1; /* must be overwritten with NULL on failure */
    return circuit_new(out, s, err, len);
}

/* ---- CFG1 ------------------------------------------------------------------ */

Test(config, CFG1_extreme_valid_values_are_accepted)
{
    static const int counts[] = {1, 2, CIRCUIT_MAX_COUNT};
    static const int64_t times[] = {1, INT64_MAX};
    fx f;
    for (size_t w = 0; w < 3; w++)
        for (size_t p = 0; p < 3; p++)
            for (size_t o = 0; o < 2; o++)
                for (size_t t = 0; t < 2; t++) {
                    circuit_spec s = valid_spec(&f);
                    s.config = (circuit_config){counts[w], counts[p], times[o], times[t]};
                    circuit_breaker *b = NULL;
                    char err[128] = "x";
                    int rc = circuit_new(&b, &s, err, sizeof err);
                    cr_assert_eq(rc, 0, "window %d probes %d open_for %lld probe_timeout %lld: %d %s",
                                 counts[w], counts[p], (long long)times[o], (long long)times[t],
                                 rc, err);
                    cr_assert_not_null(b);
                    cr_assert_eq(circuit_get_state(b), CIRCUIT_CLOSED);
                    circuit_free(b);
                }
}

Test(config, CFG1_out_of_range_values_are_rejected_not_clamped)
{
    static const int bad_counts[] = {0, -1, CIRCUIT_MAX_COUNT + 1, INT_MIN, INT_MAX};
    static const int64_t bad_times[] = {0, -1, INT64_MIN};
    fx f;
    char err[256];
    circuit_breaker *b;
    for (size_t i = 0; i < sizeof bad_counts / sizeof bad_counts[0]; i++) {
        circuit_spec s = valid_spec(&f);
        s.config.window = bad_counts[i];
        cr_assert_eq(try_new(&s, &b, err, sizeof err), EINVAL, "window %d", bad_counts[i]);
        cr_assert_null(b);
        s = valid_spec(&f);
        s.config.probes = bad_counts[i];
        cr_assert_eq(try_new(&s, &b, err, sizeof err), EINVAL, "probes %d", bad_counts[i]);
        cr_assert_null(b);
    }
    for (size_t i = 0; i < sizeof bad_times / sizeof bad_times[0]; i++) {
        circuit_spec s = valid_spec(&f);
        s.config.open_for_ns = bad_times[i];
        cr_assert_eq(try_new(&s, &b, err, sizeof err), EINVAL, "open_for %lld",
                     (long long)bad_times[i]);
        cr_assert_null(b);
        s = valid_spec(&f);
        s.config.probe_timeout_ns = bad_times[i];
        cr_assert_eq(try_new(&s, &b, err, sizeof err), EINVAL, "probe_timeout %lld",
                     (long long)bad_times[i]);
        cr_assert_null(b);
    }
}

Test(config, CFG1_values_are_used_as_given)
{
    /* window 3 is not rounded to a power of two: the 4th result evicts the 1st. */
    fx f;
    fx_init(&f, 3, 3, 7, 5);
    f.p.trip_run = 0;
    fx_build(&f);
    fx_call(&f, RS_FAIL);
    fx_call(&f, RS_OK);
    fx_call(&f, RS_OK);
    assert_counts(&f.seen[2], 2, 1, 2, 0, 0);
    fx_call(&f, RS_OK);
    assert_counts(&f.seen[3], 3, 0, 3, 0, 0);
    fx_call(&f, RS_FAIL); /* S S F */
    cr_assert_eq(f.p.trip_calls, 2);
    assert_counts(&f.p.trip_seen[1], 2, 1, 0, 1, 0);
    /* open_for 7 ns exactly, probes 3 exactly */
    f.p.trip_run = 1;
    circuit_test_clock_set(T0);
    fx_call(&f, RS_FAIL);
    circuit_test_clock_set(T0 + 6);
    circuit_ticket t[4];
    circuit_rejection rej;
    cr_assert_not(circuit_allow(f.b, NULL, &t[0], &rej));
    assert_rejected(rej, CIRCUIT_OPEN, 1);
    circuit_test_clock_set(T0 + 7);
    for (int i = 0; i < 3; i++)
        cr_assert(circuit_allow(f.b, NULL, &t[i], &rej), "probe %d", i);
    cr_assert_not(circuit_allow(f.b, NULL, &t[3], &rej));
    assert_rejected(rej, CIRCUIT_HALF_OPEN, 0);
    for (int i = 0; i < 3; i++)
        circuit_release(&t[i]);
    fx_free(&f);
}

/* ---- CFG2 ------------------------------------------------------------------ */

/* true when `tok` occurs in s as a whole number (not inside a longer one) */
static bool has_number(const char *s, const char *tok)
{
    size_t n = strlen(tok);
    for (const char *p = strstr(s, tok); p; p = strstr(p + 1, tok)) {
        bool left = p == s || !(p[-1] >= '0' && p[-1] <= '9') || tok[0] == '-';
        bool right = !(p[n] >= '0' && p[n] <= '9');
        if (p != s && tok[0] != '-' && p[-1] == '-')
            left = false;
        if (left && right)
            return true;
    }
    return false;
}

static const char *const field_names[] = {"window", "probes", "open_for_ns", "probe_timeout_ns"};

/* The text that describes `field`: from its name to the next field's name. */
static void field_segment(const char *msg, const char *field, char *seg, size_t len)
{
    const char *p = strstr(msg, field);
    cr_assert_not_null(p, "the message does not name %s: %s", field, msg);
    const char *end = p + strlen(p);
    for (size_t i = 0; i < 4; i++) {
        const char *q = strstr(p + strlen(field), field_names[i]);
        if (q && q < end)
            end = q;
    }
    size_t n = (size_t)(end - p) < len - 1 ? (size_t)(end - p) : len - 1;
    memcpy(seg, p, n);
    seg[n] = '\0';
}

static void assert_field(const char *msg, const char *field, const char *value, const char *bound)
{
    char seg[256];
    field_segment(msg, field, seg, sizeof seg);
    cr_assert(has_number(seg, value), "%s: the value %s is not given in \"%s\" (message: %s)",
              field, value, seg, msg);
    cr_assert(has_number(seg, bound), "%s: the bound %s is not given in \"%s\" (message: %s)",
              field, bound, seg, msg);
}

Test(config, CFG2_one_message_names_every_invalid_field_with_bound_and_value)
{
    fx f;
    circuit_spec s = valid_spec(&f);
    s.config = (circuit_config){0, CIRCUIT_MAX_COUNT + 1, INT64_MIN, -7};
    char err[512];
    memset(err, 'z', sizeof err);
    circuit_breaker *b;
    cr_assert_eq(try_new(&s, &b, err, sizeof err), EINVAL);
    cr_assert_null(b);
    cr_assert_not_null(memchr(err, '\0', sizeof err), "not NUL-terminated");
    cr_assert_null(strchr(err, '\n'), "one message, one line: %s", err);
    assert_field(err, "window", "0", "65536");
    assert_field(err, "probes", "65537", "65536");
    assert_field(err, "open_for_ns", "-9223372036854775808", "0");
    assert_field(err, "probe_timeout_ns", "-7", "0");
}

Test(config, CFG2_only_the_invalid_fields_are_named)
{
    fx f;
    char err[512];
    circuit_breaker *b;
    for (int bad = 0; bad < 4; bad++) {
        circuit_spec s = valid_spec(&f);
        switch (bad) {
        case 0: s.config.window = -3; break;
        case 1: s.config.probes = 0; break;
        case 2: s.config.open_for_ns = 0; break;
        default: s.config.probe_timeout_ns = -1; break;
        }
        cr_assert_eq(try_new(&s, &b, err, sizeof err), EINVAL);
        cr_assert_null(b);
        for (int i = 0; i < 4; i++) {
            /* "probes" is not a prefix of "probe_timeout_ns": plain search works */
            bool named = strstr(err, field_names[i]) != NULL;
            cr_assert_eq(named, i == bad, "field %s (invalid: %s): %s", field_names[i],
                         field_names[bad], err);
        }
    }
    circuit_spec s = valid_spec(&f);
    s.config.window = -3;
    cr_assert_eq(try_new(&s, &b, err, sizeof err), EINVAL);
    assert_field(err, "window", "-3", "65536");
    assert_field(err, "window", "-3", "1");
}

Test(config, CFG2_errbuf_is_truncated_safely)
{
    fx f;
    circuit_spec s = valid_spec(&f);
    s.config = (circuit_config){0, 0, 0, 0};
    circuit_breaker *b;
    char full[512];
    cr_assert_eq(try_new(&s, &b, full, sizeof full), EINVAL);
    size_t n = strlen(full);
    cr_assert_gt(n, 20);

    for (size_t len = 1; len <= 6; len++) {
        char buf[16];
        memset(buf, '#', sizeof buf);
        cr_assert_eq(try_new(&s, &b, buf, len), EINVAL);
        cr_assert_null(b);
        cr_assert_eq(buf[len - 1], '\0', "len %zu: not terminated", len);
        cr_assert_eq(memcmp(buf, full, len - 1), 0, "len %zu: not a prefix", len);
        for (size_t i = len; i < sizeof buf; i++)
            cr_assert_eq(buf[i], '#', "len %zu: byte %zu written past the end", len, i);
    }
    /* exactly the message plus its NUL; and one byte short */
    char exact[512];
    memset(exact, '#', sizeof exact);
    cr_assert_eq(try_new(&s, &b, exact, n + 1), EINVAL);
    cr_assert_str_eq(exact, full);
    cr_assert_eq(exact[n + 1], '#');
    memset(exact, '#', sizeof exact);
    cr_assert_eq(try_new(&s, &b, exact, n), EINVAL);
    cr_assert_eq(exact[n - 1], '\0');
    cr_assert_eq(memcmp(exact, full, n - 1), 0);
    cr_assert_eq(exact[n], '#');
}

Test(config, CFG2_null_errbuf_and_zero_length)
{
    fx f;
    circuit_spec s = valid_spec(&f);
    s.config.probes = -1;
    circuit_breaker *b;
    cr_assert_eq(try_new(&s, &b, NULL, 0), EINVAL);
    cr_assert_null(b);
    cr_assert_eq(try_new(&s, &b, NULL, 100), EINVAL);
    cr_assert_null(b);
    char buf[8];
    memset(buf, '#', sizeof buf);
    cr_assert_eq(try_new(&s, &b, buf, 0), EINVAL);
    for (size_t i = 0; i < sizeof buf; i++)
        cr_assert_eq(buf[i], '#', "errbuf_len 0 wrote byte %zu", i);
    /* a valid config with NULL errbuf */
    s = valid_spec(&f);
    cr_assert_eq(circuit_new(&b, &s, NULL, 0), 0);
    cr_assert_not_null(b);
    circuit_free(b);
}

/* ---- CFG3 ------------------------------------------------------------------ */

static void enomem_sweep(int window, int probes)
{
    fx f;
    fx_init(&f, window, probes, OPEN_FOR, PROBE_TO);
    int failures = 0;
    for (int64_t k = 1; k < 64; k++) {
        int64_t live0 = A_LOAD(&alloc_live);
        A_STORE(&alloc_calls, 0);
        A_STORE(&alloc_fail_at, k);
        circuit_breaker *b = (circuit_breaker *)(uintptr_t)0x1;
        char err[64];
        int rc = circuit_new(&b, &f.spec, err, sizeof err);
        A_STORE(&alloc_fail_at, 0);
        if (A_LOAD(&alloc_calls) < k) {
            /* fewer than k allocations: nothing failed, it must have worked */
            cr_assert_eq(rc, 0, "window %d probes %d: rc %d with no failed allocation", window,
                         probes, rc);
            cr_assert_not_null(b);
            cr_assert_gt(A_LOAD(&alloc_live), live0);
            circuit_free(b);
            cr_assert_eq(A_LOAD(&alloc_live), live0, "circuit_free leaked %lld blocks",
                         (long long)(A_LOAD(&alloc_live) - live0));
            cr_assert_gt(failures, 0, "circuit_new made no allocation at all");
            return;
        }
        cr_assert_eq(rc, ENOMEM, "window %d probes %d: allocation %lld failed, rc %d", window,
                     probes, (long long)k, rc);
        cr_assert_null(b, "allocation %lld failed: *out not NULL", (long long)k);
        cr_assert_eq(A_LOAD(&alloc_live), live0, "allocation %lld failed: %lld blocks leaked",
                     (long long)k, (long long)(A_LOAD(&alloc_live) - live0));
        failures++;
    }
    cr_assert_fail("circuit_new never succeeded");
}

Test(config, CFG3_enomem_at_every_allocation_leaks_nothing)
{
    enomem_sweep(1, 1);
    enomem_sweep(8, 40);
    enomem_sweep(CIRCUIT_MAX_COUNT, CIRCUIT_MAX_COUNT);
}

Test(config, CFG3_success_returns_zero_and_a_closed_breaker)
{
    fx f;
    fx_init(&f, 5, 5, OPEN_FOR, PROBE_TO);
    circuit_breaker *b = NULL;
    char err[64];
    memset(err, '#', sizeof err);
    cr_assert_eq(circuit_new(&b, &f.spec, err, sizeof err), 0);
    cr_assert_not_null(b);
    cr_assert_eq(circuit_get_state(b), CIRCUIT_CLOSED);
    circuit_free(b);
    circuit_free(NULL); /* does nothing */
}

/* ---- CFG4: programming errors abort naming the cause ---------------------------- */

typedef struct abort_case {
    fx f;
    int which;
} abort_case;

static void new_with(void *arg)
{
    abort_case *a = (abort_case *)arg;
    circuit_spec s = a->f.spec;
    circuit_breaker *b = NULL;
    switch (a->which) {
    case 0: circuit_new(NULL, &s, NULL, 0); break;
    case 1: circuit_new(&b, NULL, NULL, 0); break;
    case 2: s.policy.trip = NULL; circuit_new(&b, &s, NULL, 0); break;
    case 3: s.policy.probe = NULL; circuit_new(&b, &s, NULL, 0); break;
    default: s.classify = NULL; circuit_new(&b, &s, NULL, 0); break;
    }
    circuit_free(b);
}

static abort_case *new_case(int which)
{
    static abort_case a;
    fx_init(&a.f, 2, 1, OPEN_FOR, PROBE_TO);
    a.which = which;
    return &a;
}

Test(config, CFG4_new_with_null_out_aborts, .signal = SIGABRT)
{
    expect_abort(new_with, new_case(0), "out is NULL");
    new_with(new_case(0));
}

Test(config, CFG4_new_with_null_spec_aborts, .signal = SIGABRT)
{
    expect_abort(new_with, new_case(1), "spec is NULL");
    new_with(new_case(1));
}

Test(config, CFG4_new_with_null_trip_aborts, .signal = SIGABRT)
{
    expect_abort(new_with, new_case(2), "policy.trip is NULL");
    new_with(new_case(2));
}

Test(config, CFG4_new_with_null_probe_aborts, .signal = SIGABRT)
{
    expect_abort(new_with, new_case(3), "policy.probe is NULL");
    new_with(new_case(3));
}

Test(config, CFG4_new_with_null_classify_aborts, .signal = SIGABRT)
{
    expect_abort(new_with, new_case(4), "classify is NULL");
    new_with(new_case(4));
}

/* CFG4: observe may be NULL. There is then no observer,
 * but transitions are made, numbered and counted exactly as with one. */
Test(config, CFG4_observe_may_be_null_transitions_still_numbered_and_counted)
{
    circuit_test_clock_use_real(false);
    circuit_test_clock_set(T0);
    fx f;
    fx_init(&f, 4, 1, OPEN_FOR, PROBE_TO);
    f.spec.observe = NULL;
    f.spec.observe_arg = &f; /* ignored without an observer */
    fx_build(&f);
    fx_open(&f); /* closed -> open: generation 1 */
    circuit_stats st;
    circuit_get_stats(f.b, &st);
    cr_assert_eq(st.state, CIRCUIT_OPEN);
    cr_assert_eq(st.generation, 1);
    cr_assert_eq(st.transitions, 1);
    circuit_test_clock_advance(OPEN_FOR);
    fx_call(&f, RS_OK); /* open -> half-open (2), a probe success */
    fx_call(&f, RS_OK); /* the second closes (3) */
    cr_assert_eq(circuit_isolate(f.b, NULL), 0); /* 4 */
    cr_assert_eq(circuit_reset(f.b, NULL), 0);   /* 5 */
    circuit_get_stats(f.b, &st);
    cr_assert_eq(st.state, CIRCUIT_CLOSED);
    cr_assert_eq(st.generation, 5);
    cr_assert_eq(st.transitions, 5);
    cr_assert_eq(f.log.n, 0, "nothing reached the spy");
    cr_assert_eq(circuit_test_pending(f.b), 0, "nothing left undelivered");
    fx_free(&f);
}

Test(config, CFG4_null_checks_come_before_config_checks, .signal = SIGABRT)
{
    /* an invalid config does not hide a NULL callback */
    abort_case *a = new_case(4);
    a->f.spec.config.window = 0;
    expect_abort(new_with, a, "classify is NULL");
    new_with(a);
}

/* classify returning something that is not an outcome */
static fx classify_fx;

static void classify_invalid(void *arg)
{
    int result = (int)(intptr_t)arg; /* the spy classifier returns it as the outcome */
    fx_new(&classify_fx, 4, 1, OPEN_FOR, PROBE_TO);
    circuit_ticket t;
    cr_assert(circuit_allow(classify_fx.b, NULL, &t, NULL));
    circuit_done(&t, result);
}

Test(config, CFG4_classify_returning_an_invalid_outcome_aborts, .signal = SIGABRT)
{
    expect_abort(classify_invalid, (void *)(intptr_t)4, "classify returned an invalid outcome");
    expect_abort(classify_invalid, (void *)(intptr_t)-1, "classify returned an invalid outcome");
    expect_abort(classify_invalid, (void *)(intptr_t)INT_MAX,
                 "classify returned an invalid outcome");
    classify_invalid((void *)(intptr_t)4);
}

/* NULL breaker */
static void null_breaker(void *arg)
{
    circuit_ticket t;
    switch ((int)(intptr_t)arg) {
    case 0: circuit_allow(NULL, NULL, &t, NULL); break;
    default: circuit_get_state(NULL); break;
    }
}

Test(config, CFG4_allow_on_null_breaker_aborts, .signal = SIGABRT)
{
    expect_abort(null_breaker, (void *)(intptr_t)0, "breaker is NULL");
    null_breaker((void *)(intptr_t)0);
}

Test(config, CFG4_get_state_on_null_breaker_aborts, .signal = SIGABRT)
{
    expect_abort(null_breaker, (void *)(intptr_t)1, "breaker is NULL");
    null_breaker((void *)(intptr_t)1);
}

/* a breaker not built by circuit_new: zeroed memory, and random bytes */
static _Alignas(64) unsigned char fake_breaker[8192];

static void foreign_breaker(void *arg)
{
    int which = (int)(intptr_t)arg;
    circuit_breaker *b = (circuit_breaker *)(void *)fake_breaker;
    circuit_ticket t;
    switch (which % 3) {
    case 0: circuit_allow(b, NULL, &t, NULL); break;
    case 1: circuit_get_state(b); break;
    default: circuit_free(b); break;
    }
}

static void *foreign_arg(int which, unsigned char fill)
{
    memset(fake_breaker, fill, sizeof fake_breaker);
    return (void *)(intptr_t)which;
}

Test(config, CFG4_allow_on_foreign_breaker_aborts, .signal = SIGABRT)
{
    expect_abort(foreign_breaker, foreign_arg(0, 0xa5), "not built by circuit_new");
    expect_abort(foreign_breaker, foreign_arg(0, 0), "not built by circuit_new");
    foreign_breaker(foreign_arg(0, 0));
}

Test(config, CFG4_get_state_on_foreign_breaker_aborts, .signal = SIGABRT)
{
    expect_abort(foreign_breaker, foreign_arg(1, 0x5a), "not built by circuit_new");
    foreign_breaker(foreign_arg(1, 0));
}

Test(config, CFG4_free_of_foreign_breaker_aborts, .signal = SIGABRT)
{
    expect_abort(foreign_breaker, foreign_arg(2, 0x33), "not built by circuit_new");
    foreign_breaker(foreign_arg(2, 0));
}

/* A second circuit_free of the same breaker, its memory not reused since:
 * the CFG4 message, not glibc's double-free check (the free clears the magic
 * through a volatile store, which the optimiser may not drop). Under
 * AddressSanitizer the second call's read of freed memory is ASan's to
 * report, so the check runs in the builds without it (werror presets). */
#if defined(__SANITIZE_ADDRESS__)
#define CIRCUIT_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CIRCUIT_TEST_ASAN 1
#endif
#endif

#ifndef CIRCUIT_TEST_ASAN
static void double_free(void *arg)
{
    (void)arg;
    static fx f;
    circuit_breaker *b = NULL;
    circuit_spec spec = valid_spec(&f);
    if (circuit_new(&b, &spec, NULL, 0) != 0)
        return; /* no abort: expect_abort fails the test */
    circuit_free(b);
    circuit_free(b);
}

Test(config, CFG4_second_free_of_a_breaker_aborts_with_the_message)
{
    expect_abort(double_free, NULL, "breaker is not a live breaker (not built by circuit_new or "
                                    "circuit_shared_attach, or already freed or detached)");
}
#endif

/* NULL ticket */
static fx null_ticket_fx;

static void null_ticket(void *arg)
{
    switch ((int)(intptr_t)arg) {
    case 0: circuit_allow(null_ticket_fx.b, NULL, NULL, NULL); break;
    case 1: circuit_done(NULL, 0); break;
    default: circuit_release(NULL); break;
    }
}

static void *null_ticket_arg(int which)
{
    fx_new(&null_ticket_fx, 2, 1, OPEN_FOR, PROBE_TO);
    return (void *)(intptr_t)which;
}

Test(config, CFG4_allow_with_null_ticket_aborts, .signal = SIGABRT)
{
    expect_abort(null_ticket, null_ticket_arg(0), "ticket is NULL");
    null_ticket((void *)(intptr_t)0);
}

Test(config, CFG4_done_with_null_ticket_aborts, .signal = SIGABRT)
{
    expect_abort(null_ticket, null_ticket_arg(1), "ticket is NULL");
    null_ticket((void *)(intptr_t)1);
}

Test(config, CFG4_release_with_null_ticket_aborts, .signal = SIGABRT)
{
    expect_abort(null_ticket, null_ticket_arg(2), "ticket is NULL");
    null_ticket((void *)(intptr_t)2);
}

/* a ticket circuit_allow never filled */
static circuit_ticket garbage_ticket;

static void unfilled_ticket(void *arg)
{
    switch ((int)(intptr_t)arg) {
    case 0: circuit_done(&garbage_ticket, 0); break;
    default: circuit_release(&garbage_ticket); break;
    }
}

static void *garbage(int which, unsigned char fill)
{
    memset(&garbage_ticket, fill, sizeof garbage_ticket);
    return (void *)(intptr_t)which;
}

Test(config, CFG4_done_on_unfilled_ticket_aborts, .signal = SIGABRT)
{
    expect_abort(unfilled_ticket, garbage(0, 0x77), "not filled by circuit_allow");
    expect_abort(unfilled_ticket, garbage(0, 0xff), "not filled by circuit_allow");
    /* blank (CIRCUIT_TICKET_INIT): nothing to settle */
    expect_abort(unfilled_ticket, garbage(0, 0), "not filled by circuit_allow");
    unfilled_ticket(garbage(0, 0x77));
}

Test(config, CFG4_release_of_garbage_ticket_aborts, .signal = SIGABRT)
{
    expect_abort(unfilled_ticket, garbage(1, 0x77), "not filled by circuit_allow");
    expect_abort(unfilled_ticket, garbage(1, 0xff), "not filled by circuit_allow");
    unfilled_ticket(garbage(1, 0x77));
}

/* A blank ticket (CIRCUIT_TICKET_INIT), released or left by its guard before
 * any allow: the ticket keeps its blank bytes, no total moves, no callback
 * runs, and the ticket is still usable by circuit_allow afterwards. */
Test(config, CFG4_release_of_blank_ticket_does_nothing)
{
    static const circuit_ticket blank = CIRCUIT_TICKET_INIT;
    fx f;
    fx_new(&f, 4, 1, OPEN_FOR, PROBE_TO);
    circuit_stats before, after;
    circuit_get_stats(f.b, &before);

    circuit_ticket t = CIRCUIT_TICKET_INIT;
    circuit_release(&t);
    circuit_release(&t);
    cr_assert(memcmp(&t, &blank, sizeof t) == 0, "release wrote into a blank ticket");
    circuit_ticket_guard_release(&t); /* the 0.1/0.2 guard's name for release */
    cr_assert(memcmp(&t, &blank, sizeof t) == 0, "the guard wrote into a blank ticket");
    { CIRCUIT_TICKET_GUARD(g); (void)g; } /* a guard left before allow */

    circuit_get_stats(f.b, &after);
    cr_assert_eq(after.released, before.released, "a blank release counted as released");
    cr_assert_eq(after.admitted, before.admitted);
    cr_assert_eq(after.rejected, before.rejected);
    cr_assert_eq(after.late, before.late);
    cr_assert_eq(after.generation, before.generation);
    cr_assert_eq(f.c.calls, 0, "classify ran for a blank ticket");
    cr_assert_eq(f.log.n, 0, "a transition was delivered");

    /* still a usable blank: allow fills it, release settles it once */
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    circuit_release(&t);
    circuit_get_stats(f.b, &after);
    cr_assert_eq(after.released, before.released + 1);
    fx_free(&f);
}

/* ==== policy.check (K1) =================================================== */

/*
 * K1: policy.check is asked once by circuit_new; its EINVAL answer joins
 * CFG2's single message (every invalid config field, then the policy's
 * complaint) and nothing is built; any other answer but 0 aborts. The
 * failure-rate preset's check refuses a window smaller than min_results.
 *
 * check is called even when the config has invalid fields (so one message
 * holds every complaint); tests below pin that choice.
 */

#include "circuit_presets.h"


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

Test(config, K1_check_is_called_once_with_the_config_and_may_accept)
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

Test(config, K1_check_is_called_even_without_an_errbuf)
{
    fx f;
    check_spy s = {.answer = EINVAL, .complaint = "no"};
    spec_with_check(&f, &s, 10, 1);
    circuit_breaker *b = (circuit_breaker *)&f; /* must be overwritten with NULL */
    cr_assert_eq(circuit_new(&b, &f.spec, NULL, 0), EINVAL);
    cr_assert_null(b);
    cr_assert_eq(s.calls, 1);
}

Test(config, K1_einval_is_the_last_clause_of_the_config_message)
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

Test(config, K1_every_complaint_in_one_message_check_called_on_an_invalid_config)
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

Test(config, K1_a_check_that_accepts_does_not_hide_an_invalid_field)
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

Test(config, K1_a_refusal_without_a_reason_still_says_who_refused)
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

Test(config, K1_a_refusal_builds_nothing_and_leaks_nothing)
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

Test(config, K1_the_message_is_truncated_safely_like_CFG2)
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

Test(config, K1_a_check_that_forgets_the_nul_is_cut_at_its_errbuf_len)
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

Test(config, K1_a_check_answer_other_than_0_or_einval_aborts_naming_it)
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

Test(config, K1_failure_rate_refuses_a_window_smaller_than_min_results)
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

Test(config, K1_failure_rate_window_equal_to_min_results_is_accepted_and_trips)
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

Test(config, K1_failure_rate_check_joins_the_config_complaints)
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

Test(config, K1_failure_rate_check_leaves_an_out_of_range_window_to_circuit_new)
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

Test(config, K1_failure_rate_check_is_pure_and_callable_directly)
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

Test(config, K1_consecutive_has_no_check)
{
    circuit_consecutive c;
    cr_assert_eq(circuit_consecutive_init(&c, 3, 1, NULL, 0), 0);
    cr_assert_null(circuit_consecutive_policy(&c).check,
                   "the consecutive policy never looks at the window");
}
