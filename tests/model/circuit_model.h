/*
 * circuit_model: the sequential reference model of docs/CONTRACT.md.
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
 * Semantics are those of include/circuit.h (docs/CONTRACT.md: S2, the
 * ISOLATED state and the operator calls OP1-OP3, open-period backoff B1-B2,
 * policy.check K1, stats M1); the differences are listed here:
 *   - time comes from the `now` function given to cmodel_new (NULL: the
 *     model reads CLOCK_MONOTONIC itself);
 *   - the callbacks are called as the library calls them: classify and
 *     observe outside the mutex; trip, probe and open_for INSIDE it (they
 *     must not call the model; L4 and B3 ask them to be pure anyway),
 *     each exactly once per decision;
 *   - a transition's queue node is malloc'ed (out of memory aborts);
 *   - abort messages start with "cmodel: ".
 *
 * Choices the contract leaves to the implementation, made here (the
 * differential test holds the library to them):
 *   - cmodel_isolate and cmodel_reset first make the time-driven changes
 *     that fell due (open -> half-open, probe timeouts), as allow and done
 *     do (P1), then make their own transition; so the `from` of an operator
 *     transition is what cmodel_get_state reported just before.
 *   - cmodel_get_stats, a pure read, reports an open state whose period has
 *     passed as the half-open state it has become (S5): state half-open,
 *     generation + 1, zero counts, no probe in flight, retry_after 0. Probe
 *     timeouts that fell due but were not yet made by an allow or done are
 *     still in probes_in_flight and not yet in timed_out.
 *   - B2's reopen count is cleared whenever the breaker enters closed (probe
 *     policy or reset); isolate keeps it, but the only way out of isolated
 *     is reset, so it is never seen again.
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

/** Like circuit_new: 0, EINVAL (one message naming every invalid field,
 *  then the complaint of policy.check if it has one (K1); *out = NULL) or
 *  ENOMEM (*out = NULL). `now` may be NULL (CLOCK_MONOTONIC). Aborts when
 *  out, spec, a policy function or classify is NULL (observe may be), or when
 *  policy.check returns anything but 0 or EINVAL. */
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

/** Like circuit_get_stats: a pure read (see the choices above). The totals
 *  are exact: admitted = successes + failures + ignored + late + released +
 *  (tickets still live). */
void cmodel_get_stats(cmodel *m, circuit_stats *out);

/** Like circuit_isolate (OP1): 0, or EALREADY when isolated. */
int cmodel_isolate(cmodel *m, void *call_ctx);

/** Like circuit_reset (OP2): 0, or EALREADY when closed. */
int cmodel_reset(cmodel *m, void *call_ctx);

#ifdef __cplusplus
}
#endif

#endif /* CIRCUIT_MODEL_H */
