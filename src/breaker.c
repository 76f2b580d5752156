/*
 * The breaker: construction, the life of a ticket (admission by
 * circuit_allow, settling by circuit_done / circuit_release, the checks of
 * SPEC CFG4 and T4), counting a result, the one function that makes a
 * transition, the operator calls (isolate, reset) and the pure read
 * (circuit_get_state). The state word's layout is in internal.h.
 *
 * Fast paths. Closed: allow is one 8-byte acquire load of the state word,
 * filling the ticket and one per-CPU total; a success in the fast mode
 * (no failure in the window, SPEC L6) is classify, one 8-byte load of the
 * state word and one CAS of this CPU's own record (percpu.c): no line
 * another CPU writes. Neither reads the clock. Open: allow is one load of
 * the state word, one clock read and one per-CPU total.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* ConcurrencyKit's exponential backoff for lost CAS races on the state word.
 * Its builtins mode keeps the header free of inline assembly TSan would not
 * see (it only spins; it orders nothing). */
#ifdef CIRCUIT__TSAN
#define CK_USE_CC_BUILTINS 1
#endif
#include <ck_backoff.h>

/* First wait after a lost CAS, in ck_backoff iterations (doubles each loss,
 * up to CK_BACKOFF_CEILING). Short: a loss on the slow path usually means
 * one other result got in first. */
#define CAS_BACKOFF_FIRST 16u

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

_Static_assert(sizeof(struct circuit_breaker) <= CIRCUIT_FOOTPRINT_FIXED,
               "the fixed part documented at CIRCUIT_FOOTPRINT_MAX");
_Static_assert(sizeof(circuit__pcpu) == CIRCUIT_FOOTPRINT_PER_CPU, "one line per CPU");

/* The CPUs configured, read once per process: glibc answers
 * sysconf(_SC_NPROCESSORS_CONF) by reading /sys/devices/system/cpu, which
 * was half the cost of building a breaker. Threads that race on the first
 * call each compute the same value and store it; 0 means not yet known. */
static uint64_t cpus_cache;

static uint32_t cpus_configured(void)
{
    /* relaxed: the value is the whole message; every thread that computes
     * it computes the same number */
    uint64_t n = circuit__ld_rlx(&cpus_cache);
    if (n != 0)
        return (uint32_t)n;
    long c = sysconf(_SC_NPROCESSORS_CONF);
    n = c < 1 ? 1u : c > 4096 ? 4096u : (uint64_t)c;
    circuit__st_rlx(&cpus_cache, n); /* relaxed: see above */
    return (uint32_t)n;
}

/* Salts handed to breakers whose spec leaves salt at 0: 1, 2, 3, ... in
 * the order they are built in this process. */
static uint64_t salt_next;

/* The frames of the callbacks running on this thread (internal.h). */
__thread circuit__cb_frame *circuit__cb_top __attribute__((tls_model("initial-exec")));

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
    /* observe may be NULL (CFG4 as amended in 0.3): no observer */
    int rc = circuit__validate(&spec->config, &spec->policy, errbuf, errbuf_len);
    if (rc)
        return rc;

    uint32_t window = (uint32_t)spec->config.window;
    uint32_t probes = (uint32_t)spec->config.probes;
    uint32_t words = (probes + 31u) / 32u;
    uint32_t ncpu = cpus_configured();

    /* One block for the whole breaker, carved in this order: the breaker
     * (a multiple of 64 bytes), the per-CPU lines (64-byte aligned), the
     * probe slots (16-byte aligned), the window ring and the slot bitmap.
     * One allocation and one free (0.2 made five). */
    _Static_assert(sizeof(circuit_breaker) % 64 == 0, "the per-CPU lines stay aligned");
    _Static_assert(sizeof(circuit__pcpu) % 16 == 0, "the probe slots stay aligned");
    size_t ring_bytes = window > 1 ? (size_t)window * sizeof(uint64_t) : 0;
    size_t slot_bytes = (size_t)probes * sizeof(circuit__u128);
    size_t bm_bytes = (size_t)words * sizeof(uint64_t);
    size_t pcpu_bytes = (size_t)ncpu * sizeof(circuit__pcpu);
    size_t total = sizeof(circuit_breaker) + pcpu_bytes + slot_bytes + ring_bytes + bm_bytes;
    circuit_breaker *b = NULL;
    if (posix_memalign((void **)&b, 64, total) != 0)
        return ENOMEM;
    memset(b, 0, total);
    char *at = (char *)b + sizeof *b;
    b->pcpu = (circuit__pcpu *)(void *)at;
    at += pcpu_bytes;
    b->slots = (circuit__u128 *)(void *)at;
    at += slot_bytes;
    b->ring = ring_bytes ? (uint64_t *)(void *)at : NULL;
    at += ring_bytes;
    b->bitmap = (uint64_t *)(void *)at;

    b->cfg = spec->config;
    b->policy = spec->policy;
    b->classify = spec->classify;
    b->classify_arg = spec->classify_arg;
    b->observe = spec->observe;
    b->observe_arg = spec->observe_arg;
    b->open_for = spec->open_for;
    b->open_for_arg = spec->open_for_arg;
    /* relaxed: only the uniqueness of the value matters, no order */
    b->salt = spec->salt ? spec->salt : circuit__faa_rlx(&salt_next, 1) + 1;
    b->window = window;
    b->probes = probes;
    b->seq_mod = (uint64_t)window * ((UINT64_C(1) << 31) / window);
    b->window_magic = UINT64_MAX / window + 1;
    b->bitmap_words = words;
    b->ncpu = ncpu;
    b->footprint = total;
    circuit__pcpu_init(b); /* the first fast interval: id 1 */
    circuit__st128_init(&b->core, (circuit__u128){circuit__mklo(CIRCUIT__ST_CLOSED, 0, 1) |
                                                      CIRCUIT__LO_FAST,
                                                  circuit__mkfhi(0, false, 0)});
    circuit__st128_init(&b->probe_hint, (circuit__u128){(uint64_t)INT64_MAX, 0});
    circuit__delivery_init(b);
    b->magic = CIRCUIT__MAGIC;
    *out = b;
    return 0;
}

void circuit_free(circuit_breaker *b)
{
    if (!b)
        return;
    check_breaker(b, "circuit_free");
    /* CFG4 (0.3): freeing a breaker from inside one of its own callbacks
     * would leave the call that runs the callback reading freed memory. */
    for (const circuit__cb_frame *f = circuit__cb_top; f; f = f->prev)
        if (f->b == b)
            circuit__abort("circuit_free: called from inside %s of the same breaker; a breaker "
                           "cannot be freed by its own callbacks (free it after the call that "
                           "ran %s has returned)",
                           f->what, f->what);
    circuit__delivery_destroy(b);
    b->magic = 0;
    free(b); /* the one block (circuit_new) */
}

/* ---- the state word -------------------------------------------------------- */

bool circuit__core_cas(circuit_breaker *b, circuit__u128 *expected, circuit__u128 desired)
{
#ifdef CIRCUIT_TESTING
    circuit__test_count_core_cas();
#endif
    /* sc: a release for what was prepared before (per-CPU records, slot 0,
     * the reopen count), an acquire for what the winner reads next */
    return circuit__cas128_sc(&b->core, expected, desired);
}

uint64_t circuit__gen_widen(const circuit_breaker *b, uint32_t tag)
{
    /* relaxed: gen64 is only a reference point near the tag's generation,
     * whichever transition it was last raised by */
    uint64_t base = circuit__ld_rlx((uint64_t *)(uintptr_t)&b->gen64);
    /* The tag's distance from the base is SIGNED. The base may lag the tag
     * (a transition made and gen64 not yet raised by its maker) or lead it
     * (the word was read, then others made transitions and raised gen64:
     * get_stats after its read, a transition computed from a stale word).
     * Either way the distance is far below 2^29 (it would take 2^29
     * transitions while one thread holds the word), so the nearest
     * generation with this tag is the word's. An unsigned distance turned
     * a base one ahead into tag + 2^30 (M1, B3). */
    uint64_t d = (tag - base) & CIRCUIT__GEN_MASK;
    if (d > (CIRCUIT__GEN_MASK >> 1))
        return base - ((CIRCUIT__GEN_MASK + 1) - d); /* behind the base */
    return base + d;
}

static void gen64_raise(circuit_breaker *b, uint64_t g)
{
    uint64_t cur = circuit__ld_rlx(&b->gen64); /* relaxed: table gen64 */
    /* relaxed: a monotonic maximum, read only to widen tags */
    while (cur < g && !circuit__cas_rlx(&b->gen64, &cur, g))
        ;
}

/* Reopens of the half-open state of generation `gen` (B2), kept beside the
 * word because the half-open word has no room for it. */
static int64_t half_reopens(const circuit_breaker *b, uint32_t gen)
{
    /* acquire: pairs with the write made before the CAS that entered gen */
    uint64_t v = circuit__ld_acq((uint64_t *)(uintptr_t)&b->half_reopens);
    return (uint32_t)(v >> 32) == gen ? (int64_t)(uint32_t)v : 0;
}

/* Before the CAS that makes open -> half-open (gen), record the reopen count
 * the half-open state inherits. Written only while the word still holds the
 * open state it was computed from (checked after reading the value, and the
 * CAS from that value fails if it moved since), so a stale caller cannot
 * overwrite a later state's count. Returns false when the word moved. */
static bool half_reopens_set(circuit_breaker *b, uint64_t open_lo, uint32_t gen, uint32_t k)
{
    uint64_t want = ((uint64_t)gen << 32) | k;
    uint64_t v = circuit__ld_acq(&b->half_reopens); /* acquire: before the check */
    while (v != want) {
        /* acquire: the check follows the read above */
        if (circuit__ld128_lo_acq(&b->core) != open_lo)
            return false;
        /* acquire on failure: the value returned is checked again */
        if (circuit__cas_acq(&b->half_reopens, &v, want))
            break;
    }
    return true;
}

bool circuit__transition(circuit_breaker *b, circuit__u128 *c, circuit_state to,
                         circuit_cause cause, const circuit_counts *counts, int64_t at,
                         void *call_ctx)
{
    unsigned st = circuit__st(c->lo);
    uint32_t g1 = circuit__gen_next(circuit__gen(c->lo));
    uint64_t g64 = circuit__gen_widen(b, g1);
    circuit_transition tr = {circuit__pub_state(st), to, g64, *counts, cause, 0};
    circuit__u128 nw;
    switch (to) {
    case CIRCUIT_OPEN: {
        int64_t reopens = st == CIRCUIT__ST_HALF_OPEN ? half_reopens(b, circuit__gen(c->lo)) + 1 : 0;
        int64_t period = b->cfg.open_for_ns;
        if (b->open_for) {
            circuit_open_info info = {*counts, g64, reopens, b->salt};
            CIRCUIT__CB_FRAME(frame, b, "open_for");
            period = b->open_for(b->open_for_arg, &info);
            if (period <= 0)
                circuit__abort("open_for returned %lld ns for generation %llu; it must return "
                               "a period > 0",
                               (long long)period, (unsigned long long)g64);
        }
        tr.open_for_ns = period;
        if (reopens > (int64_t)CIRCUIT__F31_MASK)
            reopens = (int64_t)CIRCUIT__F31_MASK;
        nw = (circuit__u128){circuit__mklo(CIRCUIT__ST_OPEN, g1, (uint32_t)reopens),
                             circuit__open_end(at, period)};
        break;
    }
    case CIRCUIT_HALF_OPEN:
        if (!half_reopens_set(b, c->lo, g1, circuit__lo31(c->lo))) {
            *c = circuit__ld128_acq(&b->core); /* acquire: the caller decides again from it */
            return false;
        }
        nw = (circuit__u128){circuit__mklo(CIRCUIT__ST_HALF_OPEN, g1, 0), 0};
        break;
    case CIRCUIT_ISOLATED:
        nw = (circuit__u128){circuit__mklo(CIRCUIT__ST_ISOLATED, g1, 0), 0};
        break;
    default: /* CLOSED: a new closed state starts in the fast mode */
        if (!circuit__enter_fast(b, c, (circuit__u128){circuit__mklo(CIRCUIT__ST_CLOSED, g1, 0), 0}))
            return false;
        goto made;
    }
    if (!circuit__core_cas(b, c, nw))
        return false;
    *c = nw;
made:
    gen64_raise(b, g64);
    circuit__faa_rlx(&b->transitions, 1); /* relaxed: a total */
    circuit__publish(b, &tr, call_ctx);
    return true;
}

/* ---- admission ------------------------------------------------------------- */

static inline void fill(circuit__ticket *tk, circuit_breaker *b, void *call_ctx, uint32_t gen,
                        uint32_t slot, uint32_t reuse)
{
    tk->b = b;
    tk->call_ctx = call_ctx;
    tk->gen = gen;
    tk->slot = slot;
    tk->reuse = reuse;
    tk->unused = 0;
    /* relaxed: handing the ticket to another thread is the caller's own
     * synchronisation */
    circuit__st_rlx(&tk->status, tk_word(CIRCUIT__TK_LIVE));
}

static inline void reject(circuit_breaker *b, circuit__ticket *tk, circuit_rejection *rej,
                          circuit_state st, int64_t left)
{
    if (rej)
        *rej = (circuit_rejection){st, left};
    circuit__st_rlx(&tk->status, tk_word(CIRCUIT__TK_REJECTED)); /* relaxed: table ticket status */
    circuit__total_add(b, CIRCUIT__T_REJECTED);
}

static inline void finish_call(circuit_breaker *b)
{
    /* O3: what this call published (or found pending) is delivered before it
     * returns, unless another thread is delivering. Also where transitions
     * left by an observe that unwound are delivered (O5). relaxed: a hint;
     * a publisher delivers its own records (delivery.c). */
    if (circuit__ld_rlx(&b->pending))
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
    if (circuit__ld_rlx(&b->pending))
        circuit__deliver(b);

    /* acquire: a ticket of this generation must see what the CAS that made
     * it published (per-CPU records of a fast interval included) */
    uint64_t seen = circuit__ld128_lo_acq(&b->core);
    if (circuit__st(seen) == CIRCUIT__ST_CLOSED) {
        CIRCUIT__HOOK(CIRCUIT_TP_ALLOW_BEFORE_CAS);
        fill(tk, b, call_ctx, circuit__gen(seen), CIRCUIT__NO_SLOT, 0);
        circuit__total_add(b, CIRCUIT__T_ADMITTED);
        return true;
    }
    if (circuit__st(seen) == CIRCUIT__ST_ISOLATED) {
        reject(b, tk, rej, CIRCUIT_ISOLATED, 0);
        finish_call(b);
        return false;
    }

    /* The clock is read AFTER the word: an open state seen now was made
     * from a clock read before ours, so retry_after never exceeds the
     * period. */
    int64_t now = circuit__now();
    circuit__slot0 slot0 = {false, 0, 0};
    for (;;) {
        circuit__u128 c = circuit__advance(b, now, call_ctx, &slot0);
        if (slot0.held) {
            /* S3: this call made open -> half-open; probe slot 0 was
             * reserved for it (with its due time) before the CAS that made
             * the state, so it is admitted as the first probe of that
             * generation even if the state has moved on since (its result
             * is then late, T6). */
            CIRCUIT__HOOK(CIRCUIT_TP_SLOT_HELD);
            fill(tk, b, call_ctx, slot0.gen, 0, slot0.reuse);
            circuit__total_add(b, CIRCUIT__T_ADMITTED);
            finish_call(b);
            return true;
        }
        unsigned st = circuit__st(c.lo);
        uint32_t gen = circuit__gen(c.lo);
        if (st == CIRCUIT__ST_CLOSED) {
            CIRCUIT__HOOK(CIRCUIT_TP_ALLOW_BEFORE_CAS);
            fill(tk, b, call_ctx, gen, CIRCUIT__NO_SLOT, 0);
            circuit__total_add(b, CIRCUIT__T_ADMITTED);
            finish_call(b);
            return true;
        }
        if (st == CIRCUIT__ST_ISOLATED) {
            reject(b, tk, rej, CIRCUIT_ISOLATED, 0);
            finish_call(b);
            return false;
        }
        if (st == CIRCUIT__ST_OPEN) {
            if (c.lo != seen) {
                /* This open state was made after our clock read: read the
                 * clock again, so retry_after is measured from after it. */
                seen = c.lo;
                now = circuit__now();
                continue;
            }
            reject(b, tk, rej, CIRCUIT_OPEN, circuit__open_left(c.hi, now));
            finish_call(b);
            return false;
        }
        /* half-open */
        CIRCUIT__HOOK(CIRCUIT_TP_ALLOW_BEFORE_CAS);
        uint32_t slot, reuse;
        circuit__admit a = circuit__probe_admit(b, gen, now, &slot, &reuse);
        if (a == CIRCUIT__STALE) {
            /* acquire: decide again from the new state */
            seen = circuit__ld128_lo_acq(&b->core);
            now = circuit__now(); /* the state moved on: decide as of now */
            continue;
        }
        if (a == CIRCUIT__FULL) {
            reject(b, tk, rej, CIRCUIT_HALF_OPEN, 0);
            finish_call(b);
            return false;
        }
        CIRCUIT__HOOK(CIRCUIT_TP_SLOT_HELD);
        fill(tk, b, call_ctx, gen, slot, reuse);
        circuit__total_add(b, CIRCUIT__T_ADMITTED);
        finish_call(b);
        return true;
    }
}

/* ---- counting ----------------------------------------------------------------- */

static bool ask_trip(circuit_breaker *b, const circuit_counts *cnt)
{
    CIRCUIT__CB_FRAME(frame, b, "trip");
    return b->policy.trip(b->policy.arg, cnt);
}

static inline circuit_outcome ask_classify(circuit_breaker *b, void *call_ctx, int result)
{
    CIRCUIT__CB_FRAME(frame, b, "classify");
    return b->classify(b->classify_arg, call_ctx, result);
}

/* Counts one success or failure of ticket tk (slow path: through the state
 * word). Returns false when late. */
static bool count_result(circuit_breaker *b, circuit__ticket *tk, bool failure, int64_t now,
                         bool have_now)
{
    circuit__u128 c = circuit__ld128_acq(&b->core); /* acquire: table core */
    ck_backoff_t backoff = CAS_BACKOFF_FIRST;
    for (;;) {
        if (circuit__gen(c.lo) != tk->gen)
            return false; /* late: never touches a later generation (T2, T6) */
        unsigned st = circuit__st(c.lo);
        if (st != CIRCUIT__ST_CLOSED && st != CIRCUIT__ST_HALF_OPEN)
            return false; /* unreachable: no ticket is admitted into open/isolated */
        if (circuit__fast(c.lo)) {
            circuit__fold(b, &c); /* exact counts first (L6) */
            continue;
        }
        circuit__ring_help(b, c);
        circuit__u128 n;
        bool evicted_failure = circuit__append(b, c, failure, &n);
        /* acquire: after the ring read inside append */
        if (circuit__ld128_lo_acq(&b->core) != c.lo) {
            /* c went stale while we read its evicted record: the counts would
             * mix two states, and no policy may see that. */
            c = circuit__ld128_acq(&b->core);
            continue;
        }
        circuit_counts cnt;
        circuit__counts(b, n, &cnt);
        circuit__u128 before = c;
        if (st == CIRCUIT__ST_CLOSED) {
            /* S2 (0.2): trip is asked after a failure, and after a success
             * only when the window held a failure before it */
            if ((failure || circuit__hi_fail(c.hi) > 0) && ask_trip(b, &cnt)) {
                if (!have_now) {
                    now = circuit__now();
                    have_now = true;
                }
                CIRCUIT__HOOK(CIRCUIT_TP_DONE_BEFORE_CAS);
                if (circuit__transition(b, &c, CIRCUIT_OPEN, CIRCUIT_CAUSE_POLICY, &cnt, now,
                                        tk->call_ctx))
                    return true;
            } else if (circuit__hi_fail(n.hi) == 0) {
                /* no failure left in the window: back to the fast mode */
                CIRCUIT__HOOK(CIRCUIT_TP_DONE_BEFORE_CAS);
                if (circuit__enter_fast(b, &c, n)) {
                    circuit__ring_after_count(b, before, failure, evicted_failure);
                    return true;
                }
            } else {
                CIRCUIT__HOOK(CIRCUIT_TP_DONE_BEFORE_CAS);
                if (circuit__core_cas(b, &c, n)) {
                    circuit__ring_after_count(b, before, failure, evicted_failure);
                    return true;
                }
            }
        } else {
            circuit_state to = circuit__ask_probe(b, &cnt);
            CIRCUIT__HOOK(CIRCUIT_TP_DONE_BEFORE_CAS);
            if (to != CIRCUIT_HALF_OPEN) {
                if (circuit__transition(b, &c, to, CIRCUIT_CAUSE_POLICY, &cnt, now,
                                        tk->call_ctx))
                    return true;
            } else if (circuit__core_cas(b, &c, n)) {
                circuit__ring_after_count(b, before, failure, evicted_failure);
                return true;
            }
        }
        /* Lost a CAS to another result: back off before the next try, so
         * two CPUs do not keep stealing the line from each other
         * (exponential; not a lock: no one waits for anyone). */
        ck_backoff_eb(&backoff);
    }
}

bool circuit_done(circuit_ticket *t, int result)
{
    circuit__ticket *tk = tk_of(t, "circuit_done");
    /* relaxed: the ticket's hand-off between threads is the caller's */
    uint64_t st = circuit__ld_rlx(&tk->status);
    if (st != tk_word(CIRCUIT__TK_LIVE))
        done_refused(st);
    circuit_breaker *b = tk->b;
    check_breaker(b, "circuit_done");

    /* classify runs while the ticket is still live: if it unwinds (a C++
     * exception, pthread_exit), the caller's guard releases the ticket and
     * frees its probe slot at once (P3). */
    circuit_outcome o = ask_classify(b, tk->call_ctx, result);
    if (o != CIRCUIT_SUCCESS && o != CIRCUIT_FAILURE && o != CIRCUIT_IGNORED)
        circuit__abort("classify returned an invalid outcome (%d) for result %d; it must "
                       "return CIRCUIT_SUCCESS, CIRCUIT_FAILURE or CIRCUIT_IGNORED",
                       (int)o, result);
    bool probe = tk->slot != CIRCUIT__NO_SLOT;
    if (probe) {
        /* T5: done racing release on a probe ticket: exactly one settles and
         * frees the slot. acq_rel: the winner's slot work follows it. */
        if (!circuit__cas_acq_rel(&tk->status, &st, tk_word(CIRCUIT__TK_DONE)))
            done_refused(st);
    } else {
        /* T5 (0.2): a closed ticket is settled by one thread; no locked
         * instruction. Re-read: classify may have settled it (a caller bug
         * T4 still reports). */
        st = circuit__ld_rlx(&tk->status);
        if (st != tk_word(CIRCUIT__TK_LIVE))
            done_refused(st);
        circuit__st_rlx(&tk->status, tk_word(CIRCUIT__TK_DONE));
        if (o == CIRCUIT_SUCCESS) {
            /* acquire: pairs with the CAS that entered the fast interval */
            uint64_t lo = circuit__ld128_lo_acq(&b->core);
            if (circuit__fast(lo) && circuit__gen(lo) == tk->gen &&
                circuit__fast_success(b, lo) == CIRCUIT__FAST_COUNTED) {
                finish_call(b);
                return true; /* L6: counted on this CPU's line */
            }
        }
    }

    int64_t now = 0;
    bool have_now = false;
    uint64_t lo = circuit__ld128_lo_acq(&b->core); /* acquire: decisions follow */
    if (circuit__st(lo) != CIRCUIT__ST_CLOSED || probe) {
        /* Time-driven changes due by now, this probe's own timeout included. */
        now = circuit__now();
        have_now = true;
        circuit__advance(b, now, tk->call_ctx, NULL);
    }

    bool counted;
    if (o == CIRCUIT_IGNORED) {
        /* acquire: table core */
        counted = circuit__gen(circuit__ld128_lo_acq(&b->core)) == tk->gen;
        circuit__total_add(b, counted ? CIRCUIT__T_IGNORED : CIRCUIT__T_LATE);
    } else {
        counted = count_result(b, tk, o == CIRCUIT_FAILURE, now, have_now);
        circuit__total_add(b, !counted ? CIRCUIT__T_LATE
                              : o == CIRCUIT_FAILURE ? CIRCUIT__T_FAILURES
                                                     : CIRCUIT__T_SUCCESSES);
    }

    if (probe)
        circuit__slot_release(b, tk->slot, tk->gen, tk->reuse);
    finish_call(b);
    return counted;
}

void circuit_release(circuit_ticket *t)
{
    circuit__ticket *tk = tk_of(t, "circuit_release");
    uint64_t st = circuit__ld_rlx(&tk->status); /* relaxed: table ticket status */
    if (st == 0)
        return; /* blank (CIRCUIT_TICKET_INIT) */
    if ((st & ~UINT64_C(0xff)) != CIRCUIT__TICKET_MAGIC ||
        (st & 0xff) < CIRCUIT__TK_LIVE || (st & 0xff) > CIRCUIT__TK_REJECTED)
        circuit__abort("circuit_release: ticket not filled by circuit_allow");
    if (st != tk_word(CIRCUIT__TK_LIVE))
        return; /* settled or rejected: nothing to do (T3) */
    circuit_breaker *b = tk->b;
    check_breaker(b, "circuit_release");
    CIRCUIT__HOOK(CIRCUIT_TP_RELEASE_BEFORE_CAS);
    if (tk->slot == CIRCUIT__NO_SLOT) {
        /* T5 (0.2): no arbitration for a closed ticket */
        circuit__st_rlx(&tk->status, tk_word(CIRCUIT__TK_RELEASED));
        circuit__total_add(b, CIRCUIT__T_RELEASED);
        return;
    }
    /* acq_rel: the winner's slot work follows it (T5) */
    if (!circuit__cas_acq_rel(&tk->status, &st, tk_word(CIRCUIT__TK_RELEASED)))
        return; /* circuit_done won the race (T5) */
    circuit__total_add(b, CIRCUIT__T_RELEASED);
    /* Free the slot now (P3), unless its timeout already fell due: then the
     * next allow or done times it out as of that moment (P1). */
    circuit__slot_release_unless_due(b, tk->slot, tk->gen, tk->reuse, circuit__now());
}

/* The 0.1/0.2 guard's name for circuit_release (circuit.h): one function,
 * two exported symbols, no second body. */
extern __typeof__(circuit_release) circuit_ticket_guard_release
    __attribute__((alias("circuit_release")));

/* ---- operator control (SPEC OP1-OP3) ------------------------------------------ */

/* Makes the operator's transition to `to` unless the breaker is already in
 * `already`; first the time-driven changes that fell due, as allow would. */
static int operate(circuit_breaker *b, void *call_ctx, circuit_state to, unsigned already)
{
    int64_t now = circuit__now();
    circuit__u128 c = circuit__advance(b, now, call_ctx, NULL);
    int rc = 0;
    for (;;) {
        unsigned st = circuit__st(c.lo);
        if (st == already) {
            rc = EALREADY;
            break;
        }
        if (circuit__fast(c.lo)) {
            circuit__fold(b, &c); /* exact final counts (L6) */
            continue;
        }
        if (st == CIRCUIT__ST_OPEN && circuit__open_over(c.hi, now)) {
            c = circuit__advance(b, now, call_ctx, NULL); /* made open in the past */
            continue;
        }
        circuit_counts cnt;
        circuit__counts(b, c, &cnt);
        CIRCUIT__HOOK(CIRCUIT_TP_OPERATOR_BEFORE_CAS);
        if (circuit__transition(b, &c, to, CIRCUIT_CAUSE_OPERATOR, &cnt, now, call_ctx))
            break;
    }
    finish_call(b);
    return rc;
}

int circuit_isolate(circuit_breaker *b, void *call_ctx)
{
    check_breaker(b, "circuit_isolate");
    return operate(b, call_ctx, CIRCUIT_ISOLATED, CIRCUIT__ST_ISOLATED);
}

int circuit_reset(circuit_breaker *b, void *call_ctx)
{
    check_breaker(b, "circuit_reset");
    return operate(b, call_ctx, CIRCUIT_CLOSED, CIRCUIT__ST_CLOSED);
}

/* ---- the pure read ------------------------------------------------------------ */

uint64_t circuit_get_salt(const circuit_breaker *b)
{
    check_breaker(b, "circuit_get_salt");
    return b->salt;
}

circuit_state circuit_get_state(const circuit_breaker *b)
{
    check_breaker(b, "circuit_get_state");
    /* acquire, and a pair the word really held: hi is this open state's end */
    circuit__u128 c = circuit__ld128_acq(&b->core);
    unsigned st = circuit__st(c.lo);
    if (st != CIRCUIT__ST_OPEN)
        return circuit__pub_state(st);
    return circuit__open_over(c.hi, circuit__now()) ? CIRCUIT_HALF_OPEN : CIRCUIT_OPEN;
}

/* ---- test-only seam ------------------------------------------------------------ */
#ifdef CIRCUIT_TESTING

int circuit_test_force_counts(circuit_breaker *b, circuit_outcome kind, int64_t run,
                              int64_t timed_out)
{
    check_breaker(b, "circuit_test_force_counts");
    circuit__u128 c = circuit__ld128_acq(&b->core); /* acquire: table core */
    if (circuit__fast(c.lo))
        circuit__fold(b, &c);
    unsigned st = circuit__st(c.lo);
    if (st == CIRCUIT__ST_OPEN || st == CIRCUIT__ST_ISOLATED || run < 0 ||
        run > CIRCUIT_RUN_MAX || timed_out < 0 || timed_out > CIRCUIT_TIMED_OUT_MAX ||
        (st == CIRCUIT__ST_CLOSED && timed_out != 0) ||
        (kind != CIRCUIT_SUCCESS && kind != CIRCUIT_FAILURE))
        return EINVAL;
    uint64_t hi = c.hi & (CIRCUIT__HI_FAIL_MASK | CIRCUIT__HI_FULL);
    hi |= (kind == CIRCUIT_FAILURE ? CIRCUIT__HI_LAST_FAIL : 0);
    hi |= (uint64_t)run << CIRCUIT__HI_RUN_SHIFT;
    hi |= (uint64_t)timed_out << CIRCUIT__HI_TO_SHIFT;
    circuit__u128 nw = {c.lo, hi};
    return circuit__core_cas(b, &c, nw) ? 0 : EAGAIN;
}

size_t circuit_test_footprint(const circuit_breaker *b)
{
    check_breaker(b, "circuit_test_footprint");
    return b->footprint;
}

int64_t circuit_test_pending(const circuit_breaker *b)
{
    check_breaker(b, "circuit_test_pending");
    /* relaxed: a test looks at a hint */
    return (int64_t)circuit__ld_rlx((uint64_t *)(uintptr_t)&b->pending);
}

bool circuit_test_fast_mode(const circuit_breaker *b)
{
    check_breaker(b, "circuit_test_fast_mode");
    return circuit__fast(circuit__ld128_lo_acq(&b->core)); /* acquire: table core */
}

bool circuit_test_fold(circuit_breaker *b)
{
    check_breaker(b, "circuit_test_fold");
    circuit__u128 c = circuit__ld128_acq(&b->core); /* acquire: table core */
    return circuit__fast(c.lo) && circuit__fold(b, &c);
}

#endif
