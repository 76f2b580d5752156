/*
 * P1 race check: a probe timeout that fell due is counted (timed_out
 * grows, the probe policy is asked) whichever call notices it, while other
 * threads admit new probes in the same half-open state, settle probes with
 * circuit_done or circuit_release (some before their due time, some after)
 * and move the test clock.
 *
 * The probe policy always answers "go on probing", so after the first trip
 * the breaker stays half-open in one generation and every probe ends in
 * exactly one way: settled before its due time (no timeout) or timed out
 * (once). A sequential account bounds the timeouts from the clock readings
 * each thread takes around its own calls:
 *   - a probe settled by a call that started at or after
 *     (clock after its admission) + probe_timeout was certainly due before
 *     that call: it MUST be counted;
 *   - a probe whose settling call returned before
 *     (clock before its admission) + probe_timeout cannot have been due
 *     while it was held: it must NOT be counted.
 * At the end (every probe settled, the clock moved past every due time and
 * one more allow made): lower <= timed_out <= upper, timed_out of the
 * state's counts equals the total, the probe policy was asked at least once
 * per timeout, at most `probes` probes were ever in flight at once
 * (counted by the threads), and generation and transitions are 2.
 *
 * A plain program (no Criterion, which cannot start under TSan): it runs in
 * the TSan build too. Seeds vary the interleavings; more threads than CPUs.
 *
 *   test_p1_timeout_race [rounds [seed]]     exit 0: pass, 1: broken
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "circuit.h"
#include "testing.h"

#define LOAD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define ADD(p, v) __atomic_add_fetch((p), (v), __ATOMIC_SEQ_CST)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)

#if defined(__SANITIZE_THREAD__)
#define SLOW_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SLOW_BUILD 1
#endif
#endif
#ifdef SLOW_BUILD
static long rounds = 40;
#else
static long rounds = 200;
#endif

enum { THREADS = 4, OPS = 400, HOLD = 2 };
static int64_t PT = 1000; /* probe_timeout_ns */
static bool real_clock;

typedef struct held {
    circuit_ticket t;
    int64_t adm_before, adm_after;
    bool live;
} held;

typedef struct round_state {
    circuit_breaker *b;
    int probes;
    uint64_t lower, upper, probe_asks, admitted;
    int64_t in_flight, most_in_flight;
    int64_t violations;
} round_state;

static round_state rs;

static bool trip_at_once(void *arg, const circuit_counts *c)
{
    (void)arg;
    (void)c;
    return true;
}
static circuit_state keep_probing(void *arg, const circuit_counts *c)
{
    (void)arg;
    (void)c;
    ADD(&rs.probe_asks, 1);
    return CIRCUIT_HALF_OPEN;
}
static circuit_outcome classify(void *arg, void *ctx, int result)
{
    (void)arg;
    (void)ctx;
    return result ? CIRCUIT_FAILURE : CIRCUIT_SUCCESS;
}
static void observe(void *arg, void *ctx, const circuit_transition *t)
{
    (void)arg;
    (void)ctx;
    (void)t;
}

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void settle(held *h, bool done, bool fail)
{
    int64_t before = circuit_test_clock_now();
    /* the thread's own count of probes held: down before the call frees
     * the slot, so a new admission never sees it too high */
    ADD(&rs.in_flight, -1);
    if (done)
        circuit_done(&h->t, fail ? 1 : 0);
    else
        circuit_release(&h->t);
    int64_t after = circuit_test_clock_now();
    if (before >= h->adm_after + PT)
        ADD(&rs.lower, 1); /* certainly due before the settling call */
    if (after >= h->adm_before + PT)
        ADD(&rs.upper, 1); /* may have been due while held */
    h->live = false;
}

static void *worker(void *arg)
{
    uint64_t rng = (uint64_t)(uintptr_t)arg;
    held h[HOLD] = {0};
    for (int op = 0; op < OPS; op++) {
        uint64_t r = xorshift(&rng);
        switch (r % 8) {
        case 0:
        case 1:
            if (real_clock) {
                int64_t until = circuit_test_clock_now() + (int64_t)(r >> 8) % (PT / 2);
                while (circuit_test_clock_now() < until)
                    ;
            } else {
                circuit_test_clock_advance((int64_t)(r >> 8) % (PT / 2));
            }
            break;
        case 2:
        case 3:
        case 4: {
            int k = (int)((r >> 8) % HOLD);
            if (h[k].live)
                break;
            int64_t before = circuit_test_clock_now();
            if (circuit_allow(rs.b, NULL, &h[k].t, NULL)) {
                int64_t n = ADD(&rs.in_flight, 1);
                int64_t most = LOAD(&rs.most_in_flight);
                while (n > most && !__atomic_compare_exchange_n(&rs.most_in_flight, &most, n,
                                                                false, __ATOMIC_SEQ_CST,
                                                                __ATOMIC_SEQ_CST))
                    ;
                ADD(&rs.admitted, 1);
                h[k].adm_before = before;
                h[k].adm_after = circuit_test_clock_now();
                h[k].live = true;
            }
            break;
        }
        default: {
            int k = (int)((r >> 8) % HOLD);
            if (h[k].live)
                settle(&h[k], (r >> 20) % 3 != 0, (r >> 24) & 1);
            break;
        }
        }
    }
    for (int k = 0; k < HOLD; k++)
        if (h[k].live)
            settle(&h[k], true, false);
    return NULL;
}

static void fail_round(long round, uint64_t seed, const char *what, long long a, long long b_,
                       long long c)
{
    fprintf(stderr, "test_p1_timeout_race: round %ld (seed %llu, probes %d): %s: %lld %lld %lld\n",
            round, (unsigned long long)seed, rs.probes, what, a, b_, c);
    rs.violations++;
}

static int run_round(long round, uint64_t seed)
{
    rs = (round_state){0};
    rs.probes = 1 + (int)(seed % 3);
    if (!real_clock)
        circuit_test_clock_set(1000000000);
    circuit_spec spec = {
        .config = {.window = 4, .probes = rs.probes, .open_for_ns = 10,
                   .probe_timeout_ns = PT},
        .policy = {.trip = trip_at_once, .probe = keep_probing},
        .classify = classify,
        .observe = observe,
    };
    char err[256];
    if (circuit_new(&rs.b, &spec, err, sizeof err) != 0) {
        fprintf(stderr, "test_p1_timeout_race: circuit_new: %s\n", err);
        return 1;
    }
    /* trip (generation 1), then half-open (2) for the rest of the round */
    circuit_ticket t;
    circuit_allow(rs.b, NULL, &t, NULL);
    circuit_done(&t, 1);
    if (real_clock) {
        int64_t until = circuit_test_clock_now() + 10;
        while (circuit_test_clock_now() < until)
            ;
    } else {
        circuit_test_clock_advance(10);
    }
    circuit_allow(rs.b, NULL, &t, NULL);
    circuit_release(&t);

    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, worker,
                       (void *)(uintptr_t)(seed * 0x9e3779b97f4a7c15u + (uint64_t)i + 1));
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    /* past every due time; one more call notices what fell due */
    if (real_clock) {
        int64_t until = circuit_test_clock_now() + 2 * PT;
        while (circuit_test_clock_now() < until)
            ;
    } else {
        circuit_test_clock_advance(2 * PT);
    }
    if (circuit_allow(rs.b, NULL, &t, NULL))
        circuit_done(&t, 0); /* frees its slot even if it is due by now */

    circuit_stats s;
    circuit_get_stats(rs.b, &s);
    if (s.generation != 2 || s.transitions != 2 || s.state != CIRCUIT_HALF_OPEN)
        fail_round(round, seed, "generation, transitions, state", (long long)s.generation,
                   (long long)s.transitions, (long long)s.state);
    if (s.timed_out < rs.lower)
        fail_round(round, seed, "timeouts lost: counted, certainly due, may be due",
                   (long long)s.timed_out, (long long)rs.lower, (long long)rs.upper);
    if (s.timed_out > rs.upper)
        fail_round(round, seed, "timeouts invented: counted, certainly due, may be due",
                   (long long)s.timed_out, (long long)rs.lower, (long long)rs.upper);
    if ((uint64_t)s.counts.timed_out != s.timed_out)
        fail_round(round, seed, "counts.timed_out vs the total", (long long)s.counts.timed_out,
                   (long long)s.timed_out, 0);
    if (rs.probe_asks < s.timed_out)
        fail_round(round, seed, "probe policy asked fewer times than timeouts counted",
                   (long long)rs.probe_asks, (long long)s.timed_out, 0);
    if (s.probes_in_flight != 0) {
        circuit_rejection rej = {0, 0};
        bool again = circuit_allow(rs.b, NULL, &t, &rej);
        if (again)
            circuit_done(&t, 0);
        circuit_stats s2;
        circuit_get_stats(rs.b, &s2);
        fail_round(round, seed, "slots still held at the end (then: admitted, held, timed out)",
                   (long long)again, (long long)s2.probes_in_flight, (long long)s2.timed_out);
    }
    circuit_free(rs.b);
    return rs.violations ? 1 : 0;
}

int main(int argc, char **argv)
{
    uint64_t seed0 = 1;
    if (argc > 1)
        rounds = strtol(argv[1], NULL, 10);
    if (argc > 2)
        seed0 = strtoull(argv[2], NULL, 10);
    if (argc > 3 && argv[3][0] == 'r') {
        real_clock = true;
        PT = 20000;
        circuit_test_clock_use_real(true);
    }
    long failed = 0;
    uint64_t timeouts = 0;
    for (long r = 0; r < rounds; r++) {
        failed += run_round(r, seed0 + (uint64_t)r);
    }
    (void)timeouts;
    printf("test_p1_timeout_race: %ld rounds of %d threads x %d operations: %ld failed\n", rounds,
           THREADS, OPS, failed);
    return failed ? 1 : 0;
}
