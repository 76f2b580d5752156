/*
 * The closed state's memory (closed_state.c), below transition.c: the
 * closed layout of the state word, the descriptors D_k, the failure bitmap,
 * the per-CPU cells' sum and seal, the successes ledger and the closed
 * mirror. transition.c enters a closed state (circuit__closed_enter) and
 * leaves one (circuit__closed_leave); closed.c, above transition.c, counts
 * results with these parts. Protocol: docs/design/closed.md; the mirror:
 * docs/design/mirror.md.
 */
#ifndef CIRCUIT_CLOSED_STATE_H
#define CIRCUIT_CLOSED_STATE_H

#include "message.h"
#include "percpu.h"

/* ---- the state word, closed (layout: word.h) ------------------------------ */
/* closed lo */
#define CIRCUIT__EPOCH_MASK UINT64_C(0x7ffffff)
#define CIRCUIT__LO_X (UINT64_C(1) << 59)
#define CIRCUIT__LO_F (UINT64_C(1) << 60)
#define CIRCUIT__LO_INTENT_SHIFT 61
#define CIRCUIT__INTENT_NONE 0u
#define CIRCUIT__INTENT_FOLD 1u
#define CIRCUIT__INTENT_FAILURE 2u
#define CIRCUIT__INTENT_ISOLATE 3u
#define CIRCUIT__LO_ASKED (UINT64_C(1) << 63) /* failure intent: trip said true at hi's sum */
#define CIRCUIT__CLOSED_SUM_MAX UINT64_C(0xffffffff)

/* closed word */
static inline uint32_t circuit__closed_epoch(uint64_t lo) { return (uint32_t)((lo >> 32) & CIRCUIT__EPOCH_MASK); }
static inline unsigned circuit__closed_intent(uint64_t lo) { return (unsigned)((lo >> CIRCUIT__LO_INTENT_SHIFT) & 3u); }
static inline uint64_t circuit__closed_lo(uint32_t gen, uint32_t epoch, bool x, bool f, unsigned intent)
{
    return (uint64_t)CIRCUIT__ST_CLOSED | ((uint64_t)(gen & CIRCUIT__GEN_MASK) << 2) |
           ((uint64_t)(epoch & CIRCUIT__EPOCH_MASK) << 32) | (x ? CIRCUIT__LO_X : 0) |
           (f ? CIRCUIT__LO_F : 0) | ((uint64_t)intent << CIRCUIT__LO_INTENT_SHIFT);
}
static inline uint32_t circuit__closed_point(uint64_t hi) { return (uint32_t)hi; }
static inline uint64_t circuit__closed_sum(uint64_t hi) { return hi >> 32; }
static inline uint64_t circuit__closed_hi(uint32_t k, uint64_t sd) { return (uint64_t)k | (sd << 32); }

/* The closed descriptors D_k (closed_state.c writes them; two 16-byte slots,
 * D[k & 1]): lo holds k in full (32 bits: the tag that "read X, check, CAS
 * X" on a slot relies on, so an X of point k comes back only after 2^31
 * writes of its slot; a shorter tag would let a stopped writer overwrite a
 * live descriptor, L1), the run
 * and a valid bit; hi the S, failures, seq (modulo the window), full and
 * last-outcome fields. A closed state's first point k0 has all-zero counts:
 * circuit__desc_zero, written into D[k0 & 1] by the transition that enters
 * the state, before its CAS (transition.c), so that every point of a
 * state, its first one included, is read from a slot the same way. */
#define CIRCUIT__D_VALID (UINT64_C(1) << 63)  /* lo */
#define CIRCUIT__D_RUN_SHIFT 32               /* lo: run, 31 bits */
#define CIRCUIT__D_SEQ_MASK UINT64_C(0xffff)  /* hi bits 0..15: seq mod window */
#define CIRCUIT__D_FULL (UINT64_C(1) << 16)   /* hi */
#define CIRCUIT__D_FAIL_SHIFT 17              /* hi: failures, 17 bits */
#define CIRCUIT__D_LAST (UINT64_C(1) << 34)   /* hi: the newest result failed */
#define CIRCUIT__D_S_SHIFT 35                 /* hi: S_k, 29 bits */
/* The largest S_k a descriptor (and so the word, F = 0) holds: a failure
 * that sums more makes the epoch end instead (a fold, closed.c): once
 * per 2^29 successes at most. */
#define CIRCUIT__D_S_MAX ((UINT64_C(1) << 29) - 1)
_Static_assert(CIRCUIT_MAX_COUNT <= 65536, "a descriptor's seq (mod window) has 16 bits");
#if defined(CIRCUIT_PLANT_DESC_TAG14)
/* PLANTED BUG (tests/sched/PLANTS.md): the tag is k's
 * low 14 bits, so a stopped writer's X comes back after 8 191 closed
 * states (L1, C4) */
#define CIRCUIT__D_TAG(k) ((uint64_t)(k) & UINT64_C(0x3fff))
#else
#define CIRCUIT__D_TAG(k) ((uint64_t)(k))
#endif
static inline circuit__u128 circuit__desc_zero(uint32_t k)
{
    return (circuit__u128){CIRCUIT__D_TAG(k) | CIRCUIT__D_VALID, 0};
}
static inline bool circuit__desc_is(circuit__u128 d, uint32_t k)
{
    return (d.lo & CIRCUIT__D_VALID) && (uint32_t)d.lo == (uint32_t)CIRCUIT__D_TAG(k);
}

/* The closed window's bitmap (closed_state.c): word j (circuit__cbits) is {tag,
 * bits}: bit i of word j is 1 when the result at ring index 64j + i (its
 * position modulo the window) of the closed window is a failure; the tag is
 * the exact point k whose update last changed the word (monotone: point
 * numbers never restart). The transition that enters a closed state at its
 * first point k0 sets every word to {k0, 0} before its CAS (transition.c). */
static inline uint32_t circuit__cbits_words(uint32_t window) { return (window + 63u) / 64u; }
/* Word j of the closed bitmap: cbits0 (on the state word's line) when the
 * window is at most 64, else the array breaker_alloc places right after the
 * probe slots (no pointer field: the breaker's read-only line is full). */
static inline circuit__u128 *circuit__cbits(const circuit_breaker *b, uint32_t j)
{
    /* the words are shared and atomic: a const breaker still names them */
    return b->window <= 64 ? (circuit__u128 *)(uintptr_t)&b->s->cbits0 : b->slots + b->probes + j;
}
static inline bool circuit__tag_before(uint64_t tag, uint32_t k) { return (int32_t)((uint32_t)tag - k) < 0; }

/* True when the word {lo, hi} is closed in generation `gen` at point k. */
static inline bool circuit__closed_at_point(uint64_t lo, uint64_t hi, uint32_t gen, uint32_t k)
{
    return circuit__code(lo) == CIRCUIT__ST_CLOSED && circuit__gen(lo) == gen &&
           circuit__closed_point(hi) == k;
}

/* ---- the closed mirror (docs/design/mirror.md) ----------------------------- */
static inline uint64_t circuit__mirror_of(uint64_t closed_lo)
{
    return closed_lo & (UINT64_C(3) | (CIRCUIT__GEN_MASK << 2) | (CIRCUIT__EPOCH_MASK << 32));
}
/* The mirror's lo: closed in the generation and epoch it names, or shut
 * (state code 0). acquire: what the CAS that set it published (the set's
 * acquire of the state word came before it). */
static inline uint64_t circuit__mirror_ld(const circuit_breaker *b)
{
    return circuit__ld128_lo_acq(&b->s->mirror);
}
/* A mirror value is open (state code CLOSED) or shut (state code 0): bit 0
 * tells which. */
static inline bool circuit__mirror_open(uint64_t m) { return (m & 1u) != 0; }
void circuit__mirror_set(circuit_breaker *b);
void circuit__mirror_shut(circuit_breaker *b, circuit__u128 wi);

/* The successes ledger's key for the epoch a closed word names: {gen tag,
 * epoch id} (bit 31 set, so that no key is the ledger's initial 0), written
 * by closed_state.c and compared by it and by stats. */
static inline uint64_t circuit__ledger_key(uint64_t lo)
{
    return ((uint64_t)circuit__gen(lo) << 32) | (UINT64_C(1) << 31) | circuit__closed_epoch(lo);
}

/* ---- exact points ---------------------------------------------------------- */
typedef struct circuit__point_counts {   /* the counts at an exact point (a descriptor) */
    uint32_t seq;              /* ring index of the next result: results counted in this
                                * generation, modulo the window (< window) */
    bool full;                 /* the generation has counted window results */
    uint32_t fail;             /* failures in the window (<= window) */
    bool last_fail;            /* the newest result is a failure */
    uint32_t run;              /* its run (saturated at CIRCUIT_RUN_MAX) */
    uint64_t S;                /* cells' sum of the epoch at this point, <= CIRCUIT__D_S_MAX
                                * (0 after a fold) */
} circuit__point_counts;
/* D_k, the descriptor of exact point k with counts *c, in word.h's layout
 * (the tag is k in full). A field out of its range is a bug of this layer:
 * it aborts rather than be stored cut. */
static inline circuit__u128 circuit__desc_pack(const circuit__point_counts *c, uint32_t k)
{
    if (c->seq > CIRCUIT__D_SEQ_MASK || c->fail > (uint32_t)CIRCUIT_MAX_COUNT ||
        c->run > (uint32_t)CIRCUIT_RUN_MAX || c->S > CIRCUIT__D_S_MAX)
        circuit__abort("internal error: descriptor field out of range "
                       "(seq %u, failures %u, run %u, S %llu)",
                       c->seq, c->fail, c->run, (unsigned long long)c->S);
    uint64_t lo = CIRCUIT__D_TAG(k) | ((uint64_t)c->run << CIRCUIT__D_RUN_SHIFT) | CIRCUIT__D_VALID;
    uint64_t hi = (uint64_t)c->seq | (c->full ? CIRCUIT__D_FULL : 0) |
                  ((uint64_t)c->fail << CIRCUIT__D_FAIL_SHIFT) |
                  (c->last_fail ? CIRCUIT__D_LAST : 0) | (c->S << CIRCUIT__D_S_SHIFT);
    return (circuit__u128){lo, hi};
}
static inline void circuit__desc_unpack(circuit__u128 d, circuit__point_counts *c)
{
    c->run = (uint32_t)((d.lo >> CIRCUIT__D_RUN_SHIFT) & CIRCUIT__F31_MASK);
    c->seq = (uint32_t)(d.hi & CIRCUIT__D_SEQ_MASK);
    c->full = (d.hi & CIRCUIT__D_FULL) != 0;
    c->fail = (uint32_t)((d.hi >> CIRCUIT__D_FAIL_SHIFT) & UINT64_C(0x1ffff));
    c->last_fail = (d.hi & CIRCUIT__D_LAST) != 0;
    c->S = d.hi >> CIRCUIT__D_S_SHIFT;
}
/* The closed bitmap's update of one exact point, U(k): clear the bits of
 * the m ring indices from s on (modulo the window: the indices of the m
 * positions the point appended, which evict the m before them), then set
 * the bit of index `set` (its failure; -1: none). */
typedef struct circuit__bits_update {
    uint32_t s, m;
    int64_t set;
} circuit__bits_update;
bool circuit__point_append(const circuit_breaker *b, uint32_t k, const circuit__bits_update *virt,
                       const circuit__point_counts *c, uint64_t d, bool failure, circuit__point_counts *out);
void circuit__point_to_counts(const circuit_breaker *b, const circuit__point_counts *c, circuit_counts *out);
bool circuit__point_read(circuit_breaker *b, circuit__u128 w, circuit__point_counts *out, bool write);
/* Makes sure D_k and U(k) are in place before the word leaves point k.
 * False when w is stale. */
bool circuit__closed_help(circuit_breaker *b, circuit__u128 w, circuit__point_counts *c);
/* U(k) of the word w at point k (no intent), whose counts are ck. False
 * when D_{k-1} is gone (w is stale). */
bool circuit__bits_update_of(const circuit_breaker *b, circuit__u128 w, const circuit__point_counts *ck,
                             circuit__bits_update *u);
/* After the CAS that made point k (word w, counts c, n results appended,
 * the last a failure when `failure`): D_k, then U(k). */
void circuit__point_publish(circuit_breaker *b, circuit__u128 w, circuit__point_counts *c, uint64_t n,
                            bool failure);

/* ---- cells, ledger ------------------------------------------------------------ */
#define CIRCUIT__CELL_SEALED (UINT64_C(1) << 63)
#define CIRCUIT__CELL_COUNT_MAX UINT64_C(0xffffffff)
static inline uint64_t circuit__cell_make(uint32_t epoch, uint64_t count)
{
    return ((uint64_t)(epoch & CIRCUIT__F31_MASK) << 32) | count;
}
static inline uint32_t circuit__cell_epoch(uint64_t v)
{
    return (uint32_t)((v >> 32) & CIRCUIT__F31_MASK);
}
static inline uint64_t circuit__cell_count(uint64_t v) { return v & CIRCUIT__CELL_COUNT_MAX; }
/* The sum of the cells of `epoch` (relaxed loads, after the caller's
 * acquire of the word); *sealed / *at_limit when one cell is. */
uint64_t circuit__cells_sum(const circuit_breaker *b, uint32_t epoch, bool *sealed, bool *at_limit);
/* Seals every cell for the epoch of intent word wi and sums them; false
 * when the word left wi. */
bool circuit__cells_seal(circuit_breaker *b, circuit__u128 wi, uint64_t *sum);
/* The sum of the cells of `epoch`, acquire loads (stats). */
uint64_t circuit__cells_read(const circuit_breaker *b, uint32_t epoch);
/* Adds an epoch's sealed sum to the successes ledger once (M1). */
void circuit__ledger_add(circuit_breaker *b, circuit__u128 wi, uint64_t sum);
/* A fresh epoch id (never 0: the first epoch of a new breaker). */
uint32_t circuit__fresh_epoch(circuit_breaker *b);

/* ---- entering and leaving (transition.c) ---------------------------------- */
/* Before the breaker is shared: closed, generation 0, epoch 0, point 0,
 * D_0 and the mirror open for it. */
void circuit__closed_init(circuit_breaker *b);
/* Before the CAS that leaves closed word c: the next closed state's first
 * point. False when the word moved. */
bool circuit__closed_leave(circuit_breaker *b, circuit__u128 c);
/* Before the CAS that enters a closed state of generation `gen` from the
 * word whose low half is lo: D_{k0} and an empty bitmap; *nw the closed
 * word to CAS in. False when the word moved. */
bool circuit__closed_enter(circuit_breaker *b, uint64_t lo, uint32_t gen, circuit__u128 *nw);

#endif
