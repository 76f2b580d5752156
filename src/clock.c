/*
 * The clock: CLOCK_MONOTONIC in nanoseconds (TM1). The test build
 * (CIRCUIT_TESTING) reads a settable clock instead, unless told to use the
 * real one (TM3); the installed library has no clock parameter.
 */
#include <time.h>

#include "internal.h"

static int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#ifndef CIRCUIT_TESTING

int64_t circuit__now(void)
{
    return monotonic_ns();
}

#else

static uint64_t test_now = 1000000000u; /* the settable clock */
static uint64_t test_real;              /* 1: read CLOCK_MONOTONIC */
static circuit_test_hook_fn test_hook;
static void *test_hook_arg;

int64_t circuit__now(void)
{
    CIRCUIT__SWITCH(CLOCK, &test_now); /* the clock moves inside schedules (V1) */
    if (__atomic_load_n(&test_real, __ATOMIC_ACQUIRE))
        return monotonic_ns();
    return (int64_t)__atomic_load_n(&test_now, __ATOMIC_ACQUIRE);
}

void circuit_test_clock_set(int64_t now_ns)
{
    __atomic_store_n(&test_now, (uint64_t)now_ns, __ATOMIC_RELEASE);
}

int64_t circuit_test_clock_advance(int64_t delta_ns)
{
    return (int64_t)(__atomic_add_fetch(&test_now, (uint64_t)delta_ns, __ATOMIC_ACQ_REL));
}

int64_t circuit_test_clock_now(void)
{
    return circuit__now();
}

void circuit_test_clock_use_real(bool real)
{
    __atomic_store_n(&test_real, real ? 1u : 0u, __ATOMIC_RELEASE);
}

void circuit_test_set_hook(circuit_test_hook_fn fn, void *arg)
{
    /* arg first: a thread that sees the new hook sees its arg. */
    __atomic_store_n(&test_hook_arg, arg, __ATOMIC_RELEASE);
    __atomic_store_n(&test_hook, fn, __ATOMIC_RELEASE);
}

static uint64_t test_core_cas;

void circuit__test_count_core_cas(void)
{
    __atomic_fetch_add(&test_core_cas, 1, __ATOMIC_RELAXED);
}

uint64_t circuit_test_core_cas_attempts(void)
{
    return __atomic_load_n(&test_core_cas, __ATOMIC_RELAXED);
}

static uint64_t test_shared_rmws;

void circuit__test_count_shared_rmw(void)
{
    __atomic_fetch_add(&test_shared_rmws, 1, __ATOMIC_RELAXED);
}

uint64_t circuit_test_shared_rmws(void)
{
    return __atomic_load_n(&test_shared_rmws, __ATOMIC_RELAXED);
}

static uint64_t test_window_words;

void circuit__test_count_window_words(uint64_t n)
{
    __atomic_fetch_add(&test_window_words, n, __ATOMIC_RELAXED);
}

uint64_t circuit_test_window_words(void)
{
    return __atomic_load_n(&test_window_words, __ATOMIC_RELAXED);
}

static uint64_t test_stats_passes;

void circuit__test_count_stats_pass(void)
{
    __atomic_fetch_add(&test_stats_passes, 1, __ATOMIC_RELAXED);
}

uint64_t circuit_test_stats_passes(void)
{
    return __atomic_load_n(&test_stats_passes, __ATOMIC_RELAXED);
}

void circuit__test_hook(circuit_test_point p)
{
    CIRCUIT__SWITCH(PARK, 0); /* a park point is a switch point too (V1) */
    circuit_test_hook_fn fn = __atomic_load_n(&test_hook, __ATOMIC_ACQUIRE);
    if (fn)
        fn(p, __atomic_load_n(&test_hook_arg, __ATOMIC_ACQUIRE));
}

#endif
