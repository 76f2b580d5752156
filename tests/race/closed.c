/*
 * The closed descriptors D_k raced (L1, C1, C4), a TSan-safe case:
 *
 *   descriptors  the encoding, a reset and a failure stopped at their
 *                descriptor CAS across many closed states, and S_k's limit
 *
 * It includes the core's internal headers (src/counting.h) for the
 * encoding check.
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "counting.h"
#include "race.h"

/* ==== descriptors: D_k's encoding and stopped descriptor CASes ============ */

/*
 * L1 / C1 / C4: the closed descriptors D_k (src/counting.h, word.h's layout).
 * A plain program (no Criterion), so that it runs in every build, TSan
 * included; it includes the core's internal headers for the encoding check.
 *
 *   1. encoding: every field round-trips at its limits, and a descriptor is
 *      D_k for its own k only: all 32 bits of k are its tag (a tag of k's
 *      low 14 bits would make D_k and D_{k + 16384} one value);
 *      a field out of range aborts with a message naming it.
 *   2. L1: a reset stopped after checking the word, before its CAS of the
 *      first point's descriptor, while 8 191 closed states come and go
 *      (reset, one failure trips), then resumed: every call afterwards
 *      returns (get_stats, a failure, isolate) and the counts are right.
 *      With 14-bit tags the stopped CAS would find its X again, overwrite
 *      the live D_k, and every later failure, stats read and isolate spin.
 *   3. a failure stopped at its descriptor CAS (the same "read X, check,
 *      CAS X" in desc_put) until its slot holds X's counts under a point
 *      number with X's low 14 bits: its CAS fails, the live D stays.
 *   4. C1 / C4: S_k's limit (2^29 - 1 successes between two exact points,
 *      CIRCUIT__D_S_MAX): a failure that sums more ends the epoch (a fold)
 *      and the counts stay exact on both sides of the limit.
 *
 *   race_closed descriptors     exit 0: pass, 1: a check failed
 */


/* ---- 1. encoding ---------------------------------------------------------- */

static bool cc_equal(const circuit__point_counts *a, const circuit__point_counts *b)
{
    return a->seq == b->seq && a->full == b->full && a->fail == b->fail &&
           a->last_fail == b->last_fail && a->run == b->run && a->S == b->S;
}

static void encoding(void)
{
    static const uint32_t ks[] = {0, 1, 2, 16383, 16384, 16385, 65536, UINT32_C(1) << 31,
                                  UINT32_MAX, 0x9e3779b9u};
    static const uint32_t seqs[] = {0, 1, 65535};
    static const uint32_t fails[] = {0, 1, 65536};
    static const uint32_t runs[] = {0, 1, (uint32_t)CIRCUIT_RUN_MAX};
    static const uint64_t Ss[] = {0, 1, CIRCUIT__D_S_MAX};
    int checked = 0;
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
        for (size_t a = 0; a < 3; a++)
            for (size_t f = 0; f < 3; f++)
                for (size_t r = 0; r < 3; r++)
                    for (size_t s = 0; s < 3; s++)
                        for (int bits = 0; bits < 4; bits++) {
                            uint32_t k = ks[ki];
                            circuit__point_counts c = {seqs[a], bits & 1, fails[f], (bits & 2) != 0,
                                             runs[r], Ss[s]};
                            circuit__u128 d = circuit__desc_pack(&c, k);
                            circuit__point_counts u;
                            circuit__desc_unpack(d, &u);
                            RACE_CHECK(cc_equal(&c, &u), "k %u: a field did not round-trip", k);
                            RACE_CHECK(circuit__desc_is(d, k), "k %u: not D_k", k);
                            for (int j = 0; j < 32; j++)
                                RACE_CHECK(!circuit__desc_is(d, k ^ (UINT32_C(1) << j)),
                                      "D_%u taken for D_%u: tag bit %d ignored", k,
                                      k ^ (UINT32_C(1) << j), j);
                            RACE_CHECK(!circuit__desc_is(d, k + 16384u) && !circuit__desc_is(d, k - 2u),
                                  "D_%u taken for another point of its slot", k);
                            checked++;
                        }
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        circuit__u128 z = circuit__desc_zero(ks[ki]);
        circuit__point_counts u, zero = {0, false, 0, false, 0, 0};
        circuit__desc_unpack(z, &u);
        RACE_CHECK(circuit__desc_is(z, ks[ki]) && cc_equal(&u, &zero), "desc_zero(%u)", ks[ki]);
        RACE_CHECK(!circuit__desc_is((circuit__u128){0, 0}, ks[ki]),
              "a slot never written is D_%u", ks[ki]);
    }
    printf("encoding: %d descriptors round-trip, each D_k for its k only\n", checked);
}

/* a field out of range aborts (a bug of the core, never stored cut) */
static void expect_pack_abort(const char *what, circuit__point_counts c)
{
    int pipefd[2];
    if (pipe(pipefd) != 0) {
        perror("pipe");
        exit(1);
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pipefd[1], 2);
        close(pipefd[0]);
        (void)circuit__desc_pack(&c, 7);
        _exit(0);
    }
    close(pipefd[1]);
    char buf[512] = {0};
    size_t got = 0;
    ssize_t r;
    while (got < sizeof buf - 1 && (r = read(pipefd[0], buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)r;
    close(pipefd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    RACE_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT &&
              strstr(buf, "descriptor field out of range") != NULL,
          "%s: no abort naming it (status %d, stderr '%s')", what, status, buf);
}

static void encoding_aborts(void)
{
    circuit__point_counts ok = {0, false, 0, false, 0, 0}, c;
    c = ok; c.seq = 65536;
    expect_pack_abort("seq 65536", c);
    c = ok; c.fail = 65537;
    expect_pack_abort("failures 65537", c);
    c = ok; c.run = (uint32_t)CIRCUIT_RUN_MAX + 1u;
    expect_pack_abort("run RUN_MAX + 1", c);
    c = ok; c.S = CIRCUIT__D_S_MAX + 1;
    expect_pack_abort("S 2^29", c);
    printf("encoding: out-of-range fields abort\n");
}

/* ---- breakers --------------------------------------------------------------- */

static int64_t trip_run = 1;
static bool trip(void *a, const circuit_counts *c)
{
    (void)a;
    return trip_run > 0 && c->consecutive_failures >= trip_run;
}
static circuit_state probe(void *a, const circuit_counts *c)
{
    (void)a;
    (void)c;
    return CIRCUIT_CLOSED;
}
static circuit_outcome classify(void *a, void *ctx, int r)
{
    (void)a;
    (void)ctx;
    return r ? CIRCUIT_FAILURE : CIRCUIT_SUCCESS;
}

static circuit_breaker *build(int window)
{
    circuit_spec sp = {0};
    sp.config = (circuit_config){window, 1, INT64_C(1) << 40, 1000};
    sp.policy.trip = trip;
    sp.policy.probe = probe;
    sp.classify = classify;
    circuit_breaker *b = NULL;
    int rc = circuit_new(&b, &sp, NULL, 0);
    if (rc != 0) {
        fprintf(stderr, "circuit_new: %d\n", rc);
        exit(1);
    }
    return b;
}

static void call(circuit_breaker *b, int result)
{
    circuit_ticket t;
    if (!circuit_allow(b, NULL, &t, NULL)) {
        fprintf(stderr, "FAIL: not admitted while closed\n");
        exit(1);
    }
    circuit_done(&t, result);
}

/* ---- parking one thread ------------------------------------------------------ */

static sem_t parked, go;
static _Thread_local circuit_test_point park_at;
static void hook(circuit_test_point p, void *a)
{
    (void)a;
    if (park_at != 0 && p == park_at) {
        park_at = 0;
        sem_post(&parked);
        while (sem_wait(&go) != 0)
            ;
    }
}

static void stats_closed_empty(circuit_breaker *b)
{
    circuit_stats st;
    circuit_get_stats(b, &st);
    RACE_CHECK(st.state == CIRCUIT_CLOSED, "state %s, not closed", circuit_state_name(st.state));
    RACE_CHECK(st.counts.successes == 0 && st.counts.failures == 0 &&
              st.counts.consecutive_failures == 0 && st.counts.consecutive_successes == 0,
          "a fresh closed state's counts are %" PRId64 " / %" PRId64, st.counts.successes,
          st.counts.failures);
}
static void one_failure(circuit_breaker *b) { call(b, 1); }
static void stats_any(circuit_breaker *b)
{
    circuit_stats st;
    circuit_get_stats(b, &st);
}
static void isolate(circuit_breaker *b) { RACE_CHECK(circuit_isolate(b, NULL) == 0, "isolate"); }

/* ---- 2. a reset stopped before its descriptor CAS ---------------------------- */

static circuit_breaker *B;
static void *stopped_reset(void *a)
{
    (void)a;
    park_at = CIRCUIT_TP_CLOSED_START_BEFORE_DESC;
    int rc = circuit_reset(B, NULL);
    RACE_CHECK(rc == 0 || rc == EALREADY, "the stopped reset returned %d", rc);
    return NULL;
}

#define CYCLES 8191 /* closed states; 14-bit tags would come back after 8 191 */

static void reset_across_closed_states(void)
{
    trip_run = 1;
    B = build(64);
    call(B, 1); /* closed -> open */
    pthread_t th;
    pthread_create(&th, NULL, stopped_reset, NULL);
    while (sem_wait(&parked) != 0)
        ;
    for (int i = 0; i < CYCLES; i++) {
        if (circuit_reset(B, NULL) != 0) {
            fprintf(stderr, "FAIL: reset %d\n", i);
            exit(1);
        }
        call(B, 1); /* trips at once */
    }
    RACE_CHECK(circuit_reset(B, NULL) == 0, "the last reset");
    sem_post(&go);
    pthread_join(th, NULL);
    race_must_return("circuit_get_stats after the stopped reset", stats_closed_empty, B);
    race_must_return("a failure after the stopped reset", one_failure, B);
    RACE_CHECK(circuit_get_state(B) == CIRCUIT_OPEN, "one failure must trip (run 1)");
    RACE_CHECK(circuit_reset(B, NULL) == 0, "reset");
    race_must_return("circuit_isolate after the stopped reset", isolate, B);
    circuit_stats st;
    circuit_get_stats(B, &st);
    RACE_CHECK(st.state == CIRCUIT_ISOLATED, "isolated");
    circuit_free(B);
    printf("L1: a reset stopped at its descriptor CAS across %d closed states stops nobody\n",
           CYCLES);
}

/* ---- 3. a failure stopped before its descriptor CAS -------------------------- */

/* The stopped failure is a closed state's first one (point k0 + 1), stopped
 * after checking the word, before its CAS of D[(k0 + 1) & 1] from X, the
 * slot as it read it (an older state's descriptor). The main thread then
 * makes closed states (reset, two failures trip) until that slot holds a
 * descriptor with X's counts and a point number equal to X's in its low
 * 14 bits, as a 14-bit tag would have it (the same bits), and resumes
 * it: the stopped CAS must fail, the live descriptor stay. */
static void *stopped_failure(void *a)
{
    (void)a;
    park_at = CIRCUIT_TP_DESC_BEFORE_CAS;
    call(B, 1);
    return NULL;
}

static bool same_but_high_tag(circuit__u128 a, circuit__u128 x)
{
    circuit__point_counts ca, cx;
    circuit__desc_unpack(a, &ca);
    circuit__desc_unpack(x, &cx);
    return (a.lo & CIRCUIT__D_VALID) && (x.lo & CIRCUIT__D_VALID) && cc_equal(&ca, &cx) &&
           ((uint32_t)a.lo & 0x3fffu) == ((uint32_t)x.lo & 0x3fffu);
}

static void failure_across_points(void)
{
    trip_run = 2; /* two failures in a row trip */
    B = build(64);
    call(B, 1);
    call(B, 1); /* open: the slots hold this state's descriptors */
    RACE_CHECK(circuit_reset(B, NULL) == 0, "reset");
    pthread_t th;
    pthread_create(&th, NULL, stopped_failure, NULL);
    while (sem_wait(&parked) != 0)
        ;
    uint32_t k = circuit__closed_point(circuit__ld128_acq(&B->s->core).hi); /* its point */
    unsigned slot = k & 1u;
    circuit__u128 x = circuit__ld128_acq(&B->s->desc[slot]); /* what it read: not D_k yet */
    RACE_CHECK(!circuit__desc_is(x, k), "the stopped failure's slot already holds D_%u", k);
    call(B, 1); /* trips (helping writes D_k) */
    RACE_CHECK(circuit_get_state(B) == CIRCUIT_OPEN, "two failures trip");
    int cycles = 0, phase = -1;
    circuit__u128 live = {0, 0};
    for (; cycles < 4 * 16384 && phase < 0; cycles++) {
        RACE_CHECK(circuit_reset(B, NULL) == 0, "reset %d", cycles);
        /* step 0: after the reset, 1: after its first failure; the
         * second failure trips */
        for (int step = 0; step < 2 && phase < 0; step++) {
            live = circuit__ld128_acq(&B->s->desc[slot]);
            if (same_but_high_tag(live, x))
                phase = step;
            else
                call(B, 1);
        }
    }
    RACE_CHECK(phase >= 0, "no closed state left the slot as X in %d cycles", cycles);
    sem_post(&go);
    pthread_join(th, NULL);
    circuit__u128 after = circuit__ld128_acq(&B->s->desc[slot]);
    RACE_CHECK(after.lo == live.lo && after.hi == live.hi,
          "the stopped failure's CAS overwrote the live descriptor (its point %u, now %u)", k,
          (unsigned)(uint32_t)after.lo);
    circuit_stats st;
    race_must_return("circuit_get_stats after the stopped descriptor write", stats_any, B);
    circuit_get_stats(B, &st);
    RACE_CHECK(st.state == CIRCUIT_CLOSED && st.counts.failures == phase &&
              st.counts.consecutive_failures == phase,
          "after the stopped failure: %s, %" PRId64 " failures (want %d)",
          circuit_state_name(st.state), st.counts.failures, phase);
    call(B, 0);
    race_must_return("a failure after the stopped descriptor write", one_failure, B);
    circuit_get_stats(B, &st);
    RACE_CHECK(st.state == CIRCUIT_CLOSED && st.counts.failures == phase + 1 &&
              st.counts.successes == 1 && st.counts.consecutive_failures == 1,
          "then S F: %s, %" PRId64 " failures %" PRId64 " successes",
          circuit_state_name(st.state), st.counts.failures, st.counts.successes);
    race_must_return("circuit_isolate after the stopped descriptor write", isolate, B);
    circuit_free(B);
    printf("L1: a failure stopped at its descriptor CAS across %d closed states (its slot "
           "as it read it but for the tag's high bits) stops nobody\n",
           cycles);
}

/* ---- 4. S_k's limit -------------------------------------------------------------- */

/* n successes at once on this thread's cell (after one real success, which
 * starts the cell: retried if the thread moved CPU in between) */
static void add_successes(circuit_breaker *b, uint32_t n)
{
    for (int i = 0; i < 1000; i++) {
        call(b, 0);
        int rc = circuit_test_add_successes(b, n);
        if (rc == 0)
            return;
        if (rc != EAGAIN) {
            fprintf(stderr, "FAIL: circuit_test_add_successes: %d\n", rc);
            exit(1);
        }
    }
    fprintf(stderr, "FAIL: circuit_test_add_successes kept saying EAGAIN\n");
    exit(1);
}

static void expect_counts(circuit_breaker *b, const char *when, int64_t s, int64_t f, int64_t cs,
                          int64_t cf)
{
    circuit_stats st;
    circuit_get_stats(b, &st);
    RACE_CHECK(st.state == CIRCUIT_CLOSED && st.counts.successes == s && st.counts.failures == f &&
              st.counts.consecutive_successes == cs && st.counts.consecutive_failures == cf,
          "%s: %s, successes %" PRId64 " failures %" PRId64 " runs %" PRId64 "/%" PRId64
          " (want %" PRId64 " %" PRId64 " %" PRId64 "/%" PRId64 ")",
          when, circuit_state_name(st.state), st.counts.successes, st.counts.failures,
          st.counts.consecutive_successes, st.counts.consecutive_failures, s, f, cs, cf);
}

static void s_limit(void)
{
    trip_run = 0; /* never trips */
    const uint32_t lim = (uint32_t)CIRCUIT__D_S_MAX;
    for (int side = 0; side < 2; side++) {
        circuit_breaker *b = build(64);
        /* 1 + n successes then a failure: S = lim - 1 (a point), or lim + 1
         * (over: the failure ends the epoch instead) */
        uint32_t n = side == 0 ? lim - 2u : lim;
        add_successes(b, n);
        call(b, 1);
        expect_counts(b, side ? "S over its limit" : "S at its limit", 63, 1, 0, 1);
        for (int i = 0; i < 3; i++)
            call(b, 0);
        expect_counts(b, "then 3 successes", 63, 1, 3, 0);
        /* and again from there: the next points' S is read against this
         * point's S_k (0 after the fold) */
        add_successes(b, n);
        call(b, 1);
        call(b, 0);
        expect_counts(b, "a second round", 63, 1, 1, 0);
        circuit_free(b);
    }
    printf("C1/C4: counts exact on both sides of S_k's limit (2^29 - 1)\n");
}

static int descriptors_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    setvbuf(stdout, NULL, _IOLBF, 0);
    sem_init(&parked, 0, 0);
    sem_init(&go, 0, 0);
    circuit_test_clock_set(0);
    encoding();
    encoding_aborts();
    circuit_test_set_hook(hook, NULL);
    reset_across_closed_states();
    failure_across_points();
    circuit_test_set_hook(NULL, NULL);
    s_limit();
    printf("%ld failed checks\n", race_failures());
    return race_failures() ? 1 : 0;
}

static const race_case cases[] = {
    {"descriptors", descriptors_main, ""},
};

int main(int argc, char **argv)
{
    return race_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
