/*
 * Probes and time (probes.c: slots; timeouts.c: their timeouts and
 * circuit__advance; S3, P1-P3, T5, T6): the half-open state's probe slots
 * and their timeouts, and the time-driven change open -> half-open. Above counting (a timeout is counted there) and transitions;
 * below the public calls.
 *
 * LAYER INTERFACE:
 *   circuit__advance          make the time-driven changes due by `now` and
 *                             return the word as of then; an allow passes a
 *                             slot0 so that the open -> half-open change it
 *                             makes keeps probe slot 0 for it (S3)
 *   circuit__probe_admit      admission of one probe: ADMITTED (with its
 *                             slot), FULL (reject) or STALE (decide again)
 *   circuit__slot_release*    free a ticket's slot (done, release, P3)
 *   circuit__probes_in_flight a count for stats
 */
#ifndef CIRCUIT_PROBES_H
#define CIRCUIT_PROBES_H

#include "word.h"

typedef enum circuit__admit {
    CIRCUIT__ADMITTED, /* *slot and *reuse name the ticket's probe slot */
    CIRCUIT__FULL,     /* every slot of the generation is taken: reject */
    CIRCUIT__STALE     /* the state moved on: read the word and decide again */
} circuit__admit;

/* Probe slot 0, reserved for the allow that makes open -> half-open itself
 * (S3): filled by circuit__advance (which then returns at once), taken by
 * circuit__probe_admit, which admits that allow in the same step. */
typedef struct circuit__slot0 {
    bool held;
    uint32_t gen;
    uint32_t reuse;
} circuit__slot0;

/* The time-driven changes due by `now` (open -> half-open, probe timeouts,
 * each as of its due time), then the word. `slot0` may be NULL (done,
 * isolate, reset): an open -> half-open change made then admits no probe
 * (P1, S4: slot 0's reservation is no probe). */
circuit__u128 circuit__advance(circuit_breaker *b, int64_t now, void *call_ctx,
                               circuit__slot0 *slot0);

/* Admits one probe into the half-open state of generation `gen`: slot0's
 * slot when it holds one (always ADMITTED, S3; gen is then slot0->gen),
 * else slot 0's reservation when it is no probe, else a free slot, with its
 * timeout due at now + probe_timeout_ns. */
circuit__admit circuit__probe_admit(circuit_breaker *b, uint32_t gen, int64_t now,
                                    circuit__slot0 *slot0, uint32_t *slot, uint32_t *reuse);

/* Frees a ticket's slot (index, generation, reuse) unless a timeout took it
 * or freed already: exactly once (T5, T6). The _unless_due form leaves a
 * slot whose timeout fell due by `now` to the next allow or done (P1). */
bool circuit__slot_release(circuit_breaker *b, uint32_t slot, uint32_t gen, uint32_t reuse);
bool circuit__slot_release_unless_due(circuit_breaker *b, uint32_t slot, uint32_t gen,
                                      uint32_t reuse, int64_t now);

/* Probes holding a slot in the half-open state whose word's low half is
 * `lo` (relaxed: a count for stats); slot 0's reservation is not one when
 * the word carries CIRCUIT__LO_NO_PROBE0. */
int64_t circuit__probes_in_flight(const circuit_breaker *b, uint64_t lo);

#endif
