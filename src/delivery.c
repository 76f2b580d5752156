/*
 * Transition delivery (SPEC O1-O6, T7).
 *
 * PUBLISHING: the thread whose CAS made a transition takes a record from the
 * breaker's pool (a 64-bit free mask over CIRCUIT_TRANSITION_POOL records,
 * taken and returned by CAS: no lock, no ABA since bits are not pointers),
 * or mallocs one while the pool is exhausted, fills it, and pushes it on
 * liburcu's lock-free stack (cds_lfs_push).
 *
 * DELIVERING: whichever caller wins the `delivering` flag by CAS detaches the
 * whole stack at once (__cds_lfs_pop_all), merges the records into its list
 * ordered by generation, and calls observe for each record whose generation
 * is the next one due, with no internal critical region held: the flag is
 * the only thing held and it excludes nothing but other deliverers, which is
 * what keeps observe from running concurrently with itself (O2). A nested
 * call made by observe finds the flag taken and leaves its transitions to the
 * outer loop, which delivers them after observe returns.
 *
 * WHY NO RCU: a stack from which single nodes are popped needs RCU (or
 * hazard pointers) because a popper reads head->next of a node another
 * thread may have popped and recycled. Pop-all reads nothing through the head
 * before detaching it with one exchange, so only the deliverer ever touches a
 * detached node: no ABA, no grace period, and the caller's threads never have
 * to register with liburcu.
 *
 * NOTHING STRANDED (O3): a publisher pushes, then tries the flag (both full
 * barriers). A deliverer releases the flag with a full barrier, then looks at
 * the stack again and goes round if it is not empty. Either the deliverer's
 * second look sees the record, or the publisher's try comes after the
 * release and wins the flag. A record that must wait for an earlier
 * generation (its publisher is between its CAS and its push) is delivered
 * by that publisher's own attempt after its push.
 *
 * UNWINDING (O5): a cleanup handler (compiled with -fexceptions) gives the
 * flag back if observe leaves by pthread_exit, cancellation or a C++
 * exception; the transition it was given counts as delivered; the rest are
 * delivered by the next allow or done, which look at `pending`.
 */
#include <stdlib.h>
#include <urcu/compiler.h>

#include "internal.h"

void circuit__delivery_init(circuit_breaker *b)
{
    __cds_lfs_init(&b->stack);
    b->pool_free = UINT64_MAX; /* CIRCUIT_TRANSITION_POOL == 64 */
    b->pending = 0;
    b->delivering = 0;
    b->held = NULL;
    b->next_gen = 1;
    for (int i = 0; i < CIRCUIT_TRANSITION_POOL; i++) {
        cds_lfs_node_init(&b->pool[i].lfs);
        b->pool[i].pool_index = i;
    }
}
_Static_assert(CIRCUIT_TRANSITION_POOL == 64, "the pool's free mask is one 64-bit word");

static circuit__node *node_get(circuit_breaker *b)
{
    uint64_t w = circuit__load_acq(&b->pool_free);
    while (w) {
        int i = __builtin_ctzll(w);
        if (circuit__cas(&b->pool_free, &w, w & ~(UINT64_C(1) << i)))
            return &b->pool[i];
    }
    /* More transitions pending than the pool holds: the only allocation on
     * the call paths (SPEC T7). */
    circuit__node *n = malloc(sizeof *n);
    if (!n)
        circuit__abort("out of memory while publishing a transition (more than %d pending)",
                       CIRCUIT_TRANSITION_POOL);
    cds_lfs_node_init(&n->lfs);
    n->pool_index = -1;
    return n;
}

static void node_put(circuit_breaker *b, circuit__node *n)
{
    if (n->pool_index < 0) {
        free(n);
        return;
    }
    uint64_t bit = UINT64_C(1) << n->pool_index;
    uint64_t w = circuit__load_rlx(&b->pool_free);
    while (!circuit__cas(&b->pool_free, &w, w | bit))
        ;
}

void circuit__publish(circuit_breaker *b, circuit_state from, circuit_state to, uint32_t gen,
                      const circuit_counts *counts, void *call_ctx)
{
    circuit__node *n = node_get(b);
    n->next = NULL;
    n->tr.from = from;
    n->tr.to = to;
    n->tr.generation = gen; /* the 30-bit tag; widened by the deliverer */
    n->tr.counts = *counts;
    n->call_ctx = call_ctx;
    circuit__faa(&b->pending, 1);
    /* liburcu's push is inline assembly TSan cannot see: mark the edge from
     * filling the record to the deliverer reading it. */
    circuit__tsan_release(n);
    cds_lfs_push(&b->stack, &n->lfs);
    CIRCUIT__HOOK(CIRCUIT_TP_AFTER_PUBLISH);
}

/* Deliverer only: insert into the list ordered by 64-bit generation. */
static void held_insert(circuit_breaker *b, circuit__node *n)
{
    uint64_t base = b->next_gen;
    uint64_t tag = (uint64_t)n->tr.generation & CIRCUIT__GEN_MASK;
    n->tr.generation = base + ((tag - (base & CIRCUIT__GEN_MASK)) & CIRCUIT__GEN_MASK);
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
    circuit__store_sc(&g->b->delivering, 0);
}

void circuit__deliver(circuit_breaker *b)
{
    for (;;) {
        uint64_t idle = 0;
        if (!circuit__cas(&b->delivering, &idle, 1))
            return; /* someone is delivering: they will see our records */
        CIRCUIT__HOOK(CIRCUIT_TP_DELIVERY_WON);
        delivery_guard g __attribute__((cleanup(delivery_unwind))) = {b, NULL, 1};
        for (;;) {
            take_published(b);
            while (b->held && b->held->tr.generation == b->next_gen) {
                circuit__node *n = b->held;
                b->held = n->next;
                b->next_gen++;
                circuit__faa(&b->pending, (uint64_t)-1);
                g.current = n;
                circuit_transition tr = n->tr;
                b->observe(b->observe_arg, n->call_ctx, &tr);
                g.current = NULL;
                node_put(b, n);
            }
            if (cds_lfs_empty(&b->stack))
                break;
        }
        g.active = 0;
        circuit__store_sc(&b->delivering, 0);
        if (cds_lfs_empty(&b->stack))
            return;
    }
}

void circuit__delivery_destroy(circuit_breaker *b)
{
    /* Undelivered transitions are discarded (documented at circuit_free). */
    take_published(b);
    while (b->held) {
        circuit__node *n = b->held;
        b->held = n->next;
        if (n->pool_index < 0)
            free(n);
    }
}
