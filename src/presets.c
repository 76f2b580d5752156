/*
 * Ready-made policies and classifiers (include/circuit_presets.h).
 *
 * SPDX-License-Identifier: MIT
 *
 * Built only on the public API: nothing in the core includes this file's
 * header or calls into it. Every trip, probe and classify function here is a
 * pure function of its arguments (SPEC L4): no state, no writes, no lock, no
 * allocation, so the core may call them from any number of threads at once.
 */
#include "circuit_presets.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- messages ----------------------------------------------------------- */

/* Messages follow circuit_new's (src/config.c): "invalid <what>: field = value
 * (must be bound); field = value (must be bound)". The longest one the init
 * functions build is a prefix and three clauses of well under 120 bytes. */
#define PRESETS_MSG_MAX 512

typedef struct presets_msg {
    char   text[PRESETS_MSG_MAX];
    size_t used;
    int    clauses;
} presets_msg;

static void presets_msg_start(presets_msg *m, const char *what)
{
    int n = snprintf(m->text, sizeof m->text, "invalid %s:", what);
    m->used = n > 0 ? (size_t)n : 0;
    m->clauses = 0;
}

/* Appends one " field = value (must be ...)" clause, ";"-separated. */
__attribute__((format(printf, 2, 3)))
static void presets_msg_add(presets_msg *m, const char *fmt, ...)
{
    if (m->clauses > 0 && m->used + 1 < sizeof m->text) {
        memcpy(m->text + m->used, ";", 2);
        m->used += 1;
    }
    if (m->used < sizeof m->text) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(m->text + m->used, sizeof m->text - m->used, fmt, ap);
        va_end(ap);
        if (n > 0)
            m->used += (size_t)n;
        if (m->used >= sizeof m->text)
            m->used = sizeof m->text - 1;
    }
    m->clauses++;
}

/* Writes the message (or, when nothing was wrong, an empty string) to the
 * caller's buffer, truncated to errbuf_len - 1 bytes; errbuf may be NULL and
 * errbuf_len 0 (then nothing is written). */
static void presets_msg_emit(const presets_msg *m, char *errbuf, size_t errbuf_len)
{
    if (errbuf != NULL && errbuf_len > 0)
        snprintf(errbuf, errbuf_len, "%s", m->clauses > 0 ? m->text : "");
}

/* The shortest decimal text that reads back as `v` (so a ratio of
 * 1.0000000001 is not shown as "1"), without an exponent when the value
 * has at most 17 digits before the point (50, not 5e+01); "nan" and "inf" as
 * printf spells them. */
static void presets_format_double(char *buf, size_t len, double v)
{
    if (isnan(v)) {
        snprintf(buf, len, "nan");
        return;
    }
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        if (isinf(v) || strtod(buf, NULL) == v)
            break;
    }
    const char *e = strchr(buf, 'e');
    if (e != NULL) {
        long exp10 = strtol(e + 1, NULL, 10);
        if (exp10 >= 0 && exp10 < 17 && exp10 + 1 > prec)
            prec = (int)exp10 + 1;
    }
    snprintf(buf, len, "%.*g", prec, v);
}

__attribute__((noreturn))
static void presets_abort(const char *fn, const char *why)
{
    fprintf(stderr, "libcircuit: %s: %s\n", fn, why);
    fflush(stderr);
    abort();
}

/* ---- shared half-open rule ---------------------------------------------- */

/* Any failed probe reopens; `successes` probe successes in a row close; a
 * probe timeout (counts->timed_out grew) keeps probing. While half-open a
 * failure reopens at once, so failures > 0 means "this result was a
 * failure". */
static circuit_state presets_probe(int64_t successes, const circuit_counts *c)
{
    if (c->failures > 0)
        return CIRCUIT_OPEN;
    if (c->consecutive_successes >= successes)
        return CIRCUIT_CLOSED;
    return CIRCUIT_HALF_OPEN;
}

static bool presets_run_ok(int64_t v)
{
    return v >= 1 && v <= CIRCUIT_RUN_MAX;
}

/* ---- consecutive -------------------------------------------------------- */

static bool consecutive_trip(void *arg, const circuit_counts *c)
{
    const circuit_consecutive *p = arg;
    return c->consecutive_failures >= p->failures;
}

static circuit_state consecutive_probe(void *arg, const circuit_counts *c)
{
    const circuit_consecutive *p = arg;
    return presets_probe(p->successes, c);
}

int circuit_consecutive_init(circuit_consecutive *p, int64_t failures, int64_t successes,
                             char *errbuf, size_t errbuf_len)
{
    if (p == NULL)
        presets_abort("circuit_consecutive_init", "p is NULL");

    presets_msg m;
    presets_msg_start(&m, "circuit_consecutive");
    if (!presets_run_ok(failures))
        presets_msg_add(&m, " failures = %" PRId64 " (must be 1..%" PRId64 ")", failures,
                        CIRCUIT_RUN_MAX);
    if (!presets_run_ok(successes))
        presets_msg_add(&m, " successes = %" PRId64 " (must be 1..%" PRId64 ")", successes,
                        CIRCUIT_RUN_MAX);
    presets_msg_emit(&m, errbuf, errbuf_len);
    if (m.clauses > 0) {
        memset(p, 0, sizeof *p);
        return EINVAL;
    }
    p->failures = failures;
    p->successes = successes;
    return 0;
}

circuit_policy circuit_consecutive_policy(const circuit_consecutive *p)
{
    if (p == NULL)
        presets_abort("circuit_consecutive_policy", "p is NULL");
    if (!presets_run_ok(p->failures) || !presets_run_ok(p->successes))
        presets_abort("circuit_consecutive_policy",
                      "*p holds invalid values (fill it with circuit_consecutive_init "
                      "and check that it returned 0)");
    circuit_policy pol = {
        .trip = consecutive_trip,
        .probe = consecutive_probe,
        /* The functions only read through arg (SPEC L4). */
        .arg = (void *)(uintptr_t)p,
    };
    return pol;
}

/* ---- failure rate ------------------------------------------------------- */

/* A shortfall of less than this many failures is forgiven, to absorb the
 * binary rounding of a decimal ratio; see circuit_presets.h for why 2^-24
 * cannot change the answer for any ratio a/b with b <= CIRCUIT_MAX_COUNT. */
#define PRESETS_RATIO_SLACK 0x1p-24

static bool ratio_ok(double ratio)
{
    return ratio > 0.0 && ratio <= 1.0; /* false for NaN */
}

static bool failure_rate_trip(void *arg, const circuit_counts *c)
{
    const circuit_failure_rate *p = arg;
    int64_t results = c->successes + c->failures;
    if (results < p->min_results || c->failures < 1)
        return false;
    return (double)c->failures >= p->ratio * (double)results - PRESETS_RATIO_SLACK;
}

static circuit_state failure_rate_probe(void *arg, const circuit_counts *c)
{
    const circuit_failure_rate *p = arg;
    return presets_probe(p->successes, c);
}

int circuit_failure_rate_init(circuit_failure_rate *p, const circuit_config *cfg,
                              int64_t min_results, double ratio, int64_t successes,
                              char *errbuf, size_t errbuf_len)
{
    if (p == NULL)
        presets_abort("circuit_failure_rate_init", "p is NULL");
    if (cfg == NULL)
        presets_abort("circuit_failure_rate_init", "cfg is NULL");

    presets_msg m;
    presets_msg_start(&m, "circuit_failure_rate");
    if (cfg->window >= 1 && cfg->window <= CIRCUIT_MAX_COUNT) {
        if (min_results < 1 || min_results > cfg->window)
            presets_msg_add(&m, " min_results = %" PRId64 " (must be 1..%d, the config's window)",
                            min_results, cfg->window);
    } else {
        presets_msg_add(&m, " cfg->window = %d (must be 1..%d)", cfg->window,
                        CIRCUIT_MAX_COUNT);
        if (min_results < 1 || min_results > CIRCUIT_MAX_COUNT)
            presets_msg_add(&m, " min_results = %" PRId64 " (must be 1..%d)", min_results,
                            CIRCUIT_MAX_COUNT);
    }
    if (!ratio_ok(ratio)) {
        char v[40];
        presets_format_double(v, sizeof v, ratio);
        presets_msg_add(&m, " ratio = %s (must be in (0, 1])", v);
    }
    if (!presets_run_ok(successes))
        presets_msg_add(&m, " successes = %" PRId64 " (must be 1..%" PRId64 ")", successes,
                        CIRCUIT_RUN_MAX);
    presets_msg_emit(&m, errbuf, errbuf_len);
    if (m.clauses > 0) {
        memset(p, 0, sizeof *p);
        return EINVAL;
    }
    p->min_results = min_results;
    p->ratio = ratio;
    p->successes = successes;
    return 0;
}

circuit_policy circuit_failure_rate_policy(const circuit_failure_rate *p)
{
    if (p == NULL)
        presets_abort("circuit_failure_rate_policy", "p is NULL");
    if (p->min_results < 1 || p->min_results > CIRCUIT_MAX_COUNT || !ratio_ok(p->ratio) ||
        !presets_run_ok(p->successes))
        presets_abort("circuit_failure_rate_policy",
                      "*p holds invalid values (fill it with circuit_failure_rate_init "
                      "and check that it returned 0)");
    circuit_policy pol = {
        .trip = failure_rate_trip,
        .probe = failure_rate_probe,
        .arg = (void *)(uintptr_t)p,
    };
    return pol;
}

/* ---- classifiers -------------------------------------------------------- */

circuit_outcome circuit_classify_errno(void *arg, void *call_ctx, int result)
{
    (void)arg;
    (void)call_ctx;
    if (result >= 0)
        return CIRCUIT_SUCCESS;
    if (result == -ECANCELED)
        return CIRCUIT_IGNORED;
    return CIRCUIT_FAILURE;
}

circuit_outcome circuit_classify_http(void *arg, void *call_ctx, int result)
{
    (void)arg;
    (void)call_ctx;
    if (result == -ECANCELED)
        return CIRCUIT_IGNORED;
    if (result < 0 || result == 429 || (result >= 500 && result <= 599))
        return CIRCUIT_FAILURE;
    return CIRCUIT_SUCCESS;
}
