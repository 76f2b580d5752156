/*
 * Configuration checks and their messages (CFG1, CFG2, K1), names of states
 * and outcomes, rejection text, and the abort path for programming errors.
 * The message builder and the abort path are shared with the presets
 * (message.h): one shape of message, one way to abort.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "message.h"

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

/* ---- the message builder (message.h) -------------------------------------- */

__attribute__((format(printf, 2, 0))) static void msg_vappend(circuit__msg *m, const char *fmt,
                                                             va_list ap)
{
    char *at = NULL;
    size_t room = 0;
    if (m->buf && m->len > 0 && m->used < m->len - 1) {
        at = m->buf + m->used;
        room = m->len - m->used; /* vsnprintf truncates and terminates */
    }
    int n = vsnprintf(at, room, fmt, ap);
    if (n > 0)
        m->used += (size_t)n;
}

__attribute__((format(printf, 2, 3))) static void msg_append(circuit__msg *m, const char *fmt,
                                                            ...)
{
    va_list ap;
    va_start(ap, fmt);
    msg_vappend(m, fmt, ap);
    va_end(ap);
}

void circuit__msg_start(circuit__msg *m, char *buf, size_t len, const char *what)
{
    m->buf = buf;
    m->len = buf ? len : 0;
    m->used = 0;
    m->clauses = 0;
    if (m->len > 0)
        buf[0] = '\0';
    msg_append(m, "invalid %s:", what);
}

void circuit__msg_add(circuit__msg *m, const char *fmt, ...)
{
    msg_append(m, "%s ", m->clauses > 0 ? ";" : "");
    va_list ap;
    va_start(ap, fmt);
    msg_vappend(m, fmt, ap);
    va_end(ap);
    m->clauses++;
}

int circuit__msg_end(circuit__msg *m)
{
    if (m->clauses > 0)
        return EINVAL;
    if (m->len > 0)
        m->buf[0] = '\0';
    return 0;
}

void circuit__format_double(char *buf, size_t len, double v)
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

/* ---- CFG1, CFG2, K1 ----------------------------------------------------------- */

/* The policy's complaint is written into this much scratch space; a longer
 * one is cut (policy.check is told the size). */
#define CIRCUIT__CHECK_MSG_MAX 512

/*
 * K1: policy->check, when set, is called exactly once, and it is called even
 * when the config has invalid fields, so that the caller reads every
 * complaint in one message (a check must therefore cope with any field
 * value; it sees the config as given, nothing corrected). Its EINVAL answer
 * becomes the last clause, "policy: <its text>"; its 0 adds nothing; any
 * other answer is a programming error and aborts, naming the value.
 */
int circuit__validate(const circuit_config *cfg, const circuit_policy *policy, char *errbuf,
                      size_t errbuf_len)
{
    circuit__msg m;
    circuit__msg_start(&m, errbuf, errbuf_len, "circuit_config");
    if (cfg->window < 1 || cfg->window > CIRCUIT_MAX_COUNT)
        circuit__msg_add(&m, "window = %d (must be 1..%d)", cfg->window, CIRCUIT_MAX_COUNT);
    if (cfg->probes < 1 || cfg->probes > CIRCUIT_MAX_COUNT)
        circuit__msg_add(&m, "probes = %d (must be 1..%d)", cfg->probes, CIRCUIT_MAX_COUNT);
    if (cfg->open_for_ns <= 0)
        circuit__msg_add(&m, "open_for_ns = %" PRId64 " (must be > 0)", cfg->open_for_ns);
    if (cfg->probe_timeout_ns <= 0)
        circuit__msg_add(&m, "probe_timeout_ns = %" PRId64 " (must be > 0)",
                         cfg->probe_timeout_ns);
    if (policy && policy->check) {
        char said[CIRCUIT__CHECK_MSG_MAX];
        said[0] = '\0';
        int rc = policy->check(policy->arg, cfg, said, sizeof said);
        said[sizeof said - 1] = '\0'; /* in case the check forgot the NUL */
        if (rc == EINVAL)
            circuit__msg_add(&m, "policy: %s",
                             said[0] ? said : "refused by policy.check (no reason given)");
        else if (rc != 0)
            circuit__abort("circuit_new: policy.check returned %d; it must return 0 (accept) or "
                           "EINVAL (%d, refuse)",
                           rc, EINVAL);
    }
    return circuit__msg_end(&m);
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
