/*
 * circuit-proxy: an HTTP reverse proxy with ONE shared libcircuit breaker in
 * front of its upstream, for the end-to-end scenario (bench/e2e, issue 6).
 *
 * SPDX-License-Identifier: MIT
 *
 * Shape
 *   - one libevent loop per worker thread (default: online CPUs), each with
 *     its own listening socket bound with SO_REUSEPORT to the same
 *     127.0.0.1 port, so the kernel spreads connections over the workers;
 *   - evhttp serves the downstream side; each worker keeps its own pool of
 *     keep-alive evhttp_connections to the upstream (one request at a time
 *     per connection; the pool grows up to --pool-max);
 *   - one circuit_breaker shared by all workers, with the failure-rate preset
 *     and circuit_classify_http.
 *
 * Every upstream call follows the library's idiom, asynchronously:
 *   circuit_allow -> rejected: 503 at once, Retry-After from
 *   circuit_retry_after_s (none while isolated), body from
 *   circuit_rejection_format; admitted: the ticket lives in the per-request
 *   struct (struct fwd), the request is forwarded, and the ticket is settled
 *   with circuit_done in the upstream callback (the result is the upstream's
 *   status, or -ETIMEDOUT / -ECONNREFUSED / -ECONNRESET / -ECANCELED). A
 *   request torn down without an upstream answer (the proxy shuts down, the
 *   request could not be sent) is settled with circuit_release.
 *
 * The open period backs off: circuit_backoff_exponential from the presets
 * doubles it at each reopen, from --open-for-ms up to --open-for-max-ms, each
 * period cut by up to --backoff-jitter, deterministically in (--backoff-seed,
 * generation).
 *
 * The admin port (--admin-port; served by worker 0's loop, never forwarded,
 * never counted):
 *   GET  /metrics            the breaker's circuit_get_stats in the Prometheus
 *                            text format, then the proxy's own counters
 *   POST /admin/isolate      circuit_isolate: every request gets 503 until reset
 *   POST /admin/reset        circuit_reset: closed at once, zero counts
 *   GET  /__stats            all counters, transitions and marks (JSON lines)
 *   GET  /__mark?phase=NAME  records a phase boundary; answers the mark line
 *   GET  /__state            the breaker's state ("off" with --no-breaker)
 *
 * On SIGTERM/SIGINT (or after --max-seconds) the proxy stops its workers and
 * writes the same JSON lines as /__stats to --stats-file.
 *
 * Only 127.0.0.1 is used, for listening and for the upstream.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>

#include "circuit.h"
#include "circuit_presets.h"
#include "circuit_prometheus.h"
#include "proxy_stats.h"

#define NS_PER_MS INT64_C(1000000)
#define NS_PER_S  INT64_C(1000000000)

/* ------------------------------------------------------------------------ */
/* Options                                                                   */

typedef struct options {
    int     listen_port;   /* 0: pick one (see --port-file) */
    int     admin_port;    /* 0: pick one (see --admin-port-file) */
    int     upstream_port;
    int     threads;
    bool    breaker;
    int     window;
    int     probes;
    int64_t min_results;
    double  ratio;
    int64_t close_after;
    int64_t open_for_ms;
    int64_t open_for_max_ms;  /* cap of the exponential backoff; = open_for_ms: fixed */
    uint64_t backoff_seed;
    double  backoff_jitter;
    int64_t probe_timeout_ms;
    int64_t upstream_timeout_ms;
    int64_t bucket_ms;
    int64_t max_seconds;   /* 0: run until signalled */
    int     pool_max;
    const char *port_file;
    const char *admin_port_file;
    const char *stats_file;
    bool    verbose;
} options;

static void usage(FILE *f)
{
    fputs(
        "usage: circuit-proxy --upstream-port PORT [options]\n"
        "  Reverse proxy on 127.0.0.1 with one circuit breaker for its upstream\n"
        "  (127.0.0.1:PORT). Every upstream request goes through the breaker.\n"
        "\n"
        "  --port PORT              listen port on 127.0.0.1 (default 0: any free port)\n"
        "  --port-file FILE         write the listen port there once serving\n"
        "  --admin-port PORT        admin port on 127.0.0.1 (/metrics, /admin/isolate,\n"
        "                           /admin/reset, /__stats, /__mark, /__state; default 0: any)\n"
        "  --admin-port-file FILE   write the admin port there once serving\n"
        "  --upstream-port PORT     upstream port on 127.0.0.1 (required)\n"
        "  --threads N              worker threads (default: online CPUs)\n"
        "  --no-breaker             forward everything (no breaker)\n"
        "  --window N               breaker window, results (default 100)\n"
        "  --probes N               probes in flight while half-open (default 2)\n"
        "  --min-results N          failure-rate policy: results needed (default 20)\n"
        "  --ratio R                failure-rate policy: failure ratio that opens (default 0.5)\n"
        "  --close-after N          failure-rate policy: probe successes that close (default 3)\n"
        "  --open-for-ms MS         first open period (default 1000)\n"
        "  --open-for-max-ms MS     open periods double at each reopen up to MS\n"
        "                           (default 8000; = --open-for-ms: a fixed period)\n"
        "  --backoff-seed N         seed of the open periods' jitter (default 1)\n"
        "  --backoff-jitter R       largest share cut off an open period, [0, 1) (default 0.2)\n"
        "  --probe-timeout-ms MS    longest a probe holds its slot (default 1000)\n"
        "  --upstream-timeout-ms MS upstream timeout, counts as a failure (default 300)\n"
        "  --bucket-ms MS           width of a stats interval (default 1000)\n"
        "  --max-seconds S          exit by itself after S seconds (default 0: never)\n"
        "  --pool-max N             upstream connections per worker (default 256)\n"
        "  --stats-file FILE        write the stats (JSON lines) there on exit\n"
        "  --verbose                log transitions on stderr\n",
        f);
}

static bool parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return false;
    *out = (int64_t)v;
    return true;
}

static bool parse_int(const char *s, int lo, int hi, int *out)
{
    int64_t v;
    if (!parse_i64(s, lo, hi, &v))
        return false;
    *out = (int)v;
    return true;
}

/* The value's range is checked by the preset's init, which names it. */
static bool parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return errno == 0 && end != s && *end == '\0';
}

static int parse_options(int argc, char **argv, options *o)
{
    enum {
        O_PORT = 256, O_PORT_FILE, O_UPSTREAM_PORT, O_THREADS, O_NO_BREAKER, O_WINDOW,
        O_PROBES, O_MIN_RESULTS, O_RATIO, O_CLOSE_AFTER, O_OPEN_FOR, O_PROBE_TIMEOUT,
        O_UPSTREAM_TIMEOUT, O_BUCKET, O_MAX_SECONDS, O_POOL_MAX, O_STATS_FILE, O_VERBOSE,
        O_HELP, O_ADMIN_PORT, O_ADMIN_PORT_FILE, O_OPEN_FOR_MAX, O_BACKOFF_SEED,
        O_BACKOFF_JITTER
    };
    static const struct option longopts[] = {
        {"port", required_argument, NULL, O_PORT},
        {"port-file", required_argument, NULL, O_PORT_FILE},
        {"upstream-port", required_argument, NULL, O_UPSTREAM_PORT},
        {"threads", required_argument, NULL, O_THREADS},
        {"no-breaker", no_argument, NULL, O_NO_BREAKER},
        {"window", required_argument, NULL, O_WINDOW},
        {"probes", required_argument, NULL, O_PROBES},
        {"min-results", required_argument, NULL, O_MIN_RESULTS},
        {"ratio", required_argument, NULL, O_RATIO},
        {"close-after", required_argument, NULL, O_CLOSE_AFTER},
        {"open-for-ms", required_argument, NULL, O_OPEN_FOR},
        {"probe-timeout-ms", required_argument, NULL, O_PROBE_TIMEOUT},
        {"upstream-timeout-ms", required_argument, NULL, O_UPSTREAM_TIMEOUT},
        {"bucket-ms", required_argument, NULL, O_BUCKET},
        {"max-seconds", required_argument, NULL, O_MAX_SECONDS},
        {"pool-max", required_argument, NULL, O_POOL_MAX},
        {"stats-file", required_argument, NULL, O_STATS_FILE},
        {"verbose", no_argument, NULL, O_VERBOSE},
        {"help", no_argument, NULL, O_HELP},
        {"admin-port", required_argument, NULL, O_ADMIN_PORT},
        {"admin-port-file", required_argument, NULL, O_ADMIN_PORT_FILE},
        {"open-for-max-ms", required_argument, NULL, O_OPEN_FOR_MAX},
        {"backoff-seed", required_argument, NULL, O_BACKOFF_SEED},
        {"backoff-jitter", required_argument, NULL, O_BACKOFF_JITTER},
        {NULL, 0, NULL, 0},
    };
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    *o = (options){
        .listen_port = 0,
        .upstream_port = -1,
        .threads = ncpu > 0 ? (int)(ncpu < 256 ? ncpu : 256) : 1,
        .breaker = true,
        .window = 100,
        .probes = 2,
        .min_results = 20,
        .ratio = 0.5,
        .close_after = 3,
        .open_for_ms = 1000,
        .open_for_max_ms = -1,  /* default: 8 x open_for_ms, see below */
        .backoff_seed = 1,
        .backoff_jitter = 0.2,
        .probe_timeout_ms = 1000,
        .upstream_timeout_ms = 300,
        .bucket_ms = 1000,
        .max_seconds = 0,
        .pool_max = 256,
    };
    int c;
    bool ok = true;
    const int64_t day_ms = INT64_C(86400000);
    while (ok && (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case O_PORT: ok = parse_int(optarg, 0, 65535, &o->listen_port); break;
        case O_PORT_FILE: o->port_file = optarg; break;
        case O_UPSTREAM_PORT: ok = parse_int(optarg, 1, 65535, &o->upstream_port); break;
        case O_THREADS: ok = parse_int(optarg, 1, 256, &o->threads); break;
        case O_NO_BREAKER: o->breaker = false; break;
        case O_WINDOW: ok = parse_int(optarg, 1, CIRCUIT_MAX_COUNT, &o->window); break;
        case O_PROBES: ok = parse_int(optarg, 1, CIRCUIT_MAX_COUNT, &o->probes); break;
        case O_MIN_RESULTS: ok = parse_i64(optarg, 1, CIRCUIT_MAX_COUNT, &o->min_results); break;
        case O_RATIO: ok = parse_double(optarg, &o->ratio); break;
        case O_BACKOFF_JITTER: ok = parse_double(optarg, &o->backoff_jitter); break;
        case O_CLOSE_AFTER: ok = parse_i64(optarg, 1, CIRCUIT_MAX_COUNT, &o->close_after); break;
        case O_OPEN_FOR: ok = parse_i64(optarg, 1, day_ms, &o->open_for_ms); break;
        case O_OPEN_FOR_MAX: ok = parse_i64(optarg, 1, day_ms, &o->open_for_max_ms); break;
        case O_BACKOFF_SEED: {
            int64_t v;
            ok = parse_i64(optarg, 0, INT64_MAX, &v);
            o->backoff_seed = (uint64_t)v;
            break;
        }
        case O_ADMIN_PORT: ok = parse_int(optarg, 0, 65535, &o->admin_port); break;
        case O_ADMIN_PORT_FILE: o->admin_port_file = optarg; break;
        case O_PROBE_TIMEOUT: ok = parse_i64(optarg, 1, day_ms, &o->probe_timeout_ms); break;
        case O_UPSTREAM_TIMEOUT: ok = parse_i64(optarg, 1, day_ms, &o->upstream_timeout_ms); break;
        case O_BUCKET: ok = parse_i64(optarg, 10, 60000, &o->bucket_ms); break;
        case O_MAX_SECONDS: ok = parse_i64(optarg, 0, 86400, &o->max_seconds); break;
        case O_POOL_MAX: ok = parse_int(optarg, 1, 65536, &o->pool_max); break;
        case O_STATS_FILE: o->stats_file = optarg; break;
        case O_VERBOSE: o->verbose = true; break;
        case 'h':
        case O_HELP: usage(stdout); exit(0);
        default: usage(stderr); return -1;
        }
        if (!ok)
            fprintf(stderr, "circuit-proxy: invalid value for --%s: '%s'\n",
                    longopts[c - O_PORT].name, optarg);
    }
    if (!ok)
        return -1;
    if (optind != argc) {
        fprintf(stderr, "circuit-proxy: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (o->open_for_max_ms < 0)
        o->open_for_max_ms = o->open_for_ms * 8;
    if (o->open_for_max_ms < o->open_for_ms) {
        fputs("circuit-proxy: --open-for-max-ms must be at least --open-for-ms\n", stderr);
        return -1;
    }
    if (o->upstream_port < 0) {
        fputs("circuit-proxy: --upstream-port is required\n", stderr);
        usage(stderr);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Process-wide state                                                        */

struct worker;

typedef struct proxy {
    options              opt;
    circuit_breaker     *breaker;   /* NULL with --no-breaker */
    circuit_failure_rate rate;      /* the policy's argument: outlives the breaker */
    circuit_backoff_exponential backoff; /* the open_for function's argument: likewise */
    proxy_stats          stats;
    struct evhttp       *admin;     /* on worker 0's loop */
    int                  admin_fd;
    int64_t              upstream_timeout_ns;
    char                 upstream_host[32];  /* "127.0.0.1:PORT", the Host header */
    struct worker       *workers;
    int                  nworkers;
} proxy;

/* One upstream connection of a worker's pool: one request at a time. */
typedef struct upconn {
    struct evhttp_connection *evcon;
    bool                      busy;
} upconn;

/* One downstream request being forwarded. Owned by its worker thread. */
typedef struct fwd {
    struct fwd             *prev, *next;   /* the worker's in-flight list */
    struct worker          *w;
    struct evhttp_request  *down;          /* the client's request */
    struct evhttp_request  *up;            /* the upstream request, while libevent holds it */
    upconn                 *conn;
    struct event           *watch;         /* client-gone detection */
    circuit_ticket          ticket;        /* the breaker's ticket (breaker on) */
    bool                    guarded;       /* ticket admitted and not yet settled */
    bool                    up_failed;     /* the upstream error callback ran */
    enum evhttp_request_error up_error;
    int64_t                 sent_ns;
} fwd;

typedef struct worker {
    proxy              *px;
    int                 index;
    pthread_t           thread;
    struct event_base  *base;
    struct evhttp      *http;
    int                 listen_fd;
    int                 wake[2];           /* pipe: the main thread asks the loop to stop */
    struct event       *wake_ev;
    upconn             *pool;              /* pool_max entries, pool_len in use */
    int                 pool_len;
    fwd                *inflight;
} worker;

/* ------------------------------------------------------------------------ */
/* Breaker callbacks                                                         */

/* The classifier: our result codes are HTTP statuses or negative errnos
 * (-ETIMEDOUT, -ECONNREFUSED, -ECONNRESET: failures; -ECANCELED: the client
 * left, ignored), which is exactly what circuit_classify_http maps. The
 * wrapper only tallies the outcomes for the stats. */
static circuit_outcome proxy_classify(void *arg, void *call_ctx, int result)
{
    proxy *px = arg;
    circuit_outcome o = circuit_classify_http(NULL, call_ctx, result);
    proxy_stats_outcome(&px->stats, o);
    return o;
}

static void proxy_observe(void *arg, void *call_ctx, const circuit_transition *t)
{
    proxy *px = arg;
    (void)call_ctx;
    proxy_stats_transition(&px->stats, t);
    if (px->opt.verbose) {
        double at = (double)(proxy_now_ns() - px->stats.t0_ns) / 1e9;
        fprintf(stderr,
                "circuit-proxy: %9.3f s  %s -> %s  (generation %" PRIu64 ", %s%s%.3f s"
                "; successes %" PRId64 ", failures %" PRId64 ", timed out %" PRId64 ")\n",
                at, circuit_state_name(t->from), circuit_state_name(t->to), t->generation,
                proxy_cause_name(t->cause), t->to == CIRCUIT_OPEN ? ", open for " : "",
                (double)t->open_for_ns / 1e9, t->counts.successes, t->counts.failures,
                t->counts.timed_out);
    }
}

/* The breaker's stats into *out; NULL with --no-breaker. */
static const circuit_stats *breaker_stats(const proxy *px, circuit_stats *out)
{
    if (px->breaker == NULL)
        return NULL;
    circuit_get_stats(px->breaker, out);
    return out;
}

/* ------------------------------------------------------------------------ */
/* Replies                                                                   */

static void reply_text(struct evhttp_request *req, int code, const char *reason,
                       const char *text)
{
    struct evbuffer *body = evbuffer_new();
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "text/plain; charset=utf-8");
    if (body != NULL)
        evbuffer_add(body, text, strlen(text));
    evhttp_send_reply(req, code, reason, body);
    if (body != NULL)
        evbuffer_free(body);
}

static void reply_rejected(struct evhttp_request *req, const circuit_rejection *rej)
{
    char text[160];
    int n = circuit_rejection_format(rej, text, sizeof text - 1);
    if (n < 0)
        snprintf(text, sizeof text, "circuit rejected the call");
    size_t len = strlen(text);
    text[len] = '\n';
    text[len + 1] = '\0';
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    /* Open: the time left, rounded up; half-open: 1; isolated: 0, no header
     * (an operator holds the breaker, no time is known). */
    int64_t retry_s = circuit_retry_after_s(rej);
    if (retry_s > 0) {
        char retry[24];
        snprintf(retry, sizeof retry, "%" PRId64, retry_s);
        evhttp_add_header(h, "Retry-After", retry);
    }
    evhttp_add_header(h, "X-Circuit-State", circuit_state_name(rej->state));
    reply_text(req, 503, "Service Unavailable", text);
}

/* ------------------------------------------------------------------------ */
/* Upstream connection pool (per worker, no locking)                         */

static upconn *pool_acquire(worker *w)
{
    for (int i = 0; i < w->pool_len; i++) {
        if (!w->pool[i].busy) {
            w->pool[i].busy = true;
            return &w->pool[i];
        }
    }
    if (w->pool_len >= w->px->opt.pool_max)
        return NULL;
    struct evhttp_connection *evcon = evhttp_connection_base_new(
        w->base, NULL, "127.0.0.1", (unsigned short)w->px->opt.upstream_port);
    if (evcon == NULL)
        return NULL;
    struct timeval tv = {
        .tv_sec = (time_t)(w->px->opt.upstream_timeout_ms / 1000),
        .tv_usec = (suseconds_t)(w->px->opt.upstream_timeout_ms % 1000 * 1000),
    };
    evhttp_connection_set_timeout_tv(evcon, &tv);  /* connect, write and read */
    evhttp_connection_set_retries(evcon, 0);        /* a failure is the breaker's business */
    upconn *c = &w->pool[w->pool_len++];
    c->evcon = evcon;
    c->busy = true;
    return c;
}

/* ------------------------------------------------------------------------ */
/* Forwarding                                                                */

static void fwd_link(fwd *f)
{
    worker *w = f->w;
    f->prev = NULL;
    f->next = w->inflight;
    if (w->inflight != NULL)
        w->inflight->prev = f;
    w->inflight = f;
}

/* Detaches f from everything it holds except the ticket and the downstream
 * request, and frees nothing. */
static void fwd_unlink(fwd *f)
{
    worker *w = f->w;
    if (f->prev != NULL)
        f->prev->next = f->next;
    else if (w->inflight == f)
        w->inflight = f->next;
    if (f->next != NULL)
        f->next->prev = f->prev;
    f->prev = f->next = NULL;
    if (f->watch != NULL) {
        event_free(f->watch);
        f->watch = NULL;
    }
    if (f->conn != NULL) {
        f->conn->busy = false;
        f->conn = NULL;
    }
}

/* Settles the ticket with the call's result (breaker on). */
static void fwd_settle(fwd *f, int result)
{
    if (f->guarded) {
        f->guarded = false;
        circuit_done(&f->ticket, result);
    }
}

/* Settles the ticket without a result: the request was torn down without an
 * upstream answer. */
static void fwd_abandon(fwd *f)
{
    if (f->guarded) {
        f->guarded = false;
        circuit_release(&f->ticket);
    }
}

static void on_upstream_error(enum evhttp_request_error error, void *arg)
{
    fwd *f = arg;
    f->up_failed = true;
    f->up_error = error;
}

/* The upstream answered, failed or timed out. libevent frees `up` after this
 * returns. `up` is NULL after a timeout, a reset or EOF (the error callback
 * ran first); it has response code 0 when the connection could not be made
 * (refused, or the connect timed out; the error callback did not run). */
static void on_upstream_done(struct evhttp_request *up, void *arg)
{
    fwd *f = arg;
    worker *w = f->w;
    proxy *px = w->px;
    int code = up != NULL ? evhttp_request_get_response_code(up) : 0;
    int result;
    proxy_kind kind;

    f->up = NULL;
    if (code > 0) {
        result = code;
        kind = (code >= 500 || code == 429) ? PK_HTTP_ERROR : PK_OK;
    } else {
        int64_t elapsed = proxy_now_ns() - f->sent_ns;
        bool timed_out = f->up_failed ? f->up_error == EVREQ_HTTP_TIMEOUT
                                      : elapsed >= px->upstream_timeout_ns * 9 / 10;
        if (timed_out) {
            result = -ETIMEDOUT;
            kind = PK_TIMEOUT;
        } else {
            result = f->up_failed ? -ECONNRESET : -ECONNREFUSED;
            kind = PK_CONN_ERROR;
        }
    }

    /* The idiom: settle straight after the call. */
    fwd_settle(f, result);
    fwd_unlink(f);
    proxy_stats_count(&px->stats, kind);

    if (code > 0) {
        const char *ctype = evhttp_find_header(evhttp_request_get_input_headers(up),
                                               "Content-Type");
        if (ctype != NULL)
            evhttp_add_header(evhttp_request_get_output_headers(f->down), "Content-Type", ctype);
        evhttp_send_reply(f->down, code, evhttp_request_get_response_code_line(up),
                          evhttp_request_get_input_buffer(up));
    } else if (kind == PK_TIMEOUT) {
        reply_text(f->down, 504, "Gateway Timeout", "upstream timed out\n");
    } else {
        reply_text(f->down, 502, "Bad Gateway", "upstream connection failed\n");
    }
    free(f);
}

/* Cancels the upstream request of f (if libevent still holds it). The done
 * callback does not run for a cancelled request; the error callback runs
 * synchronously with EVREQ_HTTP_REQUEST_CANCEL. */
static void fwd_cancel_upstream(fwd *f)
{
    struct evhttp_request *up = f->up;
    f->up = NULL;
    if (up != NULL)
        evhttp_cancel_request(up);
}

/* The client's socket became readable while we wait for the upstream: either
 * it closed (gone: cancel the upstream call, ignored by the classifier) or it
 * sent more data (pipelining: stop watching). */
static void on_client_readable(evutil_socket_t fd, short what, void *arg)
{
    fwd *f = arg;
    char byte;
    (void)what;
    ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) {
        event_del(f->watch);
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;

    proxy *px = f->w->px;
    fwd_cancel_upstream(f);
    fwd_settle(f, -ECANCELED);
    fwd_unlink(f);
    proxy_stats_count(&px->stats, PK_CANCELLED);
    /* Nobody reads this; sending it lets evhttp free the connection. */
    reply_text(f->down, 499, "Client Closed Request", "client closed the request\n");
    free(f);
}

static void forward(fwd *f)
{
    worker *w = f->w;
    proxy *px = w->px;
    struct evhttp_request *down = f->down;

    f->conn = pool_acquire(w);
    struct evhttp_request *up =
        f->conn != NULL ? evhttp_request_new(on_upstream_done, f) : NULL;
    if (up == NULL) {
        fwd_abandon(f);
        fwd_unlink(f);
        proxy_stats_count(&px->stats, PK_LOCAL_ERROR);
        reply_text(down, 502, "Bad Gateway", "proxy: no upstream connection available\n");
        free(f);
        return;
    }
    evhttp_request_set_error_cb(up, on_upstream_error);

    struct evkeyvalq *out = evhttp_request_get_output_headers(up);
    evhttp_add_header(out, "Host", px->upstream_host);
    const char *ctype = evhttp_find_header(evhttp_request_get_input_headers(down),
                                           "Content-Type");
    if (ctype != NULL)
        evhttp_add_header(out, "Content-Type", ctype);
    struct evbuffer *in = evhttp_request_get_input_buffer(down);
    if (evbuffer_get_length(in) > 0)
        evbuffer_add_buffer(evhttp_request_get_output_buffer(up), in);

    /* Watch the client socket: a client that leaves cancels the call. */
    struct evhttp_connection *dcon = evhttp_request_get_connection(down);
    struct bufferevent *dbev = dcon != NULL ? evhttp_connection_get_bufferevent(dcon) : NULL;
    evutil_socket_t dfd = dbev != NULL ? bufferevent_getfd(dbev) : -1;
    if (dfd >= 0) {
        f->watch = event_new(w->base, dfd, EV_READ | EV_PERSIST, on_client_readable, f);
        if (f->watch != NULL)
            event_add(f->watch, NULL);
    }

    f->up = up;
    f->sent_ns = proxy_now_ns();
    fwd_link(f);
    proxy_stats_count(&px->stats, PK_UPSTREAM);
    /* The done callback may run before this returns (a refused loopback
     * connect fails at once): f must not be touched after a 0 return. */
    if (evhttp_make_request(f->conn->evcon, up, evhttp_request_get_command(down),
                            evhttp_request_get_uri(down)) != 0) {
        /* Not sent and no callback ran; libevent may or may not have freed
         * `up` (it depends on where it failed), so it is not touched. */
        f->up = NULL;
        fwd_abandon(f);
        fwd_unlink(f);
        proxy_stats_count(&px->stats, PK_LOCAL_ERROR);
        reply_text(down, 502, "Bad Gateway", "proxy: could not send the upstream request\n");
        free(f);
    }
}

/* ------------------------------------------------------------------------ */
/* The admin port                                                            */

static bool valid_phase_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > PROXY_MARK_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || c == '.';
        if (!ok)
            return false;
    }
    return true;
}

static void reply_memstream(struct evhttp_request *req, const char *ctype, char *data,
                            size_t len)
{
    struct evbuffer *body = evbuffer_new();
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", ctype);
    if (body != NULL)
        evbuffer_add(body, data, len);
    evhttp_send_reply(req, 200, "OK", body);
    if (body != NULL)
        evbuffer_free(body);
}

/* /metrics: the breaker's stats in the Prometheus text format (the
 * library's formatter; the breaker="127.0.0.1:PORT" label names the upstream),
 * then the proxy's own counters. */
static void write_metrics(proxy *px, FILE *m)
{
    circuit_stats st;
    if (breaker_stats(px, &st) != NULL) {
        char buf[4096];
        int n = circuit_stats_format_prometheus(&st, px->upstream_host, buf, sizeof buf);
        if (n >= 0 && (size_t)n < sizeof buf) {
            fwrite(buf, 1, (size_t)n, m);
        } else if (n >= 0) {
            char *big = malloc((size_t)n + 1);
            if (big != NULL &&
                circuit_stats_format_prometheus(&st, px->upstream_host, big, (size_t)n + 1) == n)
                fwrite(big, 1, (size_t)n, m);
            free(big);
        }
    }
    proxy_stats_write_prometheus(&px->stats, m);
}

/* POST /admin/isolate and /admin/reset: 200 when the call changed the state,
 * 409 when the breaker already was isolated (closed). The body is one JSON
 * line: the action, its result and a snapshot taken right after the call
 * (the breaker's circuit_get_stats and the proxy's counters), so that a
 * client can tell what happened after the call from what happened before. */
static void admin_operator(proxy *px, struct evhttp_request *req, bool isolate)
{
    if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "POST");
        reply_text(req, 405, "Method Not Allowed", "use POST\n");
        return;
    }
    if (px->breaker == NULL) {
        reply_text(req, 409, "Conflict", "no breaker (--no-breaker)\n");
        return;
    }
    int rc = isolate ? circuit_isolate(px->breaker, NULL) : circuit_reset(px->breaker, NULL);
    circuit_stats st;
    proxy_mark snap;
    proxy_stats_snapshot(&px->stats, isolate ? "isolate" : "reset", breaker_stats(px, &st),
                         &snap);
    char *data = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&data, &len);
    if (m == NULL) {
        reply_text(req, 500, "Internal Server Error", "out of memory\n");
        return;
    }
    proxy_stats_write_operator(m, &snap, rc == 0 ? "done" : "already");
    fclose(m);
    struct evbuffer *body = evbuffer_new();
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/json");
    if (body != NULL)
        evbuffer_add(body, data, len);
    if (rc == 0)
        evhttp_send_reply(req, 200, "OK", body);
    else
        evhttp_send_reply(req, 409, "Conflict", body);
    if (body != NULL)
        evbuffer_free(body);
    free(data);
    if (px->opt.verbose)
        fprintf(stderr, "circuit-proxy: %9.3f s  operator: %s: %s\n",
                (double)snap.t_ns / 1e9, isolate ? "isolate" : "reset",
                rc == 0 ? "done" : "already so");
}

static void on_admin_request(struct evhttp_request *req, void *arg)
{
    proxy *px = arg;
    const struct evhttp_uri *parsed = evhttp_request_get_evhttp_uri(req);
    const char *path = parsed != NULL ? evhttp_uri_get_path(parsed) : NULL;
    circuit_stats st;
    char *data = NULL;
    size_t len = 0;

    if (path == NULL) {
        reply_text(req, 400, "Bad Request", "no path\n");
        return;
    }
    if (strcmp(path, "/admin/isolate") == 0 || strcmp(path, "/admin/reset") == 0) {
        admin_operator(px, req, strcmp(path, "/admin/isolate") == 0);
        return;
    }
    if (strcmp(path, "/__state") == 0) {
        char text[32];
        snprintf(text, sizeof text, "%s\n",
                 px->breaker != NULL ? circuit_state_name(circuit_get_state(px->breaker))
                                     : "off");
        reply_text(req, 200, "OK", text);
        return;
    }
    if (strcmp(path, "/metrics") == 0 || strcmp(path, "/__stats") == 0) {
        bool metrics = path[1] == 'm';
        FILE *m = open_memstream(&data, &len);
        if (m == NULL) {
            reply_text(req, 500, "Internal Server Error", "out of memory\n");
            return;
        }
        if (metrics)
            write_metrics(px, m);
        else
            proxy_stats_write(&px->stats, m, breaker_stats(px, &st));
        fclose(m);
        reply_memstream(req, metrics ? "text/plain; version=0.0.4; charset=utf-8"
                                     : "application/x-ndjson",
                        data, len);
        free(data);
        return;
    }
    if (strcmp(path, "/__mark") == 0) {
        struct evkeyvalq q;
        const char *query = evhttp_uri_get_query(parsed);
        char phase[PROXY_MARK_NAME_MAX + 1] = "";
        if (query != NULL && evhttp_parse_query_str(query, &q) == 0) {
            const char *v = evhttp_find_header(&q, "phase");
            if (v != NULL && valid_phase_name(v))
                snprintf(phase, sizeof phase, "%s", v);
            evhttp_clear_headers(&q);
        }
        if (phase[0] == '\0') {
            reply_text(req, 400, "Bad Request",
                       "usage: /__mark?phase=NAME (1-31 of [A-Za-z0-9_.-])\n");
            return;
        }
        proxy_mark mark;
        int idx = proxy_stats_mark(&px->stats, phase, breaker_stats(px, &st), &mark);
        if (idx < 0) {
            reply_text(req, 507, "Insufficient Storage", "mark log full\n");
            return;
        }
        FILE *m = open_memstream(&data, &len);
        if (m == NULL) {
            reply_text(req, 500, "Internal Server Error", "out of memory\n");
            return;
        }
        proxy_stats_write_mark(m, &mark);
        fclose(m);
        reply_memstream(req, "application/x-ndjson", data, len);
        free(data);
        return;
    }
    reply_text(req, 404, "Not Found",
               "unknown admin path (/metrics, /admin/isolate, /admin/reset, /__stats, "
               "/__mark, /__state)\n");
}

/* ------------------------------------------------------------------------ */
/* Request entry point                                                       */

static void on_request(struct evhttp_request *req, void *arg)
{
    worker *w = arg;
    proxy *px = w->px;

    fwd *f = calloc(1, sizeof *f);
    if (f == NULL) {
        proxy_stats_count(&px->stats, PK_LOCAL_ERROR);
        reply_text(req, 502, "Bad Gateway", "proxy: out of memory\n");
        return;
    }
    f->w = w;
    f->down = req;
    f->ticket = (circuit_ticket)CIRCUIT_TICKET_INIT;

    if (px->breaker != NULL) {
        circuit_rejection rej;
        if (!circuit_allow(px->breaker, f, &f->ticket, &rej)) {
            free(f);
            proxy_stats_count(&px->stats, PK_REJECTED);
            reply_rejected(req, &rej);   /* failed fast */
            return;
        }
        f->guarded = true;               /* settled by done, or released */
    }
    forward(f);
}

/* ------------------------------------------------------------------------ */
/* Workers                                                                   */

/* Shutdown: every request still waiting for the upstream is torn down
 * without a result (circuit_release), then the loop stops. */
static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    worker *w = arg;
    char buf[16];
    (void)what;
    while (read(fd, buf, sizeof buf) > 0) {
    }
    while (w->inflight != NULL) {
        fwd *f = w->inflight;
        fwd_cancel_upstream(f);
        fwd_abandon(f);
        fwd_unlink(f);
        reply_text(f->down, 503, "Service Unavailable", "proxy shutting down\n");
        free(f);
    }
    event_base_loopbreak(w->base);
}

static int listen_socket(int port, int *bound_port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 1024) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &alen) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    *bound_port = ntohs(a.sin_port);
    return fd;
}

static int worker_setup(worker *w, int port, int *bound_port)
{
    w->base = event_base_new();
    w->http = w->base != NULL ? evhttp_new(w->base) : NULL;
    w->pool = calloc((size_t)w->px->opt.pool_max, sizeof *w->pool);
    if (w->http == NULL || w->pool == NULL) {
        fprintf(stderr, "circuit-proxy: worker %d: out of memory\n", w->index);
        return -1;
    }
    w->listen_fd = listen_socket(port, bound_port);
    if (w->listen_fd < 0) {
        fprintf(stderr, "circuit-proxy: cannot listen on 127.0.0.1:%d: %s\n", port,
                strerror(errno));
        return -1;
    }
    if (evhttp_accept_socket(w->http, w->listen_fd) != 0) {
        fprintf(stderr, "circuit-proxy: worker %d: evhttp_accept_socket failed\n", w->index);
        return -1;
    }
    evhttp_set_gencb(w->http, on_request, w);
    evhttp_set_allowed_methods(w->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                            EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE);
    evhttp_set_timeout(w->http, 60);
    if (pipe(w->wake) != 0) {
        fprintf(stderr, "circuit-proxy: pipe: %s\n", strerror(errno));
        return -1;
    }
    evutil_make_socket_nonblocking(w->wake[0]);
    w->wake_ev = event_new(w->base, w->wake[0], EV_READ | EV_PERSIST, on_wake, w);
    if (w->wake_ev == NULL || event_add(w->wake_ev, NULL) != 0) {
        fprintf(stderr, "circuit-proxy: worker %d: cannot watch its wake pipe\n", w->index);
        return -1;
    }
    return 0;
}

static void worker_teardown(worker *w)
{
    if (w->wake_ev != NULL)
        event_free(w->wake_ev);
    for (int i = 0; i < w->pool_len; i++)
        evhttp_connection_free(w->pool[i].evcon);
    if (w->http != NULL)
        evhttp_free(w->http);  /* closes the listening socket too */
    if (w->base != NULL)
        event_base_free(w->base);
    if (w->wake[0] >= 0) {
        close(w->wake[0]);
        close(w->wake[1]);
    }
    free(w->pool);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    event_base_dispatch(w->base);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Main                                                                      */

static int write_file_atomically(const char *path, void (*fill)(FILE *, void *), void *arg)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return -1;
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return -1;
    fill(f, arg);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

static void fill_port(FILE *f, void *arg)
{
    fprintf(f, "%d\n", *(int *)arg);
}

static void fill_stats(FILE *f, void *arg)
{
    proxy *px = arg;
    circuit_stats st;
    proxy_stats_write(&px->stats, f, breaker_stats(px, &st));
}

static int build_breaker(proxy *px)
{
    const options *o = &px->opt;
    char err[512];
    circuit_config cfg = {
        .window = o->window,
        .probes = o->probes,
        .open_for_ns = o->open_for_ms * NS_PER_MS,
        .probe_timeout_ns = o->probe_timeout_ms * NS_PER_MS,
    };
    int rc = circuit_failure_rate_init(&px->rate, &cfg, o->min_results, o->ratio,
                                       o->close_after, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "circuit-proxy: failure-rate policy: %s\n", err);
        return -1;
    }
    rc = circuit_backoff_exponential_init(&px->backoff, cfg.open_for_ns,
                                          o->open_for_max_ms * NS_PER_MS, o->backoff_jitter,
                                          o->backoff_seed, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "circuit-proxy: open-period backoff: %s\n", err);
        return -1;
    }
    circuit_spec spec = {
        .config = cfg,
        .policy = circuit_failure_rate_policy(&px->rate),
        .classify = proxy_classify,
        .classify_arg = px,
        .observe = proxy_observe,
        .observe_arg = px,
    };
    circuit_backoff_exponential_use(&spec, &px->backoff);
    rc = circuit_new(&px->breaker, &spec, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "circuit-proxy: circuit_new: %s\n", rc == EINVAL ? err : strerror(rc));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static proxy px;  /* static: the policy argument must outlive the breaker */
    if (parse_options(argc, argv, &px.opt) != 0)
        return 2;
    const options *o = &px.opt;
    px.upstream_timeout_ns = o->upstream_timeout_ms * NS_PER_MS;
    snprintf(px.upstream_host, sizeof px.upstream_host, "127.0.0.1:%d", o->upstream_port);

    /* Signals: SIGPIPE ignored (writes to clients that left); SIGTERM, SIGINT
     * and SIGHUP are taken by the main thread with sigtimedwait, so they are
     * blocked before any worker thread starts. */
    signal(SIGPIPE, SIG_IGN);
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);

    int64_t span_s = o->max_seconds > 0 ? o->max_seconds + 10 : 3600;
    if (proxy_stats_init(&px.stats, o->bucket_ms * NS_PER_MS, span_s * NS_PER_S) != 0) {
        fputs("circuit-proxy: out of memory\n", stderr);
        return 1;
    }
    if (o->breaker && build_breaker(&px) != 0)
        return 1;

    px.nworkers = o->threads;
    px.workers = calloc((size_t)px.nworkers, sizeof *px.workers);
    if (px.workers == NULL) {
        fputs("circuit-proxy: out of memory\n", stderr);
        return 1;
    }
    int port = o->listen_port;
    for (int i = 0; i < px.nworkers; i++) {
        worker *w = &px.workers[i];
        w->px = &px;
        w->index = i;
        w->listen_fd = -1;
        w->wake[0] = w->wake[1] = -1;
        if (worker_setup(w, port, &port) != 0)
            return 1;
    }
    /* The admin port, served by worker 0's loop (set up before that loop runs). */
    int admin_port = o->admin_port;
    px.admin_fd = listen_socket(admin_port, &admin_port);
    px.admin = evhttp_new(px.workers[0].base);
    if (px.admin_fd < 0 || px.admin == NULL || evhttp_accept_socket(px.admin, px.admin_fd) != 0) {
        fprintf(stderr, "circuit-proxy: cannot serve the admin port 127.0.0.1:%d: %s\n",
                o->admin_port, strerror(errno));
        return 1;
    }
    evhttp_set_gencb(px.admin, on_admin_request, &px);
    evhttp_set_allowed_methods(px.admin, EVHTTP_REQ_GET | EVHTTP_REQ_POST);
    for (int i = 0; i < px.nworkers; i++) {
        int rc = pthread_create(&px.workers[i].thread, NULL, worker_main, &px.workers[i]);
        if (rc != 0) {
            fprintf(stderr, "circuit-proxy: pthread_create: %s\n", strerror(rc));
            return 1;
        }
    }
    if (o->port_file != NULL && write_file_atomically(o->port_file, fill_port, &port) != 0) {
        fprintf(stderr, "circuit-proxy: cannot write %s: %s\n", o->port_file, strerror(errno));
        return 1;
    }
    if (o->admin_port_file != NULL &&
        write_file_atomically(o->admin_port_file, fill_port, &admin_port) != 0) {
        fprintf(stderr, "circuit-proxy: cannot write %s: %s\n", o->admin_port_file,
                strerror(errno));
        return 1;
    }
    fprintf(stderr,
            "circuit-proxy: 127.0.0.1:%d -> 127.0.0.1:%d, admin 127.0.0.1:%d, %d workers, "
            "breaker %s (window %d, probes %d, min results %" PRId64 ", ratio %g, close after "
            "%" PRId64 ", open %" PRId64 "..%" PRId64 " ms (jitter %g, seed %" PRIu64 "), probe "
            "timeout %" PRId64 " ms), upstream timeout %" PRId64 " ms\n",
            port, o->upstream_port, admin_port, px.nworkers, o->breaker ? "on" : "OFF",
            o->window, o->probes, o->min_results, o->ratio, o->close_after, o->open_for_ms,
            o->open_for_max_ms, o->backoff_jitter, o->backoff_seed, o->probe_timeout_ms,
            o->upstream_timeout_ms);

    /* Wait for a stop signal or the deadline. */
    int64_t deadline = o->max_seconds > 0 ? proxy_now_ns() + o->max_seconds * NS_PER_S : 0;
    for (;;) {
        int sig;
        if (deadline == 0) {
            if (sigwait(&stop, &sig) == 0)
                break;
            continue;
        }
        int64_t left = deadline - proxy_now_ns();
        if (left <= 0) {
            fprintf(stderr, "circuit-proxy: --max-seconds %" PRId64 " reached, stopping\n",
                    o->max_seconds);
            break;
        }
        struct timespec ts = {.tv_sec = (time_t)(left / NS_PER_S),
                              .tv_nsec = (long)(left % NS_PER_S)};
        sig = sigtimedwait(&stop, NULL, &ts);
        if (sig > 0)
            break;
    }

    for (int i = 0; i < px.nworkers; i++) {
        ssize_t n = write(px.workers[i].wake[1], "x", 1);
        (void)n;
    }
    for (int i = 0; i < px.nworkers; i++)
        pthread_join(px.workers[i].thread, NULL);

    int rc = 0;
    if (o->stats_file != NULL && write_file_atomically(o->stats_file, fill_stats, &px) != 0) {
        fprintf(stderr, "circuit-proxy: cannot write %s: %s\n", o->stats_file, strerror(errno));
        rc = 1;
    }
    evhttp_free(px.admin);  /* closes the admin socket; before worker 0's loop goes */
    for (int i = 0; i < px.nworkers; i++)
        worker_teardown(&px.workers[i]);
    free(px.workers);
    circuit_free(px.breaker);
    proxy_stats_destroy(&px.stats);
    return rc;
}
