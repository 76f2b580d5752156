/*
 * Configuration checks and their messages, names of states and outcomes,
 * rejection text, and the abort path for programming errors.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

void circuit__abort(const char *fmt, ...)
{
    /* One write, so that the line cannot interleave with other threads'
     * output on stderr. */
    char line[512];
    size_t n = (size_t)snprintf(line, sizeof line, "libcircuit: ");
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
    va_end(ap);
    if (k > 0)
        n += (size_t)k < sizeof line - n - 1 ? (size_t)k : sizeof line - n - 2;
    line[n++] = '\n';
    ssize_t unused = write(STDERR_FILENO, line, n);
    (void)unused;
    abort();
}

/* Appends to a bounded buffer, keeping it NUL-terminated and never writing
 * past its end; `used` keeps counting what the full text needs. */
typedef struct msgbuf {
    char *buf;
    size_t len;
    size_t used;
} msgbuf;

__attribute__((format(printf, 2, 3))) static void msg_add(msgbuf *m, const char *fmt, ...)
{
    char tmp[160];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t add = strlen(tmp);
    if (m->buf && m->len > 0 && m->used < m->len - 1) {
        size_t room = m->len - 1 - m->used;
        size_t k = add < room ? add : room;
        memcpy(m->buf + m->used, tmp, k);
        m->buf[m->used + k] = '\0';
    }
    m->used += add;
}

int circuit__validate(const circuit_config *cfg, const circuit_policy *policy, char *errbuf,
                      size_t errbuf_len)
{
    (void)policy; /* K1: policy->check is asked here (not yet wired) */
    msgbuf m = {errbuf, errbuf_len, 0};
    int bad = 0;
    if (errbuf && errbuf_len > 0)
        errbuf[0] = '\0';
    msg_add(&m, "invalid circuit_config:");
    if (cfg->window < 1 || cfg->window > CIRCUIT_MAX_COUNT) {
        msg_add(&m, "%s window = %d (must be 1..%d)", bad ? ";" : "", cfg->window,
                CIRCUIT_MAX_COUNT);
        bad++;
    }
    if (cfg->probes < 1 || cfg->probes > CIRCUIT_MAX_COUNT) {
        msg_add(&m, "%s probes = %d (must be 1..%d)", bad ? ";" : "", cfg->probes,
                CIRCUIT_MAX_COUNT);
        bad++;
    }
    if (cfg->open_for_ns <= 0) {
        msg_add(&m, "%s open_for_ns = %" PRId64 " (must be > 0)", bad ? ";" : "",
                cfg->open_for_ns);
        bad++;
    }
    if (cfg->probe_timeout_ns <= 0) {
        msg_add(&m, "%s probe_timeout_ns = %" PRId64 " (must be > 0)", bad ? ";" : "",
                cfg->probe_timeout_ns);
        bad++;
    }
    if (!bad) {
        if (errbuf && errbuf_len > 0)
            errbuf[0] = '\0';
        return 0;
    }
    return EINVAL;
}

const char *circuit_state_name(circuit_state s)
{
    switch (s) {
    case CIRCUIT_CLOSED: return "closed";
    case CIRCUIT_OPEN: return "open";
    case CIRCUIT_HALF_OPEN: return "half-open";
    case CIRCUIT_ISOLATED: return "isolated";
    }
    return "invalid";
}

const char *circuit_outcome_name(circuit_outcome o)
{
    switch (o) {
    case CIRCUIT_SUCCESS: return "success";
    case CIRCUIT_FAILURE: return "failure";
    case CIRCUIT_IGNORED: return "ignored";
    }
    return "invalid";
}

int circuit_rejection_format(const circuit_rejection *r, char *buf, size_t len)
{
    if (!r || (r->state != CIRCUIT_OPEN && r->state != CIRCUIT_HALF_OPEN &&
               r->state != CIRCUIT_ISOLATED)) {
        errno = EINVAL;
        return -1;
    }
    if (!buf)
        len = 0;
    if (r->state == CIRCUIT_HALF_OPEN)
        return snprintf(buf, len, "circuit half-open: every probe slot is taken");
    if (r->state == CIRCUIT_ISOLATED)
        return snprintf(buf, len, "circuit isolated by an operator: no retry time is known");
    int64_t ns = r->retry_after_ns < 0 ? 0 : r->retry_after_ns;
    return snprintf(buf, len, "circuit open: retry after %" PRId64 ".%09" PRId64 " s",
                    ns / 1000000000, ns % 1000000000);
}

int64_t circuit_retry_after_s(const circuit_rejection *r)
{
    if (!r || (r->state != CIRCUIT_OPEN && r->state != CIRCUIT_HALF_OPEN &&
               r->state != CIRCUIT_ISOLATED)) {
        errno = EINVAL;
        return -1;
    }
    if (r->state == CIRCUIT_ISOLATED)
        return 0; /* no Retry-After: an operator holds the breaker */
    if (r->state == CIRCUIT_HALF_OPEN || r->retry_after_ns <= 0)
        return 1;
    /* rounded up: a client that waits this long finds the open period over */
    return r->retry_after_ns / 1000000000 + (r->retry_after_ns % 1000000000 != 0);
}
