/*
 * differential: the real core against the reference model.
 *
 * SPDX-License-Identifier: MIT
 *
 * Random operation sequences (allow; done with a success, failure or ignored
 * result; release of live, settled, rejected and blank tickets; get_state;
 * get_stats; isolate; reset; clock moves of 0 ns up to 2 * open_for, landing
 * on the exact boundaries opened_at + period - 1 / + 0 and a probe's due - 1
 * / due) are run single-threaded through both the real library
 * (circuit_testable, clock set with circuit_test_clock_set) and the model
 * (clock read from a variable). After every operation these must be
 * identical:
 *   - every return value (allow, done, isolate, reset), every rejection
 *     (state and retry_after_ns);
 *   - every call of trip / probe, in order, with its counts (so S2 as
 *     amended in 0.3: trip is asked after each failure, never after a
 *     success);
 *   - every call of open_for (B1, B2), in order, with its info (counts,
 *     generation, reopens);
 *   - every classify call (call_ctx, result);
 *   - every transition delivered (call_ctx, from, to, generation, counts,
 *     cause, open_for_ns), including those made by calls that observe makes
 *     (nested allow/done/release, isolate, reset, get_stats: OP3, M1);
 *   - circuit_get_state and every field of circuit_get_stats (M1: exact,
 *     since the run is sequential), and on both sides the identity
 *     admitted = successes + failures + ignored + late + released + live.
 * The policies also check the count invariants C1-C3 on every call.
 *
 * Each seed picks its config, its policies and its open-period function:
 * none (config.open_for_ns) or one of three pure functions of the info
 * (exponential in reopens with a cap and a jitter hashed from the
 * generation; one driven by the counts; one that swings from 1 ns to
 * INT64_MAX).
 *
 * Usage: differential [--ops N] [--long | --rates] [SEED]
 *   --rates: the nine rate runs (S2, L6): windows 1, 64
 *   and 65536 with failure fractions 0.1 %, 1 % and 50 %, mostly allow and
 *   done, trip on failures >= about 1.5 times the expected count.
 *   no SEED: seeds 1..20*CIRCUIT_STRESS_SCALE (default scale 1), OPS_PER_SEED
 *   (200 000) operations each; SEED: replay that one seed. --ops N: N
 *   operations per seed. --long: the manual soak, seeds 1..400 (times the
 *   scale) of 10^6 operations each. CIRCUIT_DIFF_TRACE=1 prints every
 *   operation. Every seed that is a multiple of 20 starts with a saturation
 *   run (probes 1000, a probe policy that never decides; slots filled and
 *   timed out again and again until timed_out has reached
 *   CIRCUIT_TIMED_OUT_MAX); every seed that is 10 more is a window run
 *   (window 65536, results counted long enough to fill and slide the window,
 *   tripping on failures >= about window/2; no operator calls).
 * Exit: 0 all identical; 1 first mismatch (printed with seed, config, op
 * index, expected = model, got = real, the operations before it and the
 * replay command); 2 usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "circuit.h"
#include "circuit_model.h"
#include "testing.h"

/* ---- random numbers (splitmix64) --------------------------------------- */

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static int64_t rnd_below(uint64_t *s, int64_t n) /* 0..n-1; n > 0 */
{
    return (int64_t)(rnd(s) % (uint64_t)n);
}

/* ---- the policies -------------------------------------------------------- */

typedef struct params {
    int     trip_kind; /* see decide_trip */
    int64_t k, j, pct, vol;
    int     probe_kind; /* see decide_probe */
    int64_t m, f, tmo;
    int     nest; /* observe makes nested calls (see cb_observe) */
    int     of_kind; /* open-period function: see decide_open_for */
    int64_t of_base;
    uint64_t of_salt;
} params;

static const char *const trip_names[] = {"failures>=k", "consecutive_failures>=j",
                                         "failures>=k||consecutive_failures>=j",
                                         "failure%>=pct&&volume>=vol", "consecutive_successes>=k"};
static const char *const probe_names[] = {
    "failure:open,consec_succ>=m:close,timed_out>=2:open", "succ>=m:close,fail>=f:open,timed_out>=tmo:open",
    "timed_out>=tmo:close,fail>=f:open,succ>=m:close", "consec_succ>=m:close,else keep",
    "timed_out>=1:open,volume>=m:majority", "never decides"};

static const char *const open_for_names[] = {"none (config.open_for_ns)",
                                             "exponential in reopens, capped, jitter from generation",
                                             "from the counts and the generation",
                                             "swings: 1, 2 ns, INT64_MAX by generation"};

/* a + b for a, b >= 0, stopping at INT64_MAX */
static int64_t sat_add(int64_t a, int64_t b)
{
    return b > INT64_MAX - a ? INT64_MAX : a + b;
}

/* a * b for a, b >= 0, stopping at INT64_MAX */
static int64_t sat_mul(int64_t a, int64_t b)
{
    return a != 0 && b > INT64_MAX / a ? INT64_MAX : a * b;
}

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* B3: a pure function of the info (and of the seed's constants), > 0 */
static int64_t decide_open_for(const params *p, const circuit_open_info *in)
{
    int64_t b = p->of_base;
    switch (p->of_kind) {
    case 1: {
        int sh = in->reopens < 20 ? (int)in->reopens : 20;
        int64_t period = sat_mul(b, INT64_C(1) << sh);
        int64_t cap = sat_mul(b, 37);
        if (period > cap)
            period = cap;
        return sat_add(period, (int64_t)(mix64(p->of_salt ^ in->generation) % (uint64_t)(b / 3 + 1)));
    }
    case 2: {
        const circuit_counts *c = &in->counts;
        int64_t x = (c->failures * 7 + c->successes * 3 + c->timed_out * 11 + c->consecutive_failures * 5 +
                     c->consecutive_successes) % 97;
        return sat_add(1 + x, sat_mul((int64_t)(in->generation % 5), b / 2));
    }
    default:
        switch (in->generation % 7) {
        case 0: return INT64_MAX;
        case 1: return 1;
        case 2: return 2;
        default: return sat_add(sat_mul(in->reopens + 1, b / 4), 1);
        }
    }
}

static bool decide_trip(const params *p, const circuit_counts *c)
{
    switch (p->trip_kind) {
    case 0: return c->failures >= p->k;
    case 1: return c->consecutive_failures >= p->j;
    case 2: return c->failures >= p->k || c->consecutive_failures >= p->j;
    case 3: {
        int64_t total = c->successes + c->failures;
        return total >= p->vol && c->failures * 100 >= p->pct * total;
    }
    default: return c->consecutive_successes >= p->k;
    }
}

static circuit_state decide_probe(const params *p, const circuit_counts *c)
{
    switch (p->probe_kind) {
    case 0:
        if (c->consecutive_failures > 0)
            return CIRCUIT_OPEN;
        if (c->consecutive_successes >= p->m)
            return CIRCUIT_CLOSED;
        return c->timed_out >= 2 ? CIRCUIT_OPEN : CIRCUIT_HALF_OPEN;
    case 1:
        if (c->successes >= p->m)
            return CIRCUIT_CLOSED;
        if (c->failures >= p->f)
            return CIRCUIT_OPEN;
        return c->timed_out >= p->tmo ? CIRCUIT_OPEN : CIRCUIT_HALF_OPEN;
    case 2:
        if (c->timed_out >= p->tmo)
            return CIRCUIT_CLOSED;
        if (c->failures >= p->f)
            return CIRCUIT_OPEN;
        return c->successes >= p->m ? CIRCUIT_CLOSED : CIRCUIT_HALF_OPEN;
    case 3: return c->consecutive_successes >= p->m ? CIRCUIT_CLOSED : CIRCUIT_HALF_OPEN;
    case 4:
        if (c->timed_out >= 1)
            return CIRCUIT_OPEN;
        if (c->successes + c->failures >= p->m)
            return c->failures * 2 > c->successes + c->failures ? CIRCUIT_OPEN : CIRCUIT_CLOSED;
        return CIRCUIT_HALF_OPEN;
    default: return CIRCUIT_HALF_OPEN;
    }
}

/* ---- one implementation's side: its handle and its log of events -------- */

typedef enum ev_kind { EV_TRIP = 1, EV_PROBE, EV_OPEN_FOR, EV_CLASSIFY, EV_OBSERVE, EV_NESTED } ev_kind;

/* Nested calls made by observe: how the nested ticket ended, or which
 * operator call was made (n_rc its return). */
enum { NEST_REJECTED = 0, NEST_DONE_TRUE, NEST_DONE_FALSE, NEST_RELEASED, NEST_ISOLATE, NEST_RESET };

typedef struct event {
    ev_kind        kind;
    circuit_counts counts;  /* trip, probe, open_for, observe */
    int            answer;  /* trip 0/1, probe state, classify outcome */
    uintptr_t      ctx;     /* classify, observe, nested */
    int            result;  /* classify */
    int            from, to;
    uint64_t       gen;     /* observe, open_for */
    int            cause;   /* observe */
    int64_t        period;  /* observe: open_for_ns; open_for: the answer */
    int64_t        reopens; /* open_for */
    int            n_state; /* nested: get_state, rejection, how it settled */
    int            n_rej_state;
    int64_t        n_retry;
    int            n_settle;
    int            n_rc;      /* nested isolate / reset */
    circuit_stats  n_stats;   /* nested: get_stats before the nested call */
} event;

enum { REAL = 0, MODEL = 1 };
static const char *const side_names[] = {"real", "model"};

typedef struct side {
    int              id;
    const params    *p;
    int              window;
    circuit_breaker *b;
    cmodel          *m;
    event           *ev;
    size_t           n, cap;
    char             bad[256]; /* first invariant violation seen by a callback */
} side;

static void log_event(side *s, const event *e)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->ev = realloc(s->ev, s->cap * sizeof *s->ev);
        if (s->ev == NULL) {
            fputs("differential: out of memory\n", stderr);
            exit(2);
        }
    }
    s->ev[s->n++] = *e;
}

static void check_counts(side *s, const circuit_counts *c, bool closed)
{
    const char *why = NULL;
    if (c->successes < 0 || c->failures < 0 || c->consecutive_successes < 0 ||
        c->consecutive_failures < 0 || c->timed_out < 0)
        why = "negative count";
    else if (c->successes + c->failures > s->window)
        why = "C1: successes + failures > window";
    else if (c->consecutive_successes > 0 && c->consecutive_failures > 0)
        why = "C2: both runs non-zero";
    else if (c->consecutive_successes > CIRCUIT_RUN_MAX || c->consecutive_failures > CIRCUIT_RUN_MAX)
        why = "C2: run above CIRCUIT_RUN_MAX";
    else if (closed && c->timed_out != 0)
        why = "C3: timed_out non-zero while closed";
    else if (c->timed_out > CIRCUIT_TIMED_OUT_MAX)
        why = "C3: timed_out above CIRCUIT_TIMED_OUT_MAX";
    if (why != NULL && s->bad[0] == '\0')
        snprintf(s->bad, sizeof s->bad, "%s (s=%" PRId64 " f=%" PRId64 " cs=%" PRId64 " cf=%" PRId64
                 " to=%" PRId64 ")", why, c->successes, c->failures, c->consecutive_successes,
                 c->consecutive_failures, c->timed_out);
}

static bool cb_trip(void *arg, const circuit_counts *c)
{
    side *s = arg;
    check_counts(s, c, true);
    bool r = decide_trip(s->p, c);
    event e = {.kind = EV_TRIP, .counts = *c, .answer = r};
    log_event(s, &e);
    return r;
}

static circuit_state cb_probe(void *arg, const circuit_counts *c)
{
    side *s = arg;
    check_counts(s, c, false);
    circuit_state r = decide_probe(s->p, c);
    event e = {.kind = EV_PROBE, .counts = *c, .answer = (int)r};
    log_event(s, &e);
    return r;
}

static int64_t cb_open_for(void *arg, const circuit_open_info *info)
{
    side *s = arg;
    check_counts(s, &info->counts, false);
    int64_t r = decide_open_for(s->p, info);
    event e = {.kind = EV_OPEN_FOR, .counts = info->counts, .gen = info->generation, .reopens = info->reopens,
               .period = r};
    log_event(s, &e);
    return r;
}

/* result codes: 1 success, 2 failure, 3 ignored (the enum's values) */
static circuit_outcome cb_classify(void *arg, void *call_ctx, int result)
{
    side *s = arg;
    event e = {.kind = EV_CLASSIFY, .ctx = (uintptr_t)call_ctx, .result = result, .answer = result};
    log_event(s, &e);
    return (circuit_outcome)result;
}

/* ---- the two implementations behind one set of calls -------------------- */

typedef struct pair_ticket {
    circuit_ticket rt;
    cmodel_ticket  mt;
} pair_ticket;

static bool side_allow(side *s, void *ctx, pair_ticket *t, circuit_rejection *rej)
{
    return s->id == REAL ? circuit_allow(s->b, ctx, &t->rt, rej) : cmodel_allow(s->m, ctx, &t->mt, rej);
}

static bool side_done(side *s, pair_ticket *t, int result)
{
    return s->id == REAL ? circuit_done(&t->rt, result) : cmodel_done(&t->mt, result);
}

static void side_release(side *s, pair_ticket *t)
{
    if (s->id == REAL)
        circuit_release(&t->rt);
    else
        cmodel_release(&t->mt);
}

static circuit_state side_state(side *s)
{
    return s->id == REAL ? circuit_get_state(s->b) : cmodel_get_state(s->m);
}

static void side_stats(side *s, circuit_stats *st)
{
    memset(st, 0, sizeof *st); /* padding too: events are compared field by field anyway */
    if (s->id == REAL)
        circuit_get_stats(s->b, st);
    else
        cmodel_get_stats(s->m, st);
}

static int side_isolate(side *s, void *ctx)
{
    return s->id == REAL ? circuit_isolate(s->b, ctx) : cmodel_isolate(s->m, ctx);
}

static int side_reset(side *s, void *ctx)
{
    return s->id == REAL ? circuit_reset(s->b, ctx) : cmodel_reset(s->m, ctx);
}

#define NEST_CTX_BASE ((uintptr_t)0x7e570000u)

static void cb_observe(void *arg, void *call_ctx, const circuit_transition *t)
{
    side *s = arg;
    event e = {.kind = EV_OBSERVE,
               .ctx = (uintptr_t)call_ctx,
               .from = (int)t->from,
               .to = (int)t->to,
               .gen = t->generation,
               .counts = t->counts,
               .cause = (int)t->cause,
               .period = t->open_for_ns};
    log_event(s, &e);
    if (!s->p->nest)
        return;
    /* O2, OP3, M1: observe calls the breaker; what those calls make is
     * delivered after this observe returns. Every third generation an
     * allow and done/release; generations 5 and 7 mod 13 isolate and reset. */
    event n = {.kind = EV_NESTED, .ctx = NEST_CTX_BASE + (uintptr_t)t->generation};
    if (t->generation % 13 == 5 || t->generation % 13 == 7) {
        n.n_state = (int)side_state(s);
        side_stats(s, &n.n_stats);
        bool iso = t->generation % 13 == 5;
        n.n_settle = iso ? NEST_ISOLATE : NEST_RESET;
        n.n_rc = iso ? side_isolate(s, (void *)n.ctx) : side_reset(s, (void *)n.ctx);
        log_event(s, &n);
        return;
    }
    if (t->generation % 3 != 0)
        return;
    n.n_state = (int)side_state(s);
    side_stats(s, &n.n_stats);
    pair_ticket nt;
    memset(&nt, 0, sizeof nt);
    circuit_rejection rej = {0, -1};
    if (!side_allow(s, (void *)n.ctx, &nt, &rej)) {
        n.n_settle = NEST_REJECTED;
        n.n_rej_state = (int)rej.state;
        n.n_retry = rej.retry_after_ns;
    } else if (t->generation % 2 == 0) {
        n.n_settle = NEST_RELEASED;
        side_release(s, &nt);
    } else {
        int result = t->generation % 9 == 0 ? CIRCUIT_FAILURE : CIRCUIT_SUCCESS;
        n.n_settle = side_done(s, &nt, result) ? NEST_DONE_TRUE : NEST_DONE_FALSE;
    }
    log_event(s, &n);
}

/* ---- one seed's run ------------------------------------------------------ */

enum { TK_FREE = 0, TK_LIVE, TK_SETTLED, TK_REJECTED };

typedef struct slot_entry {
    pair_ticket t;
    int         state;
    int64_t     admitted_at;
    uintptr_t   ctx;
} slot_entry;

/* OP_JUMP (a fixed clock move) is never picked at random */
enum {
    OP_ALLOW,
    OP_DONE,
    OP_RELEASE,
    OP_RELEASE_DEAD,
    OP_STATE,
    OP_CLOCK,
    OP_ISOLATE,
    OP_RESET,
    OP_STATS,
    OP__COUNT,
    OP_JUMP = OP__COUNT
};

typedef struct profile {
    const char *name;
    int         w[OP__COUNT]; /* per mille (roughly) */
    bool        small_steps;  /* clock moves only by 0, 1 or a little */
} profile;

/* isolate and reset 0.5 % each; while isolated, reset is weighted
 * RESET_WHILE_ISOLATED times more so that isolated spells stay short */
static const profile profiles[] = {
    {"mixed", {350, 250, 80, 30, 30, 250, 5, 5, 10}, false},
    {"fill", {700, 80, 40, 20, 10, 140, 5, 5, 10}, true},
    {"drain", {100, 550, 150, 30, 10, 150, 5, 5, 10}, false},
    {"time", {250, 150, 50, 20, 20, 500, 5, 5, 10}, false},
};
#define RESET_WHILE_ISOLATED 8

/* rate runs (--rates): S2 and L6 under real traffic:
 * every window of {1, 64, 65536} with failure fractions 0.1 %, 1 % and 50 %
 * (every count compared after every op, as always) */
static const struct {
    int window, succ_w, fail_w;
} rate_runs[] = {{1, 999, 1},   {64, 999, 1},   {65536, 999, 1}, {1, 99, 1},  {64, 99, 1},
                 {65536, 99, 1}, {1, 1, 1},      {64, 1, 1},      {65536, 1, 1}};
#define N_RATE_RUNS ((int)(sizeof rate_runs / sizeof rate_runs[0]))
/* mostly allow and done, a few clock moves and operator calls */
static const profile rate_profile = {"rate", {480, 470, 10, 5, 5, 25, 2, 2, 1}, true};

/* window runs: allow and done at once, to fill a 65536-result window; no
 * operator call (it would empty the window) */
static const profile churn = {"churn", {460, 460, 20, 10, 10, 40, 0, 0, 10}, true};

#define HIST 12
#define HINTS 8
#define RECENT 64

typedef struct run {
    uint64_t       seed, rng;
    circuit_config cfg;
    params         p;
    bool           sat;      /* saturation run */
    bool           long_win; /* window run */
    int            rate;     /* rate run (--rates): 1 + index of rate_runs, or 0 */
    int64_t        now;
    side           sd[2];
    slot_entry    *pool;
    int            pool_cap, live;
    const profile *prof;
    int            succ_w, fail_w, ign_w;
    int64_t        open_hint[HINTS]; /* candidate opened_at + period */
    int64_t        last_period;      /* the latest open period chosen */
    int            n_hints;
    int64_t        recent[RECENT]; /* recent admission times */
    int            n_recent;
    char           hist[HIST][260];
    long           op_index, ops;
    char           what[200];
    int            sat_phase, sat_cycles_at_max;
    long           sat_rej_half;
    /* coverage */
    long           n_trans[5][5], n_rej_open, n_rej_half, n_rej_iso, n_late, n_boundary_moves, n_retry1,
        n_full_trips;
    long           n_isolate[2], n_reset[2]; /* [0] returned 0, [1] EALREADY */
    long           n_reset_from[5];          /* operator transitions to closed, by from */
    long           n_silent, n_evict_ask; /* S2: successes that asked nothing; asks with failures = 0 */
    long           n_periods_varied;      /* open periods != config.open_for_ns */
    int64_t        max_timed_out, max_window, max_reopens;
} run;

static int64_t model_clock(void *arg)
{
    return *(const int64_t *)arg;
}

static bool trace_on;
#define OPS_PER_SEED 200000L
static long g_ops_per_seed = OPS_PER_SEED;

static void describe(run *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->what, sizeof r->what, fmt, ap);
    va_end(ap);
    snprintf(r->hist[r->op_index % HIST], sizeof r->hist[0], "#%ld t=%" PRId64 " %s", r->op_index, r->now,
             r->what);
    if (trace_on)
        printf("  #%ld t=%" PRId64 " %s\n", r->op_index, r->now, r->what);
}

static void fmt_counts(char *buf, size_t len, const circuit_counts *c)
{
    snprintf(buf, len, "{s=%" PRId64 " f=%" PRId64 " cs=%" PRId64 " cf=%" PRId64 " to=%" PRId64 "}",
             c->successes, c->failures, c->consecutive_successes, c->consecutive_failures, c->timed_out);
}

static const char *cause_name(int c)
{
    switch (c) {
    case CIRCUIT_CAUSE_POLICY: return "policy";
    case CIRCUIT_CAUSE_TIMER: return "timer";
    case CIRCUIT_CAUSE_OPERATOR: return "operator";
    }
    return "invalid";
}

static void fmt_stats(char *buf, size_t len, const circuit_stats *st)
{
    char c[160];
    fmt_counts(c, sizeof c, &st->counts);
    snprintf(buf, len,
             "{%s gen=%" PRIu64 " counts=%s probes=%" PRId64 " retry_after=%" PRId64 " admitted=%" PRIu64
             " rejected=%" PRIu64 " successes=%" PRIu64 " failures=%" PRIu64 " ignored=%" PRIu64 " late=%" PRIu64
             " released=%" PRIu64 " timed_out=%" PRIu64 " transitions=%" PRIu64 "}",
             circuit_state_name(st->state), st->generation, c, st->probes_in_flight, st->retry_after_ns,
             st->admitted, st->rejected, st->successes, st->failures, st->ignored, st->late, st->released,
             st->timed_out, st->transitions);
}

/* The first field in which two stats differ, or NULL. */
static const char *stats_diff(const circuit_stats *a, const circuit_stats *b)
{
#define STAT_FIELD(f)      \
    if (a->f != b->f)      \
        return #f;
    STAT_FIELD(state)
    STAT_FIELD(generation)
    STAT_FIELD(counts.successes)
    STAT_FIELD(counts.failures)
    STAT_FIELD(counts.consecutive_successes)
    STAT_FIELD(counts.consecutive_failures)
    STAT_FIELD(counts.timed_out)
    STAT_FIELD(probes_in_flight)
    STAT_FIELD(retry_after_ns)
    STAT_FIELD(admitted)
    STAT_FIELD(rejected)
    STAT_FIELD(successes)
    STAT_FIELD(failures)
    STAT_FIELD(ignored)
    STAT_FIELD(late)
    STAT_FIELD(released)
    STAT_FIELD(timed_out)
    STAT_FIELD(transitions)
#undef STAT_FIELD
    return NULL;
}

static void fmt_event(char *buf, size_t len, const event *e)
{
    char c[160];
    fmt_counts(c, sizeof c, &e->counts);
    switch (e->kind) {
    case EV_TRIP: snprintf(buf, len, "trip%s -> %s", c, e->answer ? "true" : "false"); break;
    case EV_PROBE:
        snprintf(buf, len, "probe%s -> %s", c, circuit_state_name((circuit_state)e->answer));
        break;
    case EV_OPEN_FOR:
        snprintf(buf, len, "open_for{counts=%s gen=%" PRIu64 " reopens=%" PRId64 "} -> %" PRId64, c, e->gen,
                 e->reopens, e->period);
        break;
    case EV_CLASSIFY: snprintf(buf, len, "classify(ctx=%#" PRIxPTR ", result=%d)", e->ctx, e->result); break;
    case EV_OBSERVE:
        snprintf(buf, len, "observe(ctx=%#" PRIxPTR ") %s->%s gen=%" PRIu64 " counts=%s cause=%s open_for_ns=%" PRId64,
                 e->ctx, circuit_state_name((circuit_state)e->from), circuit_state_name((circuit_state)e->to),
                 e->gen, c, cause_name(e->cause), e->period);
        break;
    case EV_NESTED: {
        char st[400];
        fmt_stats(st, sizeof st, &e->n_stats);
        if (e->n_settle == NEST_ISOLATE || e->n_settle == NEST_RESET) {
            snprintf(buf, len, "nested(ctx=%#" PRIxPTR "): get_state=%s, %s -> %d; stats before %s", e->ctx,
                     circuit_state_name((circuit_state)e->n_state),
                     e->n_settle == NEST_ISOLATE ? "isolate" : "reset", e->n_rc, st);
            break;
        }
        snprintf(buf, len, "nested(ctx=%#" PRIxPTR "): get_state=%s, %s rej={%s,%" PRId64 "}; stats before %s",
                 e->ctx, circuit_state_name((circuit_state)e->n_state),
                 e->n_settle == NEST_REJECTED    ? "rejected"
                 : e->n_settle == NEST_DONE_TRUE  ? "admitted, done -> true"
                 : e->n_settle == NEST_DONE_FALSE ? "admitted, done -> false"
                                                  : "admitted, released",
                 e->n_settle == NEST_REJECTED ? circuit_state_name((circuit_state)e->n_rej_state) : "-",
                 e->n_settle == NEST_REJECTED ? e->n_retry : 0, st);
        break;
    }
    }
}

static bool event_eq(const event *a, const event *b)
{
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case EV_TRIP:
    case EV_PROBE: return a->answer == b->answer && memcmp(&a->counts, &b->counts, sizeof a->counts) == 0;
    case EV_OPEN_FOR:
        return a->gen == b->gen && a->reopens == b->reopens && a->period == b->period &&
               memcmp(&a->counts, &b->counts, sizeof a->counts) == 0;
    case EV_CLASSIFY: return a->ctx == b->ctx && a->result == b->result;
    case EV_OBSERVE:
        return a->ctx == b->ctx && a->from == b->from && a->to == b->to && a->gen == b->gen &&
               memcmp(&a->counts, &b->counts, sizeof a->counts) == 0 && a->cause == b->cause &&
               a->period == b->period;
    case EV_NESTED:
        return a->ctx == b->ctx && a->n_state == b->n_state && a->n_settle == b->n_settle &&
               stats_diff(&a->n_stats, &b->n_stats) == NULL &&
               (a->n_settle != NEST_REJECTED || (a->n_rej_state == b->n_rej_state && a->n_retry == b->n_retry)) &&
               ((a->n_settle != NEST_ISOLATE && a->n_settle != NEST_RESET) || a->n_rc == b->n_rc);
    }
    return false;
}

static void print_config(const run *r)
{
    const params *p = &r->p;
    fprintf(stderr,
            "  config: window=%d probes=%d open_for_ns=%" PRId64 " probe_timeout_ns=%" PRId64 "%s\n"
            "  trip:  %s (k=%" PRId64 " j=%" PRId64 " pct=%" PRId64 " vol=%" PRId64 ")\n"
            "  probe: %s (m=%" PRId64 " f=%" PRId64 " tmo=%" PRId64 "); nested calls in observe: %s\n"
            "  open_for: %s (base=%" PRId64 " salt=%#" PRIx64 ")\n",
            r->cfg.window, r->cfg.probes, r->cfg.open_for_ns, r->cfg.probe_timeout_ns,
            r->sat ? " (saturation run)" : r->long_win ? " (window run)" : "", trip_names[p->trip_kind], p->k, p->j, p->pct, p->vol,
            probe_names[p->probe_kind], p->m, p->f, p->tmo, p->nest ? "yes" : "no", open_for_names[p->of_kind],
            p->of_base, p->of_salt);
}

static void mismatch(run *r, const char *fmt, ...)
{
    fprintf(stderr, "differential: MISMATCH seed=%" PRIu64 " op=%ld (of %ld) now=%" PRId64 "\n", r->seed,
            r->op_index, r->ops, r->now);
    print_config(r);
    fprintf(stderr, "  op: %s\n  ", r->what);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\n  operations up to it:\n", stderr);
    long first = r->op_index - HIST + 1 < 0 ? 0 : r->op_index - HIST + 1;
    for (long i = first; i <= r->op_index; i++)
        fprintf(stderr, "    %s\n", r->hist[i % HIST]);
    fprintf(stderr, "  replay: differential --ops %ld %" PRIu64 " (CIRCUIT_DIFF_TRACE=1 prints every op)\n",
            g_ops_per_seed, r->seed);
}

/* Compare the events both sides logged since (r0, m0). */
static bool compare_events(run *r, size_t r0, size_t m0)
{
    side *re = &r->sd[REAL], *mo = &r->sd[MODEL];
    size_t nr = re->n - r0, nm = mo->n - m0;
    size_t n = nr < nm ? nr : nm;
    for (size_t i = 0; i <= n; i++) {
        const event *ge = i < nr ? &re->ev[r0 + i] : NULL;
        const event *ee = i < nm ? &mo->ev[m0 + i] : NULL;
        if (ge == NULL && ee == NULL)
            break;
        if (ge != NULL && ee != NULL && event_eq(ge, ee))
            continue;
        char eb[1024] = "(none)", gb[1024] = "(none)";
        if (ee)
            fmt_event(eb, sizeof eb, ee);
        if (ge)
            fmt_event(gb, sizeof gb, ge);
        char all[13000] = "";
        for (int sdi = 0; sdi < 2; sdi++) {
            const side *s = &r->sd[sdi];
            size_t from = sdi == REAL ? r0 : m0;
            size_t len = strlen(all);
            snprintf(all + len, sizeof all - len, "\n  all events of this op, %s:", side_names[sdi]);
            for (size_t k = from; k < s->n && k < from + 12; k++) {
                char b[1024];
                fmt_event(b, sizeof b, &s->ev[k]);
                len = strlen(all);
                snprintf(all + len, sizeof all - len, "\n    %s", b);
            }
        }
        mismatch(r, "callback #%zu of this op: expected (model) %s\n  got (real) %s%s", i, eb, gb, all);
        return false;
    }
    for (int sdi = 0; sdi < 2; sdi++) {
        if (r->sd[sdi].bad[0] != '\0') {
            mismatch(r, "count invariant broken in a policy call (%s): %s", side_names[sdi], r->sd[sdi].bad);
            return false;
        }
    }
    return true;
}

/* The test clock stays at or below 2^62: time near INT64_MAX (292 years of
 * CLOCK_MONOTONIC) is out of scope, but configs up to INT64_MAX are not. */
#define CLOCK_CAP (INT64_C(1) << 62)

/* a + b for a, b >= 0, stopping at CLOCK_CAP */
static int64_t tadd(int64_t a, int64_t b)
{
    return b >= CLOCK_CAP - a ? CLOCK_CAP : a + b;
}

static void add_hint(run *r, int64_t t)
{
    r->open_hint[r->n_hints % HINTS] = t;
    r->n_hints++;
}

static void set_now(run *r, int64_t t)
{
    r->now = t;
    circuit_test_clock_set(t);
}

/* Look at the transitions of this op (from the model's log, equal to the
 * real one's by now) for clock boundary hints and coverage. */
static void note_transitions(run *r, size_t m0)
{
    const side *mo = &r->sd[MODEL];
    for (size_t i = m0; i < mo->n; i++) {
        const event *e = &mo->ev[i];
        if (e->kind == EV_PROBE && e->counts.timed_out > r->max_timed_out)
            r->max_timed_out = e->counts.timed_out;
        if ((e->kind == EV_PROBE || e->kind == EV_TRIP) &&
            e->counts.successes + e->counts.failures > r->max_window)
            r->max_window = e->counts.successes + e->counts.failures;
        if (e->kind == EV_TRIP && e->answer && r->cfg.window == CIRCUIT_MAX_COUNT &&
            e->counts.successes + e->counts.failures == CIRCUIT_MAX_COUNT)
            r->n_full_trips++;
        if (e->kind == EV_TRIP && e->counts.failures == 0)
            r->n_evict_ask++; /* S2 (0.3): must stay 0, trip follows a failure */
        if (e->kind == EV_OPEN_FOR && e->reopens > r->max_reopens)
            r->max_reopens = e->reopens;
        if (e->kind == EV_OBSERVE) {
            r->n_trans[e->from][e->to]++;
            if (e->cause == CIRCUIT_CAUSE_OPERATOR && e->to == CIRCUIT_CLOSED)
                r->n_reset_from[e->from]++;
            if (e->to == CIRCUIT_OPEN) {
                /* a reopen at a probe's due time opened before now: the
                 * rejections' retry_after give the exact boundary then */
                add_hint(r, tadd(r->now, e->period));
                r->last_period = e->period;
                r->n_periods_varied += e->period != r->cfg.open_for_ns;
            }
        }
    }
}

static int pick_result(run *r)
{
    int64_t x = rnd_below(&r->rng, r->succ_w + r->fail_w + r->ign_w);
    if (x < r->succ_w)
        return CIRCUIT_SUCCESS;
    return x < r->succ_w + r->fail_w ? CIRCUIT_FAILURE : CIRCUIT_IGNORED;
}

/* A random pool entry in one of the given states, or -1. */
static int pick_entry(run *r, int s1, int s2)
{
    int start = (int)rnd_below(&r->rng, r->pool_cap);
    for (int k = 0; k < r->pool_cap; k++) {
        int i = (start + k) % r->pool_cap;
        if (r->pool[i].state == s1 || r->pool[i].state == s2)
            return i;
    }
    return -1;
}

static bool op_allow(run *r)
{
    int i = pick_entry(r, TK_FREE, TK_SETTLED);
    if (i < 0)
        i = pick_entry(r, TK_REJECTED, TK_REJECTED);
    if (i < 0) { /* every entry live */
        describe(r, "allow skipped: pool full");
        return true;
    }
    slot_entry *e = &r->pool[i];
    uintptr_t ctx = (uintptr_t)(r->op_index + 1) * 16u;
    describe(r, "allow(ctx=%#" PRIxPTR ") -> ticket %d", ctx, i);
    circuit_rejection rr = {0, -77}, mr = {0, -77};
    bool ga = circuit_allow(r->sd[REAL].b, (void *)ctx, &e->t.rt, &rr);
    bool ea = cmodel_allow(r->sd[MODEL].m, (void *)ctx, &e->t.mt, &mr);
    if (ga != ea) {
        char eb[64], gb[64];
        snprintf(eb, sizeof eb, ea ? "true" : "false {%s, %" PRId64 "}", circuit_state_name(mr.state),
                 mr.retry_after_ns);
        snprintf(gb, sizeof gb, ga ? "true" : "false {%s, %" PRId64 "}", circuit_state_name(rr.state),
                 rr.retry_after_ns);
        mismatch(r, "allow returned: expected (model) %s, got (real) %s", eb, gb);
        return false;
    }
    if (!ea && (rr.state != mr.state || rr.retry_after_ns != mr.retry_after_ns)) {
        mismatch(r, "rejection: expected (model) {%s, %" PRId64 "}, got (real) {%s, %" PRId64 "}",
                 circuit_state_name(mr.state), mr.retry_after_ns, circuit_state_name(rr.state),
                 rr.retry_after_ns);
        return false;
    }
    e->ctx = ctx;
    if (ea) {
        e->state = TK_LIVE;
        e->admitted_at = r->now;
        r->live++;
        r->recent[r->n_recent % RECENT] = r->now;
        r->n_recent++;
    } else {
        e->state = TK_REJECTED;
        if (mr.state == CIRCUIT_OPEN) {
            r->n_rej_open++;
            r->n_retry1 += mr.retry_after_ns == 1;
            add_hint(r, tadd(r->now, mr.retry_after_ns));
        } else if (mr.state == CIRCUIT_ISOLATED) {
            r->n_rej_iso++;
        } else {
            r->n_rej_half++;
        }
    }
    return true;
}

static bool op_done(run *r, int i, int result)
{
    if (i < 0)
        i = pick_entry(r, TK_LIVE, TK_LIVE);
    if (i < 0) {
        describe(r, "done skipped: no live ticket");
        return true;
    }
    slot_entry *e = &r->pool[i];
    if (result == 0)
        result = pick_result(r);
    describe(r, "done(ticket %d ctx=%#" PRIxPTR " admitted t=%" PRId64 ", %s)", i, e->ctx, e->admitted_at,
             circuit_outcome_name((circuit_outcome)result));
    size_t m0 = r->sd[MODEL].n;
    bool g = circuit_done(&e->t.rt, result);
    bool x = cmodel_done(&e->t.mt, result);
    if (x && result == CIRCUIT_SUCCESS && r->sd[MODEL].n == m0 + 1 &&
        cmodel_get_state(r->sd[MODEL].m) == CIRCUIT_CLOSED)
        r->n_silent++; /* S2: counted in a failure-free window, nothing asked */
    e->state = TK_SETTLED;
    r->live--;
    if (g != x) {
        mismatch(r, "done returned: expected (model) %s, got (real) %s", x ? "true" : "false",
                 g ? "true" : "false");
        return false;
    }
    if (!x)
        r->n_late++;
    return true;
}

static bool op_release(run *r, bool dead, int i)
{
    if (i < 0)
        i = dead ? pick_entry(r, TK_SETTLED, TK_REJECTED) : pick_entry(r, TK_LIVE, TK_LIVE);
    if (i < 0) {
        if (!dead) {
            describe(r, "release skipped: no live ticket");
            return true;
        }
        describe(r, "release(blank ticket)");
        pair_ticket bt = {CIRCUIT_TICKET_INIT, {0}};
        circuit_release(&bt.rt);
        cmodel_release(&bt.mt);
        return true;
    }
    slot_entry *e = &r->pool[i];
    describe(r, "release(ticket %d ctx=%#" PRIxPTR " %s, admitted t=%" PRId64 ")", i, e->ctx,
             e->state == TK_LIVE ? "live" : e->state == TK_SETTLED ? "settled" : "rejected", e->admitted_at);
    circuit_release(&e->t.rt);
    cmodel_release(&e->t.mt);
    if (e->state == TK_LIVE) {
        e->state = TK_SETTLED;
        r->live--;
    }
    return true;
}

/* isolate or reset on both sides (OP1, OP2): same return */
static bool op_operator(run *r, bool iso)
{
    uintptr_t ctx = (uintptr_t)(r->op_index + 1) * 16u + 8u;
    describe(r, "%s(ctx=%#" PRIxPTR ")", iso ? "isolate" : "reset", ctx);
    int g = iso ? circuit_isolate(r->sd[REAL].b, (void *)ctx) : circuit_reset(r->sd[REAL].b, (void *)ctx);
    int x = iso ? cmodel_isolate(r->sd[MODEL].m, (void *)ctx) : cmodel_reset(r->sd[MODEL].m, (void *)ctx);
    if (g != x) {
        mismatch(r, "%s returned: expected (model) %d, got (real) %d", iso ? "isolate" : "reset", x, g);
        return false;
    }
    if (x != 0 && x != EALREADY) {
        mismatch(r, "%s returned %d: neither 0 nor EALREADY", iso ? "isolate" : "reset", x);
        return false;
    }
    (iso ? r->n_isolate : r->n_reset)[x != 0]++;
    return true;
}

static bool op_clock(run *r)
{
    int64_t of = r->last_period > 0 ? r->last_period : r->cfg.open_for_ns, pt = r->cfg.probe_timeout_ns;
    int64_t target = r->now;
    const char *how;
    int kind = (int)rnd_below(&r->rng, 100);
    if (r->prof->small_steps)
        kind = kind < 40 ? 0 : kind < 80 ? 10 : 20;
    if (kind < 10) {
        how = "+0";
    } else if (kind < 20) {
        how = "+1";
        target = tadd(r->now, 1);
    } else if (kind < 30) {
        how = "+small";
        int64_t lim = (of < pt ? of : pt) / 4;
        target = tadd(r->now, lim > 0 ? rnd_below(&r->rng, lim) : 0);
    } else if (kind < 45) {
        how = "+rand(2*open_for)";
        target = tadd(r->now, rnd_below(&r->rng, tadd(of, of)));
    } else if (kind < 55) {
        how = "+rand(2*probe_timeout)";
        target = tadd(r->now, rnd_below(&r->rng, tadd(pt, pt)));
    } else if (kind < 72) {
        how = "to open boundary (-1 or 0)";
        if (r->n_hints > 0) {
            int n = r->n_hints < HINTS ? r->n_hints : HINTS;
            target = r->open_hint[rnd_below(&r->rng, n)] - rnd_below(&r->rng, 2);
        }
    } else if (kind < 92) {
        how = "to probe due (-1 or 0)";
        if (r->n_recent > 0) {
            int n = r->n_recent < RECENT ? r->n_recent : RECENT;
            target = tadd(r->recent[rnd_below(&r->rng, n)], pt) - rnd_below(&r->rng, 2);
        }
    } else {
        how = "to due + open_for (-1 or 0)";
        if (r->n_recent > 0) {
            int n = r->n_recent < RECENT ? r->n_recent : RECENT;
            target = tadd(tadd(r->recent[rnd_below(&r->rng, n)], pt), of) - rnd_below(&r->rng, 2);
        }
    }
    if (target < r->now) { /* time never goes back */
        how = "+0 (that boundary has passed)";
        target = r->now;
    } else if (kind >= 55 && target > r->now) {
        r->n_boundary_moves++;
    }
    describe(r, "clock %s: %" PRId64 " -> %" PRId64, how, r->now, target);
    set_now(r, target);
    return true;
}

/* One operation on both sides, then the comparisons. `arg`: the ticket
 * index for done/release (-1: random), the clock move for OP_JUMP. */
static bool step(run *r, int op, int64_t arg, int result)
{
    side *re = &r->sd[REAL], *mo = &r->sd[MODEL];
    size_t r0 = re->n, m0 = mo->n;
    bool ok = true;
    if ((op == OP_DONE || op == OP_RELEASE) && r->live == 0)
        op = OP_ALLOW; /* nothing to settle */
    else if (op == OP_ALLOW && r->live == r->pool_cap)
        op = OP_DONE; /* no room for another ticket */
    switch (op) {
    case OP_ALLOW: ok = op_allow(r); break;
    case OP_DONE: ok = op_done(r, (int)arg, result); break;
    case OP_RELEASE: ok = op_release(r, false, (int)arg); break;
    case OP_RELEASE_DEAD: ok = op_release(r, true, -1); break;
    case OP_STATE: describe(r, "get_state"); break; /* compared below after every op */
    case OP_STATS: describe(r, "get_stats"); break; /* compared below after every op */
    case OP_CLOCK: ok = op_clock(r); break;
    case OP_ISOLATE: ok = op_operator(r, true); break;
    case OP_RESET: ok = op_operator(r, false); break;
    default:
        describe(r, "clock +%" PRId64 ": %" PRId64 " -> %" PRId64, arg, r->now, tadd(r->now, arg));
        set_now(r, tadd(r->now, arg));
        break;
    }
    if (!ok || !compare_events(r, r0, m0))
        return false;
    note_transitions(r, m0);
    /* S5: get_state is pure, calls nothing, and agrees */
    circuit_state gs = circuit_get_state(re->b), es = cmodel_get_state(mo->m);
    if (gs != es) {
        mismatch(r, "get_state after the op: expected (model) %s, got (real) %s", circuit_state_name(es),
                 circuit_state_name(gs));
        return false;
    }
    /* M1: every field exact in a sequential run; the totals add up */
    circuit_stats gst, est;
    side_stats(re, &gst);
    side_stats(mo, &est);
    const char *field = stats_diff(&gst, &est);
    if (field != NULL) {
        char eb[400], gb[400];
        fmt_stats(eb, sizeof eb, &est);
        fmt_stats(gb, sizeof gb, &gst);
        mismatch(r, "get_stats after the op differs in %s:\n  expected (model) %s\n  got (real)      %s", field, eb,
                 gb);
        return false;
    }
    for (int sdi = 0; sdi < 2; sdi++) {
        const circuit_stats *st = sdi == REAL ? &gst : &est;
        uint64_t settled = st->successes + st->failures + st->ignored + st->late + st->released;
        if (st->admitted != settled + (uint64_t)r->live) {
            char b[400];
            fmt_stats(b, sizeof b, st);
            mismatch(r, "M1 identity broken (%s): admitted %" PRIu64 " != settled %" PRIu64 " + live %d: %s",
                     side_names[sdi], st->admitted, settled, r->live, b);
            return false;
        }
    }
    if (re->n - r0 != mo->n - m0) {
        mismatch(r, "get_state or get_stats called a callback");
        return false;
    }
    /* everything of this op is compared: start the logs afresh */
    re->n = mo->n = 0;
    r->op_index++;
    return true;
}

static void new_phase(run *r)
{
    r->prof = &profiles[rnd_below(&r->rng, (int64_t)(sizeof profiles / sizeof profiles[0]))];
    r->succ_w = 20 + (int)rnd_below(&r->rng, 61);
    r->fail_w = 10 + (int)rnd_below(&r->rng, 61);
    r->ign_w = (int)rnd_below(&r->rng, 21);
}

static int pick_op(run *r)
{
    int w[OP__COUNT];
    memcpy(w, r->prof->w, sizeof w);
    if (cmodel_get_state(r->sd[MODEL].m) == CIRCUIT_ISOLATED)
        w[OP_RESET] *= RESET_WHILE_ISOLATED;
    int total = 0;
    for (int k = 0; k < OP__COUNT; k++)
        total += w[k];
    int64_t x = rnd_below(&r->rng, total);
    for (int k = 0; k < OP__COUNT; k++) {
        if (x < w[k])
            return k;
        x -= w[k];
    }
    return OP_CLOCK;
}

/* Saturation run (C3): trip on the first failure and reach half-open, with
 * a probe policy that never decides; then, again and again, take every probe
 * slot (and see the HALF_OPEN rejection), let all of them time out at once,
 * and settle them late (their results still count: P2), until timed_out has
 * reached CIRCUIT_TIMED_OUT_MAX and stayed there for a whole cycle; then go
 * on at random for a while. */
static bool sat_step(run *r)
{
    circuit_state s = cmodel_get_state(r->sd[MODEL].m);
    switch (r->sat_phase) {
    case 0:
        if (s == CIRCUIT_CLOSED)
            return r->live > 0 ? step(r, OP_DONE, -1, CIRCUIT_FAILURE) : step(r, OP_ALLOW, 0, 0);
        if (s == CIRCUIT_OPEN) /* the period may come from open_for */
            return step(r, OP_JUMP, r->last_period, 0);
        r->succ_w = 50;
        r->fail_w = 40;
        r->ign_w = 10;
        r->sat_phase = 1;
        r->sat_rej_half = r->n_rej_half;
        return step(r, OP_ALLOW, 0, 0);
    case 1: /* fill every slot, until one rejection */
        if (r->n_rej_half > r->sat_rej_half)
            r->sat_phase = 2;
        return step(r, OP_ALLOW, 0, 0);
    case 2:
        r->sat_phase = 3;
        return step(r, OP_JUMP, r->cfg.probe_timeout_ns, 0);
    case 3:
        r->sat_phase = 4;
        return step(r, OP_ALLOW, 0, 0); /* times every probe out, in order */
    case 4: /* settle them all, late */
        if (r->live > 0)
            return step(r, r->live % 3 ? OP_DONE : OP_RELEASE, -1, 0);
        if (r->max_timed_out == CIRCUIT_TIMED_OUT_MAX)
            r->sat_cycles_at_max++;
        if (r->sat_cycles_at_max < 2) {
            r->sat_phase = 1;
            r->sat_rej_half = r->n_rej_half;
            return step(r, OP_ALLOW, 0, 0);
        }
        r->sat_phase = 5;
        if (r->ops < r->op_index + 2000)
            r->ops = r->op_index + 2000;
        new_phase(r);
        return step(r, OP_STATE, 0, 0);
    default: return step(r, pick_op(r), -1, 0);
    }
}

static const int probes_tab[] = {1, 2, 63, 64, 65, 1000};
/* the large values: no overflow anywhere (opened_at + open_for_ns exceeds
 * INT64_MAX; "never half-open", "never time out" configs) */
static const int64_t open_for_tab[] = {1, 2, 10, 1000, 1000000, INT64_C(3000000000), INT64_C(1000),
                                       INT64_MAX, INT64_C(1) << 61};
static int g_rate_run; /* --rates: the rate run being made (1-based), else 0 */

static const int64_t timeout_tab[] = {1,    3,    10,      999, 1000, 1001, 2000000, INT64_C(5000000000),
                                      1000, 5000, INT64_MAX, INT64_C(1) << 61};

#define SAT_PROBES 1000

static void setup(run *r, uint64_t seed)
{
    memset(r, 0, sizeof *r);
    r->seed = seed;
    r->rng = seed * UINT64_C(0x2545f4914f6cdd1d) + 7;
    r->sat = seed % 20 == 0;
    r->long_win = seed % 20 == 10;
    r->cfg.probes = probes_tab[seed % 6];
    switch (seed % 5) {
    case 0: r->cfg.window = CIRCUIT_MAX_COUNT; break;
    case 1: r->cfg.window = 1; break;
    case 2: r->cfg.window = 64; break;
    default: r->cfg.window = 1 + (int)rnd_below(&r->rng, 64); break;
    }
    /* the large values 1 time in 8 */
    r->cfg.open_for_ns = open_for_tab[rnd_below(&r->rng, 8) == 0 ? 7 + rnd_below(&r->rng, 2) : rnd_below(&r->rng, 7)];
    r->cfg.probe_timeout_ns =
        timeout_tab[rnd_below(&r->rng, 8) == 0 ? 10 + rnd_below(&r->rng, 2) : rnd_below(&r->rng, 10)];

    params *p = &r->p;
    int64_t wcap = r->cfg.window < 8 ? r->cfg.window : 8;
    p->trip_kind = (int)rnd_below(&r->rng, 5);
    p->k = 1 + rnd_below(&r->rng, wcap);
    p->j = 1 + rnd_below(&r->rng, 6);
    p->pct = 20 + rnd_below(&r->rng, 60);
    p->vol = 1 + rnd_below(&r->rng, r->cfg.window < 20 ? r->cfg.window : 20);
    p->probe_kind = (int)rnd_below(&r->rng, 5);
    p->m = 1 + rnd_below(&r->rng, 4);
    if (p->probe_kind == 3)
        p->m = 1 + rnd_below(&r->rng, 2 * (int64_t)r->cfg.probes + 4);
    p->f = 1 + rnd_below(&r->rng, 3);
    p->tmo = 1 + rnd_below(&r->rng, 4);
    p->nest = (int)rnd_below(&r->rng, 3) == 0;
    /* the open-period function: none in 2 seeds of 5 */
    int64_t ofk = rnd_below(&r->rng, 5);
    p->of_kind = ofk < 2 ? 0 : (int)ofk - 1;
    p->of_base = r->cfg.open_for_ns < (INT64_C(1) << 40) ? r->cfg.open_for_ns : INT64_C(1) << 40;
    p->of_salt = rnd(&r->rng);
    r->ops = g_ops_per_seed;

    if (r->long_win) {
        r->cfg.window = CIRCUIT_MAX_COUNT;
        p->trip_kind = 0;
        p->k = CIRCUIT_MAX_COUNT / 2 + 40 + rnd_below(&r->rng, 60);
    }
    if (g_rate_run > 0) {
        r->rate = g_rate_run;
        r->sat = r->long_win = false;
        r->cfg.window = rate_runs[g_rate_run - 1].window;
        /* trips now and then: a failure count about 1.5 times the expected one */
        p->trip_kind = 2;
        int64_t expect = (int64_t)r->cfg.window * rate_runs[g_rate_run - 1].fail_w /
                         (rate_runs[g_rate_run - 1].fail_w + rate_runs[g_rate_run - 1].succ_w);
        p->k = 1 + expect + expect / 2 + rnd_below(&r->rng, 3);
        p->j = 2 + rnd_below(&r->rng, 4);
    }
    if (r->sat) {
        r->cfg.probes = SAT_PROBES;
        r->cfg.open_for_ns = 1000;
        r->cfg.probe_timeout_ns = 5000;
        p->trip_kind = 0;
        p->k = 1;
        p->probe_kind = 5;
        p->of_kind = 0; /* sat_step jumps by the config period */
    }
    r->pool_cap = r->cfg.probes + 40 < 48 ? 48 : r->cfg.probes + 40;
}

/* K1: policy.check is asked once by each; its EINVAL joins CFG2's message
 * after the invalid fields; 0 accepts. */
static int k1_calls;
static int k1_check(void *arg, const circuit_config *cfg, char *errbuf, size_t errbuf_len)
{
    (void)arg;
    k1_calls++;
    if (cfg->probes == 3) /* the refusal is keyed on a config value */
        return 0;
    snprintf(errbuf, errbuf_len, "k1-complaint about window %d", cfg->window);
    return EINVAL;
}

static int check_policy_check(side *s)
{
    static const struct {
        int window, probes;
        int rc;
    } cases[] = {{5, 2, EINVAL}, {0, 2, EINVAL}, {5, 3, 0}};
    int failures = 0;
    int64_t t0 = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        circuit_spec spec = {.config = {cases[i].window, cases[i].probes, 10, 10},
                             .policy = {cb_trip, cb_probe, s, k1_check},
                             .classify = cb_classify,
                             .classify_arg = s,
                             .observe = cb_observe,
                             .observe_arg = s};
        char gb[512] = "", eb[512] = "";
        circuit_breaker *b = NULL;
        cmodel *m = NULL;
        k1_calls = 0;
        int g = circuit_new(&b, &spec, gb, sizeof gb);
        int real_calls = k1_calls;
        int e = cmodel_new(&m, &spec, model_clock, &t0, eb, sizeof eb);
        char want[64];
        snprintf(want, sizeof want, "k1-complaint about window %d", cases[i].window);
        const char *why = NULL;
        if (g != e || e != cases[i].rc)
            why = "return value";
        else if (real_calls != 1)
            why = "policy.check not asked exactly once";
        else if (g == EINVAL && strstr(gb, want) == NULL)
            why = "the message lacks the policy's complaint";
        else if (g == EINVAL && cases[i].window == 0 &&
                 (strstr(gb, "window") == NULL || strstr(gb, "window") > strstr(gb, want)))
            why = "the message does not name the invalid field before the complaint";
        if (why != NULL) {
            fprintf(stderr,
                    "differential: MISMATCH K1 check %zu {window=%d probes=%d}: %s: expected (model) %d, got "
                    "(real) %d, check asked %d times; real message \"%s\", model message \"%s\"\n",
                    i, cases[i].window, cases[i].probes, why, e, g, real_calls, gb, eb);
            failures++;
        }
        circuit_free(g == 0 ? b : NULL);
        cmodel_free(e == 0 ? m : NULL);
    }
    return failures;
}

/* CFG1, CFG2: both accept and reject the same configs, and name every
 * invalid field. */
static int check_configs(void)
{
    static const struct {
        int     window, probes;
        int64_t open_for, timeout;
    } cases[] = {
        {1, 1, 1, 1},
        {CIRCUIT_MAX_COUNT, CIRCUIT_MAX_COUNT, INT64_MAX, INT64_MAX},
        {0, 1, 1, 1},
        {1, 0, 1, 1},
        {1, 1, 0, 1},
        {1, 1, 1, 0},
        {-1, -1, -1, -1},
        {CIRCUIT_MAX_COUNT + 1, CIRCUIT_MAX_COUNT + 1, INT64_MIN, INT64_MIN},
        {-2147483647 - 1, 5, 5, 5},
        {7, 2147483647, 5, -5},
    };
    params p = {0};
    side s = {.p = &p, .window = 1};
    int64_t t0 = 0;
    int failures = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        circuit_spec spec = {.config = {cases[i].window, cases[i].probes, cases[i].open_for, cases[i].timeout},
                             .policy = {cb_trip, cb_probe, &s, NULL},
                             .classify = cb_classify,
                             .classify_arg = &s,
                             .observe = cb_observe,
                             .observe_arg = &s};
        char gb[512] = "", eb[512] = "";
        circuit_breaker *b = NULL;
        cmodel *m = NULL;
        int g = circuit_new(&b, &spec, gb, sizeof gb);
        int e = cmodel_new(&m, &spec, model_clock, &t0, eb, sizeof eb);
        if (g != e || (g != 0 && b != NULL)) {
            fprintf(stderr,
                    "differential: MISMATCH config check %zu {window=%d probes=%d open_for_ns=%" PRId64
                    " probe_timeout_ns=%" PRId64 "}: expected (model) %d, got (real) %d%s (message: \"%s\")\n",
                    i, cases[i].window, cases[i].probes, cases[i].open_for, cases[i].timeout, e, g,
                    g != 0 && b != NULL ? ", *out not NULL" : "", gb);
            failures++;
        }
        if (g == EINVAL) {
            const char *names[4] = {"window", "probes", "open_for", "probe_timeout"};
            bool bad[4] = {cases[i].window < 1 || cases[i].window > CIRCUIT_MAX_COUNT,
                           cases[i].probes < 1 || cases[i].probes > CIRCUIT_MAX_COUNT, cases[i].open_for <= 0,
                           cases[i].timeout <= 0};
            for (int k = 0; k < 4; k++) {
                if (bad[k] && strstr(gb, names[k]) == NULL) {
                    fprintf(stderr,
                            "differential: config check %zu: the real message does not name %s: \"%s\"\n", i,
                            names[k], gb);
                    failures++;
                }
            }
        }
        circuit_free(g == 0 ? b : NULL);
        cmodel_free(e == 0 ? m : NULL);
    }
    return failures + check_policy_check(&s);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (p == NULL) {
        fputs("differential: out of memory\n", stderr);
        exit(2);
    }
    return p;
}

typedef struct coverage {
    long    trans[5][5], rej_open, rej_half, rej_iso, late, boundary_moves, retry1;
    long    isolate[2], reset[2], reset_from[5], silent, evict_ask, periods_varied;
    int64_t max_timed_out, max_window, max_reopens;
    long    full_trips;
} coverage;

/* Run one seed: 0 when both agree throughout, 1 at the first mismatch. Adds
 * the operations run to *ops and the coverage to *cov. */
static int run_seed(uint64_t seed, long *ops, coverage *cov)
{
    run *r = xcalloc(1, sizeof *r);
    setup(r, seed);
    r->pool = xcalloc((size_t)r->pool_cap, sizeof *r->pool);
    for (int sdi = 0; sdi < 2; sdi++) {
        r->sd[sdi].id = sdi;
        r->sd[sdi].p = &r->p;
        r->sd[sdi].window = r->cfg.window;
    }
    set_now(r, INT64_C(1000000000) + rnd_below(&r->rng, 1000));

    int rc = 1;
    circuit_spec spec = {.config = r->cfg,
                         .policy = {cb_trip, cb_probe, &r->sd[REAL], NULL},
                         .classify = cb_classify,
                         .classify_arg = &r->sd[REAL],
                         .observe = cb_observe,
                         .observe_arg = &r->sd[REAL],
                         .open_for = r->p.of_kind ? cb_open_for : NULL,
                         .open_for_arg = &r->sd[REAL]};
    char err[256] = "";
    int g = circuit_new(&r->sd[REAL].b, &spec, err, sizeof err);
    spec.policy.arg = spec.classify_arg = spec.observe_arg = spec.open_for_arg = &r->sd[MODEL];
    int e = cmodel_new(&r->sd[MODEL].m, &spec, model_clock, &r->now, err, sizeof err);
    if (g != 0 || e != 0) {
        describe(r, "new");
        mismatch(r, "new: real %d, model %d (%s)", g, e, err);
        goto out;
    }
    if (trace_on) {
        printf("seed %" PRIu64 ": window=%d probes=%d open_for_ns=%" PRId64 " probe_timeout_ns=%" PRId64
               " open_for: %s\n",
               seed, r->cfg.window, r->cfg.probes, r->cfg.open_for_ns, r->cfg.probe_timeout_ns,
               open_for_names[r->p.of_kind]);
    }

    new_phase(r);
    if (r->sat) {
        r->succ_w = 0;
        r->fail_w = 1;
        r->ign_w = 0;
    }
    if (r->long_win) {
        r->prof = &churn;
        /* below the trip threshold (about window/2) by some 8 sigma until
         * the window is full, so that it does not trip before */
        r->succ_w = 50;
        r->fail_w = 47;
        r->ign_w = 3;
    }
    if (r->rate) {
        r->prof = &rate_profile;
        r->succ_w = rate_runs[r->rate - 1].succ_w;
        r->fail_w = rate_runs[r->rate - 1].fail_w;
        r->ign_w = 0;
    }
    long next_phase = 200 + rnd_below(&r->rng, 600);
    while (r->op_index < r->ops) {
        if (!r->sat && !r->long_win && !r->rate && r->op_index >= next_phase) {
            new_phase(r);
            next_phase += 200 + rnd_below(&r->rng, 600);
        }
        if (!(r->sat ? sat_step(r) : step(r, pick_op(r), -1, 0)))
            goto out;
        /* window run: once the window is full, lean to failures so that it
         * trips on a full, sliding window (C1 at 65536) */
        if (r->long_win && r->max_window == CIRCUIT_MAX_COUNT && r->n_full_trips == 0) {
            r->succ_w = 40;
            r->fail_w = 60;
        }
    }
    if (r->long_win && r->ops >= OPS_PER_SEED && r->n_full_trips == 0) {
        describe(r, "end of the window run");
        mismatch(r, "coverage: the window run never tripped on a full %d-result window", CIRCUIT_MAX_COUNT);
        goto out;
    }
    /* settle what is left, alternating done and release */
    for (int i = 0; i < r->pool_cap; i++) {
        if (r->pool[i].state == TK_LIVE && !step(r, i % 2 ? OP_RELEASE : OP_DONE, i, 0))
            goto out;
    }
    rc = 0;
out:
    *ops += r->op_index;
    for (int a = 0; a < 5; a++) {
        cov->reset_from[a] += r->n_reset_from[a];
        for (int b = 0; b < 5; b++)
            cov->trans[a][b] += r->n_trans[a][b];
    }
    cov->rej_open += r->n_rej_open;
    cov->rej_half += r->n_rej_half;
    cov->rej_iso += r->n_rej_iso;
    for (int k = 0; k < 2; k++) {
        cov->isolate[k] += r->n_isolate[k];
        cov->reset[k] += r->n_reset[k];
    }
    cov->silent += r->n_silent;
    cov->evict_ask += r->n_evict_ask;
    cov->periods_varied += r->n_periods_varied;
    if (r->max_reopens > cov->max_reopens)
        cov->max_reopens = r->max_reopens;
    cov->late += r->n_late;
    cov->boundary_moves += r->n_boundary_moves;
    cov->retry1 += r->n_retry1;
    if (r->max_timed_out > cov->max_timed_out)
        cov->max_timed_out = r->max_timed_out;
    if (r->max_window > cov->max_window)
        cov->max_window = r->max_window;
    cov->full_trips += r->n_full_trips;
    circuit_free(r->sd[REAL].b);
    cmodel_free(r->sd[MODEL].m);
    free(r->sd[REAL].ev);
    free(r->sd[MODEL].ev);
    free(r->pool);
    free(r);
    return rc;
}

static int usage(void)
{
    fprintf(stderr, "usage: differential [--ops N] [--long | --rates] [SEED]\n"
                    "  no SEED: seeds 1..20 (times CIRCUIT_STRESS_SCALE), %ld operations each\n"
                    "  --ops N: N operations per seed; --long: seeds 1..400, 10^6 operations each\n",
            OPS_PER_SEED);
    return 2;
}

static bool parse_u64(const char *a, uint64_t *out)
{
    char *end;
    if (a[0] == '\0' || a[0] == '-')
        return false;
    *out = strtoull(a, &end, 0);
    return *end == '\0';
}

int main(int argc, char **argv)
{
    const char *tr = getenv("CIRCUIT_DIFF_TRACE");
    trace_on = tr != NULL && tr[0] != '\0' && tr[0] != '0';
    double scale = 1.0;
    const char *sc = getenv("CIRCUIT_STRESS_SCALE");
    if (sc != NULL && sc[0] != '\0') {
        char *end;
        scale = strtod(sc, &end);
        if (*end != '\0' || !(scale > 0.0)) {
            fprintf(stderr, "differential: CIRCUIT_STRESS_SCALE must be a number > 0 (got \"%s\")\n", sc);
            return 2;
        }
    }
    bool long_run = false, have_seed = false, have_ops = false, rates = false;
    uint64_t first = 1, seed_arg = 0;
    for (int i = 1; i < argc; i++) {
        uint64_t v;
        if (strcmp(argv[i], "--long") == 0) {
            long_run = true;
        } else if (strcmp(argv[i], "--rates") == 0) {
            rates = true;
        } else if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc && parse_u64(argv[i + 1], &v) && v > 0 &&
                   v <= 1000000000) {
            g_ops_per_seed = (long)v;
            have_ops = true;
            i++;
        } else if (!have_seed && parse_u64(argv[i], &v)) {
            seed_arg = v;
            have_seed = true;
        } else {
            return usage();
        }
    }
    uint64_t count = (uint64_t)((long_run ? 400.0 : 20.0) * scale + 0.5);
    if (long_run && !have_ops)
        g_ops_per_seed = 1000000;
    if (count < 1)
        count = 1;
    if (have_seed) {
        first = seed_arg;
        count = 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);

    long ops = 0;
    coverage cov;
    memset(&cov, 0, sizeof cov);
    int failed = check_configs() != 0;
    uint64_t seeds = 0;
    if (rates) {
        /* every window x failure fraction, one seed each (--rates SEED: that
         * seed for all nine) */
        for (int k = 1; !failed && k <= N_RATE_RUNS; k++) {
            g_rate_run = k;
            seeds++;
            failed = run_seed(have_seed ? first : (uint64_t)k, &ops, &cov) != 0;
            if (!failed)
                printf("rate run %d (window %d, failures %d in %d): passed\n", k, rate_runs[k - 1].window,
                       rate_runs[k - 1].fail_w, rate_runs[k - 1].fail_w + rate_runs[k - 1].succ_w);
        }
        count = 0;
    }
    for (uint64_t s = first; !failed && s < first + count; s++) {
        seeds++;
        failed = run_seed(s, &ops, &cov) != 0;
        if (long_run && !failed)
            printf("seed %" PRIu64 " passed (%ld ops so far)\n", s, ops);
    }
    printf("coverage: transitions closed->open %ld, open->half-open %ld, half-open->open %ld, "
           "half-open->closed %ld (incl. resets), ->isolated from closed/open/half-open %ld/%ld/%ld, ->closed by reset from "
           "open/half-open/isolated %ld/%ld/%ld; isolate 0/EALREADY %ld/%ld, reset 0/EALREADY %ld/%ld; "
           "rejections open %ld (retry_after 1 ns: %ld), half-open %ld, isolated %ld; late results %ld; "
           "boundary moves %ld; highest timed_out %" PRId64 "; fullest window %" PRId64
           " (trips with a full 65536 window: %ld); S2: successes asking nothing %ld, asks with failures = 0 (must be 0) %ld; "
           "open periods other than config %ld, highest reopens %" PRId64 "\n",
           cov.trans[CIRCUIT_CLOSED][CIRCUIT_OPEN], cov.trans[CIRCUIT_OPEN][CIRCUIT_HALF_OPEN],
           cov.trans[CIRCUIT_HALF_OPEN][CIRCUIT_OPEN], cov.trans[CIRCUIT_HALF_OPEN][CIRCUIT_CLOSED],
           cov.trans[CIRCUIT_CLOSED][CIRCUIT_ISOLATED], cov.trans[CIRCUIT_OPEN][CIRCUIT_ISOLATED],
           cov.trans[CIRCUIT_HALF_OPEN][CIRCUIT_ISOLATED], cov.reset_from[CIRCUIT_OPEN],
           cov.reset_from[CIRCUIT_HALF_OPEN], cov.reset_from[CIRCUIT_ISOLATED], cov.isolate[0], cov.isolate[1], cov.reset[0],
           cov.reset[1], cov.rej_open, cov.retry1, cov.rej_half, cov.rej_iso, cov.late, cov.boundary_moves,
           cov.max_timed_out, cov.max_window, cov.full_trips, cov.silent, cov.evict_ask, cov.periods_varied,
           cov.max_reopens);
    if (!failed && cov.evict_ask != 0) {
        printf("differential: S2 (0.3) broken: trip was asked %ld times with no failure in the window\n",
               cov.evict_ask);
        failed = 1;
    }
    printf("model: %ld ops, %" PRIu64 " seeds: %d passed, %d failed\n", ops, seeds, failed ? 0 : 1,
           failed ? 1 : 0);
    return failed ? 1 : 0;
}
