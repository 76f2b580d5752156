/*
 * proxy_stats: counters, transition log and phase marks of circuit-proxy.
 *
 * SPDX-License-Identifier: MIT
 */
#include "proxy_stats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const kind_names[PK__COUNT] = {
    [PK_OK] = "ok",
    [PK_HTTP_ERROR] = "http_error",
    [PK_CONN_ERROR] = "conn_error",
    [PK_TIMEOUT] = "timeout",
    [PK_REJECTED] = "rejected",
    [PK_CANCELLED] = "cancelled",
    [PK_LOCAL_ERROR] = "local_error",
    [PK_UPSTREAM] = "upstream",
};

const char *proxy_kind_name(proxy_kind k)
{
    return (unsigned)k < PK__COUNT ? kind_names[k] : "invalid";
}

int64_t proxy_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + (int64_t)ts.tv_nsec;
}

int proxy_stats_init(proxy_stats *s, int64_t bucket_ns, int64_t span_ns)
{
    memset(s, 0, sizeof *s);
    s->t0_ns = proxy_now_ns();
    s->bucket_ns = bucket_ns;
    s->nbuckets = (size_t)(span_ns / bucket_ns) + 1;
    size_t cells = s->nbuckets * PK__COUNT;
    s->buckets = malloc(cells * sizeof *s->buckets);
    s->tlog = malloc(PROXY_TLOG_CAP * sizeof *s->tlog);
    if (s->buckets == NULL || s->tlog == NULL) {
        free(s->buckets);
        free(s->tlog);
        return ENOMEM;
    }
    for (size_t i = 0; i < cells; i++)
        atomic_init(&s->buckets[i], 0);
    for (size_t i = 0; i < PROXY_TLOG_CAP; i++)
        atomic_init(&s->tlog[i].ready, 0);
    for (int k = 0; k < PK__COUNT; k++)
        atomic_init(&s->totals[k], 0);
    for (int o = 0; o < 4; o++)
        atomic_init(&s->outcomes[o], 0);
    atomic_init(&s->tlog_reserved, 0);
    atomic_init(&s->tlog_dropped, 0);
    pthread_mutex_init(&s->marks_lock, NULL);
    return 0;
}

void proxy_stats_destroy(proxy_stats *s)
{
    free(s->buckets);
    free(s->tlog);
    pthread_mutex_destroy(&s->marks_lock);
    s->buckets = NULL;
    s->tlog = NULL;
}

static size_t bucket_of(const proxy_stats *s, int64_t t_ns)
{
    if (t_ns < 0)
        return 0;
    size_t i = (size_t)(t_ns / s->bucket_ns);
    return i < s->nbuckets ? i : s->nbuckets - 1;
}

void proxy_stats_count(proxy_stats *s, proxy_kind k)
{
    size_t b = bucket_of(s, proxy_now_ns() - s->t0_ns);
    /* Relaxed: counters are read only for reporting; no other data hangs
     * off them. */
    atomic_fetch_add_explicit(&s->buckets[b * PK__COUNT + (size_t)k], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->totals[k], 1, memory_order_relaxed);
}

void proxy_stats_outcome(proxy_stats *s, circuit_outcome o)
{
    if (o >= CIRCUIT_SUCCESS && o <= CIRCUIT_IGNORED)
        atomic_fetch_add_explicit(&s->outcomes[o], 1, memory_order_relaxed);
}

void proxy_stats_transition(proxy_stats *s, const circuit_transition *t)
{
    size_t i = atomic_fetch_add_explicit(&s->tlog_reserved, 1, memory_order_relaxed);
    if (i >= PROXY_TLOG_CAP) {
        atomic_fetch_add_explicit(&s->tlog_dropped, 1, memory_order_relaxed);
        return;
    }
    proxy_tlog_entry *e = &s->tlog[i];
    e->t_ns = proxy_now_ns() - s->t0_ns;
    e->tr = *t;
    /* Release: a reader that sees ready == 1 sees the fields above. */
    atomic_store_explicit(&e->ready, 1, memory_order_release);
}

void proxy_stats_snapshot(proxy_stats *s, const char *name, const circuit_stats *bs,
                          proxy_mark *out)
{
    out->t_ns = proxy_now_ns() - s->t0_ns;
    snprintf(out->name, sizeof out->name, "%s", name);
    out->has_breaker = bs != NULL;
    if (bs != NULL)
        out->breaker = *bs;
    else
        memset(&out->breaker, 0, sizeof out->breaker);
    for (int k = 0; k < PK__COUNT; k++)
        out->totals[k] = atomic_load_explicit(&s->totals[k], memory_order_relaxed);
}

int proxy_stats_mark(proxy_stats *s, const char *name, const circuit_stats *bs,
                     proxy_mark *out)
{
    int idx = -1;
    pthread_mutex_lock(&s->marks_lock);
    if (s->nmarks < PROXY_MARK_CAP) {
        proxy_mark *m = &s->marks[s->nmarks];
        proxy_stats_snapshot(s, name, bs, m);
        if (out != NULL)
            *out = *m;
        idx = (int)s->nmarks++;
    }
    pthread_mutex_unlock(&s->marks_lock);
    return idx;
}

const char *proxy_cause_name(circuit_cause c)
{
    switch (c) {
    case CIRCUIT_CAUSE_POLICY: return "policy";
    case CIRCUIT_CAUSE_TIMER: return "timer";
    case CIRCUIT_CAUSE_OPERATOR: return "operator";
    }
    return "invalid";
}

/* `,"state":"...","breaker":{...}` for a breaker's stats, or
 * `,"state":"off","breaker":null` without one. */
static void write_breaker(FILE *f, const circuit_stats *b)
{
    if (b == NULL) {
        fputs(",\"state\":\"off\",\"breaker\":null", f);
        return;
    }
    const circuit_counts *c = &b->counts;
    fprintf(f,
            ",\"state\":\"%s\",\"breaker\":{\"state\":\"%s\",\"generation\":%" PRIu64
            ",\"counts\":{\"successes\":%" PRId64 ",\"failures\":%" PRId64
            ",\"consecutive_successes\":%" PRId64 ",\"consecutive_failures\":%" PRId64
            ",\"timed_out\":%" PRId64 "},\"probes_in_flight\":%" PRId64
            ",\"retry_after_ns\":%" PRId64,
            circuit_state_name(b->state), circuit_state_name(b->state), b->generation,
            c->successes, c->failures, c->consecutive_successes, c->consecutive_failures,
            c->timed_out, b->probes_in_flight, b->retry_after_ns);
    fprintf(f,
            ",\"admitted\":%" PRIu64 ",\"rejected\":%" PRIu64 ",\"successes\":%" PRIu64
            ",\"failures\":%" PRIu64 ",\"ignored\":%" PRIu64 ",\"late\":%" PRIu64
            ",\"released\":%" PRIu64 ",\"timed_out\":%" PRIu64 ",\"transitions\":%" PRIu64 "}",
            b->admitted, b->rejected, b->successes, b->failures, b->ignored, b->late,
            b->released, b->timed_out, b->transitions);
}

static double ms_of(int64_t ns)
{
    return (double)ns / 1e6;
}

static void write_kinds(FILE *f, const uint64_t v[PK__COUNT])
{
    for (int k = 0; k < PK__COUNT; k++)
        fprintf(f, ",\"%s\":%" PRIu64, kind_names[k], v[k]);
}

/* Names (phases, actions, results) are restricted to [A-Za-z0-9_.-] by the
 * proxy, so they need no JSON escaping. */
static void write_snapshot(FILE *f, const char *head, const proxy_mark *m)
{
    fprintf(f, "{%s,\"t_ms\":%.3f", head, ms_of(m->t_ns));
    write_breaker(f, m->has_breaker ? &m->breaker : NULL);
    write_kinds(f, m->totals);
    fputs("}\n", f);
}

void proxy_stats_write_mark(FILE *f, const proxy_mark *m)
{
    char head[96];
    snprintf(head, sizeof head, "\"type\":\"mark\",\"phase\":\"%s\"", m->name);
    write_snapshot(f, head, m);
}

void proxy_stats_write_operator(FILE *f, const proxy_mark *m, const char *result)
{
    char head[128];
    snprintf(head, sizeof head, "\"type\":\"operator\",\"action\":\"%s\",\"result\":\"%s\"",
             m->name, result);
    write_snapshot(f, head, m);
}

void proxy_stats_write(proxy_stats *s, FILE *f, const circuit_stats *bs)
{
    int64_t now = proxy_now_ns() - s->t0_ns;
    uint64_t v[PK__COUNT];

    size_t reserved = atomic_load_explicit(&s->tlog_reserved, memory_order_relaxed);
    if (reserved > PROXY_TLOG_CAP)
        reserved = PROXY_TLOG_CAP;

    for (int k = 0; k < PK__COUNT; k++)
        v[k] = atomic_load_explicit(&s->totals[k], memory_order_relaxed);
    fprintf(f, "{\"type\":\"summary\",\"t_ms\":%.3f,\"bucket_ms\":%.3f", ms_of(now),
            ms_of(s->bucket_ns));
    write_breaker(f, bs);
    fprintf(f, ",\"transitions\":%zu,\"transitions_dropped\":%" PRIu64, reserved,
            atomic_load_explicit(&s->tlog_dropped, memory_order_relaxed));
    fprintf(f, ",\"classified_success\":%" PRIu64 ",\"classified_failure\":%" PRIu64
               ",\"classified_ignored\":%" PRIu64,
            atomic_load_explicit(&s->outcomes[CIRCUIT_SUCCESS], memory_order_relaxed),
            atomic_load_explicit(&s->outcomes[CIRCUIT_FAILURE], memory_order_relaxed),
            atomic_load_explicit(&s->outcomes[CIRCUIT_IGNORED], memory_order_relaxed));
    write_kinds(f, v);
    fputs("}\n", f);

    size_t last = bucket_of(s, now);
    for (size_t b = 0; b <= last; b++) {
        for (int k = 0; k < PK__COUNT; k++)
            v[k] = atomic_load_explicit(&s->buckets[b * PK__COUNT + (size_t)k],
                                        memory_order_relaxed);
        fprintf(f, "{\"type\":\"bucket\",\"t_ms\":%.3f", ms_of((int64_t)b * s->bucket_ns));
        write_kinds(f, v);
        fputs("}\n", f);
    }

    for (size_t i = 0; i < reserved; i++) {
        const proxy_tlog_entry *e = &s->tlog[i];
        if (!atomic_load_explicit(&e->ready, memory_order_acquire))
            continue; /* being written right now; a later read shows it */
        const circuit_counts *c = &e->tr.counts;
        fprintf(f,
                "{\"type\":\"transition\",\"t_ms\":%.3f,\"from\":\"%s\",\"to\":\"%s\","
                "\"generation\":%" PRIu64 ",\"cause\":\"%s\",\"open_for_ms\":%.3f"
                ",\"successes\":%" PRId64 ",\"failures\":%" PRId64
                ",\"consecutive_successes\":%" PRId64 ",\"consecutive_failures\":%" PRId64
                ",\"timed_out\":%" PRId64 "}\n",
                ms_of(e->t_ns), circuit_state_name(e->tr.from), circuit_state_name(e->tr.to),
                e->tr.generation, proxy_cause_name(e->tr.cause), ms_of(e->tr.open_for_ns),
                c->successes, c->failures, c->consecutive_successes, c->consecutive_failures,
                c->timed_out);
    }

    pthread_mutex_lock(&s->marks_lock);
    for (size_t i = 0; i < s->nmarks; i++)
        proxy_stats_write_mark(f, &s->marks[i]);
    pthread_mutex_unlock(&s->marks_lock);
}

void proxy_stats_write_prometheus(proxy_stats *s, FILE *f)
{
    static const char *const outcome_names[4] = {
        [CIRCUIT_SUCCESS] = "success", [CIRCUIT_FAILURE] = "failure",
        [CIRCUIT_IGNORED] = "ignored"};
    fputs("# HELP circuit_proxy_requests_total Downstream requests of circuit-proxy by what "
          "became of them; kind=\"upstream\" counts requests sent or tried upstream.\n"
          "# TYPE circuit_proxy_requests_total counter\n",
          f);
    for (int k = 0; k < PK__COUNT; k++)
        fprintf(f, "circuit_proxy_requests_total{kind=\"%s\"} %" PRIu64 "\n", kind_names[k],
                atomic_load_explicit(&s->totals[k], memory_order_relaxed));
    fputs("# HELP circuit_proxy_classified_total Upstream results by the classifier's outcome.\n"
          "# TYPE circuit_proxy_classified_total counter\n",
          f);
    for (int o = CIRCUIT_SUCCESS; o <= CIRCUIT_IGNORED; o++)
        fprintf(f, "circuit_proxy_classified_total{outcome=\"%s\"} %" PRIu64 "\n",
                outcome_names[o], atomic_load_explicit(&s->outcomes[o], memory_order_relaxed));
}
