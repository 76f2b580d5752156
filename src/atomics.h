/*
 * The one atomics vocabulary of the core (docs/CONTRACT.md L7). Every
 * shared access in src/ goes through these functions, and each name carries
 * its C11 memory order: _rlx, _acq, _rel, _acq_rel, _sc. Each call site says
 * in one line why that order is enough (tests/check_atomics.py).
 *
 * INVARIANTS
 *   - 8-byte operations and the full fence are the __atomic builtins in
 *     every build: the TSan build runs the code the release build ships;
 *   - every write of a 16-byte word is single-copy atomic (cmpxchg16b on
 *     x86-64, a successful stlxp on aarch64); a failed aarch64 comparison
 *     is no snapshot, so the expected value is re-read;
 *   - a 16-byte read (release builds) loads low, high, low with acquire and
 *     retries until the lows agree: a value the word held.
 * The per-build details and the argument for the 16-byte read:
 * docs/design/atomics.md.
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

#if !defined(__x86_64__) && !defined(__aarch64__)
#error "libcircuit's atomics are written for x86-64 and aarch64 only (see src/atomics.h)"
#endif

#ifdef CIRCUIT__TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define circuit__tsan_acquire(p) __tsan_acquire((void *)(p))
#define circuit__tsan_release(p) __tsan_release((void *)(p))
#else
#define circuit__tsan_acquire(p) ((void)(p))
#define circuit__tsan_release(p) ((void)(p))
#endif

/* The size that data written by different CPUs is padded and aligned to,
 * so that two CPUs never write one cache line (false sharing): 64 bytes on
 * x86-64 (its line size); 128 on aarch64, where some cores have 128-byte
 * lines (Cavium ThunderX, Apple M-series; Linux's arm64 port aligns DMA
 * buffers to 128 for them). Neoverse cores have 64-byte lines, for which
 * 128 costs only memory; Fujitsu A64FX's 256-byte lines are not covered.
 * docs/PLATFORMS.md says the same for users. */
#if defined(__aarch64__)
#define CIRCUIT_CACHELINE 128
#else
#define CIRCUIT_CACHELINE 64
#endif

/* A 16-byte word, changed only as a whole by circuit__cas128. */
typedef struct circuit__u128 {
    uint64_t lo, hi;
} __attribute__((aligned(16))) circuit__u128;


/* The schedule checker (docs/CONTRACT.md V1, tests/sched/): in its build
 * (CIRCUIT_SCHED) every operation below first calls the scheduler, which
 * may let another scenario thread run before the access is made. Threads
 * run one at a time, so each operation here, the 16-byte ones included, is
 * one indivisible step of a schedule. Other builds compile it away. */
typedef enum circuit__sp_kind {
    CIRCUIT__SP_LD_RLX, CIRCUIT__SP_LD_ACQ, CIRCUIT__SP_ST_RLX, CIRCUIT__SP_ST_REL,
    CIRCUIT__SP_CAS_RLX, CIRCUIT__SP_CAS_ACQ, CIRCUIT__SP_CAS_REL, CIRCUIT__SP_CAS_ACQ_REL,
    CIRCUIT__SP_FAA_RLX, CIRCUIT__SP_FAA_REL, CIRCUIT__SP_FAA_SC, CIRCUIT__SP_FENCE_SC,
    CIRCUIT__SP_LD128_ACQ, CIRCUIT__SP_LD128_LO_ACQ, CIRCUIT__SP_CAS128_SC,
    CIRCUIT__SP_CLOCK, CIRCUIT__SP_PARK, CIRCUIT__SP__COUNT
} circuit__sp_kind;
#ifdef CIRCUIT_SCHED
void circuit__sched_point(circuit__sp_kind kind, const void *addr);
#define CIRCUIT__SWITCH(kind, p) circuit__sched_point(CIRCUIT__SP_##kind, (const void *)(p))
#else
#define CIRCUIT__SWITCH(kind, p) ((void)0)
#endif

/* ---- 8-byte ------------------------------------------------------------- */

static inline uint64_t circuit__ld_rlx(const uint64_t *p)
{
    CIRCUIT__SWITCH(LD_RLX, p);
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}
static inline uint64_t circuit__ld_acq(const uint64_t *p)
{
    CIRCUIT__SWITCH(LD_ACQ, p);
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
static inline void circuit__st_rlx(uint64_t *p, uint64_t v)
{
    CIRCUIT__SWITCH(ST_RLX, p);
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
}
static inline void circuit__st_rel(uint64_t *p, uint64_t v)
{
    CIRCUIT__SWITCH(ST_REL, p);
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
/* Compare-and-swap; on failure *expected receives the current value (read
 * with the failure order given in the name: the second word). */
static inline bool circuit__cas_rlx(uint64_t *p, uint64_t *expected, uint64_t desired)
{
    CIRCUIT__SWITCH(CAS_RLX, p);
    return __atomic_compare_exchange_n(p, expected, desired, false, __ATOMIC_RELAXED,
                                       __ATOMIC_RELAXED);
}
static inline bool circuit__cas_acq(uint64_t *p, uint64_t *expected, uint64_t desired)
{
    CIRCUIT__SWITCH(CAS_ACQ, p);
    return __atomic_compare_exchange_n(p, expected, desired, false, __ATOMIC_ACQUIRE,
                                       __ATOMIC_ACQUIRE);
}
static inline bool circuit__cas_rel(uint64_t *p, uint64_t *expected, uint64_t desired)
{
    CIRCUIT__SWITCH(CAS_REL, p);
    return __atomic_compare_exchange_n(p, expected, desired, false, __ATOMIC_RELEASE,
                                       __ATOMIC_RELAXED);
}
static inline bool circuit__cas_acq_rel(uint64_t *p, uint64_t *expected, uint64_t desired)
{
    CIRCUIT__SWITCH(CAS_ACQ_REL, p);
    return __atomic_compare_exchange_n(p, expected, desired, false, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE);
}
static inline uint64_t circuit__faa_rlx(uint64_t *p, uint64_t d)
{
    CIRCUIT__SWITCH(FAA_RLX, p);
    return __atomic_fetch_add(p, d, __ATOMIC_RELAXED);
}
static inline uint64_t circuit__faa_rel(uint64_t *p, uint64_t d)
{
    CIRCUIT__SWITCH(FAA_REL, p);
    return __atomic_fetch_add(p, d, __ATOMIC_RELEASE);
}
static inline uint64_t circuit__faa_sc(uint64_t *p, uint64_t d)
{
    CIRCUIT__SWITCH(FAA_SC, p);
    return __atomic_fetch_add(p, d, __ATOMIC_SEQ_CST);
}
/* A full fence: orders every earlier access before every later one,
 * store -> load included. Each use names the (store, load) pair it orders.
 *
 * The TSan build runs this very fence (L7). TSan does not model fences: it
 * draws no happens-before edge through one (gcc says so with -Wtsan, hence
 * the pragma). Nothing needs one here: every use sits in a Dekker pair
 * "store A; fence; load B" against "store B; fence; load A" whose stores are
 * release or stronger and whose loads are acquire or stronger, so whenever
 * one side reads what the other stored, that load and store make the edge
 * themselves, and TSan sees it. A seq_cst fence gives C11 a further edge
 * only through a RELAXED access (fence; relaxed store -> relaxed load;
 * fence), and no use relies on such a pair; a code change that did would
 * show up as a TSan report, since no edge is drawn for it
 * (tests/stress/fence_canary.c checks that the TSan build draws no edge
 * through a fence). */
static inline void circuit__fence_sc(void)
{
    CIRCUIT__SWITCH(FENCE_SC, 0);
#if defined(CIRCUIT__TSAN) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtsan"
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#pragma GCC diagnostic pop
#else
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

/* ---- 16-byte ------------------------------------------------------------ */

#ifdef CIRCUIT__TSAN
__extension__ typedef unsigned __int128 circuit__int128;
static inline circuit__int128 circuit__join128(circuit__u128 v)
{
    return ((circuit__int128)v.hi << 64) | v.lo;
}
static inline circuit__u128 circuit__split128(circuit__int128 x)
{
    return (circuit__u128){(uint64_t)x, (uint64_t)(x >> 64)};
}
#endif

/* Reads a 16-byte word as a value it really held (see the top comment),
 * with acquire order. */
static inline circuit__u128 circuit__ld128_acq(const circuit__u128 *p)
{
    CIRCUIT__SWITCH(LD128_ACQ, p);
#ifdef CIRCUIT__TSAN
    return circuit__split128(
        __atomic_load_n((const circuit__int128 *)(const void *)p, __ATOMIC_ACQUIRE));
#else
    circuit__u128 v;
    v.lo = __atomic_load_n(&p->lo, __ATOMIC_ACQUIRE);
    for (;;) {
        v.hi = __atomic_load_n(&p->hi, __ATOMIC_ACQUIRE);
        uint64_t again = __atomic_load_n(&p->lo, __ATOMIC_ACQUIRE);
        if (again == v.lo)
            return v;
        v.lo = again;
    }
#endif
}

/* The low half alone (one 8-byte load), with acquire order. */
static inline uint64_t circuit__ld128_lo_acq(const circuit__u128 *p)
{
    CIRCUIT__SWITCH(LD128_LO_ACQ, p);
#ifdef CIRCUIT__TSAN
    return (uint64_t)__atomic_load_n((const circuit__int128 *)(const void *)p,
                                     __ATOMIC_ACQUIRE);
#else
    return __atomic_load_n(&p->lo, __ATOMIC_ACQUIRE);
#endif
}

/* 16-byte compare-and-swap. On success it is a full barrier on x86-64 and
 * acquire + release on aarch64 (the stlxp is a store-release, so with an
 * ldar after it the pair is ordered: ARMv8 acquire/release are RCsc, which
 * is what "sc" promises the call sites that rely on it together with
 * circuit__fence_sc). On failure *expected receives a value the word really
 * held (re-read with circuit__ld128_acq on aarch64). */
static inline bool circuit__cas128_sc(circuit__u128 *p, circuit__u128 *expected,
                                      circuit__u128 desired)
{
    CIRCUIT__SWITCH(CAS128_SC, p);
#if defined(CIRCUIT__TSAN)
    circuit__int128 e = circuit__join128(*expected);
    bool ok = __atomic_compare_exchange_n((circuit__int128 *)(void *)p, &e,
                                          circuit__join128(desired), false, __ATOMIC_SEQ_CST,
                                          __ATOMIC_SEQ_CST);
    *expected = circuit__split128(e);
    return ok;
#elif defined(__x86_64__)
    bool ok;
    __asm__ __volatile__("lock cmpxchg16b %[mem]"
                         : [mem] "+m"(*p), "=@ccz"(ok), "+a"(expected->lo), "+d"(expected->hi)
                         : "b"(desired.lo), "c"(desired.hi)
                         : "memory");
    return ok;
#else /* aarch64 */
    uint64_t lo, hi;
    uint32_t fail;
    __asm__ __volatile__("1: ldaxp  %[lo], %[hi], %[mem]\n"
                         "   cmp    %[lo], %[elo]\n"
                         "   ccmp   %[hi], %[ehi], #0, eq\n"
                         "   b.ne   2f\n"
                         "   stlxp  %w[fail], %[dlo], %[dhi], %[mem]\n"
                         "   cbnz   %w[fail], 1b\n"
                         "2:\n"
                         : [lo] "=&r"(lo), [hi] "=&r"(hi), [fail] "=&r"(fail), [mem] "+Q"(*p)
                         : [elo] "r"(expected->lo), [ehi] "r"(expected->hi),
                           [dlo] "r"(desired.lo), [dhi] "r"(desired.hi)
                         : "cc", "memory");
    if (lo == expected->lo && hi == expected->hi)
        return true;
    *expected = circuit__ld128_acq(p); /* the ldaxp pair is no snapshot */
    return false;
#endif
}

/* A hint that this thread is about to write p's cache line: fetch it for
 * writing (exclusive) now, so a read followed by a CAS of the line costs
 * one hand-over from another CPU, not two (a shared copy, then its
 * upgrade). No access, no order: the CPU may ignore it. x86-64 PREFETCHW
 * (a no-op on CPUs without it), aarch64 PRFM PSTL1KEEP. */
static inline void circuit__prefetch_w(const void *p)
{
#if defined(CIRCUIT__TSAN)
    (void)p;
#elif defined(__x86_64__)
    __asm__ __volatile__("prefetchw %0" : : "m"(*(const char *)p));
#else /* aarch64 */
    __asm__ __volatile__("prfm pstl1keep, %0" : : "Q"(*(const char *)p));
#endif
}

/* Only before the object is shared (circuit_new). */
static inline void circuit__st128_init(circuit__u128 *p, circuit__u128 v)
{
    p->lo = v.lo;
    p->hi = v.hi;
}

#endif
