/*
 * checker: the scenarios' runs and their oracle (checker.h says what each
 * check is). Everything here runs one thread at a time (sched.c), so the
 * history and the oracle's counters are plain memory.
 */
#include "checker.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "circuit_model.h"
#include "circuit_shared.h"
#include "internal.h" /* the trace prints the state word and slots */
#include "testing.h"

#define MAX_OPS 64
#define MAX_TICKETS 64
#define MAX_TRANS 256

enum op_kind { OP_ALLOW, OP_DONE, OP_RELEASE, OP_STATE, OP_STATS, OP_ISOLATE, OP_RESET, OP_TICK, OP_ARENA };
static const char *const op_names[] = {"allow", "done", "release", "get_state", "get_stats",
                                       "isolate", "reset", "tick", "new+free"};

typedef struct hop {
    enum op_kind kind;
    int tid;     /* -1: setup */
    int ticket;  /* ALLOW: the ticket it fills; DONE/RELEASE: the one it settles */
    int result;  /* DONE: 1 success, 2 failure, 3 ignored (the outcome classify gives) */
    int64_t tick;
    int nclocks;       /* the test clock's values while the call ran: */
    int64_t clocks[8]; /* it acts at one of them (V3) */
    uint64_t start, end; /* end 0: never ended (its thread died) */
    bool ok;
    circuit_rejection rej;
    circuit_state state;
    circuit_stats stats;
    int rc;
} hop;

typedef struct trans {
    circuit_transition t;
    void *ctx;
    int proc; /* shared scenarios: the handle whose observe got it (-1: the setup's) */
} trans;

static struct {
    const scenario *sc;
    circuit_breaker *b;
    /* shared scenarios: the region and each thread's handle (b is the
     * setup's handle) */
    void *region;
    size_t region_len;
    void *arena_mem;              /* arena scenarios: [arena][neighbour] (region apart) */
    circuit_breaker *neighbour;
    circuit_breaker *h[SCHED_MAX_THREADS];
    int proc_tag[SCHED_MAX_THREADS + 1];
    circuit_spec spec;
    hop ops[MAX_OPS];
    int nops;
    circuit_ticket tickets[MAX_TICKETS];
    bool ticket_live[MAX_TICKETS];
    int ntickets;
    int setup_queue[MAX_TICKETS], setup_head, setup_len;
    trans real[MAX_TRANS];
    int nreal;
    /* invariants */
    circuit_stats last;
    bool have_last;
    uint64_t allows_started, admits_ended, settles_started, settles_ended;
    bool died;
    uint64_t gen_base;   /* generations skipped before the setup */
    uint64_t trans_base; /* transitions made before the setup */
    circuit_stats base;  /* the totals when the model started (the seam) */
} C;

/* ---- the policies (pure, shared by the core and the model) ------------- */

static bool pol_trip(void *arg, const circuit_counts *c)
{
    const scenario *sc = arg;
    return c->failures >= sc->trip_failures;
}
static circuit_state pol_probe(void *arg, const circuit_counts *c)
{
    const scenario *sc = arg;
    if (sc->probe_stay)
        return CIRCUIT_HALF_OPEN;
    if (c->failures > 0 || c->timed_out > 0)
        return CIRCUIT_OPEN;
    return c->successes >= sc->close_successes ? CIRCUIT_CLOSED : CIRCUIT_HALF_OPEN;
}
static circuit_outcome classify(void *arg, void *ctx, int result)
{
    (void)arg;
    (void)ctx;
    return (circuit_outcome)result;
}
/* The process a scenario thread plays (shared scenarios). */
static int proc_of(int tid) { return tid == 1 && C.sc->share01 ? 0 : tid; }

static void observe_real(void *arg, void *ctx, const circuit_transition *t)
{
    int proc = arg ? *(int *)arg : -1;
    if (C.sc && C.sc->shared) {
        /* SH3: a process's observe gets its own transitions, in increasing
         * generation, and only its own calls' call_ctx */
        for (int i = C.nreal - 1; i >= 0; i--)
            if (C.real[i].proc == proc) {
                if (C.real[i].t.generation >= t->generation)
                    sched_fail("SH3: process %d delivered generation %" PRIu64 " after %" PRIu64, proc,
                               t->generation, C.real[i].t.generation);
                break;
            }
        uintptr_t op = (uintptr_t)ctx;
        if (ctx && op >= 1 && op <= (uintptr_t)C.nops && proc_of(C.ops[op - 1].tid) != proc)
            sched_fail("SH3: process %d's observe got the call_ctx of call %d, process %d's", proc,
                       (int)op - 1, C.ops[op - 1].tid);
        for (int i = 0; i < C.nreal; i++)
            if (C.real[i].t.generation == t->generation)
                sched_fail("SH3: generation %" PRIu64 " delivered twice", t->generation);
    }
    if (C.nreal < MAX_TRANS)
        C.real[C.nreal++] = (trans){*t, ctx, proc};
}

/* The handle the calling thread uses: its own process's in a shared
 * scenario. */
static circuit_breaker *cur_b(void)
{
    int t = sched_tid();
    return C.sc->shared && t >= 0 ? C.h[t] : C.b;
}

static void make_spec(circuit_spec *s, const scenario *sc, circuit_observe_fn obs)
{
    memset(s, 0, sizeof *s);
    s->config = sc->config;
    s->policy.trip = pol_trip;
    s->policy.probe = pol_probe;
    s->policy.arg = (void *)sc;
    s->classify = classify;
    s->observe = obs;
    s->salt = 1;
}

/* ---- recording calls --------------------------------------------------- */

static hop *hop_new(enum op_kind k)
{
    if (C.nops >= MAX_OPS) {
        fprintf(stderr, "checker: more than %d calls in one run\n", MAX_OPS);
        exit(2);
    }
    hop *h = &C.ops[C.nops++];
    memset(h, 0, sizeof *h);
    h->kind = k;
    h->tid = sched_tid();
    h->ticket = -1;
    h->start = sched_event();
    return h;
}

static hop *op_start(enum op_kind k)
{
    hop *h = hop_new(k);
    sched_op_begin();
    return h;
}
static void op_end(hop *h)
{
    sched_op_end();
    h->end = sched_event();
    if (getenv("CHECKER_TRACE_OPS") && C.b) {
        circuit_stats st;
        sched_quiet(true);
        circuit_get_stats(C.b, &st);
        sched_quiet(false);
        fprintf(stderr, "op #%d t%d %s ended: %s gen %" PRIu64 " pif %" PRId64 " timed_out %" PRIu64 "\n",
                (int)(h - C.ops), h->tid, op_names[h->kind], circuit_state_name(st.state), st.generation,
                st.probes_in_flight, st.timed_out);
    }
}

static void *ctx_of(const hop *h) { return (void *)(uintptr_t)(h - C.ops + 1); }

static void tick(int64_t ns)
{
    /* an instant of the run's order, not a call of the running thread */
    hop *h = hop_new(OP_TICK);
    h->tick = ns;
    h->end = h->start;
    circuit_test_clock_advance(ns);
}

static int do_allow(void)
{
    hop *h = op_start(OP_ALLOW);
    int k = C.ntickets++;
    h->ticket = k;
    C.allows_started++;
    circuit_ticket *t = &C.tickets[k];
    *t = (circuit_ticket)CIRCUIT_TICKET_INIT;
    h->ok = circuit_allow(cur_b(), ctx_of(h), t, &h->rej);
    /* B1, S3: a refusal while open names the time left, within the period */
    if (!h->ok && h->rej.state == CIRCUIT_OPEN &&
        (h->rej.retry_after_ns < 1 || h->rej.retry_after_ns > C.sc->config.open_for_ns))
        sched_fail("S3: refused open with retry_after %" PRId64 " ns, the period is %" PRId64 " ns",
                   h->rej.retry_after_ns, C.sc->config.open_for_ns);
    C.ticket_live[k] = h->ok;
    if (h->ok)
        C.admits_ended++;
    op_end(h);
    return h->ok ? k : -1;
}

static void do_settle(int k, char how)
{
    if (k < 0)
        return;
    hop *h = op_start(how == 'r' ? OP_RELEASE : OP_DONE);
    h->ticket = k;
    C.settles_started++;
    if (how == 'r') {
        circuit_release(&C.tickets[k]);
    } else {
        h->result = how == 's' ? CIRCUIT_SUCCESS : how == 'f' ? CIRCUIT_FAILURE : CIRCUIT_IGNORED;
        h->ok = circuit_done(&C.tickets[k], h->result);
    }
    C.ticket_live[k] = false;
    C.settles_ended++;
    op_end(h);
}

static void arena_churn(void)
{
    /* another breaker built and freed while the threads call this one: the
     * arena's units must stay apart (L5) and this breaker's counts exact */
    hop *h = op_start(OP_ARENA);
    circuit_breaker *other = NULL;
    circuit_spec s;
    make_spec(&s, C.sc, NULL);
    if (circuit_new(&other, &s, NULL, 0) != 0)
        sched_fail("arena: circuit_new failed");
    circuit_ticket t = CIRCUIT_TICKET_INIT;
    circuit_rejection rej;
    if (other && circuit_allow(other, NULL, &t, &rej))
        circuit_done(&t, CIRCUIT_FAILURE);
    circuit_free(other);
    op_end(h);
}

static void run_script(const char *script, int *queue, int *head, int *len)
{
    for (const char *p = script; p && *p; p++) {
        switch (*p) {
        case 'a': {
            int k = do_allow();
            if (k >= 0)
                queue[(*len)++] = k;
            break;
        }
        case 's': case 'f': case 'i': case 'r':
            if (*head < *len)
                do_settle(queue[(*head)++], *p);
            break;
        case 'S': case 'F': case 'I': case 'R':
            if (C.setup_head < C.setup_len)
                do_settle(C.setup_queue[C.setup_head++], (char)(*p - 'A' + 'a'));
            break;
        case 'g': {
            hop *h = op_start(OP_STATE);
            h->state = circuit_get_state(cur_b());
            op_end(h);
            break;
        }
        case 'x': {
            hop *h = op_start(OP_STATS);
            circuit_get_stats(cur_b(), &h->stats);
            op_end(h);
            break;
        }
        case 'o': {
            hop *h = op_start(OP_ISOLATE);
            h->rc = circuit_isolate(cur_b(), ctx_of(h));
            op_end(h);
            break;
        }
        case 'e': {
            hop *h = op_start(OP_RESET);
            h->rc = circuit_reset(cur_b(), ctx_of(h));
            op_end(h);
            break;
        }
        case 'n':
            arena_churn();
            break;
        case 'K': {
            /* 8 191 closed states while another thread may be stopped
             * inside a call: the descriptor tags' bound (L1) */
            sched_quiet(true);
            circuit_ticket t = CIRCUIT_TICKET_INIT;
            circuit_rejection rej;
            for (int i = 0; i < 8191; i++) {
                circuit_reset(C.b, NULL);
                if (circuit_allow(C.b, NULL, &t, &rej))
                    circuit_done(&t, CIRCUIT_FAILURE);
            }
            circuit_reset(C.b, NULL);
            sched_quiet(false);
            break;
        }
        case 't':
            tick(C.sc->tick_ns);
            break;
        case ' ':
            break;
        default:
            fprintf(stderr, "checker: bad script letter '%c'\n", *p);
            exit(2);
        }
    }
}

/* ---- per-step invariants ------------------------------------------------ */

static void check_step(void *arg)
{
    (void)arg;
    circuit_stats s;
    circuit_get_stats(C.b, &s);
    const scenario *sc = C.sc;
    if (s.state != CIRCUIT_CLOSED && s.state != CIRCUIT_OPEN && s.state != CIRCUIT_HALF_OPEN &&
        s.state != CIRCUIT_ISOLATED)
        sched_fail("S1: state %d is no state", (int)s.state);
    if (s.probes_in_flight < 0 || s.probes_in_flight > sc->config.probes)
        sched_fail("P1: %" PRId64 " probes in flight, P = %d", s.probes_in_flight, sc->config.probes);
    if (s.retry_after_ns < 0 || s.retry_after_ns > sc->config.open_for_ns ||
        (s.state != CIRCUIT_OPEN && s.retry_after_ns != 0))
        sched_fail("M1: retry_after %" PRId64 " ns while %s, the period is %" PRId64 " ns", s.retry_after_ns,
                   circuit_state_name(s.state), sc->config.open_for_ns);
    if (s.state != CIRCUIT_HALF_OPEN && s.probes_in_flight != 0)
        sched_fail("P1: %" PRId64 " probes in flight while %s", s.probes_in_flight,
                   circuit_state_name(s.state));
    uint64_t settled = s.successes + s.failures + s.ignored + s.late + s.released;
    {
        /* M1: admitted - settled lies between the tickets surely live and
         * those maybe live at this moment */
        int64_t live = (int64_t)s.admitted - (int64_t)settled;
        int64_t hi = (int64_t)C.allows_started - (int64_t)C.settles_ended;
        int64_t lo = (int64_t)C.admits_ended - (int64_t)C.settles_started;
        if (live > hi || live < lo)
            sched_fail("M1: admitted %" PRIu64 " - settled %" PRIu64 " = %" PRId64
                       " live tickets, but between %" PRId64 " and %" PRId64 " can be",
                       s.admitted, settled, live, lo, hi);
    }
    if (C.have_last) {
        const circuit_stats *l = &C.last;
#define MONO(f)                                                                                    \
    if (s.f < l->f)                                                                                \
        sched_fail("M1: " #f " went down from %" PRIu64 " to %" PRIu64, (uint64_t)l->f, (uint64_t)s.f);
        MONO(admitted) MONO(rejected) MONO(successes) MONO(failures) MONO(ignored) MONO(late)
        MONO(released) MONO(timed_out) MONO(transitions) MONO(generation)
#undef MONO
    }
    if (getenv("CHECKER_TRACE_OPS") && (!C.have_last || C.last.probes_in_flight != s.probes_in_flight ||
                                         C.last.state != s.state))
    {
        fprintf(stderr, "  step: t%d -> %s gen %" PRIu64 " pif %" PRId64 " core.lo %016" PRIx64,
                sched_tid(), circuit_state_name(s.state), s.generation, s.probes_in_flight, C.b->s->core.lo);
        for (int i = 0; i < 4 && i < C.sc->config.probes; i++)
            fprintf(stderr, " s%d {%016" PRIx64 " %016" PRIx64 "}", i, C.b->slots[i].lo, C.b->slots[i].hi);
        fprintf(stderr, "\n");
    }
    C.last = s;
    C.have_last = true;
}

/* ---- the model, replayed along a candidate linearization ---------------- */

static int64_t model_now;
static int64_t model_clock(void *arg)
{
    (void)arg;
    return model_now;
}
static trans mtrans[MAX_TRANS];
static int nmtrans;
static void observe_model(void *arg, void *ctx, const circuit_transition *t)
{
    (void)arg;
    if (nmtrans < MAX_TRANS)
        mtrans[nmtrans++] = (trans){*t, ctx, -1};
}

static char why[1024];
bool checker_strict_closed_stats;
bool checker_monotone_time;
static int64_t clock_base;

static bool counts_eq(const circuit_counts *a, const circuit_counts *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

static void fmt_counts(char *buf, size_t n, const circuit_counts *c)
{
    snprintf(buf, n, "{s %" PRId64 " f %" PRId64 " cs %" PRId64 " cf %" PRId64 " to %" PRId64 "}",
             c->successes, c->failures, c->consecutive_successes, c->consecutive_failures,
             c->timed_out);
}

/* Replays ops seq[0..len) on a fresh model; true when every ended call got
 * the answer the core gave. */
static bool replay(const int *seq, int len, cmodel **keep)
{
    cmodel *m = NULL;
    circuit_spec s;
    make_spec(&s, C.sc, observe_model);
    nmtrans = 0;
    model_now = clock_base;
    int64_t tick_now = clock_base;
    if (cmodel_new(&m, &s, model_clock, NULL, NULL, 0) != 0) {
        fprintf(stderr, "checker: cmodel_new failed\n");
        exit(2);
    }
    static cmodel_ticket mt[MAX_TICKETS];
    memset(mt, 0, sizeof mt);
    bool ok = true;
    for (int i = 0; i < len && ok; i++) {
        int op = seq[i] & 0xff, choice = seq[i] >> 8;
        const hop *h = &C.ops[op];
        bool ended = h->end != 0;
        int64_t t = h->nclocks ? h->clocks[choice] : tick_now;
        /* --monotone-time: time never runs backwards along the order (a
         * call placed after another acts at its time or later). Off by
         * default: a call that read the clock, then CASed after a pure read
         * had reported the later time, fits no such order (finding F2) */
        if (checker_monotone_time && t < model_now) {
            snprintf(why, sizeof why, "call %d at %" PRId64 " ns placed after a call at %" PRId64 " ns", op,
                     t - clock_base, model_now - clock_base);
            ok = false;
            break;
        }
        model_now = t;
        void *ctx = (void *)(uintptr_t)(op + 1);
        switch (h->kind) {
        case OP_ALLOW: {
            circuit_rejection rej = {0};
            bool a = cmodel_allow(m, ctx, &mt[h->ticket], &rej);
            if (ended && (a != h->ok || (!a && (rej.state != h->rej.state ||
                                               rej.retry_after_ns != h->rej.retry_after_ns)))) {
                snprintf(why, sizeof why, "call %d allow: model %s (%s, %" PRId64 " ns), core %s (%s, %" PRId64 " ns)",
                         op, a ? "admits" : "rejects", circuit_state_name(rej.state), rej.retry_after_ns,
                         h->ok ? "admits" : "rejects", circuit_state_name(h->rej.state), h->rej.retry_after_ns);
                ok = false;
            }
            break;
        }
        case OP_DONE: {
            bool d = cmodel_done(&mt[h->ticket], h->result);
            if (ended && d != h->ok) {
                snprintf(why, sizeof why, "call %d done: model %d, core %d", op, d, h->ok);
                ok = false;
            }
            break;
        }
        case OP_RELEASE:
            cmodel_release(&mt[h->ticket]);
            break;
        case OP_STATE: {
            circuit_state st = cmodel_get_state(m);
            if (ended && st != h->state) {
                snprintf(why, sizeof why, "call %d get_state: model %s, core %s", op,
                         circuit_state_name(st), circuit_state_name(h->state));
                ok = false;
            }
            break;
        }
        case OP_STATS: {
            circuit_stats st;
            cmodel_get_stats(m, &st);
            /* M1: state, generation and counts of one moment. Known finding
             * F1 (tests/sched/README.md): a closed failure is ordered among
             * concurrent successes when it sums the cells but seen only when
             * it publishes, so a closed read's counts need not fit one
             * order: compared only with --strict-closed-stats */
            bool counts_ok = counts_eq(&st.counts, &h->stats.counts) ||
                             (h->stats.state == CIRCUIT_CLOSED && !checker_strict_closed_stats);
            if (ended && (st.state != h->stats.state || st.generation + C.gen_base != h->stats.generation ||
                          !counts_ok)) {
                char a[160], b[160];
                fmt_counts(a, sizeof a, &st.counts);
                fmt_counts(b, sizeof b, &h->stats.counts);
                snprintf(why, sizeof why, "call %d get_stats: model %s gen %" PRIu64 " %s, core %s gen %" PRIu64 " %s",
                         op, circuit_state_name(st.state), st.generation + C.gen_base, a,
                         circuit_state_name(h->stats.state), h->stats.generation, b);
                ok = false;
            }
            break;
        }
        case OP_ISOLATE:
        case OP_RESET: {
            int rc = h->kind == OP_ISOLATE ? cmodel_isolate(m, ctx) : cmodel_reset(m, ctx);
            if (ended && rc != h->rc) {
                snprintf(why, sizeof why, "call %d %s: model %d, core %d", op, op_names[h->kind], rc, h->rc);
                ok = false;
            }
            break;
        }
        case OP_TICK:
            tick_now += h->tick;
            break;
        case OP_ARENA:
            break;
        }
    }
    if (keep && ok)
        *keep = m;
    else
        cmodel_free(m);
    return ok;
}

/* The call whose ctx a transition carries: an allow (a done's transition
 * carries its ticket's ctx), an isolate or a reset; NULL for none. */
static const hop *ctx_op(void *ctx)
{
    uintptr_t i = (uintptr_t)ctx;
    if (i < 1 || i > (uintptr_t)C.nops)
        return NULL;
    return &C.ops[i - 1];
}

/* The failure's done that settled the ticket of allow a (NULL: none). */
static const hop *failure_of(const hop *a)
{
    for (int i = 0; i < C.nops; i++)
        if (C.ops[i].kind == OP_DONE && C.ops[i].ticket == a->ticket && C.ops[i].result == CIRCUIT_FAILURE)
            return &C.ops[i];
    return NULL;
}

static bool overlap(const hop *a, const hop *b)
{
    uint64_t ae = a->end ? a->end : UINT64_MAX, be = b->end ? b->end : UINT64_MAX;
    return a->start < be && b->start < ae;
}

static bool trans_eq(const trans *r, const trans *m)
{
    if (r->t.from != m->t.from || r->t.to != m->t.to || r->t.cause != m->t.cause ||
        r->t.generation != m->t.generation + C.gen_base || !counts_eq(&r->t.counts, &m->t.counts) ||
        r->t.open_for_ns != m->t.open_for_ns)
        return false;
    if (r->ctx == m->ctx)
        return true;
    const hop *rh = ctx_op(r->ctx), *mh = ctx_op(m->ctx);
    if (!rh)
        return false; /* a ctx no call of the run gave */
    /* SH3: a transition completed by another process than the one whose
     * call began it (an intent) carries the completer's call_ctx (a
     * process never sees another's); observe_real checked it is the
     * delivering process's own */
    if (C.sc->shared && mh && proc_of(rh->tid) != proc_of(mh->tid))
        return true;
    /* time-driven changes (a period's end, a probe timeout) are made by the
     * call that notices the time, whichever that is (P1); the oracle cannot
     * tell a half-open transition after a timeout from one after a result
     * once timed_out > 0, and accepts either's caller then */
    if (r->t.cause == CIRCUIT_CAUSE_TIMER || (r->t.from == CIRCUIT_HALF_OPEN && r->t.counts.timed_out > 0))
        return rh->kind == OP_ALLOW || rh->kind == OP_ISOLATE || rh->kind == OP_RESET;
    /* O6's stated limit: a maker of the same kind racing the winner at the
     * same exact point of a closed state (the two calls overlap) may leave
     * its call_ctx */
    if (r->t.from == CIRCUIT_CLOSED && mh) {
        if (r->t.to == CIRCUIT_OPEN && rh->kind == OP_ALLOW && mh->kind == OP_ALLOW) {
            const hop *rf = failure_of(rh), *mf = failure_of(mh);
            return rf && mf && overlap(rf, mf);
        }
        if (r->t.to == CIRCUIT_ISOLATED && rh->kind == OP_ISOLATE && mh->kind == OP_ISOLATE)
            return overlap(rh, mh);
    }
    return false;
}

static bool stats_eq(const circuit_stats *a, const circuit_stats *b)
{
    return a->state == b->state && a->generation == b->generation && counts_eq(&a->counts, &b->counts) &&
           a->probes_in_flight == b->probes_in_flight && a->retry_after_ns == b->retry_after_ns &&
           a->admitted == b->admitted && a->rejected == b->rejected && a->successes == b->successes &&
           a->failures == b->failures && a->ignored == b->ignored && a->late == b->late &&
           a->released == b->released && a->timed_out == b->timed_out && a->transitions == b->transitions;
}

static bool all_ended;
static circuit_stats final_real;
static int64_t final_pending;
static int64_t final_clock;

/* The leaf: a whole linearization; compare transitions and final stats. */
static bool leaf_ok(const int *seq, int len)
{
    cmodel *m = NULL;
    if (!replay(seq, len, &m))
        return false;
    bool ok = true;
    /* every transition the core delivered is the model's of that generation */
    /* after the generation seam, delivery waits for the skipped
     * generations (circuit_test_skip_generations delivers nothing): the
     * transitions are not compared there, the calls and stats are */
    for (int i = 0; i < C.nreal && ok && !C.gen_base; i++) {
        uint64_t g = C.real[i].t.generation - C.gen_base;
        if (g < 1 || g > (uint64_t)nmtrans || !trans_eq(&C.real[i], &mtrans[g - 1])) {
            char a[160] = "none", b[160];
            if (g >= 1 && g <= (uint64_t)nmtrans)
                fmt_counts(a, sizeof a, &mtrans[g - 1].t.counts);
            fmt_counts(b, sizeof b, &C.real[i].t.counts);
            snprintf(why, sizeof why,
                     "transition %" PRIu64 ": core %s -> %s cause %d counts %s ctx %p; model has %d transitions (%s)",
                     C.real[i].t.generation, circuit_state_name(C.real[i].t.from),
                     circuit_state_name(C.real[i].t.to), (int)C.real[i].t.cause, b, C.real[i].ctx, nmtrans, a);
            ok = false;
        }
    }
    if (ok && all_ended) {
        circuit_stats st;
        model_now = final_clock; /* the final read's time */
        cmodel_get_stats(m, &st);
        st.generation += C.gen_base;
        st.transitions += C.trans_base;
        if (!C.gen_base && C.nreal + final_pending != nmtrans) {
            snprintf(why, sizeof why, "transitions: core delivered %d + %" PRId64 " pending, model made %d",
                     C.nreal, final_pending, nmtrans);
            ok = false;
        } else if (!stats_eq(&st, &final_real)) {
            char a[160], b[160];
            fmt_counts(a, sizeof a, &st.counts);
            fmt_counts(b, sizeof b, &final_real.counts);
            snprintf(why, sizeof why,
                     "final stats: model %s gen %" PRIu64 " %s pif %" PRId64 " adm %" PRIu64 " rej %" PRIu64
                     " s %" PRIu64 " f %" PRIu64 " i %" PRIu64 " late %" PRIu64 " rel %" PRIu64 " to %" PRIu64
                     " tr %" PRIu64 "; core %s gen %" PRIu64 " %s pif %" PRId64 " adm %" PRIu64 " rej %" PRIu64
                     " s %" PRIu64 " f %" PRIu64 " i %" PRIu64 " late %" PRIu64 " rel %" PRIu64 " to %" PRIu64
                     " tr %" PRIu64,
                     circuit_state_name(st.state), st.generation, a, st.probes_in_flight, st.admitted,
                     st.rejected, st.successes, st.failures, st.ignored, st.late, st.released, st.timed_out,
                     st.transitions, circuit_state_name(final_real.state), final_real.generation, b,
                     final_real.probes_in_flight, final_real.admitted, final_real.rejected,
                     final_real.successes, final_real.failures, final_real.ignored, final_real.late,
                     final_real.released, final_real.timed_out, final_real.transitions);
            ok = false;
        }
    }
    cmodel_free(m);
    return ok;
}

static long lin_nodes;
static char best_why[1024];
static int best_depth;

static bool search(uint64_t mask, int *seq, int depth)
{
    lin_nodes++;
    int n = C.nops;
    uint64_t min_end = UINT64_MAX;
    bool left = false;
    for (int i = 0; i < n; i++)
        if (!(mask & (UINT64_C(1) << i)) && C.ops[i].end != 0) {
            left = true;
            if (C.ops[i].end < min_end)
                min_end = C.ops[i].end;
        }
    if (!left) {
        if (leaf_ok(seq, depth))
            return true;
        if (getenv("CHECKER_TRACE")) {
            fprintf(stderr, "leaf:");
            for (int i = 0; i < depth; i++)
                fprintf(stderr, " %d", seq[i]);
            fprintf(stderr, ": %s\n", why);
        }
        if (depth >= best_depth) {
            best_depth = depth;
            memcpy(best_why, why, sizeof why);
        }
        /* pending calls may still take effect: try adding them */
    }
    for (int i = 0; i < n; i++) {
        if (mask & (UINT64_C(1) << i))
            continue;
        if (C.ops[i].start > min_end)
            continue; /* a call that ended before this one began must come first */
        int nc = C.ops[i].nclocks ? C.ops[i].nclocks : 1;
        for (int c = 0; c < nc; c++) {
            seq[depth] = i | (c << 8);
            if (!replay(seq, depth + 1, NULL)) {
                if (getenv("CHECKER_TRACE")) {
                    fprintf(stderr, "prefix:");
                    for (int j = 0; j <= depth; j++)
                        fprintf(stderr, " %d", seq[j]);
                    fprintf(stderr, ": %s\n", why);
                }
                if (depth + 1 > best_depth) {
                    best_depth = depth + 1;
                    memcpy(best_why, why, sizeof why);
                }
                continue;
            }
            if (search(mask | (UINT64_C(1) << i), seq, depth + 1))
                return true;
        }
    }
    return false;
}

/* ---- a run -------------------------------------------------------------- */

/* A call reads the clock, decides, then CASes, and it may be helped by
 * another call that read the clock at another moment: its time is the
 * clock's value at some moment while it ran, not necessarily at its place
 * in the order (a tick between its read and its CAS is its past). So each
 * call gets the values the clock took between its start and its end, and
 * the linearization search tries each. */
static void op_clocks(void)
{
    for (int i = 0; i < C.nops; i++) {
        hop *h = &C.ops[i];
        if (h->kind == OP_TICK)
            continue;
        int64_t t = clock_base;
        for (int j = 0; j < C.nops; j++)
            if (C.ops[j].kind == OP_TICK && C.ops[j].start < h->start)
                t += C.ops[j].tick;
        h->clocks[0] = t;
        h->nclocks = 1;
        for (int j = 0; j < C.nops && h->nclocks < 8; j++)
            if (C.ops[j].kind == OP_TICK && C.ops[j].start > h->start && (h->end == 0 || C.ops[j].start < h->end)) {
                t += C.ops[j].tick;
                h->clocks[h->nclocks++] = t;
            }
    }
}

static int tq[SCHED_MAX_THREADS][MAX_TICKETS];

static void body(void *arg, int tid)
{
    (void)arg;
    int head = 0, len = 0;
    run_script(C.sc->threads[tid], tq[tid], &head, &len);
}

static void clock_tick(int64_t ns) { tick(ns); }

static int nthreads_of(const scenario *sc)
{
    int n = 0;
    while (n < SCHED_MAX_THREADS && sc->threads[n])
        n++;
    return n;
}

static void setup_closed_states(void)
{
    /* 8192 closed states, as fast as the public API makes them; no model */
    for (int i = 0; i < 4096; i++) {
        circuit_isolate(C.b, NULL);
        circuit_reset(C.b, NULL);
    }
}

/* SH2, P1: once every probe's timeout has fallen due, no slot may still be
 * held. After the run (and its oracle), the clock passes probe_timeout and
 * the open period past the last moment any call read it, so every probe
 * admitted in the run, a dead thread's included, is due and any reopen it
 * causes is over; then `probes` allows in a row on a live handle may be
 * refused for the state (open, isolated) but never {HALF_OPEN}: a slot held
 * past its timeout (a bit or record left by a process killed between two
 * steps, or a timeout no scan ever looks for) refuses them for a probe that
 * can never end. */
static bool finale_slots_free(const scenario *sc, sched_result *r)
{
    circuit_test_clock_advance(sc->config.probe_timeout_ns + sc->config.open_for_ns + 1);
    circuit_ticket t[64];
    int held = 0;
    bool ok = true;
    for (int i = 0; i < sc->config.probes && i < 64 && ok; i++) {
        circuit_rejection rej = {0, 0};
        circuit_stats st;
        t[held] = (circuit_ticket)CIRCUIT_TICKET_INIT;
        if (circuit_allow(C.b, NULL, &t[held], &rej)) {
            held++;
            continue;
        }
        if (rej.state != CIRCUIT_HALF_OPEN)
            continue;
        circuit_get_stats(C.b, &st);
        r->verdict = SCHED_FAILED;
        snprintf(r->message, sizeof r->message,
                 "SH2/P1: %" PRId64 " ns after the run every probe was due, yet allow %d of %d was "
                 "refused {half-open}: probes in flight %" PRId64 " (%d of them this check's), "
                 "timed_out %" PRIu64 ", gen %" PRIu64 "%s",
                 sc->config.probe_timeout_ns + sc->config.open_for_ns + 1, i + 1, sc->config.probes,
                 st.probes_in_flight, held, st.timed_out, st.generation,
                 C.died ? " (a thread died in the run)" : "");
        ok = false;
    }
    for (int i = 0; i < held; i++)
        circuit_release(&t[i]);
    return ok;
}

bool checker_run(const scenario *sc, const sched_opts *o, sched_result *r, long *lin)
{
    memset(&C, 0, sizeof C);
    C.sc = sc;
    sched_event_reset();
    clock_base = 1000000000;
    circuit_test_clock_set(clock_base);
    circuit_test_set_cpus((uint32_t)(sc->ncpu > 0 ? sc->ncpu : 2));
    sched_set_cpus(sc->ncpu > 0 ? sc->ncpu : 2, sc->migrate);
    sched_set_clock(clock_tick);
    make_spec(&C.spec, sc, observe_real);
    if (sc->shared) {
        /* SH1: one region, a handle per process; the setup's handle is
         * process 0 (never dies: its flushes are never taken over) */
        if (sc->arena) {
            /* one block: [arena of 2][neighbour, unit 0][the breaker, unit 1] */
            size_t a = circuit_shared_arena_size(2);
            size_t each = circuit_shared_size_in_arena(&sc->config);
            if (posix_memalign(&C.arena_mem, CIRCUIT_SHARED_ALIGN, a + 2 * each) != 0 ||
                circuit_shared_arena_init(C.arena_mem, a, 2, NULL, 0) != 0 ||
                circuit_shared_init_in_arena((char *)C.arena_mem + a, each, C.arena_mem, &C.spec,
                                             NULL, 0) != 0 ||
                circuit_shared_attach(&C.neighbour, (char *)C.arena_mem + a, each, &C.spec, NULL,
                                      0) != 0) {
                fprintf(stderr, "checker: %s: the arena refused the scenario\n", sc->name);
                exit(2);
            }
            C.region = (char *)C.arena_mem + a + each;
            C.region_len = each;
        } else {
            C.region_len = circuit_shared_size(&sc->config);
            if (posix_memalign(&C.region, CIRCUIT_SHARED_ALIGN, C.region_len) != 0) {
                fprintf(stderr, "checker: %s: out of memory\n", sc->name);
                exit(2);
            }
        }
        int rc = sc->arena ? circuit_shared_init_in_arena(C.region, C.region_len, C.arena_mem,
                                                          &C.spec, NULL, 0)
                           : circuit_shared_init(C.region, C.region_len, &C.spec, NULL, 0);
        if (rc != 0) {
            fprintf(stderr, "checker: %s: circuit_shared_init refused the scenario\n", sc->name);
            exit(2);
        }
        C.proc_tag[SCHED_MAX_THREADS] = -1;
        C.spec.observe_arg = &C.proc_tag[SCHED_MAX_THREADS];
        if (circuit_shared_attach(&C.b, C.region, C.region_len, &C.spec, NULL, 0) != 0)
            exit(2);
        for (int t = 0; t < nthreads_of(sc); t++) {
            if (t == 1 && sc->share01) {
                C.h[1] = C.h[0]; /* thread 1 is a second thread of process 0 */
                continue;
            }
            C.proc_tag[t] = t;
            circuit_spec sp = C.spec;
            sp.observe_arg = &C.proc_tag[t];
            if (circuit_shared_attach(&C.h[t], C.region, C.region_len, &sp, NULL, 0) != 0)
                exit(2);
            circuit_test_shared_proc(C.h[t], (uint32_t)t + 1);
        }
        circuit_test_shared_proc(C.b, 0);
    } else if (circuit_new(&C.b, &C.spec, NULL, 0) != 0) {
        fprintf(stderr, "checker: %s: circuit_new refused the scenario's config\n", sc->name);
        exit(2);
    }
    /* setup, single-threaded (no switch points outside a run's threads) */
    if (sc->setup && strchr(sc->setup, 'k')) {
        setup_closed_states();
        C.nreal = 0;
    }
    int head = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", sc->setup ? sc->setup : "");
    for (char *p = buf; *p; p++)
        if (*p == 'k')
            *p = ' ';
    run_script(buf, C.setup_queue, &head, &C.setup_len);
    C.setup_head = head; /* the threads settle what the setup left live */
    if (sc->skip_generations) {
        /* the generation seam: isolate, jump, reset. The model starts at
         * the reset's closed state: what came before is not its history
         * (generations, transitions and totals are compared from there) */
        circuit_isolate(C.b, NULL);
        circuit_test_skip_generations(C.b, sc->skip_generations);
        circuit_reset(C.b, NULL);
        circuit_get_stats(C.b, &C.base);
        C.gen_base = C.base.generation;
        clock_base = circuit_test_clock_now(); /* the model starts here, at this time */
        C.trans_base = C.base.transitions;
        C.nreal = 0;
        C.nops = 0;
        C.setup_head = C.setup_len = 0;
        head = 0;
        snprintf(buf, sizeof buf, "%s", sc->setup2 ? sc->setup2 : "");
        run_script(buf, C.setup_queue, &head, &C.setup_len);
        C.setup_head = head;
    }
    C.have_last = false;
    int n = nthreads_of(sc);
    sched_run(o, n, body, NULL, sc->no_step_check ? NULL : check_step, r);
    for (int i = 0; i < n; i++)
        if (!sched_thread_ended(i))
            C.died = true;
    all_ended = !C.died && r->verdict == SCHED_OK;
    op_clocks();
    bool ok = r->verdict == SCHED_OK;
    if (ok && C.neighbour) {
        /* L5: the neighbour's units share each CPU's line with the
         * breaker's; nothing the run did may show in its counts */
        circuit_stats nb;
        circuit_get_stats(C.neighbour, &nb);
        if (nb.admitted || nb.rejected || nb.successes || nb.failures || nb.ignored || nb.late ||
            nb.released || nb.timed_out || nb.transitions || nb.state != CIRCUIT_CLOSED) {
            r->verdict = SCHED_FAILED;
            snprintf(r->message, sizeof r->message,
                     "L5: the arena neighbour counted what it never saw: admitted %" PRIu64
                     " successes %" PRIu64 " failures %" PRIu64 " transitions %" PRIu64,
                     nb.admitted, nb.successes, nb.failures, nb.transitions);
            ok = false;
        }
    }
    if (ok && !sc->no_model) {
        circuit_get_stats(C.b, &final_real);
        final_pending = circuit_test_pending(C.b);
        if (sc->shared)
            for (int t = 0; t < n; t++)
                if (!(t == 1 && sc->share01))
                    final_pending += circuit_test_pending(C.h[t]);
        final_real.admitted -= C.base.admitted;
        final_real.rejected -= C.base.rejected;
        final_real.successes -= C.base.successes;
        final_real.failures -= C.base.failures;
        final_real.ignored -= C.base.ignored;
        final_real.late -= C.base.late;
        final_real.released -= C.base.released;
        final_real.timed_out -= C.base.timed_out;
        final_clock = circuit_test_clock_now();
        int seq[MAX_OPS];
        lin_nodes = 0;
        best_depth = -1;
        best_why[0] = 0;
        if (getenv("CHECKER_TRACE")) {
            for (int i = 0; i < C.nreal; i++) {
                char b[160];
                fmt_counts(b, sizeof b, &C.real[i].t.counts);
                fprintf(stderr, "core transition %" PRIu64 ": %s -> %s cause %d %s open_for %" PRId64 " ctx %p\n",
                        C.real[i].t.generation, circuit_state_name(C.real[i].t.from),
                        circuit_state_name(C.real[i].t.to), (int)C.real[i].t.cause, b, C.real[i].t.open_for_ns,
                        C.real[i].ctx);
            }
            fprintf(stderr, "core final: %s gen %" PRIu64 " pif %" PRId64 " retry %" PRId64 " timed_out %" PRIu64
                            " late %" PRIu64 " clock %" PRId64 "\n",
                    circuit_state_name(final_real.state), final_real.generation, final_real.probes_in_flight,
                    final_real.retry_after_ns, final_real.timed_out, final_real.late, final_clock - clock_base);
        }
        if (!search(0, seq, 0)) {
            r->verdict = SCHED_FAILED;
            snprintf(r->message, sizeof r->message, "V3: no linearization of the %d calls: %.900s", C.nops,
                     best_why);
            ok = false;
        }
        if (lin)
            *lin += lin_nodes;
    }
    if (ok && !sc->no_model && !finale_slots_free(sc, r))
        ok = false;
    if (!ok) {
        /* the history, for the report */
        size_t w = strlen(r->message);
        for (int i = 0; i < C.nops && w < sizeof r->message - 80; i++) {
            const hop *h = &C.ops[i];
            int k = snprintf(r->message + w, sizeof r->message - w, "\n  #%d t%d %s [%" PRIu64 ", %" PRIu64 "]%s",
                             i, h->tid, op_names[h->kind], h->start, h->end,
                             h->kind == OP_ALLOW ? (h->ok ? " admitted" : " rejected")
                             : h->kind == OP_DONE ? (h->ok ? " counted" : " late") : "");
            if (k > 0 && h->ticket >= 0 && (size_t)k < sizeof r->message - w)
                k += snprintf(r->message + w + k, sizeof r->message - w - (size_t)k, " ticket %d", h->ticket);
            if (k > 0)
                w += (size_t)k;
        }
    }
    if (sc->shared) {
        circuit_shared_detach(C.b);
        for (int t = 0; t < n; t++)
            if (!(t == 1 && sc->share01))
                circuit_shared_detach(C.h[t]);
        if (C.neighbour)
            circuit_shared_detach(C.neighbour);
        free(C.arena_mem ? C.arena_mem : C.region);
    } else {
        circuit_free(C.b);
    }
    C.b = NULL;
    return ok;
}

/* ---- the scenarios ------------------------------------------------------ */

#define CFG(w, p, open, pt) {(w), (p), (open), (pt)}

static const scenario scenarios[] = {
    {.name = "closed_trip",
     .rules = "S2 C1 C4 L1 L6 M1",
     .about = "closed successes and failures on two CPUs race to a trip; a stats reader",
     .config = CFG(4, 1, 1000, 5000), .trip_failures = 2, .close_successes = 1,
     .threads = {"asaf", "afax", "x"}, .ncpu = 2, .max_ticks = 0},
    {.name = "halfopen_probes",
     .rules = "P1 S4 T4 T6 C1",
     .about = "an open breaker whose period has ended: the half-open change raced, probes, late settlers",
     .config = CFG(4, 1, 1000, 1000), .trip_failures = 1, .close_successes = 1,
     /* open at 0, over at 1000; a probe admitted at 1200 (due 2200); the run
      * starts at 2000 and its ticks cross that due. Ticks add up to less
      * than probe_timeout, so no probe admitted in the run falls due in it
      * (finding F2: a probe's due comes from a clock read made before its
      * record is written) */
     .setup = "aaftttatt", .threads = {"asF", "afS", "ax"}, .ncpu = 2, .tick_ns = 400, .max_ticks = 2},
    {.name = "operator",
     .rules = "OP1 OP2 OP3 O6 S1",
     .about = "isolate and reset race traffic and a trip",
     .config = CFG(2, 1, 1000, 5000), .trip_failures = 1, .close_successes = 1,
     .threads = {"afas", "oe", "ax"}, .ncpu = 2, .max_ticks = 2, .tick_ns = 800},
    {.name = "stats_cells",
     .rules = "M1 L6 L7 L8",
     .about = "successes on per-CPU cells with threads that change CPU between reading it and writing",
     .config = CFG(8, 1, 1000, 5000), .trip_failures = 2, .close_successes = 1,
     .threads = {"asasas", "afx", "xx"}, .ncpu = 2, .migrate = true},
    {.name = "arena",
     .rules = "L5 M1 S2",
     .about = "other breakers built and freed while two threads count on this one",
     .config = CFG(4, 1, 1000, 5000), .trip_failures = 2, .close_successes = 1,
     .threads = {"asaf", "nn", "afx"}, .ncpu = 2},
    {.name = "deaths",
     .rules = "L1 P1 SH2",
     .about = "a thread may die at any switch point; the others finish every call",
     .config = CFG(2, 1, 1000, 1500), .trip_failures = 1, .close_successes = 1,
     .setup = "a", .threads = {"afas", "aFx", "oe"}, .ncpu = 2, .max_deaths = 1, .max_ticks = 2,
     .tick_ns = 800},
    {.name = "generation_seam",
     .rules = "T2 T6 C1 P1 S4",
     .about = "a half-open state with the 30-bit tag of an older one that left records behind",
     .config = CFG(2, 1, 1000, 1000), .trip_failures = 1, .close_successes = 1, .probe_stay = true,
     /* g1 open; g2 half-open: a probe's failure (window record), a probe's
      * success (slot 0 freed), a probe held; g3 isolated; its slot released
      * after its due time (left busy) */
     .setup = "afttttafasaotttttr",
     .skip_generations = (UINT64_C(1) << 30) - 4, /* the threads' half-open has g2's tag */
     .setup2 = "afttt", .threads = {"asaf", "aax"}, .ncpu = 2, .tick_ns = 400, .max_ticks = 2},
    {.name = "high_tag",
     .rules = "T6 S2 P3",
     .about = "a breaker whose generation tag is past 2^27: failures trip, probes count",
     .config = CFG(2, 1, 1000, 1000), .trip_failures = 1, .close_successes = 1,
     .skip_generations = UINT64_C(1) << 28,
     .threads = {"afas", "asx"}, .ncpu = 2, .tick_ns = 600, .max_ticks = 2},
    {.name = "phantom",
     .rules = "P1 S4",
     .about = "the half-open change made by a late settler while an allow races it",
     .config = CFG(2, 1, 1000, 1000), .trip_failures = 1, .close_successes = 1,
     .setup = "aaft", .threads = {"F", "ax", "g"}, .ncpu = 2, .tick_ns = 1200, .max_ticks = 1},
    {.name = "phantom_read",
     .rules = "P1 S4 M1",
     .about = "the half-open change made by a late settler, then only reads: no probe in flight",
     .config = CFG(2, 1, 1000, 1000), .trip_failures = 1, .close_successes = 1,
     .setup = "aaft", .threads = {"F", "xg"}, .ncpu = 2, .tick_ns = 1200, .max_ticks = 1},
    {.name = "seam_window",
     .rules = "T6 C1",
     .about = "half-open window records of an older state under the same 30-bit tag",
     .config = CFG(2, 4, 1000, 1000), .trip_failures = 1, .close_successes = 1, .probe_stay = true,
     /* g1 open; g2 half-open: a probe's failure (window record 0); g3 isolated */
     .setup = "afttttafo",
     .skip_generations = (UINT64_C(1) << 30) - 4,
     .setup2 = "afttt", .threads = {"asafasx", "ax"}, .ncpu = 2, .tick_ns = 400, .max_ticks = 2},
    {.name = "seam_slot0",
     .rules = "T6 S4 P1",
     .about = "slot 0's bitmap word of an older state under the same tag, bit 0 clear",
     .config = CFG(2, 1, 1000, 1000), .trip_failures = 1, .close_successes = 1, .probe_stay = true,
     /* g1 open; g2 half-open: a probe's success frees slot 0; g3 isolated */
     .setup = "afttttaso",
     .skip_generations = (UINT64_C(1) << 30) - 4,
     .setup2 = "afttt", .threads = {"a", "a", "x"}, .ncpu = 2, .tick_ns = 400},
    {.name = "reset_trip",
     .rules = "OP2 O6 L1",
     .about = "a reset racing the intent of a failure that trips",
     .config = CFG(2, 1, 1000, 1000), .trip_failures = 1, .close_successes = 1,
     .threads = {"af", "e", "xg"}, .ncpu = 2},
    {.name = "o6_makers",
     .rules = "O6 C4 L1",
     .about = "three failing calls race to make the trip's intent at successive points",
     .config = CFG(4, 1, 1000, 1000), .trip_failures = 2, .close_successes = 1,
     .threads = {"af", "af", "af"}, .ncpu = 2},
    {.name = "stale_due",
     .rules = "P1 S3 TM2",
     .about = "allows racing the half-open change across clock ticks: whose clock the probe's due is",
     .config = CFG(2, 1, 1000, 1000), .trip_failures = 1, .close_successes = 1,
     .setup = "aafttt", .threads = {"ax", "a", "a"}, .ncpu = 2, .tick_ns = 600, .max_ticks = 2},
    {.name = "probes_two",
     .rules = "P1 S4",
     .about = "two probe slots raced by three threads; a probe's failure reopens mid-admission",
     /* finding F3 (tests/sched/README.md): an allow that had taken a probe
      * slot gave it back when the state moved on and answered open, while
      * another allow was refused {HALF_OPEN} for it. The reader comes last,
      * after the reopen: one reading mid-run also sees finding F4 (a settled
      * probe's slot refuses an allow; probes_two_read). Ticks add up to less
      * than probe_timeout once probes are admitted (finding F2) */
     .config = CFG(4, 2, 1000, 1000), .trip_failures = 1, .close_successes = 2,
     .setup = "aftt", .threads = {"as", "aafx", "as"}, .ncpu = 2, .tick_ns = 400, .max_ticks = 2,
     .max_deaths = 1},
    {.name = "probes_two_read",
     .rules = "P1 S4 M1",
     .about = "probes_two with a reader mid-run: shows open finding F4 (run by name only)",
     /* branch shared's shared_probes (tests/sched/checker.c there) in one
      * process, with probes = 2 */
     .config = CFG(4, 2, 1000, 1000), .trip_failures = 1, .close_successes = 2,
     .setup = "aftt", .threads = {"asx", "aaf", "as"}, .ncpu = 2, .tick_ns = 400, .max_ticks = 2,
     .max_deaths = 1, .open_finding = "F4"},
    /* SH1-SH5: each thread a process with its own handle on one shared
     * region; a thread may die at any switch point (a process killed) */
    {.name = "shared_deaths",
     .rules = "SH2 SH3 SH4 L1 P1",
     .about = "processes on one shared breaker; one may die at any switch point, the others finish",
     .config = CFG(2, 1, 1000, 1500), .trip_failures = 1, .close_successes = 1,
     .threads = {"afas", "asx", "oe"}, .ncpu = 2, .max_deaths = 1, .max_ticks = 2, .tick_ns = 800,
     .shared = true},
    {.name = "shared_trip",
     .rules = "SH2 SH3 O6 C4",
     .about = "three processes race a trip's intent; its maker may die, another completes it",
     .config = CFG(4, 1, 1000, 1000), .trip_failures = 2, .close_successes = 1,
     .threads = {"af", "af", "afx"}, .ncpu = 2, .max_deaths = 1, .shared = true},
    {.name = "shared_probes",
     .rules = "SH2 SH3 P1 S4",
     .about = "processes race the half-open change and its probes; one may die holding a probe",
     .config = CFG(4, 2, 1000, 1000), .trip_failures = 1, .close_successes = 2,
     .setup = "aftt", .threads = {"asx", "aaf", "as"}, .ncpu = 2, .tick_ns = 400, .max_ticks = 2,
     .max_deaths = 1, .shared = true},
    {.name = "probe_death",
     .rules = "SH2 P1 S4",
     .about = "a process may die taking, settling or timing out a probe; its slot times out",
     /* probes = 1, the probe policy keeps probing. The setup's probe is due
      * when the run starts: the first allow times it out (a scan: the hint
      * is raised) and takes the slot. A process killed between any two
      * steps of that, or of settling it, must leave a slot that times out:
      * the finale (finale_slots_free) finds it free once probe_timeout has
      * passed (finding F5). No ticks in the run (finding F2) */
     .config = CFG(2, 1, 1000, 1000), .trip_failures = 1, .close_successes = 1, .probe_stay = true,
     .setup = "aftttattt", .threads = {"as", "asx"}, .ncpu = 2, .max_deaths = 1, .max_ticks = 0,
     .tick_ns = 400, .shared = true},
    {.name = "probe_death_scan",
     .rules = "SH2 P1 S4",
     .about = "a process may die taking a probe slot while a late settler's scan raises the hint",
     /* probes = 2, the probe policy keeps probing. The setup's probe (slot
      * 0, admitted at 1400, due 2400) falls due at the run's one tick (2100
      * -> 2800); probes admitted in the run are due at 3100 or later, so
      * none falls due in the run (finding F2). The late settler's scan
      * (the setup's probe's own done) times that probe out and raises the
      * hint; an allow that checked the hint before that and
      * dies right after taking its slot is found only because no scan
      * raises the hint past its clock + probe_timeout */
     .config = CFG(2, 2, 1000, 1000), .trip_failures = 1, .close_successes = 1, .probe_stay = true,
     .setup = "afttat", .threads = {"as", "S"}, .ncpu = 2, .max_deaths = 1, .max_ticks = 1,
     .tick_ns = 700, .shared = true},
    {.name = "shared_two_threads",
     .rules = "SH3 O1 O2 O3",
     .about = "two threads of one process and a third process make transitions: per-process order",
     .config = CFG(2, 1, 1000, 1000), .trip_failures = 1, .close_successes = 1,
     .threads = {"afe", "oe", "af"}, .ncpu = 2, .max_deaths = 1, .shared = true, .share01 = true},
    {.name = "shared_cells",
     .rules = "SH1 SH2 M1 L6",
     .about = "closed successes on per-CPU units inside the region, threads moving CPU, a death",
     .config = CFG(8, 1, 1000, 5000), .trip_failures = 2, .close_successes = 1,
     .threads = {"asasas", "afx", "asx"}, .ncpu = 2, .migrate = true, .max_deaths = 1,
     .shared = true},
    {.name = "shared_arena_cells",
     .rules = "L5 SH1 SH2 M1 L6",
     .about = "shared_cells with the per-CPU units in an arena, beside a neighbour's on each line",
     .config = CFG(8, 1, 1000, 5000), .trip_failures = 2, .close_successes = 1,
     .threads = {"asasas", "afx", "asx"}, .ncpu = 2, .migrate = true, .max_deaths = 1,
     .shared = true, .arena = true},
    {.name = "descriptor_tags",
     .rules = "L1 C4",
     .about = "a reset stopped before its descriptor CAS while 8 191 closed states pass",
     .config = CFG(64, 1, 1000, 5000), .trip_failures = 1, .close_successes = 1,
     .setup = "af", .threads = {"ex", "Kx"}, .ncpu = 2, .no_model = true, .no_step_check = true},
};

const scenario *checker_all(int *n)
{
    *n = (int)(sizeof scenarios / sizeof scenarios[0]);
    return scenarios;
}

const scenario *checker_find(const char *name)
{
    int n;
    const scenario *s = checker_all(&n);
    for (int i = 0; i < n; i++)
        if (strcmp(s[i].name, name) == 0)
            return &s[i];
    return NULL;
}
