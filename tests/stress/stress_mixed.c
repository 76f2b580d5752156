/*
 * stress-mixed: N threads x mixed operations on ONE breaker
 * (O1-O3, O6, C1-C3, S3-S5, T1-T3, T6).
 *
 * SPDX-License-Identifier: MIT
 *
 * Usage: stress_mixed [threads] [ops-per-thread] [seed] [--clock=test|real|both]
 *                     [--handoff] [--only=NAME]
 *
 * Each configuration below is one run on a fresh breaker: every thread makes
 * `ops` random operations (allow; done with a success, failure or ignored
 * result; release; done then release; get_state; a step of the clock), holding
 * up to 4 tickets at once. The policies trip and close often.
 *   --clock=test  variant B: the settable test clock, advanced by the threads
 *                 themselves (circuit_test_clock_advance), open_for 20 us;
 *   --clock=real  variant A: CLOCK_MONOTONIC (circuit_test_clock_use_real),
 *                 open_for 200 us, probe_timeout 60-100 us;
 *   --handoff     odd threads settle tickets that another thread allowed:
 *                 tickets go through a mutex-protected queue in the test.
 * The invariants are listed in stress.h and argued in stress.c.
 *
 * Exit: 0 every run passed; 1 a violation (printed, with config and seed).
 * CIRCUIT_STRESS_SCALE multiplies ops.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stress.h"

#define US INT64_C(1000)

static const stress_config configs[] = {
    /* variant B: the test clock, moved by the threads */
    {"test p1 w1 no-timeout", 1, 1, 20 * US, STRESS_NO_TIMEOUT, false, true, 2 * US, false, 30, 10, false, 0, 0, false},
    {"test p3 w4 timeouts", 4, 3, 20 * US, 30 * US, false, true, 2 * US, false, 30, 10, false, 0, 0, false},
    {"test p64 w65536 no-timeout", 65536, 64, 20 * US, STRESS_NO_TIMEOUT, false, true, 2 * US, false, 25, 10, false, 0, 0, false},
    {"test p1 w65536 timeouts nested", 65536, 1, 20 * US, 15 * US, false, true, 2 * US, true, 30, 10, false, 0, 0, false},
    {"test p3 w1 no-timeout nested", 1, 3, 20 * US, STRESS_NO_TIMEOUT, false, true, 2 * US, true, 30, 10, false, 0, 0, false},
    {"test p64 w4 timeouts", 4, 64, 20 * US, 25 * US, false, true, 2 * US, false, 30, 5, false, 0, 0, false},
    /* variant A: the real clock */
    {"real p1 w4", 4, 1, 200 * US, 100 * US, true, false, 0, false, 30, 10, false, 0, 0, false},
    {"real p3 w1 nested", 1, 3, 200 * US, 60 * US, true, false, 0, true, 30, 10, false, 0, 0, false},
    {"real p64 w65536", 65536, 64, 200 * US, 80 * US, true, false, 0, false, 25, 10, false, 0, 0, false},
    /* healthy: mostly successes, so the per-CPU fast mode (L6) is entered
     * and folded all the time, racing stats reads and operator calls */
    {"test p3 w8 healthy operator", 8, 3, 20 * US, 30 * US, false, true, 2 * US, true, 2, 3, false, 4, 0, false},
    {"test p1 w1 healthy", 1, 1, 20 * US, STRESS_NO_TIMEOUT, false, true, 2 * US, false, 3, 2, false, 0, 0, false},
    {"real p2 w64 healthy operator", 64, 2, 200 * US, 80 * US, true, false, 0, false, 1, 2, false, 2, 0, false},
    {"test p64 w4 operator", 4, 64, 20 * US, 25 * US, false, true, 2 * US, false, 30, 5, false, 6, 0, false},
    /* stats readers racing isolate/reset and timeouts: every snapshot's
     * generation and state checked against the transitions (M1), every
     * generation's timeouts against the probes certainly due (P1) */
    {"test p3 w4 timeouts stats operator", 4, 3, 4 * US, 6 * US, false, true, 2 * US, false, 30, 10, false, 1, 30, true},
    {"real p1 w4 stats operator", 4, 1, 40 * US, 30 * US, true, false, 0, false, 30, 10, false, 1, 30, true},
    /* the closed window's bitmap over several words (64 slots each, the
     * last one partial): exact points whose new slots cross words and wrap,
     * racing stats readers (which apply the newest point's update to their
     * own copy); w130: few failures and no operator, so that windows fill
     * and evict before a trip (6 failures in the window trip); w200:
     * isolate/reset as well (re-entry empties every word) */
    {"test p3 w130 stats", 130, 3, 4 * US, 6 * US, false, true, 2 * US, false, 2, 5, false, 0, 30, false},
    {"real p2 w200 healthy stats operator", 200, 2, 200 * US, 80 * US, true, false, 0, false, 1, 2, false, 1, 20, false},
};

int main(int argc, char **argv)
{
    stress_args a;
    int fl;
    stress_parse(argc, argv, 4, 20000, &a, &fl);
    const char *clock = "both", *only = NULL;
    bool handoff = false;
    for (int i = fl; i < argc; i++) {
        if (!strncmp(argv[i], "--clock=", 8))
            clock = argv[i] + 8;
        else if (!strcmp(argv[i], "--handoff"))
            handoff = true;
        else if (!strncmp(argv[i], "--only=", 7))
            only = argv[i] + 7;
        else
            stress_die("unknown flag %s", argv[i]);
    }
    if (strcmp(clock, "test") && strcmp(clock, "real") && strcmp(clock, "both"))
        stress_die("--clock=test|real|both");
    if (handoff && a.threads < 4)
        stress_die("--handoff needs at least 4 threads (2 hand-off threads)");

    const char *prog = handoff ? "stress-handoff" : "stress-mixed";
    printf("%s: %d threads x %ld ops, seed %llu, clock %s\n", prog, a.threads, a.ops,
           (unsigned long long)a.seed, clock);
    int passed = 0, failed = 0;
    long total = 0;
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        stress_config c = configs[i];
        if (strcmp(clock, "both") && strcmp(clock, c.real_clock ? "real" : "test"))
            continue;
        if (only && !strstr(c.name, only))
            continue;
        c.handoff = handoff;
        stress_begin(&c, &a);
        stress_team team;
        stress_team_start(&team, a.threads, a.ops, a.seed + i, NULL);
        stress_team_join(&team, INT64_C(240000000000));
        for (int k = 0; k < team.n; k++)
            total += atomic_load(&team.w[k].ops);
        if (handoff)
            stress_drain_queue();
        if (stress_end())
            passed++;
        else
            failed++;
        stress_team_free(&team); /* after the end: call contexts live in it */
    }
    if (passed + failed == 0)
        stress_die("no configuration selected");
    return stress_summary(prog, total, a.threads, a.seed, passed, failed);
}
