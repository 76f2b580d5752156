/*
 * The breaker's public calls, top floor of the core: construction, the life
 * of a ticket (admission by circuit_allow, settling by circuit_done /
 * circuit_release, the checks of CFG4 and T4), the operator calls
 * (isolate, reset) and the pure read (circuit_get_state). Each reads top
 * down: it checks its arguments, asks timeouts.c for the time-driven
 * changes, probes.c for a probe slot, counting.c to count (closed.c,
 * halfopen.c), transition.c to change state, and delivers what it published
 * before it returns. The floors below are drawn in internal.h.
 *
 * Fast paths. Closed: allow is one 8-byte acquire load of the closed
 * mirror (closed_state.h), filling the ticket and one per-CPU total; a success
 * (whatever the window holds, L6) is classify, one
 * 8-byte load of the mirror and one CAS of this CPU's own cell
 * (closed.h): no line another CPU writes, and none a failure writes.
 * Neither reads the clock. Open: allow is a load of the mirror (shut) and
 * of the state word, one clock read and one per-CPU total.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "closed.h"
#include "counting.h"
#include "delivery.h"
#include "percpu.h"
#include "probes.h"
#include "transition.h"

/* ---- argument checks (CFG4) ---------------------------------------- */

static inline circuit__ticket *tk_of(circuit_ticket *t, const char *fn)
{
    if (!t)
        circuit__abort("%s: ticket is NULL", fn);
    return (circuit__ticket *)(void *)t;
}

static inline uint64_t tk_word(unsigned phase) { return CIRCUIT__TICKET_MAGIC | phase; }

/* Aborts for every ticket that circuit_done may not settle. */
__attribute__((noreturn)) static void done_refused(uint64_t status)
{
    if ((status & ~UINT64_C(0xff)) != CIRCUIT__TICKET_MAGIC)
        circuit__abort("circuit_done: ticket not filled by circuit_allow");
    switch ((unsigned)(status & 0xff)) {
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

_Static_assert(sizeof(struct circuit_breaker) + sizeof(circuit__shared) <= CIRCUIT_FOOTPRINT_FIXED,
               "the fixed part documented at CIRCUIT_FOOTPRINT_MAX");
_Static_assert(sizeof(circuit__pcpu) == CIRCUIT_FOOTPRINT_PER_CPU, "a unit per CPU (L5)");

/* The CPUs configured, read once per process: glibc answers
 * sysconf(_SC_NPROCESSORS_CONF) by reading /sys/devices/system/cpu, which
 * costs half of building a breaker. Threads that race on the first
 * call each compute the same value and store it; 0 means not yet known. */
static uint64_t cpus_cache;


uint32_t circuit__cpus_configured(void)
{
    uint32_t forced = CIRCUIT__TEST_CPUS(); /* circuit_test_set_cpus (test build) */
    if (forced)
        return forced;
    /* relaxed: the value is the whole message; every thread that computes
     * it computes the same number */
    uint64_t n = circuit__ld_rlx(&cpus_cache);
    if (n != 0)
        return (uint32_t)n;
    long c = sysconf(_SC_NPROCESSORS_CONF);
    n = c < 1 ? 1u : c > CIRCUIT__MAX_CPUS ? CIRCUIT__MAX_CPUS : (uint64_t)c;
    circuit__st_rlx(&cpus_cache, n); /* relaxed: see above */
    return (uint32_t)n;
}

/* Salts handed to breakers whose spec leaves salt at 0: 1, 2, 3, ... in
 * the order they are built in this process. */
static uint64_t salt_next;

/* The frames of the callbacks running on this thread (internal.h). */
__thread circuit__cb_frame *circuit__cb_top __attribute__((tls_model("initial-exec")));

/* CFG4: the pointers circuit_new needs. */
void circuit__check_spec(circuit_breaker **out, const circuit_spec *spec, const char *fn)
{
    if (out)
        *out = NULL;
    else if (strncmp(fn, "circuit_shared_init", 19) != 0) /* no out: both shared inits */
        circuit__abort("%s: out is NULL", fn);
    if (!spec)
        circuit__abort("%s: spec is NULL", fn);
    if (!spec->policy.trip)
        circuit__abort("%s: policy.trip is NULL", fn);
    if (!spec->policy.probe)
        circuit__abort("%s: policy.probe is NULL", fn);
    if (!spec->classify)
        circuit__abort("%s: classify is NULL", fn);
    /* observe may be NULL (CFG4): no observer */
}

/* The arrays after the shared state, in this order: the probe slots
 * (16-byte aligned), the closed window's bitmap (16-byte words; in the
 * shared state when it is one word) and the window ring. One layout for
 * circuit_new's block and the shared region (shared.c). */
size_t circuit__arrays_bytes(uint32_t window, uint32_t probes)
{
    size_t ring_bytes = window > 1 ? (size_t)window * sizeof(uint64_t) : 0;
    size_t cbits_bytes = window > 64 ? (size_t)circuit__cbits_words(window) * sizeof(circuit__u128) : 0;
    return (size_t)probes * sizeof(circuit__u128) + cbits_bytes + ring_bytes;
}

void circuit__handle_carve(circuit_breaker *b, circuit__shared *s, char *arrays, uint32_t window,
                           uint32_t probes)
{
    _Static_assert(sizeof(circuit__shared) % 16 == 0, "the probe slots stay aligned");
    size_t ring_bytes = window > 1 ? (size_t)window * sizeof(uint64_t) : 0;
    size_t cbits_bytes = window > 64 ? (size_t)circuit__cbits_words(window) * sizeof(circuit__u128) : 0;
    char *at = arrays;
    b->s = s;
    b->slots = (circuit__u128 *)(void *)at;
    at += (size_t)probes * sizeof(circuit__u128);
    at += cbits_bytes; /* the closed bitmap's words (circuit__cbits) */
    b->ring = ring_bytes ? (uint64_t *)(void *)at : NULL;
    b->window = window;
    b->probes = probes;
}

/* The handle, the shared state and the arrays in ONE block, zeroed (the
 * handle and the shared state are multiples of 64 bytes); then its units
 * of the per-CPU arena (percpu.c: 16 bytes per CPU, in chunks shared by up
 * to 64 breakers); sizes and footprint set. The only allocations of a
 * breaker's life (CFG3); NULL when memory ran out. */
static circuit_breaker *breaker_alloc(uint32_t window, uint32_t probes, uint32_t ncpu)
{
    _Static_assert(sizeof(circuit_breaker) % 64 == 0, "the shared state stays aligned");
    size_t total = sizeof(circuit_breaker) + sizeof(circuit__shared) +
                   circuit__arrays_bytes(window, probes);
    circuit_breaker *b = NULL;
    if (posix_memalign((void **)&b, 64, total) != 0)
        return NULL;
    memset(b, 0, total);
    circuit__shared *s = (circuit__shared *)(void *)((char *)b + sizeof *b);
    circuit__handle_carve(b, s, (char *)s + sizeof *s, window, probes);
    b->ncpu = ncpu;
    /* the per-CPU part: a unit of the arena per CPU (percpu.c) */
    if (!circuit__pcpu_take(b)) {
        free(b);
        return NULL;
    }
    b->footprint = (uint32_t)(total + (size_t)ncpu * sizeof(circuit__pcpu));
    return b;
}

/* The process's callbacks, from a spec (circuit_new, circuit_shared_attach). */
void circuit__handle_callbacks(circuit_breaker *b, const circuit_spec *spec)
{
    b->policy = spec->policy;
    b->classify = spec->classify;
    b->classify_arg = spec->classify_arg;
    b->observe = spec->observe;
    b->observe_arg = spec->observe_arg;
    b->open_for = spec->open_for;
    b->open_for_arg = spec->open_for_arg;
}


int circuit_new(circuit_breaker **out, const circuit_spec *spec, char *errbuf,
                size_t errbuf_len)
{
    circuit__check_spec(out, spec, "circuit_new");
    int rc = circuit__validate(&spec->config, &spec->policy, errbuf, errbuf_len);
    if (rc)
        return rc;
    uint32_t window = (uint32_t)spec->config.window;
    circuit_breaker *b = breaker_alloc(window, (uint32_t)spec->config.probes,
                                       circuit__cpus_configured());
    if (!b)
        return ENOMEM;
    b->cfg = spec->config;
    circuit__handle_callbacks(b, spec);
    /* relaxed: only the uniqueness of the value matters, no order */
    b->salt = spec->salt ? spec->salt : circuit__faa_rlx(&salt_next, 1) + 1;
    b->seq_mod = (uint64_t)window * ((UINT64_C(1) << 31) / window);
    b->window_magic = UINT64_MAX / window + 1;
    circuit__closed_init(b); /* the state word: closed, generation 0 */
    circuit__st128_init(&b->s->probe_hint, (circuit__u128){(uint64_t)INT64_MAX, 0});
    circuit__delivery_init(b);
    b->magic = CIRCUIT__MAGIC;
    *out = b;
    return 0;
}

const char *circuit__cb_name(unsigned kind)
{
    static const char *const names[] = {"classify", "trip", "probe", "open_for", "observe"};
    return kind < sizeof names / sizeof names[0] ? names[kind] : "a callback";
}

void circuit_free(circuit_breaker *b)
{
    if (!b)
        return;
    circuit__check_breaker(b, "circuit_free");
    if (b->shared)
        circuit__abort("circuit_free: the breaker is a handle attached by circuit_shared_attach; "
                       "free it with circuit_shared_detach (the shared memory is the caller's)");
    circuit__check_no_callback(b, "circuit_free");
    circuit__delivery_destroy(b);
    /* Through a volatile lvalue: a plain store just before free() is a dead
     * store the optimiser removes, and a second circuit_free would then find
     * the magic intact and reach glibc's double-free check instead of the
     * CFG4 message. (Single-threaded by contract: no other call may run on a
     * breaker being freed, so this is no shared access.) */
    *(volatile uint64_t *)&b->magic = 0;
    circuit__pcpu_give(b); /* its units of the per-CPU arena */
    free(b); /* the one block (breaker_alloc) */
}

/* CFG4: freeing a breaker (or a handle) from inside one of its own
 * callbacks would leave the call that runs the callback reading freed
 * memory. */
void circuit__check_no_callback(const circuit_breaker *b, const char *fn)
{
    for (const circuit__cb_frame *f = circuit__cb_top; f; f = f->prev)
        if ((f->in & ~(uintptr_t)63) == (uintptr_t)b) {
            const char *what = circuit__cb_name((unsigned)(f->in & 63));
            circuit__abort("%s: called from inside %s of the same breaker; a breaker "
                           "cannot be freed by its own callbacks (free it after the call that "
                           "ran %s has returned)",
                           fn, what, what);
        }
}

/* ---- admission ------------------------------------------------------------- */

/* Fills the ticket (internal.h) of a call admitted while closed, `word`
 * the closed mirror's value for its generation and epoch. */
static inline void admit(circuit_breaker *b, circuit__ticket *tk, void *call_ctx, uint64_t word)
{
    tk->b = b;
    tk->call_ctx = call_ctx;
    tk->word = word;
    /* relaxed: handing the ticket to another thread is the caller's own
     * synchronisation (table: ticket status) */
    circuit__st_rlx(&tk->status, tk_word(CIRCUIT__TK_LIVE));
    uint32_t cpu = circuit__my_index(b);
    tk->at.unit = circuit__unit(b, cpu);
    circuit__total_add_at(b, cpu, CIRCUIT__T_ADMITTED);
}

/* Fills the ticket of a probe admitted in `gen` on `slot`. */
static inline void admit_probe(circuit_breaker *b, circuit__ticket *tk, void *call_ctx,
                               uint32_t gen, uint32_t slot, uint32_t reuse)
{
    tk->b = b;
    tk->call_ctx = call_ctx;
    tk->word = circuit__word_lo(0, gen, 0) | ((uint64_t)reuse << 32);
    tk->at.slot = slot;
    circuit__st_rlx(&tk->status, tk_word(CIRCUIT__TK_PROBE)); /* relaxed: as above */
    circuit__total_add(b, CIRCUIT__T_ADMITTED);
}

/* Marks the ticket rejected and says why; returns false (allow's answer). */
static inline bool refuse(circuit_breaker *b, circuit__ticket *tk, circuit_rejection *rej,
                          circuit_state state, int64_t left)
{
    if (rej)
        *rej = (circuit_rejection){state, left};
    circuit__st_rlx(&tk->status, tk_word(CIRCUIT__TK_REJECTED)); /* relaxed: table ticket status */
    circuit__total_add(b, CIRCUIT__T_REJECTED);
    return false;
}

/* Admission when the word seen is not closed: the clock, the time-driven
 * changes due, then the state decides (S1-S5). */
static bool allow_slow(circuit_breaker *b, circuit__ticket *tk, void *call_ctx,
                       circuit_rejection *rej, uint64_t seen)
{
    /* The clock is read AFTER the word: an open state seen now is made
     * from a clock read before ours, so retry_after never exceeds the
     * period. */
    int64_t now = circuit__now();
    circuit__slot0 slot0 = {false, 0, 0};
    for (;;) {
        circuit__u128 c = circuit__advance(b, now, call_ctx, &slot0);
        /* slot0.held: this call made open -> half-open and is that
         * generation's first probe (S3), whatever the state is now */
        uint32_t gen = slot0.held ? slot0.gen : circuit__gen(c.lo);
        switch (slot0.held ? CIRCUIT__ST_HALF_OPEN : circuit__code(c.lo)) {
        case CIRCUIT__ST_CLOSED:
            CIRCUIT__HOOK(CIRCUIT_TP_ALLOW_BEFORE_ADMIT);
            admit(b, tk, call_ctx, circuit__mirror_of(c.lo));
            return true;
        case CIRCUIT__ST_ISOLATED:
            return refuse(b, tk, rej, CIRCUIT_ISOLATED, 0);
        case CIRCUIT__ST_OPEN:
            if (c.lo != seen) {
                /* This open state is newer than our clock read: read the
                 * clock again, so retry_after is measured from after it. */
                seen = c.lo;
                now = circuit__now();
                continue;
            }
            return refuse(b, tk, rej, CIRCUIT_OPEN, circuit__open_left(c.hi, now));
        default: /* half-open */
            break;
        }
        if (!slot0.held)
            CIRCUIT__HOOK(CIRCUIT_TP_ALLOW_BEFORE_ADMIT);
        uint32_t slot, reuse;
        circuit__admit a = circuit__probe_admit(b, gen, now, &slot0, &slot, &reuse);
        if (a == CIRCUIT__FULL)
            return refuse(b, tk, rej, CIRCUIT_HALF_OPEN, 0);
        if (a == CIRCUIT__STALE) {
            /* acquire: decide again from the new state, as of now */
            seen = circuit__ld128_lo_acq(&b->s->core);
            now = circuit__now();
            continue;
        }
        CIRCUIT__HOOK(CIRCUIT_TP_SLOT_HELD);
        admit_probe(b, tk, call_ctx, gen, slot, reuse);
        return true;
    }
}

/* circuit_allow past its fast path: a transition waiting for delivery, or
 * the closed mirror shut (out of line, so that the fast path saves no
 * registers: a tail call) */
static __attribute__((noinline)) bool allow_rest(circuit_breaker *b, void *call_ctx,
                                                 circuit_ticket *t, circuit_rejection *rej)
{
    /* the argument checks that abort (circuit_allow's fast path only
     * branches here) */
    circuit__check_breaker(b, "circuit_allow");
    circuit__ticket *tk = tk_of(t, "circuit_allow");
    circuit__deliver_pending(b); /* O4: before admitting */
    /* acquire: as in circuit_allow */
    uint64_t seen = circuit__mirror_ld(b);
    if (circuit__code(seen) == CIRCUIT__ST_CLOSED) {
        CIRCUIT__HOOK(CIRCUIT_TP_ALLOW_BEFORE_ADMIT);
        admit(b, tk, call_ctx, circuit__mirror_of(seen));
        return true;
    }
    /* Shut: the state word decides. acquire: as above */
    seen = circuit__ld128_lo_acq(&b->s->core);
    if (circuit__code(seen) == CIRCUIT__ST_CLOSED) {
        CIRCUIT__HOOK(CIRCUIT_TP_ALLOW_BEFORE_ADMIT);
        admit(b, tk, call_ctx, circuit__mirror_of(seen));
        circuit__mirror_set(b); /* closed with the mirror shut: open it (no intent) */
        return true;
    }
    bool admitted = circuit__code(seen) == CIRCUIT__ST_ISOLATED
                        ? refuse(b, tk, rej, CIRCUIT_ISOLATED, 0)
                        : allow_slow(b, tk, call_ctx, rej, seen);
    circuit__deliver_pending(b); /* O3 */
    return admitted;
}

bool circuit_allow(circuit_breaker *b, void *call_ctx, circuit_ticket *t,
                   circuit_rejection *rej)
{
    /* Arguments that abort (CFG4) are told and reported by allow_rest:
     * the fast path makes no call. The ticket's old contents are not looked
     * at: it is usually uninitialised stack, which may hold any bytes. */
    if (__builtin_expect(!b || b->magic != CIRCUIT__MAGIC || !t, 0))
        return allow_rest(b, call_ctx, t, rej);
    circuit__ticket *tk = (circuit__ticket *)(void *)t;
    /* O4: a transition waiting for delivery goes first (allow_rest).
     * relaxed: as circuit__deliver_pending's look */
    if (__builtin_expect(circuit__ld_rlx(&b->pending) != 0, 0))
        return allow_rest(b, call_ctx, t, rej);
    /* The closed mirror (docs/design/mirror.md): open for generation g only while the
     * breaker is closed in g, on a line no failure writes. acquire: a
     * ticket of this generation must see what the CAS that made it
     * published (the mirror's set read that CAS's word with acquire). */
    uint64_t seen = circuit__mirror_ld(b);
    uint32_t cpu;
    if (__builtin_expect(!circuit__mirror_open(seen), 0))
        return allow_rest(b, call_ctx, t, rej);
    if (__builtin_expect(!circuit__cpu_quick(&cpu), 0))
        return allow_rest(b, call_ctx, t, rej);
    /* The fast path: no clock, nothing published, no call. admit(), with
     * the slow side of the admitted total as a tail call. */
    CIRCUIT__HOOK(CIRCUIT_TP_ALLOW_BEFORE_ADMIT);
    tk->b = b;
    tk->call_ctx = call_ctx;
    tk->word = seen; /* the mirror's value */
    circuit__st_rlx(&tk->status, tk_word(CIRCUIT__TK_LIVE)); /* relaxed: as in admit */
    cpu = circuit__index_of(b, cpu);
    circuit__pcpu *unit = circuit__unit(b, cpu);
    tk->at.unit = unit;
    uint64_t v = circuit__ld_rlx(&unit->tot); /* relaxed: the CAS decides */
    while (__builtin_expect(circuit__tot_value(v, CIRCUIT__T_ADMITTED) <
                                circuit__tot_batch(CIRCUIT__T_ADMITTED) - 1, 1)) {
        /* relaxed: a total orders nothing (table: pcpu[].tot) */
        if (circuit__cas_rlx(&unit->tot, &v, v + 1))
            return true;
    }
    return circuit__total_add_slow_true(b, cpu, CIRCUIT__T_ADMITTED);
}

/* ---- settling ------------------------------------------------------------------ */

/* The caller's classify, run inside a callback frame (CFG4). */
static inline circuit_outcome classify(circuit_breaker *b, const circuit__ticket *tk, int result)
{
    CIRCUIT__CB_FRAME(frame, b, CIRCUIT__CB_CLASSIFY);
    return b->classify(b->classify_arg, tk->call_ctx, result);
}

/* Aborts unless classify's answer is an outcome. */
static void outcome_check(circuit_outcome o, int result)
{
    if (o != CIRCUIT_SUCCESS && o != CIRCUIT_FAILURE && o != CIRCUIT_IGNORED)
        circuit__abort("classify returned an invalid outcome (%d) for result %d; it must "
                       "return CIRCUIT_SUCCESS, CIRCUIT_FAILURE or CIRCUIT_IGNORED",
                       (int)o, result);
}

/* Marks a live ticket settled by done (T4, T5), or aborts. */
static void settle_by_done(circuit__ticket *tk, uint64_t status)
{
    if (status == tk_word(CIRCUIT__TK_PROBE)) {
        /* T5: done racing release on a probe ticket: exactly one settles and
         * frees the slot. acq_rel: the winner's slot work follows it. */
        if (!circuit__cas_acq_rel(&tk->status, &status, tk_word(CIRCUIT__TK_DONE)))
            done_refused(status);
        return;
    }
    /* T5: a closed ticket is settled by one thread; no locked instruction.
     * Re-read: classify may have settled it (a caller bug T4 still
     * reports). relaxed: table ticket status. */
    status = circuit__ld_rlx(&tk->status);
    if (status != tk_word(CIRCUIT__TK_LIVE))
        done_refused(status);
    circuit__st_rlx(&tk->status, tk_word(CIRCUIT__TK_DONE)); /* relaxed: the same */
}

/* Everything after classify but a closed success counted on its cell: a
 * probe's result, a failure or an ignored result, and a closed success the
 * cell could not take (`settled`: done has marked the ticket already). */
__attribute__((noinline)) static bool done_rest(circuit__ticket *tk, uint64_t status,
                                                 circuit_outcome o, int result, bool settled)
{
    circuit_breaker *b = tk->b;
    outcome_check(o, result);
    bool probe = status == tk_word(CIRCUIT__TK_PROBE);
    if (!settled)
        settle_by_done(tk, status);
    uint32_t gen = circuit__ticket_gen(tk);
    if (!probe && o == CIRCUIT_SUCCESS &&
        circuit__closed_success(b, gen, tk->call_ctx, tk->at.unit) == CIRCUIT__COUNTED) {
        circuit__deliver_pending(b);
        return true; /* L6: counted on a per-CPU cell, whatever the window holds */
    }

    int64_t now = 0;
    bool have_now = false;
    /* acquire: decisions follow */
    if (circuit__code(circuit__ld128_lo_acq(&b->s->core)) != CIRCUIT__ST_CLOSED || probe) {
        /* Time-driven changes due by now, this probe's own timeout included. */
        now = circuit__now();
        have_now = true;
        circuit__advance(b, now, tk->call_ctx, NULL);
    }
    bool counted;
    if (!probe && o == CIRCUIT_SUCCESS) {
        counted = false; /* late (above) */
        circuit__total_add(b, CIRCUIT__T_LATE);
    } else {
        counted = circuit__count(b, gen, probe, o, tk->call_ctx, now, have_now);
    }
    if (probe)
        circuit__slot_release(b, tk->at.slot, gen, circuit__ticket_reuse(tk));
    circuit__deliver_pending(b); /* O3 */
    return counted;
}

/* circuit_done of a probe ticket, or of one it may not settle (aborts). */
__attribute__((noinline)) static bool done_probe(circuit__ticket *tk, uint64_t status, int result)
{
    if (status != tk_word(CIRCUIT__TK_PROBE))
        done_refused(status);
    circuit_breaker *b = tk->b;
    circuit__check_breaker(b, "circuit_done");
    /* classify runs while the ticket is live: if it unwinds, the caller's
     * guard releases the ticket and frees its slot at once (P3) */
    circuit_outcome o = classify(b, tk, result);
    return done_rest(tk, status, o, result, false);
}

bool circuit_done(circuit_ticket *t, int result)
{
    circuit__ticket *tk = tk_of(t, "circuit_done");
    uint64_t status = circuit__ld_rlx(&tk->status); /* relaxed: table ticket status */
    if (__builtin_expect(status != tk_word(CIRCUIT__TK_LIVE), 0))
        return done_probe(tk, status, result);
    /* A live ticket's breaker is not NULL (circuit_allow set both); its
     * magic tells a breaker freed since. */
    circuit_breaker *b = tk->b;
    if (__builtin_expect(b->magic != CIRCUIT__MAGIC, 0))
        circuit__check_breaker(b, "circuit_done");

    /* classify runs while the ticket is still live: if it unwinds (a C++
     * exception, pthread_exit), the caller's guard releases it (P3). */
    /* result is kept on the stack for the slow paths (an invalid outcome's
     * message), not in a register saved on every call */
    volatile int kept = result;
    circuit_outcome o = classify(b, tk, result);
    /* From here the ticket is read again, not kept across the call: the
     * fast path then needs no register saved. */
    if (__builtin_expect(o != CIRCUIT_SUCCESS, 0))
        return done_rest(tk, status, o, kept, false);
    /* A closed success (L6): counted on the cell admission counted on,
     * while the mirror is still open for the generation and epoch the
     * ticket was admitted in (an intent shuts it: then done_rest helps
     * finish it, L1) and the cell is unsealed in that epoch. Anything
     * else: done_rest (a fresh epoch, a seal, the limit, an intent). */
    settle_by_done(tk, status);
    b = tk->b;
    uint64_t word = tk->word;
    /* acquire: the epoch's cells as its start left them (word.h) */
    if (__builtin_expect(circuit__mirror_ld(b) != word, 0))
        return done_rest(tk, status, o, kept, true);
    /* the mirror word's bits 32-62 are the epoch, bit 63 clear: the
     * cell's high half while it counts this epoch */
    uint64_t v;
    if (circuit__cell_add(&tk->at.unit->cell, word, &v)) {
        circuit__deliver_pending(b);
        return true;
    }
    return done_rest(tk, status, o, kept, true);
}

void circuit_release(circuit_ticket *t)
{
    circuit__ticket *tk = tk_of(t, "circuit_release");
    uint64_t status = circuit__ld_rlx(&tk->status); /* relaxed: table ticket status */
    if (status == 0)
        return; /* blank (CIRCUIT_TICKET_INIT) */
    if ((status & ~UINT64_C(0xff)) != CIRCUIT__TICKET_MAGIC ||
        (status & 0xff) < CIRCUIT__TK_LIVE || (status & 0xff) > CIRCUIT__TK_PROBE)
        circuit__abort("circuit_release: ticket not filled by circuit_allow");
    if (status != tk_word(CIRCUIT__TK_LIVE) && status != tk_word(CIRCUIT__TK_PROBE))
        return; /* settled or rejected: nothing to do (T3) */
    circuit_breaker *b = tk->b;
    circuit__check_breaker(b, "circuit_release");
    CIRCUIT__HOOK(CIRCUIT_TP_RELEASE_BEFORE_CAS);
    if (status == tk_word(CIRCUIT__TK_LIVE)) {
        /* T5: no arbitration for a closed ticket (table: ticket status) */
        circuit__st_rlx(&tk->status, tk_word(CIRCUIT__TK_RELEASED));
        circuit__total_add(b, CIRCUIT__T_RELEASED);
        return;
    }
    /* acq_rel: the winner's slot work follows it (T5) */
    if (!circuit__cas_acq_rel(&tk->status, &status, tk_word(CIRCUIT__TK_RELEASED)))
        return; /* circuit_done won the race (T5) */
    circuit__total_add(b, CIRCUIT__T_RELEASED);
    /* Free the slot now (P3), unless its timeout already fell due: then the
     * next allow or done times it out as of that moment (P1). */
    circuit__slot_release_unless_due(b, tk->at.slot, circuit__ticket_gen(tk),
                                     circuit__ticket_reuse(tk), circuit__now());
}

/* The guard's own name for circuit_release, kept exported for programs
 * built against it (circuit.h): one function, two symbols, one body. */
extern __typeof__(circuit_release) circuit_ticket_guard_release
    __attribute__((alias("circuit_release")));

/* ---- operator control (OP1-OP3) ------------------------------------------ */

/* Makes the operator's transition to `to` unless the breaker is already in
 * `already`; first the time-driven changes that fell due, as allow would. */
static int operate(circuit_breaker *b, void *call_ctx, circuit_state to, unsigned already)
{
    int64_t now = circuit__now();
    circuit__u128 c = circuit__advance(b, now, call_ctx, NULL);
    int rc = 0;
    for (bool first = true;; first = false) {
        if (!first) {
            /* The word moved since our clock read (a CAS lost, an intent
             * finished): a state made after it (a reopen) must be judged
             * by a clock read after it, or its open period would look over
             * and be left without its time-driven change (OP1, OP2, P1) */
#if !defined(CIRCUIT_PLANT_OPERATOR_STALE_CLOCK)
            now = circuit__now();
#else
            /* PLANTED BUG (tests/sched/PLANTS.md): every
             * try is judged by the first clock read */
#endif
            c = circuit__advance(b, now, call_ctx, NULL);
        }
        unsigned code = circuit__code(c.lo);
#if defined(CIRCUIT_PLANT_RESET_INTENT_EALREADY)
        /* PLANTED BUG (tests/sched/PLANTS.md): a closed
         * word with a trip's intent answers a reset EALREADY (OP2) */
        if (code == already) {
            rc = EALREADY;
            break;
        }
#endif
        if (code == CIRCUIT__ST_CLOSED && circuit__closed_intent(c.lo) != CIRCUIT__INTENT_NONE) {
            /* a trip, isolate or fold another call started: finish it
             * first (L1), then decide from the state it leaves (a reset
             * racing a trip's intent resets the open breaker, OP2) */
            bool have_now = true;
            circuit__complete(b, c, &now, &have_now, call_ctx);
            c = circuit__ld128_acq(&b->s->core); /* acquire: table core */
            continue;
        }
        if (code == already) {
            rc = EALREADY;
            break;
        }
        if (code == CIRCUIT__ST_CLOSED) {
            /* isolate from closed: an intent; the cells are sealed and the
             * final counts are exact (C4, L6) */
            CIRCUIT__HOOK(CIRCUIT_TP_OPERATOR_BEFORE_CAS);
            if (circuit__closed_isolate(b, &c, now, call_ctx))
                break;
            continue;
        }
        if (code == CIRCUIT__ST_OPEN && circuit__open_over(c.hi, now))
            continue; /* made open in the past: the top reads the clock and advances */
        circuit_counts cnt;
        circuit__counts(b, c, &cnt);
        CIRCUIT__HOOK(CIRCUIT_TP_OPERATOR_BEFORE_CAS);
        if (circuit__transition(b, &c, to, CIRCUIT_CAUSE_OPERATOR, &cnt, now, call_ctx))
            break;
    }
    circuit__deliver_pending(b); /* O3 */
    return rc;
}

int circuit_isolate(circuit_breaker *b, void *call_ctx)
{
    circuit__check_breaker(b, "circuit_isolate");
    return operate(b, call_ctx, CIRCUIT_ISOLATED, CIRCUIT__ST_ISOLATED);
}

int circuit_reset(circuit_breaker *b, void *call_ctx)
{
    circuit__check_breaker(b, "circuit_reset");
    return operate(b, call_ctx, CIRCUIT_CLOSED, CIRCUIT__ST_CLOSED);
}

/* ---- the pure read ------------------------------------------------------------ */

uint64_t circuit_get_salt(const circuit_breaker *b)
{
    circuit__check_breaker(b, "circuit_get_salt");
    return b->salt;
}

circuit_state circuit_get_state(const circuit_breaker *b)
{
    circuit__check_breaker(b, "circuit_get_state");
    /* acquire, and a pair the word really held: hi is this open state's end */
    circuit__u128 c = circuit__ld128_acq(&b->s->core);
    for (;;) {
        unsigned code = circuit__code(c.lo);
        if (code != CIRCUIT__ST_OPEN)
            return circuit__pub_state(code);
        CIRCUIT__HOOK(CIRCUIT_TP_STATE_READ);
        int64_t now = circuit__now();
        /* Open: the answer is for the moment of the clock read, so the
         * word must still be this open state after it (a reset and a
         * clock past the old end would otherwise report a half-open that
         * never existed, S5). acquire: table core */
        if (circuit__core_still(b, &c))
            return circuit__open_over(c.hi, now) ? CIRCUIT_HALF_OPEN : CIRCUIT_OPEN;
        /* a transition came meanwhile: c is the new word (lock-free) */
    }
}

