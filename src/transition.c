/*
 * Transitions (transition.h): build, CAS, publish. Every change of state,
 * whoever decides it (a counted result, a probe timeout, the clock, an
 * operator), is made here, so the generation, the reopen count, the total of
 * M1 and the record handed to delivery are kept in one place.
 */
#include "delivery.h"
#include "percpu.h"
#include "transition.h"

static void gen64_raise(circuit_breaker *b, uint64_t g)
{
    uint64_t cur = circuit__ld_rlx(&b->gen64); /* relaxed: table gen64 */
    /* relaxed: a monotonic maximum, read only to widen tags */
    while (cur < g && !circuit__cas_rlx(&b->gen64, &cur, g))
        ;
}

/* Reopens of the half-open state of generation `gen` (B2), kept beside the
 * word because the half-open word has no room for it. */
static int64_t half_reopens(const circuit_breaker *b, uint32_t gen)
{
    /* acquire: pairs with the write made before the CAS that entered gen */
    uint64_t v = circuit__ld_acq((uint64_t *)(uintptr_t)&b->half_reopens);
    return (uint32_t)(v >> 32) == gen ? (int64_t)(uint32_t)v : 0;
}

/* Before the CAS that makes open -> half-open (gen), record the reopen count
 * the half-open state inherits. Written only while the word still holds the
 * open state it was computed from (checked after reading the value, and the
 * CAS from that value fails if it moved since), so a stale caller cannot
 * overwrite a later state's count. Returns false when the word moved. */
static bool half_reopens_set(circuit_breaker *b, uint64_t open_lo, uint32_t gen, uint32_t k)
{
    uint64_t want = ((uint64_t)gen << 32) | k;
    uint64_t v = circuit__ld_acq(&b->half_reopens); /* acquire: before the check */
    while (v != want) {
        /* acquire: the check follows the read above */
        if (circuit__ld128_lo_acq(&b->core) != open_lo)
            return false;
        /* acquire on failure: the value returned is checked again */
        if (circuit__cas_acq(&b->half_reopens, &v, want))
            break;
    }
    return true;
}

/* Before the CAS that enters closed generation g1: the descriptor slots
 * (counting.c) hold nothing of an older closed state (emptied, tagged with
 * g1), only while the word still holds lo (read X, check, CAS X: a stopped
 * thread cannot empty a later state's slots). */
static bool desc_empty(circuit_breaker *b, uint64_t lo, uint32_t g1)
{
    circuit__u128 empty = {0, g1};
    for (int i = 0; i < 2; i++) {
        circuit__u128 x = circuit__ld128_acq(&b->desc[i]); /* acquire: before the check */
        while (x.lo != empty.lo || x.hi != empty.hi) {
            if (circuit__ld128_lo_acq(&b->core) != lo) /* acquire: table core */
                return false;
            CIRCUIT__SHARED_RMW();
            if (circuit__cas128_sc(&b->desc[i], &x, empty)) /* table: desc */
                break;
        }
    }
    return true;
}

bool circuit__transition(circuit_breaker *b, circuit__u128 *c, circuit_state to,
                         circuit_cause cause, const circuit_counts *counts, int64_t at,
                         void *call_ctx)
{
    unsigned code = circuit__code(c->lo);
    uint32_t g1 = circuit__gen_next(circuit__gen(c->lo));
    uint64_t g64 = circuit__gen_widen(b, g1);
    circuit_transition tr = {circuit__pub_state(code), to, g64, *counts, cause, 0};
    circuit__u128 nw;
    switch (to) {
    case CIRCUIT_OPEN: {
        int64_t reopens = code == CIRCUIT__ST_HALF_OPEN ? half_reopens(b, circuit__gen(c->lo)) + 1 : 0;
        int64_t period = b->cfg.open_for_ns;
        if (b->open_for) {
            circuit_open_info info = {*counts, g64, reopens, b->salt};
            CIRCUIT__CB_FRAME(frame, b, "open_for");
            period = b->open_for(b->open_for_arg, &info);
            if (period <= 0)
                circuit__abort("open_for returned %lld ns for generation %llu; it must return "
                               "a period > 0",
                               (long long)period, (unsigned long long)g64);
        }
        tr.open_for_ns = period;
        if (reopens > (int64_t)CIRCUIT__F31_MASK)
            reopens = (int64_t)CIRCUIT__F31_MASK;
        nw = (circuit__u128){circuit__mklo(CIRCUIT__ST_OPEN, g1, (uint32_t)reopens),
                             circuit__open_end(at, period)};
        break;
    }
    case CIRCUIT_HALF_OPEN:
        if (!half_reopens_set(b, c->lo, g1, circuit__lo31(c->lo))) {
            *c = circuit__ld128_acq(&b->core); /* acquire: the caller decides again from it */
            return false;
        }
        nw = (circuit__u128){circuit__mklo(CIRCUIT__ST_HALF_OPEN, g1, 0), 0};
        break;
    case CIRCUIT_ISOLATED:
        nw = (circuit__u128){circuit__mklo(CIRCUIT__ST_ISOLATED, g1, 0), 0};
        break;
    default: /* CLOSED: a new closed state, at exact point 0 of a fresh epoch */
        if (!desc_empty(b, c->lo, g1)) {
            *c = circuit__ld128_acq(&b->core); /* acquire: the caller decides again from it */
            return false;
        }
        nw = (circuit__u128){circuit__mkclo(g1, circuit__fresh_epoch(b), false, false, 0),
                             circuit__mkchi(0, 0)};
        break;
    }
    if (!circuit__core_cas(b, c, nw))
        return false;
    *c = nw;
    gen64_raise(b, g64);
    circuit__faa_rlx(&b->transitions, 1); /* relaxed: a total */
    circuit__publish(b, &tr, call_ctx);
    return true;
}
