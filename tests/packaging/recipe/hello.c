/* One breaker in front of a dependency that always fails. */
#include <circuit.h>
#include <circuit_presets.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

static void log_transition(void *arg, void *call_ctx, const circuit_transition *t)
{
    (void)arg, (void)call_ctx;
    printf("%s -> %s\n", circuit_state_name(t->from), circuit_state_name(t->to));
}

int main(void)
{
    static circuit_consecutive policy;   /* must outlive the breaker */
    char err[256];
    if (circuit_consecutive_init(&policy, 3, 2, err, sizeof err) != 0)   /* open after 3 */
        return fprintf(stderr, "%s\n", err), 1;       /* failures in a row; 2 good probes close */
    circuit_spec spec = {
        .config = {.window = 20, .probes = 1,
                   .open_for_ns = CIRCUIT_S(30), .probe_timeout_ns = CIRCUIT_MS(500)},
        .policy = circuit_consecutive_policy(&policy),
        .classify = circuit_classify_errno,   /* 0: success, -errno: failure */
        .observe = log_transition,
    };
    circuit_breaker *b;
    if (circuit_new(&b, &spec, err, sizeof err) != 0)
        return fprintf(stderr, "%s\n", err), 1;
    for (int i = 1; i <= 5; i++) {
        CIRCUIT_TICKET_GUARD(t);
        circuit_rejection rej;
        if (!circuit_allow(b, NULL, &t, &rej)) {
            printf("call %d: rejected, Retry-After: %lld\n", i,
                   (long long)circuit_retry_after_s(&rej));
            continue;
        }
        int rc = -ECONNREFUSED;               /* the call to the dependency */
        circuit_done(&t, rc);
        printf("call %d: %s\n", i, strerror(-rc));
    }
    circuit_free(b);
    return 0;
}
