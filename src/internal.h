/*
 * What the core's files share (circuit__ prefix: internal, never exported).
 *
 * THE STATE WORD (b->core, 16 bytes, changed only by circuit__cas128_sc)
 *   lo  bits  0..1   state code: 0 isolated, 1 closed, 2 open, 3 half-open
 *       bits  2..31  generation, low 30 bits ("gen tag")
 *       bit   63     FAST: closed with no failure in the window (SPEC L6)
 *     slow closed / half-open:
 *       bits 32..62  seq: results appended to the window in this state,
 *                    counted modulo seq_mod (a multiple of window <= 2^31)
 *     fast closed:
 *       bits 32..62  id of this fast interval (the per-CPU records carry it)
 *     open:
 *       bits 32..62  reopens (B2) of this open period
 *   hi  slow closed / half-open:
 *       bits  0..16  failures in the window
 *       bit   17     full: the window holds `window` results
 *       bit   18     last counted outcome (1 = failure): the kind of the run
 *       bits 19..49  run length (saturates at CIRCUIT_RUN_MAX)
 *       bits 50..63  timed_out (half-open; saturates at CIRCUIT_TIMED_OUT_MAX)
 *   hi  fast closed (the counts as of the interval's start; successes
 *       counted since sit in the per-CPU records until a fold adds them):
 *       bits  0..30  seq
 *       bit   31     full
 *       bits 32..62  run of successes
 *   hi  open: the moment the open period ends (opened at + the period
 *       chosen, B1), ns, UNSIGNED: both terms are <= INT64_MAX, so the sum
 *       never wraps and retry_after = end - now is exact for every period
 *       (circuit__open_over / circuit__open_left).   isolated: 0.
 * Successes are derived: (full ? window : seq) - failures.
 *
 * Every decision (count a result, trip, close, reopen, time a probe out,
 * isolate, reset, fold) is one CAS of this word from the value it was
 * computed from, so a result is counted only if its generation still
 * holds, and the result that trips or closes the breaker is part of the
 * same update as the transition (C4). Policies are asked before the CAS,
 * which is why they may be asked again when the CAS loses (SPEC L4). Every
 * transition is made by ONE function, circuit__transition (breaker.c).
 *
 * Generation tags are 30 bits: a ticket would be confused with a later
 * generation only after 2^30 transitions while it is outstanding (each open
 * period lasts at least open_for, so at 1 ms per cycle that is over 12
 * days). The 64-bit generations given to observe and open_for, and reported
 * by get_stats, are rebuilt from the tag and `gen64`, the latest 64-bit
 * generation published, as the generation with that tag NEAREST to gen64
 * (circuit__gen_widen): gen64 may be behind the word a thread holds (its
 * maker has not raised it yet) or ahead of it (others made transitions
 * since the word was read), by far less than 2^29 either way.
 */
#ifndef CIRCUIT_INTERNAL_H
#define CIRCUIT_INTERNAL_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <urcu/lfstack.h>

#include "atomics.h"
#include "circuit.h"
#include "message.h"

#ifdef CIRCUIT_TESTING
#include "testing.h"
#endif

#define CIRCUIT__MAGIC UINT64_C(0x63697263756974b2) /* "circuit" + tag */

#define CIRCUIT__GEN_BITS 30
#define CIRCUIT__GEN_MASK ((UINT64_C(1) << CIRCUIT__GEN_BITS) - 1)
#define CIRCUIT__F31_MASK UINT64_C(0x7fffffff)
#define CIRCUIT__LO_FAST (UINT64_C(1) << 63)

/* internal state codes (lo bits 0..1) */
#define CIRCUIT__ST_ISOLATED 0u
#define CIRCUIT__ST_CLOSED 1u
#define CIRCUIT__ST_OPEN 2u
#define CIRCUIT__ST_HALF_OPEN 3u

/* ---- state word encoding ------------------------------------------------ */
static inline unsigned circuit__st(uint64_t lo) { return (unsigned)(lo & 3u); }
static inline circuit_state circuit__pub_state(unsigned st)
{
    return st == CIRCUIT__ST_ISOLATED ? CIRCUIT_ISOLATED : (circuit_state)st;
}
static inline uint32_t circuit__gen(uint64_t lo) { return (uint32_t)((lo >> 2) & CIRCUIT__GEN_MASK); }
static inline bool circuit__fast(uint64_t lo) { return (lo & CIRCUIT__LO_FAST) != 0; }
/* seq (slow closed, half-open), interval id (fast) or reopens (open) */
static inline uint32_t circuit__lo31(uint64_t lo) { return (uint32_t)((lo >> 32) & CIRCUIT__F31_MASK); }
static inline uint32_t circuit__seq(uint64_t lo) { return circuit__lo31(lo); }
static inline uint64_t circuit__mklo(unsigned st, uint32_t gen, uint32_t f31)
{
    return (uint64_t)st | ((uint64_t)(gen & CIRCUIT__GEN_MASK) << 2) |
           ((uint64_t)(f31 & CIRCUIT__F31_MASK) << 32);
}
static inline uint32_t circuit__gen_next(uint32_t gen) { return (gen + 1) & (uint32_t)CIRCUIT__GEN_MASK; }

#define CIRCUIT__HI_FAIL_MASK  UINT64_C(0x1ffff)
#define CIRCUIT__HI_FULL       (UINT64_C(1) << 17)
#define CIRCUIT__HI_LAST_FAIL  (UINT64_C(1) << 18)
#define CIRCUIT__HI_RUN_SHIFT  19
#define CIRCUIT__HI_RUN_MASK   UINT64_C(0x7fffffff)
#define CIRCUIT__HI_TO_SHIFT   50
#define CIRCUIT__HI_TO_MASK    UINT64_C(0x3fff)

static inline uint32_t circuit__hi_fail(uint64_t hi) { return (uint32_t)(hi & CIRCUIT__HI_FAIL_MASK); }
static inline uint32_t circuit__hi_run(uint64_t hi) { return (uint32_t)((hi >> CIRCUIT__HI_RUN_SHIFT) & CIRCUIT__HI_RUN_MASK); }
static inline uint32_t circuit__hi_to(uint64_t hi) { return (uint32_t)((hi >> CIRCUIT__HI_TO_SHIFT) & CIRCUIT__HI_TO_MASK); }

/* open hi: the end of the open period, unsigned (now >= 0, CLOCK_MONOTONIC) */
static inline bool circuit__open_over(uint64_t end, int64_t now) { return (uint64_t)now >= end; }
static inline int64_t circuit__open_left(uint64_t end, int64_t now) { return (int64_t)(end - (uint64_t)now); }
static inline uint64_t circuit__open_end(int64_t at, int64_t period) { return (uint64_t)at + (uint64_t)period; }

/* fast hi */
#define CIRCUIT__FHI_FULL (UINT64_C(1) << 31)
static inline uint32_t circuit__fhi_seq(uint64_t hi) { return (uint32_t)(hi & CIRCUIT__F31_MASK); }
static inline uint32_t circuit__fhi_run(uint64_t hi) { return (uint32_t)((hi >> 32) & CIRCUIT__F31_MASK); }
static inline uint64_t circuit__mkfhi(uint32_t seq, bool full, uint32_t run)
{
    return (uint64_t)(seq & CIRCUIT__F31_MASK) | (full ? CIRCUIT__FHI_FULL : 0) |
           ((uint64_t)(run & CIRCUIT__F31_MASK) << 32);
}

/* The fold ledger's key for the fast interval a fast word names: {gen tag,
 * interval id}, written by percpu.c's fold and compared by it and by stats. */
static inline uint64_t circuit__ledger_key(uint64_t fast_lo)
{
    return ((uint64_t)circuit__gen(fast_lo) << 32) | circuit__lo31(fast_lo);
}

/* ---- transition records ------------------------------------------------- */
typedef struct circuit__node {
    struct cds_lfs_node lfs;       /* liburcu stack link */
    struct circuit__node *next;    /* deliverer's ordered list */
    circuit_transition tr;         /* tr.generation is the 64-bit generation */
    void *call_ctx;
    int pool_index;                /* -1: malloc'ed overflow record */
} circuit__node;

/* ---- per-CPU counters (percpu.c) ---------------------------------------- */
/* One cache line per CPU: the fast-path record and the totals of SPEC M1
 * that are counted on paths that write no shared line. */
typedef struct circuit__pcpu {
    uint64_t fast;      /* {sealed:1, interval id:31, successes:32} */
    uint64_t admitted, rejected, successes, failures, ignored, late, released;
} __attribute__((aligned(64))) circuit__pcpu;
_Static_assert(sizeof(circuit__pcpu) == 64, "one cache line per CPU");

/* Which total of a circuit__pcpu line (its byte offset). */
enum circuit__total {
    CIRCUIT__T_ADMITTED = offsetof(circuit__pcpu, admitted),
    CIRCUIT__T_REJECTED = offsetof(circuit__pcpu, rejected),
    CIRCUIT__T_SUCCESSES = offsetof(circuit__pcpu, successes),
    CIRCUIT__T_FAILURES = offsetof(circuit__pcpu, failures),
    CIRCUIT__T_IGNORED = offsetof(circuit__pcpu, ignored),
    CIRCUIT__T_LATE = offsetof(circuit__pcpu, late),
    CIRCUIT__T_RELEASED = offsetof(circuit__pcpu, released)
};

/* ---- the breaker --------------------------------------------------------- */
/*
 * CONCURRENCY TABLE: every field more than one thread touches, who writes
 * it, who reads it, with which order, and what that order pairs with. A
 * call site's comment names its reason in a few words or points here
 * ("table: <field>"); tests/check_atomics.py holds every site to that.
 * Fields not listed are written by circuit_new before the breaker is shared
 * and only read afterwards (plain loads: the caller's hand-off of the
 * pointer orders them), or are private to the delivery role.
 *
 * field          writers (order)                    readers (order)            pairs with / why
 * -------------  ---------------------------------  -------------------------  ------------------------------------
 * core           every decision: circuit__core_cas  everyone: ld128_acq,       the CAS is the release of what was
 *  (state word)  (cas128_sc): counts, transitions,  ld128_lo_acq                prepared before it (per-CPU records
 *                folds, entries, timeouts                                      of fast X, slot 0, half_reopens, ring
 *                                                                              records); readers acquire it. Every
 *                                                                              "read X, check core, CAS X" reads X
 *                                                                              with acquire so the check follows it
 * gen64          transition maker after its CAS     gen_widen (rlx)            none: a reference point within 2^29
 *                (cas_rlx, a running maximum)                                  of every tag in use; orders nothing
 * half_reopens   open -> half-open maker, before    half-open -> open maker    the core CAS into gen publishes it
 *  {gen, n}      its core CAS (cas_acq, read-check-  (ld_acq)                  (release); the reader's acquire load
 *                CAS)                                                          follows its acquire of core
 * probe_hint     admissions, slot 0 (cas128_sc,     process_timeouts,          Dekker with probe_scans: admission
 *  {due, ver}    version bump); scans (cas128_sc    hint_note (ld128_acq,      stores its slot record, fence_sc,
 *                raise from the value read)         ld128_lo_acq)              loads probe_scans + hint; a scan
 * probe_scans    process_timeouts (faa_sc +1/-1)    hint_note (ld_acq)         adds to probe_scans, fence_sc, loads
 *                                                                              the records: one sees the other
 * slots[]        slot0_reserve, slot_occupy,        slot_free, scans,          acquire before the core check
 *  {tag, due}    slot_free, scans (cas128_sc)       reserve (ld128_acq)        ("read X, check, CAS X"); the winner
 *                                                                              of the not-busy CAS frees the bit
 * bitmap[]       slot_acquire (cas_acq), slot 0     the same, scans (ld_acq);  bit_clear's release publishes the
 *  {gen, bits}   (cas_acq), bit_clear (cas_rel)     probes_in_flight (rlx:     not-busy record to the bit's next
 *                                                   a count for stats)         owner (acquire CAS)
 * ring[]         ring_write (cas_acq: the failed    append (ld_acq, then the   the writer's next core CAS (release)
 *  (window)      CAS's value is re-checked),        caller re-checks core)     publishes a record to the evicter a
 *                ring_clear (cas_rlx)                                          lap later (acquire of core)
 * pcpu[].fast    fast_success (cas_rlx), fold's     fold (ld_acq, then rlx     a seal is an RMW on the record:
 *  {sealed,id,n} seal and enter's prepare (cas_acq) sum after the seal),       coherence orders counts and seals;
 *                                                   fast_pending (ld_acq)      enter's prepare is published by the
 *                                                                              core CAS to fast X (release)
 * pcpu[].totals  circuit__total_add (faa_rlx)       get_stats (ld_acq)         none for the count (RMW keeps it
 *  (M1)                                                                        exact); the acquire loads keep the
 *                                                                              sum before get_stats' second look
 * folded         fold's ledger_add (cas128_sc, only get_stats, ledger_add     once per fast interval, keyed by
 *  {key, sum}    while core is still fast X)        (ld128_acq)                {gen, id}; acquire: before the check
 * next_id        enter_fast (faa_rlx)               -                          none: uniqueness only
 * transitions    transition maker (faa_rlx)         get_stats (ld_rlx)         none: a total
 * timed_out      count_timeout (faa_rlx)            get_stats (ld_rlx)         none: a total
 * pending        publish (faa_rlx +1), deliverer    finish_call, allow         a hint only: a publisher delivers
 *                (faa_rlx -1)                       (ld_rlx)                   its own records (delivery.c)
 * delivering     deliverer: cas_acq 0 -> 1,         -                          the role: release store -> the next
 *                st_rel 1 -> 0                                                 holder's acquire CAS (held, next_gen)
 *                                                                              Dekker with the stack: fence_sc
 * stack          publish (cds_lfs_push)             deliverer (pop_all)        liburcu's own orders; TSan marks
 *                                                                              (tsan_release/acquire) on the record
 * pool_free      publisher takes a bit (cas_acq),   node_get / node_put        the deliverer's release hands the
 *                deliverer returns it (cas_rel)     (ld_rlx: the CAS decides)  record to the next publisher
 * ticket status  circuit_allow fills (st_rlx);      done, release (ld_rlx)     closed ticket: one settler, no
 *  (caller's     closed done/release (st_rlx);                                 arbitration (T5); probe ticket:
 *  circuit_      probe done/release (cas_acq_rel)                              acq_rel CAS, exactly one wins and
 *  ticket)                                                                     frees the slot; moving a ticket
 *                                                                              between threads is the caller's
 */
struct circuit_breaker {
    /* read-only after circuit_new */
    uint64_t magic;
    circuit_config cfg;
    circuit_policy policy;
    circuit_classify_fn classify;
    void *classify_arg;
    circuit_observe_fn observe;
    void *observe_arg;
    circuit_open_for_fn open_for;
    void *open_for_arg;
    uint64_t salt;                 /* circuit_open_info.salt: the spec's, or a process-unique one */
    uint32_t window;
    uint32_t probes;
    uint64_t seq_mod;              /* window * floor(2^31 / window) */
    uint64_t window_magic;         /* for circuit__mod_window */
    uint64_t *ring;                /* window slots (NULL when window == 1) */
    circuit__u128 *slots;          /* probes slots: {tag, due_ns} */
    uint64_t *bitmap;              /* ceil(probes / 32) words: {gen tag, 32 bits} */
    circuit__pcpu *pcpu;           /* ncpu lines */
    uint32_t bitmap_words;
    uint32_t ncpu;
    size_t footprint;

    /* the state word, alone on its cache line */
    _Alignas(64) circuit__u128 core;

    /* half-open: probe timeouts and the reopen count */
    _Alignas(64) circuit__u128 probe_hint; /* {due_ns lower bound, version} */
    uint64_t probe_scans;                  /* timeout scans running now */
    uint64_t half_reopens;                 /* {gen tag << 32 | reopens} of the half-open state */

    /* written when transitions are made, folds finish and probes time out */
    _Alignas(64) uint64_t pending;         /* published and not yet delivered */
    uint64_t delivering;                   /* 1 while a thread holds the delivery role */
    struct __cds_lfs_stack stack;          /* published records */
    uint64_t pool_free;                    /* bit i set: pool[i] is free */
    uint64_t gen64;                        /* latest 64-bit generation made (a max) */
    uint64_t next_id;                      /* fast intervals handed out */
    uint64_t transitions;                  /* total made (M1) */
    uint64_t timed_out;                    /* total probe timeouts (M1) */
    circuit__u128 folded;                  /* {last interval folded, successes folded} */

    /* owned by the thread holding the delivery role */
    _Alignas(64) circuit__node *held;      /* records waiting for an earlier generation */
    uint64_t next_gen;                     /* 64-bit generation of the next delivery */

    circuit__node pool[CIRCUIT_TRANSITION_POOL];
};

/* ---- tickets (the caller-owned circuit_ticket, seen from inside) --------- */
#define CIRCUIT__TICKET_MAGIC UINT64_C(0xc1bc0de500000000)
#define CIRCUIT__TK_LIVE     1u
#define CIRCUIT__TK_DONE     2u
#define CIRCUIT__TK_RELEASED 3u
#define CIRCUIT__TK_REJECTED 4u
#define CIRCUIT__NO_SLOT     UINT32_MAX

typedef struct circuit__ticket {
    uint64_t status;     /* CIRCUIT__TICKET_MAGIC | phase; 0 = blank */
    circuit_breaker *b;
    void *call_ctx;
    uint32_t gen;        /* generation tag admitted in */
    uint32_t slot;       /* probe slot, or CIRCUIT__NO_SLOT (admitted while closed) */
    uint32_t reuse;      /* the slot's reuse sequence at admission */
    uint32_t unused;
} circuit__ticket;

_Static_assert(sizeof(circuit__ticket) <= sizeof(circuit_ticket), "ticket layout");

/* ---- callbacks in progress (CFG4: circuit_free from a callback) ---------- */
/* Each call of a caller's callback (classify, trip, probe, open_for,
 * observe) pushes a frame on a per-thread list for as long as it runs, so
 * that circuit_free can refuse a breaker one of whose callbacks is below it
 * on this thread's stack: freeing it there would leave the call that runs
 * the callback to read freed memory. The list lives in the callers' stack
 * frames; it is per-thread (never shared), so it needs no atomics.
 * Initial-exec TLS: one %fs-relative access, no __tls_get_addr call on the
 * circuit_done path. */
typedef struct circuit__cb_frame {
    const struct circuit_breaker *b;
    const char *what; /* "classify", "trip", "probe", "open_for", "observe" */
    struct circuit__cb_frame *prev;
} circuit__cb_frame;

extern __thread circuit__cb_frame *circuit__cb_top __attribute__((tls_model("initial-exec")));

static inline void circuit__cb_enter(circuit__cb_frame *f, const struct circuit_breaker *b,
                                     const char *what)
{
    f->b = b;
    f->what = what;
    f->prev = circuit__cb_top;
    circuit__cb_top = f;
}

/* Declared with __attribute__((cleanup)) on the frame, so that a callback
 * that unwinds (C++ exception, pthread_exit; the library is built with
 * -fexceptions) pops its frame too. */
static inline void circuit__cb_leave(circuit__cb_frame *f) { circuit__cb_top = f->prev; }

#define CIRCUIT__CB_FRAME(name, b, what)                                                    \
    circuit__cb_frame name __attribute__((cleanup(circuit__cb_leave)));                     \
    circuit__cb_enter(&name, (b), (what))

/* ---- shared functions ----------------------------------------------------- */
/* Checks the config (CFG1) and, if the policy has one, asks policy->check
 * (K1); on EINVAL writes CFG2's single message naming every bad field and
 * the policy's complaint. config.c. */
int circuit__validate(const circuit_config *cfg, const circuit_policy *policy, char *errbuf,
                      size_t errbuf_len);

/* clock.c */
int64_t circuit__now(void);

/* breaker.c: the one place a transition is made (built, CASed, published).
 * `c` is the word it was decided from; `counts` the final counts of the
 * state left (including what caused it); `at` the moment it takes effect
 * (an open period starts then). Returns false, with *c re-read, when the
 * CAS lost. For to == HALF_OPEN the caller has reserved probe slot 0. */
bool circuit__transition(circuit_breaker *b, circuit__u128 *c, circuit_state to,
                         circuit_cause cause, const circuit_counts *counts, int64_t at,
                         void *call_ctx);
/* The CAS of the state word; the test build counts the attempts (L6 test). */
bool circuit__core_cas(circuit_breaker *b, circuit__u128 *expected, circuit__u128 desired);
uint64_t circuit__gen_widen(const circuit_breaker *b, uint32_t tag);

/* window.c */
/* The counts of the state in word c; in the fast mode they add the per-CPU
 * records of its interval (read here), or `pending` successes for _with. */
void circuit__counts(const circuit_breaker *b, circuit__u128 c, circuit_counts *out);
void circuit__counts_with(const circuit_breaker *b, circuit__u128 c, uint64_t pending,
                          circuit_counts *out);
bool circuit__append(circuit_breaker *b, circuit__u128 c, bool failure, circuit__u128 *out);
void circuit__ring_help(circuit_breaker *b, circuit__u128 c);
void circuit__ring_after_count(circuit_breaker *b, circuit__u128 c, bool failure,
                               bool evicted_failure);
uint64_t circuit__hi_add_timeout(uint64_t hi);

/* percpu.c (and the two inline helpers below) */
typedef enum circuit__fast_result { CIRCUIT__FAST_COUNTED, CIRCUIT__FAST_NO } circuit__fast_result;
circuit__fast_result circuit__fast_success(circuit_breaker *b, uint64_t lo);
bool circuit__fold(circuit_breaker *b, circuit__u128 *c);
bool circuit__enter_fast(circuit_breaker *b, circuit__u128 *c, circuit__u128 slow);
uint64_t circuit__fast_pending(const circuit_breaker *b, uint64_t lo);
void circuit__pcpu_init(circuit_breaker *b);

/* probes.c */
typedef enum circuit__admit {
    CIRCUIT__ADMITTED, CIRCUIT__FULL, CIRCUIT__STALE
} circuit__admit;
circuit__admit circuit__probe_admit(circuit_breaker *b, uint32_t gen, int64_t now,
                                    uint32_t *slot, uint32_t *reuse);
/* The probe slot an allow was given by making open -> half-open itself. */
typedef struct circuit__slot0 {
    bool held;
    uint32_t gen;
    uint32_t reuse;
} circuit__slot0;
circuit__u128 circuit__advance(circuit_breaker *b, int64_t now, void *call_ctx,
                               circuit__slot0 *slot0);
bool circuit__slot_release(circuit_breaker *b, uint32_t slot, uint32_t gen, uint32_t reuse);
bool circuit__slot_release_unless_due(circuit_breaker *b, uint32_t slot, uint32_t gen,
                                      uint32_t reuse, int64_t now);
bool circuit__slot0_reserve(circuit_breaker *b, uint32_t gen, uint64_t open_lo, int64_t now,
                            uint32_t *reuse);
circuit_state circuit__ask_probe(circuit_breaker *b, const circuit_counts *c);
int64_t circuit__probes_in_flight(const circuit_breaker *b, uint32_t gen);

/* delivery.c */
void circuit__delivery_init(circuit_breaker *b);
void circuit__delivery_destroy(circuit_breaker *b);
void circuit__publish(circuit_breaker *b, const circuit_transition *tr, void *call_ctx);
void circuit__deliver(circuit_breaker *b);

/* ---- small helpers --------------------------------------------------------- */

/* seq % window without a division: Lemire, Kaser and Kurz, "Faster Remainder
 * by Direct Computation" (Software: Practice and Experience, 2019), for
 * 32-bit numerators. */
static inline uint32_t circuit__mod_window(const struct circuit_breaker *b, uint32_t seq)
{
    uint64_t low = b->window_magic * seq;
    __extension__ typedef unsigned __int128 u128;
    return (uint32_t)(((u128)low * b->window) >> 64);
}

/* (a - b) modulo seq_mod, for a, b < seq_mod */
static inline uint64_t circuit__seq_sub(const struct circuit_breaker *b, uint64_t a, uint64_t d)
{
    return a >= d ? a - d : a + b->seq_mod - d;
}
static inline int64_t circuit__sat_add(int64_t a, int64_t b)
{
    return (a > INT64_MAX - b) ? INT64_MAX : a + b;
}

/* The line of the CPU this thread runs on: sched_getcpu(), which glibc
 * answers from rseq without a system call. A thread may migrate right after:
 * every write to a line is an atomic RMW, so that costs speed, never a
 * count. */
static inline circuit__pcpu *circuit__my_cpu(const circuit_breaker *b)
{
    int cpu = sched_getcpu();
    uint32_t i = cpu < 0 ? 0u : (uint32_t)cpu;
    if (i >= b->ncpu) /* more CPUs online than configured at circuit_new */
        i %= b->ncpu;
    return &b->pcpu[i];
}

/* Adds one to a total of SPEC M1 on this CPU's line. relaxed: a total
 * orders nothing; the RMW keeps it exact when two threads meet on a line. */
static inline void circuit__total_add(circuit_breaker *b, enum circuit__total which)
{
    circuit__faa_rlx((uint64_t *)(void *)((char *)circuit__my_cpu(b) + which), 1);
}

#ifdef CIRCUIT_TESTING
void circuit__test_hook(circuit_test_point p);
void circuit__test_count_core_cas(void);
void circuit__test_count_stats_pass(void);
#define CIRCUIT__HOOK(p) circuit__test_hook(p)
#else
#define CIRCUIT__HOOK(p) ((void)0)
#endif

#endif
