/*
 * circuit_model: the sequential reference model of docs/CONTRACT.md (see
 * circuit_model.h). Written to be read, not to be fast: one mutex, plain
 * arrays, linear scans. Every rule it implements is named by its rule id (docs/CONTRACT.md).
 *
 * SPDX-License-Identifier: MIT
 */
#include "circuit_model.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CMODEL_MAGIC 0x636d6f64u /* "cmod": set by cmodel_new, cleared by cmodel_free */

/* Ticket states. Odd constants rather than 1, 2, 3 so that a ticket holding
 * bytes the model never wrote is unlikely to look valid. */
enum {
    TICKET_BLANK = 0,
    TICKET_LIVE = 0x4c495645,     /* admitted, not settled */
    TICKET_DONE = 0x444f4e45,     /* settled by cmodel_done */
    TICKET_RELEASED = 0x52454c53, /* settled by cmodel_release */
    TICKET_REJECTED = 0x52454a54  /* cmodel_allow returned false */
};

/* A probe slot (S4, P1). `seq` names the admission holding it, so that
 * a ticket whose slot was timed out and handed to another probe (or cleared
 * by a transition) never frees the new holder's slot (T6). */
typedef struct slot {
    bool     held;
    uint64_t seq;
    int64_t  admitted_at;
} slot;

/* A transition made and not yet delivered (O1-O3). */
typedef struct pending {
    struct pending    *next;
    void              *call_ctx;
    circuit_transition t;
} pending;

/* Totals since cmodel_new (M1). */
typedef struct totals {
    uint64_t admitted, rejected;
    uint64_t successes, failures, ignored; /* results reaching their own generation */
    uint64_t late;                         /* done returned false */
    uint64_t released;                     /* live tickets settled by release */
    uint64_t timed_out;                    /* probe timeouts (not saturating) */
    uint64_t transitions;
} totals;

struct cmodel {
    uint32_t            magic;
    circuit_config      cfg;
    circuit_policy      policy;
    circuit_classify_fn classify;
    void               *classify_arg;
    circuit_observe_fn  observe;
    void               *observe_arg;
    circuit_open_for_fn open_for; /* NULL: every period is cfg.open_for_ns (B1) */
    void               *open_for_arg;
    uint64_t            salt;     /* circuit_open_info.salt (B3) */
    cmodel_clock_fn     now;
    void               *now_arg;

    pthread_mutex_t mu; /* guards every field below */

    circuit_state  state;
    uint64_t       gen;         /* 0 at creation, +1 per transition */
    int64_t        opened_at;   /* meaningful while open */
    int64_t        open_period; /* meaningful while open: the period chosen (B1) */
    int64_t        reopens;     /* half-open -> open since the last entry to closed (B2) */
    circuit_counts counts;      /* of the current state */
    totals         tot;

    /* The window (C1): ring[0..window) of outcomes; `ring_next` is where the
     * next result goes, `ring_filled` how many entries hold results of the
     * current state. Reset to 0/0 by each transition. */
    unsigned char *ring;
    int            ring_next;
    int            ring_filled;

    slot    *slots;    /* cfg.probes entries */
    int      held;     /* how many of them are held (stats: probes in flight) */
    uint64_t last_seq; /* last admission number handed to a probe */

    pending *head, *tail; /* transitions not yet delivered, oldest first */
    bool     delivering;  /* some thread is running observe */
};

/* ---- small helpers ------------------------------------------------------ */

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 1, 2)))
#endif
_Noreturn static void die(const char *fmt, ...)
{
    va_list ap;
    fputs("cmodel: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

static void lock(cmodel *m)
{
    if (pthread_mutex_lock(&m->mu) != 0)
        die("pthread_mutex_lock failed");
}

static void unlock(cmodel *m)
{
    if (pthread_mutex_unlock(&m->mu) != 0)
        die("pthread_mutex_unlock failed");
}

static int64_t inc_sat(int64_t v, int64_t max)
{
    return v < max ? v + 1 : max;
}

static int64_t read_clock(cmodel *m)
{
    if (m->now != NULL)
        return m->now(m->now_arg);
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        die("clock_gettime(CLOCK_MONOTONIC) failed");
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + (int64_t)ts.tv_nsec;
}

static void check_model(const cmodel *m, const char *fn)
{
    if (m == NULL)
        die("%s: NULL model", fn);
    if (m->magic != CMODEL_MAGIC)
        die("%s: not a model built by cmodel_new", fn);
}

/* Time is compared by differences, not by sums such as opened_at +
 * open_for_ns, so that no value of the config can overflow: the clock never
 * goes back, hence now - opened_at >= 0 and now - admitted_at >= 0. */

/* ns left open at `now` (<= 0: the period chosen has passed; B1, TM2) */
static int64_t open_left(const cmodel *m, int64_t now)
{
    return m->open_period - (now - m->opened_at);
}

/* the probe's timeout fell due by `now` */
static bool probe_due(const cmodel *m, const slot *s, int64_t now)
{
    return now - s->admitted_at >= m->cfg.probe_timeout_ns;
}

/* ---- state changes (called with the mutex held) ------------------------ */

/* The open period for the open state about to be entered (B1, B2). */
static int64_t choose_open_period(cmodel *m)
{
    if (m->open_for == NULL)
        return m->cfg.open_for_ns;
    circuit_open_info info;
    memset(&info, 0, sizeof info);
    info.counts = m->counts; /* final counts of the state left */
    info.generation = m->gen + 1;
    info.reopens = m->state == CIRCUIT_HALF_OPEN ? m->reopens + 1 : 0;
    info.salt = m->salt;
    int64_t period = m->open_for(m->open_for_arg, &info);
    if (period <= 0)
        die("open_for returned a period <= 0 (%lld)", (long long)period);
    return period;
}

/* Queue the transition to `to` and start the new state from zero (C4).
 * `opened_at` is used when `to` is CIRCUIT_OPEN: the period is chosen here. */
static void enter(cmodel *m, circuit_state to, circuit_cause cause, int64_t opened_at, void *call_ctx)
{
    int64_t period = to == CIRCUIT_OPEN ? choose_open_period(m) : 0;
    pending *p = malloc(sizeof *p);
    if (p == NULL)
        die("out of memory queueing a transition");
    memset(p, 0, sizeof *p);
    p->next = NULL;
    p->call_ctx = call_ctx; /* O6 */
    p->t.from = m->state;
    p->t.to = to;
    p->t.generation = m->gen + 1;
    p->t.counts = m->counts; /* final counts of the state left; zero when open (C4) */
    p->t.cause = cause;
    p->t.open_for_ns = period;
    if (m->tail != NULL)
        m->tail->next = p;
    else
        m->head = p;
    m->tail = p;

    /* B2: reopens since the breaker was last closed (by its probe policy or
     * by reset: both enter closed) */
    if (to == CIRCUIT_CLOSED)
        m->reopens = 0;
    else if (to == CIRCUIT_OPEN && m->state == CIRCUIT_HALF_OPEN)
        m->reopens++;

    m->gen++;
    m->tot.transitions++;
    m->state = to;
    if (to == CIRCUIT_OPEN) {
        m->opened_at = opened_at;
        m->open_period = period;
    }
    memset(&m->counts, 0, sizeof m->counts);
    m->ring_next = 0;
    m->ring_filled = 0;
    /* Probes of the state left no longer hold slots: a later half-open state
     * starts with every slot free (T6); an isolated state has none (OP1). */
    for (int i = 0; i < m->cfg.probes; i++)
        m->slots[i].held = false;
    m->held = 0;
}

/* Count one success or failure in the window and the runs (C1, C2).
 * Returns whether the window held a failure before this result (S2). */
static bool count_result(cmodel *m, circuit_outcome o)
{
    bool had_failure = m->counts.failures > 0;
    if (m->ring_filled == m->cfg.window) {
        /* the oldest result leaves the window */
        if (m->ring[m->ring_next] == CIRCUIT_SUCCESS)
            m->counts.successes--;
        else
            m->counts.failures--;
    } else {
        m->ring_filled++;
    }
    m->ring[m->ring_next] = (unsigned char)o;
    m->ring_next = (m->ring_next + 1) % m->cfg.window;

    if (o == CIRCUIT_SUCCESS) {
        m->counts.successes++;
        m->counts.consecutive_successes = inc_sat(m->counts.consecutive_successes, CIRCUIT_RUN_MAX);
        m->counts.consecutive_failures = 0;
    } else {
        m->counts.failures++;
        m->counts.consecutive_failures = inc_sat(m->counts.consecutive_failures, CIRCUIT_RUN_MAX);
        m->counts.consecutive_successes = 0;
    }
    return had_failure;
}

static circuit_state ask_probe(cmodel *m)
{
    circuit_counts c = m->counts;
    circuit_state d = m->policy.probe(m->policy.arg, &c);
    if (d != CIRCUIT_CLOSED && d != CIRCUIT_OPEN && d != CIRCUIT_HALF_OPEN)
        die("probe policy returned an invalid state (%d)", (int)d);
    return d;
}

/* Act on the probe policy's decision; `at` is when the result was counted or
 * the timeout fell due (S4). */
static void apply_probe(cmodel *m, circuit_state d, int64_t at, void *call_ctx)
{
    if (d == CIRCUIT_CLOSED)
        enter(m, CIRCUIT_CLOSED, CIRCUIT_CAUSE_POLICY, 0, call_ctx);
    else if (d == CIRCUIT_OPEN)
        enter(m, CIRCUIT_OPEN, CIRCUIT_CAUSE_POLICY, at, call_ctx);
    /* CIRCUIT_HALF_OPEN: keep probing */
}

/* Make every time-driven change that fell due by `now`, in due-time order,
 * each as of the moment it fell due (S3, P1, TM2). Closed and isolated have
 * none (OP1). */
static void advance(cmodel *m, int64_t now, void *call_ctx)
{
    for (;;) {
        if (m->state == CIRCUIT_OPEN) {
            if (open_left(m, now) > 0)
                return;
            enter(m, CIRCUIT_HALF_OPEN, CIRCUIT_CAUSE_TIMER, 0, call_ctx);
            continue;
        }
        if (m->state != CIRCUIT_HALF_OPEN)
            return;

        /* the held slot with the earliest due time, that is the earliest
         * admission time (every probe has the same timeout); ties: the
         * earliest admission */
        int first = -1;
        for (int i = 0; i < m->cfg.probes; i++) {
            const slot *s = &m->slots[i];
            if (!s->held || !probe_due(m, s, now))
                continue;
            const slot *f = first < 0 ? NULL : &m->slots[first];
            if (f == NULL || s->admitted_at < f->admitted_at ||
                (s->admitted_at == f->admitted_at && s->seq < f->seq))
                first = i;
        }
        if (first < 0)
            return;
        /* due <= now: the sum cannot overflow */
        int64_t due = m->slots[first].admitted_at + m->cfg.probe_timeout_ns;
        m->slots[first].held = false;
        m->held--;
        m->counts.timed_out = inc_sat(m->counts.timed_out, CIRCUIT_TIMED_OUT_MAX); /* C3 */
        m->tot.timed_out++;
        apply_probe(m, ask_probe(m), due, call_ctx);
    }
}

/* The clock matters only while open or half-open. */
static bool has_timers(const cmodel *m)
{
    return m->state == CIRCUIT_OPEN || m->state == CIRCUIT_HALF_OPEN;
}

/* ---- delivery (O1-O5) --------------------------------------------------- */

typedef struct delivery {
    cmodel  *m;
    pending *p;
} delivery;

/* Runs if observe unwinds: the transition it was given counts as delivered,
 * the role is given up so the next allow or done delivers the rest (O5). */
static void delivery_unwound(void *arg)
{
    delivery *d = arg;
    free(d->p);
    lock(d->m);
    d->m->delivering = false;
    unlock(d->m);
}

/* With the mutex held: transitions are waiting and no thread is delivering.
 * (Checked under the one lock a call takes anyway, so that a call with
 * nothing to deliver takes the mutex once: the benchmarks use the model as
 * the cost of a breaker that takes a lock.) */
static bool delivery_due(const cmodel *m)
{
    return m->head != NULL && !m->delivering;
}

/* Deliver what is pending, unless some thread (maybe this one, further up
 * the stack: observe calling the model) is already delivering; that one
 * then delivers it. observe runs with no lock held. */
static void deliver(cmodel *m)
{
    lock(m);
    if (m->delivering || m->head == NULL) {
        unlock(m);
        return;
    }
    m->delivering = true;
    for (;;) {
        pending *p = m->head;
        if (p == NULL)
            break;
        m->head = p->next;
        if (m->head == NULL)
            m->tail = NULL;
        unlock(m);

        delivery d = {m, p};
        pthread_cleanup_push(delivery_unwound, &d);
        if (m->observe)
            m->observe(m->observe_arg, p->call_ctx, &p->t);
        pthread_cleanup_pop(0);
        free(p);

        lock(m);
    }
    m->delivering = false;
    unlock(m);
}

/* ---- construction ------------------------------------------------------- */

/* Append to the error message; stops silently when it is full. */
static void msg_add(char *msg, size_t cap, const char *fmt, ...)
{
    size_t used = strlen(msg);
    if (used + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + used, cap - used, fmt, ap);
    va_end(ap);
}

int cmodel_new(cmodel **out, const circuit_spec *spec, cmodel_clock_fn now, void *now_arg,
               char *errbuf, size_t errbuf_len)
{
    if (out == NULL)
        die("cmodel_new: NULL out");
    *out = NULL;
    if (spec == NULL)
        die("cmodel_new: NULL spec");
    if (spec->policy.trip == NULL)
        die("cmodel_new: NULL policy.trip");
    if (spec->policy.probe == NULL)
        die("cmodel_new: NULL policy.probe");
    if (spec->classify == NULL)
        die("cmodel_new: NULL classify");
    /* observe may be NULL (CFG4): no observer */

    /* CFG1, CFG2: every invalid field, its bound and the value given */
    const circuit_config *c = &spec->config;
    char msg[512] = "";
    if (c->window < 1 || c->window > CIRCUIT_MAX_COUNT)
        msg_add(msg, sizeof msg, "%swindow must be in 1..%d (got %d)", msg[0] ? "; " : "",
                CIRCUIT_MAX_COUNT, c->window);
    if (c->probes < 1 || c->probes > CIRCUIT_MAX_COUNT)
        msg_add(msg, sizeof msg, "%sprobes must be in 1..%d (got %d)", msg[0] ? "; " : "",
                CIRCUIT_MAX_COUNT, c->probes);
    if (c->open_for_ns <= 0)
        msg_add(msg, sizeof msg, "%sopen_for_ns must be > 0 (got %lld)", msg[0] ? "; " : "",
                (long long)c->open_for_ns);
    if (c->probe_timeout_ns <= 0)
        msg_add(msg, sizeof msg, "%sprobe_timeout_ns must be > 0 (got %lld)",
                msg[0] ? "; " : "", (long long)c->probe_timeout_ns);
    /* K1: the policy's own check, asked once, its complaint joins the message */
    if (spec->policy.check != NULL) {
        char complaint[256] = "";
        int rc = spec->policy.check(spec->policy.arg, c, complaint, sizeof complaint);
        if (rc == EINVAL)
            msg_add(msg, sizeof msg, "%s%s", msg[0] ? "; " : "",
                    complaint[0] ? complaint : "policy.check refused the config");
        else if (rc != 0)
            die("cmodel_new: policy.check returned %d (0 or EINVAL expected)", rc);
    }
    if (msg[0] != '\0') {
        if (errbuf != NULL && errbuf_len > 0)
            snprintf(errbuf, errbuf_len, "invalid circuit config: %s", msg);
        return EINVAL;
    }

    cmodel *m = calloc(1, sizeof *m);
    if (m == NULL)
        return ENOMEM;
    m->ring = calloc((size_t)c->window, sizeof *m->ring);
    m->slots = calloc((size_t)c->probes, sizeof *m->slots);
    if (m->ring == NULL || m->slots == NULL || pthread_mutex_init(&m->mu, NULL) != 0) {
        free(m->ring);
        free(m->slots);
        free(m);
        return ENOMEM;
    }
    m->cfg = *c;
    m->policy = spec->policy;
    m->classify = spec->classify;
    m->classify_arg = spec->classify_arg;
    m->observe = spec->observe;
    m->observe_arg = spec->observe_arg;
    m->open_for = spec->open_for;
    m->open_for_arg = spec->open_for_arg;
    /* B3 (0.3): the spec's salt, or the next of this process's models */
    static uint64_t salts;
    m->salt = spec->salt ? spec->salt : __atomic_add_fetch(&salts, 1, __ATOMIC_RELAXED);
    m->now = now;
    m->now_arg = now_arg;
    m->state = CIRCUIT_CLOSED; /* S1: generation 0, nothing delivered */
    m->gen = 0;
    m->magic = CMODEL_MAGIC;
    *out = m;
    return 0;
}

void cmodel_free(cmodel *m)
{
    if (m == NULL)
        return;
    check_model(m, "cmodel_free");
    pending *p = m->head;
    while (p != NULL) { /* undelivered transitions are discarded */
        pending *next = p->next;
        free(p);
        p = next;
    }
    pthread_mutex_destroy(&m->mu);
    m->magic = 0;
    free(m->ring);
    free(m->slots);
    free(m);
}

/* ---- the calls ---------------------------------------------------------- */

bool cmodel_allow(cmodel *m, void *call_ctx, cmodel_ticket *t, circuit_rejection *rej)
{
    check_model(m, "cmodel_allow");
    if (t == NULL)
        die("cmodel_allow: NULL ticket");
    if (t->m != NULL && t->status == TICKET_LIVE)
        die("cmodel_allow: the ticket is live (admitted and not yet settled)");

    lock(m);
    if (delivery_due(m)) { /* O4 */
        unlock(m);
        deliver(m);
        lock(m);
    }
    /* closed and isolated have nothing time-driven: no clock read (as the
     * library) */
    int64_t now = has_timers(m) ? read_clock(m) : 0;
    advance(m, now, call_ctx);

    bool admitted = false;
    circuit_rejection r = {CIRCUIT_OPEN, 0};
    int slot_index = -1;
    uint64_t seq = 0;
    if (m->state == CIRCUIT_CLOSED) { /* S2 */
        admitted = true;
    } else if (m->state == CIRCUIT_ISOLATED) { /* OP1 */
        r.state = CIRCUIT_ISOLATED;
        r.retry_after_ns = 0;
    } else if (m->state == CIRCUIT_OPEN) { /* S3; advance left it open, so this is >= 1 */
        r.state = CIRCUIT_OPEN;
        r.retry_after_ns = open_left(m, now);
    } else { /* S4: the lowest free slot */
        for (int i = 0; i < m->cfg.probes; i++) {
            if (!m->slots[i].held) {
                slot_index = i;
                break;
            }
        }
        if (slot_index >= 0) {
            seq = ++m->last_seq;
            m->slots[slot_index].held = true;
            m->slots[slot_index].seq = seq;
            m->slots[slot_index].admitted_at = now;
            m->held++;
            admitted = true;
        } else {
            r.state = CIRCUIT_HALF_OPEN;
            r.retry_after_ns = 0;
        }
    }
    t->m = m;
    t->call_ctx = call_ctx;
    t->gen = m->gen;
    t->slot = slot_index;
    t->slot_seq = seq;
    t->status = admitted ? TICKET_LIVE : TICKET_REJECTED;
    if (admitted)
        m->tot.admitted++;
    else
        m->tot.rejected++;
    bool due = delivery_due(m);
    unlock(m);

    if (!admitted && rej != NULL)
        *rej = r;
    if (due)
        deliver(m); /* O3 */
    return admitted;
}

/* Free the ticket's probe slot if this admission still holds it. */
static void free_own_slot(cmodel *m, const cmodel_ticket *t)
{
    if (t->slot >= 0 && m->slots[t->slot].held && m->slots[t->slot].seq == t->slot_seq) {
        m->slots[t->slot].held = false;
        m->held--;
    }
}

bool cmodel_done(cmodel_ticket *t, int result)
{
    if (t == NULL)
        die("cmodel_done: NULL ticket");
    cmodel *m = t->m;
    if (m == NULL)
        die("cmodel_done: ticket not filled by cmodel_allow");
    check_model(m, "cmodel_done");

    /* T2: classify outside the mutex. The ticket's fields read here were
     * written by cmodel_allow and never change. */
    circuit_outcome o = m->classify(m->classify_arg, t->call_ctx, result);
    if (o != CIRCUIT_SUCCESS && o != CIRCUIT_FAILURE && o != CIRCUIT_IGNORED)
        die("classify returned an invalid outcome (%d)", (int)o);

    lock(m);
    /* T4, T5: settling, counting and freeing the slot are one critical
     * region, so done and release racing on one ticket settle it once. */
    int status = t->status;
    if (status != TICKET_LIVE) {
        unlock(m);
        if (status == TICKET_DONE)
            die("cmodel_done: ticket already settled by done");
        if (status == TICKET_RELEASED)
            die("cmodel_done: ticket already settled by release");
        if (status == TICKET_REJECTED)
            die("cmodel_done: ticket was rejected");
        die("cmodel_done: ticket not filled by cmodel_allow");
    }
    t->status = TICKET_DONE;
    /* closed and isolated have nothing time-driven: the clock is read only
     * to open */
    int64_t now = has_timers(m) ? read_clock(m) : 0;
    advance(m, now, t->call_ctx); /* P1: including this probe's own timeout */
    bool on_time = m->gen == t->gen; /* T2; isolate and reset make results late (OP1, OP2) */
    if (!on_time)
        m->tot.late++;
    else if (o == CIRCUIT_SUCCESS)
        m->tot.successes++;
    else if (o == CIRCUIT_FAILURE)
        m->tot.failures++;
    else
        m->tot.ignored++;
    if (on_time && o != CIRCUIT_IGNORED) { /* C5: ignored counts nothing */
        bool had_failure = count_result(m, o);
        if (m->state == CIRCUIT_CLOSED) {
            /* S2 (amended in 0.3): asked after each failure, never after a
             * success */
            (void)had_failure;
            if (o == CIRCUIT_FAILURE) {
                circuit_counts c = m->counts;
                if (m->policy.trip(m->policy.arg, &c))
                    enter(m, CIRCUIT_OPEN, CIRCUIT_CAUSE_POLICY, read_clock(m), t->call_ctx);
            }
        } else { /* half-open: a generation that admitted calls is never open
                  * or isolated */
            apply_probe(m, ask_probe(m), now, t->call_ctx);
        }
    }
    free_own_slot(m, t);
    bool due = delivery_due(m);
    unlock(m);

    if (due)
        deliver(m);
    return on_time;
}

void cmodel_release(cmodel_ticket *t)
{
    if (t == NULL)
        die("cmodel_release: NULL ticket");
    cmodel *m = t->m;
    if (m == NULL)
        return; /* blank */
    check_model(m, "cmodel_release");

    lock(m);
    int status = t->status;
    if (status == TICKET_LIVE) {
        t->status = TICKET_RELEASED;
        m->tot.released++;
        /* P3: free the slot at once, unless its timeout already fell due: then
         * the next allow or done times it out as of that moment (P1). */
        if (t->slot >= 0 && m->slots[t->slot].held && m->slots[t->slot].seq == t->slot_seq &&
            !probe_due(m, &m->slots[t->slot], read_clock(m))) {
            m->slots[t->slot].held = false;
            m->held--;
        }
    }
    unlock(m);
    if (status != TICKET_LIVE && status != TICKET_DONE && status != TICKET_RELEASED &&
        status != TICKET_REJECTED)
        die("cmodel_release: ticket holds bytes cmodel_allow never wrote");
}

circuit_state cmodel_get_state(cmodel *m)
{
    check_model(m, "cmodel_get_state");
    lock(m);
    circuit_state s = m->state;
    if (s == CIRCUIT_OPEN && open_left(m, read_clock(m)) <= 0) /* S5 */
        s = CIRCUIT_HALF_OPEN;
    unlock(m);
    return s;
}

void cmodel_get_stats(cmodel *m, circuit_stats *out)
{
    check_model(m, "cmodel_get_stats");
    if (out == NULL)
        die("cmodel_get_stats: NULL out");
    circuit_stats st;
    memset(&st, 0, sizeof st);
    lock(m);
    st.state = m->state;
    st.generation = m->gen;
    st.counts = m->counts;
    if (m->state == CIRCUIT_HALF_OPEN)
        st.probes_in_flight = m->held;
    if (m->state == CIRCUIT_OPEN) {
        int64_t left = open_left(m, read_clock(m));
        if (left > 0) {
            st.retry_after_ns = left;
        } else { /* S5: already half-open, as get_state says; nothing made yet */
            st.state = CIRCUIT_HALF_OPEN;
            st.generation = m->gen + 1;
        }
    }
    st.admitted = m->tot.admitted;
    st.rejected = m->tot.rejected;
    st.successes = m->tot.successes;
    st.failures = m->tot.failures;
    st.ignored = m->tot.ignored;
    st.late = m->tot.late;
    st.released = m->tot.released;
    st.timed_out = m->tot.timed_out;
    st.transitions = m->tot.transitions;
    unlock(m);
    *out = st;
}

/* isolate and reset: the time-driven changes that fell due first (see the
 * header), then the operator's transition, if any; delivered before
 * returning. `to` is CIRCUIT_ISOLATED (OP1) or CIRCUIT_CLOSED (OP2). */
static int operator_call(cmodel *m, void *call_ctx, circuit_state to)
{
    lock(m);
    int64_t now = has_timers(m) ? read_clock(m) : 0;
    advance(m, now, call_ctx);
    int rc = EALREADY;
    if (m->state != to) {
        enter(m, to, CIRCUIT_CAUSE_OPERATOR, 0, call_ctx);
        rc = 0;
    }
    bool due = delivery_due(m);
    unlock(m);
    if (due)
        deliver(m); /* O3, OP3 */
    return rc;
}

int cmodel_isolate(cmodel *m, void *call_ctx)
{
    check_model(m, "cmodel_isolate");
    return operator_call(m, call_ctx, CIRCUIT_ISOLATED);
}

int cmodel_reset(cmodel *m, void *call_ctx)
{
    check_model(m, "cmodel_reset");
    return operator_call(m, call_ctx, CIRCUIT_CLOSED);
}
