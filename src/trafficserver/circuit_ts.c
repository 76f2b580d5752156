/*
 * circuit.so: a libcircuit breaker per Apache Traffic Server remap rule.
 *
 * SPDX-License-Identifier: MIT
 *
 * An adapter beside the core, like the presets: it calls only the public API
 * (<circuit.h>, <circuit_presets.h>, <circuit_prometheus.h>) and Traffic
 * Server's plugin API (ts/ts.h, ts/remap.h, 9.2). Rule ids (AT1-AT9) are
 * defined in docs/CONTRACT.md; the operator's guide is docs/TRAFFICSERVER.md.
 *
 * The plugin is loaded twice over by one process and must be:
 *   plugin.config   circuit.so          (TSPluginInit: the operator message
 *                                        hook, the metrics task, and
 *                                        TSPluginDSOReloadEnable(0))
 *   remap.config    ... @plugin=circuit.so @pparam=name=shop ...
 * TSPluginDSOReloadEnable(0) makes every remap.config (re)load use this same
 * loaded image instead of a fresh copy, so the registry below outlives a
 * reload (AT6). TSRemapInit refuses to start without the plugin.config line.
 *
 * How the pieces reach each other
 *   - A remap instance (TSRemapNewInstance) is a pointer to a `rule` in the
 *     registry. Rules are keyed by name AND every parameter: a reload that
 *     keeps a rule's parameters finds the same rule (same breaker, state,
 *     counts and totals) and takes a reference; a new or changed rule gets a
 *     new breaker (AT6). TSRemapDeleteInstance drops the reference; the last
 *     one frees the breaker.
 *   - The request path never looks the registry up: Traffic Server hands
 *     TSRemapDoRemap the instance pointer, and each transaction holds a lease
 *     on the remap table it is mapped with until the transaction is
 *     destroyed (HttpSM takes it at start and releases it in its cleanup),
 *     so a rule outlives every transaction that uses it without any
 *     reference count or lock on the request path. The event threads thus
 *     see the new set after a reload through Traffic Server's own table
 *     swap, and the old rules are freed only after their last transaction.
 *   - The registry itself is read only by the control paths (the metrics
 *     task, the Prometheus rule, operator messages) and written only by
 *     instance creation and deletion; one mutex guards it. None of these
 *     runs per request.
 *
 * Per request (AT2, AT3, AT7): circuit_allow in TSRemapDoRemap, before the
 * origin request; admitted, the transaction gets its origin deadlines there
 * (set_origin_deadlines: timeout=, a probe's inside probe-timeout, no
 * connect retry). Rejected: status 503 set in the remap step (Traffic Server then
 * answers without contacting the origin) with a body naming the state, and
 * Retry-After (circuit_retry_after_s) added when the response header is
 * sent, unless isolated. Admitted: the ticket lives in a small per-
 * transaction struct (a transaction user argument) and is settled exactly
 * once, whichever hook sees the outcome first:
 *     READ_RESPONSE_HDR   the origin's status, through the classifier, or a
 *                         failure when later than slow=
 *     TXN_CLOSE           no origin response: a server state that says why
 *                         (connect error / timeouts) counts as a failure;
 *                         otherwise (client gone, no origin outcome)
 *                         circuit_release: counts nothing
 * Each hook costs Traffic Server a dispatch per transaction, so a
 * transaction gets only the hooks it needs: TXN_CLOSE always (settle, free
 * the struct), READ_RESPONSE_HDR only once admitted, SEND_RESPONSE_HDR only
 * once rejected with a Retry-After to add. TSmalloc stays: Traffic Server's
 * plugin API has no per-transaction arena, a user argument holds one
 * pointer and the struct is larger.
 * The hooks of one transaction never run concurrently (Traffic Server calls
 * them in sequence under the transaction's lock), so `settled` and `hooks`
 * are plain fields.
 */
#include <ts/ts.h>
#include <ts/remap.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "circuit.h"
#include "circuit_presets.h"
#include "circuit_prometheus.h"

#define PLUGIN_NAME "circuit"
#define NAME_MAX_LEN 64
#define MAX_STATUS_RANGES 16

/* ------------------------------------------------------------------------ */
/* Rules and the registry                                                    */
/* ------------------------------------------------------------------------ */

enum stat_field {
    ST_STATE,
    ST_GENERATION,
    ST_ADMITTED,
    ST_REJECTED,
    ST_SUCCESSES,
    ST_FAILURES,
    ST_IGNORED,
    ST_LATE,
    ST_RELEASED,
    ST_TIMED_OUT,
    ST_TRANSITIONS,
    ST_WINDOW_SUCCESSES,
    ST_WINDOW_FAILURES,
    ST_SLOW,
    ST_COUNT
};

static const char *const stat_suffix[ST_COUNT] = {
    "state",     "generation", "admitted",  "rejected",    "successes",
    "failures",  "ignored",    "late",      "released",    "timed_out",
    "transitions", "window_successes", "window_failures", "slow",
};

typedef struct status_range {
    int lo, hi;
} status_range;

/* The parameters of one rule, parsed (AT1). */
typedef struct rule_params {
    char name[NAME_MAX_LEN + 1];
    bool metrics;               /* the Prometheus rule: no breaker */
    bool rate;                  /* failure-rate (true) or consecutive */
    double ratio;               /* failure-rate */
    int64_t min_results;        /* failure-rate */
    int64_t failures;           /* consecutive */
    int64_t successes;          /* probe successes in a row that close */
    int window, probes;
    int64_t open_for_ns, open_for_max_ns, probe_timeout_ns;
    int64_t timeout_ns;         /* origin connect and no-activity timeouts (AT3) */
    int64_t slow_ns;            /* response header later than this: a failure (AT7); 0: off */
    double jitter;
    int n_ranges;               /* 0: the preset HTTP classifier */
    status_range ranges[MAX_STATUS_RANGES];
} rule_params;

typedef struct rule {
    struct rule *next;          /* registry list (registry_mu) */
    int refs;                   /* remap instances using it (registry_mu) */
    uint64_t seq;               /* order of use: among the rules of one name in the
                                   live configuration, the latest used is current */
    uint64_t load_pending;      /* the latest remap.config load that used it */
    uint64_t load_live;         /* the latest such load that succeeded */
    char *key;                  /* name and every parameter, canonical */
    rule_params p;
    circuit_breaker *b;         /* NULL for the metrics rule */
    circuit_consecutive cons;
    circuit_failure_rate rate;
    circuit_backoff_exponential backoff;
    int stat[ST_COUNT];
    int deadline_ms, probe_deadline_ms;   /* set_origin_deadlines */
    uint64_t slow;              /* slow responses (AT7); relaxed atomic adds */
    bool shares_name;           /* not its name's first rule: leaves the name's Traffic
                                   Server metrics to that one (relaxed atomic) */
    int rank;                   /* k > 1: its transitions are logged as NAME#k, the label
                                   of the exposition (relaxed atomic; name_rank) */
} rule;

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static rule *registry;          /* registry_mu */
static uint64_t registry_seq;   /* registry_mu */
/* remap.config loads: 1 is the first; a reload that fails leaves live_load
 * where it stands (Traffic Server keeps the previous table). registry_mu. */
static uint64_t loading_load = 1, live_load = 1;
static bool global_init_done;   /* set by TSPluginInit, before any remap load */
static int txn_arg = -1;        /* transaction user argument: the txn_state */
static TSCont txn_cont;         /* the per-transaction hooks (stateless) */

/* Per-transaction data (AT3). */
typedef struct txn_state {
    circuit_ticket ticket;
    rule *r;
    int64_t admitted_at;        /* CLOCK_MONOTONIC ns at admission, when slow= is set */
    bool admitted;              /* the ticket is live until settled */
    bool settled;
    unsigned hooks;             /* HOOK_* bits: the hooks added so far */
    int64_t retry_after_s;      /* > 0: add Retry-After to the 503 */
} txn_state;

/* Which transaction hooks a txn_state has had added (each at most once). */
enum { HOOK_READ_RESP = 1u, HOOK_SEND_RESP = 2u };

/* ------------------------------------------------------------------------ */
/* Parameters (AT1)                                                          */
/* ------------------------------------------------------------------------ */

typedef struct errs {
    char *buf;
    size_t len, used;
    int n;
} errs;

__attribute__((format(printf, 2, 3))) static void err_add(errs *e, const char *fmt, ...)
{
    if (e->len == 0)
        return;
    if (e->n > 0 && e->used + 2 < e->len) {
        memcpy(e->buf + e->used, "; ", 3);
        e->used += 2;
    }
    e->n++;
    if (e->used + 1 >= e->len)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(e->buf + e->used, e->len - e->used, fmt, ap);
    va_end(ap);
    if (w > 0)
        e->used += (size_t)w < e->len - e->used ? (size_t)w : e->len - e->used - 1;
}

static bool parse_i64(const char *s, int64_t *out)
{
    if (*s == '\0' || isspace((unsigned char)*s))
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return false;
    *out = (int64_t)v;
    return true;
}

static bool parse_double(const char *s, double *out)
{
    if (*s == '\0' || isspace((unsigned char)*s))
        return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || *end != '\0' || isnan(v))
        return false;
    *out = v;
    return true;
}

/* "5s", "500ms", "2m": a whole number with a unit (ns, us, ms, s, m, h). */
static bool parse_duration(const char *s, int64_t *out_ns)
{
    static const struct {
        const char *unit;
        int64_t ns;
    } units[] = {{"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000},
                 {"m", INT64_C(60000000000)}, {"h", INT64_C(3600000000000)}};
    if (!isdigit((unsigned char)*s))
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0)
        return false;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].unit) == 0) {
            if (v > INT64_MAX / units[i].ns)
                return false;
            *out_ns = (int64_t)v * units[i].ns;
            return true;
        }
    }
    return false;
}

/* "500-599", "502,503,504", "429,500-599" */
static bool parse_statuses(const char *s, rule_params *p)
{
    p->n_ranges = 0;
    const char *c = s;
    while (*c) {
        if (p->n_ranges == MAX_STATUS_RANGES)
            return false;
        char *end;
        long lo = strtol(c, &end, 10);
        if (end == c || lo < 100 || lo > 599)
            return false;
        long hi = lo;
        c = end;
        if (*c == '-') {
            c++;
            hi = strtol(c, &end, 10);
            if (end == c || hi < lo || hi > 599)
                return false;
            c = end;
        }
        p->ranges[p->n_ranges++] = (status_range){(int)lo, (int)hi};
        if (*c == ',')
            c++;
        else if (*c != '\0')
            return false;
    }
    return p->n_ranges > 0;
}

static bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > NAME_MAX_LEN)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!(isalnum(ch) || ch == '_' || ch == '-'))
            return false;
    }
    return true;
}

/* A duration in the largest unit that states it exactly: 5s, 1500ms, 1ns. */
static void fmt_duration(char *buf, size_t len, int64_t ns)
{
    static const struct {
        const char *unit;
        int64_t ns;
    } units[] = {{"h", INT64_C(3600000000000)}, {"m", INT64_C(60000000000)}, {"s", 1000000000},
                 {"ms", 1000000}, {"us", 1000}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (ns != 0 && ns % units[i].ns == 0) {
            snprintf(buf, len, "%" PRId64 "%s", ns / units[i].ns, units[i].unit);
            return;
        }
    }
    snprintf(buf, len, "%" PRId64 "ns", ns);
}

/* The parameters a rule knows; each may be given once (AT9). */
static const char *const known_keys[] = {
    "name", "policy", "window", "probes", "successes", "open-for", "open-for-max",
    "probe-timeout", "timeout", "slow", "jitter", "failure-status", "metrics",
};
#define N_KEYS (sizeof known_keys / sizeof known_keys[0])

static size_t key_index(const char *k)
{
    size_t i = 0;
    while (i < N_KEYS - 1 && strcmp(known_keys[i], k) != 0)
        i++;
    return i;
}
#define DEFAULT_TIMEOUT_NS CIRCUIT_S(5)
/* Traffic Server 9.2 checks these timeouts once a second
 * (proxy.config.net.inactivity_check_frequency, 1 by default), and a new
 * origin connection is first checked 1 to 2 s after it opens: a deadline d
 * fires between d and d + 1 s, and never before 1 s (measured: 1 s and 750
 * ms deadlines fired 1.93-2.01 s after admission). A probe's deadline is set
 * 1.25 s below probe-timeout, so that it fires before the probe's slot is
 * freed (AT3), but never below half of probe-timeout; a probe-timeout below
 * PROBE_TIMEOUT_KEPT_NS cannot be kept, and the rule is warned about. */
#define PROBE_DEADLINE_MARGIN_NS CIRCUIT_MS(1250)
#define PROBE_TIMEOUT_KEPT_NS CIRCUIT_MS(2500)
#define MAX_TIMEOUT_NS CIRCUIT_S(86400)

/*
 * Parses the @pparam words into *p. Every bad parameter is named in ONE
 * message written to errbuf (AT1); a parameter given twice is one of them
 * (AT9); returns false if there is any.
 * Defaults: window 100, probes 1, open-for 5s, probe-timeout 3s, timeout 5s,
 * successes = probes, no open-for-max (a fixed open period), jitter 0, no
 * slow threshold, failure statuses those of circuit_classify_http (500-599
 * and 429). name and policy are required.
 */
static bool parse_params(int argc, char **argv, rule_params *p, char *errbuf, size_t errlen)
{
    errs e = {errbuf, errlen, 0, 0};
    char prefix[160];
    memset(p, 0, sizeof *p);
    p->window = 100;
    p->probes = 1;
    p->open_for_ns = CIRCUIT_S(5);
    p->probe_timeout_ns = CIRCUIT_S(3);
    p->timeout_ns = DEFAULT_TIMEOUT_NS;
    p->successes = -1;          /* = probes unless given */
    bool have_name = false, have_policy = false, have_max = false;
    bool have_open_for = false, have_timeout = false;   /* given, and valid */
    const char *name_given = "?";
    const char *seen[N_KEYS] = {0};   /* the word that first gave each key */

    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "name=", 5) == 0 && strcmp(name_given, "?") == 0)
            name_given = argv[i] + 5;
        if (strcmp(argv[i], "metrics") == 0)
            p->metrics = true;
    }
    snprintf(prefix, sizeof prefix, PLUGIN_NAME ": rule %s%.64s%s refused: ", p->metrics ? "" : "'",
             p->metrics ? "metrics" : name_given, p->metrics ? "" : "'");
    if (errlen > 0) {
        snprintf(errbuf, errlen, "%s", prefix);
        e.used = strlen(errbuf);
    }

    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *eq = strchr(a, '=');
        size_t klen = eq ? (size_t)(eq - a) : strlen(a);
        size_t ki = 0;
        while (ki < N_KEYS && !(strlen(known_keys[ki]) == klen && strncmp(a, known_keys[ki], klen) == 0))
            ki++;
        if (ki < N_KEYS) {
            if (seen[ki] != NULL) {
                err_add(&e, "%s given twice ('%s' and '%s'; each parameter at most once)",
                        known_keys[ki], seen[ki], a);
                continue;
            }
            seen[ki] = a;
        }
        if (strcmp(a, "metrics") == 0)
            continue;
        if (p->metrics) {   /* AT1: the metrics rule takes no parameter: name each word */
            err_add(&e, "%s (the metrics rule takes no other parameter)", a);
            continue;
        }
        if (eq == NULL) {
            err_add(&e, "'%s' (a parameter is name=value)", a);
            continue;
        }
        const char *v = eq + 1;
        int64_t iv;
        double dv;
#define KEY(k) (klen == sizeof(k) - 1 && strncmp(a, k, klen) == 0)
        if (KEY("name")) {
            if (!valid_name(v))
                err_add(&e, "name=%s (1..%d characters among A-Z a-z 0-9 _ -)", v, NAME_MAX_LEN);
            else
                snprintf(p->name, sizeof p->name, "%s", v);
            have_name = true;
        } else if (KEY("window")) {
            if (!parse_i64(v, &iv) || iv < 1 || iv > CIRCUIT_MAX_COUNT)
                err_add(&e, "window=%s (must be 1..%d)", v, CIRCUIT_MAX_COUNT);
            else
                p->window = (int)iv;
        } else if (KEY("probes")) {
            if (!parse_i64(v, &iv) || iv < 1 || iv > CIRCUIT_MAX_COUNT)
                err_add(&e, "probes=%s (must be 1..%d)", v, CIRCUIT_MAX_COUNT);
            else
                p->probes = (int)iv;
        } else if (KEY("successes")) {
            if (!parse_i64(v, &iv) || iv < 1 || iv > CIRCUIT_RUN_MAX)
                err_add(&e, "successes=%s (must be 1..%" PRId64 ")", v, CIRCUIT_RUN_MAX);
            else
                p->successes = iv;
        } else if (KEY("open-for")) {
            if (!parse_duration(v, &iv) || iv <= 0)
                err_add(&e, "open-for=%s (must be a duration > 0 with a unit: ns us ms s m h)", v);
            else {
                p->open_for_ns = iv;
                have_open_for = true;
            }
        } else if (KEY("open-for-max")) {
            if (!parse_duration(v, &iv) || iv <= 0)
                err_add(&e, "open-for-max=%s (must be a duration > 0 with a unit: ns us ms s m h)",
                        v);
            else {
                p->open_for_max_ns = iv;
                have_max = true;
            }
        } else if (KEY("probe-timeout")) {
            if (!parse_duration(v, &iv) || iv <= 0)
                err_add(&e, "probe-timeout=%s (must be a duration > 0 with a unit: ns us ms s m h)",
                        v);
            else
                p->probe_timeout_ns = iv;
        } else if (KEY("timeout")) {
            if (!parse_duration(v, &iv) || iv < CIRCUIT_MS(1) || iv > MAX_TIMEOUT_NS)
                err_add(&e, "timeout=%s (must be a duration from 1ms to 24h with a unit: ns us ms "
                        "s m h)", v);
            else {
                p->timeout_ns = iv;
                have_timeout = true;
            }
        } else if (KEY("slow")) {
            if (!parse_duration(v, &iv) || iv <= 0)
                err_add(&e, "slow=%s (must be a duration > 0 with a unit: ns us ms s m h)", v);
            else
                p->slow_ns = iv;
        } else if (KEY("jitter")) {
            if (!parse_double(v, &dv) || !(dv >= 0.0 && dv < 1.0))
                err_add(&e, "jitter=%s (must be in [0, 1))", v);
            else
                p->jitter = dv;
        } else if (KEY("failure-status")) {
            if (!parse_statuses(v, p))
                err_add(&e, "failure-status=%s (must be statuses or ranges in 100..599, "
                        "e.g. 500-599 or 429,502-504; at most %d)", v, MAX_STATUS_RANGES);
        } else if (KEY("policy")) {
            have_policy = true;
            char kind[32];
            const char *colon = strchr(v, ':');
            size_t kl = colon ? (size_t)(colon - v) : strlen(v);
            snprintf(kind, sizeof kind, "%.*s", (int)(kl < sizeof kind - 1 ? kl : sizeof kind - 1), v);
            const char *rest = colon ? colon + 1 : "";
            if (strcmp(kind, "consecutive") == 0) {
                p->rate = false;
                if (!parse_i64(rest, &iv) || iv < 1 || iv > CIRCUIT_RUN_MAX)
                    err_add(&e, "policy=%s (consecutive:FAILURES, FAILURES 1..%" PRId64 ")", v,
                            CIRCUIT_RUN_MAX);
                else
                    p->failures = iv;
            } else if (strcmp(kind, "failure-rate") == 0) {
                p->rate = true;
                char ratio_s[64];
                const char *c2 = strchr(rest, ':');
                bool ok = c2 != NULL && (size_t)(c2 - rest) < sizeof ratio_s;
                if (ok) {
                    snprintf(ratio_s, sizeof ratio_s, "%.*s", (int)(c2 - rest), rest);
                    ok = parse_double(ratio_s, &dv) && dv > 0.0 && dv <= 1.0 &&
                         parse_i64(c2 + 1, &iv) && iv >= 1 && iv <= CIRCUIT_MAX_COUNT;
                }
                if (!ok)
                    err_add(&e, "policy=%s (failure-rate:RATIO:MIN_RESULTS, RATIO in (0, 1], "
                            "MIN_RESULTS 1..window)", v);
                else {
                    p->ratio = dv;
                    p->min_results = iv;
                }
            } else {
                err_add(&e, "policy=%s (must be consecutive:FAILURES or "
                        "failure-rate:RATIO:MIN_RESULTS)", v);
            }
        } else if (KEY("metrics")) {
            err_add(&e, "%s (metrics takes no value: the word metrics alone makes the rule serve "
                    "the Prometheus exposition)", a);
        } else {
            err_add(&e, "unknown parameter '%.*s' (known: name policy window probes successes "
                    "open-for open-for-max probe-timeout timeout slow jitter failure-status metrics)",
                    (int)klen, a);
        }
#undef KEY
    }
    if (p->metrics)
        return e.n == 0;
    if (!have_name)
        err_add(&e, "name= is required");
    if (!have_policy)
        err_add(&e, "policy= is required (consecutive:FAILURES or failure-rate:RATIO:MIN_RESULTS)");
    if (p->successes < 0)
        p->successes = p->probes;
    /* Cross-parameter bounds, those circuit_failure_rate_init and
     * circuit_backoff_exponential_init apply. */
    if (p->rate && p->min_results > p->window)
        err_add(&e, "policy=failure-rate:...:%" PRId64 " (MIN_RESULTS exceeds window=%d: the "
                "window never holds that many results)", p->min_results, p->window);
    if (have_max && p->open_for_max_ns < p->open_for_ns) {
        char b[32];
        fmt_duration(b, sizeof b, p->open_for_ns);
        err_add(&e, "%s (must be >= open-for=%s%s)", seen[key_index("open-for-max")], b,
                have_open_for ? "" : ", the default");
    }
    if (!have_max && p->jitter != 0.0)
        err_add(&e, "jitter=%g (only with open-for-max: it cuts the doubling periods)", p->jitter);
    if (!have_max)
        p->open_for_max_ns = 0;
    if (p->slow_ns > 0 && p->slow_ns >= p->timeout_ns) {
        char b[32];
        fmt_duration(b, sizeof b, p->timeout_ns);
        err_add(&e, "%s (must be less than timeout=%s%s: a response later than the timeout "
                "is already a failure)", seen[key_index("slow")], b,
                have_timeout ? "" : ", the default");
    }
    return e.n == 0;
}

static char *params_key(const rule_params *p)
{
    char buf[1024];
    int n = snprintf(buf, sizeof buf,
                     "name=%s metrics=%d rate=%d ratio=%.17g min=%" PRId64 " fail=%" PRId64
                     " succ=%" PRId64 " window=%d probes=%d open=%" PRId64 " max=%" PRId64
                     " pto=%" PRId64 " timeout=%" PRId64 " slow=%" PRId64 " jitter=%.17g status=",
                     p->name, p->metrics, p->rate, p->ratio, p->min_results, p->failures,
                     p->successes, p->window, p->probes, p->open_for_ns, p->open_for_max_ns,
                     p->probe_timeout_ns, p->timeout_ns, p->slow_ns, p->jitter);
    for (int i = 0; i < p->n_ranges && n > 0 && (size_t)n < sizeof buf; i++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "%d-%d,", p->ranges[i].lo, p->ranges[i].hi);
    return TSstrdup(buf);
}

/* ------------------------------------------------------------------------ */
/* Callbacks given to the breaker                                            */
/* ------------------------------------------------------------------------ */

static circuit_outcome classify_status(void *arg, void *call_ctx, int result)
{
    const rule *r = arg;
    if (result < 0)
        return circuit_classify_http(NULL, call_ctx, result);  /* transport errors */
    for (int i = 0; i < r->p.n_ranges; i++)
        if (result >= r->p.ranges[i].lo && result <= r->p.ranges[i].hi)
            return CIRCUIT_FAILURE;
    return CIRCUIT_SUCCESS;
}

static void stats_publish(const rule *r, const circuit_stats *s)
{
    const int64_t v[ST_COUNT] = {
        [ST_STATE] = s->state,
        [ST_GENERATION] = (int64_t)s->generation,
        [ST_ADMITTED] = (int64_t)s->admitted,
        [ST_REJECTED] = (int64_t)s->rejected,
        [ST_SUCCESSES] = (int64_t)s->successes,
        [ST_FAILURES] = (int64_t)s->failures,
        [ST_IGNORED] = (int64_t)s->ignored,
        [ST_LATE] = (int64_t)s->late,
        [ST_RELEASED] = (int64_t)s->released,
        [ST_TIMED_OUT] = (int64_t)s->timed_out,
        [ST_TRANSITIONS] = (int64_t)s->transitions,
        [ST_WINDOW_SUCCESSES] = s->counts.successes,
        [ST_WINDOW_FAILURES] = s->counts.failures,
        [ST_SLOW] = (int64_t)__atomic_load_n(&r->slow, __ATOMIC_RELAXED),
    };
    for (int i = 0; i < ST_COUNT; i++)
        if (r->stat[i] >= 0)
            TSStatIntSet(r->stat[i], v[i]);
}

/* AT4: every transition goes to diags.log with its cause and open period. */
static void observe_transition(void *arg, void *call_ctx, const circuit_transition *t)
{
    (void)call_ctx;
    rule *r = arg;
    const char *cause = t->cause == CIRCUIT_CAUSE_POLICY  ? "policy"
                        : t->cause == CIRCUIT_CAUSE_TIMER ? "timer"
                                                          : "operator";
    char open_part[64] = "";
    char label[NAME_MAX_LEN + 16];
    int k = __atomic_load_n(&r->rank, __ATOMIC_RELAXED);
    if (k > 1)
        snprintf(label, sizeof label, "%s#%d", r->p.name, k);
    else
        snprintf(label, sizeof label, "%s", r->p.name);
    if (t->to == CIRCUIT_OPEN)
        snprintf(open_part, sizeof open_part, ", open for %.3f s", (double)t->open_for_ns / 1e9);
    const char *fmt = "%s: breaker %s: %s -> %s (generation %" PRIu64 ", cause %s%s; counts: "
                      "%" PRId64 " successes, %" PRId64 " failures in the window, %" PRId64
                      " in a row failed, %" PRId64 " probe timeouts)";
    if (t->to == CIRCUIT_OPEN || t->to == CIRCUIT_ISOLATED)
        TSWarning(fmt, PLUGIN_NAME, label, circuit_state_name(t->from),
                  circuit_state_name(t->to), t->generation, cause, open_part,
                  t->counts.successes, t->counts.failures, t->counts.consecutive_failures,
                  t->counts.timed_out);
    else
        TSNote(fmt, PLUGIN_NAME, label, circuit_state_name(t->from),
               circuit_state_name(t->to), t->generation, cause, open_part, t->counts.successes,
               t->counts.failures, t->counts.consecutive_failures, t->counts.timed_out);
    /* The metrics see the new state at once; the task refreshes the rest. */
    if (r->stat[ST_STATE] >= 0 && r->stat[ST_GENERATION] >= 0 &&
        !__atomic_load_n(&r->shares_name, __ATOMIC_RELAXED)) {
        TSStatIntSet(r->stat[ST_STATE], t->to);
        TSStatIntSet(r->stat[ST_GENERATION], (int64_t)t->generation);
    }
}

/* ------------------------------------------------------------------------ */
/* Building and freeing rules                                                */
/* ------------------------------------------------------------------------ */

static void stats_create(rule *r)
{
    for (int i = 0; i < ST_COUNT; i++) {
        char name[160];
        snprintf(name, sizeof name, "plugin.%s.%s.%s", PLUGIN_NAME, r->p.name, stat_suffix[i]);
        int id;
        if (TSStatFindName(name, &id) == TS_SUCCESS)
            r->stat[i] = id;
        else {
            r->stat[i] = TSStatCreate(name, TS_RECORDDATATYPE_INT, TS_STAT_NON_PERSISTENT,
                                      TS_STAT_SYNC_SUM);
            /* 9.2 hands out an id even when its records table is full (and
             * setting that id crashes): only a name it can find is real. */
            if (r->stat[i] >= 0 && TSStatFindName(name, &id) != TS_SUCCESS)
                r->stat[i] = -1;
            if (r->stat[i] < 0) {
                TSError("%s: breaker %s: no room for the metric %s: this breaker has no "
                        "Traffic Server metrics (the Prometheus rule still shows it); raise "
                        "traffic_manager's --maxRecords", PLUGIN_NAME, r->p.name, name);
                for (int j = 0; j < ST_COUNT; j++)
                    r->stat[j] = -1;
                return;
            }
        }
    }
}

static uint64_t name_seed(const char *name)
{
    uint64_t h = UINT64_C(1469598103934665603);  /* FNV-1a, then the pid */
    for (const char *c = name; *c; c++)
        h = (h ^ (unsigned char)*c) * UINT64_C(1099511628211);
    return h ^ (uint64_t)getpid();
}

/* Builds a rule's breaker. Returns NULL with errbuf filled on failure. */
static rule *rule_build(const rule_params *p, char *errbuf, size_t errlen)
{
    rule *r = TSmalloc(sizeof *r);
    memset(r, 0, sizeof *r);
    r->p = *p;
    for (int i = 0; i < ST_COUNT; i++)
        r->stat[i] = -1;
    if (p->metrics)
        return r;
    /* whole milliseconds: the timeout rounded up, a probe's deadline down */
    r->deadline_ms = (int)((p->timeout_ns + 999999) / 1000000);
    int64_t probe_ns = p->probe_timeout_ns - PROBE_DEADLINE_MARGIN_NS;
    if (probe_ns < p->probe_timeout_ns / 2)
        probe_ns = p->probe_timeout_ns / 2;
    if (probe_ns > p->timeout_ns)
        probe_ns = p->timeout_ns;
    r->probe_deadline_ms = probe_ns < 1000000 ? 1 : (int)(probe_ns / 1000000);
    circuit_spec spec = {
        .config = {.window = p->window, .probes = p->probes, .open_for_ns = p->open_for_ns,
                   .probe_timeout_ns = p->probe_timeout_ns},
        .classify = p->n_ranges ? classify_status : circuit_classify_http,
        .classify_arg = p->n_ranges ? r : NULL,
        .observe = observe_transition,
        .observe_arg = r,
    };
    char lib[512];
    int rc;
    if (p->rate) {
        rc = circuit_failure_rate_init(&r->rate, &spec.config, p->min_results, p->ratio,
                                       p->successes, lib, sizeof lib);
        if (rc == 0)
            spec.policy = circuit_failure_rate_policy(&r->rate);
    } else {
        rc = circuit_consecutive_init(&r->cons, p->failures, p->successes, lib, sizeof lib);
        if (rc == 0)
            spec.policy = circuit_consecutive_policy(&r->cons);
    }
    if (rc == 0 && p->open_for_max_ns > 0) {
        rc = circuit_backoff_exponential_init(&r->backoff, p->open_for_ns, p->open_for_max_ns,
                                              p->jitter, name_seed(p->name), lib, sizeof lib);
        if (rc == 0)
            circuit_backoff_exponential_use(&spec, &r->backoff);
    }
    if (rc == 0)
        rc = circuit_new(&r->b, &spec, lib, sizeof lib);
    if (rc != 0) {
        snprintf(errbuf, errlen, PLUGIN_NAME ": rule '%s' refused: %s", p->name,
                 rc == EINVAL ? lib : strerror(rc));
        TSfree(r);
        return NULL;
    }
    stats_create(r);
    circuit_stats s;
    circuit_get_stats(r->b, &s);
    stats_publish(r, &s);
    return r;
}

static void rule_free(rule *r)
{
    circuit_free(r->b);
    TSfree(r->key);
    TSfree(r);
}

/* A rule is live when it belongs to the live remap.config (the latest load
 * that succeeded); a rule of a failed or of an older load lives on only
 * while transactions or the old table use it. Two live rules may share a
 * name with different parameters (two breakers, warned at load): their rank
 * is their order in remap.config, 1 for the first. Caller holds
 * registry_mu. */
static bool is_live(const rule *r)
{
    return r->b != NULL && r->load_live == live_load;
}

static int name_rank(const rule *r)
{
    int k = 1;
    for (const rule *o = registry; o; o = o->next)
        if (o != r && is_live(o) && o->seq < r->seq && strcmp(o->p.name, r->p.name) == 0)
            k++;
    return k;
}

/* A name's current rule: its first live rule. Traffic Server's metrics and
 * the operator's log lines speak of it; the Prometheus exposition shows
 * every live rule, the k-th of a shared name as NAME#k. */
static bool is_current(const rule *r)
{
    return is_live(r) && name_rank(r) == 1;
}

/* The rank each live rule named `name` (every live rule: NULL) logs its
 * transitions with, the same as its label in the exposition. Caller holds
 * registry_mu. */
static void update_ranks(const char *name)
{
    for (rule *r = registry; r; r = r->next)
        if (is_live(r) && (name == NULL || strcmp(r->p.name, name) == 0))
            __atomic_store_n(&r->rank, name_rank(r), __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------------ */
/* Global part: operator messages (AT5), the metrics task (AT4)              */
/* ------------------------------------------------------------------------ */

static void read_retry_configs(void);

static int metrics_task(TSCont contp, TSEvent event, void *edata)
{
    (void)contp;
    (void)event;
    (void)edata;
    read_retry_configs();
    pthread_mutex_lock(&registry_mu);
    for (rule *r = registry; r; r = r->next) {
        if (is_current(r)) {
            circuit_stats s;
            circuit_get_stats(r->b, &s);
            stats_publish(r, &s);
        }
    }
    pthread_mutex_unlock(&registry_mu);
    return 0;
}

/* `traffic_ctl plugin msg circuit "isolate NAME"` (or "reset NAME"); also
 * the tags circuit.isolate and circuit.reset with the name as the data. */
static int operator_msg(TSCont contp, TSEvent event, void *edata)
{
    (void)contp;
    if (event != TS_EVENT_LIFECYCLE_MSG)
        return 0;
    const TSPluginMsg *m = edata;
    char data[256];
    size_t n = m->data_size < sizeof data - 1 ? m->data_size : sizeof data - 1;
    memcpy(data, m->data, n);
    data[n] = '\0';
    while (n > 0 && (data[n - 1] == '\0' || isspace((unsigned char)data[n - 1])))
        data[--n] = '\0';
    char verb[32] = "", name[NAME_MAX_LEN + 2] = "";
    if (strcmp(m->tag, PLUGIN_NAME) == 0) {
        if (sscanf(data, "%31s %65s", verb, name) != 2) {
            TSError("%s: operator message '%s' not understood (\"isolate NAME\" or \"reset NAME\")",
                    PLUGIN_NAME, data);
            return 0;
        }
    } else if (strcmp(m->tag, PLUGIN_NAME ".isolate") == 0 || strcmp(m->tag, PLUGIN_NAME ".reset") == 0) {
        snprintf(verb, sizeof verb, "%s", m->tag + sizeof PLUGIN_NAME);
        if (sscanf(data, "%65s", name) != 1)
            name[0] = '\0';
    } else {
        return 0;
    }
    bool isolate = strcmp(verb, "isolate") == 0;
    if (!isolate && strcmp(verb, "reset") != 0) {
        TSError("%s: operator message: unknown command '%s' (isolate or reset)", PLUGIN_NAME, verb);
        return 0;
    }
    int found = 0;
    pthread_mutex_lock(&registry_mu);
    for (rule *r = registry; r; r = r->next) {
        if (r->b == NULL || strcmp(r->p.name, name) != 0)
            continue;
        found++;
        int rc = isolate ? circuit_isolate(r->b, NULL) : circuit_reset(r->b, NULL);
        if (is_current(r))
            TSNote("%s: breaker %s: operator %s: %s", PLUGIN_NAME, name, verb,
                   rc == 0 ? "done" : rc == EALREADY ? "already so" : strerror(rc));
    }
    pthread_mutex_unlock(&registry_mu);
    if (!found)
        TSError("%s: operator %s: no breaker named '%s'", PLUGIN_NAME, verb, name);
    return 0;
}

void TSPluginInit(int argc, const char *argv[])
{
    (void)argc;
    (void)argv;
    TSPluginRegistrationInfo info = {PLUGIN_NAME, "libcircuit", "https://github.com/"};
    if (TSPluginRegister(&info) != TS_SUCCESS) {
        TSError("%s: plugin registration failed", PLUGIN_NAME);
        return;
    }
    /* One image for plugin.config and every remap.config load, so the
     * registry survives reloads (AT6). */
    if (TSPluginDSOReloadEnable(0) != TS_SUCCESS) {
        TSError("%s: TSPluginDSOReloadEnable(0) failed: breakers would not survive a reload",
                PLUGIN_NAME);
        return;
    }
    if (TSUserArgIndexReserve(TS_USER_ARGS_TXN, PLUGIN_NAME, "circuit breaker ticket", &txn_arg) !=
        TS_SUCCESS) {
        TSError("%s: no transaction argument slot left", PLUGIN_NAME);
        return;
    }
    TSLifecycleHookAdd(TS_LIFECYCLE_MSG_HOOK, TSContCreate(operator_msg, NULL));
    read_retry_configs();
    TSCont task = TSContCreate(metrics_task, TSMutexCreate());
    TSContScheduleEveryOnPool(task, 1000, TS_THREAD_POOL_TASK);
    global_init_done = true;
}

/* ------------------------------------------------------------------------ */
/* Per transaction (AT2, AT3)                                                */
/* ------------------------------------------------------------------------ */

/* The result code for circuit_done when the origin gave no response, from
 * the server state; 0 when there is no origin outcome (then: release). */
static int no_response_result(TSHttpTxn txn)
{
    switch (TSHttpTxnServerStateGet(txn)) {
    case TS_SRVSTATE_CONNECTION_ERROR:
    case TS_SRVSTATE_OPEN_RAW_ERROR:
    case TS_SRVSTATE_OUTBOUND_CONGESTION:
        return -ECONNREFUSED;
    case TS_SRVSTATE_ACTIVE_TIMEOUT:
    case TS_SRVSTATE_INACTIVE_TIMEOUT:
        return -ETIMEDOUT;
    case TS_SRVSTATE_CONNECTION_CLOSED:
    case TS_SRVSTATE_BAD_INCOMING_RESPONSE:
    case TS_SRVSTATE_PARSE_ERROR:
        return -ECONNRESET;
    default:
        return 0;
    }
}

/* The result a slow response settles with (AT7): a transport-like error,
 * which both classifiers count as a failure. */
#define RESULT_SLOW (-ETIME)

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * The origin deadlines of an admitted transaction (AT3): connect and
 * no-activity timeouts of `timeout` (milliseconds, Traffic Server's unit for
 * these per-transaction settings), at most `probe-timeout` for a probe so
 * that no probe outlives its slot, and no connect retry: a retried hang
 * would multiply the client's wait and the origin's connections, and the
 * breaker counts one result per transaction. The retry settings are written
 * only when Traffic Server's own are not 0 (a write copies the transaction's
 * configuration); retry_configs holds those, read by the metrics task once a
 * second (records.config and traffic_ctl config set change them), so that
 * a transaction reads one word instead of calling Traffic Server twice.
 */
static const struct {
    TSOverridableConfigKey key;
    const char *name;
} retry_keys[] = {
    {TS_CONFIG_HTTP_CONNECT_ATTEMPTS_MAX_RETRIES, "proxy.config.http.connect_attempts_max_retries"},
    {TS_CONFIG_HTTP_CONNECT_ATTEMPTS_MAX_RETRIES_DEAD_SERVER,
     "proxy.config.http.connect_attempts_max_retries_dead_server"},
};
#define N_RETRY_KEYS (sizeof retry_keys / sizeof retry_keys[0])
static int retry_configs;       /* bit i: retry_keys[i] is not 0 (relaxed atomic) */

static void read_retry_configs(void)
{
    int bits = 0;
    for (size_t i = 0; i < N_RETRY_KEYS; i++) {
        TSMgmtInt v = 1;   /* unknown: assume a retry, and write 0 */
        if (TSMgmtIntGet(retry_keys[i].name, &v) != TS_SUCCESS || v != 0)
            bits |= 1 << i;
    }
    __atomic_store_n(&retry_configs, bits, __ATOMIC_RELAXED);
}

static void set_origin_deadlines(TSHttpTxn txn, const rule *r, bool probe)
{
    int ms = probe ? r->probe_deadline_ms : r->deadline_ms;
    TSHttpTxnConnectTimeoutSet(txn, ms);
    TSHttpTxnNoActivityTimeoutSet(txn, ms);
    int bits = __atomic_load_n(&retry_configs, __ATOMIC_RELAXED);
    for (size_t i = 0; bits != 0 && i < N_RETRY_KEYS; i++)
        if (bits & (1 << i))
            TSHttpTxnConfigIntSet(txn, retry_keys[i].key, 0);
}

static void settle(txn_state *st, int result)
{
    if (!st->admitted || st->settled)
        return;
    st->settled = true;
    if (result == 0)
        circuit_release(&st->ticket);
    else
        circuit_done(&st->ticket, result);
}

static void add_retry_after(TSHttpTxn txn, int64_t secs)
{
    TSMBuffer buf;
    TSMLoc hdr, field;
    if (TSHttpTxnClientRespGet(txn, &buf, &hdr) != TS_SUCCESS)
        return;
    char v[32];
    int n = snprintf(v, sizeof v, "%" PRId64, secs);
    if (TSMimeHdrFieldCreateNamed(buf, hdr, "Retry-After", 11, &field) == TS_SUCCESS) {
        TSMimeHdrFieldValueStringInsert(buf, hdr, field, -1, v, n);
        TSMimeHdrFieldAppend(buf, hdr, field);
        TSHandleMLocRelease(buf, hdr, field);
    }
    TSHandleMLocRelease(buf, TS_NULL_MLOC, hdr);
}

static int txn_hook(TSCont contp, TSEvent event, void *edata)
{
    (void)contp;
    TSHttpTxn txn = edata;
    txn_state *st = TSUserArgGet(txn, txn_arg);
    if (st != NULL) {
        switch (event) {
        case TS_EVENT_HTTP_READ_RESPONSE_HDR: {
            TSMBuffer buf;
            TSMLoc hdr;
            if (TSHttpTxnServerRespGet(txn, &buf, &hdr) == TS_SUCCESS) {
                int status = (int)TSHttpHdrStatusGet(buf, hdr);
                TSHandleMLocRelease(buf, TS_NULL_MLOC, hdr);
                int result = status > 0 ? status : -EPROTO;
                /* AT7: later than slow=, a failure whatever the status */
                if (st->r->p.slow_ns > 0 && st->admitted && !st->settled &&
                    now_ns() - st->admitted_at > st->r->p.slow_ns) {
                    result = RESULT_SLOW;
                    __atomic_fetch_add(&st->r->slow, 1, __ATOMIC_RELAXED);
                }
                settle(st, result);
            }
            break;
        }
        case TS_EVENT_HTTP_SEND_RESPONSE_HDR:
            if (st->retry_after_s > 0)
                add_retry_after(txn, st->retry_after_s);
            break;
        case TS_EVENT_HTTP_TXN_CLOSE:
            /* the server state only when it decides something; the argument
             * is left dangling: no hook of this transaction runs after this */
            if (st->admitted && !st->settled)
                settle(st, no_response_result(txn));
            TSfree(st);
            break;
        default:
            break;
        }
    }
    TSHttpTxnReenable(txn, TS_EVENT_HTTP_CONTINUE);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Remap entry points                                                        */
/* ------------------------------------------------------------------------ */

TSReturnCode TSRemapInit(TSRemapInterface *api, char *errbuf, int errbuf_size)
{
    if (api == NULL || api->tsremap_version < TSREMAP_VERSION) {
        snprintf(errbuf, (size_t)errbuf_size, "%s: needs remap API version %d.%d", PLUGIN_NAME,
                 TSREMAP_VMAJOR, TSREMAP_VMINOR);
        return TS_ERROR;
    }
    if (!global_init_done) {
        snprintf(errbuf, (size_t)errbuf_size,
                 "%s: add circuit.so to plugin.config too (one image must serve every "
                 "remap.config load, so that a reload keeps the breakers)", PLUGIN_NAME);
        return TS_ERROR;
    }
    if (txn_cont == NULL)
        txn_cont = TSContCreate(txn_hook, NULL);
    return TS_SUCCESS;
}

void TSRemapPreConfigReload(void)
{
    pthread_mutex_lock(&registry_mu);
    loading_load++;
    pthread_mutex_unlock(&registry_mu);
}

void TSRemapPostConfigReload(TSRemapReloadStatus status)
{
    pthread_mutex_lock(&registry_mu);
    if (status != TSREMAP_CONFIG_RELOAD_FAILURE) {
        live_load = loading_load;
        for (rule *r = registry; r; r = r->next)
            if (r->load_pending == loading_load)
                r->load_live = loading_load;
        update_ranks(NULL);
    }
    pthread_mutex_unlock(&registry_mu);
    TSNote("%s: remap.config load %" PRIu64 " %s", PLUGIN_NAME, loading_load,
           status == TSREMAP_CONFIG_RELOAD_FAILURE ? "failed: the previous rules stay in use"
                                                    : "in use");
}

TSReturnCode TSRemapNewInstance(int argc, char *argv[], void **ih, char *errbuf, int errbuf_size)
{
    rule_params p;
    size_t elen = errbuf_size > 0 ? (size_t)errbuf_size : 0;
    /* argv[0], argv[1]: the rule's from and to URLs */
    if (!parse_params(argc - 2, argv + 2, &p, errbuf, elen)) {
        TSError("%s", errbuf);
        return TS_ERROR;
    }
    char *key = params_key(&p);
    pthread_mutex_lock(&registry_mu);
    rule *r;
    for (r = registry; r; r = r->next)
        if (strcmp(r->key, key) == 0)
            break;
    if (r != NULL) {
        r->refs++;
        r->seq = ++registry_seq;
        TSfree(key);
        if (r->b)
            TSNote("%s: breaker %s kept (parameters unchanged; state %s)", PLUGIN_NAME, p.name,
                   circuit_state_name(circuit_get_state(r->b)));
    } else {
        r = rule_build(&p, errbuf, elen);
        if (r == NULL) {
            pthread_mutex_unlock(&registry_mu);
            TSError("%s", errbuf);
            TSfree(key);
            return TS_ERROR;
        }
        r->key = key;
        r->refs = 1;
        r->seq = ++registry_seq;
        r->next = registry;
        registry = r;
        r->load_live = 0;
        if (r->b)
            TSNote("%s: breaker %s built (window %d, probes %d)", PLUGIN_NAME, p.name, p.window,
                   p.probes);
    }
    r->load_pending = loading_load;
    if (loading_load == 1)      /* the first load: Traffic Server stops if it fails */
        r->load_live = 1;
    /* AT9: the same name with other parameters earlier in this remap.config */
    int earlier = 0;
    for (rule *o = registry; o; o = o->next)
        if (o != r && o->b && r->b && o->load_pending == loading_load &&
            strcmp(o->p.name, r->p.name) == 0)
            earlier++;
    __atomic_store_n(&r->shares_name, earlier > 0, __ATOMIC_RELAXED);
    /* the log's NAME#k: at the first load the rules are live as they come;
     * a reload's new rule gets its rank in this load now, and every rule
     * its live rank when the load is in use (TSRemapPostConfigReload) */
    if (loading_load == 1)
        update_ranks(r->p.name);
    else if (r->load_live != live_load)
        __atomic_store_n(&r->rank, earlier + 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&registry_mu);
    if (r->b && p.probe_timeout_ns < PROBE_TIMEOUT_KEPT_NS) {
        char pto[32];
        fmt_duration(pto, sizeof pto, p.probe_timeout_ns);
        TSWarning("%s: breaker %s: probe-timeout=%s is shorter than Traffic Server can time an "
                  "origin out (it checks once a second, a new connection first after 1 to 2 s): "
                  "a hung probe may hold its slot until 2 s; use at least 2500ms",
                  PLUGIN_NAME, p.name, pto);
    }
    if (earlier > 0)
        TSWarning("%s: breaker %s: %d earlier rule%s of this remap.config use%s the name %s with "
                  "other parameters: this rule gets a breaker of its own, shown in the Prometheus "
                  "exposition as breaker=\"%s#%d\"; Traffic Server's metrics show the first; "
                  "operator commands act on all of them. Give each rule its own name.",
                  PLUGIN_NAME, p.name, earlier, earlier > 1 ? "s" : "", earlier > 1 ? "" : "s",
                  p.name, p.name, earlier + 1);
    *ih = r;
    return TS_SUCCESS;
}

void TSRemapDeleteInstance(void *ih)
{
    rule *r = ih;
    pthread_mutex_lock(&registry_mu);
    if (--r->refs == 0) {
        for (rule **pp = &registry; *pp; pp = &(*pp)->next) {
            if (*pp == r) {
                *pp = r->next;
                break;
            }
        }
    } else {
        r = NULL;
    }
    pthread_mutex_unlock(&registry_mu);
    if (r != NULL) {
        if (r->b)
            TSNote("%s: breaker %s freed (no rule uses it any more)", PLUGIN_NAME, r->p.name);
        rule_free(r);
    }
}

/* The Prometheus rule: every current breaker in one exposition, built into
 * a malloc'd buffer (NULL on failure). */
static char *metrics_text(int *len_out)
{
    pthread_mutex_lock(&registry_mu);
    size_t n = 0;
    for (rule *r = registry; r; r = r->next)
        n += is_live(r);
    circuit_stats *st = TSmalloc((n ? n : 1) * sizeof *st);
    const char **names = TSmalloc((n ? n : 1) * sizeof *names);
    char (*labels)[NAME_MAX_LEN + 16] = TSmalloc((n ? n : 1) * sizeof *labels);
    uint64_t *slow = TSmalloc((n ? n : 1) * sizeof *slow);
    size_t i = 0;
    for (rule *r = registry; r; r = r->next) {
        if (is_live(r)) {
            circuit_get_stats(r->b, &st[i]);
            int k = name_rank(r);
            if (k == 1)
                snprintf(labels[i], sizeof labels[i], "%s", r->p.name);
            else
                snprintf(labels[i], sizeof labels[i], "%s#%d", r->p.name, k);
            names[i] = labels[i];
            slow[i++] = __atomic_load_n(&r->slow, __ATOMIC_RELAXED);
        }
    }
    pthread_mutex_unlock(&registry_mu);
    /* the library's series, then the plugin's own (AT7) */
    size_t cap = 4096 + n * 2048;
    char *body = TSmalloc(cap);
    int len = circuit_stats_format_prometheus_many(st, names, n, body, cap);
    if (len >= 0 && (size_t)len >= cap) {
        cap = (size_t)len + 1;
        body = TSrealloc(body, cap);
        len = circuit_stats_format_prometheus_many(st, names, n, body, cap);
    }
    int err = errno;
    if (len >= 0) {
        size_t need = (size_t)len + 256 + n * (NAME_MAX_LEN + 80);
        if (need > cap) {
            cap = need;
            body = TSrealloc(body, cap);
        }
        size_t at = (size_t)len;
        at += (size_t)snprintf(body + at, cap - at,
                               "# HELP circuit_slow_calls_total Responses whose header came later "
                               "than slow=, counted as failures whatever their status.\n"
                               "# TYPE circuit_slow_calls_total counter\n");
        for (i = 0; i < n; i++)
            at += (size_t)snprintf(body + at, cap - at,
                                   "circuit_slow_calls_total{breaker=\"%s\"} %" PRIu64 "\n",
                                   names[i], slow[i]);
        len = (int)at;
    }
    TSfree(st);
    TSfree(names);
    TSfree(labels);
    TSfree(slow);
    if (len < 0) {
        TSError("%s: the Prometheus text could not be built: %s", PLUGIN_NAME, strerror(err));
        TSfree(body);
        return NULL;
    }
    *len_out = len;
    return body;
}

/* The metrics rule answers as its own origin (a server intercept): Traffic
 * Server's error-body path, used for the 503s, cuts bodies of more than a
 * few KiB, and the exposition grows by about 1.1 KiB per breaker. */
typedef struct metrics_conn {
    TSVConn vc;
    TSIOBuffer in, out;
    TSIOBufferReader in_reader, out_reader;
} metrics_conn;

static void metrics_conn_close(TSCont contp, metrics_conn *mc)
{
    if (mc->vc)
        TSVConnClose(mc->vc);
    if (mc->in)
        TSIOBufferDestroy(mc->in);
    if (mc->out)
        TSIOBufferDestroy(mc->out);
    TSfree(mc);
    TSContDestroy(contp);
}

static int metrics_intercept(TSCont contp, TSEvent event, void *edata)
{
    metrics_conn *mc = TSContDataGet(contp);
    switch (event) {
    case TS_EVENT_NET_ACCEPT: {
        mc->vc = edata;
        int len = 0;
        char *body = metrics_text(&len);
        char head[256];
        int hl = body ? snprintf(head, sizeof head,
                                 "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; "
                                 "charset=utf-8\r\nCache-Control: no-store\r\n"
                                 "Content-Length: %d\r\nConnection: close\r\n\r\n", len)
                      : snprintf(head, sizeof head,
                                 "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n"
                                 "Connection: close\r\n\r\n");
        mc->in = TSIOBufferCreate();
        mc->in_reader = TSIOBufferReaderAlloc(mc->in);
        mc->out = TSIOBufferCreate();
        mc->out_reader = TSIOBufferReaderAlloc(mc->out);
        TSIOBufferWrite(mc->out, head, hl);
        if (body) {
            TSIOBufferWrite(mc->out, body, len);
            TSfree(body);
        }
        /* the request is read and dropped; the answer does not depend on it */
        TSVConnRead(mc->vc, contp, mc->in, INT64_MAX);
        TSVConnWrite(mc->vc, contp, mc->out_reader, TSIOBufferReaderAvail(mc->out_reader));
        return 0;
    }
    case TS_EVENT_VCONN_READ_READY:
        TSIOBufferReaderConsume(mc->in_reader, TSIOBufferReaderAvail(mc->in_reader));
        return 0;
    case TS_EVENT_VCONN_WRITE_READY:
        return 0;
    case TS_EVENT_VCONN_READ_COMPLETE:
    case TS_EVENT_VCONN_EOS:
        if (mc->vc)
            TSVConnShutdown(mc->vc, 1, 0);
        return 0;
    case TS_EVENT_VCONN_WRITE_COMPLETE:
    case TS_EVENT_ERROR:
    case TS_EVENT_NET_ACCEPT_FAILED:
    default:
        metrics_conn_close(contp, mc);
        return 0;
    }
}

static void serve_metrics(TSHttpTxn txn)
{
    TSCont c = TSContCreate(metrics_intercept, TSMutexCreate());
    metrics_conn *mc = TSmalloc(sizeof *mc);
    memset(mc, 0, sizeof *mc);
    TSContDataSet(c, mc);
    TSHttpTxnServerIntercept(c, txn);
}

TSRemapStatus TSRemapDoRemap(void *ih, TSHttpTxn txn, TSRemapRequestInfo *rri)
{
    (void)rri;
    rule *r = ih;
    if (r->b == NULL) {
        serve_metrics(txn);
        return TSREMAP_NO_REMAP;
    }
    /* A transaction remapped again (a followed redirect) keeps its struct and
     * hooks: the earlier ticket is settled by its 3xx, or is released. */
    txn_state *st = TSUserArgGet(txn, txn_arg);
    if (st != NULL) {
        settle(st, 0);
    } else {
        st = TSmalloc(sizeof *st);
        st->hooks = 0;
        TSUserArgSet(txn, txn_arg, st);
        TSHttpTxnHookAdd(txn, TS_HTTP_TXN_CLOSE_HOOK, txn_cont);
    }
    st->r = r;
    st->settled = false;
    st->retry_after_s = 0;
    circuit_rejection rej;
    /* a call admitted while the breaker reads open (its period over) or
     * half-open is a probe (S5: a pure read) */
    circuit_state before = circuit_get_state(r->b);
    st->admitted = circuit_allow(r->b, st, &st->ticket, &rej);
    if (!st->admitted) {
        /* AT2: answered here; Traffic Server contacts no origin. */
        char text[128];
        int n = circuit_rejection_format(&rej, text, sizeof text - 1);
        if (n < 0 || (size_t)n >= sizeof text - 1)
            n = snprintf(text, sizeof text - 1, "circuit %s", circuit_state_name(rej.state));
        text[n++] = '\n';
        text[n] = '\0';
        st->retry_after_s = circuit_retry_after_s(&rej);
        TSHttpTxnStatusSet(txn, TS_HTTP_STATUS_SERVICE_UNAVAILABLE);
        TSHttpTxnErrorBodySet(txn, TSstrdup(text), (size_t)n, TSstrdup("text/plain"));
        if (st->retry_after_s > 0 && !(st->hooks & HOOK_SEND_RESP)) {
            st->hooks |= HOOK_SEND_RESP;
            TSHttpTxnHookAdd(txn, TS_HTTP_SEND_RESPONSE_HDR_HOOK, txn_cont);
        }
    } else {
        set_origin_deadlines(txn, r, before != CIRCUIT_CLOSED);
        if (r->p.slow_ns > 0)
            st->admitted_at = now_ns();
        if (!(st->hooks & HOOK_READ_RESP)) {
            st->hooks |= HOOK_READ_RESP;
            TSHttpTxnHookAdd(txn, TS_HTTP_READ_RESPONSE_HDR_HOOK, txn_cont);
        }
    }
    return TSREMAP_NO_REMAP;
}
