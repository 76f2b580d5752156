/*
 * The state word: its encoding, its CAS and the widening of its generation
 * tag (word.c). The floor every decision of the core stands on; it calls
 * nothing of the core but atomics.h.
 *
 * THE STATE WORD (b->core, 16 bytes, changed only by circuit__core_cas)
 *   lo  bits  0..1   state code: 0 isolated, 1 closed, 2 open, 3 half-open
 *       bits  2..31  generation, low 30 bits ("gen tag")
 *     closed (counting.c has the protocol):
 *       bits 32..58  epoch id: the cells (per-CPU success counters) of
 *                    this epoch carry it
 *       bit   59     X: exact point k counted a failure
 *       bit   60     F: exact point k folded (started this epoch): hi's
 *                    upper half is then the successes it folded
 *       bits 61..62  intent: 0 none, 1 fold, 2 failure (trip check),
 *                    3 isolate (being completed, counting.c)
 *       bit   63     asked: a failure intent whose trip said true for the
 *                    sum in hi's upper half
 *     half-open:
 *       bits 32..62  seq: results appended to the window in this state,
 *                    counted modulo seq_mod (a multiple of window <= 2^31)
 *       bit   63     no-probe-0: the open -> half-open change is made by
 *                    a call other than circuit_allow, so slot 0's
 *                    reservation (probes.c) is no probe; set by that CAS
 *                    and kept by every CAS within the state
 *     open:
 *       bits 32..62  reopens (B2) of this open period
 *   hi  closed:
 *       bits  0..31  k: the number of the exact point; a closed state
 *                    starts at k0 = the previous closed state's last k + 2
 *                    (transition.c), so that no descriptor tag of an
 *                    older state is read as one of this state
 *       bits 32..63  S_k, the sum of the epoch's cells at point k (F = 0,
 *                    at most CIRCUIT__D_S_MAX = 2^29 - 1), or the
 *                    successes folded at k (F = 1, saturated at 2^32 - 1);
 *                    in an intent word: the sum its maker read
 *       (the counts at point k are the descriptor D[k & 1], counting.c)
 *   hi  half-open:
 *       bits  0..16  failures in the window
 *       bit   17     full: the window holds `window` results
 *       bit   18     last counted outcome (1 = failure): the kind of the run
 *       bits 19..49  run length (saturates at CIRCUIT_RUN_MAX)
 *       bits 50..63  timed_out (saturates at CIRCUIT_TIMED_OUT_MAX)
 *   hi  open: the moment the open period ends (opened at + the period
 *       chosen, B1), ns, UNSIGNED: both terms are <= INT64_MAX, so the sum
 *       never wraps and retry_after = end - now is exact for every period
 *       (circuit__open_over / circuit__open_left).   isolated: 0.
 * Half-open successes are derived: (full ? window : seq) - failures.
 *
 * Every decision (count a failure, trip, close, reopen, time a probe out,
 * isolate, reset, end an epoch) is one CAS of this word from the value it
 * is computed from, so a result is counted only if its generation still
 * holds, and the result that trips or closes the breaker is part of the
 * same update as the transition (C4). Policies are asked before the CAS,
 * which is why they may be asked again when the CAS loses (L4). Every
 * transition is made by ONE function, circuit__transition (transition.c).
 * A closed success changes no shared word: it counts on its CPU's cell.
 *
 * Generation tags are 30 bits: a ticket would be confused with a later
 * generation only after 2^30 transitions while it is outstanding (each open
 * period lasts at least open_for, so at 1 ms per cycle that is over 12
 * days). The 64-bit generations given to observe and open_for, and reported
 * by get_stats, are rebuilt from the tag and `gen64`, the latest 64-bit
 * generation published, as the generation with that tag NEAREST to gen64
 * (circuit__gen_widen): gen64 may be behind the word a thread holds (its
 * maker has not raised it yet) or ahead of it (others made transitions
 * since the word is read), by far less than 2^29 either way.
 */
#ifndef CIRCUIT_WORD_H
#define CIRCUIT_WORD_H

#include "internal.h"

#define CIRCUIT__GEN_BITS 30
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
 * isolated; half-open: decoded from the word (closed words: counting.c). */
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
    return circuit__cas128_sc(&b->core, expected, desired);
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
    circuit__u128 now = circuit__ld128_acq(&b->core); /* acquire: table core */
    if (now.lo == c->lo && now.hi == c->hi)
        return true;
    *c = now;
    return false;
}

/* The 64-bit generation a tag stands for: the one with this tag nearest to
 * gen64 (see above). */
uint64_t circuit__gen_widen(const circuit_breaker *b, uint32_t tag);

#endif
