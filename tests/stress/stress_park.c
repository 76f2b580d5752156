/*
 * stress-park: progress while one thread is stopped inside the library
 * (L1, O2, O3).
 *
 * SPDX-License-Identifier: MIT
 *
 * Usage: stress_park [threads] [ops-per-thread] [seed] --point=NAME [--rounds=N]
 *   NAME: ALLOW_BEFORE_ADMIT DONE_BEFORE_CAS RELEASE_BEFORE_CAS DELIVERY_WON
 *         AFTER_PUBLISH SLOT_HELD RING_BEFORE_WRITE FAST_BEFORE_COUNT FOLD_SEALED
 *         FOLD_MID_SUM INTENT_MADE OPERATOR_BEFORE_CAS CELL_BEFORE_START
 *         CLOSED_START_BEFORE_DESC CLOSED_START_BEFORE_BITS DESC_BEFORE_CAS
 *         TIMEOUT_BEFORE_CLAIM TIMEOUT_CLAIMED TIMEOUT_TAKEN TIMEOUT_COUNTED
 *         TIMEOUT_FREED (the steps of a probe timeout's claim, P1: the others
 *         finish the parked thread's claim and go on timing probes out)
 *
 * Thread 0 (the victim) runs the standard mix of stress.c; the test hook
 * (circuit_test_set_hook) parks it the k-th time (k random, 1..40; 1..4 at
 * CIRCUIT_STRESS_SCALE=0.1, see MAX_HITS) it passes
 * the chosen point: it spins on an atomic in the TEST's hook, sleeping 50 us
 * a turn. While it is parked, every other thread must complete at least
 * 10 000 more operations (allow, done, release, get_state, clock steps), and
 * among them calls must still be admitted and results counted: admission,
 * counting and time-driven changes go on, whatever the victim holds (a probe
 * slot, the delivery role, a half-written window record, a queued
 * transition). This is done in `--rounds` rounds (default 4), so that the
 * victim is caught in several states; DELIVERY_WON and AFTER_PUBLISH, which
 * allow and done both pass, are caught in any call, in allow (which makes
 * open -> half-open and probe timeouts), in done, and in allow again. A parked deliverer only delays delivery: for
 * DELIVERY_WON the test also checks that no transition is delivered while it
 * is parked (O2: it holds the role) and that the transitions made meanwhile
 * are all delivered, in order, after it resumes; at every other point the
 * others must go on delivering (O3), the victim's own published transition
 * included (AFTER_PUBLISH). Then the victim is resumed,
 * every thread finishes its operations, and every invariant of stress.c is
 * checked (O1-O3, C1-C3, S4, T2, final state).
 *
 * Breaker: test clock moved by the threads, window 4 (RING_BEFORE_WRITE needs
 * a window > 1), probes 1 (a parked probe holds the only slot: the others
 * progress through its timeout), open_for 20 us, probe_timeout 30 us.
 *
 * Exit: 0 pass; 1 an invariant failed, or the others stalled (L1), or the
 * victim never reached the point.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stress.h"

#define US INT64_C(1000)
#define PROGRESS_OPS 10000
/* k, the pass of the point that parks the victim, is drawn from 1..max_hits:
 * MAX_HITS at CIRCUIT_STRESS_SCALE 1 (and above), MAX_HITS x the scale below
 * it, at least 1. The waiting for the k-th pass is most of the run at a rare
 * point: the victim passes a probe-timeout point (TIMEOUT_*) once per some
 * 30 000 to 100 000 operations of each other thread, so 4 rounds at k up to
 * 40 made 25 to 45 million operations (2-3 s natively, 30-70 s under
 * qemu-user at scale 0.1). A smaller k still parks the victim at the point,
 * in a state the run has reached by then; PROGRESS_OPS is not scaled: the
 * parked windows take well under 1 % of the run, even under qemu. */
#define MAX_HITS 40

enum { ARMED, PARKED, RELEASED };

static const struct {
    const char *name;
    circuit_test_point p;
} points[] = {
    {"ALLOW_BEFORE_ADMIT", CIRCUIT_TP_ALLOW_BEFORE_ADMIT},
    {"DONE_BEFORE_CAS", CIRCUIT_TP_DONE_BEFORE_CAS},
    {"RELEASE_BEFORE_CAS", CIRCUIT_TP_RELEASE_BEFORE_CAS},
    {"DELIVERY_WON", CIRCUIT_TP_DELIVERY_WON},
    {"AFTER_PUBLISH", CIRCUIT_TP_AFTER_PUBLISH},
    {"SLOT_HELD", CIRCUIT_TP_SLOT_HELD},
    {"RING_BEFORE_WRITE", CIRCUIT_TP_RING_BEFORE_WRITE},
    {"FAST_BEFORE_COUNT", CIRCUIT_TP_FAST_BEFORE_COUNT},
    {"FOLD_SEALED", CIRCUIT_TP_FOLD_SEALED},
    {"FOLD_MID_SUM", CIRCUIT_TP_FOLD_MID_SUM},
    {"INTENT_MADE", CIRCUIT_TP_INTENT_MADE},
    {"OPERATOR_BEFORE_CAS", CIRCUIT_TP_OPERATOR_BEFORE_CAS},
    {"CELL_BEFORE_START", CIRCUIT_TP_CELL_BEFORE_START},
    {"CLOSED_START_BEFORE_DESC", CIRCUIT_TP_CLOSED_START_BEFORE_DESC},
    {"CLOSED_START_BEFORE_BITS", CIRCUIT_TP_CLOSED_START_BEFORE_BITS},
    {"MIRROR_BEFORE_SET", CIRCUIT_TP_MIRROR_BEFORE_SET},
    {"MIRROR_BEFORE_SHUT", CIRCUIT_TP_MIRROR_BEFORE_SHUT},
    {"INTENT_BEFORE_CAS", CIRCUIT_TP_INTENT_BEFORE_CAS},
    {"TOTALS_STARTED", CIRCUIT_TP_TOTALS_STARTED},
    {"TOTALS_CREDITED", CIRCUIT_TP_TOTALS_CREDITED},
    {"TOTALS_SUBTRACTED", CIRCUIT_TP_TOTALS_SUBTRACTED},
    {"DESC_BEFORE_CAS", CIRCUIT_TP_DESC_BEFORE_CAS},
    {"TIMEOUT_BEFORE_CLAIM", CIRCUIT_TP_TIMEOUT_BEFORE_CLAIM},
    {"TIMEOUT_CLAIMED", CIRCUIT_TP_TIMEOUT_CLAIMED},
    {"TIMEOUT_TAKEN", CIRCUIT_TP_TIMEOUT_TAKEN},
    {"TIMEOUT_COUNTED", CIRCUIT_TP_TIMEOUT_COUNTED},
    {"TIMEOUT_FREED", CIRCUIT_TP_TIMEOUT_FREED},
};

static circuit_test_point target;
static atomic_int park_state = ARMED;
static atomic_int hits_left;
static int max_hits = MAX_HITS;
static atomic_int phase_released; /* 1 once the victim has been resumed */
static atomic_int only_in;        /* park only inside this call (IN_*), IN_NONE: any */
static _Thread_local stress_worker *tls_victim;

static void hook(circuit_test_point p, void *arg)
{
    (void)arg;
    if (!tls_victim || p != target || atomic_load(&park_state) != ARMED)
        return;
    int want = atomic_load(&only_in);
    if (want != IN_NONE && atomic_load_explicit(&tls_victim->in_call, memory_order_relaxed) != want)
        return;
    if (atomic_fetch_sub(&hits_left, 1) > 1)
        return;
    atomic_store(&park_state, PARKED);
    while (atomic_load(&park_state) == PARKED)
        stress_sleep_ns(50 * US);
}

static void *worker(void *arg)
{
    stress_worker *w = arg;
    stress_thread_init(w->idx);
    tls_victim = w->idx == 0 ? w : NULL;
    /* Everyone keeps going until the victim has been resumed, so that the
     * others are still working while it is parked. */
    while (atomic_load_explicit(&w->ops, memory_order_relaxed) < w->target ||
           !atomic_load(&phase_released)) {
        stress_step(w);
        atomic_fetch_add_explicit(&w->ops, 1, memory_order_relaxed);
    }
    stress_settle_all(w);
    atomic_store(&w->finished, true);
    return NULL;
}

/* One park: waits for the victim to park, checks the others' progress while
 * it is parked, resumes it. Returns false when the victim never parked. */
static bool park_once(stress_team *team, const stress_args *a, const char *pname, int round)
{
    int64_t deadline = stress_mono_ns() + INT64_C(60000000000);
    while (atomic_load(&park_state) != PARKED) {
        if (stress_mono_ns() > deadline) {
            stress_fail("round %d: the victim never reached %s in 60 s", round, pname);
            stress_report_hang(team, "victim not parked");
            return false;
        }
        stress_sleep_ns(200 * US);
    }
    long base[STRESS_MAX_THREADS];
    for (int i = 1; i < a->threads; i++)
        base[i] = atomic_load(&team->w[i].ops);
    uint64_t delivered0 = stress_delivered();
    uint64_t admitted0 = stress_admitted(), counted0 = stress_counted();
    int64_t pending0 = circuit_test_pending(stress_breaker());
    int64_t t0 = stress_mono_ns();
    deadline = t0 + INT64_C(60000000000);
    for (;;) {
        int behind = -1;
        for (int i = 1; i < a->threads && behind < 0; i++)
            if (atomic_load(&team->w[i].ops) - base[i] < PROGRESS_OPS)
                behind = i;
        if (behind < 0)
            break;
        if (stress_mono_ns() > deadline) {
            stress_fail("L1: with thread 0 parked at %s, thread %d completed only %ld "
                        "operations in 60 s (needs %d)",
                        pname, behind, atomic_load(&team->w[behind].ops) - base[behind],
                        PROGRESS_OPS);
            stress_report_hang(team, "no progress while a thread is parked");
            _exit(1);
        }
        stress_sleep_ns(1000 * US);
    }
    uint64_t delivered1 = stress_delivered();
    uint64_t admitted1 = stress_admitted(), counted1 = stress_counted();
    int64_t pending1 = circuit_test_pending(stress_breaker());
    circuit_state st = circuit_get_state(stress_breaker());
    if (atomic_load(&park_state) != PARKED)
        stress_fail("harness: the victim left the hook before it was resumed");
    /* Admission and counting go on: a parked call holds at most one probe
     * slot, and a probe slot is held at most probe_timeout (P1), while the
     * others move the clock far beyond it. */
    if (admitted1 == admitted0 || counted1 == counted0)
        stress_fail("L1/P1: with thread 0 parked at %s (round %d), the others' %d x >= %d "
                    "operations had %" PRIu64 " admissions and %" PRIu64 " counted results "
                    "(state %s, probes 1)",
                    pname, round, a->threads - 1, PROGRESS_OPS, admitted1 - admitted0,
                    counted1 - counted0, circuit_state_name(st));
    if (target == CIRCUIT_TP_DELIVERY_WON && delivered1 != delivered0)
        stress_fail("O2: %" PRIu64 " transitions were delivered while the thread holding "
                    "the delivery role was parked",
                    delivered1 - delivered0);
    /* None of the other points lies between a transition's CAS and its
     * publication, so nothing waits for the victim: what was pending when
     * the window opened must be delivered by the others. On 2 cores with
     * more threads than that, the OS can deschedule a deliverer, or a
     * publisher between its CAS and its push, for a few ms: that is a
     * stopped thread too, so give the others (still running, the victim
     * still parked) up to 10 s before calling it a failure. */
    for (int64_t until = stress_mono_ns() + INT64_C(10000000000);
         target != CIRCUIT_TP_DELIVERY_WON &&
         delivered1 < delivered0 + (uint64_t)(pending0 > 0 ? pending0 : 0) &&
         stress_mono_ns() < until;) {
        stress_sleep_ns(1000 * US);
        delivered1 = stress_delivered();
    }
    if (atomic_load(&park_state) != PARKED)
        stress_fail("harness: the victim left the hook before it was resumed");
    if (target != CIRCUIT_TP_DELIVERY_WON &&
        delivered1 < delivered0 + (uint64_t)(pending0 > 0 ? pending0 : 0))
        stress_fail("O3: with thread 0 parked at %s, %" PRId64 " transition(s) were "
                    "pending but only %" PRIu64 " were delivered by the others",
                    pname, pending0, delivered1 - delivered0);
    long least = -1;
    for (int i = 1; i < a->threads; i++) {
        long d = atomic_load(&team->w[i].ops) - base[i];
        if (least < 0 || d < least)
            least = d;
    }
    printf("  round %d: parked at %s for %.1f ms (%s): each other thread made >= %ld "
           "operations; admitted %" PRIu64 ", counted %" PRIu64 ", transitions delivered %" PRIu64
           ", pending %" PRId64 " -> %" PRId64 "\n",
           round, pname, (double)(stress_mono_ns() - t0) / 1e6, circuit_state_name(st), least,
           admitted1 - admitted0, counted1 - counted0, delivered1 - delivered0, pending0,
           pending1);
    /* Resume it, and let it run a little before the next round. */
    long v0 = atomic_load(&team->w[0].ops);
    atomic_store(&park_state, RELEASED);
    deadline = stress_mono_ns() + INT64_C(60000000000);
    while (atomic_load(&team->w[0].ops) < v0 + 1000 && stress_mono_ns() < deadline)
        stress_sleep_ns(200 * US);
    return true;
}

int main(int argc, char **argv)
{
    stress_args a;
    int fl;
    stress_parse(argc, argv, 4, 20000, &a, &fl);
    const char *name = NULL;
    int rounds = 4;
    for (int i = fl; i < argc; i++) {
        if (!strncmp(argv[i], "--point=", 8))
            name = argv[i] + 8;
        else if (!strncmp(argv[i], "--rounds=", 9) && atoi(argv[i] + 9) > 0)
            rounds = atoi(argv[i] + 9);
        else
            stress_die("unknown flag %s", argv[i]);
    }
    size_t pi = 0;
    for (; name && pi < sizeof points / sizeof points[0]; pi++)
        if (!strcmp(points[pi].name, name))
            break;
    if (!name || pi == sizeof points / sizeof points[0])
        stress_die("--point=ALLOW_BEFORE_ADMIT|DONE_BEFORE_CAS|RELEASE_BEFORE_CAS|DELIVERY_WON|"
                   "AFTER_PUBLISH|SLOT_HELD|RING_BEFORE_WRITE|FAST_BEFORE_COUNT|FOLD_SEALED|"
                   "FOLD_MID_SUM|INTENT_MADE|OPERATOR_BEFORE_CAS|CELL_BEFORE_START|"
                   "CLOSED_START_BEFORE_DESC|CLOSED_START_BEFORE_BITS|"
                   "MIRROR_BEFORE_SET|MIRROR_BEFORE_SHUT|INTENT_BEFORE_CAS|"
                   "TOTALS_STARTED|TOTALS_CREDITED|TOTALS_SUBTRACTED|DESC_BEFORE_CAS|"
                   "TIMEOUT_BEFORE_CLAIM|TIMEOUT_CLAIMED|TIMEOUT_TAKEN|TIMEOUT_COUNTED|"
                   "TIMEOUT_FREED");
    if (a.threads < 2)
        stress_die("needs at least 2 threads");
    target = points[pi].p;
    char prog[64];
    snprintf(prog, sizeof prog, "stress-park %s", points[pi].name);

    stress_config cfg = {"", 4, 1, 20 * US, 30 * US, false, true, 2 * US, false, 30, 10, false, 0, 0, false};
    char cname[80];
    snprintf(cname, sizeof cname, "park %s test p1 w4", points[pi].name);
    cfg.name = cname;
    if (target == CIRCUIT_TP_FAST_BEFORE_COUNT || target == CIRCUIT_TP_FOLD_SEALED ||
        target == CIRCUIT_TP_FOLD_MID_SUM || target == CIRCUIT_TP_INTENT_MADE ||
        target == CIRCUIT_TP_CELL_BEFORE_START || target == CIRCUIT_TP_DESC_BEFORE_CAS)
        cfg.fail_pct = 8; /* mostly successes, failures now and then: cells counted,
                           * summed by failures, sealed by trips and isolates */
    if (target == CIRCUIT_TP_MIRROR_BEFORE_SHUT || target == CIRCUIT_TP_INTENT_BEFORE_CAS)
        cfg.fail_pct = 8; /* trips' intents among many closed successes */
    if (target == CIRCUIT_TP_OPERATOR_BEFORE_CAS || target == CIRCUIT_TP_CLOSED_START_BEFORE_DESC ||
        target == CIRCUIT_TP_CLOSED_START_BEFORE_BITS || target == CIRCUIT_TP_MIRROR_BEFORE_SET ||
        target == CIRCUIT_TP_MIRROR_BEFORE_SHUT || target == CIRCUIT_TP_INTENT_BEFORE_CAS ||
        target == CIRCUIT_TP_DESC_BEFORE_CAS)
        cfg.operator_pm = 6; /* resets from isolated enter closed states too */
    if (a.scale < 1.0) {
        max_hits = (int)(MAX_HITS * a.scale);
        if (max_hits < 1)
            max_hits = 1;
    }
    stress_begin(&cfg, &a);
    uint64_t rng = a.seed ^ 0x9a4c;
    atomic_store(&hits_left, 1 + (int)stress_below(&rng, (uint64_t)max_hits));
    atomic_store(&park_state, ARMED);
    atomic_store(&phase_released, 0);
    circuit_test_set_hook(hook, NULL);

    stress_team team;
    stress_team_start(&team, a.threads, a.ops, a.seed, worker);

    /* The points that both allow and done pass (a transition's publication,
     * the delivery role) are caught in each of them in turn: allow makes
     * open -> half-open and timeouts, done trips, closes and reopens. */
    bool both = target == CIRCUIT_TP_DELIVERY_WON || target == CIRCUIT_TP_AFTER_PUBLISH;
    static const int filters[4] = {IN_NONE, IN_ALLOW, IN_DONE, IN_ALLOW};
    bool ok = true;
    for (int r = 1; r <= rounds && ok; r++) {
        if (r > 1)
            atomic_store(&hits_left, 1 + (int)stress_below(&rng, (uint64_t)max_hits));
        atomic_store(&only_in, both ? filters[(r - 1) % 4] : IN_NONE);
        atomic_store(&park_state, ARMED);
        ok = park_once(&team, &a, points[pi].name, r);
    }
    atomic_store(&park_state, RELEASED);
    atomic_store(&phase_released, 1);

    stress_team_join(&team, INT64_C(240000000000));
    circuit_test_set_hook(NULL, NULL);
    long total = 0;
    for (int k = 0; k < team.n; k++)
        total += atomic_load(&team.w[k].ops);
    bool pass = stress_end() && ok;
    stress_team_free(&team);
    return stress_summary(prog, total, a.threads, a.seed, pass ? 1 : 0, pass ? 0 : 1);
}
