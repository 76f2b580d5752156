/*
 * T6 / C1 / P1 / S4: what a half-open state leaves behind is tagged with
 * the generation's low 30 bits, which come back after 2^30 transitions (an
 * operator isolate/reset loop reaches that in minutes). A later half-open
 * state with the same tag must not read it as its own:
 *   1. C1: a failure record its window left: the new state's window
 *      [F, S] must count 1 failure, not 0 (the old record made the append
 *      of seq 0 look done, and the eviction of seq 0 then took the new
 *      success for the old failure).
 *   2. P1 / S4: a probe slot left busy (its ticket released after its
 *      timeout fell due): the new state's first probe must get a fresh
 *      reservation (due a whole probe_timeout later), so that a second
 *      allow at the same instant is rejected with probes = 1 and no
 *      timeout is counted.
 * The 2^30 transitions are skipped with circuit_test_skip_generations (a
 * run of 2^29 isolate/reset cycles: about 220 s each).
 * A plain program (runs in every build, TSan included).
 *
 *   test_t6_c1_p1_halfopen_tags     exit 0: pass, 1: a check failed
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "circuit.h"
#include "testing.h"

static int failures;
#define CHECK(cond, ...)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                             \
            fprintf(stderr, __VA_ARGS__);                                                    \
            fputc('\n', stderr);                                                             \
            failures++;                                                                      \
        }                                                                                    \
    } while (0)

#define TAG_MASK ((UINT64_C(1) << 30) - 1)

static bool trip(void *a, const circuit_counts *c)
{
    (void)a;
    (void)c;
    return true;
}
static circuit_state keep_probing(void *a, const circuit_counts *c)
{
    (void)a;
    (void)c;
    return CIRCUIT_HALF_OPEN;
}
static circuit_outcome classify(void *a, void *ctx, int r)
{
    (void)a;
    (void)ctx;
    return r ? CIRCUIT_FAILURE : CIRCUIT_SUCCESS;
}

static circuit_breaker *build(int window, int probes, int64_t probe_to)
{
    circuit_spec sp = {0};
    sp.config = (circuit_config){window, probes, 10, probe_to};
    sp.policy.trip = trip;
    sp.policy.probe = keep_probing;
    sp.classify = classify;
    circuit_breaker *b = NULL;
    if (circuit_new(&b, &sp, NULL, 0) != 0) {
        fprintf(stderr, "circuit_new failed\n");
        exit(1);
    }
    return b;
}

static void call(circuit_breaker *b, int result)
{
    circuit_ticket t;
    circuit_rejection rej;
    if (!circuit_allow(b, NULL, &t, &rej)) {
        fprintf(stderr, "FAIL: rejected (%s)\n", circuit_state_name(rej.state));
        exit(1);
    }
    circuit_done(&t, result);
}

static uint64_t generation(circuit_breaker *b)
{
    circuit_stats st;
    circuit_get_stats(b, &st);
    return st.generation;
}

/* From isolated: skip generations so that reset, trip and the end of the
 * open period make a half-open state whose tag is old_half_open's (or, with
 * alias false, one less: the control run). */
static void skip_to_alias(circuit_breaker *b, uint64_t old_half_open, bool alias)
{
    uint64_t gi = generation(b); /* isolated */
    uint64_t target = old_half_open + (alias ? 0 : 1);
    uint64_t n = ((target - 3 - gi) & TAG_MASK) + (UINT64_C(1) << 30);
    int rc = circuit_test_skip_generations(b, n);
    CHECK(rc == 0, "circuit_test_skip_generations: %d", rc);
}

/* 1. C1: the window's failure record */
static void window_record(bool alias)
{
    circuit_breaker *b = build(2, 4, INT64_C(1) << 60);
    circuit_test_clock_set(1000);
    call(b, 1); /* trips: open */
    circuit_test_clock_advance(10);
    call(b, 1); /* half-open; a failure at seq 0, kept probing */
    uint64_t g_old = generation(b);
    CHECK(circuit_isolate(b, NULL) == 0, "isolate");
    skip_to_alias(b, g_old, alias);
    CHECK(circuit_reset(b, NULL) == 0, "reset");
    call(b, 1); /* trips */
    circuit_test_clock_advance(10);
    call(b, 0); /* half-open: seq 0 success */
    call(b, 1); /* seq 1 failure */
    call(b, 0); /* seq 2 success, evicts seq 0 */
    circuit_stats st;
    circuit_get_stats(b, &st);
    CHECK(st.state == CIRCUIT_HALF_OPEN && (st.generation & TAG_MASK) == ((g_old + !alias) & TAG_MASK),
          "half-open at generation %" PRIu64 " (tag %" PRIu64 "), the old one %" PRIu64,
          st.generation, st.generation & TAG_MASK, g_old);
    CHECK(st.counts.successes == 1 && st.counts.failures == 1 &&
              st.counts.consecutive_successes == 1,
          "%s: the window [F, S] counts successes %" PRId64 " failures %" PRId64
          " (C1: 1 and 1)",
          alias ? "same tag as an older half-open state" : "control", st.counts.successes,
          st.counts.failures);
    circuit_free(b);
}

/* 2. P1 / S4: a probe slot left busy */
static void probe_slot(bool alias)
{
    circuit_breaker *b = build(2, 1, 1000);
    circuit_test_clock_set(1000);
    call(b, 1); /* trips: open */
    circuit_test_clock_advance(10);
    circuit_ticket t, u;
    CHECK(circuit_allow(b, NULL, &t, NULL), "the first half-open state's probe");
    uint64_t g_old = generation(b);
    CHECK(circuit_isolate(b, NULL) == 0, "isolate");
    circuit_test_clock_advance(2000);
    circuit_release(&t); /* after its due time: the slot stays busy */
    skip_to_alias(b, g_old, alias);
    CHECK(circuit_reset(b, NULL) == 0, "reset");
    call(b, 1); /* trips */
    circuit_test_clock_advance(10);
    circuit_rejection rej = {CIRCUIT_CLOSED, -1};
    CHECK(circuit_allow(b, NULL, &t, NULL), "the new half-open state's first probe");
    bool second = circuit_allow(b, NULL, &u, &rej);
    circuit_stats st;
    circuit_get_stats(b, &st);
    CHECK(st.state == CIRCUIT_HALF_OPEN && (st.generation & TAG_MASK) == ((g_old + !alias) & TAG_MASK),
          "half-open at generation %" PRIu64 ", the old one %" PRIu64, st.generation, g_old);
    CHECK(!second && rej.state == CIRCUIT_HALF_OPEN,
          "%s: a second allow at the same instant was %s (S4, probes = 1: rejected)",
          alias ? "same tag as an older half-open state" : "control",
          second ? "admitted" : "rejected");
    CHECK(st.counts.timed_out == 0 && st.probes_in_flight == 1,
          "%s: timed_out %" PRId64 ", probes in flight %" PRId64 " (P1: 0 and 1)",
          alias ? "same tag" : "control", st.counts.timed_out, st.probes_in_flight);
    if (second)
        circuit_release(&u);
    circuit_test_clock_advance(999); /* one ns before its due time */
    CHECK(circuit_done(&t, 0), "the probe's success counts");
    circuit_free(b);
}

/* 3. S4 / P1 with two probes: slot 1 and the bitmap's bit 1 left busy
 * too. The new state must admit exactly two probes (its bit 1 is not the
 * old one) and count no timeout of the old probes. */
static void two_slots(bool alias)
{
    circuit_breaker *b = build(2, 2, 1000);
    circuit_test_clock_set(1000);
    call(b, 1); /* trips: open */
    circuit_test_clock_advance(10);
    circuit_ticket t[3];
    CHECK(circuit_allow(b, NULL, &t[0], NULL) && circuit_allow(b, NULL, &t[1], NULL),
          "the first half-open state's two probes");
    uint64_t g_old = generation(b);
    CHECK(circuit_isolate(b, NULL) == 0, "isolate");
    circuit_test_clock_advance(2000);
    circuit_release(&t[0]);
    circuit_release(&t[1]); /* after their due time: both slots stay busy */
    skip_to_alias(b, g_old, alias);
    CHECK(circuit_reset(b, NULL) == 0, "reset");
    call(b, 1); /* trips */
    circuit_test_clock_advance(10);
    bool a0 = circuit_allow(b, NULL, &t[0], NULL);
    bool a1 = circuit_allow(b, NULL, &t[1], NULL);
    circuit_rejection rej = {CIRCUIT_CLOSED, -1};
    bool a2 = circuit_allow(b, NULL, &t[2], &rej);
    circuit_stats st;
    circuit_get_stats(b, &st);
    CHECK(a0 && a1 && !a2 && rej.state == CIRCUIT_HALF_OPEN,
          "%s: probes = 2 admitted %d %d %d (S4: two, then rejected)",
          alias ? "same tag as an older half-open state" : "control", a0, a1, a2);
    CHECK(st.counts.timed_out == 0 && st.probes_in_flight == 2,
          "%s: timed_out %" PRId64 ", probes in flight %" PRId64 " (P1: 0 and 2)",
          alias ? "same tag" : "control", st.counts.timed_out, st.probes_in_flight);
    circuit_test_clock_advance(500);
    circuit_get_stats(b, &st);
    CHECK(st.counts.timed_out == 0, "no timeout before the probes' due time (P1)");
    for (int i = 0; i < 3; i++)
        if ((i == 0 && a0) || (i == 1 && a1) || (i == 2 && a2))
            circuit_release(&t[i]);
    circuit_free(b);
}

/* 4. S4 / P1: the older state's slot-0 probe finished normally, so its
 * bitmap word 0 is {its tag, bit 0 clear}. The new state's reservation
 * must set bit 0 (left clear, the next allow took
 * slot 0 again, P + 1 probes in flight and the first probe's timeout
 * lost). */
static void slot0_bit_clear(bool alias, int probes)
{
    circuit_breaker *b = build(2, probes, 1000);
    circuit_test_clock_set(1000);
    call(b, 1); /* trips: open */
    circuit_test_clock_advance(10);
    call(b, 0); /* half-open: a probe's success frees slot 0, kept probing */
    uint64_t g_old = generation(b);
    CHECK(circuit_isolate(b, NULL) == 0, "isolate");
    skip_to_alias(b, g_old, alias);
    CHECK(circuit_reset(b, NULL) == 0, "reset");
    call(b, 1); /* trips */
    circuit_test_clock_advance(10);
    circuit_ticket t[72];
    int admitted = 0;
    for (int i = 0; i < probes + 1; i++)
        if (circuit_allow(b, NULL, &t[admitted], NULL))
            admitted++;
    circuit_stats st;
    circuit_get_stats(b, &st);
    CHECK(admitted == probes && st.probes_in_flight == probes,
          "%s, probes = %d: %d admitted at one instant, %" PRId64 " in flight (S4: %d)",
          alias ? "same tag as an older half-open state" : "control", probes, admitted,
          st.probes_in_flight, probes);
    circuit_test_clock_advance(1000); /* every probe's due time */
    circuit_ticket u;
    bool more = circuit_allow(b, NULL, &u, NULL);
    circuit_get_stats(b, &st);
    CHECK(st.counts.timed_out == admitted,
          "%s, probes = %d: timed_out %" PRId64 " at the due time (P1: %d)",
          alias ? "same tag" : "control", probes, st.counts.timed_out, admitted);
    if (more)
        circuit_release(&u);
    for (int i = 0; i < admitted; i++)
        circuit_release(&t[i]);
    circuit_free(b);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int alias = 0; alias < 2; alias++) {
        window_record(alias);
        probe_slot(alias);
        two_slots(alias);
        static const int ps[] = {1, 2, 33, 70};
        for (int i = 0; i < 4; i++)
            slot0_bit_clear(alias, ps[i]);
    }
    printf("C1: a half-open window never reads an older state's failure record as its own\n");
    printf("P1/S4: a half-open state's first probe slot is never an older state's\n");
    printf("test_t6_c1_p1_halfopen_tags: %s (%d failed checks)\n", failures ? "FAILED" : "passed",
           failures);
    return failures ? 1 : 0;
}
