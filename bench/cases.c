/*
 * What the timed programs measure: the cases, the breakers behind them and
 * the measured loops.
 *
 * SPDX-License-Identifier: MIT
 *
 * Cases (every thread works on ONE shared breaker)
 *   closed_success   allow + done(success); trip never trips.
 *   closed_mixed_<F>pct  allow + done, each result a failure with probability
 *                    F % (0.01, 0.1, 1, 10), seeded pseudo-random per thread
 *                    (not a fixed period, which would let threads align);
 *                    windows 64 and 1024; never trips (the family
 *                    "closed_mixed" in --case).
 *   open_reject      allow on a breaker that was tripped once at setup and
 *                    stays open (open_for 1e15 ns).
 *   half_open_probe  allow + done(success) in half-open; the probe policy
 *                    keeps probing; probe_timeout 1e15 ns.
 *   get_state        circuit_get_state on a closed breaker (a metrics read).
 *   get_stats        circuit_get_stats on a closed breaker (a /metrics scrape).
 *   churn            trip on the first failure, 1 failure in 256 calls per
 *                    thread, open_for 1 ns, one probe that closes on success
 *                    and reopens on failure: transitions and their delivery
 *                    are on the measured path (transitions/s reported).
 *   proxy_cycle      allow, then --work-ns of busy work (the upstream call; a
 *                    spin on the time stamp counter, calibrated against
 *                    the no_breaker loop), then done(success); the no_breaker
 *                    variant runs the same loop without allow and done.
 *   Scale rows: closed_success with window 1, 64, 1024, 65536; half_open_probe with
 *   probes 1, 64, 65536.
 * Baselines: atomic_floor (one atomic_fetch_add on one shared counter per op),
 * clock (one clock_gettime(CLOCK_MONOTONIC)), empty (the loop alone).
 */
#include "bench.h"

#include <string.h>
#include <time.h>

const char *const variant_names[V__COUNT] = {"circuit", "mutex_breaker", "baseline",
                                             "no_breaker"};

#define BREAKERS (1u << V_CIRCUIT | 1u << V_MUTEX)
#define WITH_NONE (BREAKERS | 1u << V_NONE)

#define MIXED(name, window, every) \
    {name, SETUP_CLOSED, LOOP_ALLOW_DONE, window, 1, every, BREAKERS, true}

const case_def case_table[] = {
    {"closed_success",  SETUP_CLOSED,    LOOP_ALLOW_DONE, 1,     1,     0,   BREAKERS, false},
    {"closed_success",  SETUP_CLOSED,    LOOP_ALLOW_DONE, 64,    1,     0,   BREAKERS, false},
    {"closed_success",  SETUP_CLOSED,    LOOP_ALLOW_DONE, 1024,  1,     0,   BREAKERS, false},
    {"closed_success",  SETUP_CLOSED,    LOOP_ALLOW_DONE, 65536, 1,     0,   BREAKERS, false},
    MIXED("closed_mixed_0.01pct", 64, 10000),
    MIXED("closed_mixed_0.01pct", 1024, 10000),
    MIXED("closed_mixed_0.1pct", 64, 1000),
    MIXED("closed_mixed_0.1pct", 1024, 1000),
    MIXED("closed_mixed_1pct", 64, 100),
    MIXED("closed_mixed_1pct", 1024, 100),
    MIXED("closed_mixed_10pct", 64, 10),
    MIXED("closed_mixed_10pct", 1024, 10),
    {"open_reject",     SETUP_OPEN,      LOOP_ALLOW,      64,    1,     0,   BREAKERS, false},
    {"half_open_probe", SETUP_HALF_OPEN, LOOP_ALLOW_DONE, 64,    1,     0,   BREAKERS, false},
    {"half_open_probe", SETUP_HALF_OPEN, LOOP_ALLOW_DONE, 64,    64,    0,   BREAKERS, false},
    {"half_open_probe", SETUP_HALF_OPEN, LOOP_ALLOW_DONE, 64,    65536, 0,   BREAKERS, false},
    {"get_state",       SETUP_CLOSED,    LOOP_STATE,      64,    1,     0,   BREAKERS, false},
    {"get_stats",       SETUP_CLOSED,    LOOP_STATS,      64,    1,     0,   BREAKERS, false},
    {"churn",           SETUP_CHURN,     LOOP_ALLOW_DONE, 64,    1,     256, BREAKERS, false},
    {"proxy_cycle",     SETUP_CLOSED,    LOOP_PROXY,      64,    1,     0,   WITH_NONE, false},
};
const size_t n_cases = sizeof case_table / sizeof case_table[0];

const case_def baseline_table[] = {
    {"atomic_floor", SETUP_NONE, LOOP_ATOMIC, 0, 0, 0, 1u << V_BASELINE, false},
    {"clock",        SETUP_NONE, LOOP_CLOCK,  0, 0, 0, 1u << V_BASELINE, false},
    {"empty",        SETUP_NONE, LOOP_EMPTY,  0, 0, 0, 1u << V_BASELINE, false},
};
const size_t n_baselines = sizeof baseline_table / sizeof baseline_table[0];

const char *case_family(const case_def *c)
{
    size_t n = strlen(MIXED_FAMILY);
    return strncmp(c->name, MIXED_FAMILY, n) == 0 && c->name[n] == '_' ? MIXED_FAMILY : NULL;
}

double case_failure_fraction(const case_def *c)
{
    return c->fail_every ? 1.0 / (double)c->fail_every : 0.0;
}

/* ---- policies and callbacks (pure, as L4 asks) ---------------------------- */

static bool trip_on_failures(void *arg, const circuit_counts *c)
{
    const policy_arg *p = arg;
    return c->failures >= p->trip_failures;
}

static bool trip_on_first_failure(void *arg, const circuit_counts *c)
{
    (void)arg;
    return c->consecutive_failures >= 1;
}

static circuit_state probe_keep_probing(void *arg, const circuit_counts *c)
{
    (void)arg;
    (void)c;
    return CIRCUIT_HALF_OPEN;
}

static circuit_state probe_close_on_success(void *arg, const circuit_counts *c)
{
    (void)arg;
    if (c->consecutive_failures > 0)
        return CIRCUIT_OPEN;
    if (c->consecutive_successes > 0)
        return CIRCUIT_CLOSED;
    return CIRCUIT_HALF_OPEN;
}

static circuit_outcome classify_zero_ok(void *arg, void *call_ctx, int rc)
{
    (void)arg;
    (void)call_ctx;
    return rc == 0 ? CIRCUIT_SUCCESS : CIRCUIT_FAILURE;
}

static void observe_count(void *arg, void *call_ctx, const circuit_transition *t)
{
    (void)call_ctx;
    (void)t;
    target *tg = arg;
    atomic_fetch_add_explicit(&tg->transitions, 1, memory_order_relaxed);
}

static void fill_spec(circuit_spec *s, target *tg, const case_def *c, int64_t open_for,
                      int64_t probe_timeout)
{
    memset(s, 0, sizeof *s);
    s->config.window = c->window;
    s->config.probes = c->probes;
    s->config.open_for_ns = open_for;
    s->config.probe_timeout_ns = probe_timeout;
    s->policy.arg = &tg->pol;
    s->classify = classify_zero_ok;
    s->observe = observe_count;
    s->observe_arg = tg;
    switch (c->setup) {
    case SETUP_CLOSED:
        tg->pol.trip_failures = c->window / 2 + 1;
        s->policy.trip = trip_on_failures;
        s->policy.probe = probe_close_on_success;
        break;
    case SETUP_OPEN:
        tg->pol.trip_failures = 1;
        s->policy.trip = trip_on_failures;
        s->policy.probe = probe_close_on_success;
        break;
    case SETUP_HALF_OPEN:
        tg->pol.trip_failures = 1;
        s->policy.trip = trip_on_failures;
        s->policy.probe = probe_keep_probing;
        break;
    case SETUP_CHURN:
    case SETUP_NONE:
        s->policy.trip = trip_on_first_failure;
        s->policy.probe = probe_close_on_success;
        break;
    }
}

/* ---- setup-time calls, variant-generic (never on the measured path) ------------ */

typedef union any_ticket {
    circuit_ticket c;
    mutex_breaker_ticket  m;
} any_ticket;

static bool tg_allow(target *tg, any_ticket *t)
{
    circuit_rejection rej;
    if (tg->v == V_CIRCUIT)
        return circuit_allow(tg->cb, NULL, &t->c, &rej);
    return mutex_breaker_allow(tg->mb, NULL, &t->m, &rej);
}

static void tg_done(target *tg, any_ticket *t, int rc)
{
    if (tg->v == V_CIRCUIT)
        circuit_done(&t->c, rc);
    else
        mutex_breaker_done(&t->m, rc);
}

static circuit_state tg_state(target *tg)
{
    return tg->v == V_CIRCUIT ? circuit_get_state(tg->cb) : mutex_breaker_get_state(tg->mb);
}

/* mutex_breaker reads its time through a callback: here, the real clock. */
static int64_t real_clock(void *arg)
{
    (void)arg;
    return now_ns();
}

void target_free(target *tg)
{
    if (tg->cb)
        circuit_free(tg->cb);
    if (tg->mb)
        mutex_breaker_free(tg->mb);
    tg->cb = NULL;
    tg->mb = NULL;
}

int target_setup(target *tg, variant v, const case_def *c)
{
    circuit_spec s;
    char err[256] = "";
    int64_t open_for = INT64_C(1000000000000000);   /* 1e15 ns: ~11.6 days */
    int64_t probe_timeout = INT64_C(1000000000000000);

    memset(tg, 0, sizeof *tg);
    tg->v = v;
    atomic_init(&tg->transitions, 0);
    if (v == V_NONE || v == V_BASELINE)
        return 0;
    if (c->setup == SETUP_HALF_OPEN)
        open_for = 1;
    if (c->setup == SETUP_CHURN) {
        open_for = 1;
        probe_timeout = INT64_C(1000000000);
    }
    fill_spec(&s, tg, c, open_for, probe_timeout);
    int rc = v == V_CIRCUIT ? circuit_new(&tg->cb, &s, err, sizeof err)
                            : mutex_breaker_new(&tg->mb, &s, real_clock, NULL, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "bench: %s: %s new failed (%s): %s\n", c->name,
                variant_names[v], strerror(rc), err);
        return -1;
    }

    any_ticket t;
    memset(&t, 0, sizeof t);
    circuit_state want = CIRCUIT_CLOSED;
    if (c->setup == SETUP_OPEN || c->setup == SETUP_HALF_OPEN) {
        if (!tg_allow(tg, &t))
            goto bad;
        tg_done(tg, &t, -1); /* the one failure that trips */
        want = CIRCUIT_OPEN;
        if (c->setup == SETUP_HALF_OPEN) {
            sleep_s(0.001); /* open_for is 1 ns */
            if (!tg_allow(tg, &t))  /* open -> half-open, admitted as a probe */
                goto bad;
            tg_done(tg, &t, 0);     /* keep probing */
            want = CIRCUIT_HALF_OPEN;
        }
    }
    if (tg_state(tg) != want)
        goto bad;
    return 0;
bad:
    fprintf(stderr, "bench: %s: %s: setup did not reach state %s (state %s)\n", c->name,
            variant_names[v], circuit_state_name(want), circuit_state_name(tg_state(tg)));
    target_free(tg);
    return -1;
}

/* ---- measured loops ---------------------------------------------------------------- */
/* One function per (variant, loop), so that callgrind's --toggle-collect and
 * perf can name them. Each looks at the stop flag once per BATCH ops. In the
 * breaker loops the first op of every batch is timed on its own (one sample
 * in BATCH, into the worker's latency ring); the baselines are not timed,
 * their op is shorter than the time stamps. */

#define BENCH_LOOP(w, timed, ...)                                                          \
    do {                                                                                   \
        uint64_t ops_ = 0, nlat_ = 0;                                                      \
        uint32_t *lat_ = (w)->lat;                                                         \
        while (!atomic_load_explicit(&(w)->run->stop, memory_order_relaxed)) {             \
            int k_ = 0;                                                                    \
            if ((timed) && lat_ != NULL) {                                                 \
                uint64_t t0_ = bench_tick();                                               \
                __VA_ARGS__                                                                \
                uint64_t d_ = bench_tick() - t0_;                                          \
                if (nlat_ < (w)->nmarks_cap)                                               \
                    (w)->marks[nlat_] = t0_; /* progress marks, one per batch */           \
                lat_[nlat_++ % LAT_CAP] = d_ > UINT32_MAX ? UINT32_MAX : (uint32_t)d_;     \
                k_ = 1;                                                                    \
            }                                                                              \
            for (; k_ < BATCH; k_++) {                                                     \
                __VA_ARGS__                                                                \
            }                                                                              \
            ops_ += BATCH;                                                                 \
            if (ops_ >= (w)->limit)                                                        \
                break;                                                                     \
        }                                                                                  \
        (w)->ops = ops_;                                                                   \
        (w)->nlat = nlat_;                                                                 \
    } while (0)

/* allow, then BODY when admitted (BODY settles the ticket t; it may use
 * `left`/`every`, the failure pattern, and `ticks`, proxy_cycle's work). */
#define TICKET_LOOP(fn, handle_type, handle, ticket_type, allow, ...)                      \
    static NOINLINE void fn(worker *w)                                                     \
    {                                                                                      \
        handle_type *h = w->tg->handle;                                                    \
        ticket_type t;                                                                     \
        circuit_rejection rej;                                                             \
        uint64_t left = w->fail_left, every = w->fail_every, ticks = w->work_ticks;        \
        const uint32_t *gaps = w->gaps;                                                    \
        uint32_t gi = 1; /* gaps[0] is fail_left */                                        \
        uint64_t admitted = 0;                                                             \
        memset(&t, 0, sizeof t);                                                           \
        BENCH_LOOP(w, true, if (allow(h, w, &t, &rej)) { __VA_ARGS__ admitted++; });       \
        w->admitted = admitted;                                                            \
        (void)left, (void)every, (void)ticks, (void)gaps, (void)gi;                        \
    }

/* done(success), or done(failure) when the countdown to the next failure
 * ends: then the next gap (seeded) or `every` again (periodic) */
#define SETTLE(done)                                                                       \
    int rc = 0;                                                                            \
    if (--left == 0) {                                                                     \
        left = gaps ? gaps[gi++ & (GAPS - 1)] : every;                                     \
        rc = -1;                                                                           \
    }                                                                                      \
    done(&t, rc);

/* a read of the state (get_state, or get_stats' state) */
#define READ_LOOP(fn, handle_type, handle, ...)                                            \
    static NOINLINE void fn(worker *w)                                                     \
    {                                                                                      \
        handle_type *h = w->tg->handle;                                                    \
        circuit_stats st;                                                                  \
        uint64_t odd = 0;                                                                  \
        BENCH_LOOP(w, true, odd += (__VA_ARGS__) != CIRCUIT_CLOSED;);                      \
        w->odd = odd;                                                                      \
        (void)st;                                                                          \
    }

TICKET_LOOP(loop_circuit_allow_done, circuit_breaker, cb, circuit_ticket, circuit_allow,
            SETTLE(circuit_done))
TICKET_LOOP(loop_mutex_allow_done, mutex_breaker, mb, mutex_breaker_ticket, mutex_breaker_allow, SETTLE(mutex_breaker_done))
/* open_reject: an admitted call means the case is broken (check_case says so) */
TICKET_LOOP(loop_circuit_allow, circuit_breaker, cb, circuit_ticket, circuit_allow,
            circuit_release(&t);)
TICKET_LOOP(loop_mutex_allow, mutex_breaker, mb, mutex_breaker_ticket, mutex_breaker_allow, mutex_breaker_release(&t);)
/* proxy_cycle: allow, the upstream call (busy work), done(success) */
TICKET_LOOP(loop_circuit_proxy, circuit_breaker, cb, circuit_ticket, circuit_allow,
            bench_work(ticks); circuit_done(&t, 0);)
TICKET_LOOP(loop_mutex_proxy, mutex_breaker, mb, mutex_breaker_ticket, mutex_breaker_allow,
            bench_work(ticks); mutex_breaker_done(&t, 0);)
READ_LOOP(loop_circuit_state, circuit_breaker, cb, circuit_get_state(h))
READ_LOOP(loop_mutex_state, mutex_breaker, mb, mutex_breaker_get_state(h))
READ_LOOP(loop_circuit_stats, circuit_breaker, cb, (circuit_get_stats(h, &st), st.state))
READ_LOOP(loop_mutex_stats, mutex_breaker, mb, (mutex_breaker_get_stats(h, &st), st.state))

static NOINLINE void loop_none_proxy(worker *w)
{
    uint64_t admitted = 0, ticks = w->work_ticks;
    BENCH_LOOP(w, true, bench_work(ticks); admitted++;);
    w->admitted = admitted;
}

static struct {
    alignas(128) atomic_uint_fast64_t n;
} floor_counter;

static NOINLINE void loop_atomic_floor(worker *w)
{
    BENCH_LOOP(w, false, atomic_fetch_add(&floor_counter.n, 1););
}

static NOINLINE void loop_clock(worker *w)
{
    uint64_t sink = 0;
    BENCH_LOOP(w, false, {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        sink += (uint64_t)ts.tv_nsec;
    });
    w->odd = sink & 1; /* keeps the reads; meaningless */
}

static NOINLINE void loop_empty(worker *w)
{
    BENCH_LOOP(w, false, __asm__ volatile("" ::: "memory"););
}

loop_fn pick_loop(variant v, loop_kind k)
{
    bool c = v == V_CIRCUIT;
    switch (k) {
    case LOOP_ALLOW_DONE: return c ? loop_circuit_allow_done : loop_mutex_allow_done;
    case LOOP_ALLOW:      return c ? loop_circuit_allow : loop_mutex_allow;
    case LOOP_STATE:      return c ? loop_circuit_state : loop_mutex_state;
    case LOOP_STATS:      return c ? loop_circuit_stats : loop_mutex_stats;
    case LOOP_PROXY:
        return v == V_NONE ? loop_none_proxy : c ? loop_circuit_proxy : loop_mutex_proxy;
    case LOOP_ATOMIC:     return loop_atomic_floor;
    case LOOP_CLOCK:      return loop_clock;
    case LOOP_EMPTY:      return loop_empty;
    }
    return loop_empty;
}

bool case_selected(const char *list, const case_def *c)
{
    const char *fam = case_family(c);
    return in_list(list, c->name) || (fam != NULL && in_list(list, fam));
}
