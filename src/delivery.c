/*
 * Transition delivery (delivery.h; docs/CONTRACT.md O1-O6, T7): the maker
 * of a transition publishes a record; whichever caller wins the delivery
 * role hands the records to observe in generation order.
 *
 * INVARIANTS
 *   - one thread at a time holds the role (`delivering`, acquire CAS,
 *     release store), so observe never runs concurrently with itself (O2);
 *   - records are delivered in generation order, each exactly once (O1);
 *   - nothing is stranded: a publisher pushes, then (full fence) tries the
 *     role, and the holder looks at the stack again after giving it back
 *     (O3);
 *   - a record comes from the breaker's pool (no allocation while the pool
 *     has one, T7), or for a shared handle from the process's reserve that
 *     all its shared handles share (SH2), and goes back where it came from
 *     by the deliverer's release.
 * Publishing, the hand-off, why no RCU is needed, unwinding (O5):
 * docs/design/delivery.md.
 */
#include <stdlib.h>
#include <urcu/compiler.h>

#include "circuit_shared.h" /* CIRCUIT_SHARED_TRANSITION_POOL */
#include "delivery.h"

#define POOL_ALL ((UINT64_C(1) << CIRCUIT_TRANSITION_POOL) - 1)

/* The reserve: records for this process's shared handles once a handle's
 * own pool is used up, before any malloc (SH2). Taken and given back by CAS
 * on one free mask, as a pool's records are; process memory, never shared. */
_Static_assert(CIRCUIT_SHARED_TRANSITION_POOL >= 1 && CIRCUIT_SHARED_TRANSITION_POOL < 64,
               "the reserve's free mask is one 64-bit word");
static circuit__node reserve[CIRCUIT_SHARED_TRANSITION_POOL];
static uint64_t reserve_free = (UINT64_C(1) << CIRCUIT_SHARED_TRANSITION_POOL) - 1;

void circuit__delivery_init(circuit_breaker *b)
{
    __cds_lfs_init(&b->stack);
    b->pool_free = POOL_ALL;
    b->pending = 0;
    b->delivering = 0;
    b->held = NULL;
    b->next_gen = 1;
    b->making = 0;
    for (int i = 0; i < CIRCUIT_TRANSITION_POOL; i++)
        cds_lfs_node_init(&b->pool[i].lfs);
}

/* A record of the pool (its index), or -1: the reserve's or malloc'ed. */
static int node_pooled(const circuit_breaker *b, const circuit__node *n)
{
    uintptr_t p = (uintptr_t)n, p0 = (uintptr_t)&b->pool[0];
    if (p < p0 || p >= p0 + sizeof b->pool)
        return -1;
    return (int)((p - p0) / sizeof *n);
}

/* A record of the reserve (its index), or -1. */
static int node_reserved(const circuit__node *n)
{
    uintptr_t p = (uintptr_t)n, p0 = (uintptr_t)&reserve[0];
    if (p < p0 || p >= p0 + sizeof reserve)
        return -1;
    return (int)((p - p0) / sizeof *n);
}

/* A free record of `mask` (its index, taken), or -1. */
static int mask_take(uint64_t *mask)
{
    uint64_t w = circuit__ld_rlx(mask); /* relaxed: the CAS below decides */
    while (w) {
        int i = __builtin_ctzll(w);
        /* acquire: our writes into the record follow the deliverer's last
         * reads of it (its mask_give is a release) */
        if (circuit__cas_acq(mask, &w, w & ~(UINT64_C(1) << i)))
            return i;
    }
    return -1;
}

static void mask_give(uint64_t *mask, int i)
{
    uint64_t bit = UINT64_C(1) << i;
    uint64_t w = circuit__ld_rlx(mask); /* relaxed: the CAS below decides */
    /* release: our reads of the record come before its next owner's writes */
    while (!circuit__cas_rel(mask, &w, w | bit))
        ;
}
_Static_assert(CIRCUIT_TRANSITION_POOL >= 1 && CIRCUIT_TRANSITION_POOL < 64,
               "the pool's free mask is one 64-bit word");

static circuit__node *node_get(circuit_breaker *b)
{
    int i = mask_take(&b->pool_free);
    if (i >= 0)
        return &b->pool[i];
    if (b->shared && (i = mask_take(&reserve_free)) >= 0) {
        cds_lfs_node_init(&reserve[i].lfs);
        return &reserve[i];
    }
    /* More transitions pending than the pool (and for a shared handle, the
     * process's reserve) holds: the only allocation on the call paths (T7,
     * SH2). */
    circuit__node *n = malloc(sizeof *n);
    if (!n)
        circuit__abort("out of memory while publishing a transition (more than %d pending)",
                       CIRCUIT_TRANSITION_POOL);
    cds_lfs_node_init(&n->lfs);
    return n;
}

static void node_put(circuit_breaker *b, circuit__node *n)
{
    int i = node_pooled(b, n);
    if (i >= 0)
        mask_give(&b->pool_free, i);
    else if ((i = node_reserved(n)) >= 0)
        mask_give(&reserve_free, i);
    else
        free(n);
}

void circuit__publish(circuit_breaker *b, const circuit_transition *tr, void *call_ctx)
{
    circuit__node *n = node_get(b);
    n->next = NULL;
    n->tr = *tr;
    n->call_ctx = call_ctx;
    circuit__faa_rlx(&b->pending, 1); /* relaxed: a hint for circuit__deliver_pending */
    /* liburcu's push is inline assembly TSan cannot see: mark the edge from
     * filling the record to the deliverer reading it. (The push itself is a
     * full-barrier CAS in liburcu: the record's contents are visible to
     * whoever pops it.) */
    circuit__tsan_release(n);
    cds_lfs_push(&b->stack, &n->lfs);
    CIRCUIT__HOOK(CIRCUIT_TP_AFTER_PUBLISH);
    /* The caller delivers (circuit__deliver_pending) before its call returns:
     * it sees its own increment of `pending`, so it always tries the flag. */
}

/* Deliverer only: insert into the list ordered by 64-bit generation. */
static void held_insert(circuit_breaker *b, circuit__node *n)
{
    circuit__node **p = &b->held;
    while (*p && (*p)->tr.generation < n->tr.generation)
        p = &(*p)->next;
    n->next = *p;
    *p = n;
}

/* Deliverer only (or circuit_free): detach everything published and merge
 * it into the ordered list. Walked by hand rather than with
 * cds_lfs_for_each_safe: each record is acquired (TSan) before its link is
 * read. */
static void take_published(circuit_breaker *b)
{
    struct cds_lfs_head *head = __cds_lfs_pop_all(&b->stack);
    for (struct cds_lfs_node *it = head ? &head->node : NULL, *nx; it; it = nx) {
        circuit__node *n = caa_container_of(it, circuit__node, lfs);
        circuit__tsan_acquire(n);
        nx = it->next;
        held_insert(b, n);
    }
}

typedef struct delivery_guard {
    circuit_breaker *b;
    circuit__node *current; /* handed to observe, not yet returned to the pool */
    int active;
} delivery_guard;

static void delivery_unwind(delivery_guard *g)
{
    if (!g->active)
        return;
    if (g->current)
        node_put(g->b, g->current);
    /* release: the next deliverer sees held/next_gen as we leave them */
    circuit__st_rel(&g->b->delivering, 0);
}

/* Shared mode (SH3): the records held can go out in generation order only
 * once no maker of this process is between its core CAS and its push (a
 * lower generation of ours may still come). acquire: pairs with a maker's
 * release decrement after its push, so the take that follows sees that
 * record (table: making). The maker's increment, before its CAS, is seen
 * because the record we hold was made by a CAS after that one (the core
 * CASes carry it: docs/design/shared-memory.md, DELIVERY). */
static bool makers_quiet(circuit_breaker *b) { return circuit__ld_acq(&b->making) == 0; }

void circuit__deliver(circuit_breaker *b)
{
    for (;;) {
        /* Dekker pair with the deliverer's clear: (our push, this try) vs
         * (its clear of the flag, its look at the stack). A caller that only
         * saw `pending` pushed nothing and needs no order here. */
        circuit__fence_sc();
        uint64_t idle = 0;
        CIRCUIT__SHARED_RMW();
        /* acquire: held/next_gen as the previous deliverer left them */
        if (!circuit__cas_acq(&b->delivering, &idle, 1))
            return; /* someone is delivering: they will see our records */
        CIRCUIT__HOOK(CIRCUIT_TP_DELIVERY_WON);
        delivery_guard g __attribute__((cleanup(delivery_unwind))) = {b, NULL, 1};
        for (;;) {
            take_published(b);
#if !defined(CIRCUIT_PLANT_SHARED_NO_MAKERS)
            if (b->shared) {
                /* a maker of ours still to push delivers after its push */
                if (!makers_quiet(b))
                    break;
                take_published(b); /* what they pushed before they left */
            }
#else
            /* PLANTED BUG (tests/sched/PLANTS.md): in shared memory the
             * held records go out without waiting for this process's
             * makers: a lower generation of ours may come after */
#endif
            /* in one process every generation is ours: the next one is
             * due; in shared memory, every one held is ours and none of
             * ours below it is still to come */
            while (b->held && (b->shared || b->held->tr.generation == b->next_gen)) {
                circuit__node *n = b->held;
                b->held = n->next;
                b->next_gen = n->tr.generation + 1;
                circuit__faa_rlx(&b->pending, (uint64_t)-1); /* relaxed: a hint */
                g.current = n;
                circuit_transition tr = n->tr;
                if (b->observe) { /* NULL: no observer (CFG4) */
                    CIRCUIT__CB_FRAME(frame, b, CIRCUIT__CB_OBSERVE);
                    b->observe(b->observe_arg, n->call_ctx, &tr);
                }
                g.current = NULL;
                node_put(b, n);
            }
            if (cds_lfs_empty(&b->stack))
                break;
        }
        g.active = 0;
        /* release: the next deliverer sees held/next_gen as we leave them */
        circuit__st_rel(&b->delivering, 0);
        /* Dekker pair with the publisher: (this clear, the look at the stack
         * below) vs (its push, its try of the flag); in shared memory also
         * (this clear, the look at `making`) vs (a maker's decrement, its
         * try of the flag) */
        circuit__fence_sc();
        if (cds_lfs_empty(&b->stack) &&
            !(b->shared && circuit__ld_rlx(&b->pending) != 0 && makers_quiet(b)))
            return; /* relaxed pending: after the fence, a hint (table: pending) */
    }
}

/* Shared mode: a maker of this process enters and leaves the window between
 * its core CAS and its push (transition.c). */
void circuit__making_enter(circuit_breaker *b)
{
    /* relaxed: a deliverer holding a later record sees it through the core
     * CASes between (table: making) */
    circuit__faa_rlx(&b->making, 1);
}

void circuit__making_leave(circuit_breaker *b)
{
    /* release: after our push, for the deliverer's acquire (table: making) */
    circuit__faa_rel(&b->making, (uint64_t)-1);
}

void circuit__delivery_destroy(circuit_breaker *b)
{
    /* Undelivered transitions are discarded (documented at circuit_free). */
    take_published(b);
    while (b->held) {
        circuit__node *n = b->held;
        b->held = n->next;
        node_put(b, n); /* a reserve's record goes back to the reserve */
    }
}
