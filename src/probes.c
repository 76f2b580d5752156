/*
 * Probe slots, probe timeouts and the other time-driven change (open ->
 * half-open).
 *
 * OWNERSHIP: a bitmap of `probes` bits, 32 per 8-byte word, each word tagged
 * with the generation its bits belong to: a word of an older generation reads
 * as all-free, and a stale ticket's bit can never be cleared in a later
 * generation. A bit is taken and given back by CAS on its word. Tags are the
 * generation's low 30 bits, which come back after 2^30 transitions (an
 * operator isolate/reset loop: minutes), so entering half-open empties what
 * an older half-open state left under the new tag (halfopen_start: busy
 * slot records, bitmap bits, the window's records; O(window + probes) loads
 * per open period).
 *
 * IDENTITY AND TIME: each slot also has a 16-byte record {tag, due_ns}, tag =
 * {generation, reuse sequence, busy}, changed by cmpxchg16b. A ticket names
 * its slot by (index, generation, reuse), so releasing or settling a stale
 * ticket can never free a newer probe's slot, even in the same generation
 * after a timeout handed the slot to another call (T6). Whoever wins the
 * CAS that makes a record not-busy (done or release), or the CAS that takes
 * it for a timeout (TIMEOUTS, b), owns the slot's end: a slot is freed
 * exactly once (T5).
 *
 * TIMEOUTS (P1): the next allow or done that finds the earliest possible
 * due time (`probe_hint`, a lower bound kept with a version number) in the
 * past scans the busy slots of the current generation, and times out those
 * due, earliest first, each as of its due moment: a reopen caused by a
 * timeout starts its open period at the due time. All probes share one
 * timeout, so no heap is needed: a scan collects up to 64 due slots in order
 * and repeats if there were more. The scan costs O(probes / 32 + busy) and
 * runs only when a timeout may have fallen due.
 *
 * ONE TIMEOUT, COUNTED ONCE (P1, L1). Freeing a due probe's slot and then
 * counting its timeout as two separate steps loses the timeout: a scanner
 * stopped in between lets the slot be reused and the state move on, and the
 * count then finds another generation. So a timeout keeps its slot until it
 * is counted, and is counted through a CLAIM that every call meeting it
 * finishes (helping), exactly once. The claim word `probe_claim` holds at
 * most one timeout at a time: {n, t0, slot, gen, reuse, active}, n the
 * number of claims made (so the word never takes a value twice), t0 the
 * state word's timed_out when the claim was made.
 *   a. claim: read the claim word (idle), the slot (busy, this probe's tag,
 *      due), the state word (half-open, the slot's generation: t0), then
 *      CAS the claim word from the idle value read. Only a counted timeout
 *      changes timed_out within a generation, and none is counted while
 *      the claim word stays idle, so t0 is still the word's at the CAS.
 *   b. take the slot (anyone): CAS the record from {tag} to {tag, TAKEN}.
 *      From here its probe's done or release cannot free it (they expect
 *      {tag}); if they freed it first, the probe settled before its timeout
 *      by their clock: nothing is counted. The bit stays set: no other
 *      probe can be admitted to the slot before the timeout is counted.
 *   c. count (anyone): while the state word is half-open in `gen` with
 *      timed_out = t0, one attempt of counting.c's count_timeout from that
 *      word. Its CAS succeeds for one thread only: afterwards timed_out is
 *      t0 + 1 or the generation has moved on, and every later attempt
 *      stops there. A generation that moved on before the count means the
 *      call that moved it ran, by its clock, before the due time (every
 *      call at or after it helps first): the timeout is then moot.
 *   d. retire (anyone): CAS the record from {tag, TAKEN} to not-busy (its
 *      winner clears the bit), then CAS the claim word to idle.
 * Every call that scans meets a claim in progress (the claim word is read
 * before each claim; a taken slot is still busy and due, and a scan that
 * finds one taken reads the claim word again) and finishes it before it
 * claims another or returns, so a thread stopped anywhere in a-d
 * stops nobody, and a stopped thread that resumes finds its CASes fail or
 * its checks say "done". At CIRCUIT_TIMED_OUT_MAX the word cannot show a
 * count: the policy is asked (P1) and, a pure policy (L4) having said
 * "stay" when that same word was made, says it again, so nothing is
 * written, and the winner of d's record CAS adds the total instead.
 * M1's timed_out total is added by the one CAS that counts. tests/model/
 * spin/timeout.pml checks a-d exhaustively for two probes and three threads
 * (and catches the old free-then-count, a count without the t0 check and a
 * scan that takes a taken slot for counted); tests/test_p1_stopped_scanner.c
 * stops a thread at each step (CIRCUIT_TP_TIMEOUT_*).
 *
 * SLOT 0 AND OPEN -> HALF-OPEN (S3; P1 and S4). Only
 * circuit_allow admits a probe. Every call that tries the change reserves
 * slot 0 first (slot0_reserve: its record busy, marked SLOT_RESERVED in its
 * due half, its bit set), and the transition's CAS itself says what the
 * reservation is: made by an allow, it is that allow's probe from the CAS
 * on; made by any other call (a late done, isolate, reset), the new word
 * carries CIRCUIT__LO_NO_PROBE0 and the reservation is no probe, from that
 * same CAS, whether or not its maker ever runs again. Such a reservation
 * (slot0_phantom) is never timed out (the scan skips it: no timed_out, no
 * probe-policy call), is not counted in probes_in_flight, and is taken over
 * by the next admission (slot0_adopt: one CAS of its record, which keeps
 * the bit it already holds), so no allow is refused for it. The mark stays
 * for the whole half-open state (every CAS within it keeps it); the
 * reservation is told apart from a later probe in slot 0 by SLOT_RESERVED,
 * which only slot0_reserve writes.
 *
 * MEMORY ORDER: every "read X, check the state word, CAS X" reads X with
 * ACQUIRE (bitmap words, slot records), so the check cannot pass before the
 * read. The probe admission and the timeout scan form a Dekker pair: an
 * admission writes its slot record then reads `probe_scans` and the hint; a
 * scan increments `probe_scans` then reads the slot records. Each side has a
 * full fence between its store and its load (circuit__fence_sc), so at
 * least one of them sees the other: either the scan sees the new record, or
 * the admission sees the scan and bumps the hint's version so that the
 * scan's raise of the hint fails.
 *
 * Written for this project: neither ConcurrencyKit (ck_bitmap has no
 * generation tag and no find-and-set) nor liburcu offers this.
 */
#include <string.h>

#include "counting.h"
#include "probes.h"
#include "transition.h"

/* CIRCUIT_PLANT_PHANTOM_PROBE: a planted defect for the schedule checker
 * to find (test builds only). A call other than circuit_allow that makes
 * open -> half-open leaves slot 0's reservation as a probe and frees it only
 * after its CAS: stopped in between, the reservation times out (timed_out,
 * a probe-policy call) and holds its slot meanwhile. */
#if defined(CIRCUIT_PLANT_PHANTOM_PROBE) && !defined(CIRCUIT_TESTING)
#error "CIRCUIT_PLANT_PHANTOM_PROBE is a defect planted for the test build only"
#endif

#define SLOT_BUSY UINT64_C(1)
/* tag: generation bits 33..62 | reuse bits 1..32 | busy bit 0; bit 63: */
#define SLOT_TAKEN (UINT64_C(1) << 63) /* a timeout took the slot from its probe (b) */
/* due half: due_ns (>= 0, so bit 63 is free) | bit 63: */
#define SLOT_RESERVED (UINT64_C(1) << 63) /* slot 0's reservation (slot0_reserve) */

static inline int64_t slot_due(uint64_t hi) { return (int64_t)(hi & ~SLOT_RESERVED); }

static inline uint64_t slot_tag(uint32_t gen, uint32_t reuse)
{
    return ((uint64_t)(gen & CIRCUIT__GEN_MASK) << 33) | ((uint64_t)reuse << 1) | SLOT_BUSY;
}
static inline uint32_t slot_gen(uint64_t tag) { return (uint32_t)((tag >> 33) & CIRCUIT__GEN_MASK); }
static inline uint32_t slot_reuse(uint64_t tag) { return (uint32_t)(tag >> 1); }

static inline uint32_t bm_gen(uint64_t w) { return (uint32_t)((w >> 32) & CIRCUIT__GEN_MASK); }

/* Slot 0's record r is the reservation made before the CAS into half-open
 * generation `gen`, not yet taken over by a probe. It is no probe when gen's
 * word carries CIRCUIT__LO_NO_PROBE0 (SLOT 0 above). */
static inline bool slot0_phantom(circuit__u128 r, uint32_t gen)
{
    return (r.lo & (SLOT_BUSY | SLOT_TAKEN)) == SLOT_BUSY && slot_gen(r.lo) == gen &&
           (r.hi & SLOT_RESERVED);
}

static inline uint32_t bm_limit(const circuit_breaker *b, uint32_t word)
{
    uint32_t rem = b->probes % 32u;
    if (word == b->bitmap_words - 1 && rem != 0)
        return (UINT32_C(1) << rem) - 1;
    return UINT32_MAX;
}

static void hint_lower(circuit_breaker *b, int64_t due);

static inline uint32_t core_gen(const circuit_breaker *b)
{
    /* acquire: callers check the word after reading what they will CAS */
    return circuit__gen(circuit__ld128_lo_acq(&b->core));
}

static bool slot_acquire(circuit_breaker *b, uint32_t gen, uint32_t *slot, bool *stale)
{
    *stale = false;
    for (uint32_t i = 0; i < b->bitmap_words; i++) {
        uint64_t w = circuit__ld_acq(&b->bitmap[i]); /* acquire: checked below */
        for (;;) {
            uint32_t bits;
            if (bm_gen(w) == gen) {
                bits = (uint32_t)w;
            } else {
                /* Another generation's word: older (it reads as empty) unless
                 * we are the stale party. The state word decides. */
                if (core_gen(b) != gen) {
                    *stale = true;
                    return false;
                }
                bits = 0;
            }
            uint32_t free_bits = ~bits & bm_limit(b, i);
            if (!free_bits)
                break;
            uint32_t bit = (uint32_t)__builtin_ctz(free_bits);
            uint64_t nw = ((uint64_t)gen << 32) | bits | (UINT32_C(1) << bit);
            /* acquire on failure: the value returned is checked again */
            if (circuit__cas_acq(&b->bitmap[i], &w, nw)) {
                *slot = i * 32u + bit;
                return true;
            }
        }
    }
    return false;
}

static void bit_clear(circuit_breaker *b, uint32_t slot, uint32_t gen)
{
    uint64_t *word = &b->bitmap[slot / 32u];
    uint64_t mask = UINT64_C(1) << (slot % 32u);
    uint64_t w = circuit__ld_acq(word); /* acquire: table bitmap */
    /* release: the slot record was made not-busy before its bit is freed,
     * so the next owner of the bit sees that record */
    while (bm_gen(w) == gen && (w & mask)) {
        if (circuit__cas_rel(word, &w, w & ~mask))
            return;
    }
}

/* Before the CAS that makes open -> half-open (generation `gen`), whoever
 * tries it makes sure that probe slot 0 is reserved for the new generation:
 * its record busy with a due time (marked SLOT_RESERVED), its bit set, and
 * the timeout hint no later than that due time. The CAS decides what it is:
 * an allow's CAS makes it that allow's probe slot, so the call that makes
 * the transition is admitted even when others race for the slots (S3),
 * and a winner stopped right after its CAS still has a probe that times out
 * (P1); any other call's CAS marks the word CIRCUIT__LO_NO_PROBE0 and the
 * reservation is no probe (SLOT 0 above). Losers never touch it again. Everything is written only while the
 * breaker is still open in the generation before `gen` (checked after
 * reading each word, and the CAS from the value read fails if the word moved
 * since), so a stale caller cannot damage a later half-open state.
 * Returns false when the breaker is no longer in that open state; otherwise
 * *reuse is the reservation's reuse sequence. */
static bool slot0_reserve(circuit_breaker *b, uint32_t gen, uint64_t open_lo, uint64_t open_end,
                          int64_t now, uint32_t *reuse)
{
    circuit__u128 *s = &b->slots[0];
    circuit__u128 cur = circuit__ld128_acq(s); /* acquire: checked below */
    /* A reservation for this open period was made at a moment >= its end,
     * so it is due at open_end + probe_timeout or later; a busy record with
     * gen's tag due earlier is an older half-open state's (2^30 transitions
     * ago), left by a ticket released after its timeout fell due. */
    int64_t fresh_due = circuit__sat_add((int64_t)open_end, b->cfg.probe_timeout_ns);
    for (;;) {
#if defined(CIRCUIT_PLANT_HALFOPEN_ALIAS_SLOTS)
        /* PLANTED BUG (tests/sched/PLANTS.md): an old
         * busy record under gen's tag is taken for the reservation */
        (void)fresh_due;
        if ((cur.lo & SLOT_BUSY) && slot_gen(cur.lo) == gen) {
#else
        if ((cur.lo & SLOT_BUSY) && slot_gen(cur.lo) == gen &&
            slot_due(cur.hi) >= fresh_due) {
#endif
            /* reserved already (by us or a racer). Whoever wins the
             * transition CAS owns it: its due time must be no earlier than
             * the winner's own clock + probe_timeout (TM2), so a racer's
             * reservation from an earlier clock read is raised to ours
             * while the word is still open. The due is then the latest such
             * read, a moment inside the winner's call. */
            int64_t mine = circuit__sat_add(now, b->cfg.probe_timeout_ns);
#if defined(CIRCUIT_PLANT_RESERVE_STALE_DUE) || defined(CIRCUIT_PLANT_HALFOPEN_ALIAS_SLOTS)
            /* PLANTED BUG (tests/sched/PLANTS.md): the racer's due is kept
             * (HALFOPEN_ALIAS_SLOTS: the code it came back from kept it too) */
            mine = slot_due(cur.hi);
#endif
            if (slot_due(cur.hi) >= mine) {
                *reuse = slot_reuse(cur.lo);
                break;
            }
            /* acquire: the check follows the read above */
            if (circuit__ld128_lo_acq(&b->core) != open_lo)
                return false;
            /* this CAS may land after the transition, on the winner's live
             * probe: a scan that read the older due counts the new one
             * (timeout_one) */
            CIRCUIT__HOOK(CIRCUIT_TP_RESERVE_BEFORE_RAISE);
            /* sc: table slots */
            if (circuit__cas128_sc(s, &cur, (circuit__u128){cur.lo, (uint64_t)mine | SLOT_RESERVED})) {
                *reuse = slot_reuse(cur.lo);
                break;
            }
            continue;
        }
        /* acquire: the check follows the read above */
        if (circuit__ld128_lo_acq(&b->core) != open_lo)
            return false;
        int64_t due = circuit__sat_add(now, b->cfg.probe_timeout_ns);
        circuit__u128 nw = {slot_tag(gen, slot_reuse(cur.lo) + 1), (uint64_t)due | SLOT_RESERVED};
        hint_lower(b, due);
        /* sc: table slots */
        if (circuit__cas128_sc(s, &cur, nw)) {
            *reuse = slot_reuse(nw.lo);
            break;
        }
    }
    uint64_t w = circuit__ld_acq(&b->bitmap[0]); /* acquire: checked below */
    for (;;) {
        /* gen's tag with bit 0 set: reserved (by us or a racer). gen's tag
         * with bit 0 clear is an older half-open state's word (2^30
         * transitions ago, its slot 0 freed): no bit of gen but this one is
         * set before the transition CAS, so the word becomes {gen, 1} */
#if defined(CIRCUIT_PLANT_SLOT0_BIT)
        /* PLANTED BUG (tests/sched/PLANTS.md): gen's tag
         * with bit 0 clear is taken for the reservation's bit */
        if (bm_gen(w) == gen)
            return true;
#else
        if (bm_gen(w) == gen && (w & 1u))
            return true;
#endif
        /* acquire: the check follows the read above */
        if (circuit__ld128_lo_acq(&b->core) != open_lo)
            return false;
        /* acquire on failure: re-checked; the transition CAS that follows
         * (release) publishes the bit with the word */
        if (circuit__cas_acq(&b->bitmap[0], &w, ((uint64_t)gen << 32) | 1u))
            return true;
    }
}

/* Before the CAS that enters half-open in generation `gen` from the open
 * word whose low half is open_lo: what older half-open states left under
 * gen's 30-bit tag (it comes back after 2^30 transitions) is emptied, so
 * that the new state does not read it as its own: the window's failure
 * records (counting.h), the busy records of slots 1.. (left by tickets
 * released after their timeout fell due, whose timeouts a later state
 * never counts), and the bitmap's bits (all but slot 0's: slot0_reserve
 * sets that one, and tells the reservation's record from an old one by its
 * due time). No
 * record or bit of gen is made before the CAS except slot 0's, so anything
 * else tagged gen is old. Each write only while the word still holds
 * open_lo (read X, check, CAS X). O(window + probes) loads, once per open
 * period (by each thread that tries the transition), and only once the
 * generation has passed 2^30 (before that no tag repeats). False when the word
 * moved. Left as bounds: a thread stopped between its check and its CAS
 * while the transition is made and the new state writes a window record or
 * bitmap word equal bit for bit to the old one it read could empty it (it
 * needs both the 2^30 tag coincidence and that stop; a slot record cannot
 * repeat: its reuse count grows); and with a probe_timeout so large that
 * both due times saturate at INT64_MAX, slot 0's old record cannot be told
 * from a reservation. */
static bool halfopen_start(circuit_breaker *b, uint32_t gen, uint64_t open_lo)
{
#if !defined(CIRCUIT_PLANT_HALFOPEN_ALIAS_WINDOW)
    if (!circuit__halfopen_window_start(b, gen, open_lo))
        return false;
#else
    /* PLANTED BUG (tests/sched/PLANTS.md): the window's
     * failure records under gen's tag are left in place */
#endif
#if defined(CIRCUIT_PLANT_HALFOPEN_ALIAS_SLOTS)
    /* PLANTED BUG (tests/sched/PLANTS.md): busy slot
     * records and bitmap bits under gen's tag are left in place */
    return true;
#endif
    for (uint32_t i = 1; i < b->probes; i++) {
        circuit__u128 *s = &b->slots[i];
        circuit__u128 cur = circuit__ld128_acq(s); /* acquire: checked below */
        while ((cur.lo & SLOT_BUSY) && slot_gen(cur.lo) == gen) {
            /* acquire: the check follows the read above */
            if (circuit__ld128_lo_acq(&b->core) != open_lo)
                return false;
            /* not busy, its reuse kept (tickets name it); sc: table slots */
            circuit__u128 nw = {cur.lo & ~(SLOT_BUSY | SLOT_TAKEN), 0};
            if (circuit__cas128_sc(s, &cur, nw))
                break;
        }
    }
    for (uint32_t j = 0; j < b->bitmap_words; j++) {
        uint64_t w = circuit__ld_acq(&b->bitmap[j]); /* acquire: checked below */
        while (bm_gen(w) == gen) {
            uint64_t nw;
            if (j == 0 && (w & 1u)) {
                if ((uint32_t)w == 1u)
                    break; /* slot 0's reservation alone */
                nw = (w & ~UINT64_C(0xffffffff)) | 1u; /* its bit kept */
            } else {
                /* An old word is re-tagged as the generation before gen, not
                 * left {gen, 0}: a slot0_reserve stopped after reading
                 * {gen, 0} would find that value again once this state's
                 * probes have come and gone, and set a bit nobody frees */
                nw = (uint64_t)((gen - 1u) & CIRCUIT__GEN_MASK) << 32;
#if defined(CIRCUIT_PLANT_SEAM_BIT0_ABA) || defined(CIRCUIT_PLANT_SLOT0_BIT)
                /* PLANTED BUG (tests/sched/PLANTS.md): {gen, 0} is left */
                if ((uint32_t)w == 0u)
                    break;
                nw = w & ~UINT64_C(0xffffffff);
#endif
            }
            /* acquire: the check follows the read above */
            if (circuit__ld128_lo_acq(&b->core) != open_lo)
                return false;
            /* acquire on failure: re-checked; the transition CAS that
             * follows (release) publishes it */
            if (circuit__cas_acq(&b->bitmap[j], &w, nw))
                break;
        }
    }
    return true;
}

/* Writes the record of a slot whose bit the caller owns in `gen`. Only while
 * the breaker is still in `gen` (checked after reading the record; the CAS
 * from that value fails if it moved since): a caller stopped between taking
 * the bit and writing the record must not overwrite the record of a probe
 * admitted to the same slot in a later half-open state. */
static bool slot_occupy(circuit_breaker *b, uint32_t slot, uint32_t gen, int64_t due,
                        uint32_t *reuse)
{
    circuit__u128 *s = &b->slots[slot];
    circuit__u128 cur = circuit__ld128_acq(s); /* acquire: checked below */
    for (;;) {
        if (core_gen(b) != gen)
            return false;
        uint32_t r = slot_reuse(cur.lo) + 1;
        circuit__u128 nw = {slot_tag(gen, r), (uint64_t)due};
        /* sc: table slots */
        if (circuit__cas128_sc(s, &cur, nw)) {
            *reuse = r;
            return true;
        }
    }
}

/* Frees a slot whose record still carries the ticket's tag; the winner of
 * the record CAS (done, release or timeout) frees the bit: exactly once. */
static bool slot_free(circuit_breaker *b, uint32_t slot, uint32_t gen, uint32_t reuse,
                      bool unless_due, int64_t now)
{
    circuit__u128 *s = &b->slots[slot];
    uint64_t tag = slot_tag(gen, reuse);
    circuit__u128 cur = circuit__ld128_acq(s); /* acquire: table slots */
    for (;;) {
        if (cur.lo != tag)
            return false; /* timed out, or already freed */
        if (unless_due && slot_due(cur.hi) <= now)
            return false; /* its timeout fell due: the next allow/done counts it */
        circuit__u128 nw = {tag & ~SLOT_BUSY, cur.hi};
        /* sc: table slots */
        if (circuit__cas128_sc(s, &cur, nw)) {
            bit_clear(b, slot, gen);
            return true;
        }
    }
}

bool circuit__slot_release(circuit_breaker *b, uint32_t slot, uint32_t gen, uint32_t reuse)
{
    return slot_free(b, slot, gen, reuse, false, 0);
}

bool circuit__slot_release_unless_due(circuit_breaker *b, uint32_t slot, uint32_t gen,
                                      uint32_t reuse, int64_t now)
{
    return slot_free(b, slot, gen, reuse, true, now);
}

static void hint_lower(circuit_breaker *b, int64_t due)
{
    /* Always bump the version, even when the due time is not lower, so that a
     * scan that started before this admission cannot raise the hint past it. */
    circuit__u128 cur = circuit__ld128_acq(&b->probe_hint);
    for (;;) {
        uint64_t d = (int64_t)cur.lo < due ? cur.lo : (uint64_t)due;
        circuit__u128 nw = {d, cur.hi + 1};
        if (circuit__cas128_sc(&b->probe_hint, &cur, nw)) /* sc: table probe_hint */
            return;
    }
}

/* After a probe's record is written, make sure the hint covers its due
 * time. Usually it already does (the hint is the earliest due time and this
 * one is later) and no scan is running, and then this is a fence and two
 * loads of a line nobody writes in steady state. A scan that starts after
 * the load of probe_scans sees the record; one that already ran and raised
 * the hint past `due` is seen in the hint; one that is running makes us bump
 * the version, so that its raise fails. */
static void hint_note(circuit_breaker *b, int64_t due)
{
    /* Dekker pair with scan_timeouts: (our slot record store, our load of
     * probe_scans) vs (its probe_scans increment, its slot record loads) */
    circuit__fence_sc();
    if (circuit__ld_acq(&b->probe_scans) == 0 &&
        (int64_t)circuit__ld128_lo_acq(&b->probe_hint) <= due)
        return;
    hint_lower(b, due);
}

/* Takes over slot 0's reservation when it is no probe (SLOT 0 above): its
 * bit is set already, so one CAS of its record from the value read (after
 * checking that gen's word carries the mark) makes it this call's probe
 * slot, due at `due`. False when slot 0 holds no such reservation. */
static bool slot0_adopt(circuit_breaker *b, uint32_t gen, int64_t due, uint32_t *reuse)
{
#if defined(CIRCUIT_PLANT_NO_ADOPT)
    /* PLANTED BUG (tests/sched/PLANTS.md): the reservation is never taken over */
    (void)b, (void)gen, (void)due, (void)reuse;
    return false;
#endif
    circuit__u128 *s = &b->slots[0];
    circuit__u128 cur = circuit__ld128_acq(s); /* acquire: checked below */
    while (slot0_phantom(cur, gen)) {
        /* acquire: the check follows the read above */
        uint64_t lo = circuit__ld128_lo_acq(&b->core);
        if (circuit__gen(lo) != gen || circuit__code(lo) != CIRCUIT__ST_HALF_OPEN ||
            !(lo & CIRCUIT__LO_NO_PROBE0))
            return false; /* an allow's probe, or the state moved on */
        circuit__u128 nw = {slot_tag(gen, slot_reuse(cur.lo) + 1), (uint64_t)due};
        /* sc: table slots; lost: another admission took it, or the record
         * is read again */
        if (circuit__cas128_sc(s, &cur, nw)) {
            *reuse = slot_reuse(nw.lo);
            return true;
        }
    }
    return false;
}

circuit__admit circuit__probe_admit(circuit_breaker *b, uint32_t gen, int64_t now,
                                    circuit__slot0 *slot0, uint32_t *slot, uint32_t *reuse)
{
    if (slot0 && slot0->held) {
        /* S3: slot 0, reserved with its due time before the CAS of this
         * caller's own open -> half-open transition, is its probe slot from
         * that CAS on: admitted even if the state has moved on since (its
         * result is then late, T6). */
        *slot = 0;
        *reuse = slot0->reuse;
        slot0->held = false;
        return CIRCUIT__ADMITTED;
    }
    int64_t due = circuit__sat_add(now, b->cfg.probe_timeout_ns);
    if (slot0_adopt(b, gen, due, reuse)) {
        *slot = 0; /* a reservation that was no probe: ours now */
    } else {
        bool stale;
        if (!slot_acquire(b, gen, slot, &stale))
            return stale ? CIRCUIT__STALE : CIRCUIT__FULL;
        if (!slot_occupy(b, *slot, gen, due, reuse)) {
            /* The state moved on before the slot was ours. */
            bit_clear(b, *slot, gen);
            return CIRCUIT__STALE;
        }
    }
    hint_note(b, due);
    if (core_gen(b) != gen) {
        /* The state moved on while we took the slot: give it back and
         * decide again in the new state. */
        slot_free(b, *slot, gen, *reuse, false, 0);
        return CIRCUIT__STALE;
    }
    return CIRCUIT__ADMITTED;
}

int64_t circuit__probes_in_flight(const circuit_breaker *b, uint64_t lo)
{
    uint32_t gen = circuit__gen(lo);
    int64_t n = 0;
    bool bit0 = false;
    for (uint32_t i = 0; i < b->bitmap_words; i++) {
        /* relaxed: a count for stats, each word a value it held */
        uint64_t w = circuit__ld_rlx(&b->bitmap[i]);
        if (bm_gen(w) == gen) {
            n += __builtin_popcount((uint32_t)w);
            bit0 = bit0 || (i == 0 && (w & 1u));
        }
    }
    /* slot 0's bit held by a reservation that is no probe (SLOT 0 above).
     * acquire: table slots (a count for stats: a value the record held) */
#if !defined(CIRCUIT_PLANT_PIF_RESERVATION)
    if (bit0 && (lo & CIRCUIT__LO_NO_PROBE0) && slot0_phantom(circuit__ld128_acq(&b->slots[0]), gen))
        n--;
#else
    /* PLANTED BUG (tests/sched/PLANTS.md): the reservation counts as a probe */
    (void)bit0;
#endif
    return n;
}


#define DUE_BATCH 64


/* ---- the claim of a probe timeout (TIMEOUTS above) ---------------------- */

#define CLAIM_ACTIVE UINT64_C(1)
_Static_assert(CIRCUIT_MAX_COUNT <= 65536, "a slot index fits the claim word's 16 bits");

typedef struct claim {
    uint32_t n;     /* claims made so far */
    uint32_t t0;    /* the state word's timed_out when it was made */
    uint32_t slot;
    uint32_t gen;   /* generation tag of the probe (and of its half-open state) */
    uint32_t reuse; /* the slot's reuse sequence: with gen, the probe's tag */
} claim;

/* lo: n 32 | t0 14 (bits 17..30) | slot 16 (bits 1..16) | active;  hi: gen 30 << 32 | reuse.
 * Idle: {n << 32, 0}. */
static inline circuit__u128 claim_word(const claim *k)
{
    return (circuit__u128){((uint64_t)k->n << 32) | ((uint64_t)k->t0 << 17) |
                               ((uint64_t)k->slot << 1) | CLAIM_ACTIVE,
                           ((uint64_t)k->gen << 32) | k->reuse};
}
static inline bool claim_active(circuit__u128 w) { return (w.lo & CLAIM_ACTIVE) != 0; }
static inline claim claim_of(circuit__u128 w)
{
    return (claim){(uint32_t)(w.lo >> 32), (uint32_t)((w.lo >> 17) & CIRCUIT__HI_TO_MASK),
                   (uint32_t)((w.lo >> 1) & 0xffffu), (uint32_t)(w.hi >> 32), (uint32_t)w.hi};
}
static inline bool u128_eq(circuit__u128 a, circuit__u128 x) { return a.lo == x.lo && a.hi == x.hi; }

/* d. Frees the claim's slot if a timeout still holds it (the winner of that
 * CAS clears the bit and, for a count the word cannot show, adds the
 * total), then makes the claim word idle. Anyone; idempotent. */
static void claim_retire(circuit_breaker *b, circuit__u128 w, bool saturated_count)
{
    claim k = claim_of(w);
    circuit__u128 *s = &b->slots[k.slot];
    uint64_t taken = slot_tag(k.gen, k.reuse) | SLOT_TAKEN;
    circuit__u128 sv = circuit__ld128_acq(s); /* acquire: table slots */
    while (sv.lo == taken) {
        circuit__u128 freed = {taken & ~SLOT_BUSY, sv.hi};
        /* sc: table slots; the winner frees the bit (its release publishes
         * this record to the bit's next owner) */
        if (circuit__cas128_sc(s, &sv, freed)) {
            bit_clear(b, k.slot, k.gen);
            if (saturated_count)
                circuit__faa_rlx(&b->timed_out, 1); /* relaxed: a total */
            break;
        }
    }
    CIRCUIT__HOOK(CIRCUIT_TP_TIMEOUT_FREED);
    circuit__u128 idle = {(uint64_t)k.n << 32, 0};
    /* sc: table probe_claim; lost: another thread retired it first */
    circuit__cas128_sc(&b->probe_claim, &w, idle);
}

/* b-d for the active claim word w: whoever meets it finishes it (L1). */
static void claim_finish(circuit_breaker *b, circuit__u128 w, void *call_ctx)
{
    claim k = claim_of(w);
    circuit__u128 *s = &b->slots[k.slot];
    uint64_t tag = slot_tag(k.gen, k.reuse), taken = tag | SLOT_TAKEN;
#if defined(CIRCUIT_PLANT_TIMEOUT_FREE_THEN_COUNT)
    /* PLANTED BUG (tests/sched/PLANTS.md): 0.2's
     * scan frees the due probe's slot (record and bit) and counts the
     * timeout after, dropped if the generation moved in between (P1) */
    circuit__u128 sv = circuit__ld128_acq(s); /* acquire: table slots */
    circuit__u128 freed = {tag & ~SLOT_BUSY, sv.hi};
    if (sv.lo != tag || !circuit__cas128_sc(s, &sv, freed)) { /* sc: table slots */
        claim_retire(b, w, false);
        return;
    }
    bit_clear(b, k.slot, k.gen);
    sv.lo = taken; /* the count below goes on (at a saturated timed_out it
                    * finds the slot freed and counts nothing) */
#else
    /* b. take the slot from its probe. {tag} exists only before the
     * probe's end (reuse grows), so a stale helper can take nothing. */
    circuit__u128 sv = circuit__ld128_acq(s); /* acquire: table slots */
    while (sv.lo == tag) {
        circuit__u128 nw = {taken, sv.hi};
        if (circuit__cas128_sc(s, &sv, nw)) /* sc: table slots */
            sv = nw;
    }
#endif
    if (sv.lo != taken) {
        /* its done or release freed it first (it settled before its
         * timeout), or this claim is finished and its slot freed */
        claim_retire(b, w, false);
        return;
    }
    CIRCUIT__HOOK(CIRCUIT_TP_TIMEOUT_TAKEN);
    int64_t due = slot_due(sv.hi);
    bool saturated = false;
    /* c. count it once */
    circuit__u128 c = circuit__ld128_acq(&b->core); /* acquire: table core */
    for (;;) {
        if (circuit__gen(c.lo) != k.gen || circuit__code(c.lo) != CIRCUIT__ST_HALF_OPEN)
            break; /* counted by the transition it caused, or moot (TIMEOUTS, c) */
        if (k.t0 < (uint32_t)CIRCUIT_TIMED_OUT_MAX) {
            if (circuit__hi_to(c.hi) != k.t0)
                break; /* counted (timed_out only grows within a generation) */
        } else {
            /* saturated: the claim word and the slot show the count (d) */
            /* acquire: both read after the word c */
            if (!u128_eq(circuit__ld128_acq(&b->probe_claim), w) ||
                circuit__ld128_acq(s).lo != taken)
                break;
        }
        circuit__timeout_result r = circuit__count_timeout(b, &c, due, call_ctx);
        if (r == CIRCUIT__TIMEOUT_COUNTED) {
            circuit__faa_rlx(&b->timed_out, 1); /* relaxed: a total */
            CIRCUIT__HOOK(CIRCUIT_TP_TIMEOUT_COUNTED);
            break;
        }
        if (r == CIRCUIT__TIMEOUT_SATURATED) {
            saturated = true;
            CIRCUIT__HOOK(CIRCUIT_TP_TIMEOUT_COUNTED);
            break;
        }
        /* lost: c is the word's new value; check again */
    }
    claim_retire(b, w, saturated);
}

typedef struct due_slot {
    int64_t due;
    uint32_t slot;
    uint64_t tag;
} due_slot;

/* Times out the probe of scan entry e (generation gen) unless it was
 * settled, or timed out by another thread, first: finishes the claim in
 * progress, if any, then claims this one (a) and finishes it. Returns the
 * probe's due time if it is still in flight and not due at `now` (slot 0's
 * due can be raised after the scan read it, slot0_reserve): the scan's next
 * hint must cover it; INT64_MAX otherwise. */
static int64_t timeout_one(circuit_breaker *b, uint32_t gen, const due_slot *e, int64_t now,
                           void *call_ctx)
{
    uint64_t tag = e->tag & ~SLOT_TAKEN;
    int64_t due = e->due;
    circuit__u128 w = circuit__ld128_acq(&b->probe_claim); /* acquire: table probe_claim */
    for (;;) {
        if (claim_active(w)) {
            claim_finish(b, w, call_ctx); /* help it first: one timeout at a time */
            w = circuit__ld128_acq(&b->probe_claim); /* acquire: table probe_claim */
            continue;
        }
        CIRCUIT__HOOK(CIRCUIT_TP_TIMEOUT_IDLE_READ);
        /* acquire: the slot and the word are read after the claim word, and
         * checked before its CAS (table probe_claim) */
        circuit__u128 sv = circuit__ld128_acq(&b->slots[e->slot]);
        if (sv.lo == (tag | SLOT_TAKEN)) {
            /* claimed since our read of the claim word, and not counted
             * yet (d frees the slot before the claim word goes idle):
             * finish that claim before going on */
            w = circuit__ld128_acq(&b->probe_claim); /* acquire: table probe_claim */
            continue;
        }
        if (sv.lo != tag)
            return INT64_MAX; /* settled, or timed out and counted by another thread */
#if !defined(CIRCUIT_PLANT_SCAN_FIXED_DUE)
        if (slot_due(sv.hi) != due) {
            /* the same probe, its due raised: due later, or still due */
            due = slot_due(sv.hi);
            if (due > now)
                return due;
        }
#else
        /* PLANTED BUG (tests/sched/PLANTS.md): a raised due is taken for a
         * settled probe, and the scan's hint passes it */
        (void)now;
        if (slot_due(sv.hi) != due)
            return INT64_MAX;
#endif
        circuit__u128 c = circuit__ld128_acq(&b->core); /* acquire: the same */
        if (circuit__gen(c.lo) != gen || circuit__code(c.lo) != CIRCUIT__ST_HALF_OPEN)
            return INT64_MAX;
        claim k = {claim_of(w).n + 1, circuit__hi_to(c.hi), e->slot, gen, slot_reuse(tag)};
        circuit__u128 nw = claim_word(&k);
        CIRCUIT__HOOK(CIRCUIT_TP_TIMEOUT_BEFORE_CLAIM);
        if (circuit__cas128_sc(&b->probe_claim, &w, nw)) { /* sc: table probe_claim */
            CIRCUIT__HOOK(CIRCUIT_TP_TIMEOUT_CLAIMED);
            claim_finish(b, nw, call_ctx);
            return INT64_MAX;
        }
        /* lost: w is the claim word's new value */
    }
}

/* Times out, in due order, every probe of c's generation due at `now`
 * (no_probe0: the word's CIRCUIT__LO_NO_PROBE0, slot 0's reservation is no
 * probe). Returns true when the state word changed generation. */
static bool scan_timeouts(circuit_breaker *b, uint32_t gen, bool no_probe0, int64_t now,
                          void *call_ctx);

static bool process_timeouts(circuit_breaker *b, circuit__u128 c, int64_t now, void *call_ctx)
{
    if ((int64_t)circuit__ld128_lo_acq(&b->probe_hint) > now) /* acquire: table probe_hint */
        return false; /* nothing can be due yet: the common case */
    circuit__faa_sc(&b->probe_scans, 1); /* sc: Dekker with hint_note, table probe_scans */
    /* Dekker pair with hint_note: (our probe_scans increment, our slot
     * record loads) vs (its slot record store, its probe_scans load) */
    circuit__fence_sc();
    bool changed = scan_timeouts(b, circuit__gen(c.lo), (c.lo & CIRCUIT__LO_NO_PROBE0) != 0,
                                 now, call_ctx);
    circuit__faa_sc(&b->probe_scans, (uint64_t)-1);
    return changed;
}

static bool scan_timeouts(circuit_breaker *b, uint32_t gen, bool no_probe0, int64_t now,
                          void *call_ctx)
{
    for (;;) {
        circuit__u128 h0 = circuit__ld128_acq(&b->probe_hint); /* acquire: table probe_hint */
        if ((int64_t)h0.lo > now)
            return false;

        due_slot batch[DUE_BATCH];
        int n = 0;
        bool more = false;
        int64_t rest = INT64_MAX;
        for (uint32_t i = 0; i < b->bitmap_words; i++) {
            uint64_t w = circuit__ld_acq(&b->bitmap[i]); /* acquire: then its records */
            if (bm_gen(w) != gen)
                continue;
            uint32_t bits = (uint32_t)w;
            while (bits) {
                uint32_t slot = i * 32u + (uint32_t)__builtin_ctz(bits);
                bits &= bits - 1;
                circuit__u128 sv = circuit__ld128_acq(&b->slots[slot]); /* acquire: table slots */
                if (!(sv.lo & SLOT_BUSY) || slot_gen(sv.lo) != gen)
                    continue;
#if !defined(CIRCUIT_PLANT_SCAN_RESERVATION)
                if (slot == 0 && no_probe0 && slot0_phantom(sv, gen))
                    continue; /* no probe: nothing to time out (SLOT 0 above) */
#else
                /* PLANTED BUG (tests/sched/PLANTS.md): the reservation times out */
                (void)no_probe0;
#endif
                int64_t due = slot_due(sv.hi);
                if (due > now) {
                    if (due < rest)
                        rest = due;
                    continue;
                }
                if (n == DUE_BATCH) {
                    more = true;
                    if (due >= batch[n - 1].due) {
                        if (due < rest)
                            rest = due;
                        continue;
                    }
                    if (batch[n - 1].due < rest)
                        rest = batch[n - 1].due;
                    n--;
                }
                int k = n++;
                while (k > 0 && batch[k - 1].due > due) {
                    batch[k] = batch[k - 1];
                    k--;
                }
                batch[k] = (due_slot){due, slot, sv.lo};
            }
        }

        for (int k = 0; k < n; k++) {
            int64_t later = timeout_one(b, gen, &batch[k], now, call_ctx);
            if (core_gen(b) != gen)
                return true;
            if (later < rest)
                rest = later;
        }
        if (more)
            continue;
        /* Raise the hint only from a scan of the current generation: a probe
         * admitted in a later one after the check bumps the version first. */
        if (core_gen(b) != gen)
            return true;
        circuit__u128 nh = {(uint64_t)rest, h0.hi + 1};
        circuit__cas128_sc(&b->probe_hint, &h0, nh); /* lost: an admission moved it */
        return false;
    }
}

circuit__u128 circuit__advance(circuit_breaker *b, int64_t now, void *call_ctx,
                               circuit__slot0 *slot0)
{
    for (;;) {
        circuit__u128 c = circuit__ld128_acq(&b->core); /* acquire: table core */
        unsigned code = circuit__code(c.lo);
        if (code == CIRCUIT__ST_OPEN) {
            if (!circuit__open_over(c.hi, now))
                return c; /* still open: hi is the end of the open period */
            uint32_t g1 = circuit__gen_next(circuit__gen(c.lo));
            uint32_t reuse = 0;
            /* Below generation 2^30 no earlier generation has g1's tag: the
             * emptying (O(window + probes) loads for every thread that
             * tries the transition) is needed only after that many */
            bool maybe_alias = circuit__gen_widen(b, g1) > CIRCUIT__GEN_MASK;
            if ((maybe_alias && !halfopen_start(b, g1, c.lo)) ||
                !slot0_reserve(b, g1, c.lo, c.hi, now, &reuse))
                continue;
            /* the CAS decides what slot 0's reservation is: an allow's
             * probe, or no probe (SLOT 0 above) */
#if defined(CIRCUIT_PLANT_PHANTOM_PROBE)
            bool slot0_probe = true;
#else
            bool slot0_probe = slot0 != NULL;
#endif
            CIRCUIT__HOOK(CIRCUIT_TP_HALFOPEN_BEFORE_CAS);
            if (circuit__transition_half_open(b, &c, slot0_probe, now, call_ctx)) {
                if (slot0) {
                    /* S3: an allow made the transition, so the reservation
                     * is its probe slot from the CAS on: it is admitted in
                     * that same step, whatever other threads do next.
                     * Return at once (nothing else can be due yet). */
                    slot0->held = true;
                    slot0->gen = g1;
                    slot0->reuse = reuse;
                    return c;
                }
#if defined(CIRCUIT_PLANT_PHANTOM_PROBE)
                slot_free(b, 0, g1, reuse, false, 0); /* not a probe */
#endif
            }
            continue;
        }
        if (code == CIRCUIT__ST_HALF_OPEN && process_timeouts(b, c, now, call_ctx))
            continue;
        return c;
    }
}
