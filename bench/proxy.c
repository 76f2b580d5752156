/*
 * bench_proxy: a call with 1 us of busy work behind the breaker, against the
 * same call with no breaker: the overhead.
 * Options: bench_proxy --help (main.c).
 *
 * SPDX-License-Identifier: MIT
 */
#include "bench.h"

int main(int argc, char **argv)
{
    static const bench_program p = {
        "bench_proxy",
        "a call with 1 us of busy work behind the breaker, against the same call with no "
        "breaker: the overhead",
        "proxy_cycle",
        NULL,
    };
    return bench_main(argc, argv, &p);
}
