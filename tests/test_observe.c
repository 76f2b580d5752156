/*
 * O1-O6: delivering transitions to observe.
 */
#include "helpers.h"

#include <stdatomic.h>

/* ---- O1 ---------------------------------------------------------------------- */

Test(observe, O1_every_transition_once_in_generation_order)
{
    fx f;
    fx_init(&f, 4, 1, OPEN_FOR, PROBE_TO);
    f.p.reopen_timeouts = 1;
    fx_build(&f);
    circuit_test_clock_set(T0);
    int64_t made = 0;
    for (int cycle = 0; cycle < 150; cycle++) {
        fx_call(&f, RS_FAIL);
        fx_call(&f, RS_FAIL); /* C -> O */
        circuit_test_clock_advance(OPEN_FOR);
        switch (cycle % 3) {
        case 0:
            fx_call(&f, RS_OK);
            fx_call(&f, RS_OK); /* O -> H, H -> C */
            made += 3;
            break;
        case 1: {
            fx_call(&f, RS_FAIL); /* O -> H, H -> O */
            circuit_test_clock_advance(OPEN_FOR);
            fx_call(&f, RS_OK);
            fx_call(&f, RS_OK); /* O -> H, H -> C */
            made += 5;
            break;
        }
        default: {
            circuit_ticket t;
            cr_assert(circuit_allow(f.b, NULL, &t, NULL)); /* O -> H */
            circuit_test_clock_advance(PROBE_TO);
            circuit_ticket u;
            cr_assert_not(circuit_allow(f.b, NULL, &u, NULL)); /* timeout: H -> O */
            circuit_release(&t);
            circuit_test_clock_advance(OPEN_FOR);
            fx_call(&f, RS_OK);
            fx_call(&f, RS_OK);
            made += 5;
        }
        }
        cr_assert_eq(f.log.n, made, "cycle %d: %lld delivered, %lld made", cycle,
                     (long long)f.log.n, (long long)made);
    }
    cr_assert_eq(f.log.order_errors, 0);
    cr_assert_gt(made, LOG_MAX);
    circuit_state prev = CIRCUIT_CLOSED;
    for (int i = 0; i < LOG_MAX; i++) {
        cr_assert_eq(f.log.tr[i].generation, (uint64_t)i + 1);
        cr_assert_eq(f.log.tr[i].from, prev, "transition %d", i);
        cr_assert_neq(f.log.tr[i].to, f.log.tr[i].from);
        prev = f.log.tr[i].to;
    }
    fx_free(&f);
}

typedef struct hammer {
    fx *f;
    int seed;
    int iterations;
} hammer;

static void *hammer_thread(void *arg)
{
    hammer *h = (hammer *)arg;
    uint32_t x = (uint32_t)h->seed * 2654435761u + 1;
    for (int i = 0; i < h->iterations; i++) {
        x = x * 1103515245u + 12345u;
        uint32_t r = (x >> 8) % 16;
        if (r == 0) {
            circuit_test_clock_advance(OPEN_FOR / 4);
            continue;
        }
        if (r == 1) {
            (void)circuit_get_state(h->f->b);
            continue;
        }
        circuit_ticket t;
        if (!circuit_allow(h->f->b, h, &t, NULL))
            continue;
        if (r == 2)
            circuit_release(&t);
        else
            circuit_done(&t, r < 8 ? RS_FAIL : (r == 15 ? RS_IGN : RS_OK));
    }
    return NULL;
}

static void busy_observe(fx *f, void *call_ctx, const circuit_transition *t)
{
    (void)call_ctx;
    (void)t;
    /* stay a little while inside, calling the breaker, to widen any overlap */
    for (int i = 0; i < 200; i++)
        (void)circuit_get_state(f->b);
}

static void hammer_run(fx *f, int threads, int iterations)
{
    pthread_t th[8];
    hammer h[8];
    for (int i = 0; i < threads; i++) {
        h[i] = (hammer){f, i + 1, iterations};
        pthread_create(&th[i], NULL, hammer_thread, &h[i]);
    }
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
}

Test(observe, O1_exactly_once_in_order_under_concurrent_calls)
{
    fx f;
    fx_init(&f, 8, 2, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 3;
    f.p.close_run = 2;
    f.p.reopen_timeouts = 1;
    f.log.extra = busy_observe;
    fx_build(&f);
    hammer_run(&f, 3, 20000);
    /* every call has returned: nothing stranded (O3) */
    cr_assert_eq(circuit_test_pending(f.b), 0);
    cr_assert_eq(f.log.order_errors, 0, "a transition was delivered twice, out of order or lost");
    cr_assert_gt(f.log.n, 10, "too few transitions to mean anything");
    cr_assert_eq(f.log.last_gen, (uint64_t)f.log.n);
    cr_assert_eq(f.p.sum_violations, 0);
    fx_free(&f);
}

/* ---- O2 ---------------------------------------------------------------------- */

Test(observe, O2_observe_never_runs_concurrently_with_itself)
{
    fx f;
    fx_init(&f, 4, 4, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 1;
    f.p.close_run = 1;
    f.log.extra = busy_observe;
    fx_build(&f);
    hammer_run(&f, 4, 20000);
    cr_assert_eq(f.log.max_inside, 1, "observe ran %lld times at once", (long long)f.log.max_inside);
    cr_assert_gt(f.log.n, 10);
    cr_assert_eq(f.log.order_errors, 0);
    cr_assert_eq(circuit_test_pending(f.b), 0);
    fx_free(&f);
}

typedef struct o2_state {
    int fired;
    int64_t delivered_inside;  /* log.n seen right after the nested calls */
    int64_t pending_inside;
    int ctx_nested;
} o2_state;

static void o2_observe(fx *f, void *call_ctx, const circuit_transition *t)
{
    (void)call_ctx;
    o2_state *st = (o2_state *)f->user;
    if (t->generation != 1 || st->fired++)
        return;
    /* any function of the breaker, allow and done included */
    cr_assert_eq(circuit_get_state(f->b), CIRCUIT_OPEN);
    circuit_test_clock_advance(OPEN_FOR);
    circuit_ticket a;
    cr_assert(circuit_allow(f->b, &st->ctx_nested, &a, NULL)); /* O -> H */
    cr_assert(circuit_done(&a, RS_OK));
    fx_call(f, RS_OK); /* H -> C */
    circuit_ticket r;
    cr_assert(circuit_allow(f->b, NULL, &r, NULL));
    circuit_release(&r);
    st->delivered_inside = A_LOAD(&f->log.n);
    st->pending_inside = circuit_test_pending(f->b);
}

Test(observe, O2_observe_may_call_allow_and_done_and_gets_their_transitions_after)
{
    fx f;
    o2_state st;
    memset(&st, 0, sizeof st);
    fx_init(&f, 4, 1, OPEN_FOR, PROBE_TO);
    f.user = &st;
    f.log.extra = o2_observe;
    fx_build(&f);
    circuit_test_clock_set(T0);
    fx_call(&f, RS_FAIL);
    fx_call(&f, RS_FAIL);
    cr_assert_eq(st.delivered_inside, 1, "a nested transition was delivered inside observe");
    cr_assert_eq(st.pending_inside, 2);
    cr_assert_eq(f.log.n, 3, "nested transitions not delivered after observe returned");
    assert_tr(&f, 0, CIRCUIT_CLOSED, CIRCUIT_OPEN, 1);
    assert_tr(&f, 1, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN, 2);
    assert_tr(&f, 2, CIRCUIT_HALF_OPEN, CIRCUIT_CLOSED, 3);
    cr_assert_eq(f.log.ctx[1], &st.ctx_nested);
    cr_assert_eq(f.log.max_inside, 1);
    cr_assert_eq(circuit_test_pending(f.b), 0);
    fx_free(&f);
}

/* ---- O3 ---------------------------------------------------------------------- */

Test(observe, O3_a_transition_is_delivered_before_its_call_returns)
{
    fx f;
    fx_init(&f, 4, 1, OPEN_FOR, PROBE_TO);
    f.p.reopen_timeouts = 1;
    fx_build(&f);
    circuit_test_clock_set(T0);
    fx_call(&f, RS_FAIL);
    cr_assert_eq(f.log.n, 0);
    circuit_ticket t, u;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    cr_assert(circuit_done(&t, RS_FAIL));
    cr_assert_eq(f.log.n, 1, "done returned before delivering closed -> open");
    circuit_test_clock_advance(OPEN_FOR);
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    cr_assert_eq(f.log.n, 2, "allow returned before delivering open -> half-open");
    circuit_test_clock_advance(PROBE_TO);
    cr_assert_not(circuit_allow(f.b, NULL, &u, NULL));
    cr_assert_eq(f.log.n, 3, "allow returned before delivering the timeout's reopen");
    circuit_release(&t);
    circuit_test_clock_advance(OPEN_FOR);
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    cr_assert(circuit_done(&t, RS_OK));
    cr_assert_eq(f.log.n, 4);
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    cr_assert(circuit_done(&t, RS_OK));
    cr_assert_eq(f.log.n, 5, "done returned before delivering half-open -> closed");
    fx_free(&f);
}

typedef struct o3_ctx {
    fx f;
    pthread_t deliverer;
    pthread_t by[8];
} o3_ctx;

static void o3_observe(fx *f, void *call_ctx, const circuit_transition *t)
{
    (void)call_ctx;
    o3_ctx *c = (o3_ctx *)f->user;
    if (t->generation < 8)
        c->by[t->generation] = pthread_self();
}

static void *o3_thread(void *arg)
{
    o3_ctx *c = (o3_ctx *)arg;
    park_me_at(CIRCUIT_TP_DELIVERY_WON);
    fx_call(&c->f, RS_FAIL);
    fx_call(&c->f, RS_FAIL); /* trips, wins delivery, parks */
    return NULL;
}

Test(observe, O3_a_thread_already_delivering_delivers_it_and_none_is_stranded)
{
    static o3_ctx c;
    fx_init(&c.f, 4, 1, OPEN_FOR, PROBE_TO);
    c.f.user = &c;
    c.f.log.extra = o3_observe;
    fx_build(&c.f);
    park_setup();
    circuit_test_clock_set(T0);
    pthread_create(&c.deliverer, NULL, o3_thread, &c);
    park_wait();
    cr_assert_eq(c.f.log.n, 0);
    /* this thread makes two transitions while the other one holds delivery:
     * its calls return without waiting */
    circuit_test_clock_advance(OPEN_FOR);
    fx_call(&c.f, RS_OK);
    fx_call(&c.f, RS_OK);
    cr_assert_eq(circuit_get_state(c.f.b), CIRCUIT_CLOSED);
    cr_assert_eq(c.f.log.n, 0);
    cr_assert_eq(circuit_test_pending(c.f.b), 3);
    park_release();
    pthread_join(c.deliverer, NULL);
    cr_assert_eq(c.f.log.n, 3, "stranded transitions");
    cr_assert_eq(circuit_test_pending(c.f.b), 0);
    cr_assert_eq(c.f.log.order_errors, 0);
    for (uint64_t g = 1; g <= 3; g++)
        cr_assert(pthread_equal(c.by[g], c.deliverer), "generation %llu delivered by another thread",
                  (unsigned long long)g);
    fx_free(&c.f);
}

/* A thread stopped between making a transition and queueing it: later
 * transitions wait for it, and it delivers them, in order, before its call
 * returns. The stop is in the malloc of the transition record (the pool is
 * used up because another thread holds the delivery role meanwhile). */
typedef struct o3_order {
    fx f;
    int made_67;
} o3_order;

static void o3_order_observe(fx *f, void *call_ctx, const circuit_transition *t)
{
    (void)call_ctx;
    o3_order *c = (o3_order *)f->user;
    if (t->generation == 64 && !c->made_67++)
        fx_call(f, RS_FAIL); /* generation 67, queued while 66 waits for 65 */
}

static void *o3_order_deliverer(void *arg)
{
    o3_order *c = (o3_order *)arg;
    park_me_at(CIRCUIT_TP_DELIVERY_WON);
    fx_call(&c->f, RS_FAIL); /* generation 1; wins delivery and stops */
    return NULL;
}

static void *o3_order_stopped(void *arg)
{
    o3_order *c = (o3_order *)arg;
    alloc_park = 1;
    circuit_ticket t;
    /* makes open -> half-open (65), which admits it as 65's first probe
     * (S3) although 66 and 67 have closed and reopened the breaker by the
     * time it goes on */
    bool ok = circuit_allow(c->f.b, NULL, &t, NULL);
    if (ok)
        circuit_release(&t);
    return ok ? (void *)1 : NULL;
}

Test(observe, O1_O3_a_stopped_publisher_delivers_the_later_transitions_in_order)
{
    static o3_order c;
    fx_init(&c.f, 8, 2, OPEN_FOR, PROBE_TO);
    c.f.p.trip_run = 1;
    c.f.p.close_run = 1;
    c.f.user = &c;
    c.f.log.extra = o3_order_observe;
    fx_build(&c.f);
    park_setup();
    alloc_park_setup();
    circuit_test_clock_set(T0);
    pthread_t d, x;
    pthread_create(&d, NULL, o3_order_deliverer, &c);
    park_wait();
    /* generations 2..64: the pool of 64 records is used up */
    for (int i = 0; i < 21; i++) {
        circuit_test_clock_advance(OPEN_FOR);
        fx_call(&c.f, RS_OK);   /* open -> half-open -> closed */
        fx_call(&c.f, RS_FAIL); /* closed -> open */
    }
    cr_assert_eq(circuit_test_pending(c.f.b), 64);
    cr_assert_eq(c.f.log.n, 0);
    /* 65 is made by a thread that stops before queueing it */
    circuit_test_clock_advance(OPEN_FOR);
    pthread_create(&x, NULL, o3_order_stopped, &c);
    alloc_wait();
    /* 66: made and queued here */
    circuit_ticket t;
    cr_assert(circuit_allow(c.f.b, NULL, &t, NULL));
    cr_assert(circuit_done(&t, RS_OK)); /* half-open -> closed */
    /* the deliverer goes on: 1..64, then (observe makes 67) it must stop at 65 */
    park_release();
    pthread_join(d, NULL);
    cr_assert_eq(c.f.log.n, 64, "delivered past a missing generation");
    cr_assert_eq(c.made_67, 1);
    /* the stopped thread queues 65 and delivers 65, 66, 67 before returning */
    alloc_release();
    void *ret = NULL;
    pthread_join(x, &ret);
    cr_assert_eq(ret, (void *)1, "S3: the call that made 65 was not admitted");
    cr_assert_eq(c.f.log.n, 67, "stranded: %lld delivered of 67", (long long)c.f.log.n);
    cr_assert_eq(c.f.log.order_errors, 0);
    cr_assert_eq(circuit_test_pending(c.f.b), 0);
    fx_free(&c.f);
}

/* ---- transitions left pending by an observe that unwinds (O4, O5) ---------------- */

typedef struct unwind_ctx {
    fx f;
    int fired;
    int ctx_thread;
} unwind_ctx;

static void unwind_observe(fx *f, void *call_ctx, const circuit_transition *t)
{
    (void)call_ctx;
    unwind_ctx *c = (unwind_ctx *)f->user;
    if (t->generation != 1 || c->fired++)
        return;
    circuit_test_clock_advance(OPEN_FOR);
    fx_call(f, RS_OK); /* O -> H (generation 2), one success */
    fx_call(f, RS_OK); /* H -> C (generation 3) */
    pthread_exit(NULL);
}

static void *unwind_thread(void *arg)
{
    unwind_ctx *c = (unwind_ctx *)arg;
    fx_call_ctx(&c->f, &c->ctx_thread, RS_FAIL);
    fx_call_ctx(&c->f, &c->ctx_thread, RS_FAIL); /* trips; observe exits the thread */
    return (void *)1;
}

static void leave_two_pending(unwind_ctx *c)
{
    void *ret = NULL;
    pthread_t th;
    pthread_create(&th, NULL, unwind_thread, c);
    pthread_join(th, &ret);
    cr_assert_null(ret, "observe did not unwind the thread");
    cr_assert_eq(c->f.log.n, 1);
    cr_assert_eq(circuit_test_pending(c->f.b), 2);
    cr_assert_eq(circuit_get_state(c->f.b), CIRCUIT_CLOSED);
}

static void unwind_init(unwind_ctx *c)
{
    memset(c, 0, sizeof *c);
    fx_init(&c->f, 4, 1, OPEN_FOR, PROBE_TO);
    c->f.user = c;
    c->f.log.extra = unwind_observe;
    fx_build(&c->f);
    circuit_test_clock_set(T0);
}

/* ---- O4 ---------------------------------------------------------------------- */

static int64_t *o4_seen;
static fx *o4_fx;

static void o4_hook(circuit_test_point p, void *arg)
{
    (void)arg;
    if (p == CIRCUIT_TP_ALLOW_BEFORE_ADMIT && o4_seen && *o4_seen < 0)
        *o4_seen = A_LOAD(&o4_fx->log.n);
}

Test(observe, O4_allow_delivers_what_is_pending_before_admitting)
{
    static unwind_ctx c;
    unwind_init(&c);
    leave_two_pending(&c);
    int64_t seen = -1;
    o4_seen = &seen;
    o4_fx = &c.f;
    circuit_test_set_hook(o4_hook, NULL);
    circuit_ticket t;
    cr_assert(circuit_allow(c.f.b, NULL, &t, NULL));
    circuit_test_set_hook(NULL, NULL);
    cr_assert_eq(seen, 3, "allow decided with %lld of 3 transitions delivered", (long long)seen);
    cr_assert_eq(circuit_test_pending(c.f.b), 0);
    assert_tr(&c.f, 1, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN, 2);
    assert_tr(&c.f, 2, CIRCUIT_HALF_OPEN, CIRCUIT_CLOSED, 3);
    cr_assert(circuit_done(&t, RS_OK));
    fx_free(&c.f);
}

Test(observe, O4_pending_transitions_come_before_the_ones_allow_makes)
{
    static unwind_ctx c;
    unwind_init(&c);
    c.f.p.trip_run = 1;
    leave_two_pending(&c);
    fx_call(&c.f, RS_FAIL); /* delivers 2 and 3, then trips: 4 */
    cr_assert_eq(c.f.log.n, 4);
    circuit_test_clock_advance(OPEN_FOR);
    circuit_ticket t;
    cr_assert(circuit_allow(c.f.b, NULL, &t, NULL));
    cr_assert_eq(c.f.log.n, 5);
    assert_tr(&c.f, 3, CIRCUIT_CLOSED, CIRCUIT_OPEN, 4);
    assert_tr(&c.f, 4, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN, 5);
    cr_assert_eq(c.f.log.order_errors, 0);
    circuit_release(&t);
    fx_free(&c.f);
}

/* ---- O5 ---------------------------------------------------------------------- */

Test(observe, O5_observe_that_exits_the_thread_leaves_the_rest_to_the_next_allow)
{
    static unwind_ctx c;
    unwind_init(&c);
    leave_two_pending(&c);
    circuit_ticket t;
    cr_assert(circuit_allow(c.f.b, NULL, &t, NULL));
    cr_assert_eq(c.f.log.n, 3);
    cr_assert_eq(c.f.log.order_errors, 0);
    cr_assert(circuit_done(&t, RS_OK));
    /* the breaker keeps working, and delivering */
    fx_call(&c.f, RS_FAIL);
    fx_call(&c.f, RS_FAIL);
    cr_assert_eq(c.f.log.n, 4);
    assert_tr(&c.f, 3, CIRCUIT_CLOSED, CIRCUIT_OPEN, 4);
    circuit_test_clock_advance(OPEN_FOR);
    fx_call(&c.f, RS_OK);
    fx_call(&c.f, RS_OK);
    cr_assert_eq(c.f.log.n, 6);
    cr_assert_eq(c.f.log.order_errors, 0);
    cr_assert_eq(circuit_test_pending(c.f.b), 0);
    fx_free(&c.f);
}

Test(observe, O5_observe_that_exits_the_thread_leaves_the_rest_to_the_next_done)
{
    static unwind_ctx c;
    unwind_init(&c);
    circuit_ticket old;
    cr_assert(circuit_allow(c.f.b, NULL, &old, NULL)); /* admitted before: generation 0 */
    leave_two_pending(&c);
    cr_assert_not(circuit_done(&old, RS_FAIL)); /* late, but delivers */
    cr_assert_eq(c.f.log.n, 3);
    cr_assert_eq(circuit_test_pending(c.f.b), 0);
    cr_assert_eq(c.f.log.order_errors, 0);
    fx_free(&c.f);
}

/* observe exits the thread while delivering the transition an allow made:
 * the guard of that allow's ticket frees the probe slot. */
typedef struct o5_guard_ctx {
    fx f;
    int armed;
} o5_guard_ctx;

static void o5_exit_observe(fx *f, void *call_ctx, const circuit_transition *t)
{
    (void)call_ctx;
    o5_guard_ctx *c = (o5_guard_ctx *)f->user;
    if (c->armed && t->to == CIRCUIT_HALF_OPEN)
        pthread_exit(NULL);
}

static void *o5_guard_thread(void *arg)
{
    o5_guard_ctx *c = (o5_guard_ctx *)arg;
    CIRCUIT_TICKET_GUARD(t);
    if (circuit_allow(c->f.b, NULL, &t, NULL)) /* makes open -> half-open; observe exits */
        circuit_done(&t, RS_OK);
    return (void *)1;
}

Test(observe, O5_observe_unwinding_out_of_allow_leaves_a_consistent_breaker)
{
    static o5_guard_ctx c;
    fx_init(&c.f, 4, 1, OPEN_FOR, PROBE_TO);
    c.f.user = &c;
    c.f.log.extra = o5_exit_observe;
    fx_build(&c.f);
    fx_half_open_due(&c.f);
    c.armed = 1;
    pthread_t th;
    void *ret = NULL;
    pthread_create(&th, NULL, o5_guard_thread, &c);
    pthread_join(th, &ret);
    cr_assert_null(ret);
    c.armed = 0;
    cr_assert_eq(c.f.log.n, 2);
    cr_assert_eq(circuit_get_state(c.f.b), CIRCUIT_HALF_OPEN);
    circuit_ticket u, v;
    circuit_rejection rej;
    cr_assert(circuit_allow(c.f.b, NULL, &u, &rej), "the probe slot was not released by the guard");
    cr_assert_not(circuit_allow(c.f.b, NULL, &v, &rej));
    cr_assert_eq(c.f.p.probe_calls, 0);
    cr_assert(circuit_done(&u, RS_OK));
    fx_call(&c.f, RS_OK);
    cr_assert_eq(circuit_get_state(c.f.b), CIRCUIT_CLOSED);
    cr_assert_eq(c.f.log.n, 3);
    fx_free(&c.f);
}

/* ---- O6 ---------------------------------------------------------------------- */

Test(observe, O6_observe_gets_the_call_ctx_of_the_call_that_made_the_transition)
{
    fx f;
    fx_init(&f, 4, 2, OPEN_FOR, PROBE_TO);
    f.p.close_run = 1;
    f.p.reopen_timeouts = 1;
    fx_build(&f);
    int ca, cb, cc, cd, ce, cf, cg;
    circuit_ticket t, p1, p2, x;
    circuit_test_clock_set(T0);
    fx_call_ctx(&f, &cg, RS_FAIL);
    /* done: the ctx given to the allow of its ticket */
    cr_assert(circuit_allow(f.b, &ca, &t, NULL));
    cr_assert(circuit_done(&t, RS_FAIL));
    cr_assert_eq(f.log.ctx[0], &ca);
    /* allow making open -> half-open */
    circuit_test_clock_advance(OPEN_FOR);
    cr_assert(circuit_allow(f.b, &cb, &p1, NULL));
    cr_assert_eq(f.log.ctx[1], &cb);
    cr_assert(circuit_allow(f.b, &cc, &p2, NULL));
    cr_assert(circuit_done(&p2, RS_OK)); /* closes */
    cr_assert_eq(f.log.ctx[2], &cc);
    cr_assert_not(circuit_done(&p1, RS_OK));
    /* a reopen by timeout noticed by an allow */
    fx_call(&f, RS_FAIL);
    fx_call(&f, RS_FAIL);
    circuit_test_clock_advance(OPEN_FOR);
    cr_assert(circuit_allow(f.b, NULL, &p1, NULL));
    circuit_test_clock_advance(PROBE_TO);
    cr_assert_not(circuit_allow(f.b, &cd, &x, NULL));
    cr_assert_eq(f.log.n, 6);
    cr_assert_eq(f.log.ctx[5], &cd);
    circuit_release(&p1);
    /* a reopen by timeout noticed by a done */
    circuit_test_clock_advance(OPEN_FOR);
    cr_assert(circuit_allow(f.b, NULL, &p1, NULL));
    circuit_test_clock_advance(100);
    cr_assert(circuit_allow(f.b, &ce, &p2, NULL));
    circuit_test_clock_advance(PROBE_TO - 100);
    cr_assert_not(circuit_done(&p2, RS_OK)); /* p1's timeout reopened first */
    cr_assert_eq(f.log.n, 8);
    cr_assert_eq(f.log.ctx[7], &ce);
    /* and the next open -> half-open by an allow again */
    circuit_test_clock_advance(OPEN_FOR);
    cr_assert(circuit_allow(f.b, &cf, &x, NULL));
    cr_assert_eq(f.log.ctx[8], &cf);
    circuit_release(&x);
    circuit_release(&p1);
    cr_assert_eq(f.log.order_errors, 0);
    fx_free(&f);
}

/* open -> half-open made by circuit_done: the ticket's ctx */
Test(observe, O6_half_open_made_by_a_done_carries_that_tickets_ctx)
{
    fx f;
    fx_init(&f, 4, 2, OPEN_FOR, PROBE_TO);
    fx_build(&f);
    fx_half_open_due(&f);
    int cx;
    circuit_ticket p1, p2;
    cr_assert(circuit_allow(f.b, NULL, &p1, NULL));
    cr_assert(circuit_allow(f.b, &cx, &p2, NULL));
    circuit_test_clock_advance(10);
    cr_assert(circuit_done(&p1, RS_FAIL)); /* reopens at T0 + OPEN_FOR + 10 */
    circuit_test_clock_advance(OPEN_FOR);
    cr_assert_eq(f.log.n, 3);
    /* p2 holds a slot, so its done reads the clock and makes the time-driven change */
    cr_assert_not(circuit_done(&p2, RS_OK));
    cr_assert_eq(f.log.n, 4);
    assert_tr(&f, 3, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN, 4);
    cr_assert_eq(f.log.ctx[3], &cx);
    fx_free(&f);
}

/* ---- O6 under helping: an intent finished by another call ------------------ */

typedef struct o6_maker {
    fx *f;
    void *ctx;
    bool isolate; /* else: a failure that trips */
} o6_maker;

static void *o6_make(void *arg)
{
    o6_maker *m = arg;
    park_me_at(CIRCUIT_TP_INTENT_MADE); /* stop right after the intent's CAS */
    if (m->isolate) {
        cr_assert_eq(circuit_isolate(m->f->b, m->ctx), 0);
    } else {
        circuit_ticket t;
        cr_assert(circuit_allow(m->f->b, m->ctx, &t, NULL));
        cr_assert(circuit_done(&t, RS_FAIL));
    }
    return NULL;
}

/* A trip or an isolate from closed is an intent that any thread finishes
 * (L1). Its maker stops right after making it, and another request's done
 * finishes it: observe must get the maker's call_ctx, the call whose
 * action made the transition, not the finisher's (not a request's ctx for
 * the operator's isolate, nor the ctx of the success that finished a
 * trip). */
static void o6_intent_run(bool isolate)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 2; /* the second failure in a row trips */
    fx_build(&f);
    park_setup();
    int maker_ctx, other_ctx;
    if (!isolate)
        cr_assert(fx_call(&f, RS_FAIL)); /* one failure: the maker's is the second */
    circuit_ticket t;
    cr_assert(circuit_allow(f.b, &other_ctx, &t, NULL)); /* a request in flight */
    o6_maker m = {&f, &maker_ctx, isolate};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, o6_make, &m), 0);
    park_wait();
    cr_assert_eq(f.log.n, 0, "nothing is delivered before the intent is finished");
    /* the request's result meets the intent and finishes it (late: its
     * generation ends with the transition it finished) */
    (void)circuit_done(&t, RS_OK);
    cr_assert_eq(circuit_get_state(f.b), isolate ? CIRCUIT_ISOLATED : CIRCUIT_OPEN);
    park_release();
    pthread_join(th, NULL);
    circuit_test_set_hook(NULL, NULL);
    cr_assert_eq(f.log.n, 1);
    assert_tr(&f, 0, CIRCUIT_CLOSED, isolate ? CIRCUIT_ISOLATED : CIRCUIT_OPEN, 1);
    cr_assert_eq(f.log.tr[0].cause, isolate ? CIRCUIT_CAUSE_OPERATOR : CIRCUIT_CAUSE_POLICY);
    cr_assert_eq(f.log.ctx[0], &maker_ctx, "O6: observe got %s's call_ctx",
                 f.log.ctx[0] == &other_ctx ? "the finishing request" : "another call");
    fx_free(&f);
}

Test(observe, O6_an_isolate_finished_by_a_request_carries_the_operators_ctx)
{
    o6_intent_run(true);
}

Test(observe, O6_a_trip_finished_by_another_calls_done_carries_the_failing_calls_ctx)
{
    o6_intent_run(false);
}

/* ---- CFG4 (0.3): circuit_free from inside a callback of the same breaker ------- */

/* A breaker whose callbacks free it (or another breaker) when told to. The
 * call that runs a callback still uses its breaker afterwards, so freeing
 * it there aborts, naming the callback; freeing another breaker is fine. */
typedef struct selfree {
    circuit_breaker *b;      /* this breaker */
    circuit_breaker *victim; /* what the chosen callback frees */
    const char *in;          /* which callback frees: "observe", "classify", ... */
    circuit_breaker *nested; /* observe: first makes a call on this breaker */
    int freed;               /* the free returned (no abort) */
} selfree;

static void selfree_maybe(selfree *s, const char *where)
{
    if (s->in && strcmp(s->in, where) == 0 && s->victim) {
        circuit_breaker *v = s->victim;
        s->victim = NULL;
        circuit_free(v);
        s->freed++;
    }
}

static bool selfree_trip(void *arg, const circuit_counts *c)
{
    selfree_maybe(arg, "trip");
    return c->failures >= 1;
}

static circuit_state selfree_probe(void *arg, const circuit_counts *c)
{
    selfree_maybe(arg, "probe");
    return c->failures > 0 ? CIRCUIT_OPEN : CIRCUIT_CLOSED;
}

static circuit_outcome selfree_classify(void *arg, void *call_ctx, int result)
{
    (void)call_ctx;
    selfree_maybe(arg, "classify");
    return result == 0 ? CIRCUIT_SUCCESS : CIRCUIT_FAILURE;
}

static int64_t selfree_open_for(void *arg, const circuit_open_info *info)
{
    (void)info;
    selfree_maybe(arg, "open_for");
    return 1000;
}

static void selfree_observe(void *arg, void *call_ctx, const circuit_transition *t)
{
    (void)call_ctx;
    (void)t;
    selfree *s = arg;
    if (s->nested) { /* a call on another breaker, from inside this observe */
        circuit_breaker *n = s->nested;
        s->nested = NULL;
        circuit_ticket k;
        if (circuit_allow(n, NULL, &k, NULL))
            circuit_done(&k, 0);
        return;
    }
    selfree_maybe(s, "observe");
}

static circuit_breaker *selfree_new(selfree *s)
{
    circuit_spec spec = {
        .config = {.window = 4, .probes = 1, .open_for_ns = 1000, .probe_timeout_ns = 1000},
        .policy = {.trip = selfree_trip, .probe = selfree_probe, .arg = s},
        .classify = selfree_classify,
        .classify_arg = s,
        .observe = selfree_observe,
        .observe_arg = s,
        .open_for = selfree_open_for,
        .open_for_arg = s,
    };
    cr_assert_eq(circuit_new(&s->b, &spec, NULL, 0), 0);
    return s->b;
}

/* One failure trips (trip, open_for, observe); after the open period a
 * probe (classify, probe). */
static void selfree_drive(selfree *s)
{
    circuit_test_clock_use_real(false);
    circuit_test_clock_set(T0);
    circuit_ticket t;
    if (circuit_allow(s->b, NULL, &t, NULL))
        circuit_done(&t, 1);
    circuit_test_clock_advance(1000);
    if (circuit_allow(s->b, NULL, &t, NULL))
        circuit_done(&t, 0);
}

static void selfree_in(void *arg)
{
    static selfree s;
    memset(&s, 0, sizeof s);
    s.in = arg;
    s.victim = selfree_new(&s);
    selfree_drive(&s);
}

Test(observe, CFG4_free_from_inside_observe_aborts_naming_observe)
{
    expect_abort(selfree_in, "observe",
                 "circuit_free: called from inside observe of the same breaker");
}

Test(observe, CFG4_free_from_inside_any_other_callback_aborts_naming_it)
{
    expect_abort(selfree_in, "classify",
                 "circuit_free: called from inside classify of the same breaker");
    expect_abort(selfree_in, "trip", "circuit_free: called from inside trip of the same breaker");
    expect_abort(selfree_in, "open_for",
                 "circuit_free: called from inside open_for of the same breaker");
    expect_abort(selfree_in, "probe",
                 "circuit_free: called from inside probe of the same breaker");
}

/* Breaker A's observe makes a call on breaker B, whose classify frees A:
 * A's observe is still below on the stack, so that aborts too. */
static void selfree_nested(void *arg)
{
    (void)arg;
    static selfree a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    selfree_new(&a);
    selfree_new(&b);
    a.nested = b.b;
    b.in = "classify";
    b.victim = a.b;
    selfree_drive(&a);
}

Test(observe, CFG4_free_from_a_nested_call_inside_observe_aborts)
{
    expect_abort(selfree_nested, NULL,
                 "circuit_free: called from inside observe of the same breaker");
}

Test(observe, CFG4_observe_may_free_another_breaker)
{
    selfree a, other;
    memset(&a, 0, sizeof a);
    memset(&other, 0, sizeof other);
    selfree_new(&a);
    a.in = "observe";
    a.victim = selfree_new(&other);
    selfree_drive(&a);
    cr_assert_eq(a.freed, 1, "observe freed the other breaker and went on");
    circuit_stats st;
    circuit_get_stats(a.b, &st);
    cr_assert_eq(st.transitions, 3); /* open, half-open, closed */
    circuit_free(a.b);               /* outside every callback: fine */
}

/* Two makers at the same point: an operator's isolate writes its O6 record
 * and stops before its intent's CAS; a failing request that would trip
 * writes its own record and stops there too; the isolate's CAS wins and
 * its maker stops again right after it; a third call finishes the isolate.
 * observe must get the operator's call_ctx. With one record for every kind
 * (0.3 before this test), the request's record replaced the operator's and
 * the finisher's call_ctx was given. */
static _Thread_local int xk_role; /* 1: the operator, 2: the request */
static sem_t xk_op_stopped, xk_op_go, xk_req_stopped, xk_req_go;
static atomic_int xk_op_stops; /* stops left for the operator: 2, then 1, then 0 */
static atomic_bool xk_req_armed;

static void xk_hook(circuit_test_point p, void *arg)
{
    (void)arg;
    if (xk_role == 1 &&
        ((p == CIRCUIT_TP_INTENT_BEFORE_CAS && atomic_load(&xk_op_stops) == 2) ||
         (p == CIRCUIT_TP_INTENT_MADE && atomic_load(&xk_op_stops) == 1))) {
        atomic_fetch_sub(&xk_op_stops, 1);
        sem_post(&xk_op_stopped);
        while (sem_wait(&xk_op_go) != 0)
            ;
    } else if (xk_role == 2 && p == CIRCUIT_TP_INTENT_BEFORE_CAS &&
               atomic_exchange(&xk_req_armed, false)) {
        sem_post(&xk_req_stopped);
        while (sem_wait(&xk_req_go) != 0)
            ;
    }
}

typedef struct xk_call {
    fx *f;
    void *ctx;
    circuit_ticket t;
} xk_call;

static void *xk_isolate(void *arg)
{
    xk_call *c = arg;
    xk_role = 1;
    cr_assert_eq(circuit_isolate(c->f->b, c->ctx), 0);
    return NULL;
}

static void *xk_fail(void *arg)
{
    xk_call *c = arg;
    xk_role = 2;
    (void)circuit_done(&c->t, RS_FAIL); /* late: the isolate came first */
    return NULL;
}

static void xk_wait(sem_t *s)
{
    while (sem_wait(s) != 0)
        ;
}

Test(observe, O6_an_isolate_racing_a_trip_at_the_same_point_carries_the_operators_ctx)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 1; /* a failure trips */
    fx_build(&f);
    int op_ctx, req_ctx, other_ctx;
    sem_init(&xk_op_stopped, 0, 0);
    sem_init(&xk_op_go, 0, 0);
    sem_init(&xk_req_stopped, 0, 0);
    sem_init(&xk_req_go, 0, 0);
    atomic_store(&xk_op_stops, 2);
    atomic_store(&xk_req_armed, true);
    xk_call op = {&f, &op_ctx, CIRCUIT_TICKET_INIT};
    xk_call req = {&f, &req_ctx, CIRCUIT_TICKET_INIT};
    circuit_ticket t;
    cr_assert(circuit_allow(f.b, &req_ctx, &req.t, NULL));
    cr_assert(circuit_allow(f.b, &other_ctx, &t, NULL));
    circuit_test_set_hook(xk_hook, NULL);
    pthread_t xk_op, xk_req;
    cr_assert_eq(pthread_create(&xk_op, NULL, xk_isolate, &op), 0);
    xk_wait(&xk_op_stopped); /* the operator's record written */
    cr_assert_eq(pthread_create(&xk_req, NULL, xk_fail, &req), 0);
    xk_wait(&xk_req_stopped); /* the request's record written after it */
    sem_post(&xk_op_go);
    xk_wait(&xk_op_stopped); /* the isolate's intent is in the word */
    cr_assert_eq(f.log.n, 0);
    (void)circuit_done(&t, RS_OK); /* finishes the isolate (late) */
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_ISOLATED);
    sem_post(&xk_req_go);
    sem_post(&xk_op_go);
    pthread_join(xk_op, NULL);
    pthread_join(xk_req, NULL);
    circuit_test_set_hook(NULL, NULL);
    cr_assert_eq(f.log.n, 1, "the request's trip was late: only the isolate");
    assert_tr(&f, 0, CIRCUIT_CLOSED, CIRCUIT_ISOLATED, 1);
    cr_assert_eq(f.log.tr[0].cause, CIRCUIT_CAUSE_OPERATOR);
    cr_assert_eq(f.log.ctx[0], &op_ctx, "O6: observe got %s's call_ctx",
                 f.log.ctx[0] == &other_ctx ? "the finishing request"
                 : f.log.ctx[0] == &req_ctx ? "the racing request"
                                            : "another call");
    fx_free(&f);
}

/* A maker whose word moved on must not replace a newer maker's record: an
 * operator's isolate A reads the closed word at point k and stops before
 * making its intent; a failure (no trip) makes point k + 1; a second
 * isolate B makes its intent at k + 1 and stops right after. A then goes on:
 * its record is for k, its intent's CAS fails, and it finishes B's isolate.
 * observe must get B's call_ctx (B's isolate made the transition; A answers
 * EALREADY): A's stale record must not replace B's, and A, finishing B's
 * intent, must not give its own. */
static sem_t st_a_stopped, st_a_go, st_b_stopped, st_b_go;
static atomic_bool st_a_armed, st_b_armed;
static _Thread_local int st_role; /* 1: A, 2: B */

static void st_hook(circuit_test_point p, void *arg)
{
    (void)arg;
    if (st_role == 1 && p == CIRCUIT_TP_OPERATOR_BEFORE_CAS && atomic_exchange(&st_a_armed, false)) {
        sem_post(&st_a_stopped);
        xk_wait(&st_a_go);
    } else if (st_role == 2 && p == CIRCUIT_TP_INTENT_MADE && atomic_exchange(&st_b_armed, false)) {
        sem_post(&st_b_stopped);
        xk_wait(&st_b_go);
    }
}

typedef struct st_isolator {
    fx *f;
    void *ctx;
    int role;
    int rc;
} st_isolator;

static void *st_isolate(void *arg)
{
    st_isolator *s = arg;
    st_role = s->role;
    s->rc = circuit_isolate(s->f->b, s->ctx);
    return NULL;
}

Test(observe, O6_a_maker_whose_word_moved_on_never_hides_the_newer_makers_ctx)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0; /* never trips */
    fx_build(&f);
    int a_ctx, b_ctx;
    sem_init(&st_a_stopped, 0, 0);
    sem_init(&st_a_go, 0, 0);
    sem_init(&st_b_stopped, 0, 0);
    sem_init(&st_b_go, 0, 0);
    atomic_store(&st_a_armed, true);
    atomic_store(&st_b_armed, true);
    circuit_test_set_hook(st_hook, NULL);
    st_isolator a = {&f, &a_ctx, 1, -1}, bi = {&f, &b_ctx, 2, -1};
    pthread_t ta, tb;
    cr_assert_eq(pthread_create(&ta, NULL, st_isolate, &a), 0);
    xk_wait(&st_a_stopped); /* A read the word at point k */
    cr_assert(fx_call(&f, RS_FAIL)); /* point k + 1 */
    cr_assert_eq(pthread_create(&tb, NULL, st_isolate, &bi), 0);
    xk_wait(&st_b_stopped); /* B's intent at k + 1 is in the word */
    sem_post(&st_a_go);
    pthread_join(ta, NULL);
    sem_post(&st_b_go);
    pthread_join(tb, NULL);
    circuit_test_set_hook(NULL, NULL);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_ISOLATED);
    cr_assert_eq(f.log.n, 1);
    assert_tr(&f, 0, CIRCUIT_CLOSED, CIRCUIT_ISOLATED, 1);
    cr_assert_eq(f.log.ctx[0], &b_ctx, "O6: observe got %s's call_ctx",
                 f.log.ctx[0] == &a_ctx ? "the stale maker" : "another call");
    cr_assert(a.rc == EALREADY && bi.rc == 0, "A %d, B %d", a.rc, bi.rc);
    fx_free(&f);
}
