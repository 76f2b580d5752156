/*
 * Counting while closed (closed.h; docs/CONTRACT.md S2, L6, L8, C1, C2,
 * C4, T2, M1, O6): successes never share a cache line; a failure makes the
 * counts exact by reading the per-CPU cells, without sealing them; an
 * epoch ends only through an intent, which anyone may complete.
 *
 * INVARIANTS
 *   - a success counts on its CPU's cell only while the mirror is open for
 *     its (generation, epoch) or the word says so, and the cell is unsealed;
 *   - every completer of an intent computes the same decision (policies are
 *     pure, L4), so a thread stopped anywhere stops nobody (L1);
 *   - the intent's maker records its call_ctx before the intent's CAS (O6).
 * The protocol, its memory orders and its bounds: docs/design/closed.md.
 */
#include "closed.h"
#include "transition.h"


/* CIRCUIT_PLANT_ACQ_RESTART: a planted defect for the schedule checker to
 * find (test builds only): an acquire-only CAS restarting a sealed cell for
 * a new epoch (closed_success). */
#if defined(CIRCUIT_PLANT_ACQ_RESTART) && !defined(CIRCUIT_TESTING)
#error "CIRCUIT_PLANT_ACQ_RESTART is a defect planted for the test build only"
#endif

/* The trip policy's answer (S2). */
static bool ask_trip(circuit_breaker *b, const circuit_counts *cnt)
{
    CIRCUIT__CB_FRAME(frame, b, CIRCUIT__CB_TRIP);
    return b->policy.trip(b->policy.arg, cnt);
}

/* ---- intents -------------------------------------------------------------- */

/* Completes the intent of word wi. `now`/`call_ctx`: for a transition. */
/* Who made an intent (O6): its maker's call_ctx, keyed by the intent it
 * is made for, {gen tag, kind, k}, written before the intent's CAS, which
 * publishes it. Whoever completes the intent (L1: any thread) gives
 * observe that call_ctx, not its own. One record per kind that makes a
 * transition (a failure's trip, an operator's isolate; a fold makes none
 * and writes none), so a maker of one kind never overwrites the other's:
 * an isolate racing a request's trip at the same point keeps the
 * operator's call_ctx. A maker never replaces a record of a later point
 * (it read a word that moved on: its intent CAS will fail). Makers of the
 * same kind that lose the race for the same point may still write after
 * the winner (two failing calls at one point: the call_ctx given is then
 * the loser's, another failing call of the same breaker); a completer that
 * finds another key gives its own. */
static inline circuit__u128 *intent_ctx_of(const circuit_breaker *b, circuit__u128 wi)
{
#if defined(CIRCUIT_PLANT_INTENT_CALL_CTX)
    /* PLANTED BUG (tests/sched/PLANTS.md): one record
     * shared by trip and isolate makers (O6) */
    (void)wi;
    return (circuit__u128 *)(uintptr_t)&b->intent_ctx[0];
#endif
    /* the records are shared and atomic: a const breaker still names them */
    return (circuit__u128 *)(uintptr_t)&b->intent_ctx[circuit__closed_intent(wi.lo) ==
                                                       CIRCUIT__INTENT_ISOLATE];
}

static inline uint64_t intent_key(circuit__u128 wi)
{
    return ((uint64_t)circuit__gen(wi.lo) << 34) | ((uint64_t)circuit__closed_intent(wi.lo) << 32) |
           circuit__closed_point(wi.hi);
}

static void intent_ctx_put(circuit_breaker *b, circuit__u128 wi, void *call_ctx)
{
    if (circuit__closed_intent(wi.lo) == CIRCUIT__INTENT_FOLD)
        return; /* a fold makes no transition: nothing to observe */
    circuit__u128 *rec = intent_ctx_of(b, wi);
    /* the key in the low half: a 16-byte read checks the low half twice,
     * and keys only grow, where call_ctx values repeat (atomics.h) */
    circuit__u128 want = {intent_key(wi), (uint64_t)(uintptr_t)call_ctx};
    circuit__u128 x = circuit__ld128_acq(rec); /* acquire: table intent_ctx */
    while (x.lo != want.lo || x.hi != want.hi) {
        /* A record of a later point (k only grows, never restarts) is a
         * newer maker's: ours comes from a word that has moved on,
         * its intent CAS will fail, and it must not hide the newer one */
#if !defined(CIRCUIT_PLANT_INTENT_STALE_MAKER)
        if (x.lo != 0 && (int32_t)((uint32_t)x.lo - circuit__closed_point(wi.hi)) > 0)
            return;
#else
        /* PLANTED BUG (tests/sched/PLANTS.md): a stale
         * maker replaces a later point's record (O6) */
#endif
        /* sc: an older or same-point record may be replaced; the intent
         * CAS after it publishes it */
        if (circuit__cas128_sc(rec, &x, want))
            return;
    }
}

static void *intent_ctx_get(const circuit_breaker *b, circuit__u128 wi, void *own)
{
    /* acquire: after the caller's acquire of the intent word (table intent_ctx) */
    circuit__u128 x = circuit__ld128_acq(intent_ctx_of(b, wi));
    return x.lo == intent_key(wi) ? (void *)(uintptr_t)x.hi : own;
}

void circuit__complete(circuit_breaker *b, circuit__u128 wi, int64_t *now, bool *have_now,
                       void *call_ctx)
{
    unsigned kind = circuit__closed_intent(wi.lo);
    if (circuit__code(wi.lo) != CIRCUIT__ST_CLOSED || kind == CIRCUIT__INTENT_NONE)
        return; /* no intent in it (the word moved on before this read) */
    call_ctx = intent_ctx_get(b, wi, call_ctx); /* O6: the maker's */
    circuit__point_counts c;
    if (!circuit__closed_help(b, wi, &c))
        return;
    /* the closed mirror leaves (g, e) before the seals do (docs/design/mirror.md) */
    circuit__mirror_shut(b, wi);
    uint64_t S;
    if (!circuit__cells_seal(b, wi, &S))
        return;
    if (S < c.S)
        return; /* cannot be for the word it came from: moved on */
    uint64_t d = S - c.S;
    circuit__point_counts n;
    bool failure = kind == CIRCUIT__INTENT_FAILURE;
    /* B(k): U(k) is complete before an intent is made */
    if (!circuit__point_append(b, circuit__closed_point(wi.hi), NULL, &c, d, failure, &n))
        return; /* the bitmap moved past k: so did the word */
    circuit_counts cnt;
    circuit__point_to_counts(b, &n, &cnt);
    circuit_state to = CIRCUIT_CLOSED;
    if (kind == CIRCUIT__INTENT_ISOLATE)
        to = CIRCUIT_ISOLATED;
    else if (failure && (wi.lo & CIRCUIT__LO_ASKED) && S == circuit__closed_sum(wi.hi))
        to = CIRCUIT_OPEN; /* the same counts its maker's trip said true for (L4) */
    else if (failure && ask_trip(b, &cnt))
        to = CIRCUIT_OPEN;
    circuit__ledger_add(b, wi, S);
    circuit__u128 w = wi;
    if (to != CIRCUIT_CLOSED) {
        /* read here, not earlier: the trip is made now (S4), whatever the
         * caller read before it lost CASes to other points */
#if defined(CIRCUIT_PLANT_PROBE_STALE_CLOCK)
        /* PLANTED BUG (tests/sched/PLANTS.md): a lost
         * counting CAS keeps its clock read, and a trip uses the caller's
         * (S4: a reopen or trip dated at a stale reading) */
        if (!*have_now)
            *now = circuit__now();
#else
        *now = circuit__now();
#endif
        *have_now = true;
        CIRCUIT__HOOK(CIRCUIT_TP_DONE_BEFORE_CAS);
        circuit__transition(b, &w, to,
                            to == CIRCUIT_ISOLATED ? CIRCUIT_CAUSE_OPERATOR : CIRCUIT_CAUSE_POLICY,
                            &cnt, *now, call_ctx);
        return;
    }
    uint32_t k1 = circuit__closed_point(wi.hi) + 1;
    uint64_t dsat = d > CIRCUIT__CLOSED_SUM_MAX ? CIRCUIT__CLOSED_SUM_MAX : d;
    circuit__u128 nw = {circuit__closed_lo(circuit__gen(wi.lo), circuit__fresh_epoch(b), failure, true, 0),
                        circuit__closed_hi(k1, dsat)};
    CIRCUIT__HOOK(CIRCUIT_TP_DONE_BEFORE_CAS);
    if (circuit__core_cas(b, &w, nw)) {
        n.S = 0;
        circuit__point_publish(b, nw, &n, d + (failure ? 1u : 0u), failure);
        circuit__mirror_set(b); /* open for the new epoch */
    }
}

/* CASes w to w + intent `kind` (or finds an intent already there) and
 * completes it. Returns false when w moved before the intent's CAS.
 * asked_S: a failure whose trip said true with the cells' sum *asked_S.
 * D_k must be in place (circuit__closed_help) before: the intent word's
 * upper half no longer holds S_k. */
static bool intent_make(circuit_breaker *b, circuit__u128 *w, unsigned kind, const uint64_t *asked_S,
                   int64_t *now, bool *have_now, void *call_ctx)
{
    if (circuit__closed_intent(w->lo) == CIRCUIT__INTENT_NONE) {
        circuit__u128 wi = {w->lo | ((uint64_t)kind << CIRCUIT__LO_INTENT_SHIFT), w->hi};
        if (asked_S) {
            wi.lo |= CIRCUIT__LO_ASKED;
            wi.hi = circuit__closed_hi(circuit__closed_point(w->hi), *asked_S);
        }
        intent_ctx_put(b, wi, call_ctx);
        CIRCUIT__HOOK(CIRCUIT_TP_INTENT_BEFORE_CAS);
        if (!circuit__core_cas(b, w, wi))
            return false;
        *w = wi;
        /* at once (complete shuts it too): the calls that follow read the
         * word, see the intent and help complete it (L1) */
        circuit__mirror_shut(b, wi);
        CIRCUIT__HOOK(CIRCUIT_TP_INTENT_MADE);
    }
    circuit__complete(b, *w, now, have_now, call_ctx);
    return true;
}

/* ---- results -------------------------------------------------------------- */

circuit__closed_result circuit__closed_success_slow(circuit_breaker *b, uint32_t gen,
                                                   void *call_ctx, uint64_t m, uint64_t *cell)
{
    int64_t now = 0;
    bool have_now = false;
    /* The mirror shut, or the cell sealed, of another epoch or at its
     * limit: the state word decides (below). acquire: as above */
    uint64_t lo = circuit__ld128_lo_acq(&b->s->core);
    if (circuit__code(lo) == CIRCUIT__ST_CLOSED && circuit__closed_intent(lo) == CIRCUIT__INTENT_NONE &&
        circuit__mirror_of(lo) != m)
        circuit__mirror_set(b);
    for (;;) {
        if (circuit__gen(lo) != gen || circuit__code(lo) != CIRCUIT__ST_CLOSED)
            return CIRCUIT__LATE; /* T2 (a closed ticket's generation is a closed one) */
        if (circuit__closed_intent(lo) != CIRCUIT__INTENT_NONE) {
            /* acquire: table core */
            circuit__complete(b, circuit__ld128_acq(&b->s->core), &now, &have_now, call_ctx);
            lo = circuit__ld128_lo_acq(&b->s->core); /* acquire: table core */
            continue;
        }
        uint32_t epoch = circuit__closed_epoch(lo);
        uint64_t v;
        if (circuit__cell_add(cell, circuit__cell_make(epoch, 0), &v))
            return CIRCUIT__COUNTED; /* L6: on this CPU's line */
        /* acquire: if sealed, the intent word behind the seal is seen below */
        v = circuit__ld_acq(cell);
        if (circuit__cell_epoch(v) == epoch && !(v & CIRCUIT__CELL_SEALED)) {
            if (circuit__cell_count(v) < CIRCUIT__CELL_COUNT_MAX)
                continue; /* changed under us: count again */
            /* at its limit: the epoch ends by a FOLD */
            circuit__u128 w = circuit__ld128_acq(&b->s->core);
            circuit__point_counts c;
            if (w.lo == lo && circuit__closed_help(b, w, &c))
                intent_make(b, &w, CIRCUIT__INTENT_FOLD, NULL, &now, &have_now, call_ctx);
        } else if (circuit__cell_epoch(v) != epoch && (v & CIRCUIT__CELL_SEALED)) {
            /* an ended epoch's cell (every epoch ends with its cells sealed):
             * start it for ours. Read X (above), check the word, CAS X. */
            CIRCUIT__HOOK(CIRCUIT_TP_CELL_BEFORE_START);
            /* acq_rel: acquire, after the cell's ended epoch; release, so a
             * get_stats that reads this start (acquire) then reads the word
             * out of the ended epoch (stats.c, "still E") */
            if (circuit__ld128_lo_acq(&b->s->core) == lo &&
#if defined(CIRCUIT_PLANT_ACQ_RESTART)
                circuit__cas_acq(cell, &v, circuit__cell_make(epoch, 1)))
#else
                circuit__cas_acq_rel(cell, &v, circuit__cell_make(epoch, 1)))
#endif
                return CIRCUIT__COUNTED;
        }
        /* Sealed for our epoch (an intent is being completed: it shows in
         * the word), a later epoch's cell, or the word moved: read it again.
         * acquire: pairs with the intent CAS behind a seal. */
        lo = circuit__ld128_lo_acq(&b->s->core);
    }
}


circuit__closed_result circuit__closed_failure(circuit_breaker *b, uint32_t gen, int64_t *now,
                                               bool *have_now, void *call_ctx)
{
    /* the exact point CASes the state word's line: fetch it for writing
     * once, not shared and then again for the CAS */
    circuit__prefetch_w(&b->s->core);
    circuit__u128 w = circuit__ld128_acq(&b->s->core); /* acquire: table core */
    for (;;) {
        if (circuit__gen(w.lo) != gen || circuit__code(w.lo) != CIRCUIT__ST_CLOSED)
            return CIRCUIT__LATE;
        if (circuit__closed_intent(w.lo) != CIRCUIT__INTENT_NONE) {
            circuit__complete(b, w, now, have_now, call_ctx);
            w = circuit__ld128_acq(&b->s->core); /* acquire: table core */
            continue;
        }
        circuit__point_counts c;
        if (!circuit__closed_help(b, w, &c)) {
            w = circuit__ld128_acq(&b->s->core); /* acquire: table core */
            continue;
        }
        bool sealed, at_limit;
        uint64_t S = circuit__cells_sum(b, circuit__closed_epoch(w.lo), &sealed, &at_limit);
        bool need_intent = sealed || at_limit || S > CIRCUIT__D_S_MAX;
        bool asked = false;
        circuit__point_counts n;
        if (!need_intent) {
            if (S < c.S) { /* not the word c belongs to */
                w = circuit__ld128_acq(&b->s->core); /* acquire: table core */
                continue;
            }
            /* B(k): closed_help made U(k) complete */
            bool fresh = circuit__point_append(b, circuit__closed_point(w.hi), NULL, &c, S - c.S, true, &n);
            /* acquire: after the bitmap and cell reads: c, S and the
             * bitmap belong to w */
            circuit__u128 again = circuit__ld128_acq(&b->s->core);
            if (!fresh || again.lo != w.lo || again.hi != w.hi) {
                w = again;
                continue;
            }
            circuit_counts cnt;
            circuit__point_to_counts(b, &n, &cnt);
            /* S2: asked after each failure, with exact counts */
            if (!ask_trip(b, &cnt)) {
                circuit__u128 nw = {circuit__closed_lo(gen, circuit__closed_epoch(w.lo), true, false, 0),
                                    circuit__closed_hi(circuit__closed_point(w.hi) + 1, S)};
                CIRCUIT__HOOK(CIRCUIT_TP_DONE_BEFORE_CAS);
                if (circuit__core_cas(b, &w, nw)) {
                    n.S = S;
                    circuit__point_publish(b, nw, &n, S - c.S + 1u, true);
                    return CIRCUIT__COUNTED;
                }
                continue;
            }
            asked = true;
        }
        /* the point must end the epoch: trip, or a sealed / full cell */
        circuit__u128 wi = w;
        if (!intent_make(b, &wi, CIRCUIT__INTENT_FAILURE, asked ? &S : NULL, now, have_now, call_ctx)) {
            w = wi;
            continue;
        }
        /* Completed (by us or another completer): the failure is counted
         * in the point that left the intent word, or it tripped. */
        return CIRCUIT__COUNTED;
    }
}

/* Ends closed generation of w (isolate): the caller's intent. Returns
 * false when w moved first. */
bool circuit__closed_isolate(circuit_breaker *b, circuit__u128 *w, int64_t now, void *call_ctx)
{
    bool have_now = true;
    circuit__point_counts c;
    if (!circuit__closed_help(b, *w, &c)) {
        *w = circuit__ld128_acq(&b->s->core); /* acquire: table core */
        return false;
    }
    return intent_make(b, w, CIRCUIT__INTENT_ISOLATE, NULL, &now, &have_now, call_ctx);
}

bool circuit__closed_fold(circuit_breaker *b, circuit__u128 *w)
{
    int64_t now = 0;
    bool have_now = false;
    circuit__point_counts c;
    if (!circuit__closed_help(b, *w, &c)) {
        *w = circuit__ld128_acq(&b->s->core); /* acquire: table core */
        return false;
    }
    return intent_make(b, w, CIRCUIT__INTENT_FOLD, NULL, &now, &have_now, NULL);
}

/* A reader's counts at the word w, plus `cells` successes counted since its
 * exact point. Deriving them reads the bitmap (evictions), which the
 * exact points AFTER w's rewrite: a reader whose word is overtaken while
 * it read could miss an eviction and report more failures than the window
 * holds (failures 17 in a window of 16). So the reads are validated: they are a value the window
 * held when the word is still at w's point (same generation and point k)
 * after them (acquire, in this order; a point's bitmap writes come after its
 * word CAS). Otherwise the newer word is taken, without the cells (they
 * were read for the older point), for as long as the word moves: only an
 * exact point (a failure, a fold, an intent) moves it, never a success, so
 * each new try follows another thread's progress (lock-free; giving up
 * after a few tries would report counts no moment held, M1). When the
 * newer word is no longer
 * closed (an isolate or a trip ended the state while the reader read), the
 * reads are NOT valid either: the counts reported are that word's own, and
 * so is the word returned, whose state and generation the caller reports
 * (else a closed snapshot could mix points: successes 0, failures 2, a run
 * of 1 success). Returns the word the counts belong to. */

circuit__u128 circuit__closed_counts_at(const circuit_breaker *b, circuit__u128 w,
                                        const uint64_t *cells, circuit_counts *out)
{
    circuit__point_counts c, n;
    for (;;) {
        CIRCUIT__HOOK(CIRCUIT_TP_STATS_COUNTS_TRY);
        /* read only (write = false): the cast drops nothing written */
        if (!circuit__point_read((circuit_breaker *)(uintptr_t)b, w, &c, false)) {
            /* the word moved past the descriptors it names: its point is
             * made during the call; take the newest word */
            circuit__u128 now = circuit__ld128_acq(&b->s->core); /* acquire: then D */
            if (circuit__code(now.lo) != CIRCUIT__ST_CLOSED) {
#if defined(CIRCUIT_PLANT_STATS_MOVED_RING)
                /* PLANTED BUG (tests/sched/PLANTS.md):
                 * zero counts reported with the old closed word (M1) */
                *out = (circuit_counts){0, 0, 0, 0, 0};
                return w;
#endif
                circuit__word_counts(b, now, out); /* not closed */
                return now;
            }
            w = now;
            cells = NULL;
            continue;
        }
        uint64_t d = cells && *cells > c.S ? *cells - c.S : 0;
        n = c; /* defined even when the reads below fail every try */
        /* B(k): U(k) may not be complete yet (its maker is between the
         * word's CAS and the update), and a reader writes nothing: it
         * applies U(k) to its own copy of each word not tagged k yet. An
         * intent word's U(k) is complete before the intent. */
        circuit__bits_update u, *virt = NULL;
        bool fresh = true;
        if (circuit__closed_intent(w.lo) == CIRCUIT__INTENT_NONE) {
#if defined(CIRCUIT_PLANT_STATS_MOVED_RING)
            (void)circuit__bits_update_of(b, w, &c, &u); /* PLANTED: D_{k-1} gone, read on */
#else
            fresh = circuit__bits_update_of(b, w, &c, &u);
#endif
            virt = &u;
        }
        fresh = fresh && circuit__point_append(b, circuit__closed_point(w.hi), virt, &c, d, false, &n);
        /* acquire: after the bitmap and descriptor reads above (table core) */
        circuit__u128 now = circuit__ld128_acq(&b->s->core);
        if (fresh && circuit__closed_at_point(now.lo, now.hi, circuit__gen(w.lo), circuit__closed_point(w.hi)))
            break;
#if defined(CIRCUIT_PLANT_STATS_MOVED_RING)
        /* PLANTED BUG (tests/sched/PLANTS.md): a word no
         * longer closed ends the validation, and the derivation from a
         * window that moved is reported with the old closed word (M1) */
        if (circuit__code(now.lo) != CIRCUIT__ST_CLOSED)
            break;
#else
        if (circuit__code(now.lo) != CIRCUIT__ST_CLOSED) {
            circuit__word_counts(b, now, out); /* not closed */
            return now;
        }
#endif
        w = now;
        cells = NULL;
    }
    circuit__point_to_counts(b, &n, out);
    return w;
}
