/*
 * The per-CPU lines (percpu.c): one cache line per CPU holding the closed
 * success cell (SPEC L6 as amended in 0.3; its protocol is counting.c's)
 * and the totals of M1 counted on paths that write no shared line.
 *
 * LAYER INTERFACE (the lower floor of counting; counting.h is the upper):
 *   circuit__pcpu_init     the initial state word (closed, generation 0,
 *                          epoch 0, point 0), D_0 and the cells of epoch 0
 *   circuit__fresh_epoch   a new epoch id for the cells (transition.c when
 *                          a closed state starts, counting.c when one ends)
 *   circuit__my_cpu        this CPU's line
 *   circuit__total_add     one more of an M1 total, on this CPU's line
 * Callers above: transition.c, counting.c, stats.c, breaker.c. It calls
 * only the state word below it (word.h).
 */
#ifndef CIRCUIT_PERCPU_H
#define CIRCUIT_PERCPU_H

#include <sched.h>
#include <sys/rseq.h>

#include "word.h"

/* Before the breaker is shared: the initial state word (closed,
 * generation 0, epoch 0, exact point 0) and the cells of epoch 0. */
void circuit__pcpu_init(circuit_breaker *b);

/* A fresh epoch id (never 0: the first epoch of a new breaker). */
uint32_t circuit__fresh_epoch(circuit_breaker *b);

/* The line of the CPU this thread runs on: sched_getcpu(), which glibc
 * answers from rseq without a system call. A thread may migrate right after:
 * every write to a line is an atomic RMW, so that costs speed, never a
 * count. */
static inline int circuit__cpu_now(void)
{
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

static inline circuit__pcpu *circuit__my_cpu(const circuit_breaker *b)
{
    int cpu = circuit__cpu_now();
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
