/*
 * P1 and S4: only circuit_allow admits a probe. A call
 * that is not an allow (a late circuit_done, circuit_isolate, circuit_reset)
 * and makes the open -> half-open change leaves no reserved probe slot that
 * can time out, hold a slot or be counted, even when it is stopped right
 * after the CAS that made the change.
 *
 * The maker thread runs that call once the open period is over and is
 * stopped just after its transition's CAS (CIRCUIT_TP_AFTER_PUBLISH: the
 * half-open state is made, the call has not returned). Meanwhile this
 * thread:
 *   - moves the clock to the moment a probe admitted by that change would
 *     time out (open end + probe_timeout) and calls allow: it is admitted
 *     as a probe, timed_out stays 0 (state and total) and the probe policy
 *     is not asked about a timeout;
 *   - or, at the open end itself, reads the stats (no probe in flight) and
 *     calls allow: admitted at once, not refused {HALF_OPEN, 0}; that probe
 *     then times out like any other (one timeout, one policy call).
 * The maker is then let go, and the account is checked again.
 *
 * Built with -DCIRCUIT_PLANT_PHANTOM_PROBE, the core reserves slot 0 as a
 * probe whoever makes the change, and a non-allow maker frees it only after
 * its CAS: stopped in between, the reservation times out (timed_out 1, the
 * probe policy asked) and, with probes = 1, every allow is refused
 * {HALF_OPEN, 0} while probes_in_flight reads 1. These tests fail there.
 */
#include "helpers.h"

#define CTX_MAKER ((void *)0x31)
#define CTX_PROBE ((void *)0x32)
#define OPEN_END (T0 + OPEN_FOR)

typedef enum maker_kind { BY_LATE_SUCCESS, BY_LATE_FAILURE, BY_ISOLATE, BY_RESET } maker_kind;
static const char *const kind_names[] = {"late done (success)", "late done (failure)",
                                         "isolate", "reset"};
#define NKINDS 4

typedef struct maker {
    fx *f;
    maker_kind kind;
    circuit_ticket late; /* admitted while closed, settled after the trip */
    int rc;
    bool done_rv;
} maker;

static void *maker_thread(void *arg)
{
    maker *m = arg;
    park_me_at(CIRCUIT_TP_AFTER_PUBLISH);
    switch (m->kind) {
    case BY_LATE_SUCCESS: m->done_rv = circuit_done(&m->late, RS_OK); break;
    case BY_LATE_FAILURE: m->done_rv = circuit_done(&m->late, RS_FAIL); break;
    case BY_ISOLATE: m->rc = circuit_isolate(m->f->b, CTX_MAKER); break;
    case BY_RESET: m->rc = circuit_reset(m->f->b, CTX_MAKER); break;
    }
    return NULL;
}

/* A breaker opened at T0 with the clock at its open end, a closed ticket
 * still live; the maker makes open -> half-open and is stopped right after
 * that transition's CAS. */
static pthread_t start_maker(fx *f, maker *m, maker_kind kind, int probes)
{
    fx_init(f, 4, probes, OPEN_FOR, PROBE_TO);
    fx_build(f);
    *m = (maker){f, kind, CIRCUIT_TICKET_INIT, -1, true};
    circuit_test_clock_set(T0);
    cr_assert(circuit_allow(f->b, CTX_MAKER, &m->late, NULL));
    fx_half_open_due(f); /* opened at T0; the clock at OPEN_END */
    park_setup();
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, maker_thread, m), 0);
    park_wait();
    circuit_stats st;
    circuit_get_stats(f->b, &st);
    cr_assert_eq(st.state, CIRCUIT_HALF_OPEN, "%s: stopped after its CAS", kind_names[kind]);
    cr_assert_eq(st.generation, 2, "%s: closed -> open -> half-open", kind_names[kind]);
    return th;
}

/* Lets the maker finish its call, and checks what that call answered. */
static void finish_maker(maker *m, pthread_t th)
{
    park_release();
    cr_assert_eq(pthread_join(th, NULL), 0);
    const char *name = kind_names[m->kind];
    switch (m->kind) {
    case BY_LATE_SUCCESS:
    case BY_LATE_FAILURE:
        cr_assert_not(m->done_rv, "%s: its result is late (T2)", name);
        break;
    default:
        cr_assert_eq(m->rc, 0, "%s: made its transition", name);
        break;
    }
}

/* Probe-policy calls about a timeout: counts that hold timeouts and no
 * result (every result in these tests is counted after the timeouts). */
static int64_t timeout_asks(const fx *f)
{
    int64_t n = 0;
    for (int64_t k = 0; k < f->p.probe_calls && k < SPY_MAX; k++) {
        const circuit_counts *c = &f->p.probe_seen[k];
        if (c->timed_out > 0 && c->successes == 0 && c->failures == 0)
            n++;
    }
    return n;
}

static circuit_stats stats(const fx *f)
{
    circuit_stats st;
    circuit_get_stats(f->b, &st);
    return st;
}

/* The state after the maker's call returned: its own transition, if any. */
static void check_maker_state(const fx *f, maker_kind kind)
{
    circuit_state want = kind == BY_ISOLATE ? CIRCUIT_ISOLATED
                         : kind == BY_RESET ? CIRCUIT_CLOSED
                                            : CIRCUIT_HALF_OPEN;
    cr_assert_eq(circuit_get_state(f->b), want, "%s: state %s", kind_names[kind],
                 circuit_state_name(circuit_get_state(f->b)));
}

/* Past the moment a probe admitted by the change would time out, the next
 * allow is a probe, and nothing timed out. */
Test(p1_s4_phantom_probe,
     P1_S4_a_half_open_change_by_another_call_leaves_no_probe_to_time_out, .timeout = 60)
{
    static const int probes[] = {1, 3};
    for (int pi = 0; pi < 2; pi++) {
        for (int k = 0; k < NKINDS; k++) {
            fx f;
            maker m;
            const char *name = kind_names[k];
            pthread_t th = start_maker(&f, &m, (maker_kind)k, probes[pi]);

            circuit_test_clock_set(OPEN_END + PROBE_TO);
            circuit_ticket p;
            circuit_rejection rej = {0, 0};
            bool admitted = circuit_allow(f.b, CTX_PROBE, &p, &rej);
            circuit_stats st = stats(&f);
            cr_assert_eq(st.timed_out, 0,
                         "%s, probes %d: timed_out total %llu for a probe never admitted", name,
                         probes[pi], (unsigned long long)st.timed_out);
            cr_assert_eq(st.counts.timed_out, 0, "%s, probes %d: the state's timed_out %lld",
                         name, probes[pi], (long long)st.counts.timed_out);
            cr_assert_eq(timeout_asks(&f), 0,
                         "%s, probes %d: the probe policy was asked %lld times about a timeout",
                         name, probes[pi], (long long)timeout_asks(&f));
            cr_assert(admitted, "%s, probes %d: the allow is a probe (refused {%s, %lld})", name,
                      probes[pi], circuit_state_name(rej.state), (long long)rej.retry_after_ns);
            cr_assert_eq(st.state, CIRCUIT_HALF_OPEN, "%s, probes %d", name, probes[pi]);
            cr_assert_eq(st.probes_in_flight, 1, "%s, probes %d: probes in flight %lld", name,
                         probes[pi], (long long)st.probes_in_flight);
            cr_assert_eq(f.log.n, 2, "%s, probes %d: closed -> open -> half-open, no more",
                         name, probes[pi]);
            assert_tr(&f, 1, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN, 2);
            cr_assert_eq(f.log.ctx[1], CTX_MAKER, "%s: O6, the maker's call_ctx", name);
            if (probes[pi] == 1) {
                circuit_ticket q;
                circuit_rejection rq = {0, 0};
                cr_assert_not(circuit_allow(f.b, NULL, &q, &rq), "%s: the one slot is p's", name);
                assert_rejected(rq, CIRCUIT_HALF_OPEN, 0);
            }

            finish_maker(&m, th);
            check_maker_state(&f, (maker_kind)k);
            bool in_time = k == BY_LATE_SUCCESS || k == BY_LATE_FAILURE;
            cr_assert_eq(circuit_done(&p, RS_OK), in_time,
                         "%s: the probe's success counts while its state lasts (T2)", name);
            st = stats(&f);
            cr_assert_eq(st.timed_out, 0, "%s, probes %d: timed_out total %llu at the end", name,
                         probes[pi], (unsigned long long)st.timed_out);
            cr_assert_eq(timeout_asks(&f), 0, "%s, probes %d: no policy call about a timeout",
                         name, probes[pi]);
            cr_assert_eq(f.p.probe_calls, in_time ? 1 : 0,
                         "%s, probes %d: the probe policy asked %lld times (p's success only)",
                         name, probes[pi], (long long)f.p.probe_calls);
            cr_assert_eq(f.log.order_errors, 0);
            fx_free(&f);
        }
    }
}

/* At the open end itself: nothing is in flight, the next allow is admitted
 * at once (probes = 1: not refused for a probe never admitted), and the
 * probe it is times out as any probe does. */
Test(p1_s4_phantom_probe,
     P1_S4_a_half_open_change_by_another_call_refuses_no_allow_and_holds_no_slot,
     .timeout = 60)
{
    for (int k = 0; k < NKINDS; k++) {
        fx f;
        maker m;
        const char *name = kind_names[k];
        pthread_t th = start_maker(&f, &m, (maker_kind)k, 1);

        circuit_stats st = stats(&f);
        cr_assert_eq(st.probes_in_flight, 0, "%s: probes in flight %lld, none admitted", name,
                     (long long)st.probes_in_flight);
        circuit_ticket p;
        circuit_rejection rej = {0, 0};
        cr_assert(circuit_allow(f.b, CTX_PROBE, &p, &rej), "%s: refused {%s, %lld}", name,
                  circuit_state_name(rej.state), (long long)rej.retry_after_ns);
        st = stats(&f);
        cr_assert_eq(st.probes_in_flight, 1, "%s: p in flight", name);
        cr_assert_eq(st.timed_out, 0, "%s", name);

        /* p's own timeout: counted once, the policy asked once */
        circuit_test_clock_set(OPEN_END + PROBE_TO);
        circuit_ticket q;
        cr_assert(circuit_allow(f.b, NULL, &q, &rej), "%s: p timed out, q takes its slot", name);
        st = stats(&f);
        cr_assert_eq(st.timed_out, 1, "%s: p's timeout (total %llu)", name,
                     (unsigned long long)st.timed_out);
        cr_assert_eq(st.counts.timed_out, 1, "%s: p's timeout (state)", name);
        cr_assert_eq(timeout_asks(&f), 1, "%s: the policy asked about p's timeout", name);
        cr_assert_eq(st.probes_in_flight, 1, "%s: q in flight", name);

        finish_maker(&m, th);
        check_maker_state(&f, (maker_kind)k);
        circuit_release(&q);
        bool in_time = k == BY_LATE_SUCCESS || k == BY_LATE_FAILURE;
        cr_assert_eq(circuit_done(&p, RS_OK), in_time,
                     "%s: p's result counts while its state lasts (P2, T2)", name);
        st = stats(&f);
        cr_assert_eq(st.timed_out, 1, "%s: one timeout in all (total %llu)", name,
                     (unsigned long long)st.timed_out);
        cr_assert_eq(timeout_asks(&f), 1, "%s: one policy call about a timeout", name);
        fx_free(&f);
    }
}
