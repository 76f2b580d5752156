/*
 * Names and rejection text: circuit_state_name, circuit_outcome_name,
 * circuit_rejection_format and circuit_retry_after_s. Pure functions of
 * their arguments; the last two follow snprintf's error convention (-1 and
 * errno), as circuit.h says under "Errors".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "circuit.h"

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
