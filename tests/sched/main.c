/*
 * circuit-sched: runs the schedule checker's scenarios (docs/CONTRACT.md
 * V1-V5; tests/sched/README.md).
 *
 *   circuit-sched [--scenario NAME|all] [--strategy random|pct|dfs|all]
 *                 [--runs N] [--seconds S] [--seed N] [--depth D]
 *                 [--preemptions B] [--expect-fail] [--schedule STRING]
 *
 * --strategy all runs each strategy in turn with the run and time budget
 * each. --expect-fail (the planted bugs, V4): exit 0 when a run fails (the
 * checker caught the plant), 1 when every run passed. --schedule replays one
 * schedule (the line a failure prints). Prints one summary line per
 * scenario and strategy: runs, distinct schedules, switch points per run,
 * schedules per second, linearization nodes.
 *
 * Exit: 0 all runs passed (or, with --expect-fail, one failed); 1 otherwise;
 * 2 usage.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checker.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* distinct schedules: an open-addressing set of 64-bit hashes */
#define SET_BITS 20
static uint64_t *set;
static long set_count;
static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211u;
    return h | 1;
}
static void set_add(uint64_t h)
{
    if (!set)
        set = calloc(1u << SET_BITS, sizeof *set);
    if (set_count > (1 << SET_BITS) * 3 / 4)
        return;
    size_t i = h & ((1u << SET_BITS) - 1);
    while (set[i] && set[i] != h)
        i = (i + 1) & ((1u << SET_BITS) - 1);
    if (!set[i]) {
        set[i] = h;
        set_count++;
    }
}
static void set_clear(void)
{
    if (set)
        memset(set, 0, (sizeof *set) << SET_BITS);
    set_count = 0;
}

static const char *argv0;
static const char *g_plant; /* --plant: the name printed (the program is the plant) */
static const char *plant_name(void) { return g_plant; }

/* Runs one scenario under one strategy; returns the number of failed runs
 * (it stops at the first). */
static long run_one(const scenario *sc, sched_strategy st, const sched_opts *base, long runs, double seconds,
                    bool quiet)
{
    sched_opts o = *base;
    o.strategy = st;
    o.max_ticks = sc->max_ticks;
    o.tick_ns = sc->tick_ns;
    o.max_deaths = sc->max_deaths;
    if (st == SCHED_DFS)
        sched_dfs_reset();
    static sched_result r;
    long done = 0, failed = 0, steps = 0, pmax = 0, lin = 0;
    double t0 = now_s();
    set_clear();
    bool exhausted = false;
    for (;;) {
        if (st == SCHED_RANDOM || st == SCHED_PCT)
            o.seed = base->seed + (uint64_t)done;
        if (st == SCHED_PCT && done > 0 && o.pct_steps < 1)
            o.pct_steps = 100;
        bool ok = checker_run(sc, &o, &r, &lin);
        done++;
        steps += r.steps;
        if (r.steps > pmax)
            pmax = r.steps;
        if (st == SCHED_PCT)
            o.pct_steps = (o.pct_steps * 7 + r.steps) / 8 + 1; /* k: the runs' length so far */
        set_add(fnv(r.schedule));
        if (!ok) {
            failed++;
            printf("FAIL %s %s%s%s run %ld (seed %" PRIu64 "): %s: %s\n", sc->name, sched_strategy_name(st),
                   plant_name() ? " plant " : "", plant_name() ? plant_name() : "", done, o.seed,
                   sched_verdict_name(r.verdict), r.message);
            printf("replay: %s --scenario %s%s%s --schedule '%s'\n", argv0, sc->name,
                   checker_strict_closed_stats ? " --strict-closed-stats" : "",
                   checker_monotone_time ? " --monotone-time" : "", r.schedule);
            break;
        }
        if (st == SCHED_REPLAY)
            break;
        if (st == SCHED_DFS && !sched_dfs_next()) {
            exhausted = true;
            break;
        }
        if (done >= runs || now_s() - t0 > seconds)
            break;
    }
    double dt = now_s() - t0;
    if (!quiet || failed)
        printf("schedule: %-16s %-6s%s%s runs %6ld%s distinct %6ld points/run %5ld (max %5ld) %7.0f sched/s"
               " lin-nodes/run %5.1f %s\n",
               sc->name, sched_strategy_name(st), plant_name() ? " plant " : "", plant_name() ? plant_name() : "",
               done, exhausted ? " (all)" : "", set_count, done ? steps / done : 0, pmax, (double)done / (dt > 0 ? dt : 1),
               done ? (double)lin / (double)done : 0.0, failed ? "CAUGHT/FAILED" : "ok");
    fflush(stdout);
    return failed;
}

static void usage(void)
{
    fprintf(stderr, "usage: %s [--scenario NAME|all] [--strategy random|pct|dfs|all] [--runs N] [--seconds S]\n"
                    "       [--seed N] [--depth D] [--preemptions B] [--expect-fail] [--schedule STRING]\n"
                    "       [--strict-closed-stats] [--monotone-time] [--plant NAME]\n",
            argv0);
    int n;
    const scenario *s = checker_all(&n);
    fprintf(stderr, "scenarios:\n");
    for (int i = 0; i < n; i++)
        fprintf(stderr, "  %-16s %s (%s)\n", s[i].name, s[i].about, s[i].rules);
    exit(2);
}

int main(int argc, char **argv)
{
    argv0 = argv[0];
    const char *scen = "all", *strat = "all", *schedule = NULL;
    long runs = 2000;
    double seconds = 20;
    bool expect_fail = false;
    sched_opts base = {.seed = 1, .pct_depth = 3, .max_preemptions = 2, .tick_p = 0.02, .die_p = 0.01,
                       .solo_bound = 20000};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--scenario") && v)
            scen = argv[++i];
        else if (!strcmp(a, "--strategy") && v)
            strat = argv[++i];
        else if (!strcmp(a, "--runs") && v)
            runs = atol(argv[++i]);
        else if (!strcmp(a, "--seconds") && v)
            seconds = atof(argv[++i]);
        else if (!strcmp(a, "--seed") && v)
            base.seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(a, "--depth") && v)
            base.pct_depth = atoi(argv[++i]);
        else if (!strcmp(a, "--preemptions") && v)
            base.max_preemptions = atoi(argv[++i]);
        else if (!strcmp(a, "--schedule") && v)
            schedule = argv[++i];
        else if (!strcmp(a, "--plant") && v)
            g_plant = argv[++i];
        else if (!strcmp(a, "--strict-closed-stats"))
            checker_strict_closed_stats = true;
        else if (!strcmp(a, "--monotone-time"))
            checker_monotone_time = true;
        else if (!strcmp(a, "--expect-fail"))
            expect_fail = true;
        else
            usage();
    }
    int n;
    const scenario *all = checker_all(&n);
    long failed = 0;
    int matched = 0;
    for (int i = 0; i < n; i++) {
        const scenario *sc = &all[i];
        if (strcmp(scen, "all") != 0 && strcmp(scen, sc->name) != 0)
            continue;
        if (strcmp(scen, "all") == 0 && sc->open_finding)
            continue; /* it shows an open finding: by name only */
        matched++;
        if (schedule) {
            base.replay = schedule;
            failed += run_one(sc, SCHED_REPLAY, &base, 1, 1e9, false);
            continue;
        }
        static const struct {
            const char *name;
            sched_strategy s;
        } strategies[] = {{"pct", SCHED_PCT}, {"random", SCHED_RANDOM}, {"dfs", SCHED_DFS}};
        for (size_t k = 0; k < 3; k++) {
            if (strcmp(strat, "all") != 0 && strcmp(strat, strategies[k].name) != 0)
                continue;
            long f = run_one(sc, strategies[k].s, &base, runs, seconds, false);
            failed += f;
            if (f && expect_fail)
                break; /* caught: the plant's test is done */
        }
        if (failed && expect_fail)
            break;
    }
    if (!matched)
        usage();
    if (expect_fail) {
        printf("%s: %s\n", plant_name() ? plant_name() : "plant", failed ? "caught" : "NOT caught");
        return failed ? 0 : 1;
    }
    printf("circuit-sched: %s\n", failed ? "FAILED" : "all runs passed");
    return failed ? 1 : 0;
}
