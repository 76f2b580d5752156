/*
 * Atomic operations with their memory order spelled out at every call site.
 *
 * Normal builds use ConcurrencyKit's ck_pr (x86-64 inline assembly, including
 * cmpxchg16b for the 16-byte state word). ThreadSanitizer cannot see inline
 * assembly, and in CK's builtins mode (CK_USE_CC_BUILTINS) its loads and
 * stores stay plain volatile accesses and its fences are compiler barriers
 * only; so TSan builds route every operation through the compiler's __atomic
 * builtins, which TSan instruments, with the same orders. On x86-64 both
 * paths give the same hardware ordering: loads are acquire, stores are
 * release, locked instructions are full barriers.
 *
 * The `__tsan_acquire` / `__tsan_release` marks are for the one place where
 * happens-before flows through code TSan cannot see: liburcu's stack
 * (src/delivery.c).
 */
#ifndef CIRCUIT_ATOMICS_H
#define CIRCUIT_ATOMICS_H

#include <stdbool.h>
#include <stdint.h>

#if defined(__SANITIZE_THREAD__)
#define CIRCUIT__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CIRCUIT__TSAN 1
#endif
#endif

#ifdef CIRCUIT__TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define circuit__tsan_acquire(p) __tsan_acquire((void *)(p))
#define circuit__tsan_release(p) __tsan_release((void *)(p))
/* Only ck_backoff is used from CK in TSan builds; builtins mode keeps its
 * headers free of inline assembly TSan would not see. */
#define CK_USE_CC_BUILTINS 1
#include <ck_backoff.h>
#else
#define circuit__tsan_acquire(p) ((void)(p))
#define circuit__tsan_release(p) ((void)(p))
#include <ck_backoff.h>
#include <ck_pr.h>
#endif

#ifdef CIRCUIT__TSAN
__extension__ typedef unsigned __int128 circuit__int128;
#endif

/* A 16-byte word, updated only as a whole by compare-and-swap. */
typedef struct circuit__u128 {
    uint64_t lo, hi;
} __attribute__((aligned(16))) circuit__u128;

/* ---- 64-bit ------------------------------------------------------------ */

static inline uint64_t circuit__load_acq(const uint64_t *p)
{
#ifdef CIRCUIT__TSAN
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#else
    uint64_t v = ck_pr_load_64(p); /* x86-64: a plain load is acquire */
    return v;
#endif
}

static inline uint64_t circuit__load_rlx(const uint64_t *p)
{
#ifdef CIRCUIT__TSAN
    return __atomic_load_n(p, __ATOMIC_RELAXED);
#else
    return ck_pr_load_64(p);
#endif
}

static inline void circuit__store_rel(uint64_t *p, uint64_t v)
{
#ifdef CIRCUIT__TSAN
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
#else
    ck_pr_store_64(p, v); /* x86-64: a plain store is release */
#endif
}

/* Sequentially consistent store: a store followed by a full fence, for the
 * delivery hand-off (release the role, then look at the queue). */
static inline void circuit__store_sc(uint64_t *p, uint64_t v)
{
#ifdef CIRCUIT__TSAN
    __atomic_store_n(p, v, __ATOMIC_SEQ_CST);
#else
    ck_pr_fas_64(p, v); /* xchg: a full barrier */
#endif
}

/* Compare-and-swap, sequentially consistent. On failure *expected receives
 * the current value. */
static inline bool circuit__cas(uint64_t *p, uint64_t *expected, uint64_t desired)
{
#ifdef CIRCUIT__TSAN
    return __atomic_compare_exchange_n(p, expected, desired, false, __ATOMIC_SEQ_CST,
                                       __ATOMIC_SEQ_CST);
#else
    return ck_pr_cas_64_value(p, *expected, desired, expected);
#endif
}

/* Fetch-and-add, sequentially consistent; returns the previous value. */
static inline uint64_t circuit__faa(uint64_t *p, uint64_t d)
{
#ifdef CIRCUIT__TSAN
    return __atomic_fetch_add(p, d, __ATOMIC_SEQ_CST);
#else
    return ck_pr_faa_64(p, d);
#endif
}

/* ---- 128-bit ----------------------------------------------------------- */

/* Reads a 16-byte word as a value it really held. Normal builds read the
 * low half, the high half, then the low half again, and retry if it moved:
 * x86-64 keeps loads in order, so when the low half did not move between
 * the two reads, the high half read between them was its partner at that
 * moment (barring the low half leaving and coming back to the very same
 * value in between, which for the state word takes a wrap of its 30-bit
 * generation or 32-bit seq). Without this, a policy could be shown counts
 * that never existed, even though the CAS would then reject them. TSan
 * builds read it with one 16-byte atomic load. */
static inline circuit__u128 circuit__load128(const circuit__u128 *p)
{
    circuit__u128 v;
#ifdef CIRCUIT__TSAN
    circuit__int128 x = __atomic_load_n((const circuit__int128 *)(const void *)p,
                                        __ATOMIC_ACQUIRE);
    v.lo = (uint64_t)x;
    v.hi = (uint64_t)(x >> 64);
#else
    v.lo = ck_pr_load_64(&p->lo);
    for (;;) {
        v.hi = ck_pr_load_64(&p->hi);
        uint64_t again = ck_pr_load_64(&p->lo);
        if (again == v.lo)
            break;
        v.lo = again;
    }
#endif
    return v;
}

/* Low half alone (a single atomic 8-byte load). */
static inline uint64_t circuit__load128_lo(const circuit__u128 *p)
{
#ifdef CIRCUIT__TSAN
    circuit__int128 x = __atomic_load_n((const circuit__int128 *)(const void *)p,
                                          __ATOMIC_ACQUIRE);
    return (uint64_t)x;
#else
    return ck_pr_load_64(&p->lo);
#endif
}

/* 16-byte compare-and-swap (cmpxchg16b), sequentially consistent. On failure
 * *expected receives the current value (an atomic snapshot). */
static inline bool circuit__cas128(circuit__u128 *p, circuit__u128 *expected,
                                   circuit__u128 desired)
{
#ifdef CIRCUIT__TSAN
    circuit__int128 e = ((circuit__int128)expected->hi << 64) | expected->lo;
    circuit__int128 d = ((circuit__int128)desired.hi << 64) | desired.lo;
    bool ok = __atomic_compare_exchange_n((circuit__int128 *)(void *)p, &e, d, false,
                                          __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    expected->lo = (uint64_t)e;
    expected->hi = (uint64_t)(e >> 64);
    return ok;
#else
    uint64_t cmp[2] = {expected->lo, expected->hi};
    uint64_t set[2] = {desired.lo, desired.hi};
    uint64_t cur[2];
    bool ok = ck_pr_cas_64_2_value((uint64_t *)(void *)p, cmp, set, cur);
    expected->lo = cur[0];
    expected->hi = cur[1];
    return ok;
#endif
}

static inline void circuit__store128_init(circuit__u128 *p, circuit__u128 v)
{
    /* Only before the object is shared (circuit_new). */
    p->lo = v.lo;
    p->hi = v.hi;
}

#endif
