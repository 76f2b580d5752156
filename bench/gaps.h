/*
 * Seeded failures (gaps.c), shared by bench_closed_mixed and bench_rmw.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CIRCUIT_BENCH_GAPS_H
#define CIRCUIT_BENCH_GAPS_H

#include <stdint.h>

/* GAPS pseudo-random gaps per thread (a power of 2), drawn from the
 * geometric distribution of the calls up to and including the next failure
 * when each call fails with probability p, independently; the loops use
 * them in turn. */
#define GAPS 4096u

/* Fills gaps[0..GAPS) for p = 1 / every (mean gap: every), seeded by seed. */
void fill_gaps(uint32_t *gaps, uint64_t every, uint64_t seed);

/* The seed of thread i (0, 1, ...) of a case with 1 failure in `every`. */
static inline uint64_t gap_seed(int i, uint64_t every)
{
    return UINT64_C(0x5eed0000) + (uint64_t)i * 7919u + every;
}

#endif
