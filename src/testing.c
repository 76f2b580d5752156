/*
 * Test-only definitions (testing.h; docs/CONTRACT.md TM3, V1): the
 * settable clock, the park points' hook, the counters the L6/L8 tests read,
 * the CPU count a test may force, and the seams that set a breaker's counts
 * or end its epoch. Compiled into the test libraries only (CIRCUIT_TESTING);
 * production files call these through the one-line macros of internal.h
 * (CIRCUIT__HOOK, CIRCUIT__SHARED_RMW, ...), which are empty otherwise.
 */
#include <errno.h>
#include <time.h>

#include "counting.h"
#include "testing.h"

#ifdef CIRCUIT_TESTING

/* ---- the clock and the park points ------------------------------------------ */


static uint64_t test_now = 1000000000u; /* the settable clock */
static uint64_t test_real;              /* 1: read CLOCK_MONOTONIC */
static circuit_test_hook_fn test_hook;
static void *test_hook_arg;

int64_t circuit__test_clock(void)
{
    CIRCUIT__SWITCH(CLOCK, &test_now); /* the clock moves inside schedules (V1) */
    if (__atomic_load_n(&test_real, __ATOMIC_ACQUIRE))
        return circuit__clock_monotonic();
    return (int64_t)__atomic_load_n(&test_now, __ATOMIC_ACQUIRE);
}

void circuit_test_clock_set(int64_t now_ns)
{
    __atomic_store_n(&test_now, (uint64_t)now_ns, __ATOMIC_RELEASE);
}

int64_t circuit_test_clock_advance(int64_t delta_ns)
{
    return (int64_t)(__atomic_add_fetch(&test_now, (uint64_t)delta_ns, __ATOMIC_ACQ_REL));
}

int64_t circuit_test_clock_now(void)
{
    return circuit__now();
}

void circuit_test_clock_use_real(bool real)
{
    __atomic_store_n(&test_real, real ? 1u : 0u, __ATOMIC_RELEASE);
}

void circuit_test_set_hook(circuit_test_hook_fn fn, void *arg)
{
    /* arg first: a thread that sees the new hook sees its arg. */
    __atomic_store_n(&test_hook_arg, arg, __ATOMIC_RELEASE);
    __atomic_store_n(&test_hook, fn, __ATOMIC_RELEASE);
}

static uint64_t test_core_cas;

void circuit__test_count_core_cas(void)
{
    __atomic_fetch_add(&test_core_cas, 1, __ATOMIC_RELAXED);
}

uint64_t circuit_test_core_cas_attempts(void)
{
    return __atomic_load_n(&test_core_cas, __ATOMIC_RELAXED);
}

static uint64_t test_shared_rmws;

void circuit__test_count_shared_rmw(void)
{
    __atomic_fetch_add(&test_shared_rmws, 1, __ATOMIC_RELAXED);
}

uint64_t circuit_test_shared_rmws(void)
{
    return __atomic_load_n(&test_shared_rmws, __ATOMIC_RELAXED);
}

static uint64_t test_window_words;

void circuit__test_count_window_words(uint64_t n)
{
    __atomic_fetch_add(&test_window_words, n, __ATOMIC_RELAXED);
}

uint64_t circuit_test_window_words(void)
{
    return __atomic_load_n(&test_window_words, __ATOMIC_RELAXED);
}

static uint64_t test_stats_passes;

void circuit__test_count_stats_pass(void)
{
    __atomic_fetch_add(&test_stats_passes, 1, __ATOMIC_RELAXED);
}

uint64_t circuit_test_stats_passes(void)
{
    return __atomic_load_n(&test_stats_passes, __ATOMIC_RELAXED);
}

void circuit__test_hook(circuit_test_point p)
{
    CIRCUIT__SWITCH(PARK, 0); /* a park point is a switch point too (V1) */
    circuit_test_hook_fn fn = __atomic_load_n(&test_hook, __ATOMIC_ACQUIRE);
    if (fn)
        fn(p, __atomic_load_n(&test_hook_arg, __ATOMIC_ACQUIRE));
}

/* ---- the CPU count ------------------------------------------------------------ */

static uint64_t cpus_forced; /* circuit_test_set_cpus; 0: the machine's */
void circuit_test_set_cpus(uint32_t n)
{
    if (n > CIRCUIT__MAX_CPUS)
        circuit__abort("circuit_test_set_cpus: %u CPUs (at most %u)", n, CIRCUIT__MAX_CPUS);
    circuit__st_rlx(&cpus_forced, n); /* relaxed: a test setting, read by circuit_new */
}

uint32_t circuit__test_cpus(void)
{
    return (uint32_t)circuit__ld_rlx(&cpus_forced); /* relaxed: see circuit_test_set_cpus */
}

/* ---- seams on a breaker -------------------------------------------------------- */

int circuit_test_force_counts(circuit_breaker *b, circuit_outcome kind, int64_t run,
                              int64_t timed_out)
{
    circuit__check_breaker(b, "circuit_test_force_counts");
    circuit__u128 c = circuit__ld128_acq(&b->s->core); /* acquire: table core */
    unsigned st = circuit__code(c.lo);
    if (st == CIRCUIT__ST_OPEN || st == CIRCUIT__ST_ISOLATED || run < 0 ||
        run > CIRCUIT_RUN_MAX || timed_out < 0 || timed_out > CIRCUIT_TIMED_OUT_MAX ||
        (st == CIRCUIT__ST_CLOSED && timed_out != 0) ||
        (kind != CIRCUIT_SUCCESS && kind != CIRCUIT_FAILURE))
        return EINVAL;
    if (st == CIRCUIT__ST_CLOSED) {
        /* end the epoch first (the cells' successes join the counts), then
         * set the run in the descriptor of the point that made */
        if (!circuit__closed_fold(b, &c))
            return EAGAIN;
        c = circuit__ld128_acq(&b->s->core);
        circuit__point_counts cc;
        if (circuit__code(c.lo) != CIRCUIT__ST_CLOSED || !circuit__closed_help(b, c, &cc))
            return EAGAIN;
        uint32_t k = circuit__closed_point(c.hi);
        circuit__u128 x = circuit__ld128_acq(&b->s->desc[k & 1u]); /* table: desc */
        if (!circuit__desc_is(x, k))
            return EAGAIN;
        circuit__desc_unpack(x, &cc);
        cc.last_fail = kind == CIRCUIT_FAILURE;
        cc.run = (uint32_t)run;
        circuit__u128 nx = circuit__desc_pack(&cc, k);
        return circuit__cas128_sc(&b->s->desc[k & 1u], &x, nx) ? 0 : EAGAIN; /* table: desc */
    }
    uint64_t hi = c.hi & (CIRCUIT__HI_FAIL_MASK | CIRCUIT__HI_FULL);
    hi |= (kind == CIRCUIT_FAILURE ? CIRCUIT__HI_LAST_FAIL : 0);
    hi |= (uint64_t)run << CIRCUIT__HI_RUN_SHIFT;
    hi |= (uint64_t)timed_out << CIRCUIT__HI_TO_SHIFT;
    circuit__u128 nw = {c.lo, hi};
    return circuit__core_cas(b, &c, nw) ? 0 : EAGAIN;
}

size_t circuit_test_footprint(const circuit_breaker *b)
{
    circuit__check_breaker(b, "circuit_test_footprint");
    return b->footprint;
}

int64_t circuit_test_pending(const circuit_breaker *b)
{
    circuit__check_breaker(b, "circuit_test_pending");
    /* relaxed: a test looks at a hint */
    return (int64_t)circuit__ld_rlx((uint64_t *)(uintptr_t)&b->pending);
}

bool circuit_test_fast_mode(const circuit_breaker *b)
{
    circuit__check_breaker(b, "circuit_test_fast_mode");
    uint64_t lo = circuit__ld128_lo_acq(&b->s->core); /* acquire: table core */
    return circuit__code(lo) == CIRCUIT__ST_CLOSED && circuit__closed_intent(lo) == CIRCUIT__INTENT_NONE;
}

int circuit_test_skip_generations(circuit_breaker *b, uint64_t n)
{
    circuit__check_breaker(b, "circuit_test_skip_generations");
    if (circuit_test_pending(b) != 0)
        return EINVAL;
    circuit__u128 c = circuit__ld128_acq(&b->s->core); /* acquire: table core */
    if (circuit__code(c.lo) != CIRCUIT__ST_ISOLATED)
        return EINVAL;
    uint64_t g = circuit__gen_widen(b, circuit__gen(c.lo)) + n;
    circuit__u128 nw = {circuit__word_lo(CIRCUIT__ST_ISOLATED, (uint32_t)(g & CIRCUIT__GEN_MASK), 0),
                        c.hi};
    if (!circuit__core_cas(b, &c, nw))
        return EAGAIN;
    circuit__st_rlx(&b->s->gen64, g); /* relaxed: single-threaded use (table gen64) */
    return 0;
}

bool circuit_test_fold(circuit_breaker *b)
{
    circuit__check_breaker(b, "circuit_test_fold");
    circuit__u128 c = circuit__ld128_acq(&b->s->core); /* acquire: table core */
    return circuit__code(c.lo) == CIRCUIT__ST_CLOSED &&
           circuit__closed_intent(c.lo) == CIRCUIT__INTENT_NONE && circuit__closed_fold(b, &c);
}

/* testing.h: n successes at once on the calling CPU's cell (S_k's limit) */
int circuit_test_add_successes(circuit_breaker *b, uint32_t n)
{
    circuit__check_breaker(b, "circuit_test_add_successes");
    uint64_t lo = circuit__ld128_lo_acq(&b->s->core); /* acquire: table core */
    if (circuit__code(lo) != CIRCUIT__ST_CLOSED || circuit__closed_intent(lo) != CIRCUIT__INTENT_NONE)
        return EINVAL;
    uint64_t *cell = &circuit__my_cpu(b)->cell;
    uint64_t v = circuit__ld_acq(cell); /* acquire: the CAS below decides */
    if (circuit__cell_epoch(v) != circuit__closed_epoch(lo) || (v & CIRCUIT__CELL_SEALED) ||
        circuit__cell_count(v) + n >= CIRCUIT__CELL_COUNT_MAX)
        return EAGAIN;
    /* relaxed: as a success's count (single-threaded use) */
    return circuit__cas_rlx(cell, &v, v + n) ? 0 : EAGAIN;
}

#else
typedef int circuit__testing_empty; /* ISO C: a translation unit declares something */
#endif
