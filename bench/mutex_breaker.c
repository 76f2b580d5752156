/*
 * mutex_breaker: see mutex_breaker.h. One lock around the whole state:
 * the window is a ring of outcomes with its two sums and the current run,
 * half-open holds `probes` slots with their due times.
 *
 * SPDX-License-Identifier: MIT
 */
#include "mutex_breaker.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct mutex_breaker {
    pthread_mutex_t mu;
    circuit_spec spec;
    mutex_breaker_clock_fn now;
    void *now_arg;
    circuit_state state;
    uint64_t gen;
    int64_t open_until, reopens;
    circuit_counts counts;   /* of the current state */
    unsigned char *ring;     /* window outcomes while closed: 1 failure, 0 success */
    int head, held;
    int64_t *due;            /* half-open: each slot's due time, 0 when free */
    int64_t in_flight;
    circuit_stats totals;    /* the totals (state fields unused) */
};

static int64_t mono_ns(void *arg)
{
    (void)arg;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int mutex_breaker_new(mutex_breaker **out, const circuit_spec *spec, mutex_breaker_clock_fn now,
                      void *now_arg, char *errbuf, size_t errbuf_len)
{
    *out = NULL;
    const circuit_config *c = &spec->config;
    if (c->window < 1 || c->window > CIRCUIT_MAX_COUNT || c->probes < 1 ||
        c->probes > CIRCUIT_MAX_COUNT || c->open_for_ns <= 0 || c->probe_timeout_ns <= 0) {
        if (errbuf && errbuf_len)
            snprintf(errbuf, errbuf_len, "mutex_breaker: a config field is out of range");
        return EINVAL;
    }
    mutex_breaker *m = calloc(1, sizeof *m);
    if (m)
        m->ring = calloc((size_t)c->window, 1);
    if (m && m->ring)
        m->due = calloc((size_t)c->probes, sizeof *m->due);
    if (!m || !m->ring || !m->due) {
        if (m)
            free(m->ring);
        free(m);
        return ENOMEM;
    }
    pthread_mutex_init(&m->mu, NULL);
    m->spec = *spec;
    m->now = now ? now : mono_ns;
    m->now_arg = now_arg;
    m->state = CIRCUIT_CLOSED;
    *out = m;
    return 0;
}

void mutex_breaker_free(mutex_breaker *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->mu);
    free(m->due);
    free(m->ring);
    free(m);
}

/* Every change of state: its counts start from zero (C4). The clock is
 * read only when a period starts (a closed call reads no clock). */
static void move(mutex_breaker *m, circuit_state to, circuit_cause cause, void *ctx)
{
    circuit_transition t = {m->state, to, m->gen + 1, m->counts, cause, 0};
    if (to == CIRCUIT_OPEN) {
        int64_t now = m->now(m->now_arg);
        m->reopens = m->state == CIRCUIT_HALF_OPEN ? m->reopens + 1 : 0;
        circuit_open_info info = {m->counts, m->gen + 1, m->reopens, m->spec.salt};
        t.open_for_ns = m->spec.open_for ? m->spec.open_for(m->spec.open_for_arg, &info)
                                         : m->spec.config.open_for_ns;
        m->open_until = now + t.open_for_ns;
    }
    if (to == CIRCUIT_CLOSED)
        m->reopens = 0;
    m->state = to;
    m->gen++;
    m->totals.transitions++;
    memset(&m->counts, 0, sizeof m->counts);
    m->head = m->held = 0;
    memset(m->due, 0, (size_t)m->spec.config.probes * sizeof *m->due);
    m->in_flight = 0;
    if (m->spec.observe)
        m->spec.observe(m->spec.observe_arg, ctx, &t);
}

static void add_result(mutex_breaker *m, bool failure)
{
    circuit_counts *c = &m->counts;
    if (m->state == CIRCUIT_CLOSED) {
        int w = m->spec.config.window;
        if (m->held == w) { /* the oldest result leaves the window */
            if (m->ring[m->head])
                c->failures--;
            else
                c->successes--;
        } else {
            m->held++;
        }
        m->ring[m->head] = failure;
        if (++m->head == w)
            m->head = 0;
    }
    if (failure) {
        c->failures++;
        c->consecutive_failures++;
        c->consecutive_successes = 0;
    } else {
        c->successes++;
        c->consecutive_successes++;
        c->consecutive_failures = 0;
    }
}

/* Half-open: the probes whose due time has passed time out, in due order. */
static void timeouts(mutex_breaker *m, int64_t now, void *ctx)
{
    while (m->state == CIRCUIT_HALF_OPEN) {
        int first = -1;
        for (int i = 0; i < m->spec.config.probes; i++)
            if (m->due[i] && m->due[i] <= now && (first < 0 || m->due[i] < m->due[first]))
                first = i;
        if (first < 0)
            return;
        m->due[first] = 0;
        m->in_flight--;
        m->counts.timed_out++;
        m->totals.timed_out++;
        circuit_state d = m->spec.policy.probe(m->spec.policy.arg, &m->counts);
        if (d != CIRCUIT_HALF_OPEN)
            move(m, d, CIRCUIT_CAUSE_POLICY, ctx);
    }
}

bool mutex_breaker_allow(mutex_breaker *m, void *call_ctx, mutex_breaker_ticket *t,
                         circuit_rejection *rej)
{
    pthread_mutex_lock(&m->mu);
    int64_t now = m->state == CIRCUIT_CLOSED ? 0 : m->now(m->now_arg);
    if (m->state == CIRCUIT_OPEN && now >= m->open_until)
        move(m, CIRCUIT_HALF_OPEN, CIRCUIT_CAUSE_TIMER, call_ctx);
    timeouts(m, now, call_ctx);
    int slot = -1;
    bool ok = m->state == CIRCUIT_CLOSED;
    if (m->state == CIRCUIT_HALF_OPEN) {
        for (int i = 0; i < m->spec.config.probes && slot < 0; i++)
            if (!m->due[i])
                slot = i;
        if (slot >= 0) {
            m->due[slot] = now + m->spec.config.probe_timeout_ns;
            m->in_flight++;
            ok = true;
        }
    }
    if (ok) {
        m->totals.admitted++;
        *t = (mutex_breaker_ticket){m, call_ctx, m->gen, slot};
    } else {
        m->totals.rejected++;
        t->m = NULL;
        if (rej) {
            rej->state = m->state;
            rej->retry_after_ns = m->state == CIRCUIT_OPEN ? m->open_until - now : 0;
        }
    }
    pthread_mutex_unlock(&m->mu);
    return ok;
}

/* Frees t's probe slot if t still holds it in the current state. */
static bool holds_slot(mutex_breaker *m, const mutex_breaker_ticket *t)
{
    return t->gen == m->gen && t->slot >= 0 && m->due[t->slot] != 0;
}

bool mutex_breaker_done(mutex_breaker_ticket *t, int result)
{
    mutex_breaker *m = t->m;
    if (!m)
        abort(); /* a blank or settled ticket */
    circuit_outcome o = m->spec.classify(m->spec.classify_arg, t->call_ctx, result);
    pthread_mutex_lock(&m->mu);
    bool counted = t->gen == m->gen;
    if (!counted) {
        m->totals.late++;
    } else if (o == CIRCUIT_IGNORED) {
        m->totals.ignored++;
    } else {
        bool failure = o == CIRCUIT_FAILURE;
        if (failure)
            m->totals.failures++;
        else
            m->totals.successes++;
        if (m->state == CIRCUIT_CLOSED) {
            add_result(m, failure);
            if ((failure || m->counts.failures > 0) &&
                m->spec.policy.trip(m->spec.policy.arg, &m->counts))
                move(m, CIRCUIT_OPEN, CIRCUIT_CAUSE_POLICY, t->call_ctx);
        } else {
            if (holds_slot(m, t)) {
                m->due[t->slot] = 0;
                m->in_flight--;
            }
            add_result(m, failure);
            circuit_state d = m->spec.policy.probe(m->spec.policy.arg, &m->counts);
            if (d != CIRCUIT_HALF_OPEN)
                move(m, d, CIRCUIT_CAUSE_POLICY, t->call_ctx);
        }
    }
    if (counted && o == CIRCUIT_IGNORED && holds_slot(m, t)) {
        m->due[t->slot] = 0;
        m->in_flight--;
    }
    pthread_mutex_unlock(&m->mu);
    t->m = NULL;
    return counted;
}

void mutex_breaker_release(mutex_breaker_ticket *t)
{
    mutex_breaker *m = t->m;
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->totals.released++;
    if (holds_slot(m, t)) {
        m->due[t->slot] = 0;
        m->in_flight--;
    }
    pthread_mutex_unlock(&m->mu);
    t->m = NULL;
}

circuit_state mutex_breaker_get_state(mutex_breaker *m)
{
    pthread_mutex_lock(&m->mu);
    circuit_state s = m->state;
    if (s == CIRCUIT_OPEN && m->now(m->now_arg) >= m->open_until)
        s = CIRCUIT_HALF_OPEN;
    pthread_mutex_unlock(&m->mu);
    return s;
}

void mutex_breaker_get_stats(mutex_breaker *m, circuit_stats *out)
{
    pthread_mutex_lock(&m->mu);
    int64_t now = m->state == CIRCUIT_OPEN ? m->now(m->now_arg) : 0;
    *out = m->totals;
    out->state = m->state;
    out->generation = m->gen;
    out->counts = m->counts;
    out->probes_in_flight = m->in_flight;
    out->retry_after_ns = m->state == CIRCUIT_OPEN && now < m->open_until ? m->open_until - now : 0;
    if (m->state == CIRCUIT_OPEN && now >= m->open_until) {
        out->state = CIRCUIT_HALF_OPEN;
        memset(&out->counts, 0, sizeof out->counts);
    }
    pthread_mutex_unlock(&m->mu);
}
