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

int64_t circuit__now(void)
{
#ifdef CIRCUIT_TESTING
    return CIRCUIT__TEST_CLOCK(); /* testing.c's settable clock (TM3) */
#else
    return circuit__clock_monotonic();
#endif
}
