/*
 * libcircuit: a lock-free circuit breaker for the hot path of multi-core
 * proxies and servers.  SPDX-License-Identifier: MIT
 *
 * One breaker guards one dependency (an upstream, a service) inside one
 * process. It is a state machine only: no I/O, threads, timers or retries.
 *   closed     every call is admitted; after each counted failure the `trip`
 *              policy decides whether to open (a success never opens).
 *   open       every call is rejected until the open period has passed.
 *   half-open  at most config.probes calls (probes) are in flight; after each
 *              probe result or probe timeout the `probe` policy decides:
 *              close, reopen, or keep probing.
 *   isolated   held open by circuit_isolate until circuit_reset.
 *
 * The idiom (allow -> guard -> call -> done):
 *     CIRCUIT_TICKET_GUARD(t);                   // released on any way out
 *     circuit_rejection rej;
 *     if (!circuit_allow(b, req, &t, &rej))
 *         return reply_503(req, rej.retry_after_ns);    // failed fast
 *     circuit_done(&t, forward(req));            // settle straight after
 *
 * Units: every time is CLOCK_MONOTONIC in nanoseconds (int64_t, > 0 where a
 * duration is configured; CIRCUIT_S(), CIRCUIT_MS() write them). No timer
 * runs: the next circuit_allow or circuit_done makes the time-driven changes
 * (open -> half-open, probe timeouts) as of the moment each fell due.
 *
 * Errors: functions that return a status return 0 or a positive errno
 * (pthread-style); the text and number helpers return -1 and set errno.
 * Aborts: a programming error (each listed under "Aborts") prints one line
 * starting with "libcircuit: " on stderr and calls abort().
 *
 * Threads: every call but circuit_new and circuit_free may run on any thread
 * at once, takes no lock (a thread stopped inside one never keeps another
 * from finishing) and allocates nothing beyond CIRCUIT_TRANSITION_POOL. While
 * closed, a success counts on its admitting CPU's line, which no other CPU
 * writes unless a ticket moved. Callbacks: see circuit_policy and circuit_spec;
 * what a thread did before the call that made a transition happens-before the
 * observe call that delivers it.
 *
 * Stats, no call running: admitted = successes + failures + ignored + late + released + live
 * (live: tickets admitted, not yet settled). A hung upstream: keep
 * config.probe_timeout_ns >= the call's own deadline (circuit_config). Rule
 * ids in parentheses (C1, T7) are in docs/CONTRACT.md.
 */
#ifndef CIRCUIT_H
#define CIRCUIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Marks the exported functions (every other symbol is hidden). */
#if defined(__GNUC__) || defined(__clang__)
#define CIRCUIT_API __attribute__((visibility("default")))
#else
#define CIRCUIT_API
#endif

/** Version of this header; circuit_version() tells the library's. While the
 *  major is 0, a new minor may change the API; a new patch changes neither. */
#define CIRCUIT_VERSION_MAJOR 0
#define CIRCUIT_VERSION_MINOR 4
#define CIRCUIT_VERSION_PATCH 0

typedef enum circuit_state {
    CIRCUIT_CLOSED = 1,
    CIRCUIT_OPEN = 2,
    CIRCUIT_HALF_OPEN = 3,
    CIRCUIT_ISOLATED = 4  /**< held open by circuit_isolate until circuit_reset */
} circuit_state;

/** Why a transition was made. */
typedef enum circuit_cause {
    CIRCUIT_CAUSE_POLICY = 1,   /**< trip or probe decided, after a result or a probe timeout */
    CIRCUIT_CAUSE_TIMER = 2,    /**< open -> half-open: the open period ended */
    CIRCUIT_CAUSE_OPERATOR = 3  /**< circuit_isolate or circuit_reset */
} circuit_cause;

typedef enum circuit_outcome {
    CIRCUIT_SUCCESS = 1, /**< counted as a success */
    CIRCUIT_FAILURE = 2, /**< counted as a failure */
    CIRCUIT_IGNORED = 3  /**< not counted; frees the probe slot it held */
} circuit_outcome;

/* The types, defined after the functions. circuit_breaker is opaque. */
typedef struct circuit_breaker circuit_breaker;
typedef struct circuit_config circuit_config;
typedef struct circuit_counts circuit_counts;
typedef struct circuit_policy circuit_policy;
typedef struct circuit_transition circuit_transition;
typedef struct circuit_open_info circuit_open_info;
typedef struct circuit_spec circuit_spec;
typedef struct circuit_rejection circuit_rejection;
typedef struct circuit_stats circuit_stats;
typedef struct circuit_ticket circuit_ticket;

/* The callbacks (contracts at circuit_spec). */
typedef circuit_outcome (*circuit_classify_fn)(void *arg, void *call_ctx, int result);
typedef void (*circuit_observe_fn)(void *arg, void *call_ctx, const circuit_transition *t);
typedef int64_t (*circuit_open_for_fn)(void *arg, const circuit_open_info *info);

/* ---- The functions (one contract each, below the types) -------------------- */
/* Build and destroy. Not thread-safe for the breaker built or destroyed. */
CIRCUIT_API int circuit_new(circuit_breaker **out, const circuit_spec *spec,
                            char *errbuf, size_t errbuf_len);
CIRCUIT_API void circuit_free(circuit_breaker *b);

/* The call. Thread-safe, lock-free. */
CIRCUIT_API bool circuit_allow(circuit_breaker *b, void *call_ctx,
                               circuit_ticket *t, circuit_rejection *rej);
CIRCUIT_API bool circuit_done(circuit_ticket *t, int result);
CIRCUIT_API void circuit_release(circuit_ticket *t);

/* Reads: pure, no callback, safe inside observe. */
CIRCUIT_API circuit_state circuit_get_state(const circuit_breaker *b);
CIRCUIT_API void circuit_get_stats(const circuit_breaker *b, circuit_stats *out);
CIRCUIT_API uint64_t circuit_get_salt(const circuit_breaker *b);

/* Operator control. Thread-safe, lock-free, may run inside observe. */
CIRCUIT_API int circuit_isolate(circuit_breaker *b, void *call_ctx);
CIRCUIT_API int circuit_reset(circuit_breaker *b, void *call_ctx);

/* Text and numbers. Thread-safe, pure. */
CIRCUIT_API int64_t circuit_retry_after_s(const circuit_rejection *r);
CIRCUIT_API int circuit_rejection_format(const circuit_rejection *r, char *buf, size_t len);
CIRCUIT_API const char *circuit_state_name(circuit_state s);
CIRCUIT_API const char *circuit_outcome_name(circuit_outcome o);
CIRCUIT_API const char *circuit_version(int *major, int *minor, int *patch);
/** Another name of circuit_release, kept so that older programs still link. */
CIRCUIT_API void circuit_ticket_guard_release(circuit_ticket *t);

/* ---- Limits, durations, memory (CIRCUIT_CAST_: a static_cast in C++) ------ */
#ifdef __cplusplus
#define CIRCUIT_CAST_(type, x) (static_cast<type>(x))
#else
#define CIRCUIT_CAST_(type, x) ((type)(x))
#endif

/** Durations in ns: CIRCUIT_S(30) is 30 s; the argument is converted to int64_t. */
#define CIRCUIT_NS(x) CIRCUIT_CAST_(int64_t, x)
#define CIRCUIT_US(x) (CIRCUIT_CAST_(int64_t, x) * INT64_C(1000))
#define CIRCUIT_MS(x) (CIRCUIT_CAST_(int64_t, x) * INT64_C(1000000))
#define CIRCUIT_S(x)  (CIRCUIT_CAST_(int64_t, x) * INT64_C(1000000000))

/** Upper bound of circuit_config.window and circuit_config.probes. */
#define CIRCUIT_MAX_COUNT 65536
/** The consecutive runs stop growing here (2^31 - 1); they never wrap. */
#define CIRCUIT_RUN_MAX INT64_C(2147483647)
/** circuit_counts.timed_out stops growing here (2^14 - 1); it never wraps. */
#define CIRCUIT_TIMED_OUT_MAX INT64_C(16383)
/** Transition records each breaker preallocates; publishing a transition
 *  calls malloc only while more than this many wait for delivery (T7). */
#define CIRCUIT_TRANSITION_POOL 4

/** Upper bound, in bytes, of what circuit_new allocates for one breaker,
 *  allocator overhead excluded (L5). The 16 bytes per CPU configured live in
 *  a process-wide per-CPU arena allocated in chunks: the bound holds once
 *  chunks are full, while a process's first breakers hold more (one (64, 1)
 *  breaker alone: 9752 bytes on 64 CPUs; docs/design/public-api-notes.md).
 *  Example: window 64, probes 1: 1520 bytes on 2 CPUs, 2512 on 64. */
#define CIRCUIT_FOOTPRINT_FIXED 960
#define CIRCUIT_FOOTPRINT_PER_CPU 16
#define CIRCUIT_FOOTPRINT_MAX(window, probes, cpus)                                     \
    (CIRCUIT_CAST_(size_t, CIRCUIT_FOOTPRINT_FIXED) +                                     \
     ((window) > 1 ? CIRCUIT_CAST_(size_t, window) * 8u : 0u) +                           \
     ((window) > 64 ? ((CIRCUIT_CAST_(size_t, window) + 63u) / 64u) * 16u : 0u) +         \
     CIRCUIT_CAST_(size_t, probes) * 16u +                                                 \
     CIRCUIT_CAST_(size_t, cpus) * CIRCUIT_FOOTPRINT_PER_CPU)

/* ---- The types ------------------------------------------------------------ */

/** Breaker configuration. Nothing is defaulted, rounded or clamped: a value
 *  out of range makes circuit_new fail with EINVAL (CFG1).
 *  A hung upstream (one that accepts calls and never answers) ends every call
 *  by the caller's own deadline: every call in flight before the first
 *  deadline fails, and the breaker opens once `trip` says so. While half-open
 *  a probe holds its slot until probe_timeout_ns; if that is SHORTER than the
 *  call's deadline, the slot is freed while the first probe still hangs, a
 *  second probe is admitted, and the first one's result comes late (not
 *  counted). Keep probe_timeout_ns >= the call's deadline. */
struct circuit_config {
    int     window;           /**< results the count window covers, 1..CIRCUIT_MAX_COUNT */
    int     probes;           /**< probes in flight while half-open, 1..CIRCUIT_MAX_COUNT.
                               *   Half-open is for a few probes: an allow refused
                               *   there reads every slot (twice when probes > 1;
                               *   per call, one
                               *   thread, a 2-vCPU Xeon: 90 ns at 8 probes, 0.2 us
                               *   at 64, 8 us at 4096) */
    int64_t open_for_ns;      /**< ns open before half-open, > 0 (when spec.open_for is NULL) */
    int64_t probe_timeout_ns; /**< ns a probe may hold its slot, > 0; keep >= the call's deadline */
};

/** Counts of the current state, given to the policies and carried by a
 *  transition; all >= 0. */
struct circuit_counts {
    /** Among the latest `window` counted results of the current state:
     *  successes + failures <= window (C1). */
    int64_t successes, failures;
    /** The current run, not bounded by the window; at most one is non-zero
     *  (C2). Ignored results and probe timeouts neither extend nor end it. */
    int64_t consecutive_successes, consecutive_failures;
    /** Probe timeouts in the current half-open state, 0 otherwise (C3). */
    int64_t timed_out;
};

/** The caller's decisions. trip and probe are REQUIRED; they (and check) must
 *  be pure functions of their arguments, must not modify *arg and must not
 *  call the breaker: they run without a lock, on several threads at once, and
 *  more than once for one result when another thread's update wins first (the
 *  last answer counts) (L4). */
struct circuit_policy {
    /** Closed, after each counted failure, with exact counts that include it:
     *  true opens. Never asked after a success (S2), so a policy whose
     *  condition a success would meet (a failure rate whose minimum number of
     *  results a success reaches) opens at the next failure if it still holds. */
    bool (*trip)(void *arg, const circuit_counts *counts);
    /** Half-open, after each probe success, failure and timeout:
     *  CIRCUIT_CLOSED closes, CIRCUIT_OPEN reopens for a fresh open period,
     *  CIRCUIT_HALF_OPEN keeps probing. Any other value aborts. */
    circuit_state (*probe)(void *arg, const circuit_counts *counts);
    void *arg;  /**< given to all three; must outlive the breaker */
    /** Optional: called once by circuit_new with the config. Returns 0 to
     *  accept, or EINVAL after writing one NUL-terminated complaint into errbuf
     *  (errbuf_len >= 1 bytes, never NULL); circuit_new then fails with EINVAL
     *  and its message ends with the complaint (K1). Any other value aborts. */
    int (*check)(void *arg, const circuit_config *cfg, char *errbuf, size_t errbuf_len);
};

/** One change of state, as given to observe. */
struct circuit_transition {
    circuit_state  from, to;
    uint64_t       generation;  /**< 1 for the first transition, then 2, 3, ... */
    circuit_counts counts;      /**< final counts of the state left, including the result
                                     or timeout that caused it; zero for open -> half-open */
    circuit_cause  cause;
    int32_t        : 32;        /* padding, not a member */
    int64_t        open_for_ns; /**< the open period chosen when to is CIRCUIT_OPEN, ns; else 0 */
};

/** What open_for is told when the breaker opens (B1, B2). */
struct circuit_open_info {
    circuit_counts counts;     /**< final counts of the state left */
    uint64_t       generation; /**< of the open state being entered, >= 1 */
    int64_t        reopens;    /**< 0 for a trip from closed; k for the k-th reopen since
                                    the breaker last closed */
    uint64_t       salt;       /**< the breaker's salt (circuit_get_salt), never 0 */
};

/** Everything circuit_new needs; read during circuit_new only. The args
 *  must outlive the breaker.
 *  classify (required) maps a result to an outcome; it runs in circuit_done
 *  on the caller's thread, outside every internal critical region, once per
 *  call, and may run concurrently with itself. Any other value than the three
 *  outcomes aborts.
 *  observe (optional) receives every transition exactly once, in generation
 *  order, never concurrently with itself (O1-O6). call_ctx is that of the call
 *  that made the transition (also when another thread finished it; when two
 *  calls of one kind race to the same decision, the loser's may be given). t
 *  is valid during the call only. It runs on the thread that made the
 *  transition, or on the one delivering at the time; once every call has
 *  returned, every transition has been delivered. It may call this breaker
 *  (not circuit_free): what those calls change is delivered after it returns.
 *  If it unwinds, the next circuit_allow or circuit_done delivers the rest.
 *  open_for (optional) chooses each open period in ns, > 0 (else abort); it
 *  runs like trip (pure, concurrent, possibly more than once) (B1-B3). */
struct circuit_spec {
    circuit_config      config;
    circuit_policy      policy;
    circuit_classify_fn classify;  void *classify_arg;  /**< required */
    /** Optional: NULL means no observer; transitions are still made and counted. */
    circuit_observe_fn  observe;   void *observe_arg;
    /** Optional: NULL means every open period is config.open_for_ns. */
    circuit_open_for_fn open_for;  void *open_for_arg;
    /** Given to open_for as circuit_open_info.salt, so that breakers sharing one
     *  open_for and arg do not probe in step. Non-zero: used as given (a hash of
     *  the upstream's name is stable across restarts). 0: circuit_new takes the
     *  next number of a process-wide count (1, 2, 3, ...). */
    uint64_t            salt;
};

/** Why a call was rejected. */
struct circuit_rejection {
    circuit_state state;          /**< CIRCUIT_OPEN; CIRCUIT_HALF_OPEN when every probe
                                       slot is taken; CIRCUIT_ISOLATED */
    int32_t       : 32;           /* padding, not a member */
    int64_t       retry_after_ns; /**< open: ns left of the open period, 1..the period;
                                       0 when half-open or isolated */
};

/** A snapshot for dashboards (circuit_get_stats). Totals count since
 *  circuit_new and never decrease. */
struct circuit_stats {
    circuit_state  state;            /**< what circuit_get_state would return */
    int32_t        : 32;             /* padding, not a member */
    uint64_t       generation;       /**< of that state; 0 while never left closed */
    circuit_counts counts;           /**< of that state (zero while open or isolated) */
    int64_t        probes_in_flight; /**< half-open: probe slots held; otherwise 0 */
    int64_t        retry_after_ns;   /**< open: ns left of the open period; otherwise 0 */
    uint64_t admitted, rejected;           /**< circuit_allow answers */
    uint64_t successes, failures, ignored; /**< results counted in their own generation */
    uint64_t late;                         /**< results discarded: circuit_done returned false */
    uint64_t released;                     /**< live tickets settled by circuit_release */
    uint64_t timed_out;                    /**< probe timeouts */
    uint64_t transitions;                  /**< transitions made */
};

/** A call's admission, owned by the caller (usually on its stack), filled by
 *  circuit_allow, settled once by circuit_done or circuit_release (maybe on
 *  another thread); contents private. Settle the ticket itself, never a copy;
 *  reuse its memory once settled; start it as CIRCUIT_TICKET_INIT when a scope
 *  may end before circuit_allow. Generations are told apart by their low 30
 *  bits: a ticket outstanding across 2^30 transitions (minutes of isolate and
 *  reset at full speed, days of flapping) may count in a later state (T6). */
struct circuit_ticket {
    uint64_t circuit_private_[5];
};

/** A blank ticket: circuit_release on it does nothing; circuit_done aborts. */
#define CIRCUIT_TICKET_INIT {{0, 0, 0, 0, 0}}

/** CIRCUIT_TICKET_GUARD(name) declares a blank ticket `name` released by
 *  circuit_release when its scope is left by any path: return, break, goto,
 *  pthread_exit, pthread_cancel, a C++ exception (compile C callers with
 *  -fexceptions for unwinding). GCC and Clang (__attribute__((cleanup))). */
#if defined(__GNUC__) || defined(__clang__)
#define CIRCUIT_TICKET_GUARD(name)                                       \
    circuit_ticket name __attribute__((cleanup(circuit_release))) =     \
        CIRCUIT_TICKET_INIT
#endif

/* ---- Reference: one contract per function ---------------------------------
 *
 * circuit_new(out, spec, errbuf, errbuf_len) builds a closed breaker
 * (generation 0; no transition is delivered for it) from a copy of *spec.
 *   out         receives the breaker, or NULL on failure.
 *   errbuf      on EINVAL, ONE NUL-terminated message naming every invalid
 *               field with its bound and the value given, cut to
 *               errbuf_len - 1 bytes; may be NULL (errbuf_len 0 writes nothing).
 *   Errors: EINVAL (invalid config, or policy.check refused), ENOMEM (nothing
 *   leaked). Memory: CIRCUIT_FOOTPRINT_MAX, never growing with traffic.
 *   Aborts: out, spec, policy.trip, policy.probe or classify is NULL;
 *   policy.check returned neither 0 nor EINVAL. Threads may build and free
 *   different breakers at once: both take a process-wide mutex briefly (no
 *   callback under it), so neither is safe in a signal handler or in the child
 *   of a fork() made while another thread was inside one.
 *
 * circuit_free(b) destroys b (NULL: nothing) and frees all its memory.
 *   Transitions not yet delivered are discarded (observe is not called). No
 *   other call on b may be running or follow, and no ticket of b may remain
 *   to be settled. Freeing another breaker from a callback is fine.
 *   Aborts: b not built by circuit_new (or already freed); called from inside
 *   a callback of b on this thread (the message names the callback).
 *
 * circuit_allow(b, call_ctx, t, rej) asks to make one call.
 *   call_ctx    the caller's, may be NULL; given to classify, and to observe
 *               for the transitions this call makes.
 *   t           filled when admitted; its previous contents are not read (a
 *               live ticket passed again is overwritten, never settled).
 *   rej         filled when rejected; may be NULL.
 *   Delivers pending transitions, makes the time-driven changes that fell due,
 *   then decides. Returns true (admitted: settle t with circuit_done or
 *   circuit_release) or false (rejected: t is marked rejected). The call that
 *   makes open -> half-open is always admitted, as the first probe (S3).
 *   Closed, it reads no clock. May run observe, probe and open_for on this
 *   thread; may call malloc once for a transition beyond the pool (T7).
 *   Aborts: b or t is NULL; b not built by circuit_new; probe returned an
 *   invalid state or open_for a period <= 0; malloc failed for a transition.
 *
 * circuit_done(t, result) settles a live ticket with the call's result.
 *   result      the caller's code (0, -errno, an HTTP status...): only
 *               classify gives it a meaning.
 *   Runs classify first, outside every internal critical region (if classify
 *   unwinds, the ticket stays live and a guard releases it); makes the
 *   time-driven changes that fell due; counts the outcome only if the breaker
 *   is still in the generation the call was admitted in, asking trip (closed)
 *   or probe (half-open); frees the probe slot; delivers transitions (observe
 *   may run on this thread; malloc as in circuit_allow). Returns true when
 *   the result reached its own generation (ignored included), false when it
 *   came late and was discarded (T2). A timed-out probe's result still counts
 *   if the state has not changed.
 *   Aborts: t is NULL; t not filled by circuit_allow; t was rejected; t was
 *   already settled ("by done" / "by release"); its breaker freed (unless a
 *   new one took its address); classify returned no outcome; probe an invalid
 *   state; open_for a period <= 0; malloc failed.
 *
 * circuit_release(t) settles a live ticket without a result: counts nothing,
 *   frees its probe slot at once (a slot whose timeout already fell due is
 *   left to time out as of its due moment). Does nothing to a settled,
 *   rejected or blank ticket. Calls no callback and delivers nothing: safe
 *   while unwinding. For a ticket that holds a probe slot, done and release
 *   may race on two threads (exactly one settles; a losing done aborts "already
 *   settled by release"); a ticket admitted while closed must not be settled
 *   from two threads at once (undefined) (T5).
 *   Aborts: t is NULL; t holds bytes circuit_allow never wrote; a live t's breaker freed.
 *
 * circuit_get_state(b) returns the current state; reports CIRCUIT_HALF_OPEN as
 *   soon as the open period has passed (reads the clock only while open).
 *   Changes nothing, calls no callback (S5). Aborts: b NULL or not built.
 *
 * circuit_get_stats(b, out) fills *out (M1). A pure read: no lock, no
 *   callback, no write to memory another thread reads. While calls run, each
 *   field is a value it held during the call (state, generation and counts
 *   one moment; the totals not one atomic snapshot); on a quiescent breaker
 *   every field is exact and the identity at the top holds. Cost: O(CPUs)
 *   loads, read again only when another thread's progress overtook the read.
 *   Aborts: b or out is NULL; b not built by circuit_new.
 *
 * circuit_get_salt(b): the salt b gives open_for (circuit_spec.salt, or the
 *   one circuit_new chose), never 0. Aborts: b NULL or not built.
 *
 * circuit_isolate(b, call_ctx) makes the transition to CIRCUIT_ISOLATED from
 *   closed, open or half-open (cause operator, the final counts of the state
 *   left) and returns 0; already isolated: EALREADY, nothing changed. Then
 *   every circuit_allow is rejected with {CIRCUIT_ISOLATED, 0}, no policy is
 *   asked, nothing time-driven happens and earlier tickets' results are late.
 *   Time-driven changes that fell due, and a trip another call started, are
 *   made first (so an open breaker whose period is over delivers open ->
 *   half-open, then half-open -> isolated). call_ctx goes to observe.
 *   Inside observe, its transition is delivered after observe returns.
 *   Aborts: b NULL or not built; probe returned an invalid state, or open_for
 *   a period <= 0, for a probe timeout made first; malloc failed.
 *
 * circuit_reset(b, call_ctx) closes the breaker with zero counts from open,
 *   half-open or isolated (cause operator) and returns 0; outstanding probes
 *   become late, and the next opening counts as a trip (reopens = 0). Already
 *   closed: EALREADY, nothing changed (a trip another call decided is
 *   finished first, and then closed: 0). Otherwise as circuit_isolate.
 *
 * circuit_retry_after_s(r) returns whole seconds for an HTTP Retry-After:
 *   open: retry_after_ns rounded up (>= 1); half-open: 1; isolated: 0 (send no
 *   Retry-After). Errors: -1 with errno EINVAL when r is NULL or its state
 *   invalid.
 *
 * circuit_rejection_format(r, buf, len) writes a text such as "circuit open:
 *   retry after 1.500000000 s" like snprintf: at most len bytes with the NUL
 *   (buf may be NULL when len is 0); returns the full length without the NUL.
 *   Errors: -1 with errno EINVAL when r is NULL or its state invalid.
 *
 * circuit_state_name(s), circuit_outcome_name(o): "closed", "open", "half-open",
 *   "isolated" / "success", "failure", "ignored"; "invalid" for other values.
 *
 * circuit_version(major, minor, patch) returns the linked library's version
 *   as "MAJOR.MINOR.PATCH" (static) and stores each number where the pointer
 *   is not NULL; compare with CIRCUIT_VERSION_*.
 */

#ifdef __cplusplus
}
#endif

#endif /* CIRCUIT_H */
