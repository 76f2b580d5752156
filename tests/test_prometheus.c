/*
 * The Prometheus text formatter (include/circuit_prometheus.h), on
 * hand-filled circuit_stats: the exact text of one breaker, label escaping,
 * one HELP/TYPE per metric for many breakers, snprintf-like truncation, the
 * state gauge, and every EINVAL case. tests/test_prometheus_promtool.c runs
 * the real `promtool check metrics` on the output.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "circuit.h"
#include "circuit_prometheus.h"

TestSuite(prometheus);

static circuit_stats open_stats(void)
{
    circuit_stats s = {
        .state = CIRCUIT_OPEN,
        .generation = 3,
        .retry_after_ns = 1500000000,
        .admitted = 100,
        .rejected = 7,
        .successes = 80,
        .failures = 15,
        .ignored = 2,
        .late = 1,
        .released = 2,
        .timed_out = 0,
        .transitions = 3,
    };
    return s;
}

static char *format_one(const circuit_stats *s, const char *name)
{
    int n = circuit_stats_format_prometheus(s, name, NULL, 0);
    cr_assert_geq(n, 0, "errno %d", errno);
    char *buf = malloc((size_t)n + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(circuit_stats_format_prometheus(s, name, buf, (size_t)n + 1), n);
    cr_assert_eq(strlen(buf), (size_t)n);
    return buf;
}

static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

Test(prometheus, one_breaker_exact_text)
{
    circuit_stats s = open_stats();
    char *got = format_one(&s, "api-1");
    const char *want =
        "# HELP circuit_state 1 for the state the breaker is in (closed, open, half-open or "
        "isolated), 0 for the others.\n"
        "# TYPE circuit_state gauge\n"
        "circuit_state{breaker=\"api-1\",state=\"closed\"} 0\n"
        "circuit_state{breaker=\"api-1\",state=\"open\"} 1\n"
        "circuit_state{breaker=\"api-1\",state=\"half-open\"} 0\n"
        "circuit_state{breaker=\"api-1\",state=\"isolated\"} 0\n"
        "# HELP circuit_generation Generation of the current state: the number of the "
        "transition that entered it (0: never left closed).\n"
        "# TYPE circuit_generation gauge\n"
        "circuit_generation{breaker=\"api-1\"} 3\n"
        "# HELP circuit_window_results Results among the latest window counted in the current "
        "state, by outcome.\n"
        "# TYPE circuit_window_results gauge\n"
        "circuit_window_results{breaker=\"api-1\",outcome=\"success\"} 0\n"
        "circuit_window_results{breaker=\"api-1\",outcome=\"failure\"} 0\n"
        "# HELP circuit_consecutive_results Length of the current run of successes or failures "
        "(at most one is non-zero).\n"
        "# TYPE circuit_consecutive_results gauge\n"
        "circuit_consecutive_results{breaker=\"api-1\",outcome=\"success\"} 0\n"
        "circuit_consecutive_results{breaker=\"api-1\",outcome=\"failure\"} 0\n"
        "# HELP circuit_half_open_probe_timeouts Probes timed out in the current half-open "
        "state.\n"
        "# TYPE circuit_half_open_probe_timeouts gauge\n"
        "circuit_half_open_probe_timeouts{breaker=\"api-1\"} 0\n"
        "# HELP circuit_probes_in_flight Probe slots held while half-open.\n"
        "# TYPE circuit_probes_in_flight gauge\n"
        "circuit_probes_in_flight{breaker=\"api-1\"} 0\n"
        "# HELP circuit_retry_after_seconds Seconds left in the current open period (0 unless "
        "open).\n"
        "# TYPE circuit_retry_after_seconds gauge\n"
        "circuit_retry_after_seconds{breaker=\"api-1\"} 1.500000000\n"
        "# HELP circuit_calls_admitted_total Calls admitted by circuit_allow.\n"
        "# TYPE circuit_calls_admitted_total counter\n"
        "circuit_calls_admitted_total{breaker=\"api-1\"} 100\n"
        "# HELP circuit_calls_rejected_total Calls rejected by circuit_allow.\n"
        "# TYPE circuit_calls_rejected_total counter\n"
        "circuit_calls_rejected_total{breaker=\"api-1\"} 7\n"
        "# HELP circuit_results_total Results counted in the generation their call was "
        "admitted in, by outcome.\n"
        "# TYPE circuit_results_total counter\n"
        "circuit_results_total{breaker=\"api-1\",outcome=\"success\"} 80\n"
        "circuit_results_total{breaker=\"api-1\",outcome=\"failure\"} 15\n"
        "circuit_results_total{breaker=\"api-1\",outcome=\"ignored\"} 2\n"
        "# HELP circuit_results_late_total Results discarded because the state changed after "
        "their call was admitted.\n"
        "# TYPE circuit_results_late_total counter\n"
        "circuit_results_late_total{breaker=\"api-1\"} 1\n"
        "# HELP circuit_tickets_released_total Admitted calls settled without a result "
        "(circuit_release).\n"
        "# TYPE circuit_tickets_released_total counter\n"
        "circuit_tickets_released_total{breaker=\"api-1\"} 2\n"
        "# HELP circuit_probe_timeouts_total Probes that held their slot too long.\n"
        "# TYPE circuit_probe_timeouts_total counter\n"
        "circuit_probe_timeouts_total{breaker=\"api-1\"} 0\n"
        "# HELP circuit_transitions_total Changes of state.\n"
        "# TYPE circuit_transitions_total counter\n"
        "circuit_transitions_total{breaker=\"api-1\"} 3\n";
    cr_assert_str_eq(got, want);
    free(got);
}

Test(prometheus, every_stats_field_reaches_its_series)
{
    circuit_stats s = {
        .state = CIRCUIT_HALF_OPEN,
        .generation = 11,
        .counts = {21, 22, 23, 24, 25},
        .probes_in_flight = 31,
        .retry_after_ns = 0,
        .admitted = 41,
        .rejected = 42,
        .successes = 43,
        .failures = 44,
        .ignored = 45,
        .late = 46,
        .released = 47,
        .timed_out = 48,
        .transitions = 49,
    };
    char *got = format_one(&s, NULL);
    const char *lines[] = {
        "\ncircuit_state{state=\"half-open\"} 1\n",
        "\ncircuit_generation 11\n",
        "\ncircuit_window_results{outcome=\"success\"} 21\n",
        "\ncircuit_window_results{outcome=\"failure\"} 22\n",
        "\ncircuit_consecutive_results{outcome=\"success\"} 23\n",
        "\ncircuit_consecutive_results{outcome=\"failure\"} 24\n",
        "\ncircuit_half_open_probe_timeouts 25\n",
        "\ncircuit_probes_in_flight 31\n",
        "\ncircuit_retry_after_seconds 0.000000000\n",
        "\ncircuit_calls_admitted_total 41\n",
        "\ncircuit_calls_rejected_total 42\n",
        "\ncircuit_results_total{outcome=\"success\"} 43\n",
        "\ncircuit_results_total{outcome=\"failure\"} 44\n",
        "\ncircuit_results_total{outcome=\"ignored\"} 45\n",
        "\ncircuit_results_late_total 46\n",
        "\ncircuit_tickets_released_total 47\n",
        "\ncircuit_probe_timeouts_total 48\n",
        "\ncircuit_transitions_total 49\n",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        cr_assert_eq(count_of(got, lines[i]), 1, "missing or repeated:%s", lines[i]);
    cr_assert_eq(count_of(got, "breaker="), 0, "a NULL name means no breaker label");
    free(got);
}

Test(prometheus, the_state_gauge_has_exactly_one_1_per_breaker)
{
    const circuit_state states[] = {CIRCUIT_CLOSED, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN,
                                    CIRCUIT_ISOLATED};
    for (size_t i = 0; i < 4; i++) {
        circuit_stats s = {.state = states[i]};
        char *got = format_one(&s, "b");
        char want[96];
        snprintf(want, sizeof want, "circuit_state{breaker=\"b\",state=\"%s\"} 1\n",
                 circuit_state_name(states[i]));
        cr_assert_eq(count_of(got, want), 1, "%s", want);
        cr_assert_eq(count_of(got, "\"} 1\ncircuit_state{"), i < 3 ? 1 : 0);
        cr_assert_eq(count_of(got, "\ncircuit_state{"), 4);
        /* the three others are 0 */
        int zeros = 0;
        for (const char *p = got; (p = strstr(p, "\ncircuit_state{")) != NULL; p++)
            zeros += strncmp(strchr(p, '}'), "} 0\n", 4) == 0;
        cr_assert_eq(zeros, 3);
        free(got);
    }
}

Test(prometheus, durations_are_seconds_with_nanosecond_digits)
{
    const struct {
        int64_t ns;
        const char *text;
    } cases[] = {
        {1, "0.000000001"},
        {999999999, "0.999999999"},
        {1000000000, "1.000000000"},
        {INT64_C(30) * 1000000000 + 250000000, "30.250000000"},
        {INT64_MAX, "9223372036.854775807"},
        {-5, "0.000000000"}, /* never negative */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        circuit_stats s = {.state = CIRCUIT_OPEN, .retry_after_ns = cases[i].ns};
        char *got = format_one(&s, "x");
        char want[96];
        snprintf(want, sizeof want, "\ncircuit_retry_after_seconds{breaker=\"x\"} %s\n",
                 cases[i].text);
        cr_assert_eq(count_of(got, want), 1, "%s in\n%s", want, got);
        free(got);
    }
}

Test(prometheus, counters_print_every_digit_of_uint64)
{
    circuit_stats s = {.state = CIRCUIT_CLOSED, .admitted = UINT64_MAX};
    char *got = format_one(&s, "x");
    cr_assert_eq(count_of(got, "circuit_calls_admitted_total{breaker=\"x\"} "
                               "18446744073709551615\n"),
                 1);
    free(got);
}

Test(prometheus, label_values_are_escaped)
{
    circuit_stats s = {.state = CIRCUIT_CLOSED};
    char *got = format_one(&s, "a\"b\\c\nd\xc3\xa9");
    cr_assert_eq(count_of(got, "circuit_generation{breaker=\"a\\\"b\\\\c\\nd\xc3\xa9\"} 0\n"), 1,
                 "%s", got);
    cr_assert_eq(count_of(got, "\n\n"), 0, "a raw newline from the name would split a line");
    free(got);
    char *empty = format_one(&s, "");
    cr_assert_eq(count_of(empty, "circuit_generation{breaker=\"\"} 0\n"), 1);
    free(empty);
}

Test(prometheus, many_breakers_share_one_help_and_type_per_metric)
{
    circuit_stats st[3] = {open_stats(), {.state = CIRCUIT_CLOSED}, {.state = CIRCUIT_ISOLATED}};
    const char *names[3] = {"a", "b", "c"};
    int n = circuit_stats_format_prometheus_many(st, names, 3, NULL, 0);
    cr_assert_gt(n, 0);
    char *got = malloc((size_t)n + 1);
    cr_assert_eq(circuit_stats_format_prometheus_many(st, names, 3, got, (size_t)n + 1), n);
    cr_assert_eq(count_of(got, "# TYPE "), 14, "one TYPE line per metric");
    cr_assert_eq(count_of(got, "# HELP "), 14);
    cr_assert_eq(count_of(got, "# TYPE circuit_state gauge\n"), 1);
    /* a metric's series follow its TYPE line, breaker by breaker */
    const char *t = strstr(got, "# TYPE circuit_transitions_total counter\n");
    cr_assert_not_null(t);
    cr_assert_str_eq(t, "# TYPE circuit_transitions_total counter\n"
                        "circuit_transitions_total{breaker=\"a\"} 3\n"
                        "circuit_transitions_total{breaker=\"b\"} 0\n"
                        "circuit_transitions_total{breaker=\"c\"} 0\n");
    cr_assert_eq(count_of(got, "circuit_state{breaker=\"c\",state=\"isolated\"} 1\n"), 1);

    /* one breaker through _many is the single call's text */
    char *one = format_one(&st[0], "a");
    char buf[8192];
    cr_assert_eq(circuit_stats_format_prometheus_many(st, names, 1, buf, sizeof buf),
                 (int)strlen(one));
    cr_assert_str_eq(buf, one);
    free(one);
    free(got);
}

Test(prometheus, size_is_about_what_the_header_says)
{
    /* header: about 1.8 KiB of HELP/TYPE lines plus about 1.1 KiB per breaker */
    circuit_stats st[2] = {open_stats(), open_stats()};
    const char *names[2] = {"up-1", "up-2"};
    int one = circuit_stats_format_prometheus_many(st, names, 1, NULL, 0);
    int two = circuit_stats_format_prometheus_many(st, names, 2, NULL, 0);
    int per = two - one, fixed = one - per;
    cr_assert(fixed > 1500 && fixed < 2600, "fixed part %d", fixed);
    cr_assert(per > 900 && per < 1500, "per breaker %d", per);
}

Test(prometheus, snprintf_like_truncation)
{
    circuit_stats s = open_stats();
    char *full = format_one(&s, "t");
    size_t n = strlen(full);
    char *buf = malloc(n + 16);
    for (size_t len = 0; len <= n + 2; len++) {
        memset(buf, '#', n + 16);
        int r = circuit_stats_format_prometheus(&s, "t", len ? buf : NULL, len);
        cr_assert_eq(r, (int)n, "len %zu", len);
        if (len == 0)
            continue;
        size_t want = len - 1 < n ? len - 1 : n;
        cr_assert_eq(strlen(buf), want, "len %zu", len);
        cr_assert_eq(memcmp(buf, full, want), 0, "len %zu", len);
        for (size_t i = len; i < n + 16; i++)
            cr_assert_eq(buf[i], '#', "len %zu wrote byte %zu", len, i);
    }
    /* len 0 with a buffer writes nothing */
    buf[0] = '#';
    cr_assert_eq(circuit_stats_format_prometheus(&s, "t", buf, 0), (int)n);
    cr_assert_eq(buf[0], '#');
    free(buf);
    free(full);
}

Test(prometheus, zero_breakers_is_an_empty_text)
{
    char buf[8] = "junk";
    cr_assert_eq(circuit_stats_format_prometheus_many(NULL, NULL, 0, buf, sizeof buf), 0);
    cr_assert_str_empty(buf);
}

/* Asserts -1/EINVAL and an empty buffer. */
#define assert_einval(call)                                                                 \
    do {                                                                                     \
        char b_[64];                                                                         \
        memset(b_, '#', sizeof b_);                                                          \
        errno = 0;                                                                           \
        char *buf = b_;                                                                      \
        size_t len = sizeof b_;                                                              \
        cr_assert_eq((call), -1, #call);                                                     \
        cr_assert_eq(errno, EINVAL, #call);                                                  \
        cr_assert_eq(b_[0], '\0', "%s: buffer not emptied", #call);                          \
        cr_assert_eq(b_[1], '#', "%s: wrote more than the NUL", #call);                      \
    } while (0)

Test(prometheus, invalid_arguments_are_einval_and_write_an_empty_text)
{
    circuit_stats ok = {.state = CIRCUIT_CLOSED};
    circuit_stats bad_state[2] = {{.state = CIRCUIT_CLOSED}, {.state = (circuit_state)5}};
    circuit_stats two[2] = {{.state = CIRCUIT_CLOSED}, {.state = CIRCUIT_OPEN}};
    const char *dup[2] = {"same", "same"};
    const char *with_null[2] = {"a", NULL};
    const char *fine[2] = {"a", "b"};

    assert_einval(circuit_stats_format_prometheus(NULL, "x", buf, len));
    assert_einval(circuit_stats_format_prometheus(&(circuit_stats){.state = 0}, "x", buf, len));
    assert_einval(circuit_stats_format_prometheus_many(bad_state, fine, 2, buf, len));
    assert_einval(circuit_stats_format_prometheus_many(NULL, fine, 2, buf, len));
    assert_einval(circuit_stats_format_prometheus_many(two, NULL, 2, buf, len));
    assert_einval(circuit_stats_format_prometheus_many(two, dup, 2, buf, len));
    assert_einval(circuit_stats_format_prometheus_many(two, with_null, 2, buf, len));
    (void)ok;
}

Test(prometheus, names_must_be_utf8)
{
    circuit_stats s = {.state = CIRCUIT_CLOSED};
    const char *bad[] = {
        "\xff",                 /* never valid */
        "a\x80",                /* a lone continuation byte */
        "\xc0\xaf",             /* overlong '/' */
        "\xe0\x80\xaf",         /* overlong, 3 bytes */
        "\xed\xa0\x80",         /* a UTF-16 surrogate */
        "\xf4\x90\x80\x80",     /* above U+10FFFF */
        "\xf5\x80\x80\x80",     /* never valid */
        "\xe2\x82",             /* cut short */
        "\xf0\x9f\x98",         /* cut short */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        cr_assert_eq(circuit_stats_format_prometheus(&s, bad[i], NULL, 0), -1, "case %zu", i);
        cr_assert_eq(errno, EINVAL);
    }
    const char *good[] = {"plain", "caf\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
                          "\xef\xbf\xbf", "\xf4\x8f\xbf\xbf", "\xed\x9f\xbf"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        cr_assert_gt(circuit_stats_format_prometheus(&s, good[i], NULL, 0), 0, "case %zu", i);
}

/* ---- many breakers: the stream form, and names checked in linear time ------------ */

typedef struct sink {
    char *data;
    size_t used, cap;
    size_t calls, largest;
    size_t fail_at; /* the call (1, 2, ...) that answers fail_rc; 0: never */
    int fail_rc;
} sink;

static int sink_write(void *arg, const char *data, size_t len)
{
    sink *k = arg;
    k->calls++;
    cr_assert_gt(len, 0, "an empty chunk");
    if (len > k->largest)
        k->largest = len;
    if (k->fail_at && k->calls == k->fail_at)
        return k->fail_rc;
    if (k->used + len + 1 > k->cap) {
        k->cap = (k->used + len + 1) * 2;
        k->data = realloc(k->data, k->cap);
        cr_assert_not_null(k->data);
    }
    memcpy(k->data + k->used, data, len);
    k->used += len;
    k->data[k->used] = '\0';
    return 0;
}

typedef struct fleet {
    size_t n;
    circuit_stats *st;
    char **names;
} fleet;

static fleet fleet_make(size_t n)
{
    fleet f = {n, calloc(n, sizeof(circuit_stats)), calloc(n, sizeof(char *))};
    cr_assert(f.st && f.names);
    for (size_t i = 0; i < n; i++) {
        f.st[i] = open_stats();
        f.st[i].state = (circuit_state)(1 + i % 4);
        f.st[i].admitted = i * 1000003u;
        f.names[i] = malloc(64);
        snprintf(f.names[i], 64, "upstream-%zu.example:8080", i);
    }
    return f;
}

static void fleet_free(fleet *f)
{
    for (size_t i = 0; i < f->n; i++)
        free(f->names[i]);
    free(f->names);
    free(f->st);
}

Test(prometheus, the_stream_form_writes_the_buffer_forms_text_in_chunks)
{
    fleet f = fleet_make(2000);
    const char *const *names = (const char *const *)f.names;
    int n = circuit_stats_format_prometheus_many(f.st, names, f.n, NULL, 0);
    cr_assert_gt(n, 16384 * 4, "several chunks");
    char *want = malloc((size_t)n + 1);
    cr_assert_eq(circuit_stats_format_prometheus_many(f.st, names, f.n, want, (size_t)n + 1), n);
    sink k = {0};
    cr_assert_eq(circuit_stats_write_prometheus_many(f.st, names, f.n, sink_write, &k), 0);
    cr_assert_eq(k.used, (size_t)n);
    cr_assert_str_eq(k.data, want, "byte for byte");
    cr_assert_eq(k.largest, 16384, "chunks of at most 16 KiB");
    cr_assert_eq(k.calls, ((size_t)n + 16383) / 16384, "every chunk but the last is full");
    /* one breaker, no label: the single call's text too */
    sink one = {0};
    cr_assert_eq(circuit_stats_write_prometheus_many(f.st, NULL, 1, sink_write, &one), 0);
    char buf[8192];
    int m = circuit_stats_format_prometheus(&f.st[0], NULL, buf, sizeof buf);
    cr_assert_eq(one.used, (size_t)m);
    cr_assert_str_eq(one.data, buf);
    free(one.data);
    free(k.data);
    free(want);
    fleet_free(&f);
}

Test(prometheus, the_stream_form_stops_at_the_writers_first_error)
{
    fleet f = fleet_make(500);
    const char *const *names = (const char *const *)f.names;
    sink k = {.fail_at = 3, .fail_rc = EPIPE};
    cr_assert_eq(circuit_stats_write_prometheus_many(f.st, names, f.n, sink_write, &k), EPIPE);
    cr_assert_eq(k.calls, 3, "nothing written after the error");
    cr_assert_eq(k.used, 2 * 16384);
    free(k.data);
    sink e = {0};
    cr_assert_eq(circuit_stats_write_prometheus_many(f.st, names, 0, sink_write, &e), 0);
    cr_assert_eq(e.calls, 0, "zero breakers: nothing");
    cr_assert_eq(circuit_stats_write_prometheus_many(f.st, names, f.n, NULL, NULL), EINVAL);
    fleet_free(&f);
}

Test(prometheus, equal_names_anywhere_are_refused_by_both_forms)
{
    fleet f = fleet_make(5000);
    const char *const *names = (const char *const *)f.names;
    char *keep = f.names[4999];
    f.names[4999] = f.names[0]; /* the first and the last: far apart */
    sink k = {0};
    errno = 0;
    cr_assert_eq(circuit_stats_format_prometheus_many(f.st, names, f.n, NULL, 0), -1);
    cr_assert_eq(errno, EINVAL);
    cr_assert_eq(circuit_stats_write_prometheus_many(f.st, names, f.n, sink_write, &k), EINVAL);
    cr_assert_eq(k.calls, 0, "a bad argument writes nothing");
    /* equal text in different memory */
    f.names[4999] = keep;
    snprintf(f.names[4999], 64, "%s", f.names[2500]);
    cr_assert_eq(circuit_stats_write_prometheus_many(f.st, names, f.n, sink_write, &k), EINVAL);
    /* all different again: accepted */
    snprintf(f.names[4999], 64, "upstream-last");
    cr_assert_eq(circuit_stats_write_prometheus_many(f.st, names, f.n, sink_write, &k), 0);
    cr_assert_gt(k.used, 0);
    free(k.data);
    fleet_free(&f);
}
