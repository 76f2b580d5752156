/*
 * The per-CPU part (percpu.c): 16 bytes per CPU per breaker (docs/CONTRACT.md
 * L5), units of a process-wide per-CPU arena, holding the
 * closed success cell (L6; its protocol is counting.c's)
 * and the packed totals of M1 counted on paths that write no shared line.
 *
 * LAYER INTERFACE (the lower floor of counting; counting.h is the upper):
 *   circuit__pcpu_take     a breaker's units, from the arena (circuit_new)
 *   circuit__pcpu_give     back to the arena (circuit_free)
 *   circuit__pcpu_init     the initial state word (closed, generation 0,
 *                          epoch 0, point 0), D_0 and the cells of epoch 0
 *   circuit__fresh_epoch   a new epoch id for the cells (transition.c when
 *                          a closed state starts, counting.c when one ends)
 *   circuit__unit          CPU i's unit; circuit__my_cpu: this CPU's
 *   circuit__total_add     one more of an M1 total
 *   circuit__totals_read   every M1 total counted here (stats)
 * Callers above: transition.c, counting.c, stats.c, breaker.c. It calls
 * only the state word below it (word.h).
 *
 * THE PACKED TOTALS. A unit's second word packs six totals of M1 as
 * bit-fields {parity:1, value:w} (the table below). A field counts up to
 * 2T - 1, T = 2^(w-1); at T its owner moves T units to the breaker's shared
 * total for that field (a FLUSH), so the field never carries into its
 * neighbour and the word stays 8 bytes. This is the kernel's percpu_counter
 * (per-CPU deltas folded into a shared count at a batch size), made exact
 * for a reader that writes nothing: a flush moves units in three steps that
 * a reader can tell apart.
 *   tot_ctl   {seq:46, c:12, i:3, pS:1, pP:1, busy:1}: one flush at a time
 *             per breaker. START: CAS from an idle word to busy, seq + 1,
 *             naming the CPU c, the field i and the two parities as they
 *             are before the flush. Only the thread whose START won goes on
 *             (no helping); END stores it idle, seq + 1 again, still naming
 *             the flush.
 *   CREDIT    one add of T + 2^63 to tot_shared[i]: the total grows by T
 *             and its parity bit flips, in one RMW.
 *   SUBTRACT  CAS loop on c's word: value - T, parity flipped.
 *   A field at 2T - 1 (a flush busy elsewhere or stopped) takes the
 *   OVERFLOW path: its unit is added to tot_shared[i] directly (+1, the
 *   parity untouched), and it tries to start its field's flush. Nobody
 *   waits for a stopped flush (lock-free, L1).
 * A READER (get_stats) loads tot_ctl, every unit's word, every shared
 * total, then tot_ctl again, all with acquire. seq says how many STARTs
 * and ENDs happened in between; END leaves the flush named (idle), so
 * when that is at most one flush (it started, ended, or both, during the
 * read; or it stayed busy throughout) tot_ctl names it, and the read corrects
 * for it alone: its credit is seen iff the shared parity differs from pS,
 * its subtract iff c's field parity differs from pP; seen credited but not
 * subtracted, its T units are in both places: counted once. A subtract
 * seen implies its credit seen (CREDIT's order before SUBTRACT, acquire
 * loads of the fields before the shared totals). A flush that ended before
 * the first load is wholly seen, one that starts after the last not at
 * all. Two flushes or more during one read: it reads again (lock-free:
 * each try follows other threads' flushes). Every other field only grew
 * during the read, so each sum lies between the totals at the start and
 * the end of the read: a value the total held (M1). Model:
 * tests/model/spin/totals.pml.
 *
 * Thresholds (w, T): how often each total's flush costs three shared-line
 * writes on one CPU. admitted (21, 2^20: once per million admissions, like
 * the cell's limit), rejected (11, 1024), failures (7, 64: a failure makes
 * three shared RMWs anyway, L8), ignored and released (8, 128), late (3, 4:
 * late results come only from tickets a transition overtook).
 */
#ifndef CIRCUIT_PERCPU_H
#define CIRCUIT_PERCPU_H

#include <sched.h>
#include <sys/rseq.h>

#include "word.h"

/* The line of the CPU this thread runs on: sched_getcpu(), which glibc
 * answers from rseq without a system call. A thread may migrate right after:
 * every write to a line is an atomic RMW, so that costs speed, never a
 * count. */
#ifdef CIRCUIT_SCHED
/* The schedule checker's build: the scenario decides which CPU a thread is
 * on, and may move it between two reads (tests/sched/). */
int circuit__sched_cpu(void);
#endif
static inline int circuit__cpu_now(void)
{
#ifdef CIRCUIT_SCHED
    return circuit__sched_cpu();
#endif
    /* glibc registers a restartable-sequence area for every thread and
     * publishes where it is (__rseq_offset from the thread pointer) and
     * whether it could (__rseq_size: 0 under valgrind, qemu-user, a kernel
     * without rseq or glibc.pthread.rseq=0); the kernel keeps its cpu_id
     * current. This is what sched_getcpu() reads, without the call. The
     * area is this thread's own: a volatile read, no atomic (the kernel
     * writes it between our instructions, never concurrently with them). */
    if (__builtin_expect(__rseq_size != 0, 1)) {
        const volatile struct rseq *rs =
            (const volatile struct rseq *)(const void *)((const char *)__builtin_thread_pointer() +
                                                         __rseq_offset);
        int cpu = (int)rs->cpu_id;
        if (cpu >= 0)
            return cpu;
    }
    return sched_getcpu();
}

/* The arena's chunks hold CIRCUIT__ARENA_FIRST breakers' units while the
 * process has fewer breakers than that, CIRCUIT__ARENA_UNITS after: a
 * chunk's per-CPU regions are units x 16 bytes apart (a multiple of the
 * line: no two CPUs share one), b->pcpu_stride. */
#define CIRCUIT__ARENA_FIRST 8u
#define CIRCUIT__ARENA_UNITS 64u

/* Takes a unit for every CPU (ncpu of them) from the arena, zeroed, and
 * sets b->pcpu0, b->pcpu_stride and b->arena_unit; false when out of memory. Takes the
 * arena's mutex (construction only: no call on a breaker takes it). */
bool circuit__pcpu_take(circuit_breaker *b);
/* Gives the units back (the chunk is freed with its last breaker). */
void circuit__pcpu_give(circuit_breaker *b);

static inline circuit__pcpu *circuit__unit(const circuit_breaker *b, uint32_t i)
{
    return (circuit__pcpu *)(void *)(b->pcpu0 + (size_t)i * b->pcpu_stride);
}

static inline uint32_t circuit__my_index(const circuit_breaker *b)
{
    int cpu = circuit__cpu_now();
    uint32_t i = cpu < 0 ? 0u : (uint32_t)cpu;
    if (i >= b->ncpu) /* more CPUs online than configured at circuit_new */
        i %= b->ncpu;
    return i;
}

static inline circuit__pcpu *circuit__my_cpu(const circuit_breaker *b)
{
    return circuit__unit(b, circuit__my_index(b));
}

/* ---- the packed totals ---------------------------------------------------- */
static inline unsigned circuit__tot_width(enum circuit__total t)
{
    switch (t) {
    case CIRCUIT__T_ADMITTED: return 21;
    case CIRCUIT__T_REJECTED: return 11;
    case CIRCUIT__T_FAILURES: return 7;
    case CIRCUIT__T_IGNORED: return 8;
    case CIRCUIT__T_RELEASED: return 8;
    default: return 3; /* CIRCUIT__T_LATE */
    }
}
static inline unsigned circuit__tot_shift(enum circuit__total t)
{
    switch (t) {
    case CIRCUIT__T_ADMITTED: return 0;
    case CIRCUIT__T_REJECTED: return 22;
    case CIRCUIT__T_FAILURES: return 34;
    case CIRCUIT__T_IGNORED: return 42;
    case CIRCUIT__T_RELEASED: return 51;
    default: return 60; /* CIRCUIT__T_LATE: bits 60-63 */
    }
}
/* T: a flush moves this many; the field's value stays below 2T. */
static inline uint64_t circuit__tot_batch(enum circuit__total t)
{
    return UINT64_C(1) << (circuit__tot_width(t) - 1);
}
static inline uint64_t circuit__tot_value(uint64_t word, enum circuit__total t)
{
    return (word >> circuit__tot_shift(t)) & ((UINT64_C(1) << circuit__tot_width(t)) - 1);
}
static inline uint64_t circuit__tot_parity(uint64_t word, enum circuit__total t)
{
    return (word >> (circuit__tot_shift(t) + circuit__tot_width(t))) & 1u;
}

#define CIRCUIT__SHARED_PARITY (UINT64_C(1) << 63)

/* The slow side of an add (percpu.c): a flush once the field reached T, or
 * the overflow path at 2T - 1. */
void circuit__total_flush(circuit_breaker *b, uint32_t c, enum circuit__total t);
void circuit__total_overflow(circuit_breaker *b, uint32_t c, enum circuit__total t);

/* Adds one to a total of M1: a packed field of this CPU's unit, or,
 * for the successes of shared paths, the shared total. */
static inline void circuit__total_add(circuit_breaker *b, enum circuit__total t)
{
    if (t == CIRCUIT__T_SUCCESSES) {
        /* relaxed: a total; its paths already write shared lines (count_slow) */
        circuit__faa_rlx(&b->succ_slow, 1);
        return;
    }
    uint32_t c = circuit__my_index(b);
    uint64_t *w = &circuit__unit(b, c)->tot;
    const uint64_t top = (UINT64_C(1) << circuit__tot_width(t)) - 1;
    uint64_t v = circuit__ld_rlx(w); /* relaxed: the CAS decides */
    for (;;) {
        uint64_t f = circuit__tot_value(v, t);
        if (__builtin_expect(f == top, 0)) {
            circuit__total_overflow(b, c, t);
            return;
        }
        /* relaxed: a total orders nothing; the CAS keeps the field below
         * its top (table: pcpu[].tot) */
        if (circuit__cas_rlx(w, &v, v + (UINT64_C(1) << circuit__tot_shift(t)))) {
            if (__builtin_expect(f + 1 >= circuit__tot_batch(t), 0))
                circuit__total_flush(b, c, t);
            return;
        }
    }
}

/* Every packed total (indexed by enum circuit__total) as a value it held
 * during the call (M1): see THE PACKED TOTALS. Writes nothing. */
void circuit__totals_read(const circuit_breaker *b, uint64_t out[CIRCUIT__T_NPACKED]);

#endif
