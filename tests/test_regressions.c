/*
 * Regressions: each test reproduces a bug found in an
 * earlier core, named by the rule it broke.
 */
#include "helpers.h"

#include <stdatomic.h>

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

/* ---- a stopped entry into closed and the new state's descriptors ---------- */

/* Thread A resets an isolated breaker and stops after checking the word,
 * before it writes the descriptor slot it read; meanwhile the main thread
 * resets, and the new closed state makes its points; A goes on when the
 * main thread has made a trip intent and before it completes it. A's stale
 * write must not touch the new state's descriptors: 0.3's first cut emptied
 * the slots with "read X, check, CAS X", and a descriptor does not name its
 * generation, so the new state's D_1 (one failure, as the old D_1) matched
 * A's X bit for bit and was erased; the intent word no longer holds the
 * point's sum, so D_1 was derived from the asked sum and the trip's final
 * counts came out as F F (a run of 2) instead of F S S S F (C4). */
static sem_t rs_a_stopped, rs_a_go, rs_a_done;
static pthread_t rs_a;
static atomic_bool rs_a_stop_armed, rs_intent_armed;

static void reset_race_hook(circuit_test_point p, void *arg)
{
    (void)arg;
    if (p == CIRCUIT_TP_CLOSED_START_BEFORE_DESC && pthread_equal(pthread_self(), rs_a) &&
        atomic_exchange(&rs_a_stop_armed, false)) {
        sem_post(&rs_a_stopped);
        while (sem_wait(&rs_a_go) != 0)
            ;
    } else if (p == CIRCUIT_TP_INTENT_MADE && !pthread_equal(pthread_self(), rs_a) &&
               atomic_exchange(&rs_intent_armed, false)) {
        sem_post(&rs_a_go); /* A's stale write, while the intent waits */
        while (sem_wait(&rs_a_done) != 0)
            ;
    }
}

static void *reset_a(void *arg)
{
    fx *f = arg;
    int rc = circuit_reset(f->b, NULL);
    cr_assert(rc == 0 || rc == EALREADY, "reset: %d", rc);
    sem_post(&rs_a_done);
    return NULL;
}

Test(regressions, C4_L1_a_stopped_entry_into_closed_never_erases_the_new_states_counts)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    f.p.trip_failures = 2;
    fx_build(&f);
    cr_assert(fx_call(&f, RS_FAIL)); /* the old state's D_1: one failure */
    cr_assert_eq(circuit_isolate(f.b, NULL), 0);

    sem_init(&rs_a_stopped, 0, 0);
    sem_init(&rs_a_go, 0, 0);
    sem_init(&rs_a_done, 0, 0);
    atomic_store(&rs_a_stop_armed, true);
    atomic_store(&rs_intent_armed, false);
    circuit_test_set_hook(reset_race_hook, NULL);
    cr_assert_eq(pthread_create(&rs_a, NULL, reset_a, &f), 0);
    while (sem_wait(&rs_a_stopped) != 0)
        ;
    cr_assert_eq(circuit_reset(f.b, NULL), 0, "the main thread's reset enters closed");
    cr_assert(fx_call(&f, RS_FAIL)); /* the new state's first point: one failure */
    for (int i = 0; i < 3; i++)
        cr_assert(fx_call(&f, RS_OK));
    atomic_store(&rs_intent_armed, true);
    cr_assert(fx_call(&f, RS_FAIL), "the second failure trips (counted by its completion)");
    pthread_join(rs_a, NULL);
    circuit_test_set_hook(NULL, NULL);
    cr_assert_not(atomic_load(&rs_intent_armed), "the trip went through an intent");

    /* closed -> isolated, isolated -> closed, closed -> open, then A's own
     * reset may close it again */
    cr_assert_geq(f.log.n, 3);
    assert_tr(&f, 2, CIRCUIT_CLOSED, CIRCUIT_OPEN, 3);
    assert_counts(&f.log.tr[2].counts, 3, 2, 0, 1, 0); /* F S S S F: a run of 1 failure */
    fx_free(&f);
}

/* ---- a stopped entry into closed and the new state's bitmap --------------- */

/* Thread A resets an isolated breaker and stops after checking the word,
 * before its CAS emptying the closed bitmap's word; the main thread resets,
 * and the new state's first two failures set their bits; then A goes on. A's CAS
 * is from the word it read (the old state's tag): it must fail and leave
 * the new bit alone, or the failure is never seen to leave the window: when
 * a later point evicts it (window 8), the window holds the three failures
 * after it (C1). A store of {k0, 0} that did not compare the tag erases the
 * bit, and the counts come out as 4 failures. */
static sem_t bs_a_stopped, bs_a_go;
static pthread_t bs_a;
static atomic_bool bs_a_stop_armed;

static void bits_race_hook(circuit_test_point p, void *arg)
{
    (void)arg;
    if (p == CIRCUIT_TP_CLOSED_START_BEFORE_BITS && pthread_equal(pthread_self(), bs_a) &&
        atomic_exchange(&bs_a_stop_armed, false)) {
        sem_post(&bs_a_stopped);
        while (sem_wait(&bs_a_go) != 0)
            ;
    }
}

static void *bits_reset_a(void *arg)
{
    fx *f = arg;
    int rc = circuit_reset(f->b, NULL);
    cr_assert(rc == 0 || rc == EALREADY, "reset: %d", rc);
    return NULL;
}

Test(regressions, C1_L1_a_stopped_entry_into_closed_never_empties_the_new_states_bitmap)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0; /* never trips */
    fx_build(&f);
    cr_assert(fx_call(&f, RS_FAIL)); /* the old state's bitmap holds a failure */
    cr_assert_eq(circuit_isolate(f.b, NULL), 0);

    sem_init(&bs_a_stopped, 0, 0);
    sem_init(&bs_a_go, 0, 0);
    atomic_store(&bs_a_stop_armed, true);
    circuit_test_set_hook(bits_race_hook, NULL);
    cr_assert_eq(pthread_create(&bs_a, NULL, bits_reset_a, &f), 0);
    while (sem_wait(&bs_a_stopped) != 0)
        ;
    cr_assert_eq(circuit_reset(f.b, NULL), 0, "the main thread's reset enters closed");
    /* positions 0 F, 1 S, 2 F: two points, so the one that set F0's bit is
     * no longer the newest (helpers re-apply only the newest point's
     * update) */
    cr_assert(fx_call(&f, RS_FAIL));
    cr_assert(fx_call(&f, RS_OK));
    cr_assert(fx_call(&f, RS_FAIL));
    sem_post(&bs_a_go);
    pthread_join(bs_a, NULL);
    circuit_test_set_hook(NULL, NULL);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    /* 3-5 S, 6 F; 7-8 S, 9 F: the last point appends 3 results (fewer than
     * the window, so the bitmap is read) and evicts positions 0 and 1 */
    for (int i = 0; i < 3; i++)
        cr_assert(fx_call(&f, RS_OK));
    cr_assert(fx_call(&f, RS_FAIL));
    for (int i = 0; i < 2; i++)
        cr_assert(fx_call(&f, RS_OK));
    cr_assert(fx_call(&f, RS_FAIL)); /* evicts the first failure */
    circuit_stats s;
    circuit_get_stats(f.b, &s);
    assert_counts(&s.counts, 5, 3, 0, 1, 0); /* F S S S F S S F in a window of 8 */
    fx_free(&f);
}

/* ---- a stats reader whose closed word ends while it derives the counts ---- */

typedef struct stats_reader {
    fx *f;
    circuit_stats s;
} stats_reader;

static void *stats_read(void *arg)
{
    stats_reader *r = arg;
    park_me_at(CIRCUIT_TP_STATS_BEFORE_COUNTS);
    circuit_get_stats(r->f->b, &r->s);
    return NULL;
}

/* Window 2 holds F F, then a success is counted on a cell. A reader reads
 * the word and the cells and stops before deriving the counts; a failure
 * then makes the next point (the success and the failure evict both old
 * failures, whose ring records are cleared) and an isolate ends the state.
 * The reader's derivation reads a ring that moved: it cannot see the
 * eviction of F, and 0.3's first cut reported it anyway, because a word
 * that is no longer closed ended the validation: state closed with
 * successes 0, failures 2 and a run of 1 success, counts the window never
 * held (M1). Now the reader reports the word it found (isolated, zero). */
Test(regressions, M1_a_reader_whose_closed_state_ends_mid_read_reports_only_counts_it_held)
{
    fx f;
    fx_init(&f, 2, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    fx_build(&f);
    cr_assert(fx_call(&f, RS_FAIL));
    cr_assert(fx_call(&f, RS_FAIL));
    cr_assert(fx_call(&f, RS_OK)); /* on a cell: the window is F S as of now */

    park_setup();
    stats_reader r = {&f, {0}};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, stats_read, &r), 0);
    park_wait();
    cr_assert(fx_call(&f, RS_FAIL)); /* S F: both old failures leave */
    cr_assert_eq(circuit_isolate(f.b, NULL), 0);
    park_release();
    pthread_join(th, NULL);

    const circuit_counts *c = &r.s.counts;
    if (r.s.state == CIRCUIT_CLOSED) {
        /* a closed snapshot: one the window held (F F, F S or S F) */
        cr_assert_eq(c->successes + c->failures, 2);
        int64_t run = c->consecutive_successes + c->consecutive_failures;
        cr_assert_geq(c->consecutive_successes ? c->successes : c->failures, run < 2 ? run : 2,
                      "closed snapshot never held: successes %lld failures %lld run %lld (%s)",
                      (long long)c->successes, (long long)c->failures, (long long)run,
                      c->consecutive_successes ? "successes" : "failures");
    } else {
        cr_assert_eq(r.s.state, CIRCUIT_ISOLATED);
        cr_assert_eq(r.s.generation, 1);
        assert_counts(c, 0, 0, 0, 0, 0);
    }
    fx_free(&f);
}

/* ---- a pure read stopped between the open word and the clock ------------- */

/* The breaker is open until T0 + OPEN_FOR. A reader reads the open word and
 * stops before it reads the clock; meanwhile an operator resets the breaker
 * (closed, generation 2) and the clock passes the old end. The reader then
 * goes on. The open state ended before its period did, so "half-open" was
 * never true during the call: the reader must report closed (the word as it
 * is now). Before the fix, get_state and get_stats answered from the stale
 * word and the new clock: half-open, and get_stats generation 2 (S5,
 * M1). */
typedef struct open_reader {
    fx *f;
    circuit_state state;
    circuit_stats stats;
    bool use_stats;
} open_reader;

static void *open_read(void *arg)
{
    open_reader *r = arg;
    park_me_at(r->use_stats ? CIRCUIT_TP_STATS_READ : CIRCUIT_TP_STATE_READ);
    if (r->use_stats)
        circuit_get_stats(r->f->b, &r->stats);
    else
        r->state = circuit_get_state(r->f->b);
    return NULL;
}

static void open_read_run(bool use_stats)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 1;
    fx_build(&f);
    circuit_test_clock_set(T0);
    cr_assert(fx_call(&f, RS_FAIL)); /* generation 1: open until T0 + OPEN_FOR */
    park_setup();
    open_reader r = {&f, CIRCUIT_OPEN, {0}, use_stats};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, open_read, &r), 0);
    park_wait(); /* it read the open word */
    cr_assert_eq(circuit_reset(f.b, NULL), 0); /* generation 2: closed */
    circuit_test_clock_set(T0 + 2 * OPEN_FOR);
    park_release();
    pthread_join(th, NULL);
    circuit_test_set_hook(NULL, NULL);
    circuit_state got = use_stats ? r.stats.state : r.state;
    cr_assert_eq(got, CIRCUIT_CLOSED, "reported %s: a half-open that never was",
                 circuit_state_name(got));
    if (use_stats)
        cr_assert_eq(r.stats.generation, 2);
    fx_free(&f);
}

Test(regressions, S5_a_state_read_stopped_before_its_clock_read_reports_no_half_open_that_never_was)
{
    open_read_run(false);
}

Test(regressions, M1_a_stats_read_stopped_before_its_clock_read_reports_no_half_open_that_never_was)
{
    open_read_run(true);
}

/* ---- a stats read overtaken on every try ----------------------------------- */

/* Window 4, full of failures, a trip policy that never trips. A reader's
 * derivation of the closed counts is overtaken by two failures (two exact
 * points) at the top of each of its first 12 tries; then it is let go. The
 * window held 4 failures at every moment of the call, so the reader must
 * report 4. 0.3's first cut gave up after 8 tries and reported zero counts
 * (M1); now it reads again for as long as
 * the word moves (lock-free: each try follows another thread's point). */
static sem_t ot_stopped, ot_go;
static atomic_int ot_stops_left;
static _Thread_local bool ot_reader;

static void overtake_hook(circuit_test_point p, void *arg)
{
    (void)arg;
    if (p == CIRCUIT_TP_STATS_COUNTS_TRY && ot_reader && atomic_load(&ot_stops_left) > 0) {
        atomic_fetch_sub(&ot_stops_left, 1);
        sem_post(&ot_stopped);
        while (sem_wait(&ot_go) != 0)
            ;
    }
}

static void *overtaken_read(void *arg)
{
    stats_reader *r = arg;
    ot_reader = true;
    circuit_get_stats(r->f->b, &r->s);
    return NULL;
}

Test(regressions, M1_a_stats_read_overtaken_on_every_try_reports_only_counts_the_window_held)
{
    fx f;
    fx_init(&f, 4, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    fx_build(&f);
    for (int i = 0; i < 8; i++)
        cr_assert(fx_call(&f, RS_FAIL));
    sem_init(&ot_stopped, 0, 0);
    sem_init(&ot_go, 0, 0);
    atomic_store(&ot_stops_left, 12);
    circuit_test_set_hook(overtake_hook, NULL);
    stats_reader r = {&f, {0}};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, overtaken_read, &r), 0);
    for (int i = 0; i < 12; i++) {
        /* a reader that gave up early stops no more: do not wait for it */
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 5;
        if (sem_timedwait(&ot_stopped, &dl) != 0) {
            atomic_store(&ot_stops_left, 0);
            break;
        }
        cr_assert(fx_call(&f, RS_FAIL));
        cr_assert(fx_call(&f, RS_FAIL));
        sem_post(&ot_go);
    }
    pthread_join(th, NULL);
    circuit_test_set_hook(NULL, NULL);
    cr_assert_eq(r.s.state, CIRCUIT_CLOSED);
    cr_assert_eq(r.s.counts.failures, 4, "failures %lld: a window of 4 failures throughout",
                 (long long)r.s.counts.failures);
    cr_assert_eq(r.s.counts.successes, 0);
    cr_assert_eq(r.s.counts.consecutive_successes, 0);
    /* its word is the one after the last two failures: all 32 in a row */
    cr_assert_eq(r.s.counts.consecutive_failures, 32);
    cr_assert(r.s.failures >= 8 && r.s.failures <= 32, "failures total %lld: a value it held",
              (long long)r.s.failures);
    fx_free(&f);
}

/* ---- a probe's reopen after a lost CAS ------------------------------------ */

/* Two probes in half-open. P1's failure reads the clock (T0 + OPEN_FOR),
 * decides to reopen and stops before its CAS; the clock moves 5 open
 * periods on and P2's success is counted (keep probing). P1 then loses its
 * CAS, counts after P2 and reopens: its open period must start when it is
 * counted, now (S4), so an allow at the same instant is refused with the
 * whole period left. Before the fix the reopen was dated at P1's stale
 * clock read, its period already over: the allow was admitted as a probe
 *. */
typedef struct probe_done {
    circuit_ticket t;
    int result;
    bool counted;
} probe_done;

static void *stopped_probe_done(void *arg)
{
    probe_done *d = arg;
    park_me_at(CIRCUIT_TP_DONE_BEFORE_CAS);
    d->counted = circuit_done(&d->t, d->result);
    return NULL;
}

Test(regressions, S4_a_reopen_after_a_lost_cas_starts_its_open_period_when_it_is_counted)
{
    fx f;
    fx_init(&f, 4, 2, OPEN_FOR, 1000 * OPEN_FOR);
    f.p.trip_run = 1;
    f.p.reopen_on_failure = true;
    fx_build(&f);
    circuit_test_clock_set(T0);
    cr_assert(fx_call(&f, RS_FAIL)); /* generation 1: open */
    circuit_test_clock_set(T0 + OPEN_FOR);
    probe_done p1 = {CIRCUIT_TICKET_INIT, RS_FAIL, false};
    circuit_ticket p2;
    cr_assert(circuit_allow(f.b, NULL, &p1.t, NULL)); /* generation 2: half-open */
    cr_assert(circuit_allow(f.b, NULL, &p2, NULL));
    park_setup();
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, stopped_probe_done, &p1), 0);
    park_wait(); /* P1 decided to reopen, before its CAS */
    int64_t later = T0 + 6 * OPEN_FOR;
    circuit_test_clock_set(later);
    cr_assert(circuit_done(&p2, RS_OK)); /* counted first: keep probing */
    park_release();
    pthread_join(th, NULL);
    circuit_test_set_hook(NULL, NULL);
    cr_assert(p1.counted);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN, "the reopen's period is already over");
    circuit_ticket q;
    circuit_rejection rej;
    cr_assert_not(circuit_allow(f.b, NULL, &q, &rej), "admitted as a probe at the reopen's instant");
    cr_assert_eq(rej.state, CIRCUIT_OPEN);
    cr_assert_eq(rej.retry_after_ns, OPEN_FOR);
    assert_tr(&f, 2, CIRCUIT_HALF_OPEN, CIRCUIT_OPEN, 3);
    fx_free(&f);
}
