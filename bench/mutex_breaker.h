/*
 * mutex_breaker: the bench's baseline, a breaker with libcircuit's
 * semantics (the same circuit_spec, policies, window, probes, probe
 * timeouts, late results and stats) behind one pthread mutex: every call
 * takes the lock once. It is what a straightforward implementation costs,
 * the figure libcircuit is compared with. Not for production: no operator
 * calls, observe is called under the lock (it must not call the breaker).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CIRCUIT_BENCH_MUTEX_BREAKER_H
#define CIRCUIT_BENCH_MUTEX_BREAKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "circuit.h"

typedef struct mutex_breaker mutex_breaker;

/* The clock: current time in ns, monotonic; NULL: CLOCK_MONOTONIC. */
typedef int64_t (*mutex_breaker_clock_fn)(void *arg);

typedef struct mutex_breaker_ticket {
    mutex_breaker *m; /* NULL: blank or settled */
    void *call_ctx;
    uint64_t gen;     /* generation it was admitted in */
    int slot;         /* probe slot, -1 when admitted closed */
} mutex_breaker_ticket;

/* 0, EINVAL (window or probes out of range, a period <= 0) or ENOMEM. */
int mutex_breaker_new(mutex_breaker **out, const circuit_spec *spec, mutex_breaker_clock_fn now,
                      void *now_arg, char *errbuf, size_t errbuf_len);
void mutex_breaker_free(mutex_breaker *m);
bool mutex_breaker_allow(mutex_breaker *m, void *call_ctx, mutex_breaker_ticket *t,
                         circuit_rejection *rej);
bool mutex_breaker_done(mutex_breaker_ticket *t, int result);
void mutex_breaker_release(mutex_breaker_ticket *t);
circuit_state mutex_breaker_get_state(mutex_breaker *m);
void mutex_breaker_get_stats(mutex_breaker *m, circuit_stats *out);

#endif
