/*
 * circuit-demo: one breaker driven through its whole cycle on the real clock,
 * closed -> open -> half-open -> closed, printing every call and every
 * transition as `observe` receives it.
 *
 * The breaker opens after 3 failures in a row, stays open for 250 ms, and in
 * half-open closes on the first successful probe (reopens on a failed or
 * timed-out one). Each call is written with the idiom of the README:
 * guard -> allow -> call -> done.
 *
 * Exit status: 0 when the transitions seen were exactly closed -> open,
 * open -> half-open, half-open -> closed (generations 1, 2, 3); 1 otherwise.
 */
#define _POSIX_C_SOURCE 200809L

#include <circuit.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define OPEN_FOR_NS      INT64_C(250000000)  /* 250 ms */
#define PROBE_TIMEOUT_NS INT64_C(1000000000) /* 1 s */
#define TRIP_AFTER       3                   /* failures in a row */

/* What observe saw, checked at the end. */
struct journal {
    int count;
    circuit_transition seen[8];
};

static bool trip_on_failure_run(void *arg, const circuit_counts *c)
{
    (void)arg;
    return c->consecutive_failures >= TRIP_AFTER;
}

static circuit_state probe_first_result(void *arg, const circuit_counts *c)
{
    (void)arg;
    if (c->successes > 0)
        return CIRCUIT_CLOSED;
    if (c->failures > 0 || c->timed_out > 0)
        return CIRCUIT_OPEN;
    return CIRCUIT_HALF_OPEN;
}

/* The "dependency" answers with 0 for success or a negative errno. */
static circuit_outcome classify_errno(void *arg, void *call_ctx, int result)
{
    (void)arg;
    (void)call_ctx;
    return result == 0 ? CIRCUIT_SUCCESS : CIRCUIT_FAILURE;
}

static void observe_print(void *arg, void *call_ctx, const circuit_transition *t)
{
    struct journal *j = arg;
    printf("    transition %llu: %s -> %s during call '%s' "
           "(left with successes=%lld failures=%lld run_ok=%lld run_fail=%lld timed_out=%lld)\n",
           (unsigned long long)t->generation, circuit_state_name(t->from),
           circuit_state_name(t->to), call_ctx ? (const char *)call_ctx : "-",
           (long long)t->counts.successes, (long long)t->counts.failures,
           (long long)t->counts.consecutive_successes,
           (long long)t->counts.consecutive_failures, (long long)t->counts.timed_out);
    if (j->count < (int)(sizeof j->seen / sizeof j->seen[0]))
        j->seen[j->count] = *t;
    j->count++;
}

/* One call through the breaker; `result` is what the dependency returns. */
static void call(circuit_breaker *b, const char *name, int result)
{
    printf("  call '%s' (breaker %s)\n", name, circuit_state_name(circuit_get_state(b)));

    CIRCUIT_TICKET_GUARD(t);    /* released on every way out of this scope */
    circuit_rejection rej;
    if (!circuit_allow(b, (void *)name, &t, &rej)) {
        char why[128];
        circuit_rejection_format(&rej, why, sizeof why);
        printf("    rejected: %s\n", why);
        return;                 /* failed fast */
    }
    printf("    admitted; the dependency returns %d%s\n", result,
           result ? (result == -ECONNREFUSED ? " (-ECONNREFUSED)" : "") : " (ok)");
    circuit_done(&t, result);   /* settle straight after the call */
}

static void sleep_ns(int64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000), .tv_nsec = (long)(ns % 1000000000)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int main(void)
{
    struct journal journal;
    memset(&journal, 0, sizeof journal);

    const circuit_spec spec = {
        .config = {.window = 10, .probes = 1, .open_for_ns = OPEN_FOR_NS,
                   .probe_timeout_ns = PROBE_TIMEOUT_NS},
        .policy = {.trip = trip_on_failure_run, .probe = probe_first_result, .arg = NULL},
        .classify = classify_errno,
        .observe = observe_print,
        .observe_arg = &journal,
    };
    circuit_breaker *b;
    char err[256];
    int rc = circuit_new(&b, &spec, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "circuit_new: %s (%s)\n", strerror(rc), err);
        return 1;
    }
    printf("circuit-demo: trip after %d failures in a row, open for %lld ms, "
           "close on the first good probe\n",
           TRIP_AFTER, (long long)(OPEN_FOR_NS / 1000000));

    printf("1. the dependency fails %d times: the breaker opens\n", TRIP_AFTER);
    call(b, "fail-1", -ECONNREFUSED);
    call(b, "fail-2", -ECONNREFUSED);
    call(b, "fail-3", -ECONNREFUSED);

    printf("2. while open, calls fail fast\n");
    call(b, "fast-fail", 0);

    printf("3. %lld ms later the next call is a probe; it succeeds: the breaker closes\n",
           (long long)(OPEN_FOR_NS / 1000000));
    sleep_ns(OPEN_FOR_NS);
    call(b, "probe", 0);

    printf("4. closed again: calls go through\n");
    call(b, "after", 0);

    circuit_state final_state = circuit_get_state(b);
    circuit_free(b);

    static const circuit_state want_from[] = {CIRCUIT_CLOSED, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN};
    static const circuit_state want_to[] = {CIRCUIT_OPEN, CIRCUIT_HALF_OPEN, CIRCUIT_CLOSED};
    bool ok = journal.count == 3 && final_state == CIRCUIT_CLOSED;
    for (int i = 0; ok && i < 3; i++)
        ok = journal.seen[i].from == want_from[i] && journal.seen[i].to == want_to[i] &&
             journal.seen[i].generation == (uint64_t)(i + 1);
    if (!ok) {
        printf("circuit-demo: FAILED: expected closed -> open -> half-open -> closed "
               "(3 transitions), saw %d, final state %s\n",
               journal.count, circuit_state_name(final_state));
        return 1;
    }
    printf("circuit-demo: closed -> open -> half-open -> closed, as expected\n");
    return 0;
}
