/*
 * The closed state's memory (closed_state.h): everything below transition.c
 * that the closed state keeps, and the two calls transition.c makes when a
 * closed state is entered (circuit__closed_enter) and left
 * (circuit__closed_leave).
 *
 * INVARIANTS
 *   - the counts at exact point k are D_k plus the successes the cells of
 *     the word's epoch counted since S_k; D_k and U(k) are in place before
 *     the word leaves point k (anyone may write them; all write the same);
 *   - every "read X, check the word, CAS X" reads X with acquire, so a
 *     stopped thread cannot write a value of an older point or state;
 *   - descriptor and bitmap tags are point numbers, which never restart.
 * The protocol, its proof sketch and its bounds: docs/design/closed.md;
 * the mirror's: docs/design/mirror.md.
 */
#include "closed_state.h"

/* ---- the closed window: a bitmap of its failures ---------------------------- */

/* The bits of ring indices [a, z) that fall in bitmap word j. */
static inline uint64_t span_mask(uint32_t j, uint64_t a, uint64_t z)
{
    uint64_t lo = (uint64_t)j * 64u, hi = lo + 64u;
    if (a < lo)
        a = lo;
    if (z > hi)
        z = hi;
    if (a >= z)
        return 0;
    uint64_t n = z - a;
    return (n == 64 ? ~UINT64_C(0) : (UINT64_C(1) << n) - 1u) << (a - lo);
}

/* The indices s .. s + m - 1 modulo the window as (at most) two spans
 * [from, to) that do not wrap; returns how many. */
static inline int spans(const circuit_breaker *b, uint32_t s, uint32_t m, uint64_t sp[2][2])
{
    uint64_t W = b->window, e = (uint64_t)s + m;
    int n = 0;
    if (m == 0)
        return 0;
    sp[n][0] = s;
    sp[n++][1] = e < W ? e : W;
    if (e > W) {
        sp[n][0] = 0;
        sp[n++][1] = e - W;
    }
    return n;
}

/* What update u does to word j: the bits it clears, the one it sets. */
static inline void bits_update_masks(const circuit_breaker *b, const circuit__bits_update *u, uint32_t j,
                             uint64_t *clr, uint64_t *set)
{
    uint64_t sp[2][2];
    int n = spans(b, u->s, u->m, sp);
    *clr = 0;
    for (int g = 0; g < n; g++)
        *clr |= span_mask(j, sp[g][0], sp[g][1]);
    int64_t base = (int64_t)j * 64;
    *set = u->set >= base && u->set < base + 64 ? UINT64_C(1) << (u->set - base) : 0;
}

/* The failures at ring indices s .. s + m - 1 (m < window) of the bitmap as
 * point k left it: B(k). A word tagged before k has not taken U(k) yet:
 * when `virt` (U(k)) is given it is applied to the copy read (a reader that
 * writes nothing); otherwise the caller has made sure U(k) is complete, so
 * such a word is one U(k) does not touch. False when a word is tagged after
 * k: a later point's update is in it, so the caller's word is stale. The
 * caller checks the state word after these reads. */
static bool bits_count(const circuit_breaker *b, uint32_t k, const circuit__bits_update *virt, uint32_t s,
                       uint32_t m, uint32_t *out)
{
    uint64_t sp[2][2];
    int n = spans(b, s, m, sp);
    uint32_t count = 0;
    for (int g = 0; g < n; g++) {
        for (uint32_t j = (uint32_t)(sp[g][0] / 64u); j <= (uint32_t)((sp[g][1] - 1u) / 64u); j++) {
            /* acquire: the caller validates the word after these reads */
            circuit__u128 x = circuit__ld128_acq(circuit__cbits(b, j));
#if defined(CIRCUIT_PLANT_STATS_MOVED_RING)
            /* PLANTED BUG (tests/sched/PLANTS.md): a reader (virt) counts the bits of a
             * window a later point moved, as the ring's readers did */
            if (!virt && circuit__tag_before(k, (uint32_t)x.lo))
                return false;
#else
            if (circuit__tag_before(k, (uint32_t)x.lo))
                return false; /* a point after k updated it */
#endif
            uint64_t bits = x.hi;
            if (virt && circuit__tag_before(x.lo, k)) {
                uint64_t clr, set;
                bits_update_masks(b, virt, j, &clr, &set);
                bits = (bits & ~clr) | set;
            }
            count += (uint32_t)__builtin_popcountll(bits & span_mask(j, sp[g][0], sp[g][1]));
            CIRCUIT__WINDOW_WORDS(1);
        }
    }
    *out = count;
    return true;
}

/* Applies U(k) to every word it touches that has not taken it yet (tag
 * before k): anyone may, any number of times; the tag makes it once. A
 * stopped thread's CAS from a word it read before U(k) (or a later update)
 * is applied fails: the tag is part of the word and only grows. */
static void bits_update_apply(circuit_breaker *b, uint32_t k, const circuit__bits_update *u)
{
    uint64_t sp[2][2];
    int n = spans(b, u->s, u->m, sp);
    for (int g = 0; g < n; g++) {
        for (uint32_t j = (uint32_t)(sp[g][0] / 64u); j <= (uint32_t)((sp[g][1] - 1u) / 64u); j++) {
            uint64_t clr, set;
            bits_update_masks(b, u, j, &clr, &set);
            /* acquire: the value a failed CAS hands back is used again */
            circuit__u128 x = circuit__ld128_acq(circuit__cbits(b, j));
            while (circuit__tag_before(x.lo, k)) {
                /* A word whose bits U(k) leaves as they are already holds
                 * B(k): no write (the tag may stay older; readers take a
                 * word tagged before k as one U(k) leaves alone), unless
                 * its tag is 2^20 points old: retagged then, so that tags
                 * stay within 2^31 of every k that compares them. */
                if (((x.hi & ~clr) | set) == x.hi && (uint32_t)(k - (uint32_t)x.lo) < (1u << 20))
                    break;
                CIRCUIT__SHARED_RMW();
                /* table: cbits (a reader that sees tag k sees D_k, written before) */
                if (circuit__cas128_sc(circuit__cbits(b, j), &x, (circuit__u128){k, (x.hi & ~clr) | set}))
                    break;
            }
        }
    }
}

/* ---- the window: results appended in bulk ------------------------------ */

/* Appends d successes, then a failure if `failure`, to c, the counts at
 * point k. The failures that leave are counted in the bitmap as point k
 * left it (bits_count; `virt` as there): O(window / 64) words at most,
 * however many successes came before, and none once everything leaves (d + 1
 * >= window). False when the bitmap has moved past k (the caller's word is
 * stale). */
bool circuit__point_append(const circuit_breaker *b, uint32_t k, const circuit__bits_update *virt,
                       const circuit__point_counts *c, uint64_t d, bool failure, circuit__point_counts *out)
{
    uint64_t W = b->window;
    uint64_t n = d + (failure ? 1u : 0u);
    *out = *c;
    if (n == 0)
        return true;
    uint64_t s = c->seq; /* ring index of the first new result (< W) */
    uint32_t fail = c->fail;
    if (n >= W) {
        fail = failure ? 1u : 0u; /* every result of the old window leaves */
    } else {
        /* W > 1 here. The new results at positions s .. s + n - 1 evict
         * the n positions a window before them, whose ring indices are the
         * same; an index no result of this
         * state has reached yet holds a 0 (the state started empty). */
        if (fail > 0) {
            uint32_t gone;
            if (!bits_count(b, k, virt, circuit__mod_window(b, (uint32_t)s), (uint32_t)n, &gone))
                return false;
            fail = gone < fail ? fail - gone : 0;
        }
        if (failure)
            fail++;
    }
    uint64_t run = c->run;
    bool last_fail = c->last_fail;
    if (d > 0) {
        run = (last_fail || run == 0) ? d : run + d;
        last_fail = false;
    }
    if (failure) {
        run = (!last_fail || run == 0) ? 1 : run + 1;
        last_fail = true;
    }
    if (run > (uint64_t)CIRCUIT_RUN_MAX)
        run = (uint64_t)CIRCUIT_RUN_MAX;
    out->fail = fail;
    out->run = (uint32_t)run;
    out->last_fail = last_fail;
    out->full = c->full || s + n >= W;
    out->seq = (uint32_t)((s + n % W) % W); /* a ring index: descriptors keep it so */
    return true;
}

void circuit__point_to_counts(const circuit_breaker *b, const circuit__point_counts *c, circuit_counts *out)
{
    int64_t n = c->full ? (int64_t)b->window : (int64_t)c->seq;
    out->successes = n - (int64_t)c->fail;
    out->failures = c->fail;
    out->consecutive_successes = c->last_fail ? 0 : c->run;
    out->consecutive_failures = c->last_fail ? c->run : 0;
    out->timed_out = 0;
}

/* ---- reading the counts at an exact point ------------------------------- */


/* The successes point k (word w, no intent) appended after D_{k-1} (prev):
 * the folded count of a fold (saturated), else S_k - S_{k-1}. False when w
 * cannot be the word after prev. */
static inline bool point_successes(circuit__u128 w, const circuit__point_counts *prev, uint64_t *d)
{
    if (w.lo & CIRCUIT__LO_F)
        *d = circuit__closed_sum(w.hi);
    else if (circuit__closed_sum(w.hi) >= prev->S)
        *d = circuit__closed_sum(w.hi) - prev->S;
    else
        return false;
    return true;
}

/* D_k from D_{k-1} and the word w at k. False when D_{k-1} is not there
 * (w is stale). */
static bool desc_derive(const circuit_breaker *b, circuit__u128 w, circuit__point_counts *out)
{
    uint32_t k = circuit__closed_point(w.hi);
    circuit__point_counts prev;
    /* acquire: a value it held, checked against the word by the caller.
     * D_{k0} of the state's first point is there before the state is
     * (transition.c), so no point is special. */
    circuit__u128 p = circuit__ld128_acq(&b->s->desc[(k - 1) & 1u]);
    if (!circuit__desc_is(p, k - 1))
        return false;
    circuit__desc_unpack(p, &prev);
    uint64_t d;
    if (!point_successes(w, &prev, &d))
        return false; /* not the word D_{k-1} belongs to */
    /* B(k - 1): U(k - 1) is complete before the word left k - 1, and U(k)
     * comes after D_k: a word tagged k means D_k is there (the caller
     * looks) */
    if (!circuit__point_append(b, k - 1, NULL, &prev, d, (w.lo & CIRCUIT__LO_X) != 0, out))
        return false;
    out->S = (w.lo & CIRCUIT__LO_F) ? 0 : circuit__closed_sum(w.hi);
    return true;
}

/* Writes D_k = *c into its slot, which held x when read (with acquire),
 * only while the word is still at w's point k: read X, check the word, CAS
 * X, so a stopped writer cannot put an old point's counts over a newer
 * one. If D_k appears meanwhile, *c becomes that one (the same value, as
 * derived). False when the word moved past k (whoever moved it wrote D_k). */
static bool desc_put(circuit_breaker *b, circuit__u128 w, circuit__u128 x, circuit__point_counts *c)
{
    uint32_t k = circuit__closed_point(w.hi);
    circuit__u128 *slot = &b->s->desc[k & 1u];
    circuit__u128 want = circuit__desc_pack(c, k);
    while (!circuit__desc_is(x, k)) {
        circuit__u128 now = circuit__ld128_acq(&b->s->core); /* acquire: table core */
        if (!circuit__closed_at_point(now.lo, now.hi, circuit__gen(w.lo), k))
            return false;
        CIRCUIT__HOOK(CIRCUIT_TP_DESC_BEFORE_CAS);
        CIRCUIT__SHARED_RMW();
        if (circuit__cas128_sc(slot, &x, want)) /* table: desc */
            return true;
    }
    circuit__desc_unpack(x, c); /* written meanwhile: that one is right */
    return true;
}

bool circuit__point_read(circuit_breaker *b, circuit__u128 w, circuit__point_counts *out, bool write)
{
    uint32_t k = circuit__closed_point(w.hi);
    circuit__u128 *slot = &b->s->desc[k & 1u];
    /* acquire: what its writer wrote before it (the bitmap is read after it) */
    circuit__u128 x = circuit__ld128_acq(slot);
    if (circuit__desc_is(x, k)) {
        circuit__desc_unpack(x, out);
        return true;
    }
    if (!desc_derive(b, w, out)) {
        /* D_{k-1} gone (the word is stale), or U(k) begun: then D_k is
         * there (acquire: table cbits) */
        x = circuit__ld128_acq(slot);
        if (!circuit__desc_is(x, k))
            return false;
        circuit__desc_unpack(x, out);
        return true;
    }
    if (write)
        return desc_put(b, w, x, out);
    /* a reader that writes nothing: if D_k appeared meanwhile, the bitmap
     * may have moved under the derivation: take D_k */
    x = circuit__ld128_acq(slot);
    if (circuit__desc_is(x, k))
        circuit__desc_unpack(x, out);
    return true;
}

/* ---- the bitmap and the descriptor after a point ------------------------ */

/* U(k) of a point whose counts are ck, after it appended n results (its
 * failure last when `failure`): clear the slots of the min(n, window)
 * newest positions, set its failure's. Nothing for a window of 1. */
static void bits_update_make(const circuit_breaker *b, const circuit__point_counts *ck, uint64_t n, bool failure,
                     circuit__bits_update *u)
{
    *u = (circuit__bits_update){0, 0, -1};
    if (b->window == 1 || n == 0)
        return;
    uint32_t m = n >= b->window ? b->window : (uint32_t)n;
    u->s = circuit__mod_window(b, (uint32_t)circuit__seq_sub(b, ck->seq, m));
    u->m = m;
    if (failure)
        u->set = circuit__mod_window(b, (uint32_t)circuit__seq_sub(b, ck->seq, 1));
}

/* U(k) of the word w at point k (no intent), whose counts are ck: from
 * D_{k-1} and what the word says point k appended (d successes, then its
 * failure if X). The state's first point has none (the transition that
 * entered it emptied the bitmap). False when D_{k-1} is gone (w is stale). */
bool circuit__bits_update_of(const circuit_breaker *b, circuit__u128 w, const circuit__point_counts *ck, circuit__bits_update *u)
{
    *u = (circuit__bits_update){0, 0, -1};
    if (b->window == 1 || (!ck->full && ck->seq == 0))
        return true; /* window 1 (the word's last outcome), or nothing appended */
    uint32_t k = circuit__closed_point(w.hi);
    /* acquire: checked against the word by the caller, like D_k */
    circuit__u128 p = circuit__ld128_acq(&b->s->desc[(k - 1) & 1u]);
    if (!circuit__desc_is(p, k - 1))
        return false;
    circuit__point_counts prev;
    circuit__desc_unpack(p, &prev);
    uint64_t d;
    if (!point_successes(w, &prev, &d))
        return false;
    bool x = (w.lo & CIRCUIT__LO_X) != 0;
    bits_update_make(b, ck, d + (x ? 1u : 0u), x, u);
    return true;
}

/* Makes sure D_k and U(k) are in place before the word leaves point k (the
 * helping invariant; an intent word's were before the intent's CAS).
 * False when w is stale. */
bool circuit__closed_help(circuit_breaker *b, circuit__u128 w, circuit__point_counts *c)
{
    if (!circuit__point_read(b, w, c, true))
        return false;
    if (circuit__closed_intent(w.lo) != CIRCUIT__INTENT_NONE)
        return true;
    circuit__bits_update u;
    if (!circuit__bits_update_of(b, w, c, &u))
        return false;
    if (u.m == 0)
        return true;
    CIRCUIT__HOOK(CIRCUIT_TP_RING_BEFORE_WRITE);
    bits_update_apply(b, circuit__closed_point(w.hi), &u);
    return true;
}

/* After the CAS that made point k (word w, counts c, n results appended,
 * the last a failure when `failure`; all known to its maker): D_k (desc_put,
 * as a deriver writes it), then U(k) from the same numbers circuit__bits_update_of derives
 * it from. Anyone else who needs them goes through closed_help. */
void circuit__point_publish(circuit_breaker *b, circuit__u128 w, circuit__point_counts *c, uint64_t n,
                        bool failure)
{
    /* acquire: before the check in desc_put */
    if (!desc_put(b, w, circuit__ld128_acq(&b->s->desc[circuit__closed_point(w.hi) & 1u]), c))
        return; /* moved on: whoever moved it wrote D_k and U(k) first */
    circuit__bits_update u;
    bits_update_make(b, c, n, failure, &u); /* what circuit__bits_update_of would derive, known here */
    if (u.m == 0)
        return;
    CIRCUIT__HOOK(CIRCUIT_TP_RING_BEFORE_WRITE);
    bits_update_apply(b, circuit__closed_point(w.hi), &u);
}

/* ---- cells: sum and seal ----------------------------------------------- */

/* The sum of the cells of `epoch`; *sealed set when one is sealed. */
uint64_t circuit__cells_sum(const circuit_breaker *b, uint32_t epoch, bool *sealed, bool *at_limit)
{
    uint64_t sum = 0;
    *sealed = false;
    *at_limit = false;
    for (uint32_t i = 0; i < b->ncpu; i++) {
        /* relaxed: after the word's acquire load (program order); each a
         * value the cell held, and cells only grow within an epoch */
        uint64_t v = circuit__ld_rlx(&circuit__unit(b, i)->cell);
        if (circuit__cell_epoch(v) != epoch)
            continue;
        sum += circuit__cell_count(v);
        if (v & CIRCUIT__CELL_SEALED)
            *sealed = true;
        if (circuit__cell_count(v) == CIRCUIT__CELL_COUNT_MAX)
            *at_limit = true;
        if (i == 0)
            CIRCUIT__HOOK(CIRCUIT_TP_FOLD_MID_SUM);
    }
    return sum;
}

/* Seals every cell for the epoch of intent word wi and returns the sum;
 * false when the word left wi (someone completed it). */
bool circuit__cells_seal(circuit_breaker *b, circuit__u128 wi, uint64_t *sum)
{
    uint32_t epoch = circuit__closed_epoch(wi.lo);
    uint64_t s = 0;
    for (uint32_t i = 0; i < b->ncpu; i++) {
        uint64_t *cell = &circuit__unit(b, i)->cell;
        uint64_t v = circuit__ld_acq(cell); /* acquire: checked below (foreign) */
        for (;;) {
            if (circuit__cell_epoch(v) == epoch) {
                /* acq_rel: counts before it are in v; a success that sees
                 * the seal sees the intent word */
                if (v & CIRCUIT__CELL_SEALED)
                    break;
                CIRCUIT__SHARED_RMW();
                if (circuit__cas_acq_rel(cell, &v, v | CIRCUIT__CELL_SEALED)) /* table: pcpu[].cell */
                    break;
                continue;
            }
            /* another epoch's cell holds nothing of this one: seal it empty,
             * only while the word still holds the intent (read X, check,
             * CAS X) */
            if (circuit__ld128_lo_acq(&b->s->core) != wi.lo)
                return false;
            CIRCUIT__SHARED_RMW();
            if (circuit__cas_acq_rel(cell, &v, circuit__cell_make(epoch, 0) | CIRCUIT__CELL_SEALED))
                break;
        }
    }
    CIRCUIT__HOOK(CIRCUIT_TP_FOLD_SEALED);
    for (uint32_t i = 0; i < b->ncpu; i++) {
        /* relaxed: after our own seal of it (coherence) */
        uint64_t v = circuit__ld_rlx(&circuit__unit(b, i)->cell);
        if (circuit__cell_epoch(v) != epoch || !(v & CIRCUIT__CELL_SEALED))
            return false; /* started for a later epoch: completed by another */
        s += circuit__cell_count(v);
    }
    *sum = s;
    return true;
}

/* Adds an epoch's sealed sum to the successes total once (M1). */
void circuit__ledger_add(circuit_breaker *b, circuit__u128 wi, uint64_t sum)
{
    uint64_t key = circuit__ledger_key(wi.lo);
    circuit__u128 f = circuit__ld128_acq(&b->s->folded); /* table: folded */
    for (;;) {
        if (f.lo == key)
            return; /* added by another completer */
        /* only while the word still holds the intent (acquire: ordered
         * before the CAS), so a stopped completer adds nothing twice */
        if (circuit__ld128_lo_acq(&b->s->core) != wi.lo)
            return;
        circuit__u128 n = {key, f.hi + sum};
        CIRCUIT__SHARED_RMW();
        if (circuit__cas128_sc(&b->s->folded, &f, n)) /* table: folded */
            return;
    }
}
/* ---- reading (stats, tests) ----------------------------------------------- */

uint64_t circuit__cells_read(const circuit_breaker *b, uint32_t epoch)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < b->ncpu; i++) {
        /* acquire: each a value it held, all read before the caller reads
         * the word again (stats' order) */
        uint64_t v = circuit__ld_acq(&circuit__unit(b, i)->cell);
        if (circuit__cell_epoch(v) == epoch)
            sum += circuit__cell_count(v);
    }
    return sum;
}
/* ---- the closed mirror (docs/design/mirror.md) ------------------------- */

void circuit__mirror_set(circuit_breaker *b)
{
    /* acquire, then acquire: the mirror is read BEFORE the word (docs/design/mirror.md) */
    circuit__u128 m = circuit__ld128_acq(&b->s->mirror);
    uint64_t lo = circuit__ld128_lo_acq(&b->s->core);
    if (circuit__code(lo) != CIRCUIT__ST_CLOSED || circuit__closed_intent(lo) != CIRCUIT__INTENT_NONE)
        return;
    uint64_t v = circuit__mirror_of(lo);
    if (m.lo == v)
        return;
    CIRCUIT__HOOK(CIRCUIT_TP_MIRROR_BEFORE_SET);
    CIRCUIT__SHARED_RMW();
    /* sc: table mirror; lost: another set or a shut came first (one try) */
    circuit__cas128_sc(&b->s->mirror, &m, (circuit__u128){v, m.hi + 1});
}

void circuit__mirror_shut(circuit_breaker *b, circuit__u128 wi)
{
    uint64_t shut = circuit__mirror_of(wi.lo) & ~UINT64_C(3);
    circuit__u128 m = circuit__ld128_acq(&b->s->mirror); /* acquire: table mirror */
    while (m.lo != shut) {
        /* acquire: table core; a completer of a word that moved on makes no
         * CAS out of it */
        if (circuit__ld128_lo_acq(&b->s->core) != wi.lo)
            return;
        CIRCUIT__HOOK(CIRCUIT_TP_MIRROR_BEFORE_SHUT);
        CIRCUIT__SHARED_RMW();
        /* sc: table mirror */
        if (circuit__cas128_sc(&b->s->mirror, &m, (circuit__u128){shut, m.hi + 1}))
            return;
    }
}
/* ---- entering and leaving a closed state (transition.c) ------------------ */

/* Before the CAS that leaves a closed state at point k (word c): the next
 * closed state starts at k + 2 (closed_state.h), so its first two points' tags are
 * neither k's nor k - 1's, the two descriptors this state leaves in the
 * slots. Written only while the word still holds c (read X, check, CAS X):
 * a stopped thread of an older state finds no X of its time (k_next only
 * moves forward). Every thread leaving c writes the same value. Returns
 * false when the word moved. */
static bool k_next_set(circuit_breaker *b, circuit__u128 c)
{
    uint64_t want = (uint32_t)(circuit__closed_point(c.hi) + 2u);
    uint64_t v = circuit__ld_acq(&b->s->k_next); /* acquire: before the check */
    while (v != want) {
        circuit__u128 now = circuit__ld128_acq(&b->s->core); /* acquire: table core */
        if (now.lo != c.lo || now.hi != c.hi)
            return false;
        /* acquire on failure: the value returned is checked again */
        if (circuit__cas_acq(&b->s->k_next, &v, want))
            break;
    }
    return true;
}

/* Before the CAS that enters a closed state at point k0 from the word lo:
 * D_{k0}, the zero counts of its first point, in D[k0 & 1], only while the
 * word still holds lo (read X, check, CAS X). Returns false when it moved. */
static bool desc_start(circuit_breaker *b, uint64_t lo, uint32_t k0)
{
    circuit__u128 want = circuit__desc_zero(k0);
    circuit__u128 *slot = &b->s->desc[k0 & 1u];
    circuit__u128 x = circuit__ld128_acq(slot); /* acquire: before the check */
    while (x.lo != want.lo || x.hi != want.hi) {
        if (circuit__ld128_lo_acq(&b->s->core) != lo) /* acquire: table core */
            return false;
        CIRCUIT__HOOK(CIRCUIT_TP_CLOSED_START_BEFORE_DESC);
        CIRCUIT__SHARED_RMW();
        if (circuit__cas128_sc(slot, &x, want)) /* table: desc */
            break;
    }
    return true;
}

/* Before the CAS that enters a closed state at point k0 from the word lo:
 * every word of the closed bitmap set to {k0, 0} (an empty window), only
 * while the word still holds lo (read X, check, CAS X). A word tagged k0 or
 * later is done: k0 exceeds every older state's point, and a point of this
 * state comes after its entry. Returns false when the word moved. O(window
 * / 64) CASes, once per closed state. */
static bool bits_start(circuit_breaker *b, uint64_t lo, uint32_t k0)
{
    if (b->window == 1)
        return true; /* window 1: the word's last outcome is the window */
    uint32_t n = circuit__cbits_words(b->window);
    for (uint32_t j = 0; j < n; j++) {
        circuit__u128 x = circuit__ld128_acq(circuit__cbits(b, j)); /* acquire: before the check */
        while (circuit__tag_before(x.lo, k0)) {
            if (circuit__ld128_lo_acq(&b->s->core) != lo) /* acquire: table core */
                return false;
            CIRCUIT__HOOK(CIRCUIT_TP_CLOSED_START_BEFORE_BITS);
            CIRCUIT__SHARED_RMW();
            if (circuit__cas128_sc(circuit__cbits(b, j), &x, (circuit__u128){k0, 0})) /* table: cbits */
                break;
        }
    }
    return true;
}

bool circuit__closed_leave(circuit_breaker *b, circuit__u128 c)
{
    return k_next_set(b, c);
}

bool circuit__closed_enter(circuit_breaker *b, uint64_t lo, uint32_t gen, circuit__u128 *nw)
{
    /* acquire: after the acquire of the word being left, which came
     * after the CAS that ended the last closed state (table k_next) */
    uint32_t k0 = (uint32_t)circuit__ld_acq(&b->s->k_next);
    if (!desc_start(b, lo, k0) || !bits_start(b, lo, k0))
        return false;
    *nw = (circuit__u128){circuit__closed_lo(gen, circuit__fresh_epoch(b), false, false, 0),
                          circuit__closed_hi(k0, 0)};
    return true;
}


void circuit__closed_init(circuit_breaker *b)
{
    /* Before the breaker is shared: the cells of the first epoch (0) are
     * the zeroed units (circuit__pcpu_take), and the word naming it, at
     * exact point 0. */
    b->s->next_id = 0;
    /* D_0: the first closed state's first point (closed_state.h) */
    b->s->k_next = 0;
    circuit__st128_init(&b->s->desc[0], circuit__desc_zero(0));
    circuit__st128_init(&b->s->core, (circuit__u128){circuit__closed_lo(0, 0, false, false, 0),
                                                  circuit__closed_hi(0, 0)});
    /* the closed mirror (docs/design/mirror.md), open for that state, version 0 */
    circuit__st128_init(&b->s->mirror,
                        (circuit__u128){circuit__mirror_of(circuit__closed_lo(0, 0, false, false, 0)), 0});
}

uint32_t circuit__fresh_epoch(circuit_breaker *b)
{
    uint32_t id;
    do {
        CIRCUIT__SHARED_RMW();
        /* relaxed RMW: uniqueness is all it needs; ids are not dense */
        id = (uint32_t)((circuit__faa_rlx(&b->s->next_id, 1) + 1) & CIRCUIT__EPOCH_MASK);
    } while (id == 0);
    return id;
}
