/*
 * What the core's files share (circuit__ prefix: internal, never exported).
 *
 * THE STATE WORD (b->core, 16 bytes, changed only by circuit__cas128_sc)
 *   lo  bits  0..1   state code: 0 isolated, 1 closed, 2 open, 3 half-open
 *       bits  2..31  generation, low 30 bits ("gen tag")
 *     closed (counting.c has the protocol):
 *       bits 32..58  epoch id: the cells (per-CPU success counters) of
 *                    this epoch carry it
 *       bit   59     X: exact point k counted a failure
 *       bit   60     F: exact point k folded (started this epoch): hi's
 *                    upper half is then the successes it folded
 *       bits 61..62  intent: 0 none, 1 fold, 2 failure (trip check),
 *                    3 isolate (being completed, counting.c)
 *       bit   63     asked: a failure intent whose trip said true for the
 *                    sum in hi's upper half
 *     half-open:
 *       bits 32..62  seq: results appended to the window in this state,
 *                    counted modulo seq_mod (a multiple of window <= 2^31)
 *     open:
 *       bits 32..62  reopens (B2) of this open period
 *   hi  closed:
 *       bits  0..31  k: exact points made in this generation
 *       bits 32..63  S_k, the sum of the epoch's cells at point k (F = 0),
 *                    or the successes folded at k (F = 1, saturated);
 *                    in an intent word: the sum its maker read
 *       (the counts at point k are the descriptor D[k & 1], counting.c)
 *   hi  half-open:
 *       bits  0..16  failures in the window
 *       bit   17     full: the window holds `window` results
 *       bit   18     last counted outcome (1 = failure): the kind of the run
 *       bits 19..49  run length (saturates at CIRCUIT_RUN_MAX)
 *       bits 50..63  timed_out (saturates at CIRCUIT_TIMED_OUT_MAX)
 *   hi  open: the moment the open period ends (opened at + the period
 *       chosen, B1), ns, UNSIGNED: both terms are <= INT64_MAX, so the sum
 *       never wraps and retry_after = end - now is exact for every period
 *       (circuit__open_over / circuit__open_left).   isolated: 0.
 * Half-open successes are derived: (full ? window : seq) - failures.
 *
 * Every decision (count a failure, trip, close, reopen, time a probe out,
 * isolate, reset, end an epoch) is one CAS of this word from the value it
 * was computed from, so a result is counted only if its generation still
 * holds, and the result that trips or closes the breaker is part of the
 * same update as the transition (C4). Policies are asked before the CAS,
 * which is why they may be asked again when the CAS loses (SPEC L4). Every
 * transition is made by ONE function, circuit__transition (breaker.c).
 * A closed success changes no shared word: it counts on its CPU's cell.
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
/* closed lo */
#define CIRCUIT__EPOCH_MASK UINT64_C(0x7ffffff)
#define CIRCUIT__LO_X (UINT64_C(1) << 59)
#define CIRCUIT__LO_F (UINT64_C(1) << 60)
#define CIRCUIT__LO_INTENT_SHIFT 61
#define CIRCUIT__INTENT_NONE 0u
#define CIRCUIT__INTENT_FOLD 1u
#define CIRCUIT__INTENT_FAILURE 2u
#define CIRCUIT__INTENT_ISOLATE 3u
#define CIRCUIT__LO_ASKED (UINT64_C(1) << 63) /* failure intent: trip said true at hi's sum */
#define CIRCUIT__SD_MAX UINT64_C(0xffffffff)

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
/* seq (half-open) or reopens (open) */
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

/* closed word */
static inline uint32_t circuit__cepoch(uint64_t lo) { return (uint32_t)((lo >> 32) & CIRCUIT__EPOCH_MASK); }
static inline unsigned circuit__cintent(uint64_t lo) { return (unsigned)((lo >> CIRCUIT__LO_INTENT_SHIFT) & 3u); }
static inline uint64_t circuit__mkclo(uint32_t gen, uint32_t epoch, bool x, bool f, unsigned intent)
{
    return (uint64_t)CIRCUIT__ST_CLOSED | ((uint64_t)(gen & CIRCUIT__GEN_MASK) << 2) |
           ((uint64_t)(epoch & CIRCUIT__EPOCH_MASK) << 32) | (x ? CIRCUIT__LO_X : 0) |
           (f ? CIRCUIT__LO_F : 0) | ((uint64_t)intent << CIRCUIT__LO_INTENT_SHIFT);
}
static inline uint32_t circuit__ck(uint64_t hi) { return (uint32_t)hi; }
static inline uint64_t circuit__csd(uint64_t hi) { return hi >> 32; }
static inline uint64_t circuit__mkchi(uint32_t k, uint64_t sd) { return (uint64_t)k | (sd << 32); }

/* The successes ledger's key for the epoch a closed word names: {gen tag,
 * epoch id} (bit 31 set, so that no key is the ledger's initial 0), written
 * by counting.c and compared by it and by stats. */
static inline uint64_t circuit__ledger_key(uint64_t lo)
{
    return ((uint64_t)circuit__gen(lo) << 32) | (UINT64_C(1) << 31) | circuit__cepoch(lo);
}

/* A failure record of the window's ring (window.c, counting.c): only
 * failures are recorded; bit 0 marks the record as one. */
#define CIRCUIT__REC_VALID (UINT64_C(1) << 63)
static inline uint64_t circuit__rec_make(uint32_t gen, uint32_t seq)
{
    return CIRCUIT__REC_VALID | ((uint64_t)(gen & CIRCUIT__GEN_MASK) << 33) | ((uint64_t)seq << 1) | 1u;
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
/* One cache line per CPU: the success cell (counting.c) and the totals of
 * SPEC M1 that are counted on paths that write no shared line. */
typedef struct circuit__pcpu {
    uint64_t cell;      /* {sealed:1, epoch:31, successes:32} */
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
 *  (state word)  (cas128_sc): exact points,         ld128_lo_acq                prepared before it (descriptor slots,
 *                intents, transitions, timeouts                                slot 0, half_reopens, ring records);
 *                                                                              readers acquire it. Every "read X,
 *                                                                              check core, CAS X" reads X with
 *                                                                              acquire so the check follows it
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
 * ring[]         ring_write (cas_acq: the failed    append, cc_apply (ld_acq,  the writer's next core CAS (release)
 *  (window)      CAS's value is re-checked),        then the caller re-checks  publishes a record to the evicter a
 *                ring_record (cas_acq_rel),         core or the descriptor)    lap later (acquire of core); a record
 *                ring_clear (cas_rlx)                                          seen means D_k seen (acq_rel)
 * desc[2]        closed_cc's help, desc_empty       closed_cc (ld128_acq)      read X, check core at k, CAS X; a
 *  (D_k)         (cas128_sc)                                                   derived D_k equals the written one
 * pcpu[].cell    closed_success (cas_rlx count,     failure's sum (ld_rlx      a seal is an RMW on the cell:
 *  {sealed,      cas_acq start), intent completion  after core's acquire),     coherence orders counts and seals;
 *   epoch, n}    seal (cas_acq_rel)                 seal (ld_acq), cells_read  the seal's release shows the intent
 *                                                   (ld_acq, stats)            word to a success that sees it
 * pcpu[].totals  circuit__total_add (faa_rlx)       get_stats (ld_acq)         none for the count (RMW keeps it
 *  (M1)                                                                        exact); the acquire loads keep the
 *                                                                              sum before get_stats' second look
 * folded         completion's ledger_add (cas128_sc,get_stats, ledger_add     once per epoch, keyed by {gen,
 *  {key, sum}    only while core holds the intent)  (ld128_acq)                epoch}; acquire: before the check
 * next_id        fresh_epoch, closed_epoch (faa_rlx) -                         none: uniqueness only
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
    uint64_t next_id;                      /* epoch ids handed out */
    uint64_t transitions;                  /* total made (M1) */
    uint64_t timed_out;                    /* total probe timeouts (M1) */
    circuit__u128 folded;                  /* {last epoch ledgered, successes of ended epochs} */
    circuit__u128 desc[2];                 /* closed: counts at exact points k, k - 1 */

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
uint32_t circuit__fresh_epoch(circuit_breaker *b);

/* window.c (half-open: one result at a time through the word) */
void circuit__counts(const circuit_breaker *b, circuit__u128 c, circuit_counts *out);
bool circuit__append(circuit_breaker *b, circuit__u128 c, bool failure, circuit__u128 *out);
void circuit__ring_help(circuit_breaker *b, circuit__u128 c);
void circuit__ring_after_count(circuit_breaker *b, circuit__u128 c, bool failure,
                               bool evicted_failure);
void circuit__ring_clear(circuit_breaker *b, uint32_t gen, uint32_t seq);
uint64_t circuit__hi_add_timeout(uint64_t hi);

/* counting.c (closed) */
typedef struct circuit__cc {   /* the counts at an exact point (a descriptor) */
    uint32_t seq;              /* results counted in this generation, mod seq_mod */
    bool full;                 /* seq has reached window */
    uint32_t fail;             /* failures in the window */
    bool last_fail;            /* the newest result was a failure */
    uint32_t run;              /* its run (saturated) */
    uint64_t S;                /* cells' sum of the epoch at this point (0 after a fold) */
} circuit__cc;
typedef struct circuit__left { /* failures an exact point evicted (to clear) */
    uint64_t first, count;     /* evicted indices: first .. first + count - 1 (mod seq_mod) */
    bool all;                  /* the whole old window left: it ended at index `from` */
    uint64_t from;
} circuit__left;
typedef enum circuit__closed_result { CIRCUIT__COUNTED, CIRCUIT__LATE } circuit__closed_result;
void circuit__cc_apply(const circuit_breaker *b, uint32_t gen, const circuit__cc *c, uint64_t d,
                       bool failure, circuit__cc *out, circuit__left *left);
void circuit__cc_counts(const circuit_breaker *b, const circuit__cc *c, circuit_counts *out);
bool circuit__closed_cc(circuit_breaker *b, circuit__u128 w, circuit__cc *out, bool write);
bool circuit__closed_help(circuit_breaker *b, circuit__u128 w, circuit__cc *c);
void circuit__complete(circuit_breaker *b, circuit__u128 wi, int64_t *now, bool *have_now,
                       void *call_ctx);
circuit__closed_result circuit__closed_success(circuit_breaker *b, uint32_t gen, void *call_ctx);
circuit__closed_result circuit__closed_failure(circuit_breaker *b, uint32_t gen, int64_t *now,
                                               bool *have_now, void *call_ctx);
bool circuit__closed_isolate(circuit_breaker *b, circuit__u128 *w, int64_t now, void *call_ctx);
bool circuit__closed_fold(circuit_breaker *b, circuit__u128 *w);
uint64_t circuit__cells_read(const circuit_breaker *b, uint32_t epoch);
void circuit__closed_counts_at(const circuit_breaker *b, circuit__u128 w, const uint64_t *cells,
                               circuit_counts *out);
void circuit__cells_init(circuit_breaker *b);

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
void circuit__test_count_shared_rmw(void);
#define CIRCUIT__HOOK(p) circuit__test_hook(p)
#define CIRCUIT__SHARED_RMW() circuit__test_count_shared_rmw()
#else
#define CIRCUIT__HOOK(p) ((void)0)
#define CIRCUIT__SHARED_RMW() ((void)0)
#endif

#endif
