/*
 * bench_reads: the calls that only read: a rejection while open, get_state
 * and get_stats, against one clock read.
 * Options: bench_reads --help (main.c).
 *
 * SPDX-License-Identifier: MIT
 */
#include "bench.h"

int main(int argc, char **argv)
{
    static const bench_program p = {
        "bench_reads",
        "the calls that only read: a rejection while open, get_state and get_stats, "
        "against one clock read",
        "open_reject,get_state,get_stats,clock",
        NULL,
    };
    return bench_main(argc, argv, &p);
}
