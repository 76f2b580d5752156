/*
 * proxy_stats: the counters and logs of circuit-proxy (bench/e2e).
 *
 * SPDX-License-Identifier: MIT
 *
 * Everything here may be written from every worker thread at once without a
 * lock, except the phase marks (rare, made by the scenario runner), which
 * take a mutex:
 *   - per-kind totals and per-interval buckets: relaxed atomic adds;
 *   - the transition log: append-only; a writer reserves an index with a
 *     fetch-add, fills the entry and publishes it with a release store of
 *     its `ready` flag; a reader loads `ready` with acquire and skips entries
 *     not yet published.
 *
 * Times are CLOCK_MONOTONIC nanoseconds relative to the moment the stats were
 * initialised (proxy start). The output is JSON lines (one object per line),
 * read by e2e_report.py.
 */
#ifndef CIRCUIT_PROXY_STATS_H
#define CIRCUIT_PROXY_STATS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "circuit.h"

/** What happened to one downstream request (or one upstream attempt). */
typedef enum proxy_kind {
    PK_OK = 0,      /**< upstream answered with a success status, forwarded */
    PK_HTTP_ERROR,  /**< upstream answered 5xx or 429, forwarded */
    PK_CONN_ERROR,  /**< connect refused, reset or EOF before a response: 502 */
    PK_TIMEOUT,     /**< no response within the upstream timeout: 504 */
    PK_REJECTED,    /**< the breaker rejected the call: 503 at once */
    PK_CANCELLED,   /**< the client went away before the upstream answered */
    PK_LOCAL_ERROR, /**< the proxy could not forward (no connection slot, OOM) */
    PK_UPSTREAM,    /**< requests sent (or attempted) to the upstream */
    PK__COUNT
} proxy_kind;

/** JSON key of each kind. */
const char *proxy_kind_name(proxy_kind k);

/** Capacity of the transition log; later transitions are counted as dropped. */
#define PROXY_TLOG_CAP 8192
/** Capacity of the phase-mark log; later marks are refused. */
#define PROXY_MARK_CAP 256
/** Longest phase name kept (bytes, without the NUL). */
#define PROXY_MARK_NAME_MAX 31

typedef struct proxy_tlog_entry {
    _Atomic int        ready;  /* 1 once the entry is filled (release) */
    int64_t            t_ns;
    circuit_transition tr;
} proxy_tlog_entry;

typedef struct proxy_mark {
    int64_t       t_ns;
    char          name[PROXY_MARK_NAME_MAX + 1];
    bool          has_breaker;          /* false with --no-breaker */
    circuit_stats breaker;              /* circuit_get_stats at the mark */
    uint64_t      totals[PK__COUNT];     /* cumulative, at the mark */
} proxy_mark;

typedef struct proxy_stats {
    int64_t           t0_ns;       /* CLOCK_MONOTONIC at init */
    int64_t           bucket_ns;   /* width of one bucket */
    size_t            nbuckets;    /* the last bucket also takes everything later */
    _Atomic uint64_t *buckets;     /* nbuckets * PK__COUNT */
    _Atomic uint64_t  totals[PK__COUNT];
    _Atomic uint64_t  outcomes[4]; /* classify results, indexed by circuit_outcome */
    _Atomic size_t    tlog_reserved;
    _Atomic uint64_t  tlog_dropped;
    proxy_tlog_entry *tlog;        /* PROXY_TLOG_CAP entries */
    pthread_mutex_t   marks_lock;
    size_t            nmarks;
    proxy_mark        marks[PROXY_MARK_CAP];
} proxy_stats;

/** The current CLOCK_MONOTONIC time in ns. */
int64_t proxy_now_ns(void);

/** Allocates the buckets for `span_ns` of run time. Returns 0 or ENOMEM. */
int proxy_stats_init(proxy_stats *s, int64_t bucket_ns, int64_t span_ns);
void proxy_stats_destroy(proxy_stats *s);

/** Counts one event of kind `k` now. Thread-safe, lock-free. */
void proxy_stats_count(proxy_stats *s, proxy_kind k);

/** Tallies one classify result. Thread-safe, lock-free. */
void proxy_stats_outcome(proxy_stats *s, circuit_outcome o);

/** Appends a transition (from observe). Thread-safe, lock-free. */
void proxy_stats_transition(proxy_stats *s, const circuit_transition *t);

/** Records a phase mark with the cumulative totals and the breaker's stats
 *  (`bs`, NULL when there is no breaker). Returns the mark's index, or -1
 *  when the log is full. The mark is copied to *out when out is not NULL.
 *  Takes a mutex. */
int proxy_stats_mark(proxy_stats *s, const char *name, const circuit_stats *bs,
                     proxy_mark *out);

/** Fills *out as proxy_stats_mark would, without logging it (the operator
 *  calls reply with such a snapshot). Lock-free. */
void proxy_stats_snapshot(proxy_stats *s, const char *name, const circuit_stats *bs,
                          proxy_mark *out);

/** Writes one mark as a JSON line: {"type":"mark","phase":NAME,...}. */
void proxy_stats_write_mark(FILE *f, const proxy_mark *m);

/** Writes a snapshot as the JSON line of an operator call:
 *  {"type":"operator","action":NAME,"result":RESULT,...} with the mark's
 *  other fields. */
void proxy_stats_write_operator(FILE *f, const proxy_mark *m, const char *result);

/** Writes everything as JSON lines: a summary line (with the breaker's stats
 *  `bs`, NULL when there is no breaker), then the buckets up to now, the
 *  transitions and the marks. */
void proxy_stats_write(proxy_stats *s, FILE *f, const circuit_stats *bs);

/** Writes the proxy's own counters in the Prometheus text format
 *  (circuit_proxy_requests_total{kind=...}, circuit_proxy_classified_total{outcome=...}). */
void proxy_stats_write_prometheus(proxy_stats *s, FILE *f);

/** "policy", "timer", "operator"; "invalid" for any other value. */
const char *proxy_cause_name(circuit_cause c);

#endif /* CIRCUIT_PROXY_STATS_H */
