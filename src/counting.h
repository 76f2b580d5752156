/*
 * Counting (counting.c): the result -> counts step. Its interface is listed
 * at the top of counting.c; the per-CPU lines (percpu.h) and the window's
 * ring (window.h) are its lower floor. Above transitions (a counted result
 * may trip, close or reopen the breaker), below probes and the public calls.
 */
#ifndef CIRCUIT_COUNTING_H
#define CIRCUIT_COUNTING_H

#include "message.h"
#include "percpu.h"

/* Counts one settled result of a ticket admitted in generation `gen`
 * (S2, P2, C1-C5, T2, L6): a probe's (probe = true) through the state word;
 * a closed success on this CPU's cell; a closed failure as an exact point
 * (counting.c's CLOSED comment); CIRCUIT_IGNORED by its total only; adds
 * the M1 total. `now` is read lazily when !have_now (only a trip needs it).
 * Returns false when the result is late: the state left the ticket's
 * generation. */
bool circuit__count(circuit_breaker *b, uint32_t gen, bool probe, circuit_outcome o,
                    void *call_ctx, int64_t now, bool have_now);

/* One attempt to count a probe timeout, due at `due`, into the half-open
 * word *c (P1): asks the probe policy with *c's counts plus the timeout,
 * then CASes the word from *c to the counted word, or makes the transition
 * the policy asked for (a reopen starts its open period at `due`).
 * COUNTED: this call's CAS won (the word holds the timeout, or left *c's
 * generation by it); SATURATED: timed_out is at CIRCUIT_TIMED_OUT_MAX and
 * the policy said stay, so there is nothing to write; LOST: the word moved,
 * *c is its new value. Adds no total: the caller (probes.c) makes sure each
 * timeout is counted once, and adds M1's total. */
typedef enum circuit__timeout_result {
    CIRCUIT__TIMEOUT_COUNTED,
    CIRCUIT__TIMEOUT_SATURATED,
    CIRCUIT__TIMEOUT_LOST
} circuit__timeout_result;
circuit__timeout_result circuit__count_timeout(circuit_breaker *b, circuit__u128 *c, int64_t due,
                                               void *call_ctx);

/* Before the CAS that enters half-open in generation `gen` from the open
 * word whose low half is lo: the window's records an older half-open state
 * left under gen's 30-bit tag are emptied (window.c circuit__ring_start).
 * False when the word moved. */
bool circuit__halfopen_window_start(circuit_breaker *b, uint32_t gen, uint64_t lo);

/* The counts the word c stands for: zero while open or isolated; closed:
 * its exact point's plus the successes the cells hold (read, not sealed). */
void circuit__counts(const circuit_breaker *b, circuit__u128 c, circuit_counts *out);

/* ---- closed (the exact points, counting.c's CLOSED comment) ------------- */
typedef struct circuit__cc {   /* the counts at an exact point (a descriptor) */
    uint32_t seq;              /* ring index of the next result: results counted in this
                                * generation, modulo the window (< window) */
    bool full;                 /* the generation has counted window results */
    uint32_t fail;             /* failures in the window (<= window) */
    bool last_fail;            /* the newest result was a failure */
    uint32_t run;              /* its run (saturated at CIRCUIT_RUN_MAX) */
    uint64_t S;                /* cells' sum of the epoch at this point, <= CIRCUIT__D_S_MAX
                                * (0 after a fold) */
} circuit__cc;
/* D_k, the descriptor of exact point k with counts *c, in word.h's layout
 * (the tag is k in full). A field out of its range is a bug of this layer:
 * it aborts rather than be stored cut. */
static inline circuit__u128 circuit__desc_pack(const circuit__cc *c, uint32_t k)
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
static inline void circuit__desc_unpack(circuit__u128 d, circuit__cc *c)
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
typedef struct circuit__upd {
    uint32_t s, m;
    int64_t set;
} circuit__upd;
typedef enum circuit__closed_result { CIRCUIT__COUNTED, CIRCUIT__LATE } circuit__closed_result;
bool circuit__cc_apply(const circuit_breaker *b, uint32_t k, const circuit__upd *virt,
                       const circuit__cc *c, uint64_t d, bool failure, circuit__cc *out);
void circuit__cc_counts(const circuit_breaker *b, const circuit__cc *c, circuit_counts *out);
bool circuit__closed_cc(circuit_breaker *b, circuit__u128 w, circuit__cc *out, bool write);
bool circuit__closed_help(circuit_breaker *b, circuit__u128 w, circuit__cc *c);
/* Completes the intent of closed word wi (anyone may; the same decision). */
void circuit__complete(circuit_breaker *b, circuit__u128 wi, int64_t *now, bool *have_now,
                       void *call_ctx);
/* A closed success's count (counting.c's A SUCCESS): the fast path here,
 * inlined into circuit_done; everything else out of line. */
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
/* the rest of a closed success: the mirror m was shut, or the cell sealed,
 * of another epoch or at its limit */
circuit__closed_result circuit__closed_success_slow(circuit_breaker *b, uint32_t gen,
                                                   void *call_ctx, uint64_t m, uint64_t *cell);
static inline circuit__closed_result circuit__closed_success(circuit_breaker *b, uint32_t gen,
                                                             void *call_ctx)
{
    uint64_t *cell = &circuit__my_cpu(b)->cell;
    /* The closed mirror (word.h): open for (gen, e) only while the word is
     * closed in gen, epoch e, and the cell of e is sealed before e ends. So
     * an unsealed cell of e counts the success in gen without reading the
     * word, whose line every failure takes. acquire: the epoch's cells as
     * its start left them. */
    uint64_t m = circuit__mirror_ld(b);
    if (circuit__code(m) == CIRCUIT__ST_CLOSED && circuit__gen(m) == gen) {
        uint32_t epoch = circuit__cepoch(m);
        uint64_t v = circuit__ld_rlx(cell); /* relaxed: the CAS below decides */
        CIRCUIT__HOOK(CIRCUIT_TP_FAST_BEFORE_COUNT);
        while (circuit__cell_epoch(v) == epoch && !(v & CIRCUIT__CELL_SEALED) &&
               circuit__cell_count(v) < CIRCUIT__CELL_COUNT_MAX) {
            /* relaxed: a seal is an RMW on this cell, so it reads this
             * count or makes this CAS fail */
            if (circuit__cas_rlx(cell, &v, v + 1))
                return CIRCUIT__COUNTED; /* L6: on this CPU's line */
        }
    }
    return circuit__closed_success_slow(b, gen, call_ctx, m, cell);
}
circuit__closed_result circuit__closed_failure(circuit_breaker *b, uint32_t gen, int64_t *now,
                                               bool *have_now, void *call_ctx);
/* isolate from closed (an intent); false when *w moved first (re-read). */
bool circuit__closed_isolate(circuit_breaker *b, circuit__u128 *w, int64_t now, void *call_ctx);
/* ends the epoch of closed word *w (a fold intent, tests and count limits) */
bool circuit__closed_fold(circuit_breaker *b, circuit__u128 *w);
uint64_t circuit__cells_read(const circuit_breaker *b, uint32_t epoch);
/* a reader's counts at closed word w plus `cells` successes since its point;
 * returns the word they belong to (a newer one, maybe not closed, when w was
 * overtaken during the read): report its state and generation */
circuit__u128 circuit__closed_counts_at(const circuit_breaker *b, circuit__u128 w,
                                        const uint64_t *cells, circuit_counts *out);

#endif
