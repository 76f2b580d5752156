/*
 * The state word (word.h): the widening of generation tags.
 */
#include "word.h"

uint64_t circuit__gen_widen(const circuit_breaker *b, uint32_t tag)
{
    /* relaxed: gen64 is only a reference point near the tag's generation,
     * whichever transition raised it last */
    uint64_t base = circuit__ld_rlx((uint64_t *)(uintptr_t)&b->s->gen64);
    /* The tag's distance from the base is SIGNED. The base may lag the tag
     * (a transition made and gen64 not yet raised by its maker) or lead it
     * (the word is read, then others made transitions and raised gen64:
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
