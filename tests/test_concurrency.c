/*
 * L1, L2, L4: lock freedom, atomic updates, policies asked concurrently.
 * (L3, every call raced under ThreadSanitizer, is tests/race/calls.c:
 * Criterion cannot run under TSan; memory, L5, is test_memory.c.)
 */
#include "helpers.h"

/* ---- L1: a thread stopped anywhere inside a call stops nobody ------------------- */

enum { OP_ALLOW = 1, OP_DONE_OK, OP_DONE_FAIL, OP_RELEASE, OP_TRIP };

typedef struct parked {
    fx *f;
    circuit_test_point point;
    int op;
    circuit_ticket *t;
    bool ret;
} parked;

static void *parked_thread(void *arg)
{
    parked *p = (parked *)arg;
    park_me_at(p->point);
    switch (p->op) {
    case OP_ALLOW: p->ret = circuit_allow(p->f->b, NULL, p->t, NULL); break;
    case OP_DONE_OK: p->ret = circuit_done(p->t, RS_OK); break;
    case OP_DONE_FAIL: p->ret = circuit_done(p->t, RS_FAIL); break;
    case OP_RELEASE: circuit_release(p->t); break;
    default:
        fx_call(p->f, RS_FAIL);
        fx_call(p->f, RS_FAIL);
        break;
    }
    return NULL;
}

static void start_parked(parked *p, pthread_t *th)
{
    pthread_create(th, NULL, parked_thread, p);
    park_wait();
}

static void finish_parked(pthread_t th)
{
    park_release();
    pthread_join(th, NULL);
}

/* While a thread is parked: every kind of call, many times, in the closed state. */
static void work_closed(fx *f, int n)
{
    for (int i = 0; i < n; i++) {
        cr_assert(fx_call(f, i % 5 == 0 ? RS_IGN : RS_OK));
        (void)circuit_get_state(f->b);
        circuit_ticket t;
        cr_assert(circuit_allow(f->b, NULL, &t, NULL));
        circuit_release(&t);
    }
}

Test(lockfree, L1_thread_stopped_in_allow_closed)
{
    fx f;
    fx_new(&f, 8, 1, OPEN_FOR, PROBE_TO);
    park_setup();
    circuit_ticket t;
    parked p = {&f, CIRCUIT_TP_ALLOW_BEFORE_ADMIT, OP_ALLOW, &t, false};
    pthread_t th;
    start_parked(&p, &th);
    work_closed(&f, 200);
    finish_parked(th);
    cr_assert(p.ret);
    cr_assert(circuit_done(&t, RS_OK));
    fx_free(&f);
}

Test(lockfree, L1_thread_stopped_in_done_before_its_cas)
{
    fx f;
    fx_init(&f, 1000, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    fx_build(&f);
    park_setup();
    circuit_ticket t;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    parked p = {&f, CIRCUIT_TP_DONE_BEFORE_CAS, OP_DONE_FAIL, &t, false};
    pthread_t th;
    start_parked(&p, &th);
    for (int i = 0; i < 200; i++)
        cr_assert(fx_call(&f, RS_OK));
    finish_parked(th);
    cr_assert(p.ret);
    fx_call(&f, RS_OK);
    /* the parked result was counted once; the successes its sum did not see
     * (made while it was stopped) are ordered after it (L6, 0.3) */
    assert_counts(&f.p.trip_last, 0, 1, 0, 1, 0);
    circuit_counts c = fx_counts(&f);
    assert_counts(&c, 201, 1, 201, 0, 0);
    fx_free(&f);
}

Test(lockfree, L1_thread_stopped_before_writing_its_window_record)
{
    fx f;
    fx_init(&f, 4, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    fx_build(&f);
    park_setup();
    circuit_ticket t;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    parked p = {&f, CIRCUIT_TP_RING_BEFORE_WRITE, OP_DONE_FAIL, &t, false};
    pthread_t th;
    start_parked(&p, &th);
    /* counted, its ring record not yet written: others must go on (and help) */
    for (int i = 0; i < 10; i++)
        cr_assert(fx_call(&f, RS_OK));
    int64_t k = f.nseen - 10;
    assert_counts(&f.seen[k + 2], 3, 1, 3, 0, 0); /* F S S S */
    assert_counts(&f.seen[k + 3], 4, 0, 4, 0, 0); /* the F left the window */
    assert_counts(&f.seen[k + 9], 4, 0, 10, 0, 0);
    finish_parked(th);
    cr_assert(p.ret);
    fx_call(&f, RS_FAIL);
    assert_counts(&f.seen[f.nseen - 1], 3, 1, 0, 1, 0);
    fx_free(&f);
}

Test(lockfree, L1_thread_stopped_in_release)
{
    fx f;
    fx_init(&f, 8, 2, OPEN_FOR, PROBE_TO);
    f.p.probe_forced = CIRCUIT_HALF_OPEN;
    fx_build(&f);
    park_setup();
    fx_half_open_due(&f);
    circuit_ticket t;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    parked p = {&f, CIRCUIT_TP_RELEASE_BEFORE_CAS, OP_RELEASE, &t, false};
    pthread_t th;
    start_parked(&p, &th);
    for (int i = 0; i < 200; i++)
        cr_assert(fx_call(&f, RS_OK), "probe %d", i); /* the other slot */
    finish_parked(th);
    circuit_ticket a, b2, x;
    cr_assert(circuit_allow(f.b, NULL, &a, NULL));
    cr_assert(circuit_allow(f.b, NULL, &b2, NULL));
    cr_assert_not(circuit_allow(f.b, NULL, &x, NULL));
    circuit_release(&a);
    circuit_release(&b2);
    fx_free(&f);
}

Test(lockfree, L1_thread_stopped_holding_a_new_probe_slot)
{
    fx f;
    fx_init(&f, 8, 2, OPEN_FOR, PROBE_TO);
    f.p.probe_forced = CIRCUIT_HALF_OPEN;
    fx_build(&f);
    park_setup();
    fx_half_open_due(&f);
    circuit_ticket first;
    cr_assert(circuit_allow(f.b, NULL, &first, NULL));
    circuit_release(&first);
    circuit_ticket t;
    parked p = {&f, CIRCUIT_TP_SLOT_HELD, OP_ALLOW, &t, false};
    pthread_t th;
    start_parked(&p, &th);
    for (int i = 0; i < 200; i++)
        cr_assert(fx_call(&f, RS_OK), "probe %d", i);
    (void)circuit_get_state(f.b);
    finish_parked(th);
    cr_assert(p.ret);
    cr_assert(circuit_done(&t, RS_OK));
    fx_free(&f);
}

Test(lockfree, L1_thread_stopped_deciding_in_half_open)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.close_run = 1;
    fx_build(&f);
    park_setup();
    fx_half_open_due(&f);
    circuit_ticket first;
    cr_assert(circuit_allow(f.b, NULL, &first, NULL));
    circuit_release(&first);
    circuit_ticket t;
    parked p = {&f, CIRCUIT_TP_ALLOW_BEFORE_ADMIT, OP_ALLOW, &t, false};
    pthread_t th;
    start_parked(&p, &th);
    fx_call(&f, RS_OK); /* closes while the other thread is stopped */
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    work_closed(&f, 100);
    finish_parked(th);
    /* it decided again in the state it found: admitted (closed), never a
     * probe of a state that is gone */
    cr_assert(p.ret);
    cr_assert(circuit_done(&t, RS_OK));
    cr_assert_eq(f.p.probe_calls, 1);
    fx_free(&f);
}

Test(lockfree, L1_thread_stopped_while_delivering)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    fx_build(&f);
    park_setup();
    circuit_test_clock_set(T0);
    parked p = {&f, CIRCUIT_TP_DELIVERY_WON, OP_TRIP, NULL, false};
    pthread_t th;
    start_parked(&p, &th);
    for (int i = 0; i < 50; i++) {
        circuit_test_clock_advance(OPEN_FOR);
        fx_call(&f, RS_OK);
        fx_call(&f, RS_OK);
        fx_call(&f, RS_FAIL);
        fx_call(&f, RS_FAIL);
    }
    cr_assert_eq(f.log.n, 0);
    cr_assert_eq(circuit_test_pending(f.b), 151);
    finish_parked(th);
    cr_assert_eq(f.log.n, 151);
    cr_assert_eq(f.log.order_errors, 0);
    fx_free(&f);
}

Test(lockfree, L1_thread_stopped_after_publishing)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    fx_build(&f);
    park_setup();
    circuit_test_clock_set(T0);
    parked p = {&f, CIRCUIT_TP_AFTER_PUBLISH, OP_TRIP, NULL, false};
    pthread_t th;
    start_parked(&p, &th);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    circuit_test_clock_advance(OPEN_FOR);
    fx_call(&f, RS_OK); /* delivers the parked thread's transition first */
    cr_assert_geq(f.log.n, 2);
    assert_tr(&f, 0, CIRCUIT_CLOSED, CIRCUIT_OPEN, 1);
    fx_call(&f, RS_OK);
    work_closed(&f, 50);
    finish_parked(th);
    cr_assert_eq(f.log.n, 3);
    cr_assert_eq(f.log.order_errors, 0);
    fx_free(&f);
}

/* ---- L2: atomic updates lose nothing --------------------------------------------- */

typedef struct counter {
    fx *f;
    int result;
    int n;
    int64_t *start;
} counter;

static void *count_thread(void *arg)
{
    counter *c = (counter *)arg;
    A_ADD(c->start, 1);
    while (A_LOAD(c->start) < 2)
        ;
    for (int i = 0; i < c->n; i++) {
        circuit_ticket t;
        if (!circuit_allow(c->f->b, NULL, &t, NULL))
            return (void *)1;
        if (!circuit_done(&t, c->result))
            return (void *)2;
    }
    return NULL;
}

Test(lockfree, L2_concurrent_results_are_all_counted)
{
    const int per_thread = 5000;
    fx f;
    fx_init(&f, 2 * per_thread, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    fx_build(&f);
    int64_t start = 0;
    counter c[2] = {{&f, RS_OK, per_thread, &start}, {&f, RS_FAIL, per_thread, &start}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, count_thread, &c[i]);
    for (int i = 0; i < 2; i++) {
        void *ret;
        pthread_join(th[i], &ret);
        cr_assert_null(ret, "thread %d: %p", i, ret);
    }
    /* the window holds exactly every result: none lost, none twice */
    cr_assert_eq(f.log.n, 0);
    circuit_counts kc = fx_counts(&f);
    const circuit_counts *k = &kc;
    cr_assert_eq(k->successes, per_thread);
    cr_assert_eq(k->failures, per_thread);
    cr_assert_eq(k->consecutive_successes == 0, k->consecutive_failures != 0);
    cr_assert_eq(f.p.sum_violations, 0);
    fx_free(&f);
}

typedef struct prober {
    fx *f;
    int64_t *held;
    int64_t *max_held;
    int64_t *full_seen;
    int rounds;
} prober;

static void *probe_thread(void *arg)
{
    prober *p = (prober *)arg;
    circuit_ticket t[24];
    for (int r = 0; r < p->rounds; r++) {
        int n = 0;
        circuit_rejection rej;
        while (n < 24 && circuit_allow(p->f->b, NULL, &t[n], &rej)) {
            a_max(p->max_held, A_ADD(p->held, 1));
            n++;
        }
        if (n < 24) {
            if (rej.state != CIRCUIT_HALF_OPEN)
                return (void *)1;
            A_ADD(p->full_seen, 1);
        }
        for (int i = 0; i < n; i++) {
            A_ADD(p->held, -1);
            if (i % 2)
                circuit_release(&t[i]);
            else if (!circuit_done(&t[i], RS_IGN))
                return (void *)2;
        }
    }
    return NULL;
}

Test(lockfree, L2_concurrent_probes_never_exceed_the_slots)
{
    const int probes = 40; /* more than the 32 slots one collect word once held */
    fx f;
    fx_init(&f, 8, probes, OPEN_FOR, INT64_MAX / 4);
    fx_build(&f);
    fx_half_open_due(&f);
    circuit_ticket first;
    cr_assert(circuit_allow(f.b, NULL, &first, NULL));
    circuit_release(&first);
    /* this thread holds 20 slots all along: each round of a prober (up to
     * 24) hits the limit, alone or not */
    circuit_ticket mine[20];
    for (int i = 0; i < 20; i++)
        cr_assert(circuit_allow(f.b, NULL, &mine[i], NULL));
    int64_t held = 0, max_held = 0, full = 0;
    prober p = {&f, &held, &max_held, &full, 400};
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, probe_thread, &p);
    for (int i = 0; i < 3; i++) {
        void *ret;
        pthread_join(th[i], &ret);
        cr_assert_null(ret);
    }
    cr_assert_leq(max_held, probes - 20, "%lld probes in flight with %d slots free",
                  (long long)max_held, probes - 20);
    cr_assert_gt(full, 0, "the slots were never all taken: the test proved nothing");
    for (int i = 0; i < 20; i++)
        circuit_release(&mine[i]);
    cr_assert_eq(f.p.probe_calls, 0);
    /* every slot is free again, exactly */
    circuit_ticket t[41];
    for (int i = 0; i < probes; i++)
        cr_assert(circuit_allow(f.b, NULL, &t[i], NULL), "slot %d leaked", i);
    cr_assert_not(circuit_allow(f.b, NULL, &t[probes], NULL));
    for (int i = 0; i < probes; i++)
        circuit_release(&t[i]);
    fx_free(&f);
}

/* ---- L4: policies asked from several threads at once ---------------------------- */

static void *l4_thread(void *arg)
{
    fx *f = (fx *)arg;
    for (int i = 0; i < 20000; i++) {
        circuit_ticket t;
        if (circuit_allow(f->b, NULL, &t, NULL))
            circuit_done(&t, i % 3 ? RS_OK : RS_FAIL);
    }
    return NULL;
}

Test(lockfree, L4_policies_may_be_asked_concurrently_and_see_consistent_counts)
{
    fx f;
    fx_init(&f, 16, 4, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    f.p.trip_failures = 0;
    fx_build(&f);
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, l4_thread, &f);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    cr_assert_geq(f.p.max_inside, 1);
    cr_assert_geq(f.p.trip_calls, 20000, "trip asked less than once per counted failure");
    cr_assert_eq(f.p.sum_violations, 0, "a policy saw inconsistent counts");
    /* the window is still exact after the concurrent use */
    for (int i = 0; i < 15; i++)
        fx_call(&f, RS_OK);
    fx_call(&f, RS_FAIL);
    assert_counts(&f.p.trip_last, 15, 1, 0, 1, 0);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    fx_free(&f);
}

/* Policies asked while other threads change the state (open, half-open,
 * closed): the counts they get must still be counts of one state word
 * (all >= 0, successes + failures <= window, at most one run non-zero). */
typedef struct cycler {
    fx *f;
    int seed;
} cycler;

static void *cycle_thread(void *arg)
{
    cycler *c = (cycler *)arg;
    uint32_t x = (uint32_t)c->seed * 2654435761u + 3;
    for (int i = 0; i < 30000; i++) {
        x = x * 1103515245u + 12345u;
        uint32_t r = (x >> 8) % 16;
        if (r == 0) {
            circuit_test_clock_advance(OPEN_FOR / 3);
            continue;
        }
        circuit_ticket t;
        if (circuit_allow(c->f->b, NULL, &t, NULL))
            circuit_done(&t, r < 7 ? RS_FAIL : RS_OK);
    }
    return NULL;
}

Test(lockfree, L4_policies_never_see_torn_counts_while_the_state_changes)
{
    fx f;
    fx_init(&f, 8, 3, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 2;
    f.p.close_run = 1;
    f.p.reopen_timeouts = 2;
    fx_build(&f);
    pthread_t th[3];
    cycler c[3];
    for (int i = 0; i < 3; i++) {
        c[i] = (cycler){&f, i + 1};
        pthread_create(&th[i], NULL, cycle_thread, &c[i]);
    }
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    cr_assert_gt(f.log.n, 100);
    cr_assert_eq(f.p.sum_violations, 0,
                 "%lld policy calls got counts that no state ever held (e.g. negative "
                 "successes): a torn read of the state word reached a policy",
                 (long long)f.p.sum_violations);
    cr_assert_eq(f.log.order_errors, 0);
}
