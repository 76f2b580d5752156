/*
 * stress-signals: threads paused at arbitrary points by signals
 * (L1, O1-O3, P1, S4, T2).
 *
 * SPDX-License-Identifier: MIT
 *
 * Usage: stress_signals [threads] [ops-per-thread] [seed]
 *
 * The standard mix of stress.c, while a pauser thread sends SIGUSR1 to a
 * random worker every 20-200 us, at least 400 times per run (the workers go
 * on until then); the handler sleeps 0.2-2 ms (nanosleep is
 * async-signal-safe; errno is saved). So threads stop wherever the signal
 * lands: between two loads of a CAS loop, holding a probe slot, holding the
 * delivery role, between a transition's CAS and its publication... Probe
 * timeouts fall due while their holders sleep (real-clock runs), other
 * threads deliver what a sleeping one published. Every invariant of stress.c
 * is checked during and after the run. Two runs: the test clock moved by the
 * threads (probes 3, window 4) and the real clock (probes 1, window 1, nested
 * calls in observe).
 *
 * (Under TSan, signals reach a thread at the runtime's next safe point rather
 * than at any instruction; the ASan+UBSan build gives the arbitrary points.)
 *
 * Exit: 0 pass; 1 a violation.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stress.h"

#define US INT64_C(1000)

static atomic_long pauses;
static _Thread_local unsigned tls_pause_seq;

static void on_sigusr1(int sig)
{
    (void)sig;
    int saved = errno;
    unsigned k = tls_pause_seq++;
    struct timespec ts = {0, 200000L + (long)((k * 2654435761u) % 1800000u)};
    nanosleep(&ts, NULL); /* an EINTR just shortens the pause */
    atomic_fetch_add_explicit(&pauses, 1, memory_order_relaxed);
    errno = saved;
}

typedef struct pauser {
    stress_team *team;
    uint64_t rng;
    atomic_bool stop;
    long sent, min_signals;
} pauser;

/* The workers go on until they have made their operations AND the pauser has
 * sent its minimum of signals, so every run is paused often however fast
 * the build is. */
static atomic_bool enough_signals;

static void *pauser_main(void *arg)
{
    pauser *p = arg;
    while (!atomic_load(&p->stop)) {
        int i = (int)stress_below(&p->rng, (uint64_t)p->team->n);
        stress_worker *w = &p->team->w[i];
        if (!atomic_load(&w->finished)) {
            pthread_kill(w->tid, SIGUSR1);
            if (++p->sent >= p->min_signals)
                atomic_store(&enough_signals, true);
        }
        stress_sleep_ns(20 * US + (int64_t)stress_below(&p->rng, 180) * US);
    }
    return NULL;
}

static void *worker(void *arg)
{
    stress_worker *w = arg;
    stress_thread_init(w->idx);
    while (atomic_load_explicit(&w->ops, memory_order_relaxed) < w->target ||
           !atomic_load(&enough_signals)) {
        stress_step(w);
        atomic_fetch_add_explicit(&w->ops, 1, memory_order_relaxed);
    }
    stress_settle_all(w);
    atomic_store(&w->finished, true);
    return NULL;
}

static const stress_config configs[] = {
    {"signals test p3 w4 timeouts", 4, 3, 20 * US, 30 * US, false, true, 2 * US, false, 30, 10, false, 0, 0, false},
    {"signals real p1 w1 nested", 1, 1, 300 * US, 150 * US, true, false, 0, true, 30, 10, false, 0, 0, false},
};

int main(int argc, char **argv)
{
    stress_args a;
    int fl;
    stress_parse(argc, argv, 4, 50000, &a, &fl);
    if (fl < argc)
        stress_die("unknown flag %s", argv[fl]);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigusr1;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL))
        stress_die("sigaction");
    /* Only the workers take the signal: the main thread and the pauser block it. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);

    int passed = 0, failed = 0;
    long total = 0, sent = 0;
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
        atomic_store(&pauses, 0);
        atomic_store(&enough_signals, false);
        stress_begin(&configs[c], &a);
        stress_team team;
        stress_team_start(&team, a.threads, a.ops, a.seed + c, worker);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        pauser p = {&team, a.seed * 31 + c, false, 0, (long)(400 * a.scale)};
        pthread_t pt;
        if (pthread_create(&pt, NULL, pauser_main, &p))
            stress_die("pthread_create");
        stress_team_wait(&team, INT64_C(240000000000));
        atomic_store(&p.stop, true); /* before the workers are joined: it signals them */
        pthread_join(pt, NULL);
        stress_team_join(&team, INT64_C(240000000000));
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);
        for (int k = 0; k < team.n; k++)
            total += atomic_load(&team.w[k].ops);
        sent += p.sent;
        printf("  %s: %ld signals sent, %ld pauses taken\n", configs[c].name, p.sent,
               atomic_load(&pauses));
        if (atomic_load(&pauses) == 0)
            stress_fail("harness: no thread was ever paused");
        if (stress_end())
            passed++;
        else
            failed++;
        stress_team_free(&team);
    }
    (void)sent;
    return stress_summary("stress-signals", total, a.threads, a.seed, passed, failed);
}
