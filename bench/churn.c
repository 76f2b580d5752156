/*
 * bench_churn: a breaker that trips and closes every few hundred calls:
 * transitions per second.
 * Options: bench_churn --help (main.c).
 *
 * SPDX-License-Identifier: MIT
 */
#include "bench.h"

int main(int argc, char **argv)
{
    static const bench_program p = {
        "bench_churn",
        "a breaker that trips and closes every few hundred calls: transitions per second",
        "churn",
        NULL,
    };
    return bench_main(argc, argv, &p);
}
