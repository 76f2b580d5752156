/*
 * The 64-bit generation rebuilt from the state word's 30-bit tag (M1, B3):
 * a thread stopped between reading the word and rebuilding its generation
 * while other threads make transitions must still get the generation the
 * word held, not one 2^30 too high.
 */
#include "helpers.h"

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
Test(generation, M1_stats_generation_is_the_words_when_a_transition_races_the_read)
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

/* ---- B3: open_for asked from a word two transitions stale ------------------- */

static uint64_t open_for_gens[64];
static int64_t open_for_n;

static int64_t spy_open_for(void *arg, const circuit_open_info *info)
{
    (void)arg;
    int64_t i = A_ADD(&open_for_n, 1) - 1;
    if (i < 64)
        open_for_gens[i] = info->generation;
    return OPEN_FOR;
}

typedef struct probe_settler {
    circuit_ticket t;
    bool counted;
} probe_settler;

static void *probe_settler_thread(void *arg)
{
    probe_settler *p = arg;
    park_me_at(CIRCUIT_TP_DONE_BEFORE_CAS);
    p->counted = circuit_done(&p->t, RS_FAIL);
    return NULL;
}

/* A probe's failure (half-open, generation 2) decides to reopen and is
 * stopped before its transition; isolate (3) and reset (4) happen
 * meanwhile. When it resumes, open_for may be asked again for the reopen
 * it computed (its answer is then thrown away), but only with the
 * generation that reopen would have had (3): B3 promises a pure function
 * of the true information. */
Test(generation, B3_open_for_is_asked_with_a_true_generation_from_a_stale_word)
{
    fx f;
    fx_init(&f, 4, 1, OPEN_FOR, PROBE_TO);
    f.spec.open_for = spy_open_for;
    f.p.reopen_on_failure = true;
    fx_build(&f);
    fx_half_open_due(&f); /* generation 1: open */
    probe_settler p = {CIRCUIT_TICKET_INIT, false};
    cr_assert(circuit_allow(f.b, NULL, &p.t, NULL)); /* generation 2: half-open */
    open_for_n = 0;

    park_setup();
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, probe_settler_thread, &p), 0);
    park_wait();
    cr_assert_eq(circuit_isolate(f.b, NULL), 0); /* generation 3 */
    cr_assert_eq(circuit_reset(f.b, NULL), 0);   /* generation 4 */
    park_release();
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_assert_not(p.counted, "the probe's result is late (T6)");
    int64_t n = A_LOAD(&open_for_n);
    cr_assert_leq(n, 64);
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(open_for_gens[i], 3,
                     "open_for asked with generation %llu (0x%llx) for the reopen of "
                     "generation 2", (unsigned long long)open_for_gens[i],
                     (unsigned long long)open_for_gens[i]);
    fx_free(&f);
}
