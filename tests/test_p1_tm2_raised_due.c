/*
 * P1, TM2: slot 0's reservation due raised under a scan.
 *
 * An allow W reserves slot 0 for the open -> half-open change (due +2000)
 * and stops before its CAS; a later allow R finds that reservation and
 * stops before the CAS that raises its due to its own clock + probe_timeout
 * (+2600). W wins the change: the reservation is its probe. At +2200 an
 * allow S scans, batches slot 0 with the due it read (+2000) and stops;
 * R's raise lands; S resumes and finds the same probe with a later due.
 * The scan must count that due in the hint it leaves: once the clock has
 * passed +2600 the probe times out (timed_out 1, the probe policy reopens),
 * instead of holding its slot for ever while every allow is refused
 * {HALF_OPEN, 0}. Plain program (runs under TSan too); exit 0 pass, 1 fail.
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "circuit.h"
#include "testing.h"

#define T0 1000000000LL
#define OPEN 1000
#define PT 1000

enum { W = 1, R, S };
static __thread int role;
static sem_t parked[4], go[4];
static circuit_breaker *b;
static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static void hook(circuit_test_point p, void *arg)
{
    (void)arg;
    if ((role == W && p == CIRCUIT_TP_HALFOPEN_BEFORE_CAS) ||
        (role == R && p == CIRCUIT_TP_RESERVE_BEFORE_RAISE) ||
        (role == S && p == CIRCUIT_TP_TIMEOUT_IDLE_READ)) {
        int r = role;
        role = 0; /* once */
        sem_post(&parked[r]);
        while (sem_wait(&go[r]) != 0 && errno == EINTR)
            ;
    }
}

/* Waits for a thread to park; fails the test instead of hanging when the
 * point is not reached within 20 s. */
static void wait_parked(int r, const char *what)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 20;
    int rc;
    while ((rc = sem_timedwait(&parked[r], &ts)) != 0 && errno == EINTR)
        ;
    if (rc != 0) {
        printf("FAIL: %s did not reach its park point within 20 s\n", what);
        exit(1);
    }
}

static bool trip(void *a, const circuit_counts *c)
{
    (void)a;
    return c->failures >= 1;
}
static circuit_state probe(void *a, const circuit_counts *c)
{
    (void)a;
    if (c->failures || c->timed_out)
        return CIRCUIT_OPEN;
    return c->successes >= 1 ? CIRCUIT_CLOSED : CIRCUIT_HALF_OPEN;
}
static circuit_outcome classify(void *a, void *x, int r)
{
    (void)a;
    (void)x;
    return (circuit_outcome)r;
}

typedef struct call {
    int role;
    bool ok;
    circuit_ticket t;
    circuit_rejection rej;
} call;

static void *run(void *p)
{
    call *a = p;
    role = a->role;
    a->ok = circuit_allow(b, a, &a->t, &a->rej);
    return NULL;
}

int main(void)
{
    for (int i = 0; i < 4; i++) {
        sem_init(&parked[i], 0, 0);
        sem_init(&go[i], 0, 0);
    }
    circuit_test_clock_set(T0);
    circuit_spec s = {0};
    s.config = (circuit_config){2, 1, OPEN, PT};
    s.policy.trip = trip;
    s.policy.probe = probe;
    s.classify = classify;
    s.salt = 1;
    if (circuit_new(&b, &s, NULL, 0) != 0)
        return 1;
    circuit_test_set_hook(hook, NULL);
    circuit_ticket t = CIRCUIT_TICKET_INIT;
    circuit_rejection rej;
    CHECK(circuit_allow(b, NULL, &t, &rej), "the first allow is admitted");
    circuit_done(&t, CIRCUIT_FAILURE); /* open at T0 until T0 + 1000 */
    circuit_test_clock_advance(OPEN);  /* +1000 */

    pthread_t tw, tr, ts;
    call w = {W, false, CIRCUIT_TICKET_INIT, {0, 0}}, r = {R, false, CIRCUIT_TICKET_INIT, {0, 0}},
         sc = {S, false, CIRCUIT_TICKET_INIT, {0, 0}};
    pthread_create(&tw, NULL, run, &w);
    wait_parked(W, "W (before the half-open CAS)");
    circuit_test_clock_advance(600); /* +1600 */
    pthread_create(&tr, NULL, run, &r);
    wait_parked(R, "R (before the raise)");
    sem_post(&go[W]);
    pthread_join(tw, NULL);
    CHECK(w.ok, "W is admitted: its CAS made the change with the reservation (S3)");
    circuit_test_clock_advance(600); /* +2200: the due W's reservation had (+2000) has passed */
    pthread_create(&ts, NULL, run, &sc);
    wait_parked(S, "S (in its timeout scan)");
    sem_post(&go[R]);
    pthread_join(tr, NULL); /* the raise has landed: due +2600 */
    sem_post(&go[S]);
    pthread_join(ts, NULL);
    CHECK(!sc.ok && sc.rej.state == CIRCUIT_HALF_OPEN,
          "S at +2200: refused {HALF_OPEN}, W's probe is not due before +2600 (TM2)");
    circuit_test_set_hook(NULL, NULL);

    circuit_test_clock_advance(1000); /* +3200: W's probe is due */
    call l = {0, false, CIRCUIT_TICKET_INIT, {0, 0}};
    l.ok = circuit_allow(b, NULL, &l.t, &l.rej);
    circuit_stats st;
    circuit_get_stats(b, &st);
    CHECK(st.timed_out == 1, "at +3200 W's probe has timed out (P1): timed_out %llu, state %s, probes in flight %lld",
          (unsigned long long)st.timed_out, circuit_state_name(st.state), (long long)st.probes_in_flight);
    CHECK(!l.ok && l.rej.state == CIRCUIT_OPEN && l.rej.retry_after_ns == 400,
          "at +3200 the timeout (at +2600) has reopened until +3600: %s {%s, %lld}", l.ok ? "admitted" : "refused",
          circuit_state_name(l.rej.state), (long long)l.rej.retry_after_ns);
    if (l.ok)
        circuit_release(&l.t);
    circuit_release(&w.t);
    if (r.ok)
        circuit_release(&r.t);
    circuit_free(b);
    printf("%s\n", failures ? "unit_p1_tm2_raised_due: FAILED" : "unit_p1_tm2_raised_due: ok");
    return failures ? 1 : 0;
}
