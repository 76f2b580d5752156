/*
 * The state word: its encoding, its CAS and the widening of its generation
 * tag (word.c). The floor every decision of the core stands on; it calls
 * nothing of the core but atomics.h.
 *
 * THE STATE WORD (b->core, 16 bytes, changed only by circuit__core_cas)
 *   lo  bits  0..1   state code: 0 isolated, 1 closed, 2 open, 3 half-open
 *       bits  2..31  generation, low 30 bits ("gen tag")
 *       bit   63     FAST: closed with no failure in the window (SPEC L6)
 *     slow closed / half-open:
 *       bits 32..62  seq: results appended to the window in this state,
 *                    counted modulo seq_mod (a multiple of window <= 2^31)
 *     fast closed:
 *       bits 32..62  id of this fast interval (the per-CPU records carry it)
 *     open:
 *       bits 32..62  reopens (B2) of this open period
 *   hi  slow closed / half-open:
 *       bits  0..16  failures in the window
 *       bit   17     full: the window holds `window` results
 *       bit   18     last counted outcome (1 = failure): the kind of the run
 *       bits 19..49  run length (saturates at CIRCUIT_RUN_MAX)
 *       bits 50..63  timed_out (half-open; saturates at CIRCUIT_TIMED_OUT_MAX)
 *   hi  fast closed (the counts as of the interval's start; successes
 *       counted since sit in the per-CPU records until a fold adds them):
 *       bits  0..30  seq
 *       bit   31     full
 *       bits 32..62  run of successes
 *   hi  open: the moment the open period ends (opened at + the period
 *       chosen, B1), ns, UNSIGNED: both terms are <= INT64_MAX, so the sum
 *       never wraps and retry_after = end - now is exact for every period
 *       (circuit__open_over / circuit__open_left).   isolated: 0.
 * Successes are derived: (full ? window : seq) - failures.
 *
 * Every decision (count a result, trip, close, reopen, time a probe out,
 * isolate, reset, fold) is one CAS of this word from the value it was
 * computed from, so a result is counted only if its generation still
 * holds, and the result that trips or closes the breaker is part of the
 * same update as the transition (C4). Policies are asked before the CAS,
 * which is why they may be asked again when the CAS loses (SPEC L4). Every
 * transition is made by ONE function, circuit__transition (transition.c).
 *
 * Generation tags are 30 bits: a ticket would be confused with a later
 * generation only after 2^30 transitions while it is outstanding (each open
 * period lasts at least open_for, so at 1 ms per cycle that is over 12
 * days). The 64-bit generations given to observe and open_for, and reported
 * by get_stats, are rebuilt from the tag and `gen64`, the latest 64-bit
 * generation published, as the generation with that tag NEAREST to gen64
 * (circuit__gen_widen): gen64 may be behind the word a thread holds (its
 * maker has not raised it yet) or ahead of it (others made transitions
 * since the word was read), by far less than 2^29 either way.
 */
#ifndef CIRCUIT_WORD_H
#define CIRCUIT_WORD_H

#include "internal.h"

#define CIRCUIT__GEN_BITS 30
#define CIRCUIT__GEN_MASK ((UINT64_C(1) << CIRCUIT__GEN_BITS) - 1)
#define CIRCUIT__F31_MASK UINT64_C(0x7fffffff)
#define CIRCUIT__LO_FAST (UINT64_C(1) << 63)

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
static inline bool circuit__fast(uint64_t lo) { return (lo & CIRCUIT__LO_FAST) != 0; }
/* seq (slow closed, half-open), interval id (fast) or reopens (open) */
static inline uint32_t circuit__lo31(uint64_t lo) { return (uint32_t)((lo >> 32) & CIRCUIT__F31_MASK); }
static inline uint32_t circuit__seq(uint64_t lo) { return circuit__lo31(lo); }
static inline uint64_t circuit__mklo(unsigned code, uint32_t gen, uint32_t f31)
{
    return (uint64_t)code | ((uint64_t)(gen & CIRCUIT__GEN_MASK) << 2) |
           ((uint64_t)(f31 & CIRCUIT__F31_MASK) << 32);
}
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

/* open hi: the end of the open period, unsigned (now >= 0, CLOCK_MONOTONIC) */
static inline bool circuit__open_over(uint64_t end, int64_t now) { return (uint64_t)now >= end; }
static inline int64_t circuit__open_left(uint64_t end, int64_t now) { return (int64_t)(end - (uint64_t)now); }
static inline uint64_t circuit__open_end(int64_t at, int64_t period) { return (uint64_t)at + (uint64_t)period; }

/* fast hi */
#define CIRCUIT__FHI_FULL (UINT64_C(1) << 31)
static inline uint32_t circuit__fhi_seq(uint64_t hi) { return (uint32_t)(hi & CIRCUIT__F31_MASK); }
static inline uint32_t circuit__fhi_run(uint64_t hi) { return (uint32_t)((hi >> 32) & CIRCUIT__F31_MASK); }
static inline uint64_t circuit__mkfhi(uint32_t seq, bool full, uint32_t run)
{
    return (uint64_t)(seq & CIRCUIT__F31_MASK) | (full ? CIRCUIT__FHI_FULL : 0) |
           ((uint64_t)(run & CIRCUIT__F31_MASK) << 32);
}

/* The fold ledger's key for the fast interval a fast word names: {gen tag,
 * interval id}, written by percpu.c's fold and compared by it and by stats. */
static inline uint64_t circuit__ledger_key(uint64_t fast_lo)
{
    return ((uint64_t)circuit__gen(fast_lo) << 32) | circuit__lo31(fast_lo);
}

/* ---- the CAS, and word.c ------------------------------------------------------ */

/* The CAS of the state word; the test build counts the attempts (L6 test).
 * On failure *expected is the value the word held. Inline: it is the one
 * shared write of every slow-path decision. */
static inline bool circuit__core_cas(circuit_breaker *b, circuit__u128 *expected,
                                     circuit__u128 desired)
{
#ifdef CIRCUIT_TESTING
    circuit__test_count_core_cas();
#endif
    /* sc: a release for what was prepared before (per-CPU records, slot 0,
     * the reopen count), an acquire for what the winner reads next (table:
     * core) */
    return circuit__cas128_sc(&b->core, expected, desired);
}

/* The 64-bit generation a tag stands for: the one with this tag nearest to
 * gen64 (see above). */
uint64_t circuit__gen_widen(const circuit_breaker *b, uint32_t tag);

#endif
