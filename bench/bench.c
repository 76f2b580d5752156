/*
 * The benchmarks' ground floor (bench.h): the shared figures and settings,
 * the clock and the list matching every other part of the timed programs
 * uses.
 * It calls nothing above it.
 */
#include "bench.h"

#include <errno.h>
#include <string.h>
#include <time.h>

int n_cpus;
int cpu_ids[CPU_SETSIZE];
double ticks_per_ns = 1.0;
double tick_overhead_ns;
uint64_t work_ticks;
int64_t  work_asked_ns;
double   work_calibrated_ns;
int      work_calibration_tries;

result *results;
size_t  n_results;

/* ---- time ---------------------------------------------------------------------- */

int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}

void sleep_s(double seconds)
{
    struct timespec ts;
    ts.tv_sec = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

const char *tick_source(void)
{
#if defined(__x86_64__)
    return "TSC (lfence; rdtsc)";
#elif defined(__aarch64__)
    return "cntvct_el0";
#else
    return "clock_gettime(CLOCK_MONOTONIC)";
#endif
}

bool in_list(const char *list, const char *name)
{
    if (list == NULL)
        return true;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0)
            return true;
        if (!e)
            break;
        p = e + 1;
    }
    return false;
}

