/*
 * B3 for the preset: circuit_backoff_exponential's periods are a pure
 * function of (its parameters, info->reopens, info->generation, info->salt);
 * a test that knows the seed and the salt predicts every one; different
 * seeds differ, and so do breakers sharing one struct (their salts); the cap is
 * never exceeded; init names every bad argument in one message. The last
 * tests drive the preset through a real breaker on the test clock (B1, B2),
 * and open_for is asked with the generation the transition made, even from
 * a state word two transitions stale.
 */
#include "helpers.h"

#include <math.h>

#include "circuit_presets.h"

TestSuite(backoff);

/* ---- an independent statement of the documented formula --------------------- */

/* SplitMix64's n-th output (n >= 1) for the state seeded with `seed`, written
 * from the generator's definition: the state advances by the golden gamma
 * before each output. */
static uint64_t ref_splitmix64(uint64_t seed, uint64_t n)
{
    uint64_t state = seed;
    for (uint64_t i = 0; i < n; i++)
        state += UINT64_C(0x9e3779b97f4a7c15);
    uint64_t z = state;
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* period = p - trunc(p * jitter * u), p = min(cap, base * 2^reopens),
 * u = (splitmix64(splitmix64(seed, salt), generation) >> 11) * 2^-53. */
static int64_t predicted(int64_t base, int64_t cap, double jitter, uint64_t seed, uint64_t salt,
                         int64_t reopens, uint64_t generation)
{
    int64_t p = base;
    for (int64_t k = 0; k < reopens && p < cap; k++)
        p = p > cap / 2 ? cap : p * 2;
    uint64_t key = ref_splitmix64(seed, salt);
    double u = (double)(ref_splitmix64(key, generation) >> 11) * 0x1p-53;
    return p - (int64_t)((double)p * jitter * u);
}

/* The salt of the direct calls below (a breaker's is never 0). */
#define SALT UINT64_C(5)

static circuit_backoff_exponential backoff(int64_t base, int64_t cap, double jitter,
                                           uint64_t seed)
{
    circuit_backoff_exponential p;
    char err[256];
    cr_assert_eq(circuit_backoff_exponential_init(&p, base, cap, jitter, seed, err, sizeof err),
                 0, "%s", err);
    return p;
}

static int64_t period_salted(const circuit_backoff_exponential *p, uint64_t salt,
                             int64_t reopens, uint64_t generation)
{
    circuit_open_info info = {.generation = generation, .reopens = reopens, .salt = salt};
    return circuit_backoff_exponential_open_for((void *)(uintptr_t)p, &info);
}

static int64_t period(const circuit_backoff_exponential *p, int64_t reopens,
                      uint64_t generation)
{
    return period_salted(p, SALT, reopens, generation);
}

/* ---- the hash ------------------------------------------------------------------- */

Test(backoff, B3_reference_splitmix64_matches_the_published_outputs)
{
    /* The first five outputs for seed 1234567, as published with the
     * generator's description (Rosetta Code, "Pseudo-random
     * numbers/Splitmix64"), and the first output for seed 0. A wrong
     * reference here would make every prediction below meaningless. */
    const uint64_t want[] = {UINT64_C(6457827717110365317), UINT64_C(3203168211198807973),
                             UINT64_C(9817491932198370423), UINT64_C(4593380528125082431),
                             UINT64_C(16408922859458223821)};
    for (uint64_t n = 1; n <= 5; n++)
        cr_assert_eq(ref_splitmix64(1234567, n), want[n - 1], "output %llu",
                     (unsigned long long)n);
    cr_assert_eq(ref_splitmix64(0, 1), UINT64_C(0xe220a8397b1dcdaf));
}

/* ---- the schedule ------------------------------------------------------------- */

Test(backoff, B3_without_jitter_periods_double_from_base_to_cap)
{
    circuit_backoff_exponential p = backoff(100, 1000, 0.0, 7);
    const int64_t want[] = {100, 200, 400, 800, 1000, 1000, 1000};
    for (int64_t r = 0; r < 7; r++)
        for (uint64_t g = 1; g < 50; g++)
            cr_assert_eq(period(&p, r, g), want[r], "reopens %lld generation %llu",
                         (long long)r, (unsigned long long)g);
    /* cap == base: no growth at all */
    circuit_backoff_exponential flat = backoff(CIRCUIT_S(5), CIRCUIT_S(5), 0.0, 0);
    cr_assert_eq(period(&flat, 0, 1), CIRCUIT_S(5));
    cr_assert_eq(period(&flat, 40, 99), CIRCUIT_S(5));
}

Test(backoff, B3_every_period_is_predicted_from_seed_salt_and_generation)
{
    const struct {
        int64_t base, cap;
        double jitter;
        uint64_t seed;
    } cases[] = {
        {CIRCUIT_MS(500), CIRCUIT_S(60), 0.2, 42},
        {CIRCUIT_S(1), CIRCUIT_S(30), 0.5, UINT64_C(0xdeadbeefcafef00d)},
        {1, 1000, 0.999, 0},
        {CIRCUIT_S(1), CIRCUIT_S(1) * 3600 * 24 * 365, 0.1, 12345},
    };
    const uint64_t salts[] = {1, 2, 3, 977}; /* the reference loops salt times */
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        circuit_backoff_exponential p =
            backoff(cases[c].base, cases[c].cap, cases[c].jitter, cases[c].seed);
        for (size_t s = 0; s < sizeof salts / sizeof salts[0]; s++)
            for (int64_t r = 0; r < 70; r++)
                for (uint64_t g = 1; g <= 60; g++)
                    cr_assert_eq(period_salted(&p, salts[s], r, g),
                                 predicted(cases[c].base, cases[c].cap, cases[c].jitter,
                                           cases[c].seed, salts[s], r, g),
                                 "case %zu salt %llu reopens %lld generation %llu", c,
                                 (unsigned long long)salts[s], (long long)r,
                                 (unsigned long long)g);
    }
}

Test(backoff, B3_jitter_only_shortens_within_the_fraction_and_the_cap_holds)
{
    const double jitters[] = {0.0, 0.1, 0.5, 0.9, 0.999999};
    for (size_t j = 0; j < sizeof jitters / sizeof jitters[0]; j++) {
        circuit_backoff_exponential p = backoff(CIRCUIT_MS(250), CIRCUIT_S(10), jitters[j], 99);
        for (int64_t r = 0; r < 20; r++) {
            int64_t full = CIRCUIT_MS(250) << (r < 6 ? r : 6);
            if (full > CIRCUIT_S(10))
                full = CIRCUIT_S(10);
            for (uint64_t g = 1; g < 300; g++) {
                int64_t v = period(&p, r, g);
                cr_assert_leq(v, full, "jitter %g reopens %lld", jitters[j], (long long)r);
                cr_assert_leq(v, CIRCUIT_S(10), "never above the cap");
                cr_assert_gt((double)v, (1.0 - jitters[j]) * (double)full - 1.0,
                             "never below (1 - jitter) * period");
                cr_assert_geq(v, 1);
            }
        }
    }
}

Test(backoff, B3_the_jitter_spreads_over_its_range)
{
    /* Over many generations the cut covers its range: some periods in the
     * lowest tenth of ((1 - j) p, p], some in the highest. */
    circuit_backoff_exponential p = backoff(CIRCUIT_S(10), CIRCUIT_S(10), 0.5, 2024);
    int low = 0, high = 0;
    for (uint64_t g = 1; g <= 1000; g++) {
        int64_t v = period(&p, 0, g);
        if (v < CIRCUIT_S(5) + CIRCUIT_MS(500))
            low++;
        if (v > CIRCUIT_S(10) - CIRCUIT_MS(500))
            high++;
    }
    cr_assert_gt(low, 50, "%d of 1000 in the lowest tenth", low);
    cr_assert_gt(high, 50, "%d of 1000 in the highest tenth", high);
}

Test(backoff, B3_different_seeds_do_not_probe_in_step)
{
    /* Two processes that trip together (same generation, same reopens) with
     * different seeds: their open periods differ nearly always, and by a
     * spread, not by a hair. */
    circuit_backoff_exponential a = backoff(CIRCUIT_S(1), CIRCUIT_S(60), 0.2, 1);
    circuit_backoff_exponential b = backoff(CIRCUIT_S(1), CIRCUIT_S(60), 0.2, 2);
    int same = 0, close_ = 0;
    for (uint64_t g = 1; g <= 1000; g++) {
        int64_t pa = period(&a, (int64_t)(g % 7), g), pb = period(&b, (int64_t)(g % 7), g);
        same += pa == pb;
        close_ += llabs(pa - pb) < CIRCUIT_MS(1);
    }
    cr_assert_eq(same, 0);
    cr_assert_lt(close_, 20, "%d of 1000 periods within 1 ms of each other", close_);
}

Test(backoff, B3_breakers_sharing_one_struct_do_not_probe_in_step)
{
    /* Four upstreams of one process share one struct (one seed) and trip
     * together (same generation, same reopens): their salts differ, so do
     * their periods, by a spread. */
    circuit_backoff_exponential p = backoff(CIRCUIT_MS(500), CIRCUIT_S(60), 0.5, 42);
    int same = 0, close_ = 0;
    for (uint64_t g = 1; g <= 250; g++)
        for (uint64_t s = 1; s <= 4; s++)
            for (uint64_t t = s + 1; t <= 4; t++) {
                int64_t a = period_salted(&p, s, (int64_t)(g % 5), g);
                int64_t b = period_salted(&p, t, (int64_t)(g % 5), g);
                same += a == b;
                close_ += llabs(a - b) < CIRCUIT_MS(1);
            }
    cr_assert_eq(same, 0);
    cr_assert_lt(close_, 20, "%d of 1500 pairs within 1 ms of each other", close_);
}

Test(backoff, B3_pure_same_inputs_same_period_nothing_written)
{
    circuit_backoff_exponential p = backoff(CIRCUIT_MS(100), CIRCUIT_S(5), 0.3, 77);
    circuit_backoff_exponential before = p;
    circuit_open_info info = {
        .counts = {1, 2, 0, 2, 0}, .generation = 9, .reopens = 3, .salt = 11};
    circuit_open_info info_before = info;
    int64_t first = circuit_backoff_exponential_open_for(&p, &info);
    for (int i = 0; i < 100; i++)
        cr_assert_eq(circuit_backoff_exponential_open_for(&p, &info), first);
    cr_assert_eq(memcmp(&p, &before, sizeof p), 0);
    cr_assert_eq(memcmp(&info, &info_before, sizeof info), 0);
    /* the counts do not matter, only reopens and generation */
    info.counts = (circuit_counts){0, 0, 0, 0, 0};
    cr_assert_eq(circuit_backoff_exponential_open_for(&p, &info), first);
}

Test(backoff, B3_extremes_do_not_overflow_and_stay_positive)
{
    circuit_backoff_exponential p = backoff(1, INT64_MAX, 0.0, 0);
    cr_assert_eq(period(&p, 62, 1), INT64_C(1) << 62);
    cr_assert_eq(period(&p, 63, 1), INT64_MAX);
    cr_assert_eq(period(&p, INT64_MAX, 1), INT64_MAX);
    circuit_backoff_exponential half = backoff(INT64_MAX / 2 + 1, INT64_MAX, 0.0, 0);
    cr_assert_eq(period(&half, 1, 1), INT64_MAX);
    circuit_backoff_exponential tiny = backoff(1, 1, 0.999999, 5);
    for (uint64_t g = 1; g < 1000; g++)
        cr_assert_eq(period(&tiny, (int64_t)g, g), 1, "a period is never below 1 ns");
    circuit_backoff_exponential big = backoff(1, INT64_MAX, 0.999999, 3);
    for (uint64_t g = 1; g < 1000; g++) {
        int64_t v = period(&big, 70, g);
        cr_assert_geq(v, 1);
        cr_assert_leq(v, INT64_MAX);
    }
    /* generation 0 and the largest generation are inputs like any other */
    cr_assert_eq(period(&p, 0, 0), 1);
    cr_assert_eq(period(&half, 0, UINT64_MAX), INT64_MAX / 2 + 1);
}

/* ---- init ------------------------------------------------------------------------ */

Test(backoff, B3_init_fills_the_struct_and_clears_errbuf)
{
    circuit_backoff_exponential p;
    char err[64] = "junk";
    cr_assert_eq(circuit_backoff_exponential_init(&p, 10, 20, 0.25, 99, err, sizeof err), 0);
    cr_assert_str_empty(err);
    cr_assert_eq(p.base_ns, 10);
    cr_assert_eq(p.cap_ns, 20);
    cr_assert_eq(p.jitter, 0.25);
    cr_assert_eq(p.seed, 99);
    cr_assert_eq(circuit_backoff_exponential_init(&p, 1, 1, 0.0, 0, NULL, 0), 0);
}

Test(backoff, B3_init_one_message_names_every_bad_argument)
{
    circuit_backoff_exponential p;
    memset(&p, 0x5a, sizeof p);
    char err[512];
    cr_assert_eq(circuit_backoff_exponential_init(&p, 0, -1, 1.0, 1, err, sizeof err), EINVAL);
    cr_assert_str_eq(err, "invalid circuit_backoff_exponential: base_ns = 0 (must be > 0); "
                          "cap_ns = -1 (must be > 0 and >= base_ns); jitter = 1 (must be in "
                          "[0, 1))");
    circuit_backoff_exponential zero;
    memset(&zero, 0, sizeof zero);
    cr_assert_eq(memcmp(&p, &zero, sizeof p), 0, "zeroed on EINVAL");

    cr_assert_eq(circuit_backoff_exponential_init(&p, 10, 5, 0.5, 1, err, sizeof err), EINVAL);
    cr_assert_str_eq(err,
                     "invalid circuit_backoff_exponential: cap_ns = 5 (must be >= base_ns = 10)");

    cr_assert_eq(circuit_backoff_exponential_init(&p, -3, 5, -0.1, 1, err, sizeof err), EINVAL);
    cr_assert_str_eq(err, "invalid circuit_backoff_exponential: base_ns = -3 (must be > 0); "
                          "jitter = -0.1 (must be in [0, 1))");

    cr_assert_eq(circuit_backoff_exponential_init(&p, 1, 5, NAN, 1, err, sizeof err), EINVAL);
    cr_assert_str_eq(err, "invalid circuit_backoff_exponential: jitter = nan (must be in [0, 1))");

    cr_assert_eq(circuit_backoff_exponential_init(&p, 1, 5, 0.99999999999999989, 1, err,
                                                  sizeof err),
                 0, "the largest double below 1 is a valid jitter: %s", err);
}

Test(backoff, B3_init_message_is_truncated_safely)
{
    circuit_backoff_exponential p;
    const char *full = "invalid circuit_backoff_exponential: base_ns = 0 (must be > 0)";
    for (size_t len = 0; len < strlen(full) + 3; len++) {
        char err[96];
        memset(err, '#', sizeof err);
        cr_assert_eq(circuit_backoff_exponential_init(&p, 0, 10, 0.0, 0, len ? err : NULL, len),
                     EINVAL);
        if (len == 0)
            continue;
        size_t want = len - 1 < strlen(full) ? len - 1 : strlen(full);
        cr_assert_eq(strlen(err), want);
        cr_assert_eq(strncmp(err, full, want), 0);
        for (size_t i = len; i < sizeof err; i++)
            cr_assert_eq(err[i], '#', "len %zu wrote byte %zu", len, i);
    }
}

/* ---- aborts (CFG4) ----------------------------------------------------------------- */

static void init_null(void *arg)
{
    (void)arg;
    (void)circuit_backoff_exponential_init(NULL, 1, 2, 0.0, 0, NULL, 0);
}

static void open_for_zeroed(void *arg)
{
    (void)arg;
    circuit_backoff_exponential p;
    memset(&p, 0, sizeof p);
    circuit_open_info info = {.generation = 1};
    (void)circuit_backoff_exponential_open_for(&p, &info);
}

static void open_for_null_info(void *arg)
{
    (void)arg;
    circuit_backoff_exponential p = backoff(1, 2, 0.0, 0);
    (void)circuit_backoff_exponential_open_for(&p, NULL);
}

static void use_zeroed(void *arg)
{
    (void)arg;
    circuit_backoff_exponential p;
    memset(&p, 0, sizeof p);
    circuit_spec spec;
    memset(&spec, 0, sizeof spec);
    circuit_backoff_exponential_use(&spec, &p);
}

static void use_null_spec(void *arg)
{
    (void)arg;
    circuit_backoff_exponential p = backoff(1, 2, 0.0, 0);
    circuit_backoff_exponential_use(NULL, &p);
}

Test(backoff, CFG4_backoff_aborts_on_null_and_uninitialised)
{
    expect_abort(init_null, NULL, "circuit_backoff_exponential_init: p is NULL");
    expect_abort(open_for_zeroed, NULL,
                 "circuit_backoff_exponential_open_for: *arg holds invalid values");
    expect_abort(open_for_null_info, NULL, "circuit_backoff_exponential_open_for: info is NULL");
    expect_abort(use_zeroed, NULL, "circuit_backoff_exponential_use: *p holds invalid values");
    expect_abort(use_null_spec, NULL, "circuit_backoff_exponential_use: spec is NULL");
}

Test(backoff, B3_use_fills_open_for_and_its_arg)
{
    circuit_backoff_exponential p = backoff(1, 2, 0.0, 0);
    circuit_spec spec;
    memset(&spec, 0, sizeof spec);
    circuit_backoff_exponential_use(&spec, &p);
    cr_assert_eq(spec.open_for, circuit_backoff_exponential_open_for);
    cr_assert_eq(spec.open_for_arg, (void *)&p);
}

/* ---- through a breaker (B1, B2; needs the core's open_for) ------------------------- */

/* Opens the breaker (closed -> open) or reopens it (a failed probe), then
 * checks the rejection's retry_after and the transition's open_for_ns. */
static void expect_open_for(fx *f, int64_t want)
{
    const circuit_transition *t = &f->log.tr[f->log.n - 1];
    cr_assert_eq(t->to, CIRCUIT_OPEN);
    cr_assert_eq(t->open_for_ns, want, "transition %llu carries %lld, want %lld",
                 (unsigned long long)t->generation, (long long)t->open_for_ns,
                 (long long)want);
    circuit_ticket tk;
    circuit_rejection rej;
    cr_assert(!circuit_allow(f->b, NULL, &tk, &rej));
    assert_rejected(rej, CIRCUIT_OPEN, want);
}

Test(backoff, B1_B2_B3_a_breaker_follows_the_preset_schedule)
{
    circuit_test_clock_use_real(false);
    circuit_test_clock_set(T0);
    circuit_backoff_exponential p = backoff(1000, 6000, 0.25, 31337);
    fx f;
    fx_init(&f, 10, 1, 1, PROBE_TO); /* config.open_for_ns is not used */
    circuit_backoff_exponential_use(&f.spec, &p);
    fx_build(&f);

    fx_open(&f); /* trip from closed: reopens 0 */
    uint64_t g = f.log.tr[f.log.n - 1].generation;
    uint64_t salt = circuit_get_salt(f.b);
    int64_t want = predicted(1000, 6000, 0.25, 31337, salt, 0, g);
    expect_open_for(&f, want);

    for (int64_t r = 1; r <= 4; r++) {
        circuit_test_clock_advance(want); /* due: the next allow is a probe */
        fx_call(&f, RS_FAIL);             /* the probe fails: the r-th reopen */
        g = f.log.tr[f.log.n - 1].generation;
        want = predicted(1000, 6000, 0.25, 31337, salt, r, g);
        expect_open_for(&f, want);
    }
    /* A close starts the schedule again at the base (B2). */
    circuit_test_clock_advance(want);
    fx_call(&f, RS_OK);
    fx_call(&f, RS_OK);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    fx_open(&f);
    g = f.log.tr[f.log.n - 1].generation;
    expect_open_for(&f, predicted(1000, 6000, 0.25, 31337, salt, 0, g));
    fx_free(&f);
}

Test(backoff, B3_each_breaker_gets_its_own_salt_and_every_period_is_predicted)
{
    /* Four breakers built from one spec, sharing one parameter struct, salt
     * left at 0: circuit_new gives each its own salt (consecutive numbers of
     * a process-wide count), the core hands it to open_for, and a test that
     * reads it predicts every period; the four first periods all differ. */
    circuit_test_clock_use_real(false);
    circuit_test_clock_set(T0);
    circuit_backoff_exponential p = backoff(CIRCUIT_S(1), CIRCUIT_S(8), 0.5, 7);
    enum { N = 4 };
    fx f[N];
    int64_t first[N];
    for (int i = 0; i < N; i++) {
        fx_init(&f[i], 10, 1, 1, PROBE_TO);
        circuit_backoff_exponential_use(&f[i].spec, &p);
        cr_assert_eq(f[i].spec.salt, 0);
        fx_build(&f[i]);
        uint64_t salt = circuit_get_salt(f[i].b);
        cr_assert_neq(salt, 0);
        if (i > 0)
            cr_assert_eq(salt, circuit_get_salt(f[i - 1].b) + 1, "consecutive numbers");
        fx_open(&f[i]);
        uint64_t g = f[i].log.tr[f[i].log.n - 1].generation;
        first[i] = predicted(CIRCUIT_S(1), CIRCUIT_S(8), 0.5, 7, salt, 0, g);
        expect_open_for(&f[i], first[i]);
        for (int64_t r = 1; r <= 3; r++) {
            circuit_test_clock_advance(f[i].log.tr[f[i].log.n - 1].open_for_ns);
            fx_call(&f[i], RS_FAIL); /* a failed probe reopens */
            g = f[i].log.tr[f[i].log.n - 1].generation;
            expect_open_for(&f[i], predicted(CIRCUIT_S(1), CIRCUIT_S(8), 0.5, 7, salt, r, g));
        }
    }
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++)
            cr_assert_neq(first[i], first[j], "breakers %d and %d open for %lld ns alike", i, j,
                          (long long)first[i]);
    for (int i = 0; i < N; i++)
        fx_free(&f[i]);

    /* A salt the caller sets is used as given. */
    fx g;
    fx_init(&g, 10, 1, 1, PROBE_TO);
    circuit_backoff_exponential_use(&g.spec, &p);
    g.spec.salt = UINT64_C(0xfeedface);
    fx_build(&g);
    cr_assert_eq(circuit_get_salt(g.b), UINT64_C(0xfeedface));
    fx_open(&g);
    expect_open_for(&g, predicted(CIRCUIT_S(1), CIRCUIT_S(8), 0.5, 7, UINT64_C(0xfeedface), 0,
                                  g.log.tr[g.log.n - 1].generation));
    fx_free(&g);
}

/* ==== open_for asked with the generation a transition made (B3) =========== */

/* ---- B3: open_for asked from a word two transitions stale ------------------- */

static uint64_t open_for_gens[64];
static int64_t open_for_n;

static int64_t spy_open_for(void *arg, const circuit_open_info *info)
{
    (void)arg;
    int64_t i = A_ADD(&open_for_n, 1) - 1;
    if (i < 64)
        open_for_gens[i] = info->generation;
    return OPEN_FOR;
}

typedef struct probe_settler {
    circuit_ticket t;
    bool counted;
} probe_settler;

static void *probe_settler_thread(void *arg)
{
    probe_settler *p = arg;
    park_me_at(CIRCUIT_TP_DONE_BEFORE_CAS);
    p->counted = circuit_done(&p->t, RS_FAIL);
    return NULL;
}

/* A probe's failure (half-open, generation 2) decides to reopen and is
 * stopped before its transition; isolate (3) and reset (4) happen
 * meanwhile. When it resumes, open_for may be asked again for the reopen
 * it computed (its answer is then thrown away), but only with the
 * generation that reopen would have had (3): B3 promises a pure function
 * of the true information. */
Test(backoff, B3_open_for_is_asked_with_a_true_generation_from_a_stale_word)
{
    fx f;
    fx_init(&f, 4, 1, OPEN_FOR, PROBE_TO);
    f.spec.open_for = spy_open_for;
    f.p.reopen_on_failure = true;
    fx_build(&f);
    fx_half_open_due(&f); /* generation 1: open */
    probe_settler p = {CIRCUIT_TICKET_INIT, false};
    cr_assert(circuit_allow(f.b, NULL, &p.t, NULL)); /* generation 2: half-open */
    open_for_n = 0;

    park_setup();
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, probe_settler_thread, &p), 0);
    park_wait();
    cr_assert_eq(circuit_isolate(f.b, NULL), 0); /* generation 3 */
    cr_assert_eq(circuit_reset(f.b, NULL), 0);   /* generation 4 */
    park_release();
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_assert_not(p.counted, "the probe's result is late (T6)");
    int64_t n = A_LOAD(&open_for_n);
    cr_assert_leq(n, 64);
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(open_for_gens[i], 3,
                     "open_for asked with generation %llu (0x%llx) for the reopen of "
                     "generation 2", (unsigned long long)open_for_gens[i],
                     (unsigned long long)open_for_gens[i]);
    fx_free(&f);
}
