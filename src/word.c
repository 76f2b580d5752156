/*
 * The state word (word.h): the widening of generation tags and the closed
 * mirror's two writers.
 */
#include "word.h"

uint64_t circuit__gen_widen(const circuit_breaker *b, uint32_t tag)
{
    /* relaxed: gen64 is only a reference point near the tag's generation,
     * whichever transition it was last raised by */
    uint64_t base = circuit__ld_rlx((uint64_t *)(uintptr_t)&b->gen64);
    /* The tag's distance from the base is SIGNED. The base may lag the tag
     * (a transition made and gen64 not yet raised by its maker) or lead it
     * (the word was read, then others made transitions and raised gen64:
     * get_stats after its read, a transition computed from a stale word).
     * Either way the distance is far below 2^29 (it would take 2^29
     * transitions while one thread holds the word), so the nearest
     * generation with this tag is the word's. An unsigned distance turned
     * a base one ahead into tag + 2^30 (M1, B3). */
#if defined(CIRCUIT_PLANT_STATS_GEN_WIDEN)
    /* PLANTED BUG (tests/sched/PLANTS.md): an unsigned
     * distance: a base one ahead of the tag gives tag + 2^30 (M1, B3) */
    return base + ((tag - (base & CIRCUIT__GEN_MASK)) & CIRCUIT__GEN_MASK);
#endif
    uint64_t d = (tag - base) & CIRCUIT__GEN_MASK;
    if (d > (CIRCUIT__GEN_MASK >> 1))
        return base - ((CIRCUIT__GEN_MASK + 1) - d); /* behind the base */
    return base + d;
}

void circuit__mirror_set(circuit_breaker *b)
{
    /* acquire, then acquire: the mirror is read BEFORE the word (word.h) */
    circuit__u128 m = circuit__ld128_acq(&b->mirror);
    uint64_t lo = circuit__ld128_lo_acq(&b->core);
    if (circuit__code(lo) != CIRCUIT__ST_CLOSED || circuit__cintent(lo) != CIRCUIT__INTENT_NONE)
        return;
    uint64_t v = circuit__mirror_of(lo);
    if (m.lo == v)
        return;
    CIRCUIT__HOOK(CIRCUIT_TP_MIRROR_BEFORE_SET);
    CIRCUIT__SHARED_RMW();
    /* sc: table mirror; lost: another set or a shut came first (one try) */
    circuit__cas128_sc(&b->mirror, &m, (circuit__u128){v, m.hi + 1});
}

void circuit__mirror_shut(circuit_breaker *b, circuit__u128 wi)
{
    uint64_t shut = circuit__mirror_of(wi.lo) & ~UINT64_C(3);
    circuit__u128 m = circuit__ld128_acq(&b->mirror); /* acquire: table mirror */
    while (m.lo != shut) {
        /* acquire: table core; a completer of a word that moved on makes no
         * CAS out of it */
        if (circuit__ld128_lo_acq(&b->core) != wi.lo)
            return;
        CIRCUIT__HOOK(CIRCUIT_TP_MIRROR_BEFORE_SHUT);
        CIRCUIT__SHARED_RMW();
        /* sc: table mirror */
        if (circuit__cas128_sc(&b->mirror, &m, (circuit__u128){shut, m.hi + 1}))
            return;
    }
}
