/*
 * Transition delivery (delivery.c, SPEC O1-O6, T7): records published by the
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

/* Delivers what is queued unless another thread holds the delivery role. */
void circuit__deliver(circuit_breaker *b);

/* O3, O4: what is pending is delivered before a call returns (or admits),
 * unless another thread is delivering. relaxed: `pending` is a hint (table:
 * pending); a publisher always sees its own increment. */
static inline void circuit__deliver_pending(circuit_breaker *b)
{
    if (circuit__ld_rlx(&b->pending))
        circuit__deliver(b);
}

#endif
