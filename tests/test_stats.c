/*
 * circuit_get_stats (M1) and the reads it shares with circuit_get_state
 * (S5): the totals exact when quiescent and a value they held otherwise,
 * the generation and the counts of one state, a read that writes nothing.
 *
 * The packed totals (src/percpu.h, THE PACKED TOTALS; docs/CONTRACT.md M1
 * and L5): each CPU's totals share one 8-byte word, and a
 * field that reaches its batch T moves T units to a shared total in a
 * three-step FLUSH (START, CREDIT, SUBTRACT, END). These tests stop a
 * flush's thread at every step, and a stats reader between its two halves,
 * and check that every total circuit_get_stats reports is exact (the other
 * threads are quiescent when it is read) or a value it held.
 *
 * `released` is the field used: its batch is 128 (allow + circuit_release
 * adds one to admitted and one to released).
 */
#include "helpers.h"

#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#define RELEASED_BATCH 128 /* percpu.h: released's width 8, T = 2^7 */

/* Pins the calling thread to the CPU it runs on, when the system lets it
 * (a test that cannot pin still checks the same totals, less sharply). */
static void pin_here(void)
{
    int cpu = sched_getcpu();
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET((size_t)cpu, &set);
    (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void allow_release(fx *f)
{
    circuit_ticket t;
    cr_assert(circuit_allow(f->b, NULL, &t, NULL));
    circuit_release(&t);
}

static void assert_totals(fx *f, int64_t calls, const char *when)
{
    circuit_stats st;
    circuit_get_stats(f->b, &st);
    cr_assert_eq(st.released, (uint64_t)calls, "%s: released %lld, %lld calls made", when,
                 (long long)st.released, (long long)calls);
    cr_assert_eq(st.admitted, (uint64_t)calls, "%s: admitted %lld, %lld calls made", when,
                 (long long)st.admitted, (long long)calls);
    cr_assert_eq(st.successes + st.failures + st.ignored + st.late, 0u, "%s", when);
}

typedef struct flusher {
    fx *f;
    circuit_test_point at;
    int calls;             /* to make in all */
    atomic_int made;       /* allow + release pairs returned */
} flusher;

static void *flusher_thread(void *arg)
{
    flusher *fl = arg;
    pin_here();
    park_me_at(fl->at);
    for (int i = 0; i < fl->calls; i++) {
        allow_release(fl->f);
        atomic_store(&fl->made, i + 1);
    }
    return NULL;
}

/* A flush stopped after its START, after its CREDIT (T units in the field
 * AND in the shared total) and after its SUBTRACT (before its END): stats
 * read then count every call once; meanwhile other calls go on (the fields
 * that reach their top take the overflow path: nobody waits for the
 * stopped flush, L1) and count exactly; after it ends, later flushes work. */
static void flush_stopped_at(circuit_test_point at)
{
    fx f;
    fx_init(&f, 64, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    fx_build(&f);
    park_setup();
    /* enough that one CPU's field reaches T even if the thread moves */
    flusher fl = {&f, at, 2 * RELEASED_BATCH * 2, 0};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, flusher_thread, &fl), 0);
    park_wait();
    /* the parked call has counted its release (the flush follows the add) */
    int64_t made = atomic_load(&fl.made) + 1;
    cr_assert_geq(made, RELEASED_BATCH, "a flush before T releases");
    assert_totals(&f, made, "flush stopped");

    /* others go on: three times T more, through the overflow path */
    for (int i = 0; i < 3 * RELEASED_BATCH; i++)
        allow_release(&f);
    made += 3 * RELEASED_BATCH;
    assert_totals(&f, made, "flush stopped, others went on");

    park_release();
    cr_assert_eq(pthread_join(th, NULL), 0);
    made = fl.calls + 3 * RELEASED_BATCH;
    assert_totals(&f, made, "flush ended");
    uint64_t rmws = circuit_test_shared_rmws();
    for (int i = 0; i < 4 * RELEASED_BATCH; i++)
        allow_release(&f);
    cr_assert_gt(circuit_test_shared_rmws(), rmws, "no flush after the stopped one ended");
    assert_totals(&f, made + 4 * RELEASED_BATCH, "later flushes");
    fx_free(&f);
}

Test(stats, M1_L1_a_flush_stopped_after_its_start_leaves_every_total_exact)
{
    flush_stopped_at(CIRCUIT_TP_TOTALS_STARTED);
}

Test(stats, M1_L1_a_flush_stopped_after_its_credit_counts_its_units_once)
{
    flush_stopped_at(CIRCUIT_TP_TOTALS_CREDITED);
}

Test(stats, M1_L1_a_flush_stopped_after_its_subtract_leaves_every_total_exact)
{
    flush_stopped_at(CIRCUIT_TP_TOTALS_SUBTRACTED);
}

typedef struct reader {
    fx *f;
    circuit_stats st;
} reader;

/* The reader's hook: it stops at its first pass over the fields, and every
 * pass is counted. */
static _Thread_local bool is_reader;
static atomic_int reader_passes;
static sem_t reader_parked, reader_go;

static void reader_hook(circuit_test_point p, void *arg)
{
    (void)arg;
    if (!is_reader || p != CIRCUIT_TP_TOTALS_READ)
        return;
    if (atomic_fetch_add(&reader_passes, 1) == 0) {
        sem_post(&reader_parked);
        while (sem_wait(&reader_go) != 0)
            ;
    }
}

static void *reader_thread(void *arg)
{
    reader *r = arg;
    is_reader = true;
    circuit_get_stats(r->f->b, &r->st);
    return NULL;
}

/* A reader stopped between the fields and the shared totals while `flushes`
 * whole flushes move T units each (this thread pinned: its field goes
 * T - 1, T (flush), ..., one flush per T adds). With one, the read names
 * it and counts its units once, in one pass; with two, it cannot tell them
 * apart and reads again (a second pass). Either way its totals lie between
 * those at its start and at its end (M1). */
static void reader_overtaken_by(int flushes)
{
    fx f;
    fx_init(&f, 64, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    fx_build(&f);
    pin_here();
    for (int i = 0; i < RELEASED_BATCH - 1; i++)
        allow_release(&f); /* this CPU's field at T - 1 */
    sem_init(&reader_parked, 0, 0);
    sem_init(&reader_go, 0, 0);
    atomic_store(&reader_passes, 0);
    circuit_test_set_hook(reader_hook, NULL);
    reader r = {&f, {0}};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, reader_thread, &r), 0);
    while (sem_wait(&reader_parked) != 0)
        ;
    int64_t before = RELEASED_BATCH - 1;
    int64_t more = 0;
    for (int k = 0; k < flushes; k++) {
        uint64_t rmws = circuit_test_shared_rmws();
        while (circuit_test_shared_rmws() == rmws && more < 4 * RELEASED_BATCH) {
            allow_release(&f); /* until a flush has run */
            more++;
        }
        cr_assert_gt(circuit_test_shared_rmws(), rmws, "flush %d did not run", k + 1);
    }
    sem_post(&reader_go);
    cr_assert_eq(pthread_join(th, NULL), 0);
    circuit_test_set_hook(NULL, NULL);
    cr_assert_eq(atomic_load(&reader_passes), flushes == 1 ? 1 : 2,
                 "%d flushes during the read: %d passes", flushes, atomic_load(&reader_passes));
    cr_assert(r.st.released >= (uint64_t)before && r.st.released <= (uint64_t)(before + more),
              "released %lld: not a value held during the read (%lld .. %lld)",
              (long long)r.st.released, (long long)before, (long long)(before + more));
    cr_assert(r.st.admitted >= (uint64_t)before && r.st.admitted <= (uint64_t)(before + more),
              "admitted %lld: not a value held during the read", (long long)r.st.admitted);
    assert_totals(&f, before + more, "after");
    fx_free(&f);
}

Test(stats, M1_a_reader_that_one_whole_flush_overtakes_counts_its_units_once)
{
    reader_overtaken_by(1);
}

Test(stats, M1_a_reader_that_two_flushes_overtake_reads_again)
{
    reader_overtaken_by(2);
}

/* Every packed total, past several batches, from 2 threads at once: exact
 * when quiescent (M1), with the identity admitted = successes + failures +
 * ignored + late + released. */
typedef struct mixer {
    fx *f;
    int n;
    int64_t ok, fail, ign, rel;
} mixer;

static void *mixer_thread(void *arg)
{
    mixer *m = arg;
    for (int i = 0; i < m->n; i++) {
        circuit_ticket t;
        cr_assert(circuit_allow(m->f->b, NULL, &t, NULL));
        switch (i % 7) {
        case 0: circuit_release(&t); m->rel++; break;
        case 1: case 2: circuit_done(&t, RS_FAIL); m->fail++; break;
        case 3: circuit_done(&t, RS_IGN); m->ign++; break;
        default: circuit_done(&t, RS_OK); m->ok++; break;
        }
    }
    return NULL;
}

Test(stats, M1_every_packed_total_is_exact_across_many_flushes_from_two_threads)
{
    fx f;
    fx_init(&f, 64, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    fx_build(&f);
    mixer m[2] = {{&f, 20000, 0, 0, 0, 0}, {&f, 20000, 0, 0, 0, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, mixer_thread, &m[i]), 0);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_join(th[i], NULL), 0);
    circuit_stats st;
    circuit_get_stats(f.b, &st);
    cr_assert_eq(st.admitted, 40000u);
    cr_assert_eq(st.released, (uint64_t)(m[0].rel + m[1].rel));
    cr_assert_eq(st.failures, (uint64_t)(m[0].fail + m[1].fail));
    cr_assert_eq(st.ignored, (uint64_t)(m[0].ign + m[1].ign));
    cr_assert_eq(st.successes, (uint64_t)(m[0].ok + m[1].ok));
    cr_assert_eq(st.late, 0u);
    cr_assert_eq(st.rejected, 0u);
    fx_free(&f);
}

/* ==== the generation of a read that a transition races (M1) =============== */

/* ---- M1: circuit_get_stats stopped after its read -------------------------- */

typedef struct stats_reader {
    fx *f;
    circuit_stats s;
} stats_reader;

static void *stats_reader_thread(void *arg)
{
    stats_reader *r = arg;
    park_me_at(CIRCUIT_TP_STATS_READ);
    circuit_get_stats(r->f->b, &r->s);
    return NULL;
}

/* The reader reads the closed word of generation 0 and is stopped; isolate
 * makes generation 1 meanwhile. What it reports must be one moment of the
 * breaker: closed in generation 0. */
Test(stats, M1_stats_generation_is_the_words_when_a_transition_races_the_read)
{
    fx f;
    fx_new(&f, 4, 1, OPEN_FOR, PROBE_TO);
    park_setup();
    stats_reader r = {&f, {0}};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, stats_reader_thread, &r), 0);
    park_wait();
    cr_assert_eq(circuit_isolate(f.b, NULL), 0); /* generation 1 */
    cr_assert_eq(circuit_reset(f.b, NULL), 0);   /* generation 2 */
    park_release();
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_assert_eq(r.s.state, CIRCUIT_CLOSED);
    cr_assert_eq(r.s.generation, 0, "generation %llu (0x%llx) reported for the word of "
                 "generation 0", (unsigned long long)r.s.generation,
                 (unsigned long long)r.s.generation);
    circuit_stats now;
    circuit_get_stats(f.b, &now);
    cr_assert_eq(now.generation, 2);
    fx_free(&f);
}

/* ==== the totals and a read's purity (M1) ================================= */

Test(stats, M1_stats_totals_are_exact_and_add_up_when_quiescent)
{
    fx f;
    fx_init(&f, 4, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 2;
    f.p.close_run = 1;
    fx_build(&f);
    circuit_stats s;
    circuit_get_stats(f.b, &s);
    cr_assert_eq(s.state, CIRCUIT_CLOSED);
    cr_assert_eq(s.generation, 0);
    cr_assert_eq(s.admitted + s.rejected + s.transitions, 0);
    fx_call(&f, RS_OK);
    fx_call(&f, RS_IGN);
    circuit_ticket live, rel;
    cr_assert(circuit_allow(f.b, NULL, &live, NULL));
    cr_assert(circuit_allow(f.b, NULL, &rel, NULL));
    circuit_release(&rel);
    fx_call(&f, RS_FAIL);
    fx_call(&f, RS_FAIL); /* trips */
    cr_assert_not(circuit_done(&live, RS_OK), "admitted before the trip: late");
    circuit_ticket t;
    circuit_rejection rej;
    circuit_test_clock_advance(OPEN_FOR / 2);
    cr_assert_not(circuit_allow(f.b, NULL, &t, &rej));
    circuit_get_stats(f.b, &s);
    cr_assert_eq(s.state, CIRCUIT_OPEN);
    cr_assert_eq(s.generation, 1);
    cr_assert_eq(s.retry_after_ns, rej.retry_after_ns);
    cr_assert_eq(s.admitted, 6);
    cr_assert_eq(s.rejected, 1);
    cr_assert_eq(s.successes, 1);
    cr_assert_eq(s.failures, 2);
    cr_assert_eq(s.ignored, 1);
    cr_assert_eq(s.late, 1); /* `live`, settled after the trip */
    cr_assert_eq(s.released, 1);
    cr_assert_eq(s.transitions, 1);
    cr_assert_eq(s.admitted, s.successes + s.failures + s.ignored + s.late + s.released);
    /* half-open: probes in flight, timeouts */
    circuit_test_clock_advance(OPEN_FOR);
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    circuit_get_stats(f.b, &s);
    cr_assert_eq(s.state, CIRCUIT_HALF_OPEN);
    cr_assert_eq(s.probes_in_flight, 1);
    circuit_test_clock_advance(PROBE_TO);
    circuit_ticket u;
    cr_assert(circuit_allow(f.b, NULL, &u, NULL)); /* t timed out */
    circuit_get_stats(f.b, &s);
    cr_assert_eq(s.timed_out, 1);
    cr_assert_eq(s.counts.timed_out, 1);
    cr_assert_eq(s.probes_in_flight, 1);
    /* identity with two live tickets */
    cr_assert_eq(s.admitted, s.successes + s.failures + s.ignored + s.late + s.released + 2);
    circuit_release(&u);
    cr_assert(circuit_done(&t, RS_OK), "P2: the timed-out probe's result still counts");
    circuit_get_stats(f.b, &s);
    cr_assert_eq(s.state, CIRCUIT_CLOSED);
    cr_assert_eq(s.admitted, s.successes + s.failures + s.ignored + s.late + s.released);
    fx_free(&f);
}

/* The stats read is pure: no CAS of the state word, no callback, and it does
 * not fold the fast mode's per-CPU counters (it reads them). */
Test(stats, M1_stats_read_writes_nothing_and_does_not_fold)
{
    fx f;
    fx_new(&f, 64, 1, OPEN_FOR, PROBE_TO);
    for (int i = 0; i < 1000; i++)
        fx_call(&f, RS_OK);
    uint64_t cas0 = circuit_test_core_cas_attempts();
    int64_t calls = f.p.trip_calls + f.p.probe_calls + f.c.calls + f.log.n;
    circuit_stats s;
    for (int i = 0; i < 100; i++)
        circuit_get_stats(f.b, &s);
    cr_assert_eq(circuit_test_core_cas_attempts(), cas0);
    cr_assert_eq(f.p.trip_calls + f.p.probe_calls + f.c.calls + f.log.n, calls);
    cr_assert(circuit_test_fast_mode(f.b), "a stats read does not fold");
    cr_assert_eq(s.successes, 1000);
    assert_counts(&s.counts, 64, 0, 1000, 0, 0);
    fx_free(&f);
}

/* ==== reads that transitions and points overtake (M1, S5) ================= */

/* ---- a stats reader whose closed word ends while it derives the counts ---- */

typedef struct closed_end_reader {
    fx *f;
    circuit_stats s;
} closed_end_reader;

static void *stats_read(void *arg)
{
    closed_end_reader *r = arg;
    park_me_at(CIRCUIT_TP_STATS_BEFORE_COUNTS);
    circuit_get_stats(r->f->b, &r->s);
    return NULL;
}

/* Window 2 holds F F, then a success is counted on a cell. A reader reads
 * the word and the cells and stops before deriving the counts; a failure
 * then makes the next point (the success and the failure evict both old
 * failures, whose ring records are cleared) and an isolate ends the state.
 * The reader's derivation reads a ring that moved: it cannot see the
 * eviction of F. A reader that takes a word that is no longer closed as the
 * end of its validation reports state closed with successes 0, failures 2
 * and a run of 1 success, counts the window never held (M1); the reader
 * must report the word it found (isolated, zero). */
Test(stats, M1_a_reader_whose_closed_state_ends_mid_read_reports_only_counts_it_held)
{
    fx f;
    fx_init(&f, 2, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    fx_build(&f);
    cr_assert(fx_call(&f, RS_FAIL));
    cr_assert(fx_call(&f, RS_FAIL));
    cr_assert(fx_call(&f, RS_OK)); /* on a cell: the window is F S as of now */

    park_setup();
    closed_end_reader r = {&f, {0}};
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
 * is now), not an answer from the stale word and the new clock (half-open,
 * and for get_stats generation 2) (S5, M1). */
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

Test(stats, S5_a_state_read_stopped_before_its_clock_read_reports_no_half_open_that_never_was)
{
    open_read_run(false);
}

Test(stats, M1_a_stats_read_stopped_before_its_clock_read_reports_no_half_open_that_never_was)
{
    open_read_run(true);
}

/* ---- a stats read overtaken on every try ----------------------------------- */

/* Window 4, full of failures, a trip policy that never trips. A reader's
 * derivation of the closed counts is overtaken by two failures (two exact
 * points) at the top of each of its first 12 tries; then it is let go. The
 * window held 4 failures at every moment of the call, so the reader must
 * report 4, not zero counts after a bounded number of tries (M1): it reads
 * again for as long as the word moves (lock-free: each try follows another
 * thread's point). */
static sem_t ot_stopped, ot_go;
static atomic_int ot_stops_left;
static atomic_bool ot_returned; /* the reader's get_stats has returned */
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
    closed_end_reader *r = arg;
    ot_reader = true;
    circuit_get_stats(r->f->b, &r->s);
    atomic_store(&ot_returned, true);
    return NULL;
}

Test(stats, M1_a_stats_read_overtaken_on_every_try_reports_only_counts_the_window_held)
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
    atomic_store(&ot_returned, false);
    circuit_test_set_hook(overtake_hook, NULL);
    closed_end_reader r = {&f, {0}};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, overtaken_read, &r), 0);
    for (int i = 0; i < 12; i++) {
        /* a reader that gave up early stops no more: do not wait for it.
         * Waits for the one or the other with no deadline (a slow machine
         * may take long to run the reader; the ctest timeout names a hang) */
        bool stopped = false;
        while (!(stopped = sem_trywait(&ot_stopped) == 0) && !atomic_load(&ot_returned))
            nanosleep(&(struct timespec){0, 50000}, NULL);
        if (!stopped)
            break;
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
