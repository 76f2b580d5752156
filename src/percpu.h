/*
 * The per-CPU lines (percpu.c): one cache line per CPU holding the fast-mode
 * success record (SPEC L6) and the totals of M1 counted on paths that write
 * no shared line.
 *
 * LAYER INTERFACE (the lower floor of counting; counting.h is the upper):
 *   circuit__pcpu_init     the initial state word (closed, generation 0)
 *                          and the records of its fast interval
 *   circuit__fast_success  count one success on this CPU's line (fast mode)
 *   circuit__fold          make the counts exact: fast word -> slow word
 *   circuit__enter_fast    slow closed word -> fast word (a new closed state
 *                          starts here: transition.c calls it)
 *   circuit__fast_pending  successes the records of a fast word hold
 *   circuit__total_add     one more of an M1 total, on this CPU's line
 * Callers above: transition.c (enter), counting.c (all), stats.c (pending),
 * breaker.c (totals, fold before an operator's transition). It calls only
 * the state word below it (word.h).
 */
#ifndef CIRCUIT_PERCPU_H
#define CIRCUIT_PERCPU_H

#include <sched.h>

#include "word.h"

/* Before the breaker is shared: the initial state word (closed,
 * generation 0, in the fast mode) and the records of its interval. */
void circuit__pcpu_init(circuit_breaker *b);

/* Counts one success of the fast word `lo` on this CPU's record. False when
 * the record is sealed, of another interval or at its limit: the caller
 * takes the slow path, which folds first. */
bool circuit__fast_success(circuit_breaker *b, uint64_t lo);

/* Folds the records of the fast word *c into it: ONE CAS to the exact slow
 * word. Returns true with *c the slow word; false with *c re-read when
 * someone else finished the fold or the word moved. */
bool circuit__fold(circuit_breaker *b, circuit__u128 *c);

/* Enters the fast mode from the slow closed word *c with the counts of
 * `slow` (a fresh interval; its records prepared, then ONE CAS). Returns
 * true with *c the fast word; false with *c re-read when the word moved. */
bool circuit__enter_fast(circuit_breaker *b, circuit__u128 *c, circuit__u128 slow);

/* The successes the records of the fast word `lo` hold (read, not folded). */
uint64_t circuit__fast_pending(const circuit_breaker *b, uint64_t lo);

/* The line of the CPU this thread runs on: sched_getcpu(), which glibc
 * answers from rseq without a system call. A thread may migrate right after:
 * every write to a line is an atomic RMW, so that costs speed, never a
 * count. */
static inline circuit__pcpu *circuit__my_cpu(const circuit_breaker *b)
{
    int cpu = sched_getcpu();
    uint32_t i = cpu < 0 ? 0u : (uint32_t)cpu;
    if (i >= b->ncpu) /* more CPUs online than configured at circuit_new */
        i %= b->ncpu;
    return &b->pcpu[i];
}

/* Adds one to a total of SPEC M1 on this CPU's line. relaxed: a total
 * orders nothing; the RMW keeps it exact when two threads meet on a line. */
static inline void circuit__total_add(circuit_breaker *b, enum circuit__total which)
{
    circuit__faa_rlx((uint64_t *)(void *)((char *)circuit__my_cpu(b) + which), 1);
}

#endif
