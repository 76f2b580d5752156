/*
 * Time-driven changes (probes.h: circuit__advance; docs/CONTRACT.md S3, P1,
 * TM2): open -> half-open when the open period is over, and probe timeouts,
 * each as of the moment it fell due, in due-time order.
 *
 * INVARIANTS
 *   - one probe timeout is counted once, through the claim word: a scan
 *     claims it, takes its slot from the probe, counts it, frees the slot and
 *     retires the claim, and any thread that meets an active claim finishes
 *     it (L1);
 *   - a timeout's reopen starts its open period at the due time;
 *   - a scan raises probe_hint only from the value it read, so a due time
 *     lowered meanwhile is not lost, and never past its own clock +
 *     probe_timeout: an admission killed before its hint_note (SH2) is
 *     found by a later scan (docs/design/probes.md, TIMEOUTS).
 * The protocol and its memory orders: docs/design/probes.md.
 */
#include "halfopen.h"
#include "probes.h"
#include "slots.h"
#include "transition.h"

/* CIRCUIT_PLANT_PHANTOM_PROBE: a planted defect for the schedule checker
 * to find (test builds only). A call other than circuit_allow that makes
 * open -> half-open leaves slot 0's reservation as a probe and frees it only
 * after its CAS: stopped in between, the reservation times out (timed_out,
 * a probe-policy call) and holds its slot meanwhile. */
#if defined(CIRCUIT_PLANT_PHANTOM_PROBE) && !defined(CIRCUIT_TESTING)
#error "CIRCUIT_PLANT_PHANTOM_PROBE is a defect planted for the test build only"
#endif

#define DUE_BATCH 64


/* ---- the claim of a probe timeout (docs/design/probes.md) ---------------------- */

#define CLAIM_ACTIVE UINT64_C(1)
_Static_assert(CIRCUIT_MAX_COUNT <= 65536, "a slot index fits the claim word's 16 bits");

typedef struct claim_state {
    uint32_t n;     /* claims made so far */
    uint32_t t0;    /* the state word's timed_out at the claim's CAS */
    uint32_t slot;
    uint32_t gen;   /* generation tag of the probe (and of its half-open state) */
    uint32_t reuse; /* the slot's reuse sequence: with gen, the probe's tag */
} claim_state;

/* lo: n 32 | t0 14 (bits 17..30) | slot 16 (bits 1..16) | active;  hi: gen 30 << 32 | reuse.
 * Idle: {n << 32, 0}. */
static inline circuit__u128 claim_word(const claim_state *claim)
{
    return (circuit__u128){((uint64_t)claim->n << 32) | ((uint64_t)claim->t0 << 17) |
                               ((uint64_t)claim->slot << 1) | CLAIM_ACTIVE,
                           ((uint64_t)claim->gen << 32) | claim->reuse};
}
static inline bool claim_active(circuit__u128 w) { return (w.lo & CLAIM_ACTIVE) != 0; }
static inline claim_state claim_of(circuit__u128 w)
{
    return (claim_state){(uint32_t)(w.lo >> 32), (uint32_t)((w.lo >> 17) & CIRCUIT__HI_TO_MASK),
                   (uint32_t)((w.lo >> 1) & 0xffffu), (uint32_t)(w.hi >> 32), (uint32_t)w.hi};
}
static inline bool u128_eq(circuit__u128 a, circuit__u128 x) { return a.lo == x.lo && a.hi == x.hi; }

/* d. Frees the claim's slot if a timeout still holds it (the winner of that
 * CAS, for a count the word cannot show, adds the total), then makes the
 * claim word idle. Anyone; idempotent. */
static void claim_retire(circuit_breaker *b, circuit__u128 w, bool saturated_count)
{
    claim_state claim = claim_of(w);
    circuit__u128 *s = &b->slots[claim.slot];
    uint64_t taken = slot_tag(claim.gen, claim.reuse) | SLOT_TAKEN;
    circuit__u128 sv = circuit__ld128_acq(s); /* acquire: table slots */
    while (sv.lo == taken) {
        circuit__u128 freed = {taken & ~SLOT_BUSY, sv.hi};
        /* sc: table slots; the slot is free from this CAS on */
        if (circuit__cas128_sc(s, &sv, freed)) {
            if (saturated_count)
                circuit__faa_rlx(&b->s->timed_out, 1); /* relaxed: a total */
            break;
        }
    }
    CIRCUIT__HOOK(CIRCUIT_TP_TIMEOUT_FREED);
    circuit__u128 idle = {(uint64_t)claim.n << 32, 0};
    /* sc: table probe_claim; lost: another thread retired it first */
    circuit__cas128_sc(&b->s->probe_claim, &w, idle);
}

/* b-d for the active claim word w: whoever meets it finishes it (L1). */
static void claim_finish(circuit_breaker *b, circuit__u128 w, void *call_ctx)
{
    claim_state claim = claim_of(w);
    circuit__u128 *s = &b->slots[claim.slot];
    uint64_t tag = slot_tag(claim.gen, claim.reuse), taken = tag | SLOT_TAKEN;
#if defined(CIRCUIT_PLANT_TIMEOUT_FREE_THEN_COUNT)
    /* PLANTED BUG (tests/sched/PLANTS.md): the
     * scan frees the due probe's slot (its record) and counts the
     * timeout after, dropped if the generation moved in between (P1) */
    circuit__u128 sv = circuit__ld128_acq(s); /* acquire: table slots */
    circuit__u128 freed = {tag & ~SLOT_BUSY, sv.hi};
    if (sv.lo != tag || !circuit__cas128_sc(s, &sv, freed)) { /* sc: table slots */
        claim_retire(b, w, false);
        return;
    }
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
    circuit__u128 c = circuit__ld128_acq(&b->s->core); /* acquire: table core */
    for (;;) {
        if (circuit__gen(c.lo) != claim.gen || circuit__code(c.lo) != CIRCUIT__ST_HALF_OPEN)
            break; /* counted by the transition it caused, or moot (docs/design/probes.md, TIMEOUTS c) */
        if (claim.t0 < (uint32_t)CIRCUIT_TIMED_OUT_MAX) {
            if (circuit__hi_to(c.hi) != claim.t0)
                break; /* counted (timed_out only grows within a generation) */
        } else {
            /* saturated: the claim word and the slot show the count (d) */
            /* acquire: both read after the word c */
            if (!u128_eq(circuit__ld128_acq(&b->s->probe_claim), w) ||
                circuit__ld128_acq(s).lo != taken)
                break;
        }
        circuit__timeout_result r = circuit__count_timeout(b, &c, due, call_ctx);
        if (r == CIRCUIT__TIMEOUT_COUNTED) {
            circuit__faa_rlx(&b->s->timed_out, 1); /* relaxed: a total */
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

/* Times out the probe of scan entry e (generation gen) unless it is
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
    circuit__u128 w = circuit__ld128_acq(&b->s->probe_claim); /* acquire: table probe_claim */
    for (;;) {
        if (claim_active(w)) {
            claim_finish(b, w, call_ctx); /* help it first: one timeout at a time */
            w = circuit__ld128_acq(&b->s->probe_claim); /* acquire: table probe_claim */
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
            w = circuit__ld128_acq(&b->s->probe_claim); /* acquire: table probe_claim */
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
#if !defined(CIRCUIT_PLANT_CLAIM_UNFROZEN)
        if (sv.hi & SLOT_RESERVED) {
            /* Slot 0's reservation, an allow's probe since the transition:
             * a racer that read it while the breaker was still open may yet
             * raise its due (slot0_reserve, a CAS from a marked value).
             * Clear the mark first, by a CAS from the value whose due was
             * checked above: that raise can no longer land, so the timeout
             * claimed below is counted as of this due, in this call's past,
             * never as of a later one (which would start the reopened
             * period in the future). Lost: read the claim and the slot
             * again. */
            circuit__u128 fz = {sv.lo, sv.hi & ~SLOT_RESERVED};
            if (!circuit__cas128_sc(&b->slots[e->slot], &sv, fz)) { /* sc: table slots */
                w = circuit__ld128_acq(&b->s->probe_claim); /* acquire: table probe_claim */
                continue;
            }
        }
#else
        /* PLANTED BUG (tests/sched/PLANTS.md): the mark stays, and a raise
         * landing after the claim is counted as a timeout in the future */
#endif
        circuit__u128 c = circuit__ld128_acq(&b->s->core); /* acquire: the same */
        if (circuit__gen(c.lo) != gen || circuit__code(c.lo) != CIRCUIT__ST_HALF_OPEN)
            return INT64_MAX;
        claim_state claim = {claim_of(w).n + 1, circuit__hi_to(c.hi), e->slot, gen, slot_reuse(tag)};
        circuit__u128 nw = claim_word(&claim);
        CIRCUIT__HOOK(CIRCUIT_TP_TIMEOUT_BEFORE_CLAIM);
        if (circuit__cas128_sc(&b->s->probe_claim, &w, nw)) { /* sc: table probe_claim */
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
    if ((int64_t)circuit__ld128_lo_acq(&b->s->probe_hint) > now) /* acquire: table probe_hint */
        return false; /* nothing can be due yet: the common case */
    circuit__faa_sc(&b->s->probe_scans, 1); /* sc: Dekker with hint_note, table probe_scans */
    /* Dekker pair with hint_note: (our probe_scans increment, our slot
     * record loads) vs (its slot record store, its probe_scans load) */
    circuit__fence_sc();
    bool changed = scan_timeouts(b, circuit__gen(c.lo), (c.lo & CIRCUIT__LO_NO_PROBE0) != 0,
                                 now, call_ctx);
    circuit__faa_sc(&b->s->probe_scans, (uint64_t)-1);
    return changed;
}

static bool scan_timeouts(circuit_breaker *b, uint32_t gen, bool no_probe0, int64_t now,
                          void *call_ctx)
{
    for (;;) {
        circuit__u128 h0 = circuit__ld128_acq(&b->s->probe_hint); /* acquire: table probe_hint */
        if ((int64_t)h0.lo > now)
            return false;

        due_slot batch[DUE_BATCH];
        int n = 0;
        bool more = false;
        int64_t rest = INT64_MAX;
        for (uint32_t slot = 0; slot < b->probes; slot++) {
            /* acquire: table slots (the tag half first: most are free) */
            if (!tag_held(circuit__ld128_lo_acq(&b->slots[slot]), gen))
                continue;
            circuit__u128 sv = circuit__ld128_acq(&b->slots[slot]); /* acquire: table slots */
            if (!slot_held(sv, gen))
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
            int at = n++;
            while (at > 0 && batch[at - 1].due > due) {
                batch[at] = batch[at - 1];
                at--;
            }
            batch[at] = (due_slot){due, slot, sv.lo};
        }

        for (int j = 0; j < n; j++) {
            int64_t later = timeout_one(b, gen, &batch[j], now, call_ctx);
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
#if !defined(CIRCUIT_PLANT_HINT_UNCAPPED)
        /* ...and never past now + probe_timeout: a probe admitted after our
         * read of its record, whose admitter died before its hint_note,
         * is then found by the scan this hint brings (SH2) */
        int64_t cap = circuit__sat_add(now, b->cfg.probe_timeout_ns);
        if (rest > cap)
            rest = cap;
#else
        /* PLANTED BUG (tests/sched/PLANTS.md): the hint may pass every due
         * time (INT64_MAX with no probe seen): a dead admitter's timeout is
         * never looked for */
#endif
        circuit__u128 nh = {(uint64_t)rest, h0.hi + 1};
        circuit__cas128_sc(&b->s->probe_hint, &h0, nh); /* lost: an admission moved it */
        return false;
    }
}

circuit__u128 circuit__advance(circuit_breaker *b, int64_t now, void *call_ctx,
                               circuit__slot0 *slot0)
{
    for (;;) {
        circuit__u128 c = circuit__ld128_acq(&b->s->core); /* acquire: table core */
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
            if ((maybe_alias && !circuit__halfopen_start(b, g1, c.lo)) ||
                !circuit__slot0_reserve(b, g1, c.lo, c.hi, now, &reuse))
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
                circuit__slot_free(b, 0, g1, reuse, false, 0); /* not a probe */
#endif
            }
            continue;
        }
        if (code == CIRCUIT__ST_HALF_OPEN && process_timeouts(b, c, now, call_ctx))
            continue;
        return c;
    }
}

