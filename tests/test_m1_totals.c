/*
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

Test(totals, M1_L1_a_flush_stopped_after_its_start_leaves_every_total_exact)
{
    flush_stopped_at(CIRCUIT_TP_TOTALS_STARTED);
}

Test(totals, M1_L1_a_flush_stopped_after_its_credit_counts_its_units_once)
{
    flush_stopped_at(CIRCUIT_TP_TOTALS_CREDITED);
}

Test(totals, M1_L1_a_flush_stopped_after_its_subtract_leaves_every_total_exact)
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

Test(totals, M1_a_reader_that_one_whole_flush_overtakes_counts_its_units_once)
{
    reader_overtaken_by(1);
}

Test(totals, M1_a_reader_that_two_flushes_overtake_reads_again)
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

Test(totals, M1_every_packed_total_is_exact_across_many_flushes_from_two_threads)
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
