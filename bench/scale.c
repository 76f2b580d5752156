/*
 * bench_scale: closed successes on one breaker at 1..2 x CPUs threads,
 * windows 1 to 65536, against mutex_breaker and one uncontended atomic add
 * (atomic_floor): the scaling targets.
 * Options: bench_scale --help (main.c).
 *
 * SPDX-License-Identifier: MIT
 */
#include "bench.h"

int main(int argc, char **argv)
{
    static const bench_program p = {
        "bench_scale",
        "closed successes on one breaker at 1..2 x CPUs threads, windows 1 to 65536, "
        "against mutex_breaker and one uncontended atomic add (atomic_floor): the scaling"
        " targets",
        "closed_success,atomic_floor",
        NULL,
    };
    return bench_main(argc, argv, &p);
}
