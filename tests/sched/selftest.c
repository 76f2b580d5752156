/*
 * sched_selftest: the scheduler checked on toys whose answers are known.
 *   1. a counter bumped by load + store from 2 threads (a lost update): every
 *      strategy must catch it, and the failing run's schedule must replay to
 *      the same schedule and the same failure;
 *   2. its correct twin (one atomic add per bump): passes every schedule that
 *      DFS enumerates with at most 2 preemptions (and their number is the
 *      known count for 2 threads x 2 steps), and random/PCT runs;
 *   3. V5: a thread that spins until another moves a flag is a livelock when
 *      the other is stopped (DFS finds it: its default runs a thread alone);
 *   4. DIE: a thread that dies holding a toy lock leaves the other spinning:
 *      reported as a livelock.
 * Coverage (distinct schedules, switch points per run) is printed.
 * Exit 0 when every check holds, 1 otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler.h"

static int failures;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("selftest FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static long counter;
static long flag;
static int lock_word;

static long ld(long *p)
{
    sched_point(0, p);
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}
static void st(long *p, long v)
{
    sched_point(0, p);
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
}
static void add(long *p, long v)
{
    sched_point(0, p);
    __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

static int bumps = 2;
static void racy(void *arg, int tid)
{
    (void)arg;
    (void)tid;
    for (int i = 0; i < bumps; i++) {
        sched_op_begin();
        long v = ld(&counter);
        st(&counter, v + 1);
        sched_op_end();
    }
}
static char trace[16];
static int trace_len;
static void atomic_twin(void *arg, int tid)
{
    (void)arg;
    for (int i = 0; i < bumps; i++) {
        sched_op_begin();
        add(&counter, 1);
        trace[trace_len++] = (char)('a' + tid);
        sched_op_end();
    }
}
static void check_counter(void *arg)
{
    (void)arg;
    /* the check runs at every switch point too: only the end is judged */
}

static void spin_waiter(void *arg, int tid)
{
    (void)arg;
    if (tid == 0) {
        sched_op_begin();
        while (ld(&flag) == 0)
            ;
        sched_op_end();
    } else {
        st(&flag, 1);
    }
}

static void toy_lock(void *arg, int tid)
{
    (void)arg;
    (void)tid;
    sched_op_begin();
    for (;;) {
        sched_point(0, &lock_word);
        int z = 0;
        if (__atomic_compare_exchange_n(&lock_word, &z, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            break;
    }
    add(&counter, 1);
    sched_point(0, &lock_word);
    __atomic_store_n(&lock_word, 0, __ATOMIC_RELEASE);
    sched_op_end();
}

static sched_opts base(sched_strategy s, uint64_t seed)
{
    sched_opts o = {.strategy = s, .seed = seed, .pct_depth = 2, .pct_steps = 8, .max_preemptions = 2,
                    .solo_bound = 1000};
    return o;
}

static sched_result r;

/* Runs until a lost update or the budget; returns the run index or -1. */
static long hunt(sched_strategy s, sched_body_fn fn, long budget, long *distinct, char *sched_out,
                 uint64_t *seed_out)
{
    sched_opts o = base(s, 1);
    if (s == SCHED_DFS)
        sched_dfs_reset();
    static char seen[4096][64];
    memset(seen, 0, sizeof seen);
    long nseen = 0;
    for (long i = 0; i < budget; i++) {
        o.seed = 1000 + (uint64_t)i;
        counter = 0;
        trace_len = 0;
        sched_run(&o, 2, fn, NULL, check_counter, &r);
        int j;
        for (j = 0; j < nseen; j++)
            if (!strncmp(seen[j], r.schedule, 63))
                break;
        if (j == nseen && nseen < 4096)
            memcpy(seen[nseen++], r.schedule, 63);
        if (counter != 2L * bumps) {
            *distinct = nseen;
            if (sched_out)
                strcpy(sched_out, r.schedule);
            if (seed_out)
                *seed_out = o.seed;
            return i + 1;
        }
        if (s == SCHED_DFS && !sched_dfs_next()) {
            *distinct = nseen;
            return -(i + 1) - 1; /* exhausted: -(runs) - 1 */
        }
    }
    *distinct = nseen;
    return -1;
}

int main(void)
{
    static char bad[65536];
    long distinct;
    uint64_t seed;
    const char *names[] = {"random", "pct", "dfs"};
    sched_strategy ss[] = {SCHED_RANDOM, SCHED_PCT, SCHED_DFS};
    for (int k = 0; k < 3; k++) {
        long at = hunt(ss[k], racy, 2000, &distinct, bad, &seed);
        printf("selftest: racy counter, %-6s: caught after %ld schedules (%ld distinct)\n", names[k], at,
               distinct);
        CHECK(at > 0, "%s did not catch the lost update", names[k]);
        if (at > 0) {
            /* the failing schedule replays to the same schedule and failure */
            sched_opts o = base(SCHED_REPLAY, 0);
            o.replay = bad;
            counter = 0;
            sched_run(&o, 2, racy, NULL, check_counter, &r);
            CHECK(counter != 2L * bumps && strcmp(r.schedule, bad) == 0 && r.verdict == SCHED_OK,
                  "replay of '%s' gave '%s', counter %ld", bad, r.schedule, counter);
            if (k < 2) {
                /* and the seed alone gives the same schedule again */
                o = base(ss[k], seed);
                counter = 0;
                sched_run(&o, 2, racy, NULL, check_counter, &r);
                CHECK(strcmp(r.schedule, bad) == 0, "seed %llu replayed to '%s', not '%s'",
                      (unsigned long long)seed, r.schedule, bad);
            }
        }
    }
    /* the correct twin: DFS enumerates every schedule with <= 2 preemptions */
    long at = hunt(SCHED_DFS, atomic_twin, 100000, &distinct, NULL, NULL);
    printf("selftest: atomic twin, dfs: %s after %ld schedules, %ld distinct\n", at < -1 ? "exhausted" : "FAILED",
           at < -1 ? -at - 1 : at, distinct);
    CHECK(at < -1, "the atomic twin failed or DFS did not end (%ld)", at);
    /* 2 threads x 2 adds: the 6 orders of (a a) and (b b) each need at
     * most 2 preemptions (abab: a->b, b->a; the last switch is free), so
     * DFS with B = 2 must reach all 6 */
    {
        static char orders[64][8];
        int norders = 0;
        sched_opts o = base(SCHED_DFS, 0);
        sched_dfs_reset();
        do {
            counter = 0;
            trace_len = 0;
            sched_run(&o, 2, atomic_twin, NULL, NULL, &r);
            trace[trace_len] = 0;
            int j;
            for (j = 0; j < norders; j++)
                if (!strcmp(orders[j], trace))
                    break;
            if (j == norders && norders < 64)
                strcpy(orders[norders++], trace);
        } while (sched_dfs_next());
        printf("selftest: atomic twin, dfs: %d distinct orders of the 4 adds\n", norders);
        CHECK(norders == 6, "DFS reached %d of the 6 orders", norders);
    }
    for (int k = 0; k < 2; k++) {
        long a2 = hunt(ss[k], atomic_twin, 500, &distinct, NULL, NULL);
        printf("selftest: atomic twin, %-6s: %s, %ld distinct of 500 runs\n", names[k], a2 == -1 ? "ok" : "FAILED",
               distinct);
        CHECK(a2 == -1, "%s: the atomic twin failed", names[k]);
    }
    /* V5: a spin-wait with the other thread stopped */
    {
        sched_opts o = base(SCHED_DFS, 0);
        sched_dfs_reset();
        flag = 0;
        sched_run(&o, 2, spin_waiter, NULL, NULL, &r);
        printf("selftest: spin-wait, dfs: %s (%s)\n", sched_verdict_name(r.verdict), r.message);
        CHECK(r.verdict == SCHED_LIVELOCK, "the spin-wait was not reported as a livelock");
    }
    /* DIE: the toy lock's holder dies; the other spins */
    {
        sched_opts o = base(SCHED_DFS, 0);
        o.max_deaths = 1;
        sched_dfs_reset();
        bool found = false;
        long runs = 0;
        do {
            lock_word = 0;
            counter = 0;
            sched_run(&o, 2, toy_lock, NULL, NULL, &r);
            runs++;
            if (r.verdict == SCHED_LIVELOCK) {
                found = true;
                break;
            }
        } while (sched_dfs_next() && runs < 10000);
        printf("selftest: toy lock, a holder dies: %s after %ld schedules\n", found ? "livelock reported" : "MISSED",
               runs);
        CHECK(found, "a dead lock holder was not reported");
    }
    printf("selftest: %s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
