/*
 * A probe slot's record, shared by probes.c (admission, release) and
 * timeouts.c (the scan and the claim). The record is the slot: a slot is
 * held in generation g exactly while its record is busy with g's tag, so
 * one CAS takes it (with its due time) and one CAS frees it.
 * Layout and protocol: docs/design/probes.md.
 */
#ifndef CIRCUIT_SLOTS_H
#define CIRCUIT_SLOTS_H

#include "word.h"

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

/* The record that takes a slot in generation gen for a probe due at `due`,
 * from the record `cur` it replaces (its reuse count plus one: a held
 * record never takes the same value twice). */
static inline circuit__u128 slot_record(uint32_t gen, circuit__u128 cur, int64_t due)
{
    return (circuit__u128){slot_tag(gen, slot_reuse(cur.lo) + 1), (uint64_t)due};
}

/* Record r holds its slot in generation gen: busy with gen's tag (a probe,
 * a timeout's claim of one, or slot 0's reservation). */
static inline bool tag_held(uint64_t tag, uint32_t gen)
{
    return (tag & SLOT_BUSY) && slot_gen(tag) == gen;
}
static inline bool slot_held(circuit__u128 r, uint32_t gen) { return tag_held(r.lo, gen); }

/* Slot 0's record r is the reservation made before the CAS into half-open
 * generation `gen`, not yet taken over by a probe. It is no probe when gen's
 * word carries CIRCUIT__LO_NO_PROBE0 (SLOT 0 above). */
static inline bool slot0_phantom(circuit__u128 r, uint32_t gen)
{
    return (r.lo & (SLOT_BUSY | SLOT_TAKEN)) == SLOT_BUSY && slot_gen(r.lo) == gen &&
           (r.hi & SLOT_RESERVED);
}

static inline uint32_t core_gen(const circuit_breaker *b)
{
    /* acquire: callers check the word after reading what they will CAS */
    return circuit__gen(circuit__ld128_lo_acq(&b->s->core));
}

/* Frees the slot whose record is (gen, reuse): exactly once. */
bool circuit__slot_free(circuit_breaker *b, uint32_t slot, uint32_t gen, uint32_t reuse,
                        bool unless_due, int64_t now);
/* Before the CAS open -> half-open of generation gen: slot 0 reserved. */
bool circuit__slot0_reserve(circuit_breaker *b, uint32_t gen, uint64_t open_lo, uint64_t open_end,
                            int64_t now, uint32_t *reuse);
/* Before that CAS when the tag may alias an older half-open state's: empty
 * what it left (slot records, the window's records). */
bool circuit__halfopen_start(circuit_breaker *b, uint32_t gen, uint64_t open_lo);

#endif
