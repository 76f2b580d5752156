/*
 * The seeded failure pattern of the closed_mixed_* cases, shared by
 * bench_closed_mixed and bench_rmw (the same gaps in both).
 *
 * SPDX-License-Identifier: MIT
 */
#include <math.h>
#include <stdint.h>

#include "gaps.h"

/* splitmix64: the gaps' generator (a seed per thread, never the loops'). */
static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

void fill_gaps(uint32_t *gaps, uint64_t every, uint64_t seed)
{
    /* G = 1 + floor(ln U / ln(1 - p)), U uniform in (0, 1]: the number of
     * calls up to and including the next failure when each call fails with
     * probability p = 1 / every, independently (mean: every). */
    double lq = log1p(-1.0 / (double)every);
    uint64_t x = seed;
    for (uint32_t i = 0; i < GAPS; i++) {
        double u = ((double)(splitmix(&x) >> 11) + 1.0) * 0x1.0p-53;
        double g = every <= 1 ? 1.0 : 1.0 + floor(log(u) / lq);
        gaps[i] = g >= (double)UINT32_MAX ? UINT32_MAX : (uint32_t)g;
    }
}

