/*
 * The harness of the race programs (tests/race/): plain programs, one per
 * feature, that run in every build, ThreadSanitizer's included (Criterion
 * cannot start under TSan). In the TSan build TSan judges them too: a
 * report makes the program exit non-zero.
 *
 *   race_main        `prog CASE [ARGS...]`: runs one named case of the
 *                    program's table; exit 0 pass, 1 a check failed, 2 usage
 *   RACE_CHECK       a check that prints file:line and its message when it
 *                    fails, counts the failure and goes on (any thread)
 *   race_violation   the same for a message without a place; the first 20
 *                    are printed, all are counted
 *   RACE_LOAD/ADD/STORE  sequentially consistent accesses to plain integers
 *                    the threads share (the program's own bookkeeping)
 *   RACE_SLOW        1 in a TSan build (about 10 times slower): cases scale
 *                    their iteration counts down with it
 *   race_rand        a per-thread xorshift64* stream
 *   race_stop_at     the calling thread stops at the next time it reaches a
 *                    park point (src/testing.h), under a role number;
 *                    race_wait_stopped / race_go wait for it and let it go
 *   race_must_return runs a call on a thread and fails the program if it has
 *                    not returned within 20 s (a spin: L1)
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CIRCUIT_TEST_RACE_H
#define CIRCUIT_TEST_RACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "circuit.h"
#include "testing.h"

#define RACE_LOAD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define RACE_ADD(p, v) __atomic_add_fetch((p), (v), __ATOMIC_SEQ_CST)
#define RACE_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)

#if defined(__SANITIZE_THREAD__)
#define RACE_SLOW 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RACE_SLOW 1
#endif
#endif
#ifndef RACE_SLOW
#define RACE_SLOW 0
#endif

/* ---- cases ------------------------------------------------------------------ */

typedef struct race_case {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the case's name; returns 0 or 1 */
    const char *args;                  /* usage of its arguments ("" for none) */
} race_case;

/* Runs the case argv[1] names with the arguments after it; prints
 * "<program> <case>: ok" or "... FAILED" and returns the exit status. */
int race_main(int argc, char **argv, const race_case *cases, size_t n);

/* ---- failures ----------------------------------------------------------------- */

__attribute__((format(printf, 3, 4))) void race_check_failed(const char *file, int line,
                                                             const char *fmt, ...);
#define RACE_CHECK(cond, ...)                                                               \
    do {                                                                                    \
        if (!(cond))                                                                        \
            race_check_failed(__FILE__, __LINE__, __VA_ARGS__);                             \
    } while (0)
__attribute__((format(printf, 1, 2))) void race_violation(const char *fmt, ...);
long race_failures(void);
/* A setup problem or a hang: printed, the program exits 1 at once. */
__attribute__((noreturn, format(printf, 1, 2))) void race_die(const char *fmt, ...);

/* ---- random numbers ------------------------------------------------------------- */

static inline uint64_t race_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

/* ---- policies and classifiers the cases share ------------------------------------ */

bool race_never_trip(void *arg, const circuit_counts *c);
circuit_state race_keep_probing(void *arg, const circuit_counts *c);
/* 0 -> success, 1 -> failure, 2 -> ignored */
circuit_outcome race_classify(void *arg, void *call_ctx, int result);
void race_observe_nothing(void *arg, void *call_ctx, const circuit_transition *t);

/* ---- stopping a thread at a park point -------------------------------------------- */

#define RACE_ROLES 8
/* Installs the park hook (circuit_test_set_hook); race_stop_at needs it. */
void race_park_install(void);
void race_park_remove(void);
/* The calling thread stops at the next time it reaches `point`, once, as
 * role `role` (1 .. RACE_ROLES - 1). */
void race_stop_at(int role, circuit_test_point point);
/* Waits until role's thread has stopped; race_die after 20 s. */
void race_wait_stopped(int role, const char *what);
/* Lets role's stopped thread go on. */
void race_go(int role);

/* ---- a call that must return ----------------------------------------------------- */

void race_must_return(const char *what, void (*fn)(circuit_breaker *), circuit_breaker *b);

#endif
