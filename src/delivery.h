/*
 * Transition delivery (delivery.c, O1-O6, T7): records published by the
 * maker of a transition, handed to `observe` in generation order by one
 * thread at a time. Stands on internal.h alone: it knows the records, not
 * the state word.
 */
#ifndef CIRCUIT_DELIVERY_H
#define CIRCUIT_DELIVERY_H

#include "internal.h"

/* Before the breaker is shared / after it is no longer used. */
void circuit__delivery_init(circuit_breaker *b);
void circuit__delivery_destroy(circuit_breaker *b);

/* Queues one transition for observe (the transition's maker, right after
 * its CAS). Allocates only while the pool of CIRCUIT_TRANSITION_POOL
 * records is exhausted. */
void circuit__publish(circuit_breaker *b, const circuit_transition *tr, void *call_ctx);

/* Shared mode (SH3): brackets a maker's core CAS and its publication. */
void circuit__making_enter(circuit_breaker *b);
void circuit__making_leave(circuit_breaker *b);

/* Delivers what is queued unless another thread holds the delivery role. */
void circuit__deliver(circuit_breaker *b);

/* O3, O4: what is pending is delivered before a call returns (or admits),
 * unless another thread is delivering. relaxed: `pending` is a hint (table:
 * pending); a publisher always sees its own increment. The role is first
 * only LOOKED at, so that while a slow observe holds it a closed success
 * writes no shared line (L6, L8) instead of trying the role's CAS on every
 * call. The fence before the look is the publisher's half of the Dekker
 * pair with the deliverer's clear (delivery.c): a publisher that sees the
 * role held is sure the holder, clearing it later, sees its record. */
static inline void circuit__deliver_pending(circuit_breaker *b)
{
    if (circuit__ld_rlx(&b->pending)) {
        circuit__fence_sc(); /* Dekker: our push, then the look at the role */
        /* relaxed: after the fence; a 1 means the holder will see our push */
        if (!circuit__ld_rlx(&b->delivering))
            circuit__deliver(b);
    }
}

#endif
