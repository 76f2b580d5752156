/*
 * What the core's files share (circuit__ prefix: internal, never exported):
 * the breaker's memory (the struct, with the concurrency table of every
 * shared field), the ticket seen from inside, and the ground services every
 * floor may call (clock, config check, the test seam).
 *
 * THE FLOORS OF src/ (each file includes and calls only files on its own
 * floor's row or below; 0 circles, 0 calls back up):
 *   public calls   breaker.c (allow, done, release, isolate, reset, state,
 *                  new, free), stats.c (get_stats); testing.c (the test
 *                  build's seams, beside them)
 *   time           timeouts.c: open -> half-open, probe timeouts
 *                  (circuit__advance)
 *   probes         probes.c: probe slots, admission, release (slots.h)
 *   counting       counting.c: a settled result to closed.c or halfopen.c
 *   closed,        closed.c: a success, a failure's exact point, intents
 *   half-open      (trip, isolate, fold), the stats reader; halfopen.c: a
 *                  probe's result, a timeout's count, the window's ring
 *   transitions    transition.c: the one function every change goes through
 *   closed state   closed_state.c: descriptors, bitmap, cells, ledger,
 *                  mirror; entering and leaving closed (for transition.c)
 *   lines          percpu.c: the per-CPU arena and the M1 totals
 *   delivery       delivery.c: transitions handed to observe (O1-O6)
 *   state word     word.c / word.h: encoding, CAS, generation widening
 *   ground         internal.h, atomics.h, message.c, clock.c, config.c,
 *                  names.c, test_points.h
 * A failure's cycle by file: trip (closed.c), open (transition.c),
 * half-open (timeouts.c), probes (probes.c), close or reopen (halfopen.c).
 * presets.c and prometheus.c stand beside the core on the public API (and
 * message.h); nothing in the core calls them.
 */
#ifndef CIRCUIT_INTERNAL_H
#define CIRCUIT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <urcu/lfstack.h>

#include "atomics.h"
#include "circuit.h"
#include "message.h"

#ifdef CIRCUIT_TESTING
#include "test_points.h"
#endif

/* Planted bugs (tests/sched/PLANTS.md): each CIRCUIT_PLANT_<NAME> switch
 * brings back a defect the core has had, for the schedule checker to catch. They
 * act in the tests' core only (CIRCUIT_TESTING): the library built in the
 * same tree with the same flags stays correct. */
#ifndef CIRCUIT_TESTING
#undef CIRCUIT_PLANT_DESC_TAG14
#undef CIRCUIT_PLANT_HALFOPEN_ALIAS_WINDOW
#undef CIRCUIT_PLANT_HALFOPEN_ALIAS_SLOTS
#undef CIRCUIT_PLANT_SLOT0_BIT
#undef CIRCUIT_PLANT_TIMEOUT_FREE_THEN_COUNT
#undef CIRCUIT_PLANT_STATS_MOVED_RING
#undef CIRCUIT_PLANT_STATS_GEN_WIDEN
#undef CIRCUIT_PLANT_INTENT_CALL_CTX
#undef CIRCUIT_PLANT_INTENT_STALE_MAKER
#undef CIRCUIT_PLANT_RESERVE_STALE_DUE
#undef CIRCUIT_PLANT_SEAM_BIT0_ABA
#undef CIRCUIT_PLANT_PIF_RESERVATION
#undef CIRCUIT_PLANT_SCAN_RESERVATION
#undef CIRCUIT_PLANT_NO_ADOPT
#undef CIRCUIT_PLANT_SCAN_FIXED_DUE
#undef CIRCUIT_PLANT_OPERATOR_STALE_CLOCK
#undef CIRCUIT_PLANT_PROBE_STALE_CLOCK
#undef CIRCUIT_PLANT_STATE_READ_STALE
#undef CIRCUIT_PLANT_RESET_INTENT_EALREADY
#undef CIRCUIT_PLANT_TICKET_GEN27
#undef CIRCUIT_PLANT_PASSING_BIT
#undef CIRCUIT_PLANT_SHARED_NO_MAKERS
#endif

#define CIRCUIT__MAGIC UINT64_C(0x63697263756974b2) /* "circuit" + tag */
#define CIRCUIT__MAX_CPUS 4096u /* a breaker's CPU count is capped here */

/* ---- transition records ------------------------------------------------- */
typedef struct circuit__node {
    struct cds_lfs_node lfs;       /* liburcu stack link */
    struct circuit__node *next;    /* deliverer's ordered list */
    circuit_transition tr;         /* tr.generation is the 64-bit generation */
    void *call_ctx;                /* a pool record, or malloc'ed (delivery.c: node_pooled) */
} circuit__node;

/* ---- the per-CPU part (percpu.c) ------------------------------------------ */
/* 16 bytes per CPU per breaker (docs/CONTRACT.md L5), a
 * unit of the process-wide per-CPU arena (docs/design/percpu.md): the closed
 * success cell (closed.c) and the packed totals of M1 that are counted on
 * paths that write no shared line (docs/design/percpu.md). A CPU's
 * units of all breakers sit side by side in that CPU's region of the arena,
 * so no two CPUs write one line and no breaker needs a line of its own. */
typedef struct circuit__pcpu {
    uint64_t cell; /* {sealed:1, epoch:31, successes:32} */
    uint64_t tot;  /* six bit-fields {parity:1, value:w} (percpu.h) */
} circuit__pcpu;
_Static_assert(sizeof(circuit__pcpu) == 16, "16 bytes per CPU (L5)");

/* The totals of M1 counted per CPU (fields of circuit__pcpu.tot), and
 * the one counted on a shared line (successes of the shared paths: probes,
 * and closed successes while an intent shuts the fast path). */
enum circuit__total {
    CIRCUIT__T_ADMITTED,
    CIRCUIT__T_REJECTED,
    CIRCUIT__T_FAILURES,
    CIRCUIT__T_IGNORED,
    CIRCUIT__T_RELEASED,
    CIRCUIT__T_LATE,
    CIRCUIT__T_NPACKED,
    CIRCUIT__T_SUCCESSES = CIRCUIT__T_NPACKED
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
 * core           every decision: circuit__core_cas  everyone: ld128_acq,       the CAS is the release of what is
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
 * slots[]        slot0_reserve, slot_take,          slot_take, slot_free,      acquire before the core check
 *  {tag, due}    slot0_adopt, slot_free; a          scans, reserve, adopt,     ("read X, check, CAS X"); the record
 *                timeout's claim: take, free        the claim's helpers,       IS the slot: one CAS takes it (with
 *                (cas128_sc)                        probes_in_flight           its due time) or frees it, so no
 *                                                   (ld128_acq)                process dies half way (SH2)
 * probe_claim    a scan: idle -> active (cas128_sc, scans, claim helpers        read claim, slot, core, CAS claim:
 *  {n, t0, slot, after reading slot and core);      (ld128_acq)                while it is idle no timeout is
 *   gen, reuse}  any helper: active -> idle                                    counted, so t0 is the word's timed_out
 *                (cas128_sc)                                                   at the CAS (probes.md, TIMEOUTS)
 * ring[]         ring_write (cas_acq: the failed    circuit__append,           the writer's next core CAS (release)
 *  (half-open    CAS's value is re-checked),        ring_write, ring_start     publishes a record to the evicter a
 *   window)      ring_start (cas_acq), ring_clear   (ld_acq, then the caller   lap later (acquire of core)
 *                (cas_rlx) (halfopen.c)             re-checks core)
 * mirror         circuit__mirror_set: a closed      circuit_allow, closed_     set: read the mirror, then core
 *  {lo, version} word read with no intent, the      success (ld128_lo_acq:     (both acquire), CAS from the value
 *                transition into closed, a fresh    the fast path); set and    read: a version changed since fails;
 *                epoch (cas128_sc, one try);        shut (ld128_acq)           shut: after the intent is seen,
 *                circuit__mirror_shut: an intent's                             before the seals and the CAS out of
 *                maker and completers (cas128_sc)                              (g, e); re-checks core (mirror.md)
 * desc[2]        point_read's help; desc_start,     point_read (ld128_acq)     read X, check core at k (or, for D_k0,
 *  (D_k)         transition into closed (cas128_sc)                            the state being left), CAS X; a
 *                                                                              derived D_k equals the written one
 * cbits[]        the point's maker and any helper    failures and helpers       tag = the point k whose update it
 *  {tag, bits}   (cas128_sc: only while the word's   (bits_count, ld128_acq),   last took (U(k), closed.md); a
 *  (closed       tag is before k, U(k) after D_k);   stats (the same, U(k)      word tagged before k is U(k)'s to
 *  window)       the transition into closed, before  applied in the reader's    apply; after k, the reader's word
 *                its CAS ({k0, 0}, read-check-CAS)   own copy)                  is stale. Tags only grow (k never
 *                                                                              restarts), so no CAS finds an old X
 * intent_ctx[2] an intent's maker, before its       completers (ld128_acq,     the intent's CAS (sc) publishes it;
 *  {ctx, key}    intent CAS (cas128_sc from any      after their acquire of     a key {gen, kind, k} other than the
 *                value: last writer wins)            the intent word)           intent's: a loser's, use one's own
 * k_next         transition out of closed, before   transition into closed     read X, check core is the closed state
 *                its CAS (cas_acq, read-check-CAS)  (ld_acq, after its         being left, CAS X; the CASes of core
 *                                                   acquire of core)           between carry it (acq_rel RMWs)
 * pcpu[].cell    closed_success (cas_rlx count,     failure's sum (ld_rlx      a seal is an RMW on the cell:
 *  {sealed,      cas_acq_rel start), intent         after core's acquire),     coherence orders counts and seals;
 *   epoch, n}    completion seal (cas_acq_rel)      seal (ld_acq), cells_read  the seal's release shows the intent
 *                                                   (ld_acq, stats)            word to a success that sees it; a
 *                                                                              start's release shows stats the
 *                                                                              word past the ended epoch
 * pcpu[].tot     circuit__total_add (cas_rlx: one   get_stats' totals_read     the flush's SUBTRACT (cas_rel) after
 *  (M1, packed)  more, never past the field's top),  (ld_acq, between two      its CREDIT: a reader that sees the
 *                a flush's SUBTRACT (cas_rel, only   loads of tot_ctl);         subtract sees the credit; later
 *                the flush's owner)                  total_flush (ld_rlx)       increments continue the release
 *                                                                              sequence (RMWs)
 * tot_ctl        a flush's START (cas_acq_rel from   total_flush (ld_acq),      START's acquire sees the last END's
 *  {seq, owner,  an idle word it read), its END      get_stats (ld_acq before   release (the parities it records are
 *   busy, c, i,  (cas_rel from its busy word);       and after the fields),     current); seq only grows, so a reader
 *   pP, pS}      shared mode: a takeover of a dead   take_over (ld_acq)         finding it unchanged saw one flush; a
 *                owner's flush (cas_acq_rel, seq+1)                             taker acquires the dead owner's steps
 * tot_owner      shared mode: a flush's owner or     take_over (ld_acq, then    the record follows its START; a taker
 *  {seq, start}  taker, after its CAS (st_rel)       tot_ctl again, ld_acq)     uses it only while tot_ctl still names
 *                                                                              that seq: a start time of that flush
 * tot_shared[]   a flush's CREDIT (faa_rel: +T and   get_stats (ld_acq, after   CREDIT before SUBTRACT in the owner;
 *  {parity,      flips the parity), the overflow     the fields)                the parity tells a reader whether the
 *   total}       path (faa_rlx +1: a field at its                               busy flush has credited yet
 *                top while a flush is busy)
 * succ_slow      count_slow's successes (faa_rlx)   get_stats (ld_rlx)         none: a total
 * folded         completion's ledger_add (cas128_sc,get_stats, ledger_add     once per epoch, keyed by {gen,
 *  {key, sum}    only while core holds the intent)  (ld128_acq)                epoch}; acquire: before the check
 * next_id        fresh_epoch, closed_epoch (faa_rlx) -                         none: uniqueness only
 * transitions    transition maker (faa_rlx)         get_stats (ld_rlx)         none: a total
 * timed_out      the winner of a timeout's count    get_stats (ld_rlx)         none: a total
 *                (probes.c, faa_rlx)
 * pending        publish (faa_rlx +1), deliverer    deliver_pending            a hint only: a publisher delivers
 *                (faa_rlx -1)                       (ld_rlx)                   its own records (delivery.c)
 * making         shared mode: a transition maker     deliverer (ld_acq, after   a record held was made by a core CAS
 *  (handle)      before its core CAS (faa_rlx +1),  taking the records; and    after the maker's +1 (the CASes carry
 *                after its push or failed CAS       after the role's release,  it); 0 read: every maker's push is
 *                (faa_rel -1)                       fence_sc first)            seen by the take that follows (rel/acq)
 * delivering     deliverer: cas_acq 0 -> 1,         deliver_pending (ld_rlx:   the role: release store -> the next
 *                st_rel 1 -> 0                      a hint: held, skip)        holder's acquire CAS (held, next_gen)
 *                                                                              Dekker with the stack: fence_sc
 * stack          publish (cds_lfs_push)             deliverer (pop_all)        liburcu's own orders; TSan marks
 *                                                                              (tsan_release/acquire) on the record
 * pool_free,     publisher takes a bit (cas_acq),   node_get / node_put        the deliverer's release hands the
 *  reserve_free  deliverer returns it (cas_rel)     (ld_rlx: the CAS decides)  record to the next publisher
 * ticket status  circuit_allow fills (st_rlx);      done, release (ld_rlx)     closed ticket: one settler, no
 *  (caller's     closed done/release (st_rlx);                                 arbitration (T5); probe ticket:
 *  circuit_      probe done/release (cas_acq_rel)                              acq_rel CAS, exactly one wins and
 *  ticket)                                                                     frees the slot; moving a ticket
 *                                                                              between threads is the caller's
 */
/* The breaker's shared state: every field more than one thread (or, in
 * shared memory, more than one process) writes after construction. It
 * holds no pointer (SH1): in shared memory it sits in the caller's region
 * (shared.c, the layout in docs/design/shared-memory.md); for circuit_new
 * it follows the handle in the same block. */
typedef struct circuit__shared {
    /* the state word, and the closed descriptors beside it on its line: a
     * failure's exact point CASes the word and then writes D_k, so both
     * are one line handed over, not two; and D_k, written by every
     * failure, stays off the line of `pending`, which every call reads */
    _Alignas(64) circuit__u128 core;
    circuit__u128 desc[2];                 /* closed: counts at exact points k, k - 1 */
    circuit__u128 cbits0;                  /* the closed bitmap's one word when window <= 64 */

    /* half-open: probe timeouts and the reopen count */
    _Alignas(64) circuit__u128 probe_hint; /* {due_ns lower bound, version} */
    uint64_t probe_scans;                  /* timeout scans running now */
    uint64_t half_reopens;                 /* {gen tag << 32 | reopens} of the half-open state */
    circuit__u128 probe_claim;             /* the probe timeout being counted (probes.c) */
    /* read on every call while closed, written when a closed epoch starts
     * or ends (word.h, THE CLOSED MIRROR): on this line, which no thread
     * writes while the breaker is closed */
    circuit__u128 mirror;                  /* {closed gen|epoch, or shut, version} */

    /* written when transitions are made, folds finish and probes time out */
    _Alignas(64) uint64_t gen64;           /* latest 64-bit generation made (a max) */
    uint64_t next_id;                      /* epoch ids handed out */
    uint64_t transitions;                  /* total made (M1) */
    uint64_t timed_out;                    /* total probe timeouts (M1) */
    circuit__u128 folded;                  /* {last epoch ledgered, successes of ended epochs} */
    uint64_t k_next;                       /* the next closed state's first point k0 */
    uint64_t tot_owner;                    /* shared mode: {seq:24, start:40} of the flush
                                            * named by tot_ctl: its owner's start time
                                            * (percpu.c: a reused pid told apart) */

    /* the packed totals' shared side (percpu.h, THE PACKED TOTALS): written
     * once per flush (a field's T units) and by shared-path successes */
    _Alignas(64) uint64_t tot_ctl;         /* the flush control word */
    uint64_t tot_shared[CIRCUIT__T_NPACKED]; /* {parity:1, total:63} per packed total */
    uint64_t succ_slow;                    /* successes counted on shared paths (M1) */
} circuit__shared;

/* The handle: what a process holds (for circuit_new, THE breaker). Its
 * first part is read-only after construction (copies of the shared
 * region's constants, this process's callbacks and its view of where the
 * parts are mapped); the rest is this process's delivery (delivery.c,
 * SH3) and the O6 records of the intents its calls made. */
struct circuit_breaker {
    /* read-only after circuit_new / circuit_shared_attach */
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
    uint64_t *ring;                /* window slots (NULL when window == 1): half-open's window */
    circuit__u128 *slots;          /* probes slots: {tag, due_ns} */
    char *pcpu0;                   /* this breaker's unit in CPU 0's arena region; CPU i's
                                    * is pcpu_stride * i bytes further (percpu.h) */
    uint32_t ncpu;
    uint32_t footprint;            /* bytes: circuit_test_footprint (CFG1's bounds keep it
                                    * under 2 MB) */
    uint16_t arena_unit;           /* the unit index in its arena chunk (percpu.c) */
    uint16_t pcpu_stride;          /* bytes between two CPUs' units: its chunk's region */

    /* read on every call (pending) and written when transitions are made */
    _Alignas(64) uint64_t pending;         /* published and not yet delivered */
    circuit__shared *s;                    /* the shared state (read-only pointer) */
    uint64_t delivering;                   /* 1 while a thread holds the delivery role */
    struct __cds_lfs_stack stack;          /* published records */
    uint64_t pool_free;                    /* bit i set: pool[i] is free */
    uint64_t making;                       /* shared mode: this process's transition makers
                                            * between their core CAS and their push */
    uint32_t proc;                         /* shared mode: this process's id (its pid), 0 for
                                            * circuit_new; read-only */
    uint32_t shared;                       /* 1: attached by circuit_shared_attach; read-only */
    uint64_t proc_start;                   /* shared mode: this process's start time (clock
                                            * ticks since boot, /proc/self/stat); read-only */
    circuit__u128 intent_ctx[2];           /* {key, call_ctx}: who, in this process, made the
                                            * newest trip [0] and isolate [1] intent (O6) */
    /* owned by the thread holding the delivery role */
    circuit__node *held;                   /* records waiting for an earlier generation */
    uint64_t next_gen;                     /* 64-bit generation of the next delivery */

    circuit__node pool[CIRCUIT_TRANSITION_POOL];
};

/* The generation tag's width in the state word (word.h) and in a ticket. */
#define CIRCUIT__GEN_BITS 30

/* ---- tickets (the caller-owned circuit_ticket, seen from inside) --------- */
#define CIRCUIT__TICKET_MAGIC UINT64_C(0xc1bc0de500000000)
#define CIRCUIT__TK_LIVE     1u /* admitted while closed, not settled */
#define CIRCUIT__TK_DONE     2u
#define CIRCUIT__TK_RELEASED 3u
#define CIRCUIT__TK_REJECTED 4u
#define CIRCUIT__TK_PROBE    5u /* a probe, not settled */
#define CIRCUIT__NO_SLOT     UINT32_MAX

typedef struct circuit__ticket {
    uint64_t status;     /* CIRCUIT__TICKET_MAGIC | phase; 0 = blank */
    circuit_breaker *b;
    void *call_ctx;
    /* The admission, as one word whose bits 2-31 are the generation tag:
     * closed, the closed mirror's value (bits 32-58: the epoch, nothing
     * above: a cell of that epoch, unsealed, compares equal above bit 31);
     * a probe, the slot's reuse sequence in bits 32-63. */
    uint64_t word;
    union {
        circuit__pcpu *unit; /* TK_LIVE: the per-CPU unit admission counted
                              * on; the success counts on it too */
        uint32_t slot;       /* TK_PROBE: the probe slot */
    } at;
} circuit__ticket;

/* The generation tag a ticket was admitted in (word.h's layout). */
static inline uint32_t circuit__ticket_gen(const circuit__ticket *tk)
{
#if defined(CIRCUIT_PLANT_TICKET_GEN27)
    /* PLANTED BUG (tests/sched/PLANTS.md): the tag cut to the epoch's 27
     * bits: past 2^27 every result but a closed success is late (T6) */
    return (uint32_t)((tk->word >> 2) & ((UINT64_C(1) << 27) - 1));
#endif
    return (uint32_t)((tk->word >> 2) & ((UINT64_C(1) << CIRCUIT__GEN_BITS) - 1));
}
static inline uint32_t circuit__ticket_reuse(const circuit__ticket *tk)
{
    return (uint32_t)(tk->word >> 32);
}

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
enum circuit__cb_kind {
    CIRCUIT__CB_CLASSIFY, /* 0: circuit_done's frame is the breaker's address alone */
    CIRCUIT__CB_TRIP,
    CIRCUIT__CB_PROBE,
    CIRCUIT__CB_OPEN_FOR,
    CIRCUIT__CB_OBSERVE
};
/* The kind's name, for circuit_free's message (breaker.c). */
const char *circuit__cb_name(unsigned kind);

typedef struct circuit__cb_frame {
    uintptr_t in; /* the breaker's address | the callback's kind (breakers are
                   * 64-byte aligned, so the low bits are free) */
    struct circuit__cb_frame *prev;
} circuit__cb_frame;

extern __thread circuit__cb_frame *circuit__cb_top __attribute__((tls_model("initial-exec")));

static inline void circuit__cb_enter(circuit__cb_frame *f, const struct circuit_breaker *b,
                                     enum circuit__cb_kind kind)
{
    f->in = (uintptr_t)b | (uintptr_t)kind;
    f->prev = circuit__cb_top;
    circuit__cb_top = f;
}

/* Declared with __attribute__((cleanup)) on the frame, so that a callback
 * that unwinds (C++ exception, pthread_exit; the library is built with
 * -fexceptions) pops its frame too. */
static inline void circuit__cb_leave(circuit__cb_frame *f) { circuit__cb_top = f->prev; }

#define CIRCUIT__CB_FRAME(name, b, kind)                                                    \
    circuit__cb_frame name __attribute__((cleanup(circuit__cb_leave)));                     \
    circuit__cb_enter(&name, (b), (kind))

/* ---- ground services -------------------------------------------------------- */

/* config.c: checks the config (CFG1) and, if the policy has one, asks
 * policy->check (K1); on EINVAL writes CFG2's single message naming every
 * bad field and the policy's complaint. */
int circuit__validate(const circuit_config *cfg, const circuit_policy *policy, char *errbuf,
                      size_t errbuf_len);

/* clock.c: CLOCK_MONOTONIC in ns (the test build: testing.c's settable
 * clock, unless a test asks for the real one). */
int64_t circuit__now(void);

/* breaker.c: what circuit_new and circuit_shared_attach share. */
void circuit__check_spec(circuit_breaker **out, const circuit_spec *spec, const char *fn);
void circuit__check_no_callback(const circuit_breaker *b, const char *fn);
uint32_t circuit__cpus_configured(void);
size_t circuit__arrays_bytes(uint32_t window, uint32_t probes);
void circuit__handle_carve(circuit_breaker *b, circuit__shared *s, char *arrays, uint32_t window,
                           uint32_t probes);
void circuit__handle_callbacks(circuit_breaker *b, const circuit_spec *spec);

/* percpu.c: who owns a flush in shared memory. circuit__proc_self: this
 * process's id (its pid, 0 when it does not fit the control word's 22 bits:
 * never taken over); circuit__proc_alive: whether the process `id` (a pid;
 * in the schedule checker's build, a scenario thread playing a process)
 * still exists. */
uint32_t circuit__proc_self(void);
bool circuit__proc_alive(uint32_t id);
/* the start time of process `id` (0: this one), clock ticks after boot,
 * 40 bits; 0 when unknown */
#define CIRCUIT__START_MASK ((UINT64_C(1) << 40) - 1)
uint64_t circuit__proc_start(uint32_t id);
int64_t circuit__clock_monotonic(void);

/* Aborts unless b is a live breaker built by circuit_new (CFG4). */
static inline void circuit__check_breaker(const circuit_breaker *b, const char *fn)
{
    if (!b)
        circuit__abort("%s: breaker is NULL", fn);
    if (b->magic != CIRCUIT__MAGIC)
        circuit__abort("%s: breaker is not a live breaker (not built by circuit_new or "
                       "circuit_shared_attach, or already freed or detached)", fn);
}

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

#ifdef CIRCUIT_TESTING
void circuit__test_hook(circuit_test_point p);
void circuit__test_count_core_cas(void);
void circuit__test_count_stats_pass(void);
void circuit__test_count_shared_rmw(void);
void circuit__test_count_window_words(uint64_t n);
uint32_t circuit__test_cpus(void);
int64_t circuit__test_clock(void);
#define CIRCUIT__TEST_CLOCK() circuit__test_clock()
#define CIRCUIT__HOOK(p) circuit__test_hook(p)
#define CIRCUIT__SHARED_RMW() circuit__test_count_shared_rmw()
#define CIRCUIT__WINDOW_WORDS(n) circuit__test_count_window_words(n)
#define CIRCUIT__CORE_CAS_COUNT() circuit__test_count_core_cas()
#define CIRCUIT__STATS_PASS() circuit__test_count_stats_pass()
#define CIRCUIT__TEST_CPUS() circuit__test_cpus()
#else
#define CIRCUIT__HOOK(p) ((void)0)
#define CIRCUIT__SHARED_RMW() ((void)0)
#define CIRCUIT__WINDOW_WORDS(n) ((void)0)
#define CIRCUIT__CORE_CAS_COUNT() ((void)0)
#define CIRCUIT__STATS_PASS() ((void)0)
#define CIRCUIT__TEST_CPUS() 0u
#endif

#endif
