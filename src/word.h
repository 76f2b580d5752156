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
 *       bit   63     no-probe-0: the open -> half-open change was made by
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
 * was computed from, so a result is counted only if its generation still
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
 * since the word was read), by far less than 2^29 either way.
 */
#ifndef CIRCUIT_WORD_H
#define CIRCUIT_WORD_H

#include "internal.h"

#define CIRCUIT__GEN_BITS 30
#define CIRCUIT__GEN_MASK ((UINT64_C(1) << CIRCUIT__GEN_BITS) - 1)
#define CIRCUIT__F31_MASK UINT64_C(0x7fffffff)
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
#define CIRCUIT__SD_MAX UINT64_C(0xffffffff)

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
static inline uint32_t circuit__lo31(uint64_t lo) { return (uint32_t)((lo >> 32) & CIRCUIT__F31_MASK); }
static inline uint32_t circuit__seq(uint64_t lo) { return circuit__lo31(lo); }
static inline uint64_t circuit__mklo(unsigned code, uint32_t gen, uint32_t f31)
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

/* open hi: the end of the open period, unsigned (now >= 0, CLOCK_MONOTONIC) */
static inline bool circuit__open_over(uint64_t end, int64_t now) { return (uint64_t)now >= end; }
static inline int64_t circuit__open_left(uint64_t end, int64_t now) { return (int64_t)(end - (uint64_t)now); }
static inline uint64_t circuit__open_end(int64_t at, int64_t period) { return (uint64_t)at + (uint64_t)period; }

/* closed word */
static inline uint32_t circuit__cepoch(uint64_t lo) { return (uint32_t)((lo >> 32) & CIRCUIT__EPOCH_MASK); }
static inline unsigned circuit__cintent(uint64_t lo) { return (unsigned)((lo >> CIRCUIT__LO_INTENT_SHIFT) & 3u); }
static inline uint64_t circuit__mkclo(uint32_t gen, uint32_t epoch, bool x, bool f, unsigned intent)
{
    return (uint64_t)CIRCUIT__ST_CLOSED | ((uint64_t)(gen & CIRCUIT__GEN_MASK) << 2) |
           ((uint64_t)(epoch & CIRCUIT__EPOCH_MASK) << 32) | (x ? CIRCUIT__LO_X : 0) |
           (f ? CIRCUIT__LO_F : 0) | ((uint64_t)intent << CIRCUIT__LO_INTENT_SHIFT);
}
static inline uint32_t circuit__ck(uint64_t hi) { return (uint32_t)hi; }
static inline uint64_t circuit__csd(uint64_t hi) { return hi >> 32; }
static inline uint64_t circuit__mkchi(uint32_t k, uint64_t sd) { return (uint64_t)k | (sd << 32); }

/* The closed descriptors D_k (counting.c packs them; two 16-byte slots,
 * D[k & 1]): lo holds k in full (32 bits: the tag that "read X, check, CAS
 * X" on a slot relies on, so an X of point k comes back only after 2^31
 * writes of its slot; 0.3's first tag, k's low 14 bits, came back after
 * 8 191 and let a stopped writer overwrite a live descriptor, L1), the run
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
 * that sums more makes the epoch end instead (a fold, counting.c): once
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

/* The closed window's bitmap (counting.c): word j (circuit__cbits) is {tag,
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
    return b->window <= 64 ? (circuit__u128 *)(uintptr_t)&b->cbits0 : b->slots + b->probes + j;
}
static inline bool circuit__tag_before(uint64_t tag, uint32_t k) { return (int32_t)((uint32_t)tag - k) < 0; }

/* ---- the closed mirror ----------------------------------------------------
 *
 * THE CLOSED MIRROR (b->mirror, 16 bytes {lo, version}; word.c) lets a
 * closed call learn the state without reading the state word, whose line
 * every failure's exact point takes (docs/CONTRACT.md L6, L8). Its lo is either OPEN FOR (g, e): a closed word's state, generation
 * tag g and epoch e, nothing else (circuit__mirror_of), or SHUT: the same
 * with state code 0, naming the (g, e) it was shut for (or none).
 *
 * THE RULE: while the mirror is open for (g, e), the state word is closed in
 * generation g, epoch e. The state word leaves (g, e) only by completing an
 * intent (counting.c), and every completer shuts the mirror for (g, e)
 * before its seals and its CAS out of (g, e). So a call that reads the
 * mirror open for (g, e) reads it while the breaker is closed in g:
 * circuit_allow admits on it, and closed_success counts on its CPU's cell
 * of epoch e (the cell is sealed before the epoch ends, counting.c).
 *
 * circuit__mirror_set (anyone, after the state word was seen closed with no
 * intent): read the mirror m, THEN read the state word w (both acquire);
 * if w is closed with no intent and m is not open for w's (g, e), one CAS
 * m -> {open for (g, e), m.version + 1}.
 * circuit__mirror_shut (a completer of an intent word wi): read the mirror
 * m; unless m already is shut for wi's (g, e), CAS m -> {shut for (g, e),
 * m.version + 1}, retried while the state word still holds wi.
 *
 * Why the rule holds: every change of the mirror raises its version, so a
 * set CASes only from the very value it read before it read the word. Take
 * a set that opens the mirror for (g, e) and a completer C that leaves
 * (g, e). C's shut is in the mirror's order either after the set (then the
 * mirror is shut before C's CAS out of (g, e)) or before it: then the set's
 * read of the mirror read C's shut or a later value, so (acquire, release)
 * its read of the word came after C's read of the intent, and it found the
 * intent or a later word, never (g, e) without an intent: (g, e) with no
 * intent does not come back (an epoch id is used once; 27 bits, as for the
 * cells; tests/model/spin/mirror.pml also checks that every write moves lo
 * forward, so while ids are not reused the versions only add a margin: they
 * keep a stopped set's CAS failing even across a reused epoch id). The shut
 * never skips: it writes even when the mirror is shut
 * already for another (g, e), so a set that read that value fails. A shut
 * by a stopped completer cannot shut a later epoch's mirror: its CAS is
 * from a mirror value it read before checking the word still holds wi, and
 * a mirror set for a later epoch was set after the word left wi. Checked
 * by tests/model/spin/mirror.pml and the stopped-thread tests at
 * CIRCUIT_TP_MIRROR_BEFORE_SET and _SHUT.
 */
static inline uint64_t circuit__mirror_of(uint64_t closed_lo)
{
    return closed_lo & (UINT64_C(3) | (CIRCUIT__GEN_MASK << 2) | (CIRCUIT__EPOCH_MASK << 32));
}
/* The mirror's lo: closed in the generation and epoch it names, or shut
 * (state code 0). acquire: what the CAS that set it published (the set's
 * acquire of the state word came before it). */
static inline uint64_t circuit__mirror_ld(const circuit_breaker *b)
{
    return circuit__ld128_lo_acq(&b->mirror);
}
void circuit__mirror_set(circuit_breaker *b);
void circuit__mirror_shut(circuit_breaker *b, circuit__u128 wi);

/* The successes ledger's key for the epoch a closed word names: {gen tag,
 * epoch id} (bit 31 set, so that no key is the ledger's initial 0), written
 * by counting.c and compared by it and by stats. */
static inline uint64_t circuit__ledger_key(uint64_t lo)
{
    return ((uint64_t)circuit__gen(lo) << 32) | (UINT64_C(1) << 31) | circuit__cepoch(lo);
}

/* A failure record of the window's ring (window.c, counting.c): only
 * failures are recorded; bit 0 marks the record as one. */
#define CIRCUIT__REC_VALID (UINT64_C(1) << 63)
static inline uint64_t circuit__rec_make(uint32_t gen, uint32_t seq)
{
    return CIRCUIT__REC_VALID | ((uint64_t)(gen & CIRCUIT__GEN_MASK) << 33) | ((uint64_t)seq << 1) | 1u;
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
    CIRCUIT__SHARED_RMW();
    /* sc: a release for what was prepared before (per-CPU records, slot 0,
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
