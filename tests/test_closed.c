/*
 * The closed state (L6, S2, L8, T5, C1, C4): closed successes are counted
 * on per-CPU cells whatever the window holds; a failure (a transition,
 * isolate) makes the counts exact by reading the cells; trip is asked only
 * after failures; a closed ticket is settled without arbitration. Threads
 * stopped at every CAS and park point of the counting protocol stop nobody
 * (L1), and a stopped entry into closed never touches the next closed
 * state's descriptors or bitmap.
 */
#include <stdatomic.h>

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

/* Successes write no line another CPU's allow or done writes, whatever the
 * window holds: in the test build every shared-line read-modify-write of
 * the counting paths is counted (the state word's CAS among them), and 10^6
 * successes on two threads, into a window that holds failures, make none
 * (L6, L8). */
Test(closed, L6_successes_write_no_shared_line_even_with_failures_in_the_window)
{
    fx f;
    fx_init(&f, 64, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    fx_build(&f);
    fx_call(&f, RS_FAIL);
    fx_call(&f, RS_OK);
    fx_call(&f, RS_FAIL); /* F S F: two failures in the window */
    uint64_t cas0 = circuit_test_core_cas_attempts(), rmw0 = circuit_test_shared_rmws();
    run_threads(&f, 2, 500000, RS_OK);
    uint64_t cas = circuit_test_core_cas_attempts() - cas0;
    uint64_t rmw = circuit_test_shared_rmws() - rmw0;
    cr_assert_eq(cas, 0, "%llu state-word CAS attempts for successes", (unsigned long long)cas);
    cr_assert_eq(rmw, 0, "%llu shared-line RMWs for successes", (unsigned long long)rmw);
    circuit_stats s;
    circuit_get_stats(f.b, &s);
    cr_assert_eq(s.successes, 1000001);
    cr_assert_eq(s.failures, 2);
    assert_counts(&s.counts, 64, 0, 1000000, 0, 0); /* both failures left */
    cr_assert_eq(f.p.trip_calls, 2, "S2 (0.3): trip asked only after the two failures");
    fx_free(&f);
}

/* L8: with 1 % failures over 10^6 results on two threads, the counting
 * paths make at most a few shared-line RMWs per failure (the exact point's
 * CAS, its descriptor, the failure's ring record, the clears of failures
 * that left, an epoch end now and then), however many successes. */
typedef struct mixed {
    fx *f;
    long n;
    uint64_t seed;
    long failures;
} mixed;

static void *mixed_calls(void *arg)
{
    mixed *m = arg;
    uint64_t x = m->seed;
    for (long i = 0; i < m->n; i++) {
        x = x * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
        bool fail = (x >> 33) % 100 == 0;
        circuit_ticket t;
        cr_assert(circuit_allow(m->f->b, NULL, &t, NULL));
        cr_assert(circuit_done(&t, fail ? RS_FAIL : RS_OK));
        m->failures += fail;
    }
    return NULL;
}

static void l8_run(int window)
{
    fx f;
    fx_init(&f, window, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0; /* never trips */
    fx_build(&f);
    uint64_t rmw0 = circuit_test_shared_rmws();
    mixed m[2] = {{&f, 500000, 1, 0}, {&f, 500000, 2, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, mixed_calls, &m[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    uint64_t rmw = circuit_test_shared_rmws() - rmw0;
    long failures = m[0].failures + m[1].failures;
    cr_assert_gt(failures, 8000);
    double per = (double)rmw / (double)failures;
    cr_log_info("L8: window %d: %llu shared-line RMWs for %ld failures in 10^6 results: %.2f per "
                "failure", window, (unsigned long long)rmw, failures, per);
    cr_assert_leq(per, 6.0, "L8: %.2f shared-line RMWs per failure", per);
    circuit_stats s;
    circuit_get_stats(f.b, &s);
    cr_assert_eq(s.successes + s.failures, 1000000);
    cr_assert_eq(s.failures, (uint64_t)failures);
    cr_assert_eq(s.counts.successes + s.counts.failures, window);
    fx_free(&f);
}

Test(closed, L8_a_few_shared_line_rmws_per_failure_window_64) { l8_run(64); }
Test(closed, L8_a_few_shared_line_rmws_per_failure_window_1024) { l8_run(1024); }

/* A failure makes the counts exact: it trips with the window of successes
 * counted on four threads' cells before it and the run they made. */
Test(closed, L6_failure_makes_counts_exact_after_many_threads)
{
    fx f;
    fx_init(&f, 1000, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 1;
    fx_build(&f);
    run_threads(&f, 4, 20000, RS_OK);
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

/* Successes counted on the cells slide the window at the next exact point:
 * a failure they evict leaves, the run they made continues, and an epoch
 * end (a fold) keeps the counts. */
Test(closed, L6_exact_points_continue_the_window_and_the_run)
{
    fx f;
    fx_init(&f, 4, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    fx_build(&f);
    fx_call(&f, RS_FAIL); /* F */
    for (int i = 0; i < 3; i++)
        fx_call(&f, RS_OK); /* F S S S */
    assert_counts(&f.seen[3], 3, 1, 3, 0, 0);
    fx_call(&f, RS_OK); /* S S S S: the F left */
    assert_counts(&f.seen[4], 4, 0, 4, 0, 0);
    for (int i = 0; i < 6; i++)
        fx_call(&f, RS_OK);
    assert_counts(&f.seen[10], 4, 0, 10, 0, 0);
    cr_assert(circuit_test_fold(f.b));
    circuit_counts c = fx_counts(&f);
    assert_counts(&c, 4, 0, 10, 0, 0);
    fx_call(&f, RS_FAIL);
    assert_counts(&f.seen[11], 3, 1, 0, 1, 0);
    assert_counts(&f.p.trip_last, 3, 1, 0, 1, 0);
    fx_call(&f, RS_FAIL);
    fx_call(&f, RS_OK);
    fx_call(&f, RS_FAIL); /* S F F S F -> window F F S F */
    assert_counts(&f.p.trip_last, 1, 3, 0, 1, 0);
    cr_assert_eq(f.p.trip_calls, 4, "S2 (0.3): once per failure");
    fx_free(&f);
}

/* ---- stopped threads at the counting protocol's points ------------------ */

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

static void stop(stopped *s, pthread_t *th)
{
    park_setup();
    cr_assert_eq(pthread_create(th, NULL, stopped_call, s), 0);
    park_wait();
}

static void resume(pthread_t th)
{
    park_release();
    pthread_join(th, NULL);
}

/* A success stopped between reading the word and its cell CAS stops nobody:
 * failures make exact points meanwhile; its success then counts once, after
 * them (the failures' sums did not see it). */
Test(closed, L6_success_stopped_before_its_cell_count)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    fx_build(&f);
    stopped s = {&f, CIRCUIT_TP_FAST_BEFORE_COUNT, RS_OK, false};
    pthread_t th;
    stop(&s, &th);
    for (int i = 0; i < 5; i++)
        cr_assert(fx_call(&f, RS_OK));
    cr_assert(fx_call(&f, RS_FAIL));
    for (int i = 0; i < 3; i++)
        cr_assert(fx_call(&f, RS_OK));
    resume(th);
    cr_assert(s.counted, "same generation: the result counts");
    circuit_stats st;
    circuit_get_stats(f.b, &st);
    cr_assert_eq(st.successes, 9);
    cr_assert_eq(st.failures, 1);
    circuit_counts c = fx_counts(&f);
    assert_counts(&c, 7, 1, 4, 0, 0);
    fx_free(&f);
}

/* ... and when the breaker trips and closes again meanwhile, it is late. */
Test(closed, L6_success_stopped_before_its_cell_count_across_a_trip_is_late)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 1;
    f.p.close_run = 1;
    fx_build(&f);
    stopped s = {&f, CIRCUIT_TP_FAST_BEFORE_COUNT, RS_OK, false};
    pthread_t th;
    stop(&s, &th);
    circuit_test_clock_set(T0);
    cr_assert(fx_call(&f, RS_FAIL)); /* trips: the stopped ticket's generation ends */
    circuit_test_clock_set(T0 + OPEN_FOR);
    cr_assert(fx_call(&f, RS_OK)); /* the probe closes it: a new closed state */
    for (int i = 0; i < 3; i++)
        cr_assert(fx_call(&f, RS_OK));
    resume(th);
    cr_assert_not(s.counted, "T2: a success of an earlier closed state is late");
    circuit_stats st;
    circuit_get_stats(f.b, &st);
    cr_assert_eq(st.late, 1);
    assert_counts(&st.counts, 3, 0, 3, 0, 0);
    assert_counts(&f.log.tr[0].counts, 0, 1, 0, 1, 0); /* C4: the trip's final counts */
    fx_free(&f);
}

/* A failure stopped in the middle of its sum, or after asking trip and before
 * its CAS, stops nobody; its CAS then loses to the others' points and it is
 * counted once, last. */
static void stopped_failure(circuit_test_point at)
{
    fx f;
    fx_init(&f, 16, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    fx_build(&f);
    for (int i = 0; i < 5; i++)
        cr_assert(fx_call(&f, RS_OK));
    stopped s = {&f, at, RS_FAIL, false};
    pthread_t th;
    stop(&s, &th);
    for (int i = 0; i < 200; i++)
        cr_assert(fx_call(&f, i % 50 == 0 ? RS_FAIL : RS_OK), "call %d", i);
    resume(th);
    cr_assert(s.counted);
    circuit_stats st;
    circuit_get_stats(f.b, &st);
    cr_assert_eq(st.successes, 5 + 196, "successes %llu", (unsigned long long)st.successes);
    cr_assert_eq(st.failures, 1 + 4);
    circuit_counts c = fx_counts(&f);
    cr_assert_eq(c.successes + c.failures, 16);
    cr_assert_eq(c.failures, 1, "the stopped failure is the newest result (call 150's has left)");
    cr_assert_eq(c.consecutive_failures, 1);
    fx_free(&f);
}

Test(closed, L6_failure_stopped_mid_sum) { stopped_failure(CIRCUIT_TP_FOLD_MID_SUM); }
Test(closed, L6_failure_stopped_before_its_cas) { stopped_failure(CIRCUIT_TP_DONE_BEFORE_CAS); }

/* A failure stopped after asking trip and before its CAS while only
 * successes are counted: its CAS still wins, and those successes (its sum did
 * not see them) are ordered after it (L6: successes counted before a
 * failure's read are ordered before it, the others after). */
Test(closed, L6_failure_stopped_before_its_cas_is_ordered_before_later_successes)
{
    fx f;
    fx_init(&f, 1000, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    fx_build(&f);
    for (int i = 0; i < 10; i++)
        cr_assert(fx_call(&f, RS_OK));
    stopped s = {&f, CIRCUIT_TP_DONE_BEFORE_CAS, RS_FAIL, false};
    pthread_t th;
    stop(&s, &th);
    for (int i = 0; i < 200; i++)
        cr_assert(fx_call(&f, RS_OK));
    resume(th);
    cr_assert(s.counted);
    assert_counts(&f.p.trip_last, 10, 1, 0, 1, 0); /* what trip saw */
    circuit_counts c = fx_counts(&f);
    assert_counts(&c, 210, 1, 200, 0, 0);
    fx_free(&f);
}

/* A failure stopped after the CAS that made its exact point, before writing
 * the point's descriptor and its ring record: the next points write them
 * (helping), and nothing is lost. */
Test(closed, L6_failure_stopped_after_its_point_before_its_record)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    fx_build(&f);
    for (int i = 0; i < 3; i++)
        cr_assert(fx_call(&f, RS_OK));
    stopped s = {&f, CIRCUIT_TP_RING_BEFORE_WRITE, RS_FAIL, false};
    pthread_t th;
    stop(&s, &th);
    /* S S S F(stopped) then S F S S S F S S: the stopped F is evicted by the
     * 8th result after it, which needs its record */
    static const int next[] = {RS_OK, RS_FAIL, RS_OK, RS_OK, RS_OK, RS_FAIL, RS_OK, RS_OK};
    for (int i = 0; i < 8; i++)
        cr_assert(fx_call(&f, next[i]));
    circuit_counts c = fx_counts(&f);
    assert_counts(&c, 6, 2, 2, 0, 0); /* the stopped F has left */
    fx_call(&f, RS_FAIL);
    assert_counts(&f.p.trip_last, 5, 3, 0, 1, 0);
    resume(th);
    cr_assert(s.counted);
    c = fx_counts(&f);
    assert_counts(&c, 5, 3, 0, 1, 0);
    fx_free(&f);
}

/* An intent's maker stopped right after making it (a failure that trips, an
 * isolate) stops nobody: the next call completes the same decision. */
Test(closed, L6_trip_maker_stopped_after_its_intent)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 1;
    fx_build(&f);
    for (int i = 0; i < 4; i++)
        cr_assert(fx_call(&f, RS_OK));
    stopped s = {&f, CIRCUIT_TP_INTENT_MADE, RS_FAIL, false};
    pthread_t th;
    stop(&s, &th);
    circuit_ticket t;
    circuit_rejection rej;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL), "admitted before the trip completes");
    cr_assert_not(circuit_done(&t, RS_OK), "completes the trip: its own success is late");
    cr_assert_not(circuit_allow(f.b, NULL, &t, &rej));
    cr_assert_eq(rej.state, CIRCUIT_OPEN);
    resume(th);
    cr_assert(s.counted, "the stopped failure was counted by the completion");
    cr_assert_eq(f.log.n, 1);
    assert_tr(&f, 0, CIRCUIT_CLOSED, CIRCUIT_OPEN, 1);
    assert_counts(&f.log.tr[0].counts, 4, 1, 0, 1, 0);
    cr_assert_eq(f.p.trip_calls, 1, "the completer took the maker's answer for the same counts");
    fx_free(&f);
}

/* An isolate stopped after sealing the cells (its completion): a success
 * that finds its cell sealed completes the isolate itself and is late. */
typedef struct isolator {
    fx *f;
    int rc;
} isolator;

static void *isolate_call(void *arg)
{
    isolator *i = arg;
    park_me_at(CIRCUIT_TP_FOLD_SEALED);
    i->rc = circuit_isolate(i->f->b, NULL);
    return NULL;
}

Test(closed, L6_isolate_stopped_after_sealing_the_cells)
{
    fx f;
    fx_new(&f, 8, 1, OPEN_FOR, PROBE_TO);
    for (int i = 0; i < 5; i++)
        cr_assert(fx_call(&f, RS_OK));
    circuit_ticket t;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL));
    park_setup();
    isolator iso = {&f, -1};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, isolate_call, &iso), 0);
    park_wait();
    cr_assert_not(circuit_done(&t, RS_OK), "its cell is sealed: it completes the isolate, late");
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_ISOLATED);
    resume(th);
    cr_assert_eq(iso.rc, 0);
    cr_assert_eq(f.log.n, 1);
    assert_tr(&f, 0, CIRCUIT_CLOSED, CIRCUIT_ISOLATED, 1);
    assert_counts(&f.log.tr[0].counts, 5, 0, 5, 0, 0); /* C4: exact final counts */
    circuit_stats st;
    circuit_get_stats(f.b, &st);
    cr_assert_eq(st.successes, 5);
    cr_assert_eq(st.late, 1);
    fx_free(&f);
}

/* A success stopped before starting its cell for a new epoch (the cell still
 * holds an ended epoch's count) stops nobody; when the epoch has ended again
 * meanwhile, its start CAS fails and it counts once in the current one. */
Test(closed, L6_success_stopped_before_starting_its_cell)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    fx_build(&f);
    for (int i = 0; i < 3; i++)
        cr_assert(fx_call(&f, RS_OK));
    cr_assert(circuit_test_fold(f.b)); /* every cell now holds an ended epoch */
    stopped s = {&f, CIRCUIT_TP_CELL_BEFORE_START, RS_OK, false};
    pthread_t th;
    stop(&s, &th);
    cr_assert(circuit_test_fold(f.b)); /* and again */
    for (int i = 0; i < 2; i++)
        cr_assert(fx_call(&f, RS_OK));
    cr_assert(fx_call(&f, RS_FAIL));
    resume(th);
    cr_assert(s.counted);
    circuit_stats st;
    circuit_get_stats(f.b, &st);
    cr_assert_eq(st.successes, 6);
    cr_assert_eq(st.failures, 1);
    circuit_counts c = fx_counts(&f);
    assert_counts(&c, 6, 1, 1, 0, 0);
    fx_free(&f);
}

/* ---- S2 (amended in 0.3) ----------------------------------------------------- */

Test(closed, S2_success_never_asks_trip)
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

Test(closed, S2_success_while_the_window_holds_a_failure_asks_nothing)
{
    fx f;
    fx_init(&f, 3, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    fx_build(&f);
    fx_call(&f, RS_FAIL);
    cr_assert_eq(f.p.trip_calls, 1);
    assert_counts(&f.p.trip_seen[0], 0, 1, 0, 1, 0);
    for (int i = 0; i < 5; i++)
        fx_call(&f, RS_OK); /* the failure stays, then leaves: trip never asked */
    cr_assert_eq(f.p.trip_calls, 1);
    fx_call(&f, RS_FAIL);
    cr_assert_eq(f.p.trip_calls, 2);
    assert_counts(&f.p.trip_seen[1], 2, 1, 0, 1, 0); /* exact, including it */
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

Test(closed, T5_closed_ticket_keeps_the_single_thread_checks)
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
Test(closed, T5_probe_ticket_done_racing_release_settles_once)
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

/* While a slow observe holds the delivery role and a transition is pending
 * behind it, closed successes still write no shared line (L6, L8): a call
 * that published nothing only looks at the role. A core in which every such
 * allow and done tries the role (a fence and a CAS of a line all CPUs write)
 * fails here: thousands of tries in 20 000 successes while observe sleeps. */
static sem_t slow_in, slow_go;

static void slow_observe(fx *f, void *call_ctx, const circuit_transition *t)
{
    (void)f, (void)call_ctx;
    if (t->to == CIRCUIT_ISOLATED) {
        sem_post(&slow_in);
        while (sem_wait(&slow_go) != 0)
            ;
    }
}

static void *isolate_slowly(void *arg)
{
    fx *f = arg;
    cr_assert_eq(circuit_isolate(f->b, NULL), 0);
    return NULL;
}

Test(closed, L6_L8_successes_write_no_shared_line_while_a_slow_observe_delivers)
{
    fx f;
    fx_new(&f, 64, 1, OPEN_FOR, PROBE_TO);
    sem_init(&slow_in, 0, 0);
    sem_init(&slow_go, 0, 0);
    f.log.extra = slow_observe;
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, isolate_slowly, &f), 0);
    while (sem_wait(&slow_in) != 0)
        ; /* the isolating thread is inside observe, holding the role */
    cr_assert_eq(circuit_reset(f.b, NULL), 0); /* pending behind the slow one */
    cr_assert_gt(circuit_test_pending(f.b), 0);
    uint64_t rmw0 = circuit_test_shared_rmws(), cas0 = circuit_test_core_cas_attempts();
    for (int i = 0; i < 20000; i++)
        cr_assert(fx_call(&f, RS_OK));
    uint64_t rmws = circuit_test_shared_rmws() - rmw0;
    uint64_t cas = circuit_test_core_cas_attempts() - cas0;
    cr_assert_gt(circuit_test_pending(f.b), 0, "still pending: the role is still held");
    sem_post(&slow_go);
    pthread_join(th, NULL);
    cr_assert_eq(rmws, 0, "20 000 closed successes made %llu shared-line RMWs",
                 (unsigned long long)rmws);
    cr_assert_eq(cas, 0);
    cr_assert_eq(f.log.n, 2, "both transitions delivered by the slow deliverer (O3)");
    fx_free(&f);
}

/* L6: a failure brings the window up to date in
 * O(window / 64) at worst, however many successes came before it. The
 * test build counts the words of the closed window's failure bitmap read
 * to find the failures an exact point evicts: a failure after 60 000
 * successes in a window of 65 536 reads at most 60 001 / 64 + 2 of them
 * (one record per result would be 60 001 reads), one after the whole
 * window has turned over reads none, and the counts stay exact. */
/* allow + done, nothing else (fx_call also reads the stats) */
static void one(fx *f, int result)
{
    circuit_ticket t;
    cr_assert(circuit_allow(f->b, NULL, &t, NULL));
    cr_assert(circuit_done(&t, result));
}

Test(closed, L6_a_failure_after_many_successes_reads_O_window_over_64_words)
{
    fx f;
    fx_init(&f, 65536, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0; /* never trips */
    fx_build(&f);
    circuit_stats s;
    one(&f, RS_FAIL); /* position 0 */
    for (int i = 0; i < 60000; i++)
        one(&f, RS_OK);
    uint64_t w0 = circuit_test_window_words();
    one(&f, RS_FAIL); /* position 60 001: appends 60 001 results */
    uint64_t words = circuit_test_window_words() - w0;
    cr_log_info("L6: a failure after 60 000 successes read %llu bitmap words",
                (unsigned long long)words);
    cr_assert_leq(words, 60001 / 64 + 2, "L6: %llu words read for one failure",
                  (unsigned long long)words);
    cr_assert_geq(words, 60001 / 64, "the evicted span was not read: %llu words",
                  (unsigned long long)words);
    circuit_get_stats(f.b, &s);
    assert_counts(&s.counts, 60000, 2, 0, 1, 0);

    for (int i = 0; i < 1000; i++)
        one(&f, RS_OK);
    w0 = circuit_test_window_words();
    one(&f, RS_FAIL); /* appends 1 001 */
    words = circuit_test_window_words() - w0;
    cr_assert_leq(words, 1001 / 64 + 2, "%llu words for 1 001 results", (unsigned long long)words);
    circuit_get_stats(f.b, &s);
    assert_counts(&s.counts, 61000, 3, 0, 1, 0);

    for (int i = 0; i < 70000; i++)
        one(&f, RS_OK);
    w0 = circuit_test_window_words();
    one(&f, RS_FAIL); /* appends 70 001 >= window: every old result leaves */
    words = circuit_test_window_words() - w0;
    cr_assert_eq(words, 0, "a window that turned over whole needs no read: %llu",
                 (unsigned long long)words);
    circuit_get_stats(f.b, &s);
    assert_counts(&s.counts, 65535, 1, 0, 1, 0); /* only the newest failure */
    fx_free(&f);
}

/* ---- the closed mirror (src/word.h): stopped at each of its CASes --------- */

/* A probe's success closes the breaker, and its maker stops in the mirror's
 * set, after reading the mirror (shut since the trip) and the new closed
 * word, before its CAS. An operator then isolates the breaker: its intent
 * shuts the mirror for the new state, which changes its version. The set
 * then goes on: its CAS is from the value it read and must fail, or the
 * mirror would say closed while the breaker is isolated and circuit_allow
 * would admit calls (S3's rule for isolated). A shut that wrote only when
 * the mirror was open for the state fails this test. */
Test(closed, S3_L1_a_stopped_mirror_set_never_admits_into_a_state_that_left_closed)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 1;
    f.p.close_run = 1;
    fx_build(&f);
    circuit_test_clock_set(T0);
    cr_assert(fx_call(&f, RS_FAIL)); /* open at T0 */
    circuit_test_clock_set(T0 + OPEN_FOR);
    stopped s = {&f, CIRCUIT_TP_MIRROR_BEFORE_SET, RS_OK, false};
    pthread_t th;
    stop(&s, &th); /* its probe's success closed the breaker */
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    cr_assert_eq(circuit_isolate(f.b, NULL), 0);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_ISOLATED);
    resume(th);
    cr_assert(s.counted, "the probe's success closed the breaker");
    circuit_ticket t;
    circuit_rejection rej;
    for (int i = 0; i < 3; i++) {
        cr_assert_not(circuit_allow(f.b, NULL, &t, &rej), "admitted while isolated");
        cr_assert_eq(rej.state, CIRCUIT_ISOLATED);
    }
    cr_assert_eq(circuit_reset(f.b, NULL), 0);
    cr_assert(fx_call(&f, RS_OK), "closed again after the reset");
    fx_free(&f);
}

/* A failure that trips stops in its intent's shut of the mirror, after
 * checking the word still holds its intent, before its CAS. Another failure
 * completes the trip (shutting the mirror itself), a probe closes the
 * breaker again, which sets the mirror for the new closed state. The
 * stopped shut then goes on: its CAS is from the mirror value it read
 * before and must fail, and the word no longer holds its intent, so it
 * must leave the new state's mirror open: 10^4 successes then make no
 * shared-line RMW (L8) and no CAS of the state word. A shut that did not
 * check the word before retrying shuts the new state's mirror, and the
 * next call's set is a shared RMW. */
Test(closed, L8_L1_a_stopped_mirror_shut_never_shuts_a_later_states_fast_path)
{
    fx f;
    fx_init(&f, 8, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 1;
    f.p.close_run = 1;
    fx_build(&f);
    circuit_test_clock_set(T0);
    stopped s = {&f, CIRCUIT_TP_MIRROR_BEFORE_SHUT, RS_FAIL, false};
    pthread_t th;
    stop(&s, &th); /* its failure's trip intent is in the word */
    circuit_ticket t;
    cr_assert(circuit_allow(f.b, NULL, &t, NULL), "closed until the trip completes");
    circuit_done(&t, RS_FAIL); /* completes the trip */
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    circuit_test_clock_set(T0 + OPEN_FOR);
    cr_assert(fx_call(&f, RS_OK)); /* the probe closes it: the mirror is set */
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    resume(th);
    cr_assert(s.counted, "the stopped failure was counted by the trip");
    uint64_t rmw0 = circuit_test_shared_rmws(), cas0 = circuit_test_core_cas_attempts();
    for (int i = 0; i < 10000; i++) {
        cr_assert(circuit_allow(f.b, NULL, &t, NULL));
        cr_assert(circuit_done(&t, RS_OK));
    }
    cr_assert_eq(circuit_test_shared_rmws() - rmw0, 0, "the new state's mirror was shut");
    cr_assert_eq(circuit_test_core_cas_attempts() - cas0, 0);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    fx_free(&f);
}

/* ==== a stopped entry into closed (C1, C4, L1) ============================ */

/* ---- a stopped entry into closed and the new state's descriptors ---------- */

/* Thread A resets an isolated breaker and stops after checking the word,
 * before it writes the descriptor slot it read; meanwhile the main thread
 * resets, and the new closed state makes its points; A goes on when the
 * main thread has made a trip intent and before it completes it. A's stale
 * write must not touch the new state's descriptors. A core that empties the
 * slots with "read X, check, CAS X" fails here: a descriptor does not name
 * its generation, so the new state's D_1 (one failure, as the old D_1)
 * matches A's X bit for bit and is erased; the intent word does not hold
 * the point's sum, so D_1 is derived from the asked sum and the trip's
 * final counts come out as F F (a run of 2) instead of F S S S F (C4). */
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

Test(closed, C4_L1_a_stopped_entry_into_closed_never_erases_the_new_states_counts)
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

Test(closed, C1_L1_a_stopped_entry_into_closed_never_empties_the_new_states_bitmap)
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
