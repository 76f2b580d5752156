/*
 * Probe slots (probes.h; docs/CONTRACT.md S3, S4, P1-P3, T5, T6): who holds
 * a probe slot, admission and release, slot 0's reservation for the allow
 * that makes open -> half-open, and emptying what an older half-open state
 * left under the same generation tag.
 *
 * INVARIANTS
 *   - the record is the slot: a slot is held in generation g exactly while
 *     its record is busy with g's tag (a record of an older generation
 *     reads as free). One CAS takes a slot, with its due time, and one CAS
 *     frees it, so a process killed between any two steps leaves no slot
 *     that never times out (SH2);
 *   - a ticket names its slot by (index, generation, reuse): a stale ticket
 *     never frees a newer probe's slot, and whoever wins the CAS that makes a
 *     record not-busy frees the slot exactly once (T5, T6);
 *   - a slot's reuse count never decreases (every take adds one), so a held
 *     record never takes the same value twice;
 *   - probe_hint is a lower bound of every due time in the slots (Dekker with
 *     probe_scans) for every admission that lives past its hint_note, and
 *     no later than one probe_timeout after the last scan (timeouts.c), so a
 *     dead admitter's timeout is found by the next scan but one;
 *   - only circuit_allow admits a probe: a reservation made by any other call
 *     is no probe (P1, S4);
 *   - an allow is admitted at the CAS that takes its slot's record, after
 *     its check of the state word, and stays admitted: no slot is given back
 *     because the state moved on, so no allow is refused for a slot whose
 *     allow then answers otherwise (P1, S4; finding F3);
 *   - FULL is answered only for a moment at which every record was held in
 *     the state's generation and the state word held it (two equal
 *     collects, then the word).
 * The protocol and its memory orders: docs/design/probes.md.
 */
#include <string.h>

#include "halfopen.h"
#include "probes.h"
#include "slots.h"
#include "transition.h"



static void hint_lower(circuit_breaker *b, int64_t due);

/* Makes the hint no later than `due`: a write only when it is later. */
static void hint_cover(circuit_breaker *b, int64_t due)
{
    if ((int64_t)circuit__ld128_lo_acq(&b->s->probe_hint) > due) /* acquire: table probe_hint */
        hint_lower(b, due);
}

/* Before the CAS that makes open -> half-open (generation `gen`), whoever
 * tries it makes sure that probe slot 0 is reserved for the new generation:
 * its record busy with gen's tag and a due time (marked SLOT_RESERVED), and
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
bool circuit__slot0_reserve(circuit_breaker *b, uint32_t gen, uint64_t open_lo, uint64_t open_end,
                          int64_t now, uint32_t *reuse)
{
    circuit__u128 *s = &b->slots[0];
    circuit__u128 cur = circuit__ld128_acq(s); /* acquire: checked below */
    /* A reservation for this open period made at a moment >= its end,
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
            if (circuit__ld128_lo_acq(&b->s->core) != open_lo)
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
        if (circuit__ld128_lo_acq(&b->s->core) != open_lo)
            return false;
        int64_t due = circuit__sat_add(now, b->cfg.probe_timeout_ns);
        circuit__u128 nw = slot_record(gen, cur, due);
        nw.hi |= SLOT_RESERVED;
        hint_lower(b, due);
        /* sc: table slots */
        if (circuit__cas128_sc(s, &cur, nw)) {
            *reuse = slot_reuse(nw.lo);
            break;
        }
    }
    return true;
}

/* Before the CAS that enters half-open in generation `gen` from the open
 * word whose low half is open_lo: what older half-open states left under
 * gen's 30-bit tag (it comes back after 2^30 transitions) is emptied, so
 * that the new state does not read it as its own: the window's failure
 * records (counting.h) and the busy records of slots 1.. (left by tickets
 * released after their timeout fell due, whose timeouts a later state
 * never counts; slot 0's is slot0_reserve's to tell from a reservation, by
 * its due time). No record of gen is made before the CAS except slot 0's,
 * so anything else tagged gen is old. Each write only while the word still
 * holds open_lo (read X, check, CAS X). O(window + probes) loads, once per
 * open period (by each thread that tries the transition), and only once the
 * generation has passed 2^30 (before that no tag repeats). False when the
 * word moved. Left as bounds: a thread stopped between its check and its
 * CAS while the transition is made and the new state writes a window record
 * equal bit for bit to the old one it read could empty it (it needs both
 * the 2^30 tag coincidence and that stop; a slot record cannot repeat: its
 * reuse count grows); and with a probe_timeout so large that both due times
 * saturate at INT64_MAX, slot 0's old record cannot be told from a
 * reservation. */
bool circuit__halfopen_start(circuit_breaker *b, uint32_t gen, uint64_t open_lo)
{
#if !defined(CIRCUIT_PLANT_HALFOPEN_ALIAS_WINDOW)
    if (!circuit__ring_start(b, gen, open_lo))
        return false;
#else
    /* PLANTED BUG (tests/sched/PLANTS.md): the window's
     * failure records under gen's tag are left in place */
#endif
#if defined(CIRCUIT_PLANT_HALFOPEN_ALIAS_SLOTS)
    /* PLANTED BUG (tests/sched/PLANTS.md): busy slot
     * records under gen's tag are left in place */
    return true;
#endif
    for (uint32_t i = 1; i < b->probes; i++) {
        circuit__u128 *s = &b->slots[i];
        circuit__u128 cur = circuit__ld128_acq(s); /* acquire: checked below */
        while ((cur.lo & SLOT_BUSY) && slot_gen(cur.lo) == gen) {
            /* acquire: the check follows the read above */
            if (circuit__ld128_lo_acq(&b->s->core) != open_lo)
                return false;
            /* not busy, its reuse kept (tickets name it); sc: table slots */
            circuit__u128 nw = {cur.lo & ~(SLOT_BUSY | SLOT_TAKEN), 0};
            if (circuit__cas128_sc(s, &cur, nw))
                break;
        }
    }
    return true;
}

/* Frees a slot whose record still carries the ticket's tag, by one CAS to
 * not-busy: the winner of that CAS (done, release, or a timeout's claim
 * with SLOT_TAKEN) ends the slot, exactly once. */
bool circuit__slot_free(circuit_breaker *b, uint32_t slot, uint32_t gen, uint32_t reuse,
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
#if defined(CIRCUIT_PLANT_FREE_DUE_FIRST)
        /* PLANTED BUG (tests/sched/PLANTS.md): the slot's timeout is
         * disarmed (due INT64_MAX) by one CAS and the slot freed by a
         * second: a process killed in between holds the slot for good */
        if (slot_due(cur.hi) != INT64_MAX) {
            circuit__u128 disarmed = {tag, (uint64_t)INT64_MAX};
            if (circuit__cas128_sc(s, &cur, disarmed)) /* sc: table slots */
                cur = disarmed;
            continue;
        }
#endif
        circuit__u128 nw = {tag & ~SLOT_BUSY, cur.hi};
        /* sc: table slots; the slot is free from this CAS on */
        if (circuit__cas128_sc(s, &cur, nw))
            return true;
    }
}

bool circuit__slot_release(circuit_breaker *b, uint32_t slot, uint32_t gen, uint32_t reuse)
{
    return circuit__slot_free(b, slot, gen, reuse, false, 0);
}

bool circuit__slot_release_unless_due(circuit_breaker *b, uint32_t slot, uint32_t gen,
                                      uint32_t reuse, int64_t now)
{
    return circuit__slot_free(b, slot, gen, reuse, true, now);
}

static void hint_lower(circuit_breaker *b, int64_t due)
{
    /* Always bump the version, even when the due time is not lower, so that a
     * scan that started before this admission cannot raise the hint past it. */
    circuit__u128 cur = circuit__ld128_acq(&b->s->probe_hint);
    for (;;) {
        uint64_t d = (int64_t)cur.lo < due ? cur.lo : (uint64_t)due;
        circuit__u128 nw = {d, cur.hi + 1};
        if (circuit__cas128_sc(&b->s->probe_hint, &cur, nw)) /* sc: table probe_hint */
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
    if (circuit__ld_acq(&b->s->probe_scans) != 0)
        hint_lower(b, due); /* a scan is running: bump the version */
    else
        hint_cover(b, due);
}

/* Takes a free probe slot of generation `gen` for a probe due at `due`:
 * ADMITTED with *slot and *reuse, FULL, or STALE when the state moved on
 * before anything was taken. A slot is taken by ONE CAS of its record, from
 * the value read before the state word's check to {gen, reuse + 1, busy,
 * due}: the probe is admitted at that CAS (the record held the value read
 * all along, so at the check the slot was free and the state half-open in
 * gen) and never gives its slot back because the state moved on (P1, S4;
 * docs/design/probes.md, ADMISSION). The search starts at a slot chosen
 * from a hash of the due time, so that concurrent admissions spread over
 * the slots instead of all walking past the same held ones. FULL only for
 * a moment at which every record was held in gen and the word held gen: a
 * collect of held records, a second collect with the same reuse sum (reuse
 * counts never decrease and a freed slot is retaken with reuse + 1, so
 * equal sums mean no record changed owner between its two reads), then the
 * word. A collect reads each record's tag half only (one 8-byte load);
 * O(probes) loads; lock-free: a second collect differs only when another
 * call took or freed a slot. */
static circuit__admit slot_take(circuit_breaker *b, uint32_t gen, int64_t due, uint32_t *slot,
                                uint32_t *reuse)
{
    const uint32_t n = b->probes;
    /* a start in [0, n): the due time's bits mixed (Fibonacci hashing,
     * Knuth TAOCP vol. 3, 6.4), then multiply-shift into the range, so
     * that calls a nanosecond apart start far apart whatever n is */
    const uint32_t mix = (uint32_t)(((uint64_t)due * UINT64_C(0x9E3779B97F4A7C15)) >> 32);
    const uint32_t start = (uint32_t)(((uint64_t)mix * n) >> 32);
    for (;;) {
        uint64_t sum = 0;
        for (uint32_t i = 0, s = start; i < n; i++, s = s + 1 == n ? 0 : s + 1) {
            /* acquire: table slots (the tag half: held, and the reuse count) */
            uint64_t tag = circuit__ld128_lo_acq(&b->slots[s]);
            if (tag_held(tag, gen)) {
                sum += slot_reuse(tag);
                continue;
            }
            /* acquire: read before the check, CASed after */
            circuit__u128 cur = circuit__ld128_acq(&b->slots[s]);
            while (!slot_held(cur, gen)) {
                /* free in gen: a record not busy, or of another generation
                 * (older; or newer, and then the check says we are stale) */
                if (core_gen(b) != gen)
                    return CIRCUIT__STALE;
                circuit__u128 rec = slot_record(gen, cur, due);
#if defined(CIRCUIT_PLANT_TAKE_TWO_STEPS)
                /* PLANTED BUG (tests/sched/PLANTS.md): the slot is taken
                 * with no due time and given one by a second CAS: a process
                 * killed in between holds the slot for good */
                rec.hi = (uint64_t)INT64_MAX;
#endif
                /* sc: table slots; lost: cur is the record's new value */
                if (circuit__cas128_sc(&b->slots[s], &cur, rec)) {
                    CIRCUIT__HOOK(CIRCUIT_TP_PROBE_TAKEN);
#if defined(CIRCUIT_PLANT_TAKE_TWO_STEPS)
                    circuit__cas128_sc(&b->slots[s], &rec,
                                       (circuit__u128){rec.lo, (uint64_t)due}); /* sc: slots */
#endif
                    *slot = s;
                    *reuse = slot_reuse(rec.lo);
                    return CIRCUIT__ADMITTED;
                }
            }
            sum += slot_reuse(cur.lo);
        }
        bool same = true;
        if (n > 1) {
            uint64_t again = 0;
            for (uint32_t s = 0; s < n && same; s++) {
                /* acquire: table slots (the word is read after) */
                uint64_t tag = circuit__ld128_lo_acq(&b->slots[s]);
                same = tag_held(tag, gen);
                again += slot_reuse(tag);
            }
            same = same && again == sum;
        }
        if (!same)
            continue; /* a slot changed owner: collect again */
        /* the word held gen before the first collect (the caller's read)
         * and still does: it held gen between the two collects */
        return core_gen(b) == gen ? CIRCUIT__FULL : CIRCUIT__STALE;
    }
}

/* Takes over slot 0's reservation when it is no probe (SLOT 0 above): one
 * CAS of its record from the value read (after checking that gen's word
 * carries the mark) makes it this call's probe slot, due at `due`. False when slot 0 holds no such reservation. */
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
        uint64_t lo = circuit__ld128_lo_acq(&b->s->core);
        if (circuit__gen(lo) != gen || circuit__code(lo) != CIRCUIT__ST_HALF_OPEN ||
            !(lo & CIRCUIT__LO_NO_PROBE0))
            return false; /* an allow's probe, or the state moved on */
        circuit__u128 nw = slot_record(gen, cur, due);
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
#if !defined(CIRCUIT_PLANT_HINT_AFTER_ONLY)
    /* SH2: a hint already past our due (a scan raised it since our clock
     * read: we were slow) is lowered BEFORE the slot is taken, so that an
     * admitter killed right after taking it is not hidden until a later
     * scan's cap (that scan's clock + probe_timeout). Not a write when the
     * hint covers the due already, the usual case; hint_note below is the
     * Dekker side for a scan running concurrently. */
    hint_cover(b, due);
#else
    /* PLANTED BUG (tests/sched/PLANTS.md): only hint_note, after the take */
#endif
    if (slot0_adopt(b, gen, due, reuse)) {
        *slot = 0; /* a reservation that is no probe: ours now */
        CIRCUIT__HOOK(CIRCUIT_TP_PROBE_TAKEN);
    } else {
        circuit__admit a = slot_take(b, gen, due, slot, reuse);
        if (a != CIRCUIT__ADMITTED)
            return a;
    }
    hint_note(b, due);
#if defined(CIRCUIT_PLANT_PASSING_BIT)
    /* PLANTED BUG (tests/sched/PLANTS.md): an admitted probe whose state
     * moved on gives its slot back and decides again, after an allow may
     * have been refused {HALF_OPEN} for it (finding F3) */
    if (core_gen(b) != gen) {
        circuit__slot_free(b, *slot, gen, *reuse, false, 0);
        return CIRCUIT__STALE;
    }
#endif
    /* Admitted at the CAS that took the slot (slot_take, slot0_adopt),
     * which the state word's check preceded: even if the state has moved
     * on since, the probe stays admitted and its result is late (T2, T6),
     * as slot 0's is for the allow that made the change (S3) */
    return CIRCUIT__ADMITTED;
}

int64_t circuit__probes_in_flight(const circuit_breaker *b, uint64_t lo)
{
    uint32_t gen = circuit__gen(lo);
    int64_t n = 0;
    for (uint32_t i = 0; i < b->probes; i++) {
        /* acquire: table slots (a count for stats: each tag a value it
         * held) */
        if (!tag_held(circuit__ld128_lo_acq(&b->slots[i]), gen))
            continue;
        /* slot 0's reservation when it is no probe (SLOT 0 above) */
#if !defined(CIRCUIT_PLANT_PIF_RESERVATION)
        if (i == 0 && (lo & CIRCUIT__LO_NO_PROBE0) &&
            slot0_phantom(circuit__ld128_acq(&b->slots[0]), gen)) /* acquire: the same */
            continue;
#else
        /* PLANTED BUG (tests/sched/PLANTS.md): the reservation counts as a probe */
#endif
        n++;
    }
    return n;
}
