/*
 * P1 with a thread stopped in the middle of a probe timeout: the timeout
 * that fell due is counted exactly once, whatever runs while the thread
 * that found it is stopped, and at whichever step it is stopped.
 *
 * A scanner thread calls circuit_allow once probe A's timeout has fallen
 * due; its scan finds the timeout and is stopped at one of the steps of
 * the timeout's claim (src/testing.h, CIRCUIT_TP_TIMEOUT_*: before the
 * claim, claimed, slot taken, counted, slot freed). Meanwhile this thread
 * runs one of: A's own done, another probe admitted to A's slot whose
 * success closes the breaker, an operator isolate, or an allow whose
 * timeout reopens the breaker. The scanner is then let go. Whatever the
 * step and the interference, the account is the sequential one: A timed
 * out once (the timed_out total is 1), the state or the transition that
 * ended it carries timed_out 1, the probe policy was asked for the timeout
 * once, and the transitions are the ones that account implies (their cause
 * and counts).
 *
 * Before the timeout's claim existed, a scan freed A's slot and only then
 * counted the timeout; stopped in between (the step now called "slot
 * taken"), the other probe took the slot and closed the breaker, and the
 * timeout was then dropped: the total stayed 0 and the closing transition
 * carried timed_out 0.
 */
#include "helpers.h"

static const circuit_test_point steps[] = {
    CIRCUIT_TP_TIMEOUT_BEFORE_CLAIM, CIRCUIT_TP_TIMEOUT_CLAIMED, CIRCUIT_TP_TIMEOUT_TAKEN,
    CIRCUIT_TP_TIMEOUT_COUNTED,      CIRCUIT_TP_TIMEOUT_FREED,
};
static const char *const step_names[] = {"before claim", "claimed", "slot taken", "counted",
                                         "slot freed"};
#define NSTEPS ((int)(sizeof steps / sizeof steps[0]))

typedef struct scanner {
    fx *f;
    circuit_test_point at;
    circuit_ticket t;
    circuit_rejection rej;
    bool admitted;
} scanner;

static void *scanner_thread(void *arg)
{
    scanner *s = arg;
    park_me_at(s->at);
    s->admitted = circuit_allow(s->f->b, NULL, &s->t, &s->rej);
    return NULL;
}

/* Half-open at HALF_AT = T0 + OPEN_FOR with probe A admitted (the first probe,
 * due at HALF_AT + PROBE_TO); the clock is then at A's due time. */
#define HALF_AT (T0 + OPEN_FOR)
static void half_open_with_a(fx *f, int probes, circuit_ticket *a)
{
    fx_init(f, 4, probes, OPEN_FOR, PROBE_TO);
    f->p.close_run = 0;
    f->p.reopen_on_failure = false;
    f->p.reopen_timeouts = 0;
    fx_build(f);
    fx_half_open_due(f);
    cr_assert(circuit_allow(f->b, NULL, a, NULL));
    cr_assert_eq(f->log.n, 2, "closed -> open -> half-open");
    circuit_test_clock_set(HALF_AT + PROBE_TO);
}

/* Starts the scanner and waits until it is stopped at step i. */
static pthread_t stop_scanner(scanner *s, fx *f, int i)
{
    *s = (scanner){f, steps[i], CIRCUIT_TICKET_INIT, {0, 0}, false};
    park_setup();
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, scanner_thread, s), 0);
    park_wait();
    return th;
}

static void resume_scanner(scanner *s, pthread_t th)
{
    park_release();
    cr_assert_eq(pthread_join(th, NULL), 0);
    if (s->admitted)
        circuit_release(&s->t);
}

/* The probe policy's asks made for A's timeout alone: the counts it holds
 * are the timeout and nothing else. */
static int64_t timeout_asks(const fx *f)
{
    int64_t n = 0;
    for (int64_t k = 0; k < f->p.probe_calls && k < SPY_MAX; k++) {
        const circuit_counts *c = &f->p.probe_seen[k];
        if (c->timed_out == 1 && c->successes == 0 && c->failures == 0)
            n++;
    }
    return n;
}

static uint64_t timed_out_total(const fx *f)
{
    circuit_stats st;
    circuit_get_stats(f->b, &st);
    return st.timed_out;
}

/* A's own done runs while the scanner is stopped: done applies what fell
 * due first (A's timeout), then counts A's success in the same half-open
 * state (P2). */
Test(p1_stopped_scanner, P1_stopped_scanner_and_the_probes_own_done_count_the_timeout_once,
     .timeout = 60)
{
    for (int i = 0; i < NSTEPS; i++) {
        fx f;
        circuit_ticket a;
        half_open_with_a(&f, 1, &a);
        scanner s;
        pthread_t th = stop_scanner(&s, &f, i);
        cr_assert(circuit_done(&a, RS_OK), "%s: A's result counts (P2)", step_names[i]);
        resume_scanner(&s, th);
        circuit_counts c = fx_counts(&f);
        cr_assert_eq(circuit_get_state(f.b), CIRCUIT_HALF_OPEN, "%s", step_names[i]);
        cr_assert_eq(c.timed_out, 1, "%s: the state's timed_out is %lld", step_names[i],
                     (long long)c.timed_out);
        cr_assert_eq(c.successes, 1, "%s: A's success", step_names[i]);
        cr_assert_eq(timed_out_total(&f), 1, "%s: the timed_out total is %llu", step_names[i],
                     (unsigned long long)timed_out_total(&f));
        cr_assert_eq(timeout_asks(&f), 1, "%s: the probe policy was asked %lld times for the "
                     "timeout", step_names[i], (long long)timeout_asks(&f));
        cr_assert_eq(f.log.n, 2, "%s: no transition", step_names[i]);
        fx_free(&f);
    }
}

/* Another probe B takes A's slot (probes = 1) and its success closes the
 * breaker while the scanner is stopped: B's allow applies A's timeout
 * first, so the closing transition carries it. */
Test(p1_stopped_scanner, P1_stopped_scanner_and_a_probe_reusing_the_slot_count_the_timeout_once,
     .timeout = 60)
{
    for (int i = 0; i < NSTEPS; i++) {
        fx f;
        circuit_ticket a, bt;
        half_open_with_a(&f, 1, &a);
        f.p.close_run = 1;
        scanner s;
        pthread_t th = stop_scanner(&s, &f, i);
        cr_assert(circuit_allow(f.b, NULL, &bt, NULL), "%s: B is admitted to A's slot",
                  step_names[i]);
        cr_assert(circuit_done(&bt, RS_OK), "%s", step_names[i]);
        cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED, "%s", step_names[i]);
        resume_scanner(&s, th);
        cr_assert_not(circuit_done(&a, RS_OK), "%s: A's result is late (T6)", step_names[i]);
        cr_assert_eq(f.log.n, 3, "%s: %lld transitions", step_names[i], (long long)f.log.n);
        assert_tr(&f, 2, CIRCUIT_HALF_OPEN, CIRCUIT_CLOSED, 3);
        cr_assert_eq(f.log.tr[2].cause, CIRCUIT_CAUSE_POLICY, "%s", step_names[i]);
        /* B's success and A's timeout: successes 1, run 1, timed_out 1 */
        cr_assert_eq(f.log.tr[2].counts.timed_out, 1, "%s: the closing transition carries "
                     "timed_out %lld", step_names[i], (long long)f.log.tr[2].counts.timed_out);
        assert_counts(&f.log.tr[2].counts, 1, 0, 1, 0, 1);
        cr_assert_eq(timed_out_total(&f), 1, "%s: the timed_out total is %llu", step_names[i],
                     (unsigned long long)timed_out_total(&f));
        cr_assert_eq(timeout_asks(&f), 1, "%s", step_names[i]);
        fx_free(&f);
    }
}

/* An operator isolates the breaker while the scanner is stopped: isolate
 * applies A's timeout first, so the transition's final counts hold it. */
Test(p1_stopped_scanner, P1_stopped_scanner_and_an_isolate_count_the_timeout_once, .timeout = 60)
{
    for (int i = 0; i < NSTEPS; i++) {
        fx f;
        circuit_ticket a;
        half_open_with_a(&f, 1, &a);
        scanner s;
        pthread_t th = stop_scanner(&s, &f, i);
        cr_assert_eq(circuit_isolate(f.b, NULL), 0);
        resume_scanner(&s, th);
        cr_assert_not(s.admitted, "%s: the scanner's allow while isolated", step_names[i]);
        cr_assert_not(circuit_done(&a, RS_OK), "%s: A's result is late", step_names[i]);
        cr_assert_eq(f.log.n, 3, "%s: %lld transitions", step_names[i], (long long)f.log.n);
        assert_tr(&f, 2, CIRCUIT_HALF_OPEN, CIRCUIT_ISOLATED, 3);
        cr_assert_eq(f.log.tr[2].cause, CIRCUIT_CAUSE_OPERATOR, "%s", step_names[i]);
        assert_counts(&f.log.tr[2].counts, 0, 0, 0, 0, 1);
        cr_assert_eq(timed_out_total(&f), 1, "%s: the timed_out total is %llu", step_names[i],
                     (unsigned long long)timed_out_total(&f));
        cr_assert_eq(timeout_asks(&f), 1, "%s", step_names[i]);
        fx_free(&f);
    }
}

/* The timeout itself reopens the breaker (the policy reopens after one):
 * whether the scanner or this thread's allow makes the reopen, it is made
 * once, as of A's due time, and carries the one timeout. */
Test(p1_stopped_scanner, P1_stopped_scanner_and_an_allow_make_the_timeouts_reopen_once,
     .timeout = 60)
{
    for (int i = 0; i < NSTEPS; i++) {
        fx f;
        circuit_ticket a, x;
        half_open_with_a(&f, 1, &a);
        f.p.reopen_timeouts = 1;
        scanner s;
        pthread_t th = stop_scanner(&s, &f, i);
        circuit_test_clock_advance(100);
        circuit_rejection rej;
        cr_assert_not(circuit_allow(f.b, NULL, &x, &rej), "%s", step_names[i]);
        /* the open period started at A's due time, 100 ns ago */
        assert_rejected(rej, CIRCUIT_OPEN, OPEN_FOR - 100);
        resume_scanner(&s, th);
        cr_assert_not(s.admitted, "%s", step_names[i]);
        cr_assert_not(circuit_done(&a, RS_OK), "%s: A's result is late", step_names[i]);
        cr_assert_eq(f.log.n, 3, "%s: %lld transitions", step_names[i], (long long)f.log.n);
        assert_tr(&f, 2, CIRCUIT_HALF_OPEN, CIRCUIT_OPEN, 3);
        cr_assert_eq(f.log.tr[2].cause, CIRCUIT_CAUSE_POLICY, "%s", step_names[i]);
        assert_counts(&f.log.tr[2].counts, 0, 0, 0, 0, 1);
        cr_assert_eq(timed_out_total(&f), 1, "%s: the timed_out total is %llu", step_names[i],
                     (unsigned long long)timed_out_total(&f));
        cr_assert_eq(timeout_asks(&f), 1, "%s", step_names[i]);
        /* and it is open until due + OPEN_FOR, not longer */
        circuit_test_clock_set(HALF_AT + PROBE_TO + OPEN_FOR);
        cr_assert(circuit_allow(f.b, NULL, &x, &rej), "%s", step_names[i]);
        circuit_release(&x);
        fx_free(&f);
    }
}

/* Two probes due, the scanner stopped on the first (the earlier): the
 * other thread's call counts both, in due order, and the scanner adds
 * nothing when it resumes. */
Test(p1_stopped_scanner, P1_stopped_scanner_two_due_timeouts_each_counted_once_in_due_order,
     .timeout = 60)
{
    for (int i = 0; i < NSTEPS; i++) {
        fx f;
        circuit_ticket a, a2, x;
        half_open_with_a(&f, 2, &a);
        circuit_test_clock_set(HALF_AT + 10);
        cr_assert(circuit_allow(f.b, NULL, &a2, NULL)); /* due HALF_AT + 10 + PROBE_TO */
        circuit_test_clock_set(HALF_AT + 10 + PROBE_TO);
        scanner s;
        pthread_t th = stop_scanner(&s, &f, i);
        cr_assert(circuit_allow(f.b, NULL, &x, NULL), "%s", step_names[i]);
        circuit_counts c = fx_counts(&f);
        cr_assert_eq(c.timed_out, 2, "%s: timed_out %lld", step_names[i], (long long)c.timed_out);
        resume_scanner(&s, th);
        c = fx_counts(&f);
        cr_assert_eq(c.timed_out, 2, "%s: timed_out %lld after the scanner resumed", step_names[i],
                     (long long)c.timed_out);
        cr_assert_eq(timed_out_total(&f), 2, "%s: the timed_out total is %llu", step_names[i],
                     (unsigned long long)timed_out_total(&f));
        /* the policy saw timed_out 1, then 2, once each */
        int64_t ones = 0, twos = 0;
        for (int64_t k = 0; k < f.p.probe_calls; k++) {
            ones += f.p.probe_seen[k].timed_out == 1;
            twos += f.p.probe_seen[k].timed_out == 2;
            if (f.p.probe_seen[k].timed_out == 2)
                cr_assert_eq(ones, 1, "%s: timed_out 2 asked before 1", step_names[i]);
        }
        cr_assert_eq(ones, 1, "%s", step_names[i]);
        cr_assert_eq(twos, 1, "%s", step_names[i]);
        cr_assert(circuit_done(&x, RS_OK));
        cr_assert(circuit_done(&a, RS_OK), "%s: P2", step_names[i]);
        cr_assert(circuit_done(&a2, RS_OK), "%s: P2", step_names[i]);
        cr_assert_eq(f.log.n, 2, "%s", step_names[i]);
        fx_free(&f);
    }
}

/* ---- two threads stopped at once ------------------------------------------- */

/* One gate per thread: the thread stops the first time it passes its own
 * point, until the test opens the gate. */
typedef struct gate {
    sem_t stopped, go;
    int point;
    int left;
} gate;
static _Thread_local gate *my_gate;

static void gate_hook(circuit_test_point p, void *arg)
{
    (void)arg;
    gate *g = my_gate;
    if (g && g->left > 0 && (int)p == g->point) {
        g->left = 0;
        sem_post(&g->stopped);
        while (sem_wait(&g->go) != 0)
            ;
    }
}

static void gate_init(gate *g, circuit_test_point p)
{
    sem_init(&g->stopped, 0, 0);
    sem_init(&g->go, 0, 0);
    g->point = (int)p;
    g->left = 1;
}

static void gate_wait(gate *g)
{
    while (sem_wait(&g->stopped) != 0)
        ;
}

typedef struct gated_call {
    fx *f;
    gate g;
    circuit_ticket t;
    bool admitted;
    int rc;
} gated_call;

static void *gated_isolate(void *arg)
{
    gated_call *c = arg;
    my_gate = &c->g;
    c->rc = circuit_isolate(c->f->b, NULL);
    return NULL;
}

static void *gated_allow(void *arg)
{
    gated_call *c = arg;
    my_gate = &c->g;
    c->admitted = circuit_allow(c->f->b, NULL, &c->t, NULL);
    return NULL;
}

/* An isolate's scan reads the claim word idle and is stopped; a scanner then
 * claims A's timeout, takes its slot and is stopped before counting it. The
 * isolate resumes and finds A's slot taken: the timeout is being counted,
 * not counted, so it must finish that claim before it isolates (a first
 * version of the claim took a taken slot for done here, and the isolate's
 * final counts missed the timeout: tests/model/spin/timeout.pml's
 * PLANT_TAKEN_IS_DONE). */
Test(p1_stopped_scanner, P1_a_scan_that_finds_the_slot_taken_finishes_that_claim_first,
     .timeout = 60)
{
    fx f;
    circuit_ticket a;
    half_open_with_a(&f, 1, &a);
    gated_call iso = {&f, .rc = -1}, scan = {&f, .t = CIRCUIT_TICKET_INIT};
    gate_init(&iso.g, CIRCUIT_TP_TIMEOUT_IDLE_READ);
    gate_init(&scan.g, CIRCUIT_TP_TIMEOUT_TAKEN);
    circuit_test_set_hook(gate_hook, NULL);
    pthread_t ti, ts;
    cr_assert_eq(pthread_create(&ti, NULL, gated_isolate, &iso), 0);
    gate_wait(&iso.g); /* the isolate has read the claim word: idle */
    cr_assert_eq(pthread_create(&ts, NULL, gated_allow, &scan), 0);
    gate_wait(&scan.g); /* A's timeout claimed, its slot taken, not counted */
    sem_post(&iso.g.go);
    cr_assert_eq(pthread_join(ti, NULL), 0);
    cr_assert_eq(iso.rc, 0);
    cr_assert_eq(f.log.n, 3, "%lld transitions", (long long)f.log.n);
    assert_tr(&f, 2, CIRCUIT_HALF_OPEN, CIRCUIT_ISOLATED, 3);
    cr_assert_eq(f.log.tr[2].counts.timed_out, 1, "the isolate's final counts carry timed_out "
                 "%lld", (long long)f.log.tr[2].counts.timed_out);
    sem_post(&scan.g.go);
    cr_assert_eq(pthread_join(ts, NULL), 0);
    circuit_test_set_hook(NULL, NULL);
    cr_assert_not(scan.admitted, "the scanner's allow while isolated");
    cr_assert_eq(timed_out_total(&f), 1, "the timed_out total is %llu",
                 (unsigned long long)timed_out_total(&f));
    cr_assert_eq(timeout_asks(&f), 1);
    cr_assert_not(circuit_done(&a, RS_OK), "A's result is late");
    fx_free(&f);
}
