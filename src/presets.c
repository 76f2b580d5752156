/*
 * Ready-made policies and classifiers (include/circuit_presets.h).
 *
 * SPDX-License-Identifier: MIT
 *
 * Built only on the public API: nothing in the core includes this file's
 * header or calls into it. Every trip, probe and classify function here is a
 * pure function of its arguments (L4): no state, no writes, no lock, no
 * allocation, so the core may call them from any number of threads at once.
 */
#include "circuit_presets.h"

#include "message.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- messages and aborts ------------------------------------------------- */

/* Messages and aborts go through the core's builder and abort path
 * (src/message.h), so they have circuit_new's shape: "invalid <what>: field =
 * value (must be bound); ..." and "libcircuit: <fn>: <why>". */

__attribute__((noreturn)) static void presets_abort(const char *fn, const char *why)
{
    circuit__abort("%s: %s", fn, why);
}

/* ---- shared half-open rule ---------------------------------------------- */

/* Any failed probe reopens; `successes` probe successes in a row close; a
 * probe timeout (counts->timed_out grew) keeps probing. While half-open a
 * failure reopens at once, so failures > 0 means "this result is a
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

    circuit__msg m;
    circuit__msg_start(&m, errbuf, errbuf_len, "circuit_consecutive");
    if (!presets_run_ok(failures))
        circuit__msg_add(&m, "failures = %" PRId64 " (must be 1..%" PRId64 ")", failures,
                         CIRCUIT_RUN_MAX);
    if (!presets_run_ok(successes))
        circuit__msg_add(&m, "successes = %" PRId64 " (must be 1..%" PRId64 ")", successes,
                         CIRCUIT_RUN_MAX);
    if (circuit__msg_end(&m) != 0) {
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
        /* The functions only read through arg (L4). */
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

/* K1: refuses a breaker whose window can never hold min_results results (the
 * policy would never trip). A window outside 1..CIRCUIT_MAX_COUNT is left to
 * circuit_new's own clause about it: the check is called even then (K1), and
 * says nothing it cannot be sure of. */
static int failure_rate_check(void *arg, const circuit_config *cfg, char *errbuf,
                              size_t errbuf_len)
{
    const circuit_failure_rate *p = arg;
    if (cfg->window < 1 || p->min_results <= cfg->window)
        return 0;
    snprintf(errbuf, errbuf_len,
             "circuit_failure_rate min_results = %" PRId64 " exceeds window = %d (the window "
             "never holds that many results, so the policy would never trip)",
             p->min_results, cfg->window);
    return EINVAL;
}

int circuit_failure_rate_init(circuit_failure_rate *p, const circuit_config *cfg,
                              int64_t min_results, double ratio, int64_t successes,
                              char *errbuf, size_t errbuf_len)
{
    if (p == NULL)
        presets_abort("circuit_failure_rate_init", "p is NULL");

    circuit__msg m;
    circuit__msg_start(&m, errbuf, errbuf_len, "circuit_failure_rate");
    if (cfg == NULL) {
        /* From its own parameters: the window is checked when a
         * breaker is built, by the policy's check (K1). */
        if (min_results < 1 || min_results > CIRCUIT_MAX_COUNT)
            circuit__msg_add(&m, "min_results = %" PRId64 " (must be 1..%d)", min_results,
                             CIRCUIT_MAX_COUNT);
    } else if (cfg->window >= 1 && cfg->window <= CIRCUIT_MAX_COUNT) {
        if (min_results < 1 || min_results > cfg->window)
            circuit__msg_add(&m, "min_results = %" PRId64 " (must be 1..%d, the config's window)",
                             min_results, cfg->window);
    } else {
        circuit__msg_add(&m, "cfg->window = %d (must be 1..%d)", cfg->window, CIRCUIT_MAX_COUNT);
        if (min_results < 1 || min_results > CIRCUIT_MAX_COUNT)
            circuit__msg_add(&m, "min_results = %" PRId64 " (must be 1..%d)", min_results,
                             CIRCUIT_MAX_COUNT);
    }
    if (!ratio_ok(ratio)) {
        char v[40];
        circuit__format_double(v, sizeof v, ratio);
        circuit__msg_add(&m, "ratio = %s (must be in (0, 1])", v);
    }
    if (!presets_run_ok(successes))
        circuit__msg_add(&m, "successes = %" PRId64 " (must be 1..%" PRId64 ")", successes,
                         CIRCUIT_RUN_MAX);
    if (circuit__msg_end(&m) != 0) {
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
        .check = failure_rate_check,
    };
    return pol;
}

/* ---- exponential open periods (B1-B3) ---------------------------- */

static bool jitter_ok(double jitter)
{
    return jitter >= 0.0 && jitter < 1.0; /* false for NaN */
}

static bool backoff_ok(const circuit_backoff_exponential *p)
{
    return p->base_ns > 0 && p->cap_ns >= p->base_ns && jitter_ok(p->jitter);
}

static uint64_t splitmix64_nth(uint64_t seed, uint64_t n)
{
    /* SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
     * generators", OOPSLA 2014): the state advances by the odd constant
     * 0x9e3779b97f4a7c15 per output and each output is the state put through
     * a 64-bit finaliser. The n-th output of the generator seeded with `seed`
     * (n >= 1) is therefore mix(seed + n * gamma), computable without the n - 1
     * outputs before it. Unsigned arithmetic wraps modulo 2^64 by definition. */
    uint64_t z = seed + n * UINT64_C(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

int64_t circuit_backoff_exponential_open_for(void *arg, const circuit_open_info *info)
{
    const circuit_backoff_exponential *p = arg;
    if (p == NULL)
        presets_abort("circuit_backoff_exponential_open_for", "arg is NULL");
    if (info == NULL)
        presets_abort("circuit_backoff_exponential_open_for", "info is NULL");
    if (!backoff_ok(p))
        presets_abort("circuit_backoff_exponential_open_for",
                      "*arg holds invalid values (fill it with circuit_backoff_exponential_init "
                      "and check that it returned 0)");

    /* min(cap, base * 2^reopens), doubling without overflow: once the period
     * passes half the cap, the next doubling is the cap. At most 63 rounds,
     * since base >= 1 and cap < 2^63. */
    int64_t period = p->base_ns;
    for (int64_t k = 0; k < info->reopens && period < p->cap_ns; k++)
        period = period > p->cap_ns / 2 ? p->cap_ns : period * 2;

    if (p->jitter > 0.0) {
        /* u in [0, 1): the top 53 bits of the generation-th SplitMix64 output
         * of the stream keyed by (seed, salt): breakers sharing one struct
         * have different salts, hence different streams. */
        uint64_t key = splitmix64_nth(p->seed, info->salt);
        double u = (double)(splitmix64_nth(key, info->generation) >> 11) * 0x1p-53;
        int64_t cut = (int64_t)((double)period * p->jitter * u);
        period -= cut;
    }
    return period >= 1 ? period : 1; /* never <= 0 (B1); jitter < 1 keeps it so anyway */
}

int circuit_backoff_exponential_init(circuit_backoff_exponential *p, int64_t base_ns,
                                     int64_t cap_ns, double jitter, uint64_t seed, char *errbuf,
                                     size_t errbuf_len)
{
    if (p == NULL)
        presets_abort("circuit_backoff_exponential_init", "p is NULL");

    circuit__msg m;
    circuit__msg_start(&m, errbuf, errbuf_len, "circuit_backoff_exponential");
    if (base_ns <= 0)
        circuit__msg_add(&m, "base_ns = %" PRId64 " (must be > 0)", base_ns);
    if (cap_ns <= 0 || (base_ns > 0 && cap_ns < base_ns)) {
        if (base_ns > 0)
            circuit__msg_add(&m, "cap_ns = %" PRId64 " (must be >= base_ns = %" PRId64 ")",
                             cap_ns, base_ns);
        else
            circuit__msg_add(&m, "cap_ns = %" PRId64 " (must be > 0 and >= base_ns)", cap_ns);
    }
    if (!jitter_ok(jitter)) {
        char v[40];
        circuit__format_double(v, sizeof v, jitter);
        circuit__msg_add(&m, "jitter = %s (must be in [0, 1))", v);
    }
    if (circuit__msg_end(&m) != 0) {
        memset(p, 0, sizeof *p);
        return EINVAL;
    }
    p->base_ns = base_ns;
    p->cap_ns = cap_ns;
    p->jitter = jitter;
    p->seed = seed;
    return 0;
}

void circuit_backoff_exponential_use(circuit_spec *spec, const circuit_backoff_exponential *p)
{
    if (spec == NULL)
        presets_abort("circuit_backoff_exponential_use", "spec is NULL");
    if (p == NULL)
        presets_abort("circuit_backoff_exponential_use", "p is NULL");
    if (!backoff_ok(p))
        presets_abort("circuit_backoff_exponential_use",
                      "*p holds invalid values (fill it with circuit_backoff_exponential_init "
                      "and check that it returned 0)");
    spec->open_for = circuit_backoff_exponential_open_for;
    spec->open_for_arg = (void *)(uintptr_t)p; /* only read (B3) */
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
