/*
 * circuit_model: the sequential reference model of SPEC.md.
 *
 * SPDX-License-Identifier: MIT
 *
 * A deliberately plain implementation of the breaker contract: one pthread
 * mutex guards everything, the count window is a plain array, the probe
 * slots are a plain array scanned from index 0. It exists for two reasons:
 *
 *   - as the ORACLE of the differential test (tests/model/differential.c),
 *     which drives it and the real library through the same operations and
 *     requires identical answers, transitions and policy calls;
 *   - as the `mutex_breaker` BASELINE of the benchmarks: what a breaker that
 *     takes a lock costs.
 *
 * It is never installed and is not part of the library's API.
 *
 * Semantics are those of include/circuit.h; the differences are listed here:
 *   - time comes from the `now` function given to cmodel_new (NULL: the
 *     model reads CLOCK_MONOTONIC itself);
 *   - the callbacks are called as the library calls them: classify and
 *     observe outside the mutex, trip and probe INSIDE it (they must not call
 *     the model; SPEC L4 asks them to be pure anyway);
 *   - a transition's queue node is malloc'ed (out of memory aborts);
 *   - abort messages start with "cmodel: ".
 *
 * Thread-safety: every function but cmodel_new and cmodel_free may be called
 * from any number of threads at once. observe never runs concurrently with
 * itself and may call the model (nested transitions are delivered after it
 * returns, in order). If observe unwinds (pthread_exit, pthread_cancel, a C++
 * exception through code built with -fexceptions), the transitions still
 * queued are delivered by the next cmodel_allow or cmodel_done.
 */
#ifndef CIRCUIT_MODEL_H
#define CIRCUIT_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "circuit.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cmodel cmodel;

/** The model's clock: returns the current time in ns (monotonic). Called
 *  with the model's mutex held; it must not call the model. */
typedef int64_t (*cmodel_clock_fn)(void *arg);

/** Like circuit_new: 0, EINVAL (one message naming every invalid field;
 *  *out = NULL) or ENOMEM (*out = NULL). `now` may be NULL (CLOCK_MONOTONIC).
 *  Aborts when out, spec, a policy function, classify or observe is NULL. */
int cmodel_new(cmodel **out, const circuit_spec *spec, cmodel_clock_fn now, void *now_arg,
               char *errbuf, size_t errbuf_len);

/** Like circuit_free: undelivered transitions are discarded. NULL: nothing. */
void cmodel_free(cmodel *m);

/** The model's ticket. Its fields are the model's business; a zeroed ticket
 *  (`cmodel_ticket t = {0};`) is blank: release ignores it, done aborts. */
typedef struct cmodel_ticket {
    cmodel  *m;        /* the model that filled it; NULL: blank */
    void    *call_ctx; /* given to classify and to observe */
    uint64_t gen;      /* generation the call was admitted in */
    int      slot;     /* probe slot index, or -1 for a call admitted while closed */
    uint64_t slot_seq; /* which admission holds the slot (slots are reused) */
    int      status;   /* live, settled by done/release, rejected (see .c) */
} cmodel_ticket;

/** Like circuit_allow. */
bool cmodel_allow(cmodel *m, void *call_ctx, cmodel_ticket *t, circuit_rejection *rej);

/** Like circuit_done. */
bool cmodel_done(cmodel_ticket *t, int result);

/** Like circuit_release. */
void cmodel_release(cmodel_ticket *t);

/** Like circuit_get_state: a pure read. */
circuit_state cmodel_get_state(cmodel *m);

#ifdef __cplusplus
}
#endif

#endif /* CIRCUIT_MODEL_H */
