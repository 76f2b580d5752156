/* Compiled by the headers_* tests (tests/packaging/CMakeLists.txt) as C with
 * clang -Weverything -Werror and as C++ with -Wold-style-cast -Werror: a
 * program that includes every public header, lays out every public struct
 * and expands every public macro gets no warning from them. The same text
 * is valid C11 and C++11 and uses no cast of its own. */
#include <circuit.h>
#include <circuit_presets.h>
#include <circuit_prometheus.h>

#ifdef __cplusplus
#define NONE nullptr
extern "C" int64_t circuit_headers_checked(void);
#else
#define NONE NULL
int64_t circuit_headers_checked(void);
#endif

static circuit_state never_probe(void *arg, const circuit_counts *counts)
{
    return arg == counts ? CIRCUIT_OPEN : CIRCUIT_HALF_OPEN;
}

int64_t circuit_headers_checked(void)
{
    circuit_ticket ticket = CIRCUIT_TICKET_INIT;
    circuit_config config = {64, 1, CIRCUIT_S(1), CIRCUIT_MS(500)};
    circuit_rejection rejection = {CIRCUIT_OPEN, CIRCUIT_US(5)};
    circuit_counts counts = {1, 2, 3, 4, 5};
    circuit_policy policy = {NONE, never_probe, NONE, NONE};
    circuit_open_info info = {{0, 0, 0, 0, 0}, 1, 0, 1};
    circuit_transition transition = {CIRCUIT_CLOSED, CIRCUIT_OPEN, 1, {0, 1, 0, 1, 0},
                                     CIRCUIT_CAUSE_POLICY, CIRCUIT_NS(7)};
    circuit_stats stats = {CIRCUIT_ISOLATED, 2, {0, 0, 0, 0, 0}, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 2};
    circuit_spec spec = {{1, 1, 1, 1}, {NONE, NONE, NONE, NONE}, NONE, NONE, NONE, NONE,
                         NONE, NONE, 0};
    circuit_consecutive consecutive = {3, 2};
    circuit_failure_rate rate = {10, 0.5, 2};
    circuit_backoff_exponential backoff = {CIRCUIT_S(1), CIRCUIT_S(60), 0.2, 7};
    size_t footprint = CIRCUIT_FOOTPRINT_MAX(64, 1, 2) + CIRCUIT_FOOTPRINT_MAX(65536, 65536, 4096);
    int64_t sum = config.open_for_ns + rejection.retry_after_ns + counts.timed_out +
                  info.reopens + transition.open_for_ns + spec.config.open_for_ns +
                  consecutive.failures + rate.min_results + backoff.cap_ns +
                  CIRCUIT_RUN_MAX + CIRCUIT_TIMED_OUT_MAX;
    if (footprint > 0 && stats.transitions > 0 && sizeof ticket == 40 &&
        policy.probe != NONE && CIRCUIT_MAX_COUNT + CIRCUIT_TRANSITION_POOL > 0 &&
        CIRCUIT_VERSION_MAJOR + CIRCUIT_VERSION_MINOR + CIRCUIT_VERSION_PATCH >= 0)
        return sum;
    return 0;
}
