/*
 * Memory (L5, T7): the footprint linear in window and probes, nothing
 * grown by traffic, everything back at free, the largest sizes.
 *
 * Memory per breaker at scale (L5): a proxy keeps one
 * breaker per upstream host, so 100 000 breakers in one process is ordinary.
 *
 * The test builds 100 000 breakers of (window 64, probes 1), runs a little
 * traffic through each (successes and failures through allow + done, a trip,
 * a rejection while open, a probe that closes), frees them all, and checks
 * with the allocation counter of tests/alloc_count.c (linked in its --wrap
 * form, so it sees exactly what the static circuit_testable library
 * allocates):
 *
 *   - the bytes each breaker holds are what circuit_test_footprint() says,
 *     and no more than CIRCUIT_FOOTPRINT_MAX(window, probes, cpus), the
 *     bound circuit.h documents: its own block, and 16 bytes per CPU in the
 *     per-CPU arena, whose chunks (64 + 1024 bytes per CPU, 64 breakers
 *     each) are allocated by the 1st, 65th, 129th ... breaker;
 *   - traffic and transitions add nothing (the transition records come from
 *     the breaker's pool and go back to it);
 *   - once every breaker is freed, every block and every byte is back.
 *
 * Bytes are malloc_usable_size() of each block (alloc_count.h). Under ASan
 * (the debug preset) that is the size requested, so it must equal the
 * footprint exactly; glibc's own allocator may round a block up, so other
 * builds allow each block ROUNDING_SLACK bytes of rounding.
 */
#include "helpers.h"

#include <malloc.h>

#define N_BREAKERS 100000
#define WINDOW 64
#define PROBES 1
#define FAILURES_TO_TRIP 3

#if defined(__SANITIZE_ADDRESS__)
#define EXACT_SIZES 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EXACT_SIZES 1
#endif
#endif
#ifndef EXACT_SIZES
#define EXACT_SIZES 0
#endif
/* What glibc's rounding may add to one block: a few bytes for a small
 * block (16-byte chunks, alignment), up to a page for a block above its mmap
 * threshold (128 KiB by default), which it serves with whole pages. */
#define ROUNDING_SLACK(foot) ((foot) > 128 * 1024 ? 4096 : 64)

/* The CPU count the core sizes its per-CPU counters by (src/breaker.c):
 * the configured CPUs, at least 1. */
static int cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_CONF);
    return n < 1 ? 1 : n > 4096 ? 4096 : (int)n;
}

/* The per-CPU arena's chunks (circuit.h, CIRCUIT_FOOTPRINT_MAX): a head
 * line (64 bytes; 128 on aarch64) and 16 bytes per CPU per unit; 8 units
 * while the process holds fewer than 8 breakers, 64 after. */
#define CHUNK_FIRST 8
#define CHUNK_BREAKERS 64
#if defined(__aarch64__)
#define CHUNK_HEAD 128u
#else
#define CHUNK_HEAD 64u
#endif
static size_t chunk_bytes(int ncpu, int units)
{
    return CHUNK_HEAD + 16u * (size_t)units * (size_t)ncpu;
}
/* Breakers built one after the other from none: the chunks they hold. */
static size_t chunks_for(size_t n)
{
    return n == 0 ? 0 : 1 + (n > CHUNK_FIRST ? (n - CHUNK_FIRST + CHUNK_BREAKERS - 1) / CHUNK_BREAKERS : 0);
}
static size_t chunk_bytes_for(size_t n, int ncpu)
{
    return n == 0 ? 0 : chunk_bytes(ncpu, CHUNK_FIRST) + (chunks_for(n) - 1) * chunk_bytes(ncpu, CHUNK_BREAKERS);
}

/* ---- callbacks shared by every breaker --------------------------------------- */

static bool trip_after_failures(void *arg, const circuit_counts *c)
{
    (void)arg;
    return c->consecutive_failures >= FAILURES_TO_TRIP;
}

static circuit_state probe_close_on_success(void *arg, const circuit_counts *c)
{
    (void)arg;
    if (c->failures > 0)
        return CIRCUIT_OPEN;
    return c->consecutive_successes >= 1 ? CIRCUIT_CLOSED : CIRCUIT_HALF_OPEN;
}

static circuit_outcome classify_sign(void *arg, void *call_ctx, int result)
{
    (void)arg;
    (void)call_ctx;
    return result < 0 ? CIRCUIT_FAILURE : CIRCUIT_SUCCESS;
}

static int64_t transitions_seen;

static void count_transition(void *arg, void *call_ctx, const circuit_transition *t)
{
    (void)arg;
    (void)call_ctx;
    (void)t;
    transitions_seen++;
}

static circuit_spec spec_of(int window, int probes)
{
    circuit_spec s;
    memset(&s, 0, sizeof s);
    s.config.window = window;
    s.config.probes = probes;
    s.config.open_for_ns = CIRCUIT_US(1);
    s.config.probe_timeout_ns = CIRCUIT_MS(1);
    s.policy.trip = trip_after_failures;
    s.policy.probe = probe_close_on_success;
    s.classify = classify_sign;
    s.observe = count_transition;
    return s;
}

/* ---- measuring ----------------------------------------------------------------- */

typedef struct held {
    int64_t blocks, bytes;
} held;

static held now_held(void)
{
    return (held){A_LOAD(&alloc_live), A_LOAD(&alloc_live_bytes)};
}

/* Checks that `bytes` in `blocks` blocks is what a breaker of footprint
 * `foot` should hold (exactly under ASan). */
static void assert_held(const char *what, int64_t bytes, int64_t blocks, size_t foot)
{
    if (EXACT_SIZES)
        cr_assert_eq(bytes, (int64_t)foot, "%s: %lld bytes held, circuit_test_footprint says %zu",
                     what, (long long)bytes, foot);
    else
        cr_assert(bytes >= (int64_t)foot && bytes <= (int64_t)foot + blocks * ROUNDING_SLACK(foot),
                  "%s: %lld bytes held in %lld blocks, circuit_test_footprint says %zu", what,
                  (long long)bytes, (long long)blocks, foot);
}

/* One call: allow, then done with `result`; the call must be admitted. */
static void call(circuit_breaker *b, int result)
{
    circuit_ticket t;
    circuit_rejection rej;
    cr_assert(circuit_allow(b, NULL, &t, &rej), "a call was rejected (%s)",
              circuit_state_name(rej.state));
    cr_assert(circuit_done(&t, result), "a result arrived late");
}

Test(memory, L5_footprint_of_one_breaker_is_within_the_documented_bound)
{
    static const int shapes[][2] = {
        {1, 1}, {64, 1}, {64, 64}, {1024, 32}, {65536, 65536},
    };
    int n = cpus();
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int w = shapes[i][0], p = shapes[i][1];
        circuit_spec s = spec_of(w, p);
        circuit_breaker *b = NULL;
        held before = now_held();
        cr_assert_eq(circuit_new(&b, &s, NULL, 0), 0);
        held after = now_held();
        size_t foot = circuit_test_footprint(b);
        size_t max = (size_t)CIRCUIT_FOOTPRINT_MAX(w, p, n);
        cr_log_info("(window %d, probes %d, %d CPUs): footprint %zu bytes in %lld blocks, "
                    "bound %zu",
                    w, p, n, foot, (long long)(after.blocks - before.blocks), max);
        char what[64];
        snprintf(what, sizeof what, "(window %d, probes %d)", w, p);
        /* the only breaker: its block and a new (small) arena chunk, whose
         * other 7 units are free */
        cr_assert_eq(after.blocks - before.blocks, 2, "%s: blocks", what);
        assert_held(what, after.bytes - before.bytes, 2,
                    foot - 16u * (size_t)n + chunk_bytes(n, CHUNK_FIRST));
        cr_assert_leq(foot, max, "%s: footprint %zu bytes > CIRCUIT_FOOTPRINT_MAX %zu", what,
                      foot, max);
        circuit_free(b);
        held gone = now_held();
        cr_assert_eq(gone.blocks, before.blocks, "%s: blocks left after circuit_free", what);
        cr_assert_eq(gone.bytes, before.bytes, "%s: bytes left after circuit_free", what);
    }
}

/* L5: the per-CPU part is 16 bytes per CPU, and (window
 * 64, probes 1) holds at most 1 560 bytes on 2 CPUs and
 * 2.5 KB on 64, counted as the bytes a breaker's block and its arena units
 * really take (CPU counts set through the test seam). */
Test(memory, L5_per_cpu_part_is_16_bytes_per_cpu_and_64_1_fits_2_5_kb_on_64_cpus)
{
    circuit_spec s = spec_of(64, 1);
    size_t prev = 0;
    static const uint32_t counts[] = {1, 2, 3, 8, 63, 64, 65, 192, 4096};
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        uint32_t n = counts[k];
        circuit_test_set_cpus(n);
        /* enough to fill the first (small) chunk and one full one, so that
         * every chunk is counted whole */
        enum { NB = CHUNK_FIRST + CHUNK_BREAKERS };
        circuit_breaker *bs[NB];
        held before = now_held();
        for (int i = 0; i < NB; i++)
            cr_assert_eq(circuit_new(&bs[i], &s, NULL, 0), 0, "%u CPUs: circuit_new", n);
        held after = now_held();
        size_t foot = circuit_test_footprint(bs[0]);
        double each = (double)(after.bytes - before.bytes) / NB;
        cr_log_info("(64, 1) on %u CPUs: footprint %zu, %.1f bytes held each", n, foot, each);
        cr_assert_eq(after.blocks - before.blocks, NB + 2,
                     "%u CPUs: one block per breaker and two chunks", n);
        assert_held("72 breakers", after.bytes - before.bytes, NB + 2,
                    NB * foot + 2u * CHUNK_HEAD);
        cr_assert_leq(foot, (size_t)CIRCUIT_FOOTPRINT_MAX(64, 1, n));
        if (k > 0)
            cr_assert_eq(foot - prev, 16u * (n - counts[k - 1]),
                         "%u CPUs: %zu bytes, %u CPUs: %zu bytes: not 16 per CPU", counts[k - 1],
                         prev, n, foot);
        prev = foot;
        if (n == 2)
            cr_assert_leq(each, 1560.0 + 1, "(64, 1) on 2 CPUs: %.1f bytes each", each);
        if (n == 64)
            cr_assert_leq(each, 2560.0, "(64, 1) on 64 CPUs: %.1f bytes each (2.5 KB)", each);
        /* the units work: a failure sums every CPU's cell; stats sum every
         * CPU's totals */
        call(bs[0], 0);
        call(bs[0], -1);
        circuit_stats st;
        circuit_get_stats(bs[0], &st);
        cr_assert_eq(st.admitted, 2);
        cr_assert_eq(st.successes, 1);
        cr_assert_eq(st.failures, 1);
        for (int i = 0; i < NB; i++)
            circuit_free(bs[i]);
        held gone = now_held();
        cr_assert_eq(gone.blocks, before.blocks, "%u CPUs: blocks left", n);
        cr_assert_eq(gone.bytes, before.bytes, "%u CPUs: bytes left", n);
    }
    circuit_test_set_cpus(0);
}

/* L5: the arena gives every unit back; a chunk goes with its last breaker,
 * whatever the order of the frees, and a freed unit is reused clean (no
 * count of its last owner shows in the next one). */
Test(memory, L5_arena_chunks_are_freed_with_their_last_breaker_and_units_reused_clean)
{
    enum { N = 3 * CHUNK_BREAKERS + 5 };
    circuit_spec s = spec_of(64, 1);
    circuit_breaker *bs[N];
    held base = now_held();
    for (int i = 0; i < N; i++) {
        cr_assert_eq(circuit_new(&bs[i], &s, NULL, 0), 0);
        call(bs[i], 0);
        call(bs[i], -1);
    }
    held built = now_held();
    cr_assert_eq(built.blocks - base.blocks, N + (int64_t)chunks_for(N));
    /* free every other one, then the rest backwards */
    for (int i = 0; i < N; i += 2)
        circuit_free(bs[i]);
    held half = now_held();
    cr_assert_eq(half.blocks - base.blocks, N / 2 + (int64_t)chunks_for(N),
                 "chunks stay while one breaker holds them");
    /* new breakers take the freed units: no new chunk, clean counts */
    for (int i = 0; i < N; i += 2) {
        cr_assert_eq(circuit_new(&bs[i], &s, NULL, 0), 0);
        circuit_stats st;
        circuit_get_stats(bs[i], &st);
        cr_assert(st.admitted == 0 && st.successes == 0 && st.failures == 0,
                  "a reused unit kept counts: admitted %lld", (long long)st.admitted);
        call(bs[i], 0);
        call(bs[i], 0);
        call(bs[i], -1);
        circuit_get_stats(bs[i], &st);
        cr_assert_eq(st.counts.successes, 2);
        cr_assert_eq(st.counts.failures, 1);
    }
    held again = now_held();
    cr_assert_eq(again.blocks, built.blocks, "reuse allocated a chunk");
    for (int i = N - 1; i >= 0; i--)
        circuit_free(bs[i]);
    held gone = now_held();
    cr_assert_eq(gone.blocks, base.blocks);
    cr_assert_eq(gone.bytes, base.bytes);
}

Test(memory, L5_100000_breakers_hold_their_footprint_through_traffic_and_free_it_all,
     .timeout = 600)
{
    int n_cpus = cpus();
    size_t max = (size_t)CIRCUIT_FOOTPRINT_MAX(WINDOW, PROBES, n_cpus);
    circuit_spec s = spec_of(WINDOW, PROBES);

    /* The array of pointers is the test's own memory: allocate it before the
     * baseline so that only the breakers are measured. */
    circuit_breaker **bs = calloc(N_BREAKERS, sizeof *bs);
    cr_assert_not_null(bs);
    circuit_test_clock_set(T0);
    held base = now_held();

    /* Build: each breaker holds exactly its footprint, within the bound. */
    size_t foot0 = 0;
    int64_t blocks0 = 0;
    for (int i = 0; i < N_BREAKERS; i++) {
        held before = now_held();
        cr_assert_eq(circuit_new(&bs[i], &s, NULL, 0), 0, "circuit_new #%d", i);
        held after = now_held();
        size_t foot = circuit_test_footprint(bs[i]);
        if (i == 0) {
            foot0 = foot;
            blocks0 = after.blocks - before.blocks;
        }
        cr_assert_eq(foot, foot0, "breaker #%d: footprint %zu, the first one's %zu", i, foot,
                     foot0);
        /* its block, and now and then a new chunk of the per-CPU arena */
        size_t chunk = chunk_bytes_for((size_t)i + 1, n_cpus) - chunk_bytes_for((size_t)i, n_cpus);
        cr_assert_eq(after.blocks - before.blocks, blocks0 - (chunk ? 0 : 1),
                     "breaker #%d: block count", i);
        assert_held("a new breaker", after.bytes - before.bytes, after.blocks - before.blocks,
                    foot - 16u * (size_t)n_cpus + chunk);
    }
    cr_assert_leq(foot0, max,
                  "(window %d, probes %d, %d CPUs): footprint %zu bytes > "
                  "CIRCUIT_FOOTPRINT_MAX %zu",
                  WINDOW, PROBES, n_cpus, foot0, max);
    held built = now_held();
    int64_t per_breaker = (built.bytes - base.bytes) / N_BREAKERS;
    cr_log_info("%d breakers of (window %d, probes %d) on %d CPUs: %lld bytes each in %lld "
                "blocks (footprint %zu, bound %zu), %.1f MB in all",
                N_BREAKERS, WINDOW, PROBES, n_cpus, (long long)per_breaker, (long long)blocks0,
                foot0, max, (double)(built.bytes - base.bytes) / 1e6);
    assert_held("all breakers", built.bytes - base.bytes, built.blocks - base.blocks,
                (foot0 - 16u * (size_t)n_cpus) * N_BREAKERS + chunk_bytes_for(N_BREAKERS, n_cpus));

    /* Traffic through every breaker: successes and failures while closed;
     * the FAILURES_TO_TRIP-th failure in a row trips it (transition 1). */
    for (int i = 0; i < N_BREAKERS; i++) {
        for (int k = 0; k < 5; k++)
            call(bs[i], 0);
        call(bs[i], -1);
        call(bs[i], 0);
        for (int k = 0; k < FAILURES_TO_TRIP; k++)
            call(bs[i], -1);
        cr_assert_eq(circuit_get_state(bs[i]), CIRCUIT_OPEN, "breaker #%d did not trip", i);
        circuit_ticket t;
        circuit_rejection rej;
        cr_assert(!circuit_allow(bs[i], NULL, &t, &rej), "breaker #%d: open but admitted", i);
        cr_assert_eq(rej.state, CIRCUIT_OPEN);
    }
    cr_assert_eq(transitions_seen, N_BREAKERS, "%lld transitions delivered",
                 (long long)transitions_seen);
    held tripped = now_held();
    cr_assert_eq(tripped.blocks, built.blocks, "traffic left %lld blocks more",
                 (long long)(tripped.blocks - built.blocks));
    cr_assert_eq(tripped.bytes, built.bytes, "traffic left %lld bytes more",
                 (long long)(tripped.bytes - built.bytes));

    /* The open period ends: each breaker's next call is a probe (transition
     * 2, open -> half-open) whose success closes it (transition 3); then it
     * counts results again. */
    circuit_test_clock_advance(s.config.open_for_ns);
    for (int i = 0; i < N_BREAKERS; i++) {
        call(bs[i], 0);
        cr_assert_eq(circuit_get_state(bs[i]), CIRCUIT_CLOSED, "breaker #%d did not close", i);
        call(bs[i], 0);
        call(bs[i], -1);
    }
    cr_assert_eq(transitions_seen, 3 * (int64_t)N_BREAKERS, "%lld transitions delivered",
                 (long long)transitions_seen);
    held closed = now_held();
    cr_assert_eq(closed.blocks, built.blocks, "probing left %lld blocks more",
                 (long long)(closed.blocks - built.blocks));
    cr_assert_eq(closed.bytes, built.bytes, "probing left %lld bytes more",
                 (long long)(closed.bytes - built.bytes));
    for (int i = 0; i < N_BREAKERS; i++)
        cr_assert_eq(circuit_test_footprint(bs[i]), foot0, "breaker #%d grew", i);

    /* Free: everything comes back. */
    for (int i = 0; i < N_BREAKERS; i++)
        circuit_free(bs[i]);
    held gone = now_held();
    cr_assert_eq(gone.blocks, base.blocks, "%lld blocks not freed",
                 (long long)(gone.blocks - base.blocks));
    cr_assert_eq(gone.bytes, base.bytes, "%lld bytes not freed",
                 (long long)(gone.bytes - base.bytes));
    free(bs);
}

/* L5 and CFG3 across threads: breakers built and freed by several threads
 * at once share the arena's chunks; each gets units no other live breaker
 * holds (its counts are its own) and everything is given back. */
typedef struct churner {
    int id;
    int64_t wrong; /* breakers whose stats showed another's counts */
} churner;

static void *churn_thread(void *arg)
{
    churner *c = arg;
    circuit_spec s = spec_of(64, 1);
    enum { KEEP = 100 };
    circuit_breaker *live[KEEP];
    int calls[KEEP];
    for (int i = 0; i < KEEP; i++)
        live[i] = NULL;
    for (int round = 0; round < 3000; round++) {
        int k = (round * 37 + c->id * 11) % KEEP;
        if (live[k]) {
            circuit_stats st;
            circuit_get_stats(live[k], &st);
            if (st.admitted != (uint64_t)calls[k] || st.successes != (uint64_t)calls[k])
                c->wrong++;
            circuit_free(live[k]);
            live[k] = NULL;
        } else {
            if (circuit_new(&live[k], &s, NULL, 0) != 0)
                abort();
            calls[k] = 1 + (round + c->id) % 5;
            for (int j = 0; j < calls[k]; j++) {
                circuit_ticket t;
                if (!circuit_allow(live[k], NULL, &t, NULL) || !circuit_done(&t, 0))
                    abort();
            }
        }
    }
    for (int i = 0; i < KEEP; i++)
        circuit_free(live[i]);
    return NULL;
}

Test(memory, L5_CFG3_breakers_built_and_freed_by_four_threads_at_once_share_the_arena_cleanly)
{
    held base = now_held();
    churner c[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        c[i] = (churner){i, 0};
        cr_assert_eq(pthread_create(&th[i], NULL, churn_thread, &c[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(pthread_join(th[i], NULL), 0);
        cr_assert_eq(c[i].wrong, 0, "thread %d: %lld breakers showed counts not their own", i,
                     (long long)c[i].wrong);
    }
    held gone = now_held();
    cr_assert_eq(gone.blocks, base.blocks, "%lld blocks not freed",
                 (long long)(gone.blocks - base.blocks));
    cr_assert_eq(gone.bytes, base.bytes, "%lld bytes not freed",
                 (long long)(gone.bytes - base.bytes));
}

/* ==== memory under traffic, at free and at the largest sizes (L5, T7) ===== */


static size_t footprint_of(int window, int probes)
{
    fx f;
    fx_new(&f, window, probes, OPEN_FOR, PROBE_TO);
    size_t n = circuit_test_footprint(f.b);
    fx_free(&f);
    return n;
}

Test(memory, L5_footprint_is_linear_in_window_and_probes)
{
    size_t w1 = footprint_of(1024, 32), w2 = footprint_of(2048, 32), w4 = footprint_of(4096, 32);
    cr_assert_gt(w2, w1);
    cr_assert_eq(w4 - w2, 2 * (w2 - w1), "window: %zu %zu %zu", w1, w2, w4);
    cr_assert_leq((w2 - w1) / 1024, 64, "%zu bytes per window entry", (w2 - w1) / 1024);
    size_t p1 = footprint_of(32, 1024), p2 = footprint_of(32, 2048), p4 = footprint_of(32, 4096);
    cr_assert_gt(p2, p1);
    cr_assert_eq(p4 - p2, 2 * (p2 - p1), "probes: %zu %zu %zu", p1, p2, p4);
    cr_assert_leq((p2 - p1) / 1024, 64, "%zu bytes per probe", (p2 - p1) / 1024);
    /* as documented: 8 bytes per window slot (none for a window of 1) and,
     * over 64 slots, 16 bytes per 64 (the closed bitmap), 16 bytes per
     * probe slot (its record) */
    cr_assert_eq(w2 - w1, 8 * 1024 + 16 * 1024 / 64);
    cr_assert_eq(footprint_of(64, 32) - footprint_of(32, 32), 8 * 32, "the bitmap's one word is "
                 "in the fixed part up to 64 slots");
    cr_assert_eq(p2 - p1, 16 * 1024);
    cr_assert_eq(footprint_of(2, 32) - footprint_of(1, 32), 16);
    size_t max = footprint_of(CIRCUIT_MAX_COUNT, CIRCUIT_MAX_COUNT);
    cr_assert_leq(max, (size_t)CIRCUIT_MAX_COUNT * 128 + (1u << 20));
}

Test(memory, L5_memory_never_grows_with_traffic_and_free_releases_all)
{
    int64_t live0 = A_LOAD(&alloc_live);
    fx f;
    fx_new(&f, 64, 8, OPEN_FOR, PROBE_TO);
    int64_t live1 = A_LOAD(&alloc_live);
    size_t foot = circuit_test_footprint(f.b);
    circuit_test_clock_set(T0);
    for (int i = 0; i < 2000; i++) {
        for (int k = 0; k < 10; k++)
            fx_call(&f, k % 4 ? RS_OK : RS_IGN);
        fx_call(&f, RS_FAIL);
        fx_call(&f, RS_FAIL);
        circuit_test_clock_advance(OPEN_FOR);
        fx_call(&f, RS_OK);
        fx_call(&f, RS_OK);
    }
    cr_assert_eq(f.log.n, 6000);
    cr_assert_eq(A_LOAD(&alloc_live), live1, "memory grew with traffic");
    cr_assert_eq(circuit_test_footprint(f.b), foot);
    fx_free(&f);
    cr_assert_eq(A_LOAD(&alloc_live), live0, "circuit_free left %lld blocks",
                 (long long)(A_LOAD(&alloc_live) - live0));
}

/* Undelivered transitions at circuit_free: observe makes many nested
 * transitions (more than the pool), then exits its thread: they stay pending,
 * and circuit_free discards them (documented at circuit_free). */
typedef struct l5_ctx {
    fx f;
    int fired;
    int cycles;
} l5_ctx;

static void l5_observe(fx *f, void *call_ctx, const circuit_transition *t)
{
    (void)call_ctx;
    l5_ctx *c = (l5_ctx *)f->user;
    if (t->generation != 1 || c->fired++)
        return;
    for (int i = 0; i < c->cycles; i++) {
        circuit_test_clock_advance(OPEN_FOR);
        fx_call(f, RS_OK);
        fx_call(f, RS_OK);
        fx_call(f, RS_FAIL);
        fx_call(f, RS_FAIL);
    }
    pthread_exit(NULL);
}

static void *l5_thread(void *arg)
{
    l5_ctx *c = (l5_ctx *)arg;
    fx_call(&c->f, RS_FAIL);
    fx_call(&c->f, RS_FAIL);
    return (void *)1;
}

static void l5_free_pending(int cycles)
{
    static l5_ctx c;
    int64_t live0 = A_LOAD(&alloc_live);
    memset(&c, 0, sizeof c);
    c.cycles = cycles;
    fx_init(&c.f, 8, 1, OPEN_FOR, PROBE_TO);
    c.f.user = &c;
    c.f.log.extra = l5_observe;
    fx_build(&c.f);
    circuit_test_clock_set(T0);
    pthread_t th;
    void *ret = (void *)1;
    pthread_create(&th, NULL, l5_thread, &c);
    pthread_join(th, &ret);
    cr_assert_null(ret);
    cr_assert_eq(c.f.log.n, 1);
    cr_assert_eq(circuit_test_pending(c.f.b), 3 * cycles);
    circuit_free(c.f.b);
    cr_assert_eq(c.f.log.n, 1, "circuit_free delivered transitions (documented: discarded)");
    cr_assert_eq(A_LOAD(&alloc_live), live0, "circuit_free leaked %lld blocks",
                 (long long)(A_LOAD(&alloc_live) - live0));
}

Test(memory, L5_free_discards_undelivered_transitions_and_leaks_nothing)
{
    l5_free_pending(3);   /* pool records only */
    l5_free_pending(40);  /* 120 pending: overflow records too */
}

Test(memory, L5_T7_window_of_CIRCUIT_MAX_COUNT)
{
    fx f;
    fx_init(&f, CIRCUIT_MAX_COUNT, 1, OPEN_FOR, PROBE_TO);
    f.p.trip_run = 0;
    fx_build(&f);
    for (int i = 0; i < 100; i++)
        fx_call(&f, RS_FAIL);
    for (int i = 0; i < CIRCUIT_MAX_COUNT - 100; i++)
        fx_call(&f, RS_OK);
    circuit_counts c = fx_counts(&f);
    assert_counts(&c, CIRCUIT_MAX_COUNT - 100, 100, CIRCUIT_MAX_COUNT - 100, 0, 0);
    fx_call(&f, RS_OK); /* the window is full: the oldest failure leaves */
    c = fx_counts(&f);
    assert_counts(&c, CIRCUIT_MAX_COUNT - 99, 99, CIRCUIT_MAX_COUNT - 99, 0, 0);
    for (int i = 0; i < 99; i++)
        fx_call(&f, RS_OK);
    c = fx_counts(&f);
    assert_counts(&c, CIRCUIT_MAX_COUNT, 0, CIRCUIT_MAX_COUNT, 0, 0);
    fx_call(&f, RS_FAIL);
    assert_counts(&f.p.trip_last, CIRCUIT_MAX_COUNT - 1, 1, 0, 1, 0);
    cr_assert_eq(f.p.sum_violations, 0);
    fx_free(&f);
}

Test(memory, L5_T7_every_one_of_CIRCUIT_MAX_COUNT_probe_slots)
{
    fx f;
    fx_init(&f, 1, CIRCUIT_MAX_COUNT, OPEN_FOR, PROBE_TO);
    f.p.probe_forced = CIRCUIT_HALF_OPEN;
    fx_build(&f);
    fx_half_open_due(&f);
    circuit_ticket *t = calloc(CIRCUIT_MAX_COUNT + 1, sizeof *t);
    cr_assert_not_null(t);
    int64_t allocs = A_LOAD(&alloc_calls);
    for (int i = 0; i < CIRCUIT_MAX_COUNT; i++)
        cr_assert(circuit_allow(f.b, NULL, &t[i], NULL), "probe %d rejected", i);
    circuit_rejection rej;
    cr_assert_not(circuit_allow(f.b, NULL, &t[CIRCUIT_MAX_COUNT], &rej));
    assert_rejected(rej, CIRCUIT_HALF_OPEN, 0);
    /* any one freed slot, wherever it is, is found again */
    for (int k = 0; k < 3; k++) {
        int i = k == 0 ? 0 : (k == 1 ? CIRCUIT_MAX_COUNT / 2 + 17 : CIRCUIT_MAX_COUNT - 1);
        cr_assert(circuit_done(&t[i], RS_OK));
        cr_assert(circuit_allow(f.b, NULL, &t[i], NULL), "slot of probe %d not found", i);
        cr_assert_not(circuit_allow(f.b, NULL, &t[CIRCUIT_MAX_COUNT], NULL));
    }
    cr_assert_eq(A_LOAD(&alloc_calls), allocs);
    cr_assert_eq(f.p.probe_calls, 3);
    for (int i = 0; i < CIRCUIT_MAX_COUNT; i++)
        circuit_release(&t[i]);
    cr_assert(circuit_allow(f.b, NULL, &t[0], NULL));
    circuit_release(&t[0]);
    free(t);
    fx_free(&f);
}
