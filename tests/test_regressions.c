/*
 * Regressions: each test reproduces a bug an adversarial review found in an
 * earlier core, named by the rule it broke.
 */
#include "helpers.h"

typedef struct stale_allow {
    fx *f;
    circuit_ticket t;
    bool admitted;
} stale_allow;

static void *stale_allow_thread(void *arg)
{
    stale_allow *s = arg;
    park_me_at(CIRCUIT_TP_SLOT_HELD);
    s->admitted = circuit_allow(s->f->b, (void *)0x5, &s->t, NULL);
    return NULL;
}

/* An allow makes open -> half-open (generation 2), which admits it with the
 * reservation of probe slot 0 (S3), and is stopped before returning.
 * Meanwhile the breaker reopens (3) and becomes half-open again (4), where
 * call Q takes slot 0. The stopped allow then resumes. It is a probe of
 * generation 2 (its result is late, T6), and must not overwrite Q's slot
 * record (Q must still time out at its due time and its slot be freed). */
Test(regressions, T6_P1_allow_stopped_across_generations_never_takes_a_later_probes_slot)
{
    fx f;
    fx_init(&f, 4, 2, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 1;
    f.p.reopen_on_failure = true;
    fx_build(&f);
    circuit_test_clock_set(T0);
    cr_assert(fx_call(&f, RS_FAIL)); /* gen 1: open at T0 */
    circuit_test_clock_set(T0 + OPEN_FOR);

    park_setup();
    stale_allow s = {&f, CIRCUIT_TICKET_INIT, false};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, stale_allow_thread, &s), 0);
    park_wait(); /* S made gen 2 and holds the slot-0 reservation */
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_HALF_OPEN);

    circuit_ticket p, q;
    cr_assert(circuit_allow(f.b, NULL, &p, NULL));
    cr_assert(circuit_done(&p, RS_FAIL)); /* gen 3: reopened at T0 + OPEN_FOR */
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    circuit_test_clock_set(T0 + 2 * OPEN_FOR);
    cr_assert(circuit_allow(f.b, (void *)0x9, &q, NULL)); /* gen 4, slot 0 */

    park_release();
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_assert(s.admitted, "the allow that made generation 2 is its first probe (S3)");
    int64_t asks = f.p.probe_calls;
    cr_assert_not(circuit_done(&s.t, RS_OK), "its result belongs to generation 2: late");
    cr_assert_eq(f.p.probe_calls, asks, "a late result asks no policy");

    /* Q never settles: past its due time it must time out and free its slot */
    circuit_test_clock_set(T0 + 2 * OPEN_FOR + 10 * PROBE_TO);
    asks = f.p.probe_calls;
    circuit_ticket x, y;
    bool ax = circuit_allow(f.b, NULL, &x, NULL);
    cr_assert_eq(f.p.probe_calls, asks + 1, "Q's timeout was not counted");
    cr_assert_eq(f.p.probe_last.timed_out, 1);
    bool ay = circuit_allow(f.b, NULL, &y, NULL);
    cr_assert(ax && ay, "both probe slots must be usable once Q timed out");
    circuit_release(&x);
    circuit_release(&y);
    cr_assert(circuit_done(&q, RS_OK), "P2: Q's late result still counts");
    fx_free(&f);
}

/* A scan for due probes that started in an older generation must not raise
 * the timeout hint past a probe of the newer one: after many generations
 * with probes in flight, every probe still times out at its due time. */
Test(regressions, P1_every_generations_probes_time_out_at_their_due_time)
{
    fx f;
    fx_init(&f, 4, 3, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 1;
    f.p.reopen_timeouts = 1; /* the first timeout reopens */
    fx_build(&f);
    circuit_test_clock_set(T0);
    fx_call(&f, RS_FAIL);
    int64_t now = T0;
    for (int round = 0; round < 50; round++) {
        now += OPEN_FOR;
        circuit_test_clock_set(now);
        circuit_ticket t[3];
        for (int i = 0; i < 3; i++)
            cr_assert(circuit_allow(f.b, NULL, &t[i], NULL), "round %d probe %d", round, i);
        circuit_test_clock_set(now + PROBE_TO - 1);
        cr_assert_eq(circuit_get_state(f.b), CIRCUIT_HALF_OPEN);
        circuit_ticket u;
        cr_assert_not(circuit_allow(f.b, NULL, &u, NULL), "round %d: a slot freed early", round);
        now += PROBE_TO;
        circuit_test_clock_set(now);
        cr_assert_not(circuit_allow(f.b, NULL, &u, NULL)); /* times out, reopens at now */
        cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN, "round %d: no timeout at due time",
                     round);
        for (int i = 0; i < 3; i++)
            circuit_release(&t[i]);
    }
    fx_free(&f);
}
