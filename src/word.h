/*
 * The state word (b->s->core, 16 bytes): its encoding, its CAS and the
 * widening of its generation tag (word.c). The floor every decision of the
 * core stands on; it calls nothing of the core but atomics.h.
 *
 * INVARIANTS
 *   - the word changes only by circuit__core_cas, from the value a decision
 *     is computed from: a result counts only while its generation holds,
 *     and the result that trips or closes is in the same CAS as the
 *     transition (C4); policies are asked before it, so they may be asked
 *     again when it loses (L4);
 *   - lo bits 0..1 are the state, bits 2..31 the generation's low 30 bits;
 *     a tag names the generation nearest to gen64 (circuit__gen_widen);
 *   - half-open successes are derived: (full ? window : seq) - failures.
 * The layout of every state, bit by bit, and the bounds of the tags:
 * docs/design/state-word.md; the closed layout: closed_state.h.
 */
#ifndef CIRCUIT_WORD_H
#define CIRCUIT_WORD_H

#include "internal.h"

#define CIRCUIT__GEN_MASK ((UINT64_C(1) << CIRCUIT__GEN_BITS) - 1)
#define CIRCUIT__F31_MASK UINT64_C(0x7fffffff)

/* internal state codes (lo bits 0..1) */
#define CIRCUIT__ST_ISOLATED 0u
#define CIRCUIT__ST_CLOSED 1u
#define CIRCUIT__ST_OPEN 2u
#define CIRCUIT__ST_HALF_OPEN 3u

/* ---- state word encoding ------------------------------------------------ */
/* The state code of a word's low half (circuit__code), and the public state
 * it stands for. */
static inline unsigned circuit__code(uint64_t lo) { return (unsigned)(lo & 3u); }
static inline circuit_state circuit__pub_state(unsigned code)
{
    return code == CIRCUIT__ST_ISOLATED ? CIRCUIT_ISOLATED : (circuit_state)code;
}
static inline uint32_t circuit__gen(uint64_t lo) { return (uint32_t)((lo >> 2) & CIRCUIT__GEN_MASK); }
/* seq (half-open) or reopens (open) */
static inline uint32_t circuit__lo_count(uint64_t lo) { return (uint32_t)((lo >> 32) & CIRCUIT__F31_MASK); }
static inline uint32_t circuit__seq(uint64_t lo) { return circuit__lo_count(lo); }
static inline uint64_t circuit__word_lo(unsigned code, uint32_t gen, uint32_t f31)
{
    return (uint64_t)code | ((uint64_t)(gen & CIRCUIT__GEN_MASK) << 2) |
           ((uint64_t)(f31 & CIRCUIT__F31_MASK) << 32);
}
/* half-open lo: slot 0's reservation is no probe (layout above) */
#define CIRCUIT__LO_NO_PROBE0 (UINT64_C(1) << 63)
static inline uint32_t circuit__gen_next(uint32_t gen) { return (gen + 1) & (uint32_t)CIRCUIT__GEN_MASK; }

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

/* hi with one more probe timeout (half-open), saturating. */
static inline uint64_t circuit__hi_add_timeout(uint64_t hi)
{
    uint64_t to = circuit__hi_to(hi);
    if (to < (uint64_t)CIRCUIT_TIMED_OUT_MAX)
        to++;
    return (hi & ~(CIRCUIT__HI_TO_MASK << CIRCUIT__HI_TO_SHIFT)) | (to << CIRCUIT__HI_TO_SHIFT);
}

/* The counts a word that is not closed stands for: zero while open or
 * isolated; half-open: decoded from the word (closed words: counting.c, closed.c). */
static inline void circuit__word_counts(const circuit_breaker *b, circuit__u128 c,
                                        circuit_counts *out)
{
    unsigned code = circuit__code(c.lo);
    if (code == CIRCUIT__ST_OPEN || code == CIRCUIT__ST_ISOLATED) {
        *out = (circuit_counts){0, 0, 0, 0, 0};
        return;
    }
    int64_t n = (c.hi & CIRCUIT__HI_FULL) ? (int64_t)b->window : (int64_t)circuit__seq(c.lo);
    int64_t f = circuit__hi_fail(c.hi);
    int64_t run = circuit__hi_run(c.hi);
    bool last_fail = (c.hi & CIRCUIT__HI_LAST_FAIL) != 0;
    out->successes = n - f;
    out->failures = f;
    out->consecutive_successes = last_fail ? 0 : run;
    out->consecutive_failures = last_fail ? run : 0;
    out->timed_out = circuit__hi_to(c.hi);
}

/* open hi: the end of the open period, unsigned (now >= 0, CLOCK_MONOTONIC) */
static inline bool circuit__open_over(uint64_t end, int64_t now) { return (uint64_t)now >= end; }
static inline int64_t circuit__open_left(uint64_t end, int64_t now) { return (int64_t)(end - (uint64_t)now); }
static inline uint64_t circuit__open_end(int64_t at, int64_t period) { return (uint64_t)at + (uint64_t)period; }

/* ---- the CAS, and word.c ------------------------------------------------------ */

/* The CAS of the state word; the test build counts the attempts (L6 test).
 * On failure *expected is the value the word held. Inline: it is the one
 * shared write of every slow-path decision. */
static inline bool circuit__core_cas(circuit_breaker *b, circuit__u128 *expected,
                                     circuit__u128 desired)
{
    CIRCUIT__CORE_CAS_COUNT();
    CIRCUIT__SHARED_RMW();
    /* sc: a release for what is prepared before (per-CPU records, slot 0,
     * the reopen count), an acquire for what the winner reads next (table:
     * core) */
    return circuit__cas128_sc(&b->s->core, expected, desired);
}

/* True when the state word still holds *c (read again with acquire: table
 * core); otherwise *c becomes what it holds now. The second read of "word,
 * clock, word again" (circuit_get_state, circuit_get_stats): an answer
 * made from a clock read stands for a state the word held across it. */
static inline bool circuit__core_still(const circuit_breaker *b, circuit__u128 *c)
{
#if defined(CIRCUIT_PLANT_STATE_READ_STALE)
    /* PLANTED BUG (tests/sched/PLANTS.md): an open word
     * read before the clock is taken as still there (S5, M1) */
    (void)b;
    (void)c;
    return true;
#endif
    circuit__u128 now = circuit__ld128_acq(&b->s->core); /* acquire: table core */
    if (now.lo == c->lo && now.hi == c->hi)
        return true;
    *c = now;
    return false;
}

/* The 64-bit generation a tag stands for: the one with this tag nearest to
 * gen64 (see above). */
uint64_t circuit__gen_widen(const circuit_breaker *b, uint32_t tag);

#endif
