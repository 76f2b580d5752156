/*
 * ngx_http_circuit_module: one libcircuit breaker per upstream server,
 * shared by every nginx worker process (NX1-NX6, docs/CONTRACT.md; the
 * operator's guide is docs/NGINX.md).
 *
 * SPDX-License-Identifier: MIT
 *
 * An adapter beside the core, like the Traffic Server plugin: it calls only
 * the public API (<circuit.h>, <circuit_presets.h>, <circuit_prometheus.h>,
 * <circuit_shared.h>) and nginx's module API (1.22, --with-compat).
 *
 * Where the breakers live (NX1, NX5)
 *   One shared zone, "circuit_breakers" (circuit_breaker_zone sets its size),
 *   holds a list of entries {key, breaker memory}. The key is the upstream's
 *   name, the server's address and every parameter, canonical. The zone's
 *   init runs in the master at every (re)load: an entry whose key the new
 *   configuration still has is kept as it is (state, counts, totals); a new
 *   key gets circuit_shared_init_in_arena in fresh zone memory, its per-CPU
 *   part a unit of one arena per load (16 bytes per CPU, L5). An entry the new
 *   configuration no longer uses is retired, never freed: workers of the
 *   previous configuration may still use it while they finish, and a
 *   configuration that uses its key again gets it back. Each worker attaches
 *   its own handle to every breaker in init_process (this process's
 *   callbacks) and detaches in exit_process. After that nothing on a
 *   worker's path locks or allocates in the zone (SH2).
 *
 * Per request (NX3, NX4): the upstream's peer init/get/free are wrapped as
 *   ngx_http_upstream_keepalive_module wraps them. get asks the balancer for
 *   a server, then its breaker: a rejection gives the server back to the
 *   balancer as a try that did not fail (free with state 0) and asks again,
 *   at most once per breaker per request. When every server rejected: no
 *   connection, get returns NGX_BUSY with no tries left, and the header and
 *   body filters turn nginx's 502 for "no live upstreams" into 503 with
 *   Retry-After (the shortest wait among the servers, whole seconds rounded
 *   up; none when every server is isolated). free settles the try's ticket
 *   exactly once: the origin's status when there is one (the failure
 *   statuses are a parameter), a failure when the try failed with no
 *   status (connect error, timeout: -ETIMEDOUT when an event timed out),
 *   and circuit_release when there is no outcome (the client went away
 *   first). A pool cleanup releases a ticket no free settled.
 *
 * Transitions are logged by the process that made them (NX6): to open or
 * isolated at warn, the others at notice.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "circuit.h"
#include "circuit_presets.h"
#include "circuit_prometheus.h"
#include "circuit_shared.h"

#define CIRCUIT_ZONE_NAME     "circuit_breakers"
#define CIRCUIT_ZONE_DEFAULT  (1024 * 1024)
#define CIRCUIT_MAX_RANGES    16
#define CIRCUIT_ZONE_MAGIC    UINT64_C(0x6369726375697432)   /* "circuit2": with arenas */

typedef struct {
    int lo, hi;
} ngx_http_circuit_range_t;

/* The parameters of one upstream's breakers (NX2), parsed. */
typedef struct {
    bool        rate;               /* failure-rate (true) or consecutive */
    double      ratio;
    int64_t     min_results;
    int64_t     failures;
    int64_t     successes;
    int         window, probes;
    int64_t     open_for_ns, open_for_max_ns, probe_timeout_ns;
    double      jitter;
    int         n_ranges;           /* 0: circuit_classify_http */
    ngx_http_circuit_range_t ranges[CIRCUIT_MAX_RANGES];
} ngx_http_circuit_params_t;

typedef struct ngx_http_circuit_srv_conf_s  ngx_http_circuit_srv_conf_t;

/* One breaker: one address of one upstream server. Process memory (the
 * configuration's pool); mem points into the zone. */
typedef struct {
    ngx_str_t                      key;      /* upstream, address, parameters */
    ngx_str_t                      label;    /* "upstream/address", NUL-terminated */
    struct sockaddr               *sockaddr;
    socklen_t                      socklen;
    ngx_http_circuit_srv_conf_t   *ucf;
    void                          *mem;      /* in the zone (init_zone) */
    size_t                         size;
    circuit_breaker               *b;        /* this process's handle */
} ngx_http_circuit_server_t;

struct ngx_http_circuit_srv_conf_s {
    ngx_flag_t                          enabled;
    ngx_flag_t                          initialized; /* its init_upstream ran */
    ngx_str_t                           name;       /* the upstream's */
    ngx_str_t                           file;       /* where circuit_breaker is */
    ngx_uint_t                          line;
    ngx_str_t                           params_key;
    ngx_http_circuit_params_t           p;
    circuit_consecutive                 cons;
    circuit_failure_rate                rate;
    circuit_backoff_exponential         backoff;
    ngx_http_upstream_init_pt           original_init_upstream;
    ngx_http_upstream_init_peer_pt      original_init_peer;
    ngx_array_t                         servers;    /* ngx_http_circuit_server_t * */
    ngx_uint_t                          dups;       /* addresses given again in the
                                                     * block (one breaker each) */
};

typedef struct {
    ngx_array_t         servers;        /* ngx_http_circuit_server_t *, all upstreams */
    size_t              zone_size;      /* circuit_breaker_zone, or NGX_CONF_UNSET_SIZE */
    ngx_str_t           zone_file;      /* where circuit_breaker_zone is */
    ngx_uint_t          zone_line;
    ngx_shm_zone_t     *zone;
    ngx_array_t         metrics;        /* ngx_http_core_loc_conf_t * of the locations
                                         * with circuit_breaker_metrics */
} ngx_http_circuit_main_conf_t;

/* The zone's list, in zone memory (the zone is mapped at one address in
 * every process of one master, so it holds plain pointers). */
typedef struct ngx_http_circuit_entry_s  ngx_http_circuit_entry_t;

struct ngx_http_circuit_entry_s {
    ngx_http_circuit_entry_t   *next;
    u_char                     *key;
    size_t                      key_len;
    void                       *mem;
    size_t                      size;
    ngx_uint_t                  load;       /* the latest load that uses it */
};

typedef struct {
    uint64_t                    magic;
    ngx_uint_t                  load;       /* loads of the configuration */
    ngx_http_circuit_entry_t   *entries;
    void                       *arena;      /* the newest arena: its spare units go
                                             * to the next breakers built */
} ngx_http_circuit_zone_t;

/* Per request and try. */
typedef struct {
    ngx_http_circuit_srv_conf_t    *ucf;
    ngx_http_request_t             *r;
    void                           *data;       /* the balancer's */
    ngx_event_get_peer_pt           original_get_peer;
    ngx_event_free_peer_pt          original_free_peer;
#if (NGX_HTTP_SSL)
    ngx_event_set_peer_session_pt   original_set_session;
    ngx_event_save_peer_session_pt  original_save_session;
#endif
    circuit_ticket                  ticket;
    ngx_flag_t                      live;       /* the ticket awaits settling */
    ngx_http_circuit_server_t      *current;
    ngx_event_t                     deadline;   /* a probe's: probe-timeout in all */
    ngx_http_upstream_conf_t       *conf;       /* the location's, while the probe's
                                                 * try runs with a cut copy */
} ngx_http_circuit_peer_data_t;

/* Per request: its try's ticket (the header filter settles an upgrade),
 * and what the filters need for the 503 when every server rejected. */
typedef struct {
    ngx_http_circuit_peer_data_t  *cp;
    ngx_flag_t      all_rejected;
    ngx_flag_t      replace_body;
    ngx_flag_t      body_sent;
    ngx_flag_t      have_rejection;
    circuit_rejection rej;      /* the one with the shortest wait */
    ngx_buf_t        *body;     /* the rejection text */
} ngx_http_circuit_ctx_t;


static void *ngx_http_circuit_create_main_conf(ngx_conf_t *cf);
static char *ngx_http_circuit_init_main_conf(ngx_conf_t *cf, void *conf);
static void *ngx_http_circuit_create_srv_conf(ngx_conf_t *cf);
static char *ngx_http_circuit_breaker(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_circuit_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_circuit_metrics(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static ngx_int_t ngx_http_circuit_postconfiguration(ngx_conf_t *cf);
static ngx_int_t ngx_http_circuit_init_upstream(ngx_conf_t *cf,
    ngx_http_upstream_srv_conf_t *us);
static ngx_int_t ngx_http_circuit_init_process(ngx_cycle_t *cycle);
static void ngx_http_circuit_unprobe(ngx_http_circuit_peer_data_t *cp);
static circuit_ticket *ngx_http_circuit_settling(ngx_http_circuit_peer_data_t *cp);
static void ngx_http_circuit_exit_process(ngx_cycle_t *cycle);


static ngx_command_t  ngx_http_circuit_commands[] = {

    { ngx_string("circuit_breaker"),
      NGX_HTTP_UPS_CONF|NGX_CONF_ANY,
      ngx_http_circuit_breaker,
      NGX_HTTP_SRV_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("circuit_breaker_zone"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_circuit_zone,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("circuit_breaker_metrics"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_circuit_metrics,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_http_circuit_module_ctx = {
    NULL,                                  /* preconfiguration */
    ngx_http_circuit_postconfiguration,    /* postconfiguration */

    ngx_http_circuit_create_main_conf,     /* create main configuration */
    ngx_http_circuit_init_main_conf,       /* init main configuration */

    ngx_http_circuit_create_srv_conf,      /* create server configuration */
    NULL,                                  /* merge server configuration */

    NULL,                                  /* create location configuration */
    NULL                                   /* merge location configuration */
};


ngx_module_t  ngx_http_circuit_module = {
    NGX_MODULE_V1,
    &ngx_http_circuit_module_ctx,          /* module context */
    ngx_http_circuit_commands,             /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    NULL,                                  /* init module */
    ngx_http_circuit_init_process,         /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    ngx_http_circuit_exit_process,         /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


/* Tickets this process has admitted and not yet settled (a worker is one
 * thread: a plain count). exit_process detaches only when it is 0. */
static ngx_uint_t  ngx_http_circuit_live;

static ngx_http_output_header_filter_pt  ngx_http_next_header_filter;
static ngx_http_output_body_filter_pt    ngx_http_next_body_filter;


/* ------------------------------------------------------------------------ */
/* Parameters (NX2)                                                          */
/* ------------------------------------------------------------------------ */

static bool
ngx_http_circuit_parse_i64(const char *s, int64_t *out)
{
    char       *end;
    long long   v;

    if (*s == '\0' || !(*s == '-' || (*s >= '0' && *s <= '9'))) {
        return false;
    }
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0') {
        return false;
    }
    *out = (int64_t) v;
    return true;
}


static bool
ngx_http_circuit_parse_double(const char *s, double *out)
{
    char    *end;
    double   v;

    /* plain decimal only: strtod would take hex floats, inf and nan */
    if (!((*s >= '0' && *s <= '9') || *s == '.')
        || strpbrk(s, "xXpP") != NULL)
    {
        return false;
    }
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || *end != '\0' || isnan(v)) {
        return false;
    }
    *out = v;
    return true;
}


/* "5s", "500ms", "2m": a whole number with a unit (ns, us, ms, s, m, h),
 * as the Traffic Server plugin reads them. */
static bool
ngx_http_circuit_parse_duration(const char *s, int64_t *out_ns)
{
    static const struct {
        const char  *unit;
        int64_t      ns;
    } units[] = {
        { "ns", 1 }, { "us", 1000 }, { "ms", 1000000 }, { "s", 1000000000 },
        { "m", INT64_C(60000000000) }, { "h", INT64_C(3600000000000) }
    };
    char       *end;
    long long   v;
    size_t      i;

    if (!(*s >= '0' && *s <= '9')) {
        return false;
    }
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0) {
        return false;
    }
    for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(end, units[i].unit) == 0) {
            if (v > INT64_MAX / units[i].ns) {
                return false;
            }
            *out_ns = (int64_t) v * units[i].ns;
            return true;
        }
    }
    return false;
}


/* "500-599", "502,503,504", "429,500-599" */
static bool
ngx_http_circuit_parse_statuses(const char *s, ngx_http_circuit_params_t *p)
{
    const char  *c = s;
    char        *end;
    long         lo, hi;

    p->n_ranges = 0;
    while (*c) {
        if (p->n_ranges == CIRCUIT_MAX_RANGES) {
            return false;
        }
        lo = strtol(c, &end, 10);
        if (end == c || lo < 100 || lo > 599) {
            return false;
        }
        hi = lo;
        c = end;
        if (*c == '-') {
            c++;
            hi = strtol(c, &end, 10);
            if (end == c || hi < lo || hi > 599) {
                return false;
            }
            c = end;
        }
        p->ranges[p->n_ranges].lo = (int) lo;
        p->ranges[p->n_ranges].hi = (int) hi;
        p->n_ranges++;
        if (*c == ',') {
            c++;
            if (*c == '\0') {
                return false;   /* a trailing comma */
            }
        } else if (*c != '\0') {
            return false;
        }
    }
    return p->n_ranges > 0;
}


static uint64_t
ngx_http_circuit_hash(const u_char *s, size_t len)
{
    uint64_t  h = UINT64_C(1469598103934665603);   /* FNV-1a */
    size_t    i;

    for (i = 0; i < len; i++) {
        h = (h ^ s[i]) * UINT64_C(1099511628211);
    }
    return h ? h : 1;
}


/*
 * circuit_breaker [policy=...] [window=N] [probes=N] [successes=N]
 *     [open-for=D] [open-for-max=D] [jitter=F] [probe-timeout=D]
 *     [failure-status=LIST];
 * Every bad parameter is named on its own [emerg] line; the directive then
 * fails (nginx adds "in FILE:LINE").
 */
static char *
ngx_http_circuit_breaker(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_circuit_srv_conf_t  *ucf = conf;

    ngx_http_upstream_srv_conf_t  *uscf;
    ngx_http_circuit_params_t     *p = &ucf->p;
    ngx_str_t                     *value;
    ngx_uint_t                     i;
    int64_t                        iv;
    double                         dv;
    char                           arg[256], lib[512];
    const char                    *v, *eq;
    size_t                         klen;
    bool                           have_max = false;
    ngx_str_t                     *max_arg = NULL;
    int                            bad = 0, rc;
    ngx_uint_t                     j;
    u_char                         keybuf[1024], *kp;

    if (ucf->enabled) {
        return "is duplicate";
    }
    if (cf->conf_file != NULL) {
        ucf->file = cf->conf_file->file.name;
        ucf->line = cf->conf_file->line;
    }

    ngx_memzero(p, sizeof(*p));
    p->rate = false;
    p->failures = 5;
    p->window = 100;
    p->probes = 1;
    p->open_for_ns = CIRCUIT_S(5);
    p->probe_timeout_ns = CIRCUIT_S(2);
    p->successes = -1;

    value = cf->args->elts;

    for (i = 1; i < cf->args->nelts; i++) {

        if (value[i].len >= sizeof(arg)) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "circuit_breaker: parameter \"%V\" is too long",
                               &value[i]);
            bad++;
            continue;
        }
        ngx_memcpy(arg, value[i].data, value[i].len);
        arg[value[i].len] = '\0';

        eq = strchr(arg, '=');
        if (eq == NULL) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "circuit_breaker: invalid parameter \"%s\" "
                               "(a parameter is name=value)", arg);
            bad++;
            continue;
        }
        klen = (size_t) (eq - arg);
        v = eq + 1;

        /* a parameter given twice is refused, naming it (as AT9 for the
         * Traffic Server plugin): the last one would silently win */
        for (j = 1; j < i; j++) {
            if (value[j].len > klen && value[j].data[klen] == '='
                && ngx_strncmp(value[j].data, arg, klen) == 0)
            {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "circuit_breaker: parameter \"%*s\" is "
                                   "given twice (\"%V\" and \"%s\")",
                                   klen, arg, &value[j], arg);
                bad++;
                break;
            }
        }

#define KEY(k) (klen == sizeof(k) - 1 && strncmp(arg, k, klen) == 0)
#define BAD(...)                                                              \
        do {                                                                  \
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, __VA_ARGS__);            \
            bad++;                                                            \
        } while (0)

        if (KEY("policy")) {
            if (strncmp(v, "consecutive:", 12) == 0) {
                p->rate = false;
                if (!ngx_http_circuit_parse_i64(v + 12, &iv)
                    || iv < 1 || iv > CIRCUIT_RUN_MAX)
                {
                    BAD("circuit_breaker: invalid value \"%s\" (consecutive:"
                        "FAILURES, FAILURES in 1..%L)", arg,
                        (int64_t) CIRCUIT_RUN_MAX);
                } else {
                    p->failures = iv;
                }

            } else if (strncmp(v, "failure-rate:", 13) == 0) {
                char        ratio_s[64];
                const char *rest = v + 13, *c2 = strchr(rest, ':');
                bool        ok = c2 != NULL
                                 && (size_t) (c2 - rest) < sizeof(ratio_s);

                p->rate = true;
                if (ok) {
                    ngx_memcpy(ratio_s, rest, (size_t) (c2 - rest));
                    ratio_s[c2 - rest] = '\0';
                    ok = ngx_http_circuit_parse_double(ratio_s, &dv)
                         && dv > 0.0 && dv <= 1.0
                         && ngx_http_circuit_parse_i64(c2 + 1, &iv)
                         && iv >= 1 && iv <= CIRCUIT_MAX_COUNT;
                }
                if (!ok) {
                    BAD("circuit_breaker: invalid value \"%s\" (failure-rate:"
                        "RATIO:MIN_RESULTS, RATIO in (0, 1], MIN_RESULTS in "
                        "1..window)", arg);
                } else {
                    p->ratio = dv;
                    p->min_results = iv;
                }

            } else {
                BAD("circuit_breaker: invalid value \"%s\" (policy=consecutive:"
                    "FAILURES or policy=failure-rate:RATIO:MIN_RESULTS)", arg);
            }

        } else if (KEY("window")) {
            if (!ngx_http_circuit_parse_i64(v, &iv)
                || iv < 1 || iv > CIRCUIT_MAX_COUNT)
            {
                BAD("circuit_breaker: invalid value \"%s\" (must be 1..%d)",
                    arg, CIRCUIT_MAX_COUNT);
            } else {
                p->window = (int) iv;
            }

        } else if (KEY("probes")) {
            if (!ngx_http_circuit_parse_i64(v, &iv)
                || iv < 1 || iv > CIRCUIT_MAX_COUNT)
            {
                BAD("circuit_breaker: invalid value \"%s\" (must be 1..%d)",
                    arg, CIRCUIT_MAX_COUNT);
            } else {
                p->probes = (int) iv;
            }

        } else if (KEY("successes")) {
            if (!ngx_http_circuit_parse_i64(v, &iv)
                || iv < 1 || iv > CIRCUIT_RUN_MAX)
            {
                BAD("circuit_breaker: invalid value \"%s\" (must be 1..%L)",
                    arg, (int64_t) CIRCUIT_RUN_MAX);
            } else {
                p->successes = iv;
            }

        } else if (KEY("open-for") || KEY("open-for-max")
                   || KEY("probe-timeout"))
        {
            if (!ngx_http_circuit_parse_duration(v, &iv) || iv <= 0) {
                BAD("circuit_breaker: invalid value \"%s\" (must be a duration "
                    "> 0 with a unit: ns us ms s m h)", arg);
            } else if (KEY("open-for")) {
                p->open_for_ns = iv;
            } else if (KEY("open-for-max")) {
                p->open_for_max_ns = iv;
                have_max = true;
                max_arg = &value[i];
            } else {
                p->probe_timeout_ns = iv;
            }

        } else if (KEY("jitter")) {
            if (!ngx_http_circuit_parse_double(v, &dv)
                || !(dv >= 0.0 && dv < 1.0))
            {
                BAD("circuit_breaker: invalid value \"%s\" (must be in [0, 1))",
                    arg);
            } else {
                p->jitter = dv;
            }

        } else if (KEY("failure-status")) {
            if (!ngx_http_circuit_parse_statuses(v, p)) {
                BAD("circuit_breaker: invalid value \"%s\" (statuses or ranges "
                    "in 100..599, e.g. 500-599 or 429,502-504; at most %d)",
                    arg, CIRCUIT_MAX_RANGES);
            }

        } else {
            BAD("circuit_breaker: unknown parameter \"%s\" (known: policy "
                "window probes successes open-for open-for-max jitter "
                "probe-timeout failure-status)", arg);
        }
#undef KEY
    }

    if (p->successes < 0) {
        p->successes = p->probes;
    }
    if (p->rate && p->min_results > p->window) {
        BAD("circuit_breaker: invalid value \"policy=failure-rate:...:%L\" "
            "(MIN_RESULTS exceeds window=%d)", p->min_results, p->window);
    }
    if (have_max && p->open_for_max_ns < p->open_for_ns) {
        BAD("circuit_breaker: invalid value \"%V\" (must be >= open-for, %.3f s)",
            max_arg, (double) p->open_for_ns / 1e9);
    }
    if (!have_max && p->jitter != 0.0) {
        BAD("circuit_breaker: \"jitter\" needs \"open-for-max\" (it cuts the "
            "doubling periods)");
    }
#undef BAD

    if (bad) {
        return NGX_CONF_ERROR;
    }

    /* The presets check once more (and fill the policy structs). */
    if (p->rate) {
        circuit_config cfg = { p->window, p->probes, p->open_for_ns,
                               p->probe_timeout_ns };
        rc = circuit_failure_rate_init(&ucf->rate, &cfg, p->min_results,
                                       p->ratio, p->successes, lib,
                                       sizeof(lib));
    } else {
        rc = circuit_consecutive_init(&ucf->cons, p->failures, p->successes,
                                      lib, sizeof(lib));
    }

    kp = ngx_snprintf(keybuf, sizeof(keybuf),
                      "rate=%d ratio=%.6f min=%L fail=%L succ=%L window=%d "
                      "probes=%d open=%L max=%L pto=%L jitter=%.6f status=",
                      p->rate, p->ratio, p->min_results, p->failures,
                      p->successes, p->window, p->probes, p->open_for_ns,
                      p->open_for_max_ns, p->probe_timeout_ns, p->jitter);
    for (i = 0; i < (ngx_uint_t) p->n_ranges; i++) {
        kp = ngx_snprintf(kp, keybuf + sizeof(keybuf) - kp, "%d-%d,",
                          p->ranges[i].lo, p->ranges[i].hi);
    }

    if (rc == 0 && have_max) {
        rc = circuit_backoff_exponential_init(&ucf->backoff, p->open_for_ns,
                                              p->open_for_max_ns, p->jitter,
                                              ngx_http_circuit_hash(keybuf,
                                                                kp - keybuf),
                                              lib, sizeof(lib));
    }
    if (rc != 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "circuit_breaker: %s", lib);
        return NGX_CONF_ERROR;
    }
    if (!have_max) {
        p->open_for_max_ns = 0;
    }

    ucf->params_key.len = kp - keybuf;
    ucf->params_key.data = ngx_pstrdup(cf->pool, &(ngx_str_t) { kp - keybuf,
                                                                keybuf });
    if (ucf->params_key.data == NULL) {
        return NGX_CONF_ERROR;
    }

    uscf = ngx_http_conf_get_module_srv_conf(cf, ngx_http_upstream_module);
    ucf->name = uscf->host;
    ucf->original_init_upstream = uscf->peer.init_upstream
                                  ? uscf->peer.init_upstream
                                  : ngx_http_upstream_init_round_robin;
    uscf->peer.init_upstream = ngx_http_circuit_init_upstream;
    ucf->enabled = 1;

    (void) cmd;
    return NGX_CONF_OK;
}


static char *
ngx_http_circuit_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_circuit_main_conf_t  *mcf = conf;
    ngx_str_t                     *value = cf->args->elts;
    ssize_t                        size;

    (void) cmd;
    if (mcf->zone_size != NGX_CONF_UNSET_SIZE) {
        return "is duplicate";
    }
    size = ngx_parse_size(&value[1]);
    if (size == NGX_ERROR || size < (ssize_t) (8 * ngx_pagesize)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "circuit_breaker_zone: invalid size \"%V\" (at "
                           "least %uz, e.g. 1m)", &value[1], 8 * ngx_pagesize);
        return NGX_CONF_ERROR;
    }
    mcf->zone_size = (size_t) size;
    if (cf->conf_file != NULL) {
        mcf->zone_file = cf->conf_file->file.name;
        mcf->zone_line = cf->conf_file->line;
    }
    return NGX_CONF_OK;
}


/* ------------------------------------------------------------------------ */
/* Callbacks given to the breakers (per process)                             */
/* ------------------------------------------------------------------------ */

static circuit_outcome
ngx_http_circuit_classify(void *arg, void *call_ctx, int result)
{
    const ngx_http_circuit_srv_conf_t  *ucf = arg;
    int                                 i;

    if (result < 0 || ucf->p.n_ranges == 0) {
        return circuit_classify_http(NULL, call_ctx, result);
    }
    for (i = 0; i < ucf->p.n_ranges; i++) {
        if (result >= ucf->p.ranges[i].lo && result <= ucf->p.ranges[i].hi) {
            return CIRCUIT_FAILURE;
        }
    }
    return CIRCUIT_SUCCESS;
}


/* NX6: each transition, in the error log of the process that made it. */
static void
ngx_http_circuit_observe(void *arg, void *call_ctx,
    const circuit_transition *t)
{
    ngx_http_circuit_server_t  *s = arg;
    const char                 *cause;
    ngx_uint_t                  level;

    (void) call_ctx;
    cause = t->cause == CIRCUIT_CAUSE_POLICY ? "policy"
            : t->cause == CIRCUIT_CAUSE_TIMER ? "timer" : "operator";
    level = (t->to == CIRCUIT_OPEN || t->to == CIRCUIT_ISOLATED)
            ? NGX_LOG_WARN : NGX_LOG_NOTICE;

    ngx_log_error(level, ngx_cycle->log, 0,
                  "circuit: breaker %V: %s -> %s (generation %uL, cause %s, "
                  "open for %.3f s; counts: %L successes, %L failures in the "
                  "window, %L in a row failed, %L probe timeouts)",
                  &s->label, circuit_state_name(t->from),
                  circuit_state_name(t->to), (uint64_t) t->generation, cause,
                  (double) t->open_for_ns / 1e9, t->counts.successes,
                  t->counts.failures, t->counts.consecutive_failures,
                  t->counts.timed_out);
}


static void
ngx_http_circuit_spec(ngx_http_circuit_server_t *s, circuit_spec *spec)
{
    ngx_http_circuit_srv_conf_t  *ucf = s->ucf;

    ngx_memzero(spec, sizeof(*spec));
    spec->config.window = ucf->p.window;
    spec->config.probes = ucf->p.probes;
    spec->config.open_for_ns = ucf->p.open_for_ns;
    spec->config.probe_timeout_ns = ucf->p.probe_timeout_ns;
    spec->policy = ucf->p.rate ? circuit_failure_rate_policy(&ucf->rate)
                               : circuit_consecutive_policy(&ucf->cons);
    spec->classify = ngx_http_circuit_classify;
    spec->classify_arg = ucf;
    spec->observe = ngx_http_circuit_observe;
    spec->observe_arg = s;
    if (ucf->p.open_for_max_ns > 0) {
        circuit_backoff_exponential_use(spec, &ucf->backoff);
    }
    /* the same in every process and across restarts */
    spec->salt = ngx_http_circuit_hash(s->key.data, s->key.len);
}


/* ------------------------------------------------------------------------ */
/* Configuration: servers, the zone (NX1, NX5)                               */
/* ------------------------------------------------------------------------ */

static void *
ngx_http_circuit_create_main_conf(ngx_conf_t *cf)
{
    ngx_http_circuit_main_conf_t  *mcf;

    mcf = ngx_pcalloc(cf->pool, sizeof(ngx_http_circuit_main_conf_t));
    if (mcf == NULL) {
        return NULL;
    }
    if (ngx_array_init(&mcf->servers, cf->pool, 8,
                       sizeof(ngx_http_circuit_server_t *)) != NGX_OK
        || ngx_array_init(&mcf->metrics, cf->pool, 2,
                          sizeof(ngx_http_core_loc_conf_t *)) != NGX_OK)
    {
        return NULL;
    }
    mcf->zone_size = NGX_CONF_UNSET_SIZE;
    return mcf;
}


static void *
ngx_http_circuit_create_srv_conf(ngx_conf_t *cf)
{
    ngx_http_circuit_srv_conf_t  *ucf;

    ucf = ngx_pcalloc(cf->pool, sizeof(ngx_http_circuit_srv_conf_t));
    if (ucf == NULL) {
        return NULL;
    }
    if (ngx_array_init(&ucf->servers, cf->pool, 4,
                       sizeof(ngx_http_circuit_server_t *)) != NGX_OK)
    {
        return NULL;
    }
    return ucf;
}


static ngx_int_t ngx_http_circuit_init_peer(ngx_http_request_t *r,
    ngx_http_upstream_srv_conf_t *us);

/* Called by the upstream module's init_main_conf, after the upstream block
 * was read: the balancer first, then one breaker per server address. */
static ngx_int_t
ngx_http_circuit_init_upstream(ngx_conf_t *cf, ngx_http_upstream_srv_conf_t *us)
{
    ngx_http_circuit_srv_conf_t    *ucf;
    ngx_http_circuit_main_conf_t   *mcf;
    ngx_http_upstream_server_t     *server;
    ngx_http_circuit_server_t      *s, **sp, **all;
    ngx_uint_t                      i, j, k;
    circuit_config                  cfg;
    size_t                          len;
    u_char                         *p;

    ucf = ngx_http_conf_upstream_srv_conf(us, ngx_http_circuit_module);
    mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_circuit_module);

    /* the breaker replaces nginx's passive check (max_fails, fail_timeout)
     * for the servers of its upstream: a failure marks no server down */
    if (us->servers) {
        server = us->servers->elts;
        for (i = 0; i < us->servers->nelts; i++) {
            server[i].max_fails = 0;
        }
    }

    ucf->initialized = 1;
    if (ucf->original_init_upstream(cf, us) != NGX_OK) {
        return NGX_ERROR;
    }
    ucf->original_init_peer = us->peer.init;
    us->peer.init = ngx_http_circuit_init_peer;

    cfg.window = ucf->p.window;
    cfg.probes = ucf->p.probes;
    cfg.open_for_ns = ucf->p.open_for_ns;
    cfg.probe_timeout_ns = ucf->p.probe_timeout_ns;

    if (us->servers == NULL) {
        return NGX_OK;
    }
    server = us->servers->elts;
    for (i = 0; i < us->servers->nelts; i++) {
        for (j = 0; j < server[i].naddrs; j++) {
            ngx_addr_t *a = &server[i].addrs[j];

            /* the same address twice in one upstream: one breaker */
            all = ucf->servers.elts;
            for (k = 0; k < ucf->servers.nelts; k++) {
                if (ngx_cmp_sockaddr(all[k]->sockaddr, all[k]->socklen,
                                     a->sockaddr, a->socklen, 1) == NGX_OK)
                {
                    break;
                }
            }
            if (k < ucf->servers.nelts) {
                ucf->dups++;
                continue;
            }

            s = ngx_pcalloc(cf->pool, sizeof(ngx_http_circuit_server_t));
            if (s == NULL) {
                return NGX_ERROR;
            }
            s->ucf = ucf;
            s->sockaddr = a->sockaddr;
            s->socklen = a->socklen;

            len = ucf->name.len + 1 + a->name.len;
            s->label.data = ngx_pnalloc(cf->pool, len + 1);
            if (s->label.data == NULL) {
                return NGX_ERROR;
            }
            p = ngx_sprintf(s->label.data, "%V/%V", &ucf->name, &a->name);
            *p = '\0';
            s->label.len = p - s->label.data;

            len = s->label.len + 1 + ucf->params_key.len;
            s->key.data = ngx_pnalloc(cf->pool, len);
            if (s->key.data == NULL) {
                return NGX_ERROR;
            }
            s->key.len = ngx_sprintf(s->key.data, "%V %V", &s->label,
                                     &ucf->params_key) - s->key.data;

            s->size = circuit_shared_size_in_arena(&cfg);
            if (s->size == 0) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "circuit_breaker: no breaker can be built "
                                   "for upstream \"%V\"", &ucf->name);
                return NGX_ERROR;
            }

            sp = ngx_array_push(&ucf->servers);
            if (sp == NULL) {
                return NGX_ERROR;
            }
            *sp = s;
            sp = ngx_array_push(&mcf->servers);
            if (sp == NULL) {
                return NGX_ERROR;
            }
            *sp = s;
        }
    }
    return NGX_OK;
}


/* Zone bytes one breaker takes: its memory, its alignment, its entry (its
 * per-CPU part is in the arena of its load, counted apart). */
static size_t
ngx_http_circuit_cost(const ngx_http_circuit_server_t *s)
{
    return s->size + CIRCUIT_SHARED_ALIGN + sizeof(ngx_http_circuit_entry_t)
           + s->key.len + 64;
}


/* The zone's entry for a server's key, or NULL. */
static ngx_http_circuit_entry_t *
ngx_http_circuit_entry(ngx_http_circuit_zone_t *z,
    const ngx_http_circuit_server_t *s)
{
    ngx_http_circuit_entry_t  *e;

    for (e = z->entries; e; e = e->next) {
        if (e->key_len == s->key.len && e->size == s->size
            && ngx_memcmp(e->key, s->key.data, s->key.len) == 0)
        {
            return e;
        }
    }
    return NULL;
}


static ngx_int_t
ngx_http_circuit_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_http_circuit_main_conf_t  *mcf = shm_zone->data;
    ngx_slab_pool_t               *shpool;
    ngx_http_circuit_zone_t       *z;
    ngx_http_circuit_entry_t      *e;
    ngx_http_circuit_server_t    **servers;
    ngx_uint_t                     i, kept = 0, built = 0, retired = 0;
    ngx_uint_t                     fresh = 0, arenas = 0;
    circuit_spec                   spec;
    char                           err[512];
    int                            rc;

    (void) data;
    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;
    z = shpool->data;

    if (z == NULL || z->magic != CIRCUIT_ZONE_MAGIC) {
        z = ngx_slab_calloc(shpool, sizeof(ngx_http_circuit_zone_t));
        if (z == NULL) {
            return NGX_ERROR;
        }
        z->magic = CIRCUIT_ZONE_MAGIC;
        shpool->data = z;
        shpool->log_nomem = 0;
        shpool->log_ctx = (u_char *) " in circuit_breaker_zone";
    }
    z->load++;

    servers = mcf->servers.elts;
    for (i = 0; i < mcf->servers.nelts; i++) {
        ngx_http_circuit_server_t *s = servers[i];

        if (ngx_http_circuit_entry(z, s) == NULL) {
            fresh++;
        }
    }

    for (i = 0; i < mcf->servers.nelts; i++) {
        ngx_http_circuit_server_t *s = servers[i];

        e = ngx_http_circuit_entry(z, s);
        if (e != NULL) {
            if (e->load != z->load) {
                kept++;
            }
            e->load = z->load;
            s->mem = e->mem;
            continue;
        }

        e = ngx_slab_calloc(shpool, sizeof(ngx_http_circuit_entry_t)
                                    + s->key.len + s->size
                                    + CIRCUIT_SHARED_ALIGN);
        if (e == NULL) {
            ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                          "circuit_breaker_zone of %uz bytes is full: no room "
                          "for breaker %V; raise its size (a new size starts "
                          "every breaker afresh)", shm_zone->shm.size,
                          &s->label);
            return NGX_ERROR;
        }
        e->key = (u_char *) (e + 1);
        ngx_memcpy(e->key, s->key.data, s->key.len);
        e->key_len = s->key.len;
        e->size = s->size;
        e->mem = ngx_align_ptr(e->key + s->key.len, CIRCUIT_SHARED_ALIGN);

        ngx_http_circuit_spec(s, &spec);
        if (z->arena != NULL) {
            /* the newest arena's spare units first (ENOSPC: it is full) */
            rc = circuit_shared_init_in_arena(e->mem, e->size, z->arena, &spec,
                                              err, sizeof(err));
            if (rc != ENOSPC) {
                goto built;
            }
        }
        {
            /* a new arena for the breakers this load still builds, rounded
             * up to whole lines (8 units: 128 bytes on aarch64): their
             * per-CPU parts share each CPU's lines, 16 bytes per CPU each
             * (L5), and its spare units serve later loads */
            size_t      asize;
            ngx_uint_t  cap = ngx_min(ngx_align(fresh, 8),
                                      CIRCUIT_SHARED_ARENA_MAX);
            void       *arena;

            asize = circuit_shared_arena_size(cap);
            arena = ngx_slab_calloc(shpool, asize + CIRCUIT_SHARED_ALIGN);
            if (arena == NULL) {
                ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                              "circuit_breaker_zone of %uz bytes is full: no "
                              "room for the per-CPU part of %ui breakers; "
                              "raise its size", shm_zone->shm.size, cap);
                ngx_slab_free(shpool, e);
                return NGX_ERROR;
            }
            arena = ngx_align_ptr(arena, CIRCUIT_SHARED_ALIGN);
            rc = circuit_shared_arena_init(arena, asize, cap, err,
                                           sizeof(err));
            if (rc != 0) {
                ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                              "circuit: arena: %s", err);
                ngx_slab_free(shpool, e);
                return NGX_ERROR;
            }
            z->arena = arena;
            arenas++;
            rc = circuit_shared_init_in_arena(e->mem, e->size, z->arena, &spec,
                                              err, sizeof(err));
        }
    built:
        fresh--;
        if (rc != 0) {
            ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                          "circuit: breaker %V: %s", &s->label,
                          rc == EINVAL ? err : strerror(rc));
            ngx_slab_free(shpool, e);
            return NGX_ERROR;
        }
        e->load = z->load;
        e->next = z->entries;
        z->entries = e;
        s->mem = e->mem;
        built++;
    }

    for (e = z->entries; e; e = e->next) {
        retired += e->load != z->load;
    }
    ngx_log_error(NGX_LOG_NOTICE, shm_zone->shm.log, 0,
                  "circuit: %ui breakers built, %ui kept with their state, "
                  "%ui retired in the zone; per-CPU parts in %ui new arenas",
                  built, kept, retired, arenas);
    return NGX_OK;
}


/* The size of this module's zone `name` in the configuration being
 * replaced (a reload), or 0 (a start, nginx -t, or no such zone). */
static size_t
ngx_http_circuit_old_zone_size(ngx_conf_t *cf, ngx_str_t *name)
{
    ngx_cycle_t      *old = cf->cycle->old_cycle;
    ngx_list_part_t  *part;
    ngx_shm_zone_t   *z;
    ngx_uint_t        i;

    if (old == NULL || ngx_is_init_cycle(old)) {
        return 0;
    }
    part = &old->shared_memory.part;
    z = part->elts;
    for (i = 0; ; i++) {
        if (i >= part->nelts) {
            if (part->next == NULL) {
                return 0;
            }
            part = part->next;
            z = part->elts;
            i = 0;
        }
        if (z[i].tag == &ngx_http_circuit_module
            && z[i].shm.name.len == name->len
            && ngx_strncmp(z[i].shm.name.data, name->data, name->len) == 0)
        {
            return z[i].shm.size;
        }
    }
}


/* Every breaker's label is UTF-8 and differs from the others' (one series
 * each, and the zone tells breakers apart by label and parameters): an
 * upstream's name may hold any byte and a '/', so "a/unix:/x" + "unix:/y"
 * and "a" + "unix:/x/unix:/y" meet. The core's formatter, the one judge of
 * a label, says whether all of them are taken; only when not, the culprit
 * is looked for, to be named. */
static ngx_int_t
ngx_http_circuit_labels_differ(ngx_conf_t *cf, ngx_http_circuit_main_conf_t *mcf)
{
    ngx_http_circuit_server_t  **s = mcf->servers.elts;
    ngx_uint_t                   i, j, n = mcf->servers.nelts;
    circuit_stats               *st;
    const char                 **names;

    st = ngx_pcalloc(cf->temp_pool, n * sizeof(circuit_stats));
    names = ngx_palloc(cf->temp_pool, n * sizeof(char *));
    if (st == NULL || names == NULL) {
        return NGX_ERROR;
    }
    for (i = 0; i < n; i++) {
        st[i].state = CIRCUIT_CLOSED;
        names[i] = (const char *) s[i]->label.data;
    }
    if (circuit_stats_format_prometheus_many(st, names, n, NULL, 0) >= 0) {
        return NGX_OK;
    }
    for (i = 0; i < n; i++) {
        if (circuit_stats_format_prometheus_many(st, &names[i], 1, NULL, 0) < 0) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "circuit_breaker: the breaker \"%V\" (upstream "
                          "name/address: its Prometheus label) is not UTF-8 "
                          "in %V:%ui", &s[i]->label, &s[i]->ucf->file,
                          s[i]->ucf->line);
            return NGX_ERROR;
        }
    }
    for (i = 0; i < n; i++) {
        for (j = i + 1; j < n; j++) {
            if (s[i]->label.len == s[j]->label.len
                && ngx_memcmp(s[i]->label.data, s[j]->label.data,
                              s[i]->label.len) == 0)
            {
                ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                              "circuit_breaker: two breakers are named \"%V\": "
                              "a server of upstream \"%V\" (%V:%ui) and one of "
                              "upstream \"%V\" (%V:%ui); rename an upstream",
                              &s[i]->label, &s[i]->ucf->name, &s[i]->ucf->file,
                              s[i]->ucf->line, &s[j]->ucf->name,
                              &s[j]->ucf->file, s[j]->ucf->line);
                return NGX_ERROR;
            }
        }
    }
    ngx_log_error(NGX_LOG_EMERG, cf->log, ngx_errno,
                  "circuit_breaker: the Prometheus text of the breakers "
                  "cannot be built");
    return NGX_ERROR;
}


static char *
ngx_http_circuit_init_main_conf(ngx_conf_t *cf, void *conf)
{
    ngx_http_circuit_main_conf_t  *mcf = conf;
    ngx_http_circuit_server_t    **servers;
    ngx_str_t                      name = ngx_string(CIRCUIT_ZONE_NAME);
    size_t                         need, size, old;
    ngx_uint_t                     i;

    if (mcf->servers.nelts == 0) {
        return NGX_CONF_OK;
    }
    if (ngx_http_circuit_labels_differ(cf, mcf) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    /* the slab allocator's own pages, then the breakers twice over (the
     * breakers of the previous configuration stay while its workers end) */
    need = 16 * ngx_pagesize;
    servers = mcf->servers.elts;
    for (i = 0; i < mcf->servers.nelts; i++) {
        need += 2 * ngx_http_circuit_cost(servers[i]);
    }
    /* the per-CPU parts: an arena per load for the breakers it builds (at
     * most all of them), 16 bytes per CPU each (L5) */
    for (i = 0; i < mcf->servers.nelts; i += CIRCUIT_SHARED_ARENA_MAX) {
        need += 2 * (circuit_shared_arena_size(
                         ngx_min(ngx_align(mcf->servers.nelts - i, 8),
                                 CIRCUIT_SHARED_ARENA_MAX))
                     + CIRCUIT_SHARED_ALIGN);
    }

    if (mcf->zone_size != NGX_CONF_UNSET_SIZE) {
        size = mcf->zone_size;
        if (size < need) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "circuit_breaker_zone %uz is too small for %ui "
                          "breakers: it needs at least %uz bytes in %V:%ui",
                          size, mcf->servers.nelts, need, &mcf->zone_file,
                          mcf->zone_line);
            return NGX_CONF_ERROR;
        }
    } else {
        /* nginx keeps a zone over a reload only at the same name and size
         * (NX5): the running zone's size while the breakers fit in it
         * (adding or removing servers keeps every breaker), else whole
         * MiB */
        old = ngx_http_circuit_old_zone_size(cf, &name);
        size = old >= need ? old : ngx_align(need, CIRCUIT_ZONE_DEFAULT);
        if (old != 0 && old < need) {
            ngx_log_error(NGX_LOG_WARN, cf->log, 0,
                          "circuit_breaker: %ui breakers need a zone of %uz "
                          "bytes, the running one has %uz: a new zone, every "
                          "breaker starts afresh (circuit_breaker_zone sets "
                          "a size with room to grow)", mcf->servers.nelts,
                          size, old);
        }
    }

    mcf->zone = ngx_shared_memory_add(cf, &name, size, &ngx_http_circuit_module);
    if (mcf->zone == NULL) {
        return NGX_CONF_ERROR;
    }
    mcf->zone->init = ngx_http_circuit_init_zone;
    mcf->zone->data = mcf;
    mcf->zone->noreuse = 0;
    return NGX_CONF_OK;
}


static ngx_int_t
ngx_http_circuit_init_process(ngx_cycle_t *cycle)
{
    ngx_http_circuit_main_conf_t  *mcf;
    ngx_http_circuit_server_t    **servers;
    ngx_uint_t                     i;
    circuit_spec                   spec;
    char                           err[512];
    int                            rc;

    if (ngx_process != NGX_PROCESS_WORKER && ngx_process != NGX_PROCESS_SINGLE) {
        return NGX_OK;
    }
    mcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_circuit_module);
    if (mcf == NULL) {
        return NGX_OK;
    }
    servers = mcf->servers.elts;
    for (i = 0; i < mcf->servers.nelts; i++) {
        ngx_http_circuit_server_t *s = servers[i];

        if (s->mem == NULL) {
            continue;
        }
        ngx_http_circuit_spec(s, &spec);
        rc = circuit_shared_attach(&s->b, s->mem, s->size, &spec, err,
                                   sizeof(err));
        if (rc != 0) {
            ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                          "circuit: breaker %V: attach failed: %s", &s->label,
                          rc == ENOMEM ? strerror(rc) : err);
            s->b = NULL;
            return NGX_ERROR;
        }
    }
    return NGX_OK;
}


static void
ngx_http_circuit_exit_process(ngx_cycle_t *cycle)
{
    ngx_http_circuit_main_conf_t  *mcf;
    ngx_http_circuit_server_t    **servers;
    ngx_uint_t                     i;

    mcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_circuit_module);
    if (mcf == NULL) {
        return;
    }
    if (ngx_http_circuit_live > 0) {
        /* a fast shutdown with requests in flight: no handle is freed under
         * a live ticket; the process ends, its tickets are left unsettled
         * as a killed worker's are */
        ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                      "circuit: %ui requests in flight at exit: their tickets "
                      "stay unsettled", ngx_http_circuit_live);
        return;
    }
    servers = mcf->servers.elts;
    for (i = 0; i < mcf->servers.nelts; i++) {
        if (servers[i]->b) {
            circuit_shared_detach(servers[i]->b);
            servers[i]->b = NULL;
        }
    }
}


/* ------------------------------------------------------------------------ */
/* Peer selection and settling (NX3, NX4)                                    */
/* ------------------------------------------------------------------------ */

static ngx_int_t ngx_http_circuit_get_peer(ngx_peer_connection_t *pc,
    void *data);
static void ngx_http_circuit_free_peer(ngx_peer_connection_t *pc, void *data,
    ngx_uint_t state);
#if (NGX_HTTP_SSL)
static ngx_int_t ngx_http_circuit_set_session(ngx_peer_connection_t *pc,
    void *data);
static void ngx_http_circuit_save_session(ngx_peer_connection_t *pc,
    void *data);
#endif


static void
ngx_http_circuit_cleanup(void *data)
{
    ngx_http_circuit_peer_data_t  *cp = data;

    ngx_http_circuit_unprobe(cp);
    if (cp->live) {
        circuit_release(ngx_http_circuit_settling(cp));
    }
}


static ngx_int_t
ngx_http_circuit_init_peer(ngx_http_request_t *r,
    ngx_http_upstream_srv_conf_t *us)
{
    ngx_http_circuit_srv_conf_t   *ucf;
    ngx_http_circuit_peer_data_t  *cp;
    ngx_http_circuit_ctx_t        *ctx;
    ngx_pool_cleanup_t            *cln;

    ucf = ngx_http_conf_upstream_srv_conf(us, ngx_http_circuit_module);

    if (ucf->original_init_peer(r, us) != NGX_OK) {
        return NGX_ERROR;
    }

    cp = ngx_pcalloc(r->pool, sizeof(ngx_http_circuit_peer_data_t));
    if (cp == NULL) {
        return NGX_ERROR;
    }
    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_ERROR;
    }
    cln->handler = ngx_http_circuit_cleanup;
    cln->data = cp;

    ctx = ngx_http_get_module_ctx(r, ngx_http_circuit_module);
    if (ctx == NULL) {
        ctx = ngx_pcalloc(r->pool, sizeof(ngx_http_circuit_ctx_t));
        if (ctx == NULL) {
            return NGX_ERROR;
        }
        ngx_http_set_ctx(r, ctx, ngx_http_circuit_module);
    }
    ctx->cp = cp;

    cp->ucf = ucf;
    cp->r = r;
    cp->data = r->upstream->peer.data;
    cp->original_get_peer = r->upstream->peer.get;
    cp->original_free_peer = r->upstream->peer.free;

    r->upstream->peer.data = cp;
    r->upstream->peer.get = ngx_http_circuit_get_peer;
    r->upstream->peer.free = ngx_http_circuit_free_peer;

#if (NGX_HTTP_SSL)
    cp->original_set_session = r->upstream->peer.set_session;
    cp->original_save_session = r->upstream->peer.save_session;
    r->upstream->peer.set_session = ngx_http_circuit_set_session;
    r->upstream->peer.save_session = ngx_http_circuit_save_session;
#endif

    return NGX_OK;
}


static ngx_http_circuit_server_t *
ngx_http_circuit_find(ngx_http_circuit_srv_conf_t *ucf, ngx_peer_connection_t *pc,
    ngx_uint_t *index)
{
    ngx_http_circuit_server_t  **s = ucf->servers.elts;
    ngx_uint_t                   i;

    for (i = 0; i < ucf->servers.nelts; i++) {
        if (ngx_cmp_sockaddr(s[i]->sockaddr, s[i]->socklen, pc->sockaddr,
                             pc->socklen, 1) == NGX_OK)
        {
            *index = i;
            return s[i];
        }
    }
    return NULL;
}


/* A probe's try is over, or no longer a probe's (settled or released
 * early): its deadline goes, and the location's timeouts come back for
 * what the request does next (another server's try, the rest of the
 * response). */
static void
ngx_http_circuit_unprobe(ngx_http_circuit_peer_data_t *cp)
{
    if (cp->deadline.timer_set) {
        ngx_del_timer(&cp->deadline);
    }
    if (cp->conf != NULL) {
        cp->r->upstream->conf = cp->conf;
        cp->conf = NULL;
    }
}


/* The ticket of a try that is settled now (at its end, or early): no
 * longer live, nor a probe's (unprobe); the caller settles or releases it.
 * Only while cp->live. */
static circuit_ticket *
ngx_http_circuit_settling(ngx_http_circuit_peer_data_t *cp)
{
    cp->live = 0;
    ngx_http_circuit_live--;
    ngx_http_circuit_unprobe(cp);
    return &cp->ticket;
}


/* Gives the balancer's offer back, as for a down server: no failure, and
 * no proxy_next_upstream try (the balancer counts a give-back as one); a
 * cached connection keepalive handed over (NGX_DONE) is closed, not used. */
static void
ngx_http_circuit_give_back(ngx_http_circuit_peer_data_t *cp,
    ngx_peer_connection_t *pc, ngx_int_t rc)
{
    ngx_uint_t  tries = pc->tries;

    if (rc == NGX_DONE && pc->connection != NULL) {
        ngx_close_connection(pc->connection);
        pc->connection = NULL;
    }
    cp->original_free_peer(pc, cp->data, 0);
    pc->tries = tries;
}


/* A probe's deadline: its origin connection has not finished within
 * probe-timeout of its admission (a body that trickles, each gap shorter
 * than the read timeout). The upstream's read event is made to time out
 * as nginx's own timer would: nginx ends the try (next upstream, or the
 * response cut short) and free_peer counts the timeout as a failure. */
static void
ngx_http_circuit_deadline(ngx_event_t *ev)
{
    ngx_http_circuit_peer_data_t  *cp = ev->data;
    ngx_http_upstream_t           *u = cp->r->upstream;
    ngx_connection_t              *c;

    if (!cp->live || u == NULL || u->peer.connection == NULL) {
        return;
    }
    if (cp->r->reading_body) {
        /* proxy_request_buffering off: nginx still waits for the client's
         * body (client_body_timeout), not for the origin; no outcome of
         * the origin's yet: the probe is released (counts nothing, its
         * slot free for the next) and the request goes on as any other */
        ngx_log_error(NGX_LOG_NOTICE, ev->log, 0,
                      "circuit: probe of %V still reading the client's body "
                      "at its probe-timeout: released", &cp->current->label);
        circuit_release(ngx_http_circuit_settling(cp));
        return;
    }
    if (u->buffering && u->pipe != NULL && u->pipe->free_raw_bufs == NULL
        && u->pipe->allocated >= u->pipe->bufs.num
        && u->state != NULL && u->state->status > 0)
    {
        /* every buffer is full and waits for the client (no temp file to
         * spill to): nginx stopped reading, not the origin, which
         * answered; settle the probe by its status now and let the
         * response go on at the client's pace */
        circuit_done(ngx_http_circuit_settling(cp), (int) u->state->status);
        return;
    }
    c = u->peer.connection;
    ngx_log_error(NGX_LOG_INFO, ev->log, 0,
                  "circuit: probe of %V still running at its probe-timeout: "
                  "timed out", &cp->current->label);
    c->read->timedout = 1;
    ngx_post_event(c->read, &ngx_posted_events);
}


/* A probe waits at most probe-timeout for its connect, send and read, so
 * that it does not outlive its probe slot: the request gets its own copy
 * of the location's upstream settings with the timeouts cut, and a
 * deadline for the whole try (a body trickling in gaps shorter than the
 * read timeout), a little before the slot's own timeout. */
static ngx_int_t
ngx_http_circuit_probe_timeouts(ngx_http_circuit_peer_data_t *cp,
    ngx_http_circuit_srv_conf_t *ucf)
{
    ngx_http_request_t        *r = cp->r;
    ngx_http_upstream_t       *u = r->upstream;
    ngx_http_upstream_conf_t  *conf;
    ngx_msec_t                 ms, total;

    total = (ngx_msec_t) (ucf->p.probe_timeout_ns / 1000000);
    total = total > 20 ? total - 10 : (total > 1 ? total - 1 : 1);
    cp->deadline.handler = ngx_http_circuit_deadline;
    cp->deadline.data = cp;
    cp->deadline.log = r->connection->log;
    cp->deadline.cancelable = 1;
    ngx_add_timer(&cp->deadline, total);

    ms = (ngx_msec_t) ((ucf->p.probe_timeout_ns + 999999) / 1000000);
    if (u->conf->connect_timeout <= ms && u->conf->send_timeout <= ms
        && u->conf->read_timeout <= ms)
    {
        return NGX_OK;
    }
    conf = ngx_palloc(r->pool, sizeof(ngx_http_upstream_conf_t));
    if (conf == NULL) {
        return NGX_ERROR;
    }
    *conf = *u->conf;
    conf->connect_timeout = ngx_min(conf->connect_timeout, ms);
    conf->send_timeout = ngx_min(conf->send_timeout, ms);
    conf->read_timeout = ngx_min(conf->read_timeout, ms);
    cp->conf = u->conf;     /* back when the try ends (unprobe) */
    u->conf = conf;
    return NGX_OK;
}


static ngx_int_t
ngx_http_circuit_get_peer(ngx_peer_connection_t *pc, void *data)
{
    ngx_http_circuit_peer_data_t  *cp = data;
    ngx_http_circuit_srv_conf_t   *ucf = cp->ucf;
    ngx_http_circuit_server_t     *s;
    ngx_http_circuit_ctx_t        *ctx;
    ngx_uint_t                     idx, n, asked = 0, again = 0;
    uint64_t                       tried[4] = { 0, 0, 0, 0 };
    circuit_rejection              rej, best;
    int64_t                        secs, best_secs = 0;
    bool                           have_best = false;
    ngx_int_t                      rc;

    cp->current = NULL;
    n = ucf->servers.nelts;

    for ( ;; ) {
        rc = cp->original_get_peer(pc, cp->data);
        if (rc == NGX_BUSY && asked > 0) {
            break;          /* every server it had left rejected */
        }
        if (rc != NGX_OK && rc != NGX_DONE) {
            return rc;      /* the balancer's own answer */
        }
        /* NGX_DONE: keepalive (placed before circuit_breaker, so wrapped by
         * it) chose the server and hands a cached connection to it; the
         * breaker decides as for a new connection */
        s = ngx_http_circuit_find(ucf, pc, &idx);
        if (s == NULL || s->b == NULL) {
            return rc;      /* an address not known at configuration */
        }
        if (idx < 256 && (tried[idx / 64] & ((uint64_t) 1 << (idx % 64)))) {
            /* the balancer offers a server that already rejected: give it
             * back. It may be the same address on another line of the
             * block (one breaker for both): ask on, as many times as the
             * block repeats addresses; past that it has no other (e.g. a
             * single server) */
            ngx_http_circuit_give_back(cp, pc, rc);
            if (++again > ucf->dups) {
                break;
            }
            continue;
        }
        if (circuit_allow(s->b, cp->r, &cp->ticket, &rej)) {
            cp->live = 1;
            ngx_http_circuit_live++;
            cp->current = s;
            if (circuit_get_state(s->b) == CIRCUIT_HALF_OPEN
                && ngx_http_circuit_probe_timeouts(cp, ucf) != NGX_OK)
            {
                return NGX_ERROR;
            }
            return rc;
        }
        /* Retry-After: the shortest wait; an isolated server (no wait
         * known, 0) only when every server is */
        secs = circuit_retry_after_s(&rej);
        if (!have_best || (secs > 0 && (best_secs <= 0 || secs < best_secs))) {
            best = rej;
            best_secs = secs;
            have_best = true;
        }
        ngx_http_circuit_give_back(cp, pc, rc);
        if (idx < 256) {
            tried[idx / 64] |= (uint64_t) 1 << (idx % 64);
        }
        if (++asked > n) {
            break;
        }
    }

    /* every server rejected: no connection; the filters make the 503 */
    ctx = ngx_http_get_module_ctx(cp->r, ngx_http_circuit_module);
    if (ctx == NULL) {
        ctx = ngx_pcalloc(cp->r->pool, sizeof(ngx_http_circuit_ctx_t));
        if (ctx == NULL) {
            return NGX_ERROR;
        }
        ngx_http_set_ctx(cp->r, ctx, ngx_http_circuit_module);
    }
    ctx->all_rejected = 1;
    ctx->have_rejection = have_best;
    if (have_best) {
        ctx->rej = best;
    }
    pc->sockaddr = NULL;
    pc->socklen = 0;
    pc->name = &ucf->name;
    pc->tries = 0;
    return NGX_BUSY;
}


static void
ngx_http_circuit_free_peer(ngx_peer_connection_t *pc, void *data,
    ngx_uint_t state)
{
    ngx_http_circuit_peer_data_t  *cp = data;
    ngx_http_upstream_t           *u = cp->r->upstream;
    ngx_uint_t                     status = 0;
    ngx_connection_t              *c = pc->connection;
    circuit_ticket                *t;

    ngx_http_circuit_unprobe(cp);
    if (cp->live) {
        t = ngx_http_circuit_settling(cp);
        if (u != NULL && u->state != NULL) {
            status = u->state->status;
        }
        if (c != NULL && (c->read->timedout || c->write->timedout)) {
            /* a timeout, even after the status line (a body that hangs or
             * trickles): the origin did not answer in time, a failure */
            circuit_done(t, -ETIMEDOUT);
        } else if ((c != NULL && c->read->error)
                   || (u != NULL && u->pipe != NULL && u->pipe->upstream_error))
        {
            circuit_done(t, -ECONNRESET); /* the answer broke off */
        } else if (status > 0) {
            circuit_done(t, (int) status);
        } else if (state & NGX_PEER_FAILED) {
            circuit_done(t, -ECONNREFUSED); /* a timeout was taken above */
        } else {
            circuit_release(t);   /* no outcome: the client left */
        }
    }
    cp->current = NULL;
    cp->original_free_peer(pc, cp->data, state);
}


#if (NGX_HTTP_SSL)

static ngx_int_t
ngx_http_circuit_set_session(ngx_peer_connection_t *pc, void *data)
{
    ngx_http_circuit_peer_data_t  *cp = data;

    return cp->original_set_session(pc, cp->data);
}


static void
ngx_http_circuit_save_session(ngx_peer_connection_t *pc, void *data)
{
    ngx_http_circuit_peer_data_t  *cp = data;

    cp->original_save_session(pc, cp->data);
}

#endif


/* ------------------------------------------------------------------------ */
/* Every server rejected: 503 with Retry-After (NX3)                         */
/* ------------------------------------------------------------------------ */

static ngx_int_t
ngx_http_circuit_header_filter(ngx_http_request_t *r)
{
    ngx_http_circuit_ctx_t  *ctx;
    ngx_table_elt_t         *h;
    int64_t                  secs;
    char                     text[160];
    int                      n;

    ctx = ngx_http_get_module_ctx(r, ngx_http_circuit_module);
    if (ctx != NULL && ctx->cp != NULL && ctx->cp->live && r->upstream != NULL
        && r->upstream->upgrade
        && r->headers_out.status == NGX_HTTP_SWITCHING_PROTOCOLS)
    {
        /* the origin switched protocols (a websocket): that answer is its
         * outcome, settled now; what the connection does for minutes or
         * hours after is not the origin's result, and a probe's cut
         * timeouts and deadline end here, before nginx arms the upgraded
         * connection's timers */
        circuit_done(ngx_http_circuit_settling(ctx->cp),
                     NGX_HTTP_SWITCHING_PROTOCOLS);
    }
    if (ctx == NULL || !ctx->all_rejected
        || r->headers_out.status != NGX_HTTP_BAD_GATEWAY)
    {
        return ngx_http_next_header_filter(r);
    }

    /* nginx's "no live upstreams" 502 for a request no server admitted */
    r->headers_out.status = NGX_HTTP_SERVICE_UNAVAILABLE;
    r->headers_out.status_line.len = 0;
    r->err_status = NGX_HTTP_SERVICE_UNAVAILABLE;

    secs = ctx->have_rejection ? circuit_retry_after_s(&ctx->rej) : 0;
    if (secs > 0) {
        h = ngx_list_push(&r->headers_out.headers);
        if (h == NULL) {
            return NGX_ERROR;
        }
        h->hash = 1;
        ngx_str_set(&h->key, "Retry-After");
        h->value.data = ngx_pnalloc(r->pool, NGX_INT64_LEN);
        if (h->value.data == NULL) {
            return NGX_ERROR;
        }
        h->value.len = ngx_sprintf(h->value.data, "%L", secs) - h->value.data;
    }

    n = ctx->have_rejection
        ? circuit_rejection_format(&ctx->rej, text, sizeof(text) - 1) : -1;
    if (n < 0 || (size_t) n >= sizeof(text) - 1) {
        n = snprintf(text, sizeof(text) - 1, "circuit open");
    }
    text[n++] = '\n';
    text[n] = '\0';

    ctx->replace_body = 1;
    r->headers_out.content_length_n = n;
    if (r->headers_out.content_length) {
        r->headers_out.content_length->hash = 0;
        r->headers_out.content_length = NULL;
    }
    ngx_str_set(&r->headers_out.content_type, "text/plain");
    r->headers_out.content_type_len = sizeof("text/plain") - 1;
    r->headers_out.content_type_lowcase = NULL;
    ngx_http_clear_accept_ranges(r);
    ngx_http_clear_last_modified(r);
    ngx_http_clear_etag(r);

    ctx->body = ngx_create_temp_buf(r->pool, (size_t) n);
    if (ctx->body == NULL) {
        return NGX_ERROR;
    }
    ctx->body->last = ngx_cpymem(ctx->body->pos, text, (size_t) n);
    ctx->body->last_buf = (r == r->main) ? 1 : 0;
    ctx->body->last_in_chain = 1;

    return ngx_http_next_header_filter(r);
}


static ngx_int_t
ngx_http_circuit_body_filter(ngx_http_request_t *r, ngx_chain_t *in)
{
    ngx_http_circuit_ctx_t  *ctx;
    ngx_chain_t             *cl, out;

    ctx = ngx_http_get_module_ctx(r, ngx_http_circuit_module);
    if (ctx == NULL || !ctx->replace_body) {
        return ngx_http_next_body_filter(r, in);
    }

    /* nginx's 502 page is dropped; the rejection text goes instead */
    for (cl = in; cl; cl = cl->next) {
        cl->buf->pos = cl->buf->last;
        cl->buf->file_pos = cl->buf->file_last;
    }
    if (ctx->body_sent) {
        return NGX_OK;
    }
    ctx->body_sent = 1;

    out.buf = ctx->body;
    out.next = NULL;
    return ngx_http_next_body_filter(r, &out);
}


/* ------------------------------------------------------------------------ */
/* The Prometheus exposition (NX6)                                           */
/* ------------------------------------------------------------------------ */

static ngx_int_t
ngx_http_circuit_metrics_handler(ngx_http_request_t *r)
{
    ngx_http_circuit_main_conf_t  *mcf;
    ngx_http_circuit_server_t    **servers;
    circuit_stats                 *st;
    const char                   **names;
    ngx_uint_t                     i, n = 0;
    ngx_int_t                      rc;
    ngx_buf_t                     *b;
    ngx_chain_t                    out;
    size_t                         cap;
    int                            len;

    if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD))) {
        return NGX_HTTP_NOT_ALLOWED;
    }
    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    mcf = ngx_http_get_module_main_conf(r, ngx_http_circuit_module);
    servers = mcf->servers.elts;
    st = ngx_palloc(r->pool, (mcf->servers.nelts + 1) * sizeof(circuit_stats));
    names = ngx_palloc(r->pool, (mcf->servers.nelts + 1) * sizeof(char *));
    if (st == NULL || names == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    for (i = 0; i < mcf->servers.nelts; i++) {
        if (servers[i]->b) {
            circuit_get_stats(servers[i]->b, &st[n]);
            names[n++] = (const char *) servers[i]->label.data;
        }
    }

    cap = 4096 + n * 2048;
    for ( ;; ) {
        b = ngx_create_temp_buf(r->pool, cap);
        if (b == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        len = circuit_stats_format_prometheus_many(st, names, n,
                                                   (char *) b->pos, cap);
        if (len < 0) {
            ngx_log_error(NGX_LOG_ERR, r->connection->log, ngx_errno,
                          "circuit: the Prometheus text could not be built");
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        if ((size_t) len < cap) {
            break;
        }
        cap = (size_t) len + 1;
    }
    b->last = b->pos + len;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = len;
    ngx_str_set(&r->headers_out.content_type,
                "text/plain; version=0.0.4; charset=utf-8");
    r->headers_out.content_type_len = sizeof("text/plain") - 1;

    rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }
    out.buf = b;
    out.next = NULL;
    return ngx_http_output_filter(r, &out);
}


static char *
ngx_http_circuit_metrics(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_core_loc_conf_t      *clcf, **loc;
    ngx_http_circuit_main_conf_t  *mcf;

    (void) cmd;
    (void) conf;
    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    if (clcf->handler == ngx_http_circuit_metrics_handler) {
        return "is duplicate";
    }
    if (clcf->handler != NULL) {
        /* proxy_pass, return's module, ...: one content handler per
         * location */
        return "conflicts with the location's other content handler "
               "(proxy_pass, fastcgi_pass, ...)";
    }
    clcf->handler = ngx_http_circuit_metrics_handler;
    /* a content handler set after it would replace it: postconfiguration
     * looks again */
    mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_circuit_module);
    loc = ngx_array_push(&mcf->metrics);
    if (loc == NULL) {
        return NGX_CONF_ERROR;
    }
    *loc = clcf;
    return NGX_CONF_OK;
}


static ngx_int_t
ngx_http_circuit_postconfiguration(ngx_conf_t *cf)
{
    ngx_http_upstream_main_conf_t   *umcf;
    ngx_http_upstream_srv_conf_t   **uscfp;
    ngx_http_circuit_srv_conf_t     *ucf;
    ngx_http_circuit_main_conf_t    *mcf;
    ngx_http_core_loc_conf_t       **loc;
    ngx_uint_t                       i;

    mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_circuit_module);
    loc = mcf->metrics.elts;
    for (i = 0; i < mcf->metrics.nelts; i++) {
        if (loc[i]->handler != ngx_http_circuit_metrics_handler) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "circuit_breaker_metrics in location \"%V\" was "
                          "replaced by another content handler (proxy_pass, "
                          "fastcgi_pass, ...): one per location",
                          &loc[i]->name);
            return NGX_ERROR;
        }
    }

    /* A balancing directive after circuit_breaker (least_conn, hash, ...)
     * replaces its peer initialisation, which would leave the upstream
     * without breakers: refuse that configuration, naming the upstream.
     * (keepalive after circuit_breaker wraps it and calls it: its
     * init_upstream ran, which is what is asked.) Runs after the upstream
     * module's init_main_conf, which calls every init_upstream. */
    umcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_upstream_module);
    if (umcf != NULL) {
        uscfp = umcf->upstreams.elts;
        for (i = 0; i < umcf->upstreams.nelts; i++) {
            if (uscfp[i]->srv_conf == NULL) {
                continue;
            }
            ucf = uscfp[i]->srv_conf[ngx_http_circuit_module.ctx_index];
            if (ucf != NULL && ucf->enabled && !ucf->initialized) {
                ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                              "circuit_breaker in upstream \"%V\" in %s:%ui "
                              "must come after the balancing directive "
                              "(least_conn, hash, ip_hash, random), which "
                              "replaced it", &uscfp[i]->host,
                              uscfp[i]->file_name, uscfp[i]->line);
                return NGX_ERROR;
            }
        }
    }
    ngx_http_next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = ngx_http_circuit_header_filter;
    ngx_http_next_body_filter = ngx_http_top_body_filter;
    ngx_http_top_body_filter = ngx_http_circuit_body_filter;
    return NGX_OK;
}
