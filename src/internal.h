/*
 * What the core's files share (circuit__ prefix: internal, never exported).
 *
 * THE STATE WORD (b->core, 16 bytes, changed only by cmpxchg16b)
 *   lo  bits  0..1   state (1 closed, 2 open, 3 half-open)
 *       bits  2..31  generation, low 30 bits ("gen tag")
 *       bits 32..63  seq: results appended to the window in this state,
 *                    counted modulo seq_mod (a multiple of window <= 2^32)
 *   hi  closed / half-open:
 *       bits  0..16  failures in the window
 *       bit   17     full: the window holds `window` results
 *       bit   18     last counted outcome (1 = failure): the kind of the run
 *       bits 19..49  run length (saturates at CIRCUIT_RUN_MAX)
 *       bits 50..63  timed_out (half-open; saturates at CIRCUIT_TIMED_OUT_MAX)
 *   hi  open: opened_at, ns.
 * Successes are derived: (full ? window : seq) - failures.
 *
 * Every decision (count a result, trip, close, reopen, time a probe out)
 * is one CAS of this word from the value the decision was computed from, so
 * a result is counted only if its generation still holds, and the result
 * that trips or closes the breaker is part of the same update as the
 * transition (C4). Policies are asked before the CAS, which is why they may
 * be asked again when the CAS loses (SPEC L4).
 *
 * Generation tags are 30 bits: a ticket would be confused with a later
 * generation only after 2^30 transitions while it is outstanding (each open
 * period lasts open_for_ns, so at 1 ms per cycle that is over 12 days). The
 * 64-bit generation given to observe is rebuilt by the deliverer, which sees
 * every transition in order.
 */
#ifndef CIRCUIT_INTERNAL_H
#define CIRCUIT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <urcu/lfstack.h>

#include "atomics.h"
#include "circuit.h"

#ifdef CIRCUIT_TESTING
#include "testing.h"
#endif

#define CIRCUIT__MAGIC UINT64_C(0x63697263756974b1) /* "circuit" + tag */

#define CIRCUIT__GEN_BITS 30
#define CIRCUIT__GEN_MASK ((UINT64_C(1) << CIRCUIT__GEN_BITS) - 1)

/* ---- state word encoding ------------------------------------------------ */
static inline unsigned circuit__st(uint64_t lo) { return (unsigned)(lo & 3u); }
static inline uint32_t circuit__gen(uint64_t lo) { return (uint32_t)((lo >> 2) & CIRCUIT__GEN_MASK); }
static inline uint32_t circuit__seq(uint64_t lo) { return (uint32_t)(lo >> 32); }
static inline uint64_t circuit__mklo(unsigned st, uint32_t gen, uint32_t seq)
{
    return (uint64_t)st | ((uint64_t)(gen & CIRCUIT__GEN_MASK) << 2) | ((uint64_t)seq << 32);
}

#define CIRCUIT__HI_FAIL_MASK  UINT64_C(0x1ffff)
#define CIRCUIT__HI_FULL       (UINT64_C(1) << 17)
#define CIRCUIT__HI_LAST_FAIL  (UINT64_C(1) << 18)
#define CIRCUIT__HI_RUN_SHIFT  19
#define CIRCUIT__HI_RUN_MASK   UINT64_C(0x7fffffff)
#define CIRCUIT__HI_TO_SHIFT   50
#define CIRCUIT__HI_TO_MASK    UINT64_C(0x3fff)

static inline uint32_t circuit__hi_fail(uint64_t hi) { return (uint32_t)(hi & CIRCUIT__HI_FAIL_MASK); }
static inline uint32_t circuit__hi_run(uint64_t hi) { return (uint32_t)((hi >> CIRCUIT__HI_RUN_SHIFT) & CIRCUIT__HI_RUN_MASK); }
static inline uint32_t circuit__hi_to(uint64_t hi) { return (uint32_t)((hi >> CIRCUIT__HI_TO_SHIFT) & CIRCUIT__HI_TO_MASK); }

/* ---- transition records ------------------------------------------------- */
typedef struct circuit__node {
    struct cds_lfs_node lfs;       /* liburcu stack link */
    struct circuit__node *next;    /* deliverer's ordered list */
    circuit_transition tr;         /* tr.generation holds the 30-bit tag until delivery */
    void *call_ctx;
    int pool_index;                /* -1: malloc'ed overflow record */
} circuit__node;

/* ---- the breaker --------------------------------------------------------- */
struct circuit_breaker {
    /* read-only after circuit_new */
    uint64_t magic;
    circuit_config cfg;
    circuit_policy policy;
    circuit_classify_fn classify;
    void *classify_arg;
    circuit_observe_fn observe;
    void *observe_arg;
    uint32_t window;
    uint32_t probes;
    uint64_t seq_mod;              /* window * floor(2^32 / window) */
    uint64_t window_magic;         /* for circuit__mod_window */
    uint64_t *ring;                /* window slots (NULL when window == 1) */
    circuit__u128 *slots;          /* probes slots: {tag, due_ns} */
    uint64_t *bitmap;              /* ceil(probes / 32) words: {gen tag, 32 bits} */
    uint32_t bitmap_words;
    size_t footprint;

    /* the state word, alone on its cache line */
    _Alignas(64) circuit__u128 core;

    /* probe timeouts: a lower bound of every busy slot's due time */
    _Alignas(64) circuit__u128 probe_hint; /* {due_ns, version} */
    uint64_t probe_scans;                  /* timeout scans running now */

    /* delivery: written when transitions are made and delivered */
    _Alignas(64) uint64_t pending;        /* published and not yet delivered */
    uint64_t delivering;                  /* 1 while a thread holds the delivery role */
    struct __cds_lfs_stack stack;         /* published records */
    uint64_t pool_free;                   /* bit i set: pool[i] is free */

    /* owned by the thread holding the delivery role */
    _Alignas(64) circuit__node *held;     /* records waiting for an earlier generation */
    uint64_t next_gen;                    /* 64-bit generation of the next delivery */

    circuit__node pool[CIRCUIT_TRANSITION_POOL];
};

/* ---- tickets (the caller-owned circuit_ticket, seen from inside) --------- */
#define CIRCUIT__TICKET_MAGIC UINT64_C(0xc1bc0de500000000)
#define CIRCUIT__TK_LIVE     1u
#define CIRCUIT__TK_DONE     2u
#define CIRCUIT__TK_RELEASED 3u
#define CIRCUIT__TK_REJECTED 4u
#define CIRCUIT__NO_SLOT     UINT32_MAX

typedef struct circuit__ticket {
    uint64_t status;     /* CIRCUIT__TICKET_MAGIC | phase; 0 = blank */
    circuit_breaker *b;
    void *call_ctx;
    uint32_t gen;        /* generation tag admitted in */
    uint32_t slot;       /* probe slot, or CIRCUIT__NO_SLOT */
    uint32_t reuse;      /* the slot's reuse sequence at admission */
    uint32_t state;      /* state admitted in */
} circuit__ticket;

_Static_assert(sizeof(circuit__ticket) <= sizeof(circuit_ticket), "ticket layout");

/* ---- shared functions ----------------------------------------------------- */
__attribute__((noreturn, format(printf, 1, 2))) void circuit__abort(const char *fmt, ...);
/* Checks the config (CFG1) and, if the policy has one, asks policy->check
 * (K1); on EINVAL writes CFG2's single message naming every bad field and
 * the policy's complaint. config.c. */
int circuit__validate(const circuit_config *cfg, const circuit_policy *policy, char *errbuf,
                      size_t errbuf_len);

/* clock.c */
int64_t circuit__now(void);

/* window.c */
void circuit__counts(const circuit_breaker *b, circuit__u128 c, circuit_counts *out);
bool circuit__append(circuit_breaker *b, circuit__u128 c, bool failure, circuit__u128 *out);
void circuit__ring_help(circuit_breaker *b, circuit__u128 c);
void circuit__ring_write(circuit_breaker *b, uint32_t gen, uint32_t seq);
void circuit__ring_clear(circuit_breaker *b, uint32_t gen, uint32_t seq);
uint64_t circuit__hi_add_timeout(uint64_t hi);

/* probes.c */
/* The probe slot an allow was given by making open -> half-open itself. */
typedef struct circuit__slot0 {
    bool held;
    uint32_t gen;
    uint32_t reuse;
} circuit__slot0;
circuit__u128 circuit__advance(circuit_breaker *b, int64_t now, void *call_ctx,
                               circuit__slot0 *slot0);
bool circuit__slot_acquire(circuit_breaker *b, uint32_t gen, uint32_t *slot, bool *stale);
bool circuit__slot_occupy(circuit_breaker *b, uint32_t slot, uint32_t gen, int64_t due,
                         uint32_t *reuse);
bool circuit__slot_free(circuit_breaker *b, uint32_t slot, uint32_t gen, uint32_t reuse,
                        bool unless_due, int64_t now);
void circuit__bit_clear(circuit_breaker *b, uint32_t slot, uint32_t gen);
bool circuit__slot0_reserve(circuit_breaker *b, uint32_t gen, uint64_t open_lo, int64_t now,
                            uint32_t *reuse);
void circuit__hint_lower(circuit_breaker *b, int64_t due);
void circuit__hint_note(circuit_breaker *b, int64_t due);
circuit_state circuit__ask_probe(circuit_breaker *b, const circuit_counts *c);

/* delivery.c */
void circuit__delivery_init(circuit_breaker *b);
void circuit__delivery_destroy(circuit_breaker *b);
void circuit__publish(circuit_breaker *b, circuit_state from, circuit_state to, uint32_t gen,
                      const circuit_counts *counts, void *call_ctx);
void circuit__deliver(circuit_breaker *b);

/* ---- small helpers --------------------------------------------------------- */

/* seq % window without a division: Lemire, Kaser and Kurz, "Faster Remainder
 * by Direct Computation" (Software: Practice and Experience, 2019), for
 * 32-bit numerators. */
static inline uint32_t circuit__mod_window(const struct circuit_breaker *b, uint32_t seq)
{
    uint64_t low = b->window_magic * seq;
    __extension__ typedef unsigned __int128 u128;
    return (uint32_t)(((u128)low * b->window) >> 64);
}

/* (a - b) modulo seq_mod, for a, b < seq_mod */
static inline uint64_t circuit__seq_sub(const struct circuit_breaker *b, uint64_t a, uint64_t d)
{
    return a >= d ? a - d : a + b->seq_mod - d;
}
static inline int64_t circuit__sat_add(int64_t a, int64_t b)
{
    return (a > INT64_MAX - b) ? INT64_MAX : a + b;
}

#ifdef CIRCUIT_TESTING
void circuit__test_hook(circuit_test_point p);
#define CIRCUIT__HOOK(p) circuit__test_hook(p)
#else
#define CIRCUIT__HOOK(p) ((void)0)
#endif

#endif
