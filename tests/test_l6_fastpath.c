/*
 * SPEC L6 (the healthy fast path), S2 and T5 as amended in 0.2: successes
 * into a window with no failure are counted in per-CPU records, folded into
 * the state word exactly when exact counts are needed; trip is not asked for
 * them; a closed ticket is settled without arbitration.
 */
#include "helpers.h"

/* ---- threads doing healthy successes ------------------------------------ */

typedef struct worker {
    fx *f;
    long n;
    long counted;
    int result;
} worker;

static void *succeed(void *arg)
{
    worker *w = arg;
    for (long i = 0; i < w->n; i++) {
        circuit_ticket t;
        cr_assert(circuit_allow(w->f->b, NULL, &t, NULL));
        if (circuit_done(&t, w->result))
            w->counted++;
    }
    return NULL;
}

static void run_threads(fx *f, int n, long each, int result)
{
    pthread_t th[8];
    worker w[8];
    for (int i = 0; i < n; i++) {
        w[i] = (worker){f, each, 0, result};
        cr_assert_eq(pthread_create(&th[i], NULL, succeed, &w[i]), 0);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(w[i].counted, each, "thread %d: %ld of %ld counted", i, w[i].counted, each);
    }
}

/* The fast path writes no line another CPU's fast path writes: in the test
 * build every CAS of any state word is counted, and 10^6 healthy successes
 * on two threads make none. */
Test(l6, L6_healthy_successes_attempt_no_state_word_cas)
{
    fx f;
    fx_init(&f, 64, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 1;
    fx_build(&f);
    cr_assert(circuit_test_fast_mode(f.b), "a new breaker starts in the fast mode");
    uint64_t cas0 = circuit_test_core_cas_attempts();
    run_threads(&f, 2, 500000, RS_OK);
    uint64_t cas = circuit_test_core_cas_attempts() - cas0;
    cr_assert_eq(cas, 0, "%llu state-word CAS attempts for healthy successes",
                 (unsigned long long)cas);
    cr_assert(circuit_test_fast_mode(f.b));
    circuit_stats s;
    circuit_get_stats(f.b, &s);
    cr_assert_eq(s.successes, 1000000);
    cr_assert_eq(s.admitted, 1000000);
    assert_counts(&s.counts, 64, 0, 1000000, 0, 0);
    cr_assert_eq(f.p.trip_calls, 0, "S2: trip asked for a success into a healthy window");
    fx_free(&f);
}

/* After a fold the counts are exact: the failure that ends the fast mode
 * trips with the window of successes before it and the run they made. */
Test(l6, L6_fold_makes_counts_exact_after_many_threads)
{
    fx f;
    fx_init(&f, 1000, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 1;
    fx_build(&f);
    run_threads(&f, 4, 20000, RS_OK);
    cr_assert(circuit_test_fast_mode(f.b));
    fx_call(&f, RS_FAIL);
    cr_assert_eq(f.p.trip_calls, 1);
    assert_counts(&f.p.trip_seen[0], 999, 1, 0, 1, 0);
    cr_assert_eq(f.log.n, 1);
    assert_counts(&f.log.tr[0].counts, 999, 1, 0, 1, 0);
    circuit_stats s;
    circuit_get_stats(f.b, &s);
    cr_assert_eq(s.successes, 80000);
    cr_assert_eq(s.failures, 1);
    fx_free(&f);
}

/* The run of successes folded in continues the run counted before the fast
 * mode, and seq continues: the window slides over results from both sides. */
Test(l6, L6_fold_continues_the_window_and_the_run)
{
    fx f;
    fx_init(&f, 4, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    fx_build(&f);
    fx_call(&f, RS_FAIL); /* F */
    cr_assert_not(circuit_test_fast_mode(f.b));
    for (int i = 0; i < 3; i++)
        fx_call(&f, RS_OK); /* F S S S: the F is still in the window */
    cr_assert_not(circuit_test_fast_mode(f.b));
    fx_call(&f, RS_OK); /* S S S S: the F left: fast again */
    cr_assert(circuit_test_fast_mode(f.b));
    assert_counts(&f.seen[4], 4, 0, 4, 0, 0);
    for (int i = 0; i < 6; i++)
        fx_call(&f, RS_OK);
    assert_counts(&f.seen[10], 4, 0, 10, 0, 0);
    cr_assert(circuit_test_fold(f.b));
    cr_assert_not(circuit_test_fast_mode(f.b));
    assert_counts(&f.seen[10], 4, 0, 10, 0, 0);
    circuit_counts c = fx_counts(&f);
    assert_counts(&c, 4, 0, 10, 0, 0);
    fx_call(&f, RS_FAIL);
    assert_counts(&f.seen[11], 3, 1, 0, 1, 0);
    fx_free(&f);
}

/* ---- stopped threads at the new CAS points ------------------------------- */

typedef struct stopped {
    fx *f;
    circuit_test_point at;
    int result;
    bool counted;
} stopped;

static void *stopped_call(void *arg)
{
    stopped *s = arg;
    circuit_ticket t;
    cr_assert(circuit_allow(s->f->b, NULL, &t, NULL));
    park_me_at(s->at);
    s->counted = circuit_done(&t, s->result);
    return NULL;
}

/* A thread stopped between reading the fast mode and its record CAS stops
 * nobody: failures fold and trip meanwhile; its success then lands late or
 * is counted once. */
Test(l6, L6_thread_stopped_between_the_mode_and_its_count)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    fx_build(&f);
    park_setup();
    stopped s = {&f, CIRCUIT_TP_FAST_BEFORE_COUNT, RS_OK, false};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, stopped_call, &s), 0);
    park_wait();
    for (int i = 0; i < 5; i++)
        cr_assert(fx_call(&f, RS_OK));
    cr_assert(fx_call(&f, RS_FAIL)); /* folds the interval the stopped thread read */
    for (int i = 0; i < 3; i++)
        cr_assert(fx_call(&f, RS_OK));
    park_release();
    pthread_join(th, NULL);
    cr_assert(s.counted, "same generation: the result counts");
    circuit_stats st;
    circuit_get_stats(f.b, &st);
    cr_assert_eq(st.successes, 9);
    cr_assert_eq(st.failures, 1);
    circuit_counts c = fx_counts(&f);
    assert_counts(&c, 7, 1, 4, 0, 0); /* counted after the fold, last */
    fx_free(&f);
}

/* A folder stopped after sealing every record, or in the middle of its sum,
 * stops nobody: the others find their records sealed, finish the fold
 * themselves and count on the slow path; the stopped folder's CAS then loses
 * and its failure is counted once. */
static void stopped_folder(circuit_test_point at)
{
    fx f;
    fx_init(&f, 16, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    fx_build(&f);
    for (int i = 0; i < 5; i++)
        cr_assert(fx_call(&f, RS_OK));
    park_setup();
    stopped s = {&f, at, RS_FAIL, false};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, stopped_call, &s), 0);
    park_wait();
    for (int i = 0; i < 200; i++)
        cr_assert(fx_call(&f, i % 50 == 0 ? RS_FAIL : RS_OK), "call %d", i);
    park_release();
    pthread_join(th, NULL);
    cr_assert(s.counted);
    circuit_stats st;
    circuit_get_stats(f.b, &st);
    cr_assert_eq(st.successes, 5 + 196, "successes %llu", (unsigned long long)st.successes);
    cr_assert_eq(st.failures, 1 + 4);
    circuit_counts c = fx_counts(&f);
    cr_assert_eq(c.successes + c.failures, 16);
    cr_assert_leq(c.failures, 2);
    fx_free(&f);
}

Test(l6, L6_folder_stopped_after_sealing) { stopped_folder(CIRCUIT_TP_FOLD_SEALED); }
Test(l6, L6_folder_stopped_mid_sum) { stopped_folder(CIRCUIT_TP_FOLD_MID_SUM); }

/* A thread stopped between preparing the records of a new fast interval and
 * its CAS into it stops nobody, and its stale preparation is never used. */
Test(l6, L6_thread_stopped_before_entering_the_fast_mode)
{
    fx f;
    fx_init(&f, 2, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    fx_build(&f);
    fx_call(&f, RS_FAIL);
    fx_call(&f, RS_OK); /* F S: a failure still in the window */
    park_setup();
    stopped s = {&f, CIRCUIT_TP_INTENT_MADE, RS_OK, false};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, stopped_call, &s), 0);
    park_wait(); /* its success would evict the F and enter the fast mode */
    for (int i = 0; i < 100; i++)
        cr_assert(fx_call(&f, i % 10 == 0 ? RS_FAIL : RS_OK));
    park_release();
    pthread_join(th, NULL);
    cr_assert(s.counted);
    circuit_stats st;
    circuit_get_stats(f.b, &st);
    cr_assert_eq(st.successes, 1 + 90 + 1);
    cr_assert_eq(st.failures, 1 + 10);
    for (int i = 0; i < 4; i++)
        fx_call(&f, RS_OK);
    cr_assert(circuit_test_fast_mode(f.b));
    circuit_counts c = fx_counts(&f);
    cr_assert_eq(c.successes, 2);
    fx_free(&f);
}

/* ---- S2 (amended) --------------------------------------------------------- */

Test(l6, S2_success_into_a_window_with_no_failure_asks_nothing)
{
    fx f;
    fx_init(&f, 4, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_total = 1; /* a policy that would open on any result */
    fx_build(&f);
    for (int i = 0; i < 100; i++)
        cr_assert(fx_call(&f, RS_OK));
    cr_assert_eq(f.p.trip_calls, 0);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED, "S2: only failures can open it");
    fx_call(&f, RS_FAIL);
    cr_assert_eq(f.p.trip_calls, 1);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    fx_free(&f);
}

Test(l6, S2_success_while_the_window_holds_a_failure_asks_trip_until_it_leaves)
{
    fx f;
    fx_init(&f, 3, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    fx_build(&f);
    fx_call(&f, RS_FAIL);
    cr_assert_eq(f.p.trip_calls, 1);
    fx_call(&f, RS_OK);
    fx_call(&f, RS_OK);
    cr_assert_eq(f.p.trip_calls, 3);
    assert_counts(&f.p.trip_seen[2], 2, 1, 2, 0, 0);
    fx_call(&f, RS_OK); /* evicts the failure: asked, seeing no failure */
    cr_assert_eq(f.p.trip_calls, 4);
    assert_counts(&f.p.trip_seen[3], 3, 0, 3, 0, 0);
    fx_call(&f, RS_OK); /* the window held no failure: not asked */
    cr_assert_eq(f.p.trip_calls, 4);
    fx_free(&f);
}

/* ---- T5 (amended) ---------------------------------------------------------- */

/* A closed ticket's settling needs no arbitration, but the one-thread checks
 * of T4 hold. */
static void done_after_release(void *arg)
{
    fx *f = arg;
    circuit_ticket t;
    cr_assert(circuit_allow(f->b, NULL, &t, NULL));
    circuit_release(&t);
    circuit_done(&t, RS_OK);
}

static void done_after_done(void *arg)
{
    fx *f = arg;
    circuit_ticket t;
    cr_assert(circuit_allow(f->b, NULL, &t, NULL));
    circuit_done(&t, RS_OK);
    circuit_done(&t, RS_OK);
}

Test(l6, T5_closed_ticket_keeps_the_single_thread_checks)
{
    fx f;
    fx_new(&f, 8, 1, OPEN_FOR, PROBE_TO);
    expect_abort(done_after_release, &f, "already settled by release");
    expect_abort(done_after_done, &f, "already settled by done");
    circuit_ticket t;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    cr_assert(circuit_done(&t, RS_OK));
    circuit_release(&t); /* does nothing */
    circuit_stats s;
    circuit_get_stats(f.b, &s);
    cr_assert_eq(s.successes, 1);
    cr_assert_eq(s.released, 0);
    fx_free(&f);
}

typedef struct race {
    circuit_ticket *t;
    pthread_barrier_t *go;
    bool done_won;
} race;

static void *race_release(void *arg)
{
    race *r = arg;
    pthread_barrier_wait(r->go);
    circuit_release(r->t);
    return NULL;
}

static void race_abort_handler(int sig)
{
    (void)sig;
    _exit(3); /* done lost: "already settled by release" */
}

/* For a probe ticket, done racing release on two threads: exactly one
 * settles and the slot is freed exactly once (the half-open state admits
 * exactly `probes` again). Run in a child per round because the losing done
 * aborts by design. */
Test(l6, T5_probe_ticket_done_racing_release_settles_once)
{
    for (int round = 0; round < 40; round++) {
        pid_t pid = fork();
        cr_assert_neq(pid, -1);
        if (pid == 0) {
            signal(SIGABRT, race_abort_handler);
            fx f;
            fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
            f.p.probe_forced = CIRCUIT_HALF_OPEN;
            fx_build(&f);
            fx_half_open_due(&f);
            circuit_ticket t;
            if (!circuit_allow(f.b, NULL, &t, NULL))
                _exit(10);
            pthread_barrier_t go;
            pthread_barrier_init(&go, NULL, 2);
            race r = {&t, &go, false};
            pthread_t th;
            pthread_create(&th, NULL, race_release, &r);
            pthread_barrier_wait(&go);
            int fd = open("/dev/null", O_WRONLY);
            dup2(fd, 2); /* the losing done's abort message */
            circuit_done(&t, RS_OK);
            pthread_join(th, NULL);
            /* done won: the slot is free once */
            circuit_ticket u, v;
            if (!circuit_allow(f.b, NULL, &u, NULL))
                _exit(11);
            if (circuit_allow(f.b, NULL, &v, NULL))
                _exit(12);
            _exit(0);
        }
        int st;
        waitpid(pid, &st, 0);
        cr_assert(WIFEXITED(st), "round %d: child died of signal %d", round, WTERMSIG(st));
        cr_assert(WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 3, "round %d: exit %d", round,
                  WEXITSTATUS(st));
    }
}
