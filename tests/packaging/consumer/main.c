/* An out-of-tree program built against an INSTALLED libcircuit by the
 * packaging tests: it builds one breaker, makes one guarded call, frees the
 * breaker and prints circuit_state_name(CIRCUIT_OPEN), which the test expects
 * to read as "open". Building a breaker (not only naming a state) makes a
 * static link pull in the whole core and so its dependencies. */
#include <circuit.h>

#include <stdio.h>
#include <string.h>

static bool trip_never(void *arg, const circuit_counts *counts)
{
    (void)arg;
    (void)counts;
    return false;
}

static circuit_state probe_close(void *arg, const circuit_counts *counts)
{
    (void)arg;
    (void)counts;
    return CIRCUIT_CLOSED;
}

static circuit_outcome classify_by_sign(void *arg, void *call_ctx, int result)
{
    (void)arg;
    (void)call_ctx;
    return result < 0 ? CIRCUIT_FAILURE : CIRCUIT_SUCCESS;
}

static void observe_nothing(void *arg, void *call_ctx, const circuit_transition *t)
{
    (void)arg;
    (void)call_ctx;
    (void)t;
}

int main(void)
{
    const circuit_spec spec = {
        .config = {.window = 8, .probes = 1, .open_for_ns = 1000000, .probe_timeout_ns = 1000000},
        .policy = {.trip = trip_never, .probe = probe_close, .arg = NULL},
        .classify = classify_by_sign,
        .observe = observe_nothing,
    };
    circuit_breaker *b = NULL;
    char err[256];
    if (circuit_new(&b, &spec, err, sizeof err) != 0) {
        fprintf(stderr, "circuit_new: %s\n", err);
        return 1;
    }
    {
        CIRCUIT_TICKET_GUARD(t);
        if (!circuit_allow(b, NULL, &t, NULL)) {
            fprintf(stderr, "a new breaker rejected a call\n");
            circuit_free(b);
            return 1;
        }
        circuit_done(&t, 0);
    }
    circuit_free(b);
    /* The library linked is the one the header describes. */
    int major = -1, minor = -1, patch = -1;
    const char *v = circuit_version(&major, &minor, &patch);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", CIRCUIT_VERSION_MAJOR, CIRCUIT_VERSION_MINOR,
             CIRCUIT_VERSION_PATCH);
    if (major != CIRCUIT_VERSION_MAJOR || minor != CIRCUIT_VERSION_MINOR ||
        patch != CIRCUIT_VERSION_PATCH || strcmp(v, want) != 0) {
        fprintf(stderr, "circuit_version() says %s (%d, %d, %d); circuit.h says %s\n", v, major,
                minor, patch, want);
        return 1;
    }
    puts(circuit_state_name(CIRCUIT_OPEN));
    return 0;
}
