/*
 * Transitions (transition.h): build, CAS, publish. Every change of state,
 * whoever decides it (a counted result, a probe timeout, the clock, an
 * operator), is made here, so the generation, the reopen count, the total of
 * M1 and the record handed to delivery are kept in one place.
 */
#include "delivery.h"
#include "closed_state.h"
#include "transition.h"

static void gen64_raise(circuit_breaker *b, uint64_t g)
{
    uint64_t cur = circuit__ld_rlx(&b->s->gen64); /* relaxed: table gen64 */
    /* relaxed: a monotonic maximum, read only to widen tags */
    while (cur < g && !circuit__cas_rlx(&b->s->gen64, &cur, g))
        ;
}

/* Reopens of the half-open state of generation `gen` (B2), kept beside the
 * word because the half-open word has no room for it. */
static int64_t half_reopens(const circuit_breaker *b, uint32_t gen)
{
    /* acquire: pairs with the write made before the CAS that entered gen */
    uint64_t v = circuit__ld_acq((uint64_t *)(uintptr_t)&b->s->half_reopens);
    return (uint32_t)(v >> 32) == gen ? (int64_t)(uint32_t)v : 0;
}

/* Before the CAS that makes open -> half-open (gen), record the reopen count
 * the half-open state inherits. Written only while the word still holds the
 * open state it comes from (checked after reading the value, and the
 * CAS from that value fails if it moved since), so a stale caller cannot
 * overwrite a later state's count. Returns false when the word moved. */
static bool half_reopens_set(circuit_breaker *b, uint64_t open_lo, uint32_t gen, uint32_t k)
{
    uint64_t want = ((uint64_t)gen << 32) | k;
    uint64_t v = circuit__ld_acq(&b->s->half_reopens); /* acquire: before the check */
    while (v != want) {
        /* acquire: the check follows the read above */
        if (circuit__ld128_lo_acq(&b->s->core) != open_lo)
            return false;
        /* acquire on failure: the value returned is checked again */
        if (circuit__cas_acq(&b->s->half_reopens, &v, want))
            break;
    }
    return true;
}

/* circuit__transition, with `half_flags` (CIRCUIT__LO_NO_PROBE0 or 0) added
 * to the low half of a new half-open word */
static bool transition(circuit_breaker *b, circuit__u128 *c, circuit_state to,
                       circuit_cause cause, const circuit_counts *counts, int64_t at,
                       void *call_ctx, uint64_t half_flags)
{
    unsigned code = circuit__code(c->lo);
    uint32_t g1 = circuit__gen_next(circuit__gen(c->lo));
    uint64_t g64 = circuit__gen_widen(b, g1);
    circuit_transition tr = {circuit__pub_state(code), to, g64, *counts, cause, 0};
    circuit__u128 nw;
    if (code == CIRCUIT__ST_CLOSED && !circuit__closed_leave(b, *c)) {
        *c = circuit__ld128_acq(&b->s->core); /* acquire: the caller decides again from it */
        return false;
    }
    switch (to) {
    case CIRCUIT_OPEN: {
        int64_t reopens = code == CIRCUIT__ST_HALF_OPEN ? half_reopens(b, circuit__gen(c->lo)) + 1 : 0;
        int64_t period = b->cfg.open_for_ns;
        if (b->open_for) {
            circuit_open_info info = {*counts, g64, reopens, b->salt};
            CIRCUIT__CB_FRAME(frame, b, CIRCUIT__CB_OPEN_FOR);
            period = b->open_for(b->open_for_arg, &info);
            if (period <= 0)
                circuit__abort("open_for returned %lld ns for generation %llu; it must return "
                               "a period > 0",
                               (long long)period, (unsigned long long)g64);
        }
        tr.open_for_ns = period;
        if (reopens > (int64_t)CIRCUIT__F31_MASK)
            reopens = (int64_t)CIRCUIT__F31_MASK;
        nw = (circuit__u128){circuit__word_lo(CIRCUIT__ST_OPEN, g1, (uint32_t)reopens),
                             circuit__open_end(at, period)};
        break;
    }
    case CIRCUIT_HALF_OPEN:
        if (!half_reopens_set(b, c->lo, g1, circuit__lo_count(c->lo))) {
            *c = circuit__ld128_acq(&b->s->core); /* acquire: the caller decides again from it */
            return false;
        }
        nw = (circuit__u128){circuit__word_lo(CIRCUIT__ST_HALF_OPEN, g1, 0) | half_flags, 0};
        break;
    case CIRCUIT_ISOLATED:
        nw = (circuit__u128){circuit__word_lo(CIRCUIT__ST_ISOLATED, g1, 0), 0};
        break;
    default: /* CLOSED: a new closed state, at its first point k0, in a fresh epoch */
        if (!circuit__closed_enter(b, c->lo, g1, &nw)) {
            *c = circuit__ld128_acq(&b->s->core); /* acquire: the caller decides again from it */
            return false;
        }
        break;
    }

    if (b->shared)
        circuit__making_enter(b); /* SH3: a lower generation of ours may be on its way */
    if (!circuit__core_cas(b, c, nw)) {
        if (b->shared)
            circuit__making_leave(b);
        return false;
    }
    *c = nw;
    gen64_raise(b, g64);
    circuit__faa_rlx(&b->s->transitions, 1); /* relaxed: a total */
    circuit__publish(b, &tr, call_ctx);
    if (b->shared)
        circuit__making_leave(b);
    /* after the publication (a maker stopped before it would hold back
     * every later delivery, O3): open the mirror for the new closed state */
    if (to == CIRCUIT_CLOSED)
        circuit__mirror_set(b);
    return true;
}

bool circuit__transition(circuit_breaker *b, circuit__u128 *c, circuit_state to,
                         circuit_cause cause, const circuit_counts *counts, int64_t at,
                         void *call_ctx)
{
    return transition(b, c, to, cause, counts, at, call_ctx, 0);
}

bool circuit__transition_half_open(circuit_breaker *b, circuit__u128 *c, bool slot0_probe,
                                   int64_t at, void *call_ctx)
{
    static const circuit_counts zero = {0, 0, 0, 0, 0};
    return transition(b, c, CIRCUIT_HALF_OPEN, CIRCUIT_CAUSE_TIMER, &zero, at, call_ctx,
                      slot0_probe ? 0 : CIRCUIT__LO_NO_PROBE0);
}
