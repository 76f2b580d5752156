/*
 * bench_closed_mixed: closed allow + done with 0.01 % to 10 % seeded
 * failures, windows 64 and 1024, against mutex_breaker: counting under real
 * traffic.
 * Options: bench_closed_mixed --help (main.c).
 *
 * SPDX-License-Identifier: MIT
 */
#include "bench.h"

int main(int argc, char **argv)
{
    static const bench_program p = {
        "bench_closed_mixed",
        "closed allow + done with 0.01 % to 10 % seeded failures, windows 64 and 1024, "
        "against mutex_breaker: counting under real traffic",
        "closed_mixed,closed_success",
        "64,1024",
    };
    return bench_main(argc, argv, &p);
}
