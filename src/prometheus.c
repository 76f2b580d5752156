/*
 * circuit_stats in the Prometheus text exposition format, version 0.0.4
 * (include/circuit_prometheus.h). Built on the public API, writing through
 * message.h's text buffer (the buffer form) or through a chunk handed to
 * the caller's writer whenever it fills (the stream form).
 *
 * Cost: linear in the text written. Names are checked to be different with
 * one hash table of the n names (expected O(total name bytes)), never by
 * comparing every pair.
 *
 * SPDX-License-Identifier: MIT
 */
#include "circuit_prometheus.h"
#include "message.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes the stream form hands to the writer at a time (the last chunk may
 * be shorter). */
#define PROM_CHUNK 16384

/* The text being written. Buffer form (write == NULL): message.h's bounded
 * buffer, snprintf's contract. Stream form: `chunk` fills, then goes to the
 * writer; after the writer's first non-zero answer nothing more is written. */
typedef struct prom_out {
    circuit__text text;
    circuit_prometheus_write_fn write;
    void *arg;
    int error;
    size_t fill;
    char chunk[PROM_CHUNK];
} prom_out;

static void out_flush(prom_out *o)
{
    if (o->write && o->fill > 0 && o->error == 0) {
        int rc = o->write(o->arg, o->chunk, o->fill);
        if (rc != 0)
            o->error = rc;
    }
    o->fill = 0;
}

static void out_bytes(prom_out *o, const char *s, size_t n)
{
    if (!o->write) {
        circuit__text_put(&o->text, s, n);
        return;
    }
    while (n > 0 && o->error == 0) {
        size_t k = PROM_CHUNK - o->fill < n ? PROM_CHUNK - o->fill : n;
        memcpy(o->chunk + o->fill, s, k);
        o->fill += k;
        s += k;
        n -= k;
        if (o->fill == PROM_CHUNK)
            out_flush(o);
    }
}

static void out_str(prom_out *o, const char *s) { out_bytes(o, s, strlen(s)); }

__attribute__((format(printf, 2, 3))) static void out_fmt(prom_out *o, const char *fmt, ...)
{
    char v[64]; /* a number: at most 20 digits, or 19 + "." + 9 */
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(v, sizeof v, fmt, ap);
    va_end(ap);
    if (n > 0)
        out_bytes(o, v, (size_t)n < sizeof v ? (size_t)n : sizeof v - 1);
}

/* A label value with the three escapes of the text format: \\, \" and \n. */
static void out_label_value(prom_out *o, const char *v)
{
    for (const char *run = v;; v++) {
        const char *esc = NULL;
        switch (*v) {
        case '\\': esc = "\\\\"; break;
        case '"': esc = "\\\""; break;
        case '\n': esc = "\\n"; break;
        case '\0': break;
        default: continue;
        }
        out_bytes(o, run, (size_t)(v - run));
        if (esc == NULL)
            return;
        out_str(o, esc);
        run = v + 1;
    }
}

/* Well-formed UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing
 * above U+10FFFF. Prometheus rejects a scrape with any other bytes. */
static bool utf8_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p;
        int more;
        unsigned lo = 0x80, hi = 0xbf; /* bounds of the second byte */
        if (c < 0x80) {
            p++;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            more = 1;
        } else if (c >= 0xe0 && c <= 0xef) {
            more = 2;
            if (c == 0xe0)
                lo = 0xa0; /* overlong */
            if (c == 0xed)
                hi = 0x9f; /* surrogates */
        } else if (c >= 0xf0 && c <= 0xf4) {
            more = 3;
            if (c == 0xf0)
                lo = 0x90; /* overlong */
            if (c == 0xf4)
                hi = 0x8f; /* above U+10FFFF */
        } else {
            return false;
        }
        p++;
        for (int i = 0; i < more; i++, p++) {
            unsigned lo_i = i == 0 ? lo : 0x80, hi_i = i == 0 ? hi : 0xbf;
            if (*p < lo_i || *p > hi_i)
                return false; /* the NUL terminator fails here too */
        }
    }
    return true;
}

static bool state_ok(circuit_state s)
{
    return s == CIRCUIT_CLOSED || s == CIRCUIT_OPEN || s == CIRCUIT_HALF_OPEN ||
           s == CIRCUIT_ISOLATED;
}

/* ---- the series --------------------------------------------------------- */

typedef enum prom_kind { PROM_GAUGE, PROM_COUNTER } prom_kind;

/* Which value of a circuit_stats a series shows. */
typedef enum prom_field {
    F_STATE, /* one series per state, 0 or 1 */
    F_GENERATION,
    F_WINDOW_SUCCESSES,
    F_WINDOW_FAILURES,
    F_RUN_SUCCESSES,
    F_RUN_FAILURES,
    F_HALF_OPEN_TIMEOUTS,
    F_PROBES_IN_FLIGHT,
    F_RETRY_AFTER,
    F_ADMITTED,
    F_REJECTED,
    F_SUCCESSES,
    F_FAILURES,
    F_IGNORED,
    F_LATE,
    F_RELEASED,
    F_TIMED_OUT,
    F_TRANSITIONS,
} prom_field;

typedef struct prom_series {
    const char *label;  /* an extra label pair, e.g. "outcome=\"success\"", or NULL */
    prom_field  field;
} prom_series;

typedef struct prom_metric {
    const char *name;
    prom_kind   kind;
    const char *help;
    prom_series series[3];
    int         n_series;
} prom_metric;

static const prom_metric prom_metrics[] = {
    {"circuit_state", PROM_GAUGE,
     "1 for the state the breaker is in (closed, open, half-open or isolated), "
     "0 for the others.",
     {{NULL, F_STATE}}, 1},
    {"circuit_generation", PROM_GAUGE,
     "Generation of the current state: the number of the transition that entered it "
     "(0: never left closed).",
     {{NULL, F_GENERATION}}, 1},
    {"circuit_window_results", PROM_GAUGE,
     "Results among the latest window counted in the current state, by outcome.",
     {{"outcome=\"success\"", F_WINDOW_SUCCESSES}, {"outcome=\"failure\"", F_WINDOW_FAILURES}},
     2},
    {"circuit_consecutive_results", PROM_GAUGE,
     "Length of the current run of successes or failures (at most one is non-zero).",
     {{"outcome=\"success\"", F_RUN_SUCCESSES}, {"outcome=\"failure\"", F_RUN_FAILURES}}, 2},
    {"circuit_half_open_probe_timeouts", PROM_GAUGE,
     "Probes timed out in the current half-open state.", {{NULL, F_HALF_OPEN_TIMEOUTS}}, 1},
    {"circuit_probes_in_flight", PROM_GAUGE, "Probe slots held while half-open.",
     {{NULL, F_PROBES_IN_FLIGHT}}, 1},
    {"circuit_retry_after_seconds", PROM_GAUGE,
     "Seconds left in the current open period (0 unless open).", {{NULL, F_RETRY_AFTER}}, 1},
    {"circuit_calls_admitted_total", PROM_COUNTER, "Calls admitted by circuit_allow.",
     {{NULL, F_ADMITTED}}, 1},
    {"circuit_calls_rejected_total", PROM_COUNTER, "Calls rejected by circuit_allow.",
     {{NULL, F_REJECTED}}, 1},
    {"circuit_results_total", PROM_COUNTER,
     "Results counted in the generation their call was admitted in, by outcome.",
     {{"outcome=\"success\"", F_SUCCESSES},
      {"outcome=\"failure\"", F_FAILURES},
      {"outcome=\"ignored\"", F_IGNORED}},
     3},
    {"circuit_results_late_total", PROM_COUNTER,
     "Results discarded because the state changed after their call was admitted.",
     {{NULL, F_LATE}}, 1},
    {"circuit_tickets_released_total", PROM_COUNTER,
     "Admitted calls settled without a result (circuit_release).", {{NULL, F_RELEASED}}, 1},
    {"circuit_probe_timeouts_total", PROM_COUNTER, "Probes that held their slot too long.",
     {{NULL, F_TIMED_OUT}}, 1},
    {"circuit_transitions_total", PROM_COUNTER, "Changes of state.", {{NULL, F_TRANSITIONS}},
     1},
};

static void out_labels(prom_out *o, const char *breaker, const char *extra)
{
    if (breaker == NULL && extra == NULL)
        return;
    out_str(o, "{");
    if (breaker != NULL) {
        out_str(o, "breaker=\"");
        out_label_value(o, breaker);
        out_str(o, "\"");
    }
    if (extra != NULL) {
        if (breaker != NULL)
            out_str(o, ",");
        out_str(o, extra);
    }
    out_str(o, "}");
}

static void out_value(prom_out *o, const circuit_stats *s, prom_field f)
{
    switch (f) {
    case F_STATE: break; /* written by out_state */
    case F_GENERATION: out_fmt(o, "%" PRIu64, s->generation); break;
    case F_WINDOW_SUCCESSES: out_fmt(o, "%" PRId64, s->counts.successes); break;
    case F_WINDOW_FAILURES: out_fmt(o, "%" PRId64, s->counts.failures); break;
    case F_RUN_SUCCESSES: out_fmt(o, "%" PRId64, s->counts.consecutive_successes); break;
    case F_RUN_FAILURES: out_fmt(o, "%" PRId64, s->counts.consecutive_failures); break;
    case F_HALF_OPEN_TIMEOUTS: out_fmt(o, "%" PRId64, s->counts.timed_out); break;
    case F_PROBES_IN_FLIGHT: out_fmt(o, "%" PRId64, s->probes_in_flight); break;
    case F_RETRY_AFTER: {
        int64_t ns = s->retry_after_ns > 0 ? s->retry_after_ns : 0;
        out_fmt(o, "%" PRId64 ".%09" PRId64, ns / 1000000000, ns % 1000000000);
        break;
    }
    case F_ADMITTED: out_fmt(o, "%" PRIu64, s->admitted); break;
    case F_REJECTED: out_fmt(o, "%" PRIu64, s->rejected); break;
    case F_SUCCESSES: out_fmt(o, "%" PRIu64, s->successes); break;
    case F_FAILURES: out_fmt(o, "%" PRIu64, s->failures); break;
    case F_IGNORED: out_fmt(o, "%" PRIu64, s->ignored); break;
    case F_LATE: out_fmt(o, "%" PRIu64, s->late); break;
    case F_RELEASED: out_fmt(o, "%" PRIu64, s->released); break;
    case F_TIMED_OUT: out_fmt(o, "%" PRIu64, s->timed_out); break;
    case F_TRANSITIONS: out_fmt(o, "%" PRIu64, s->transitions); break;
    }
}

static void out_state(prom_out *o, const char *name, const char *breaker, circuit_state now)
{
    static const circuit_state all[] = {CIRCUIT_CLOSED, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN,
                                        CIRCUIT_ISOLATED};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        char label[40];
        snprintf(label, sizeof label, "state=\"%s\"", circuit_state_name(all[i]));
        out_str(o, name);
        out_labels(o, breaker, label);
        out_str(o, all[i] == now ? " 1\n" : " 0\n");
    }
}

/* FNV-1a, 64 bits: spreads the names over the table. */
static uint64_t name_hash(const char *s)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        h = (h ^ *p) * UINT64_C(0x100000001b3);
    return h;
}

/* 0, EINVAL (a NULL name, one that is not UTF-8, or two equal names) or
 * ENOMEM. One table of at least 2n slots, open addressing: each name is
 * compared only with the names that share its slot run. */
static int names_check(const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (names[i] == NULL || !utf8_ok(names[i]))
            return EINVAL;
    if (n < 2)
        return 0;
    size_t cap = 4;
    while (cap < 2 * n) {
        if (cap > SIZE_MAX / 4 / sizeof(size_t))
            return ENOMEM;
        cap *= 2;
    }
    size_t *slot = calloc(cap, sizeof *slot); /* i + 1; 0 = empty */
    if (!slot)
        return ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        size_t at = (size_t)name_hash(names[i]) & (cap - 1);
        while (slot[at] != 0) {
            if (strcmp(names[slot[at] - 1], names[i]) == 0) {
                rc = EINVAL; /* two series with the same labels */
                break;
            }
            at = (at + 1) & (cap - 1);
        }
        slot[at] = i + 1;
    }
    free(slot);
    return rc;
}

/* Everything is checked before anything is written: 0, EINVAL or ENOMEM. */
static int check_all(const circuit_stats *stats, const char *const *breakers, size_t n)
{
    if (n > 0 && stats == NULL)
        return EINVAL;
    if (breakers == NULL && n > 1)
        return EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!state_ok(stats[i].state))
            return EINVAL;
    return breakers ? names_check(breakers, n) : 0;
}

static void out_all(prom_out *o, const circuit_stats *stats, const char *const *breakers,
                    size_t n)
{
    if (n == 0)
        return; /* an empty text */
    for (size_t m = 0; m < sizeof prom_metrics / sizeof prom_metrics[0]; m++) {
        const prom_metric *pm = &prom_metrics[m];
        out_str(o, "# HELP ");
        out_str(o, pm->name);
        out_str(o, " ");
        out_str(o, pm->help);
        out_str(o, "\n# TYPE ");
        out_str(o, pm->name);
        out_str(o, pm->kind == PROM_COUNTER ? " counter\n" : " gauge\n");
        for (size_t i = 0; i < n && o->error == 0; i++) {
            const char *breaker = breakers ? breakers[i] : NULL;
            for (int k = 0; k < pm->n_series; k++) {
                if (pm->series[k].field == F_STATE) {
                    out_state(o, pm->name, breaker, stats[i].state);
                    continue;
                }
                out_str(o, pm->name);
                out_labels(o, breaker, pm->series[k].label);
                out_str(o, " ");
                out_value(o, &stats[i], pm->series[k].field);
                out_str(o, "\n");
            }
        }
    }
}

int circuit_stats_format_prometheus_many(const circuit_stats *stats, const char *const *breakers,
                                         size_t n, char *buf, size_t len)
{
    prom_out o;
    o.text = (circuit__text){buf, buf ? len : 0, 0};
    o.write = NULL;
    o.arg = NULL;
    o.error = 0;
    o.fill = 0;
    if (o.text.len > 0)
        buf[0] = '\0';
    int rc = check_all(stats, breakers, n);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    out_all(&o, stats, breakers, n);
    if (o.text.used > INT_MAX) {
        if (o.text.len > 0)
            buf[0] = '\0';
        errno = EOVERFLOW;
        return -1;
    }
    return (int)o.text.used;
}

int circuit_stats_write_prometheus_many(const circuit_stats *stats, const char *const *breakers,
                                        size_t n, circuit_prometheus_write_fn write, void *arg)
{
    if (write == NULL)
        return EINVAL;
    int rc = check_all(stats, breakers, n);
    if (rc != 0)
        return rc;
    /* The chunk is on the heap: 16 KiB is more than a small thread's stack
     * should give a formatter. */
    prom_out *o = malloc(sizeof *o);
    if (!o)
        return ENOMEM;
    o->text = (circuit__text){NULL, 0, 0};
    o->write = write;
    o->arg = arg;
    o->error = 0;
    o->fill = 0;
    out_all(o, stats, breakers, n);
    out_flush(o);
    rc = o->error;
    free(o);
    return rc;
}

int circuit_stats_format_prometheus(const circuit_stats *s, const char *breaker, char *buf,
                                    size_t len)
{
    return circuit_stats_format_prometheus_many(s, breaker ? &breaker : NULL, 1, buf, len);
}
