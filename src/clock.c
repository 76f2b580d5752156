/*
 * The clock: CLOCK_MONOTONIC in nanoseconds (TM1). The test build's
 * circuit__now is the settable clock of testing.c (TM3); the installed
 * library has no clock parameter.
 */
#include <time.h>

#include "internal.h"

int64_t circuit__clock_monotonic(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#ifndef CIRCUIT_TESTING
int64_t circuit__now(void)
{
    return circuit__clock_monotonic();
}
#endif
