/*
 * The per-CPU part (percpu.c): 16 bytes per CPU per breaker (docs/CONTRACT.md
 * L5), units of a process-wide per-CPU arena, holding the closed success
 * cell (L6; closed.c counts on it) and the packed totals of M1 counted on
 * paths that write no shared line.
 *
 * INVARIANTS
 *   - a breaker's unit for CPU i is i regions after its unit for CPU 0, and
 *     two CPUs never share a line;
 *   - a packed field stays below 2T: at T its owner moves T units to the
 *     shared total (a flush: START, CREDIT, SUBTRACT, END), so no field
 *     carries into its neighbour;
 *   - a reader writes nothing and sees each total at a value it held (M1),
 *     correcting for at most one flush in progress.
 * The arena's layout, the flush and the reader's argument, the thresholds:
 * docs/design/percpu.md (SPIN model: tests/model/spin/totals.pml).
 */
#ifndef CIRCUIT_PERCPU_H
#define CIRCUIT_PERCPU_H

#include <sched.h>
#include <sys/rseq.h>

#include "word.h"

#ifdef CIRCUIT_SCHED
/* The schedule checker's build: the scenario decides which CPU a thread is
 * on, and may move it between two reads (tests/sched/). */
int circuit__sched_cpu(void);
#endif

/* The CPU this thread runs on, read without a call. With rseq (glibc 2.35+
 * on Linux 4.18+: every thread of a normal process), `at` points to the
 * cpu_id field of the restartable-sequence area glibc registered for the
 * thread, which the kernel keeps current (sched_getcpu() reads the same
 * field). Without rseq (valgrind, qemu-user, glibc.pthread.rseq=0, an old
 * kernel), `at` is NULL and the thread keeps the number sched_getcpu() gave
 * it, read again every CIRCUIT__CPU_REREAD of its calls: a thread that
 * migrates shares its old CPU's line for at most that many calls. Either
 * way a migration costs speed, never a count (every write to a line is an
 * atomic RMW). A volatile read, no atomic: the area is the thread's own
 * (the kernel writes it between our instructions, never concurrently). */
#define CIRCUIT__CPU_REREAD 64u
typedef struct circuit__cpu_tls {
    const volatile int32_t *at; /* rseq's cpu_id; NULL: no rseq, or not looked yet */
    uint32_t own;               /* without rseq: the number last read */
    uint32_t left;              /* without rseq: calls before it is read again;
                                 * 0: read it (and look for rseq) first */
} circuit__cpu_tls;
extern __thread circuit__cpu_tls circuit__cpu __attribute__((tls_model("initial-exec")));
uint32_t circuit__cpu_first(void); /* percpu.c: looks for rseq, or reads own */

/* The CPU this thread runs on, when it can be read without a call; false
 * when it must be read (then circuit__cpu_now calls). */
static inline bool circuit__cpu_quick(uint32_t *cpu)
{
#ifdef CIRCUIT_SCHED
    *cpu = (uint32_t)circuit__sched_cpu();
    return true;
#endif
    const volatile int32_t *at = circuit__cpu.at;
    if (__builtin_expect(at != NULL, 1)) {
        int32_t c = *at;
        *cpu = (uint32_t)c;
        return c >= 0;
    }
    if (__builtin_expect(circuit__cpu.left == 0, 0))
        return false;
    circuit__cpu.left--; /* this thread's own variable */
    *cpu = circuit__cpu.own;
    return true;
}

static inline uint32_t circuit__cpu_now(void)
{
    uint32_t cpu;
    if (__builtin_expect(circuit__cpu_quick(&cpu), 1))
        return cpu;
    return circuit__cpu_first();
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

/* CPU number cpu as an index of b's units */
static inline uint32_t circuit__index_of(const circuit_breaker *b, uint32_t i)
{
    if (__builtin_expect(i >= b->ncpu, 0))
        i %= b->ncpu;
    return i;
}

static inline uint32_t circuit__my_index(const circuit_breaker *b)
{
    uint32_t i = circuit__cpu_now();
    if (__builtin_expect(i >= b->ncpu, 0)) /* more CPUs online than configured at circuit_new */
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
/* The slow side of circuit__total_add_at (percpu.c): the add that brings
 * the field to T (then a flush), or finds it at its top (overflow). */
void circuit__total_add_slow(circuit_breaker *b, uint32_t c, enum circuit__total t);
/* The same, answering true (a tail call for circuit_allow's fast path). */
bool circuit__total_add_slow_true(circuit_breaker *b, uint32_t c, enum circuit__total t);
static inline void circuit__total_add_at(circuit_breaker *b, uint32_t c, enum circuit__total t)
{
    uint64_t *w = &circuit__unit(b, c)->tot;
    uint64_t v = circuit__ld_rlx(w); /* relaxed: the CAS decides */
    /* below T after the add: nothing to flush, far from the top */
    while (__builtin_expect(circuit__tot_value(v, t) < circuit__tot_batch(t) - 1, 1)) {
        /* relaxed: a total orders nothing (table: pcpu[].tot) */
        if (circuit__cas_rlx(w, &v, v + (UINT64_C(1) << circuit__tot_shift(t))))
            return;
    }
    circuit__total_add_slow(b, c, t);
}

static inline void circuit__total_add(circuit_breaker *b, enum circuit__total t)
{
    if (t == CIRCUIT__T_SUCCESSES) {
        /* relaxed: a total; its paths already write shared lines (count_slow) */
        circuit__faa_rlx(&b->s->succ_slow, 1);
        return;
    }
    circuit__total_add_at(b, circuit__my_index(b), t);
}

/* Every packed total (indexed by enum circuit__total) as a value it held
 * during the call (M1): see docs/design/percpu.md. Writes nothing. */
void circuit__totals_read(const circuit_breaker *b, uint64_t out[CIRCUIT__T_NPACKED]);

#endif
