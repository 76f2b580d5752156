/*
 * bench_half_open: half-open probes (allow + done) with 1, 64 and 65536
 * probe slots.
 * Options: bench_half_open --help (main.c).
 *
 * SPDX-License-Identifier: MIT
 */
#include "bench.h"

int main(int argc, char **argv)
{
    static const bench_program p = {
        "bench_half_open",
        "half-open probes (allow + done) with 1, 64 and 65536 probe slots",
        "half_open_probe",
        NULL,
    };
    return bench_main(argc, argv, &p);
}
