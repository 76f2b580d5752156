/*
 * The harness of the race programs: see race.h.
 *
 * SPDX-License-Identifier: MIT
 */
#include "race.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long failures;
static const char *running = "race";

void race_check_failed(const char *file, int line, const char *fmt, ...)
{
    long n = RACE_ADD(&failures, 1);
    if (n > 20)
        return;
    const char *base = strrchr(file, '/');
    va_list ap;
    va_start(ap, fmt);
    flockfile(stderr);
    fprintf(stderr, "FAIL %s:%d: ", base ? base + 1 : file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    funlockfile(stderr);
    va_end(ap);
}

void race_violation(const char *fmt, ...)
{
    long n = RACE_ADD(&failures, 1);
    if (n > 20)
        return;
    va_list ap;
    va_start(ap, fmt);
    flockfile(stderr);
    fprintf(stderr, "%s: ", running);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    funlockfile(stderr);
    va_end(ap);
}

long race_failures(void) { return RACE_LOAD(&failures); }

void race_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", running);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    printf("%s: FAILED\n", running);
    fflush(NULL);
    _exit(1);
}

int race_main(int argc, char **argv, const race_case *cases, size_t n)
{
    const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    for (size_t i = 0; argc > 1 && i < n; i++) {
        if (strcmp(argv[1], cases[i].name) != 0)
            continue;
        static char name[256];
        snprintf(name, sizeof name, "%s %s", prog, cases[i].name);
        running = name;
        setvbuf(stdout, NULL, _IOLBF, 0);
        int rc = cases[i].run(argc - 1, argv + 1);
        if (rc == 2)
            return 2;
        bool ok = rc == 0 && race_failures() == 0;
        printf("%s: %s\n", name, ok ? "ok" : "FAILED");
        return ok ? 0 : 1;
    }
    fprintf(stderr, "usage: %s CASE [ARGS]; the cases:\n", prog);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "  %s %s\n", cases[i].name, cases[i].args);
    return 2;
}

/* ---- policies ------------------------------------------------------------------ */

bool race_never_trip(void *arg, const circuit_counts *c)
{
    (void)arg, (void)c;
    return false;
}

circuit_state race_keep_probing(void *arg, const circuit_counts *c)
{
    (void)arg, (void)c;
    return CIRCUIT_HALF_OPEN;
}

circuit_outcome race_classify(void *arg, void *call_ctx, int result)
{
    (void)arg, (void)call_ctx;
    return result == 0 ? CIRCUIT_SUCCESS : (result == 1 ? CIRCUIT_FAILURE : CIRCUIT_IGNORED);
}

void race_observe_nothing(void *arg, void *call_ctx, const circuit_transition *t)
{
    (void)arg, (void)call_ctx, (void)t;
}

/* ---- park points ------------------------------------------------------------------- */

static sem_t stopped[RACE_ROLES], resume[RACE_ROLES];
static _Thread_local int my_role;
static _Thread_local circuit_test_point my_point;

static void park_hook(circuit_test_point p, void *arg)
{
    (void)arg;
    if (my_role == 0 || p != my_point)
        return;
    int r = my_role;
    my_role = 0; /* once */
    sem_post(&stopped[r]);
    while (sem_wait(&resume[r]) != 0 && errno == EINTR)
        ;
}

void race_park_install(void)
{
    static bool ready;
    if (!ready) {
        for (int i = 0; i < RACE_ROLES; i++) {
            sem_init(&stopped[i], 0, 0);
            sem_init(&resume[i], 0, 0);
        }
        ready = true;
    }
    circuit_test_set_hook(park_hook, NULL);
}

void race_park_remove(void) { circuit_test_set_hook(NULL, NULL); }

void race_stop_at(int role, circuit_test_point point)
{
    if (role < 1 || role >= RACE_ROLES)
        race_die("race_stop_at: role %d out of range", role);
    my_point = point;
    my_role = role;
}

void race_wait_stopped(int role, const char *what)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 20;
    int rc;
    while ((rc = sem_timedwait(&stopped[role], &ts)) != 0 && errno == EINTR)
        ;
    if (rc != 0)
        race_die("%s did not reach its park point within 20 s", what);
}

void race_go(int role) { sem_post(&resume[role]); }

/* ---- a call that must return --------------------------------------------------------- */

typedef struct watched {
    void (*fn)(circuit_breaker *);
    circuit_breaker *b;
    int done;
} watched;

static void *watched_main(void *arg)
{
    watched *w = arg;
    w->fn(w->b);
    RACE_STORE(&w->done, 1);
    return NULL;
}

void race_must_return(const char *what, void (*fn)(circuit_breaker *), circuit_breaker *b)
{
    static watched w;
    w.fn = fn;
    w.b = b;
    RACE_STORE(&w.done, 0);
    pthread_t th;
    if (pthread_create(&th, NULL, watched_main, &w) != 0)
        race_die("pthread_create");
    struct timespec ts = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 2000 && !RACE_LOAD(&w.done); i++)
        nanosleep(&ts, NULL);
    if (!RACE_LOAD(&w.done))
        race_die("%s has not returned after 20 s: it spins (L1)", what);
    pthread_join(th, NULL);
}
