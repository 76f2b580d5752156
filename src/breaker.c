/*
 * The breaker: construction, admission (circuit_allow), counting
 * (circuit_done), settling without a result (circuit_release) and the pure
 * read (circuit_get_state). The state word's layout is in internal.h.
 *
 * Fast paths, closed: allow is one 8-byte load of the state word plus
 * filling the ticket; done is classify, a 16-byte load, the window update
 * (one CAS of the state word) and one 8-byte CAS writing the window record.
 * Neither reads the clock. Open: allow is one load of the state word, a
 * check of it, and one clock read.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- argument checks (SPEC CFG4) ---------------------------------------- */

static inline void check_breaker(const circuit_breaker *b, const char *fn)
{
    if (!b)
        circuit__abort("%s: breaker is NULL", fn);
    if (b->magic != CIRCUIT__MAGIC)
        circuit__abort("%s: breaker was not built by circuit_new (or was freed)", fn);
}

static inline circuit__ticket *tk_of(circuit_ticket *t, const char *fn)
{
    if (!t)
        circuit__abort("%s: ticket is NULL", fn);
    return (circuit__ticket *)(void *)t;
}

static inline uint64_t tk_word(unsigned phase) { return CIRCUIT__TICKET_MAGIC | phase; }

/* Aborts for every ticket that circuit_done may not settle. */
__attribute__((noreturn)) static void done_refused(uint64_t st)
{
    if ((st & ~UINT64_C(0xff)) != CIRCUIT__TICKET_MAGIC)
        circuit__abort("circuit_done: ticket not filled by circuit_allow");
    switch ((unsigned)(st & 0xff)) {
    case CIRCUIT__TK_DONE:
        circuit__abort("circuit_done: ticket already settled by done");
    case CIRCUIT__TK_RELEASED:
        circuit__abort("circuit_done: ticket already settled by release (a result after "
                       "the guard fired is a bug)");
    case CIRCUIT__TK_REJECTED:
        circuit__abort("circuit_done: ticket was rejected by circuit_allow, there is "
                       "nothing to settle");
    default:
        circuit__abort("circuit_done: ticket not filled by circuit_allow");
    }
}

/* ---- construction ---------------------------------------------------------- */

int circuit_new(circuit_breaker **out, const circuit_spec *spec, char *errbuf,
                size_t errbuf_len)
{
    if (!out)
        circuit__abort("circuit_new: out is NULL");
    *out = NULL;
    if (!spec)
        circuit__abort("circuit_new: spec is NULL");
    if (!spec->policy.trip)
        circuit__abort("circuit_new: policy.trip is NULL");
    if (!spec->policy.probe)
        circuit__abort("circuit_new: policy.probe is NULL");
    if (!spec->classify)
        circuit__abort("circuit_new: classify is NULL");
    if (!spec->observe)
        circuit__abort("circuit_new: observe is NULL");
    int rc = circuit__validate(&spec->config, &spec->policy, errbuf, errbuf_len);
    if (rc)
        return rc;

    uint32_t window = (uint32_t)spec->config.window;
    uint32_t probes = (uint32_t)spec->config.probes;
    uint32_t words = (probes + 31u) / 32u;

    circuit_breaker *b = NULL;
    if (posix_memalign((void **)&b, 64, sizeof *b) != 0)
        return ENOMEM;
    memset(b, 0, sizeof *b);
    size_t ring_bytes = window > 1 ? (size_t)window * sizeof(uint64_t) : 0;
    size_t slot_bytes = (size_t)probes * sizeof(circuit__u128);
    size_t bm_bytes = (size_t)words * sizeof(uint64_t);
    if (ring_bytes && !(b->ring = calloc(window, sizeof(uint64_t))))
        goto nomem;
    if (posix_memalign((void **)&b->slots, 64, slot_bytes) != 0) {
        b->slots = NULL;
        goto nomem;
    }
    memset(b->slots, 0, slot_bytes);
    if (!(b->bitmap = calloc(words, sizeof(uint64_t))))
        goto nomem;

    b->cfg = spec->config;
    b->policy = spec->policy;
    b->classify = spec->classify;
    b->classify_arg = spec->classify_arg;
    b->observe = spec->observe;
    b->observe_arg = spec->observe_arg;
    b->window = window;
    b->probes = probes;
    b->seq_mod = (uint64_t)window * ((UINT64_C(1) << 32) / window);
    b->window_magic = UINT64_MAX / window + 1;
    b->bitmap_words = words;
    b->footprint = sizeof *b + ring_bytes + slot_bytes + bm_bytes;
    circuit__store128_init(&b->core, (circuit__u128){circuit__mklo(CIRCUIT_CLOSED, 0, 0), 0});
    circuit__store128_init(&b->probe_hint, (circuit__u128){(uint64_t)INT64_MAX, 0});
    circuit__delivery_init(b);
    b->magic = CIRCUIT__MAGIC;
    *out = b;
    return 0;

nomem:
    free(b->bitmap);
    free(b->slots);
    free(b->ring);
    free(b);
    return ENOMEM;
}

void circuit_free(circuit_breaker *b)
{
    if (!b)
        return;
    check_breaker(b, "circuit_free");
    circuit__delivery_destroy(b);
    b->magic = 0;
    free(b->bitmap);
    free(b->slots);
    free(b->ring);
    free(b);
}

/* ---- admission ------------------------------------------------------------- */

static inline void fill(circuit__ticket *tk, circuit_breaker *b, void *call_ctx, uint32_t gen,
                        unsigned state, uint32_t slot, uint32_t reuse)
{
    tk->b = b;
    tk->call_ctx = call_ctx;
    tk->gen = gen;
    tk->slot = slot;
    tk->reuse = reuse;
    tk->state = state;
    /* Relaxed is enough: handing the ticket to another thread is the
     * caller's own synchronisation. */
    __atomic_store_n(&tk->status, tk_word(CIRCUIT__TK_LIVE), __ATOMIC_RELAXED);
}

static inline void finish_call(circuit_breaker *b)
{
    /* O3: what this call published (or found pending) is delivered before it
     * returns, unless another thread is delivering. For circuit_done this is
     * also where transitions left by an observe that unwound are delivered
     * (O5): one look at `pending` per call, at its end. */
    if (circuit__load_rlx(&b->pending))
        circuit__deliver(b);
}

bool circuit_allow(circuit_breaker *b, void *call_ctx, circuit_ticket *t,
                   circuit_rejection *rej)
{
    check_breaker(b, "circuit_allow");
    /* The ticket's old contents are not looked at: it is usually
     * uninitialised stack, which may hold any bytes. */
    circuit__ticket *tk = tk_of(t, "circuit_allow");

    /* O4: deliver what is pending before admitting. */
    if (circuit__load_rlx(&b->pending))
        circuit__deliver(b);

    uint64_t lo = circuit__load128_lo(&b->core);
    if (circuit__st(lo) == CIRCUIT_CLOSED) {
        CIRCUIT__HOOK(CIRCUIT_TP_ALLOW_BEFORE_CAS);
        fill(tk, b, call_ctx, circuit__gen(lo), CIRCUIT_CLOSED, CIRCUIT__NO_SLOT, 0);
        return true;
    }

    int64_t now = circuit__now();
    circuit__slot0 slot0 = {false, 0, 0};
    bool reread = false;
    for (bool again = false;; again = true) {
        if (again)
            now = circuit__now(); /* the state moved on meanwhile: decide as of now */
        circuit__u128 c = circuit__advance(b, now, call_ctx, &slot0);
        unsigned st = circuit__st(c.lo);
        uint32_t gen = circuit__gen(c.lo);
        if (slot0.held && (st != CIRCUIT_HALF_OPEN || gen != slot0.gen)) {
            /* The state moved on past the half-open state we opened. */
            circuit__slot_free(b, 0, slot0.gen, slot0.reuse, false, 0);
            slot0.held = false;
        }
        if (st == CIRCUIT_CLOSED) {
            CIRCUIT__HOOK(CIRCUIT_TP_ALLOW_BEFORE_CAS);
            fill(tk, b, call_ctx, gen, CIRCUIT_CLOSED, CIRCUIT__NO_SLOT, 0);
            finish_call(b);
            return true;
        }
        if (st == CIRCUIT_OPEN) {
            int64_t opened = (int64_t)c.hi;
            if (now < opened && !reread) {
                /* Another thread opened the breaker after we read the clock:
                 * read it again rather than report more than open_for. */
                reread = true;
                continue;
            }
            int64_t left = (now < opened) ? b->cfg.open_for_ns
                                          : b->cfg.open_for_ns - (now - opened);
            if (rej)
                *rej = (circuit_rejection){CIRCUIT_OPEN, left};
            __atomic_store_n(&tk->status, tk_word(CIRCUIT__TK_REJECTED), __ATOMIC_RELAXED);
            finish_call(b);
            return false;
        }
        /* half-open */
        CIRCUIT__HOOK(CIRCUIT_TP_ALLOW_BEFORE_CAS);
        uint32_t slot, reuse;
        if (slot0.held) {
            /* Reserved, with its due time, before the transition was made. */
            slot = 0;
            reuse = slot0.reuse;
            slot0.held = false;
        } else {
            bool stale;
            if (!circuit__slot_acquire(b, gen, &slot, &stale)) {
                if (stale)
                    continue;
                if (rej)
                    *rej = (circuit_rejection){CIRCUIT_HALF_OPEN, 0};
                __atomic_store_n(&tk->status, tk_word(CIRCUIT__TK_REJECTED), __ATOMIC_RELAXED);
                finish_call(b);
                return false;
            }
            int64_t due = circuit__sat_add(now, b->cfg.probe_timeout_ns);
            if (!circuit__slot_occupy(b, slot, gen, due, &reuse)) {
                /* The state moved on before the slot was ours. */
                circuit__bit_clear(b, slot, gen);
                continue;
            }
            circuit__hint_note(b, due);
        }
        if (circuit__gen(circuit__load128_lo(&b->core)) != gen) {
            /* The state moved on while we took the slot: give it back and
             * decide again in the new state. */
            circuit__slot_free(b, slot, gen, reuse, false, 0);
            continue;
        }
        CIRCUIT__HOOK(CIRCUIT_TP_SLOT_HELD);
        fill(tk, b, call_ctx, gen, CIRCUIT_HALF_OPEN, slot, reuse);
        finish_call(b);
        return true;
    }
}

/* ---- counting ----------------------------------------------------------------- */

/* Counts one success or failure for ticket tk. Returns false when late. */
static bool count_result(circuit_breaker *b, circuit__ticket *tk, bool failure, int64_t now,
                         bool have_now)
{
    circuit__u128 c = circuit__load128(&b->core);
    ck_backoff_t backoff = CK_BACKOFF_INITIALIZER;
    for (;;) {
        if (circuit__gen(c.lo) != tk->gen)
            return false; /* late: never touches a later generation (T2, T6) */
        unsigned st = circuit__st(c.lo);
        if (st == CIRCUIT_OPEN)
            return false; /* unreachable: no ticket is admitted into an open generation */
        circuit__ring_help(b, c);
        circuit__u128 n;
        bool evicted_failure = circuit__append(b, c, failure, &n);
        uint64_t lo_now = circuit__load128_lo(&b->core);
        if (lo_now != c.lo) {
            /* c went stale while we read its evicted record: the counts would
             * mix two states, and no policy may see that. */
            c = circuit__load128(&b->core);
            continue;
        }
        circuit_counts cnt;
        circuit__counts(b, n, &cnt);
        uint32_t g1 = (tk->gen + 1) & (uint32_t)CIRCUIT__GEN_MASK;
        circuit_state to = (circuit_state)st;
        circuit__u128 nw = n;
        if (st == CIRCUIT_CLOSED) {
            if (b->policy.trip(b->policy.arg, &cnt)) {
                if (!have_now) {
                    now = circuit__now();
                    have_now = true;
                }
                to = CIRCUIT_OPEN;
                nw = (circuit__u128){circuit__mklo(CIRCUIT_OPEN, g1, 0), (uint64_t)now};
            }
        } else {
            to = circuit__ask_probe(b, &cnt);
            if (to == CIRCUIT_CLOSED)
                nw = (circuit__u128){circuit__mklo(CIRCUIT_CLOSED, g1, 0), 0};
            else if (to == CIRCUIT_OPEN)
                nw = (circuit__u128){circuit__mklo(CIRCUIT_OPEN, g1, 0), (uint64_t)now};
        }
        CIRCUIT__HOOK(CIRCUIT_TP_DONE_BEFORE_CAS);
        if (circuit__cas128(&b->core, &c, nw)) {
            if (to != (circuit_state)st) {
                circuit__publish(b, (circuit_state)st, to, g1, &cnt, tk->call_ctx);
            } else if (b->window > 1 && (failure || evicted_failure)) {
                CIRCUIT__HOOK(CIRCUIT_TP_RING_BEFORE_WRITE);
                if (failure) /* replaces the evicted record, same slot */
                    circuit__ring_write(b, tk->gen, circuit__seq(c.lo));
                else
                    circuit__ring_clear(b, tk->gen,
                                        (uint32_t)circuit__seq_sub(b, circuit__seq(c.lo), b->window));
            }
            return true;
        }
        ck_backoff_eb(&backoff);
    }
}

bool circuit_done(circuit_ticket *t, int result)
{
    circuit__ticket *tk = tk_of(t, "circuit_done");
    uint64_t st = __atomic_load_n(&tk->status, __ATOMIC_ACQUIRE);
    if (st != tk_word(CIRCUIT__TK_LIVE))
        done_refused(st);
    circuit_breaker *b = tk->b;
    check_breaker(b, "circuit_done");

    /* classify runs while the ticket is still live: if it unwinds (a C++
     * exception, pthread_exit), the caller's guard releases the ticket and
     * frees its probe slot at once (P3). */
    circuit_outcome o = b->classify(b->classify_arg, tk->call_ctx, result);
    if (o != CIRCUIT_SUCCESS && o != CIRCUIT_FAILURE && o != CIRCUIT_IGNORED)
        circuit__abort("classify returned an invalid outcome (%d) for result %d; it must "
                       "return CIRCUIT_SUCCESS, CIRCUIT_FAILURE or CIRCUIT_IGNORED",
                       (int)o, result);
    if (!__atomic_compare_exchange_n(&tk->status, &st, tk_word(CIRCUIT__TK_DONE), false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        done_refused(st); /* circuit_release won the race (T5) */

    int64_t now = 0;
    bool have_now = false;
    uint64_t lo = circuit__load128_lo(&b->core);
    if (circuit__st(lo) != CIRCUIT_CLOSED || tk->slot != CIRCUIT__NO_SLOT) {
        /* Time-driven changes due by now, this probe's own timeout included. */
        now = circuit__now();
        have_now = true;
        circuit__advance(b, now, tk->call_ctx, NULL);
    }

    bool counted;
    if (o == CIRCUIT_IGNORED)
        counted = circuit__gen(circuit__load128_lo(&b->core)) == tk->gen;
    else
        counted = count_result(b, tk, o == CIRCUIT_FAILURE, now, have_now);

    if (tk->slot != CIRCUIT__NO_SLOT)
        circuit__slot_free(b, tk->slot, tk->gen, tk->reuse, false, 0);
    finish_call(b);
    return counted;
}

void circuit_release(circuit_ticket *t)
{
    circuit__ticket *tk = tk_of(t, "circuit_release");
    uint64_t st = __atomic_load_n(&tk->status, __ATOMIC_ACQUIRE);
    if (st == 0)
        return; /* blank (CIRCUIT_TICKET_INIT) */
    if ((st & ~UINT64_C(0xff)) != CIRCUIT__TICKET_MAGIC ||
        (st & 0xff) < CIRCUIT__TK_LIVE || (st & 0xff) > CIRCUIT__TK_REJECTED)
        circuit__abort("circuit_release: ticket not filled by circuit_allow");
    if (st != tk_word(CIRCUIT__TK_LIVE))
        return; /* settled or rejected: nothing to do (T3) */
    CIRCUIT__HOOK(CIRCUIT_TP_RELEASE_BEFORE_CAS);
    if (!__atomic_compare_exchange_n(&tk->status, &st, tk_word(CIRCUIT__TK_RELEASED), false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return; /* circuit_done won the race (T5) */
    if (tk->slot == CIRCUIT__NO_SLOT)
        return;
    circuit_breaker *b = tk->b;
    check_breaker(b, "circuit_release");
    /* Free the slot now (P3), unless its timeout already fell due: then the
     * next allow or done times it out as of that moment (P1). */
    circuit__slot_free(b, tk->slot, tk->gen, tk->reuse, true, circuit__now());
}

void circuit_ticket_guard_release(circuit_ticket *t)
{
    circuit_release(t);
}

/* ---- the pure read ------------------------------------------------------------ */

circuit_state circuit_get_state(const circuit_breaker *b)
{
    check_breaker(b, "circuit_get_state");
    /* circuit__load128 returns a pair the word really held, so hi is this
     * open generation's opened_at. */
    circuit__u128 c = circuit__load128(&b->core);
    unsigned st = circuit__st(c.lo);
    if (st != CIRCUIT_OPEN)
        return (circuit_state)st;
    int64_t opened = (int64_t)c.hi;
    int64_t now = circuit__now();
    return (now >= opened && now - opened >= b->cfg.open_for_ns) ? CIRCUIT_HALF_OPEN
                                                                   : CIRCUIT_OPEN;
}

/* ---- test-only seam ------------------------------------------------------------ */
#ifdef CIRCUIT_TESTING

int circuit_test_force_counts(circuit_breaker *b, circuit_outcome kind, int64_t run,
                              int64_t timed_out)
{
    check_breaker(b, "circuit_test_force_counts");
    circuit__u128 c = circuit__load128(&b->core);
    unsigned st = circuit__st(c.lo);
    if (st == CIRCUIT_OPEN || run < 0 || run > CIRCUIT_RUN_MAX || timed_out < 0 ||
        timed_out > CIRCUIT_TIMED_OUT_MAX || (st == CIRCUIT_CLOSED && timed_out != 0) ||
        (kind != CIRCUIT_SUCCESS && kind != CIRCUIT_FAILURE))
        return EINVAL;
    uint64_t hi = c.hi & (CIRCUIT__HI_FAIL_MASK | CIRCUIT__HI_FULL);
    hi |= (kind == CIRCUIT_FAILURE ? CIRCUIT__HI_LAST_FAIL : 0);
    hi |= (uint64_t)run << CIRCUIT__HI_RUN_SHIFT;
    hi |= (uint64_t)timed_out << CIRCUIT__HI_TO_SHIFT;
    circuit__u128 nw = {c.lo, hi};
    return circuit__cas128(&b->core, &c, nw) ? 0 : EAGAIN;
}

size_t circuit_test_footprint(const circuit_breaker *b)
{
    check_breaker(b, "circuit_test_footprint");
    return b->footprint;
}

int64_t circuit_test_pending(const circuit_breaker *b)
{
    check_breaker(b, "circuit_test_pending");
    return (int64_t)circuit__load_rlx((uint64_t *)(uintptr_t)&b->pending);
}

#endif
