/*
 * libcircuit: a lock-free circuit breaker for the hot path of multi-core
 * proxies and servers.
 *
 * SPDX-License-Identifier: MIT
 *
 * Rule ids cited here and in the tests ("C1", "T7", "L1-L7") are
 * defined in docs/CONTRACT.md.
 *
 * One breaker guards ONE dependency (an upstream host, a service) inside ONE
 * process. It is a state machine and nothing else: no I/O, no threads, no
 * timers, no retries, no registry. Any number of threads may call one breaker
 * at once; no call ever takes a lock, and none allocates except to queue a
 * transition beyond the preallocated pool while observe is busy (T7; see
 * "Concurrency" below).
 *
 * States
 *   closed     every call is admitted and its result counted; after each
 *              counted failure the `trip` policy decides whether to open
 *              (a success never asks it: a success cannot open the
 *              breaker; see circuit_policy.trip).
 *   open       every call is rejected at once until the open period has
 *              passed since the breaker opened (config.open_for_ns, or what
 *              spec.open_for chooses).
 *   isolated   held open by an operator (circuit_isolate) until
 *              circuit_reset; no time-driven change.
 *   half-open  at most `probes` calls (probes) are in flight; after each probe
 *              result and each probe timeout the `probe` policy decides:
 *              close, reopen, or keep probing.
 *
 * The call idiom (allow -> guard -> call -> done):
 *
 *     CIRCUIT_TICKET_GUARD(t);               // t is released on any exit
 *     circuit_rejection rej;
 *     if (!circuit_allow(b, req, &t, &rej))
 *         return reply_503(req, rej.retry_after_ns);    // failed fast
 *     int rc = forward(req);                 // the call
 *     circuit_done(&t, rc);                  // settle straight after the call
 *
 * Time is CLOCK_MONOTONIC in nanoseconds. Time-driven changes (open ->
 * half-open, probe timeouts) are not made by a timer: the next circuit_allow
 * or circuit_done makes them, as of the moment each fell due and in due-time
 * order, so the outcome does not depend on which call notices.
 *
 * Errors. A function that returns a status returns 0 or a positive errno
 * (pthread-style: circuit_new, circuit_isolate, circuit_reset). The text
 * and number helpers whose result is a length or a count follow snprintf
 * instead, so that the result keeps its own meaning: circuit_rejection_format
 * and circuit_retry_after_s (and circuit_stats_format_prometheus*) return
 * -1 and set errno on a bad argument.
 * Programming errors (listed per function under "Aborts") print one line
 * naming the cause on stderr, starting with "libcircuit: ", and call abort().
 *
 * Concurrency
 *   circuit_allow, circuit_done, circuit_release and circuit_get_state are
 *   lock-free: they take no mutex, spinlock or futex wait, and a thread stopped
 *   at any point inside one of them does not keep other threads from
 *   completing theirs. circuit_isolate, circuit_reset and circuit_get_stats
 *   are lock-free too. A result is counted only while the breaker is still
 *   in the generation the call was admitted in (T2). While closed, a
 *   success is counted in a per-CPU counter of the CPU the thread runs on,
 *   so circuit_allow + circuit_done of a success write no cache line that
 *   another CPU's allow or done writes; a failure is counted at an exact
 *   point: it reads those counters (without writing them), so the trip
 *   policy sees exact counts, and a transition out of closed seals them
 *   first (L6, L8). Probe results (half-open) are
 *   counted on the shared state word: probes are few by design.
 *   circuit_new and circuit_free are not thread-safe with respect to the
 *   breaker they create or destroy.
 *
 * Supported CPUs: x86-64 and aarch64 (the build refuses others by name); the
 * memory orders are C11's, stated at every shared access in src/, and rely
 * on neither CPU's own ordering.
 *
 * Memory ordering a caller can rely on
 *   - Everything a thread did before the circuit_done (or circuit_allow) call
 *     that made a transition happens-before the `observe` call that delivers
 *     it, whichever thread runs `observe`.
 *   - Each `observe` call happens-before the next one.
 *   - `classify` runs on the calling thread of circuit_done, before the result
 *     is counted. `trip` and `probe` run on the thread whose result or timeout
 *     is being counted, possibly more than once for one result when another
 *     thread's CAS wins first (hence they must be pure).
 */
#ifndef CIRCUIT_H
#define CIRCUIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Export macro: the library is built with -fvisibility=hidden and only the
 *  declarations marked CIRCUIT_API are visible in the shared object. */
#if defined(__GNUC__) || defined(__clang__)
#define CIRCUIT_API __attribute__((visibility("default")))
#else
#define CIRCUIT_API
#endif

/** The version of this header: 0.3.0. While the major version is 0, a new
 *  minor version may change the API or its meaning (the CMake package
 *  accepts only the same major.minor); a new patch version changes neither.
 *  circuit_version() tells the version of the library actually linked. */
#define CIRCUIT_VERSION_MAJOR 0
#define CIRCUIT_VERSION_MINOR 3
#define CIRCUIT_VERSION_PATCH 0

/** Upper bound of circuit_config.window and circuit_config.probes. */
#define CIRCUIT_MAX_COUNT 65536

/** Consecutive runs (circuit_counts.consecutive_successes/_failures) stop
 *  growing at this value (2^31 - 1); they never wrap. */
#define CIRCUIT_RUN_MAX INT64_C(2147483647)

/** circuit_counts.timed_out stops growing at this value (2^14 - 1) within one
 *  half-open state; it never wraps. A probe policy that has not decided after
 *  this many timeouts sees the value stay there. */
#define CIRCUIT_TIMED_OUT_MAX INT64_C(16383)

/** Number of transition records each breaker preallocates. Publishing a
 *  transition allocates (malloc) only while more than this many are made and
 *  not yet delivered; delivery normally follows within the call that made
 *  it, so a handful covers nested observe calls and a stopped deliverer. */
#define CIRCUIT_TRANSITION_POOL 4

/** Upper bound, in bytes, of the memory circuit_new allocates for one
 *  breaker (L5): a fixed part (the breaker and its
 *  transition pool), 8 bytes per window slot (none when window is 1) plus,
 *  for a window over 64, 16 bytes per 64 slots (the closed window's failure
 *  bitmap; up to 64 slots it sits in the fixed part), 16 bytes per probe
 *  slot plus 8 bytes per 32 probes (the slot bitmap), and 16 bytes per CPU
 *  configured (sysconf(_SC_NPROCESSORS_CONF)): the breaker's per-CPU part,
 *  a unit in each CPU's region of a process-wide arena shared by all
 *  breakers (the layout of the Linux kernel's alloc_percpu), so that no two
 *  CPUs write one cache line and no breaker needs a line of its own. The
 *  arena grows in chunks of 8 breakers (a line, 64 bytes or 128 on
 *  aarch64, + 128 x CPUs bytes) while the process holds fewer than 8, of
 *  64 breakers (a line + 1024 x CPUs bytes) after, and
 *  frees a chunk with its last breaker: a chunk's free units are the only
 *  memory not counted here (at most 63 units per CPU while breakers are
 *  only built; after frees, up to 63 in each chunk still in use, which new
 *  breakers fill first).
 *  Allocator overhead is not included.
 *  Example: window 64, probes 1: on 2 CPUs 960 + 512 + 16 + 8 + 32 = 1528;
 *  on 64 CPUs 960 + 512 + 16 + 8 + 1024 = 2520. */
#define CIRCUIT_FOOTPRINT_FIXED 960
#define CIRCUIT_FOOTPRINT_PER_CPU 16
#define CIRCUIT_FOOTPRINT_MAX(window, probes, cpus)                                  \
    ((size_t)CIRCUIT_FOOTPRINT_FIXED + ((window) > 1 ? (size_t)(window) * 8u : 0u) +   \
     ((window) > 64 ? (((size_t)(window) + 63u) / 64u) * 16u : 0u) +                   \
     (size_t)(probes) * 16u + (((size_t)(probes) + 31u) / 32u) * 8u +                 \
     (size_t)(cpus) * CIRCUIT_FOOTPRINT_PER_CPU)

/** Writing durations: CIRCUIT_S(30) is 30 s in ns. Arguments are converted
 *  to int64_t; the caller keeps them in range (about 292 years). */
#define CIRCUIT_NS(x) ((int64_t)(x))
#define CIRCUIT_US(x) ((int64_t)(x) * INT64_C(1000))
#define CIRCUIT_MS(x) ((int64_t)(x) * INT64_C(1000000))
#define CIRCUIT_S(x)  ((int64_t)(x) * INT64_C(1000000000))

typedef enum circuit_state {
    CIRCUIT_CLOSED = 1,
    CIRCUIT_OPEN = 2,
    CIRCUIT_HALF_OPEN = 3,
    CIRCUIT_ISOLATED = 4  /**< held open by circuit_isolate until circuit_reset (OP1) */
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

/** Breaker configuration. Nothing is defaulted, rounded or clamped: a value
 *  out of range makes circuit_new fail with EINVAL. */
typedef struct circuit_config {
    int     window;           /**< results the count window covers, 1..CIRCUIT_MAX_COUNT */
    int     probes;           /**< probes in flight while half-open, 1..CIRCUIT_MAX_COUNT */
    int64_t open_for_ns;      /**< time spent open before half-open, ns, > 0
                                   (the period when spec.open_for is NULL) */
    int64_t probe_timeout_ns; /**< longest a probe holds its slot, ns, > 0 */
} circuit_config;

/** Counts of the current state, as given to the policies and carried by a
 *  transition. All values are >= 0. */
typedef struct circuit_counts {
    /** Successes and failures among the latest `window` counted results of the
     *  current state: successes + failures <= window. */
    int64_t successes, failures;
    /** Length of the current run of successes or of failures. Not bounded by
     *  the window; at most one is non-zero; saturate at CIRCUIT_RUN_MAX.
     *  Ignored results and probe timeouts neither extend nor end a run. */
    int64_t consecutive_successes, consecutive_failures;
    /** Probes that timed out in the current half-open state (0 while closed);
     *  saturates at CIRCUIT_TIMED_OUT_MAX. */
    int64_t timed_out;
} circuit_counts;

/** The caller's decisions. Both functions are REQUIRED and must be pure
 *  functions of the counts (and of *arg, which they must not modify): they
 *  are called without any lock, may be called from several threads at once,
 *  and may be called more than once for one result when a concurrent update
 *  wins the CAS first (only the last answer takes effect). They must not call
 *  the breaker. */
typedef struct circuit_policy {
    /** Asked while closed after each counted failure, with exact counts
     *  that include it (C1, C2); true opens the breaker. Never asked
     *  after a success (S2): a success cannot open the
     *  breaker, which is what lets every closed success count on a per-CPU
     *  line. So a policy that would open on a success (e.g. "open after N
     *  results", or a failure rate whose minimum number of results is
     *  reached by a success) opens at the next failure, if its condition
     *  still holds then. */
    bool (*trip)(void *arg, const circuit_counts *counts);
    /** Asked while half-open after each probe success or failure and each
     *  probe timeout: CIRCUIT_CLOSED closes, CIRCUIT_OPEN reopens for a fresh
     *  open period (B1), CIRCUIT_HALF_OPEN keeps probing. Any other value
     *  aborts. */
    circuit_state (*probe)(void *arg, const circuit_counts *counts);
    void *arg;  /**< passed to all three; owned by the caller, must outlive the breaker */
    /** Optional (may be NULL): called once by circuit_new with the config
     *  being built. Return 0 to accept, or EINVAL after writing one
     *  NUL-terminated complaint (no trailing newline) into errbuf (errbuf_len
     *  bytes, never NULL, at least 1); circuit_new then fails with EINVAL and
     *  its message names every invalid config field followed by the policy's
     *  complaint (K1). Any other return value aborts. */
    int (*check)(void *arg, const circuit_config *cfg, char *errbuf, size_t errbuf_len);
} circuit_policy;

/** One change of state, as given to `observe`. */
typedef struct circuit_transition {
    circuit_state  from, to;
    uint64_t       generation; /**< 1 for the first transition, then 2, 3, ... */
    circuit_counts counts;     /**< final counts of the state left, including the
                                    result or timeout that caused the change;
                                    all zero for open -> half-open */
    circuit_cause  cause;      /**< policy, timer (open -> half-open) or operator */
    int64_t        open_for_ns; /**< the open period chosen when to == CIRCUIT_OPEN
                                     (B1), ns; 0 otherwise */
} circuit_transition;

/** What an open-period function is told when the breaker opens. */
typedef struct circuit_open_info {
    circuit_counts counts;     /**< final counts of the state left, as the transition carries */
    uint64_t       generation; /**< generation of the open state being entered (>= 1) */
    int64_t        reopens;    /**< 0 for a trip from closed; k for the k-th reopen
                                    (half-open -> open) since the breaker last closed */
    uint64_t       salt;       /**< the breaker's salt (circuit_spec.salt, or the one
                                    circuit_new chose; circuit_get_salt), never 0:
                                    lets one open_for function and one parameter struct
                                    give different breakers different periods */
} circuit_open_info;

/** Chooses the length of an open period, in ns; must return > 0 (anything
 *  else aborts). Called without any lock, possibly on several threads at
 *  once and more than once for one transition (only the answer of the CAS
 *  that wins takes effect): it must be a pure function of *info and *arg
 *  (B3), and must not call the breaker. */
typedef int64_t (*circuit_open_for_fn)(void *arg, const circuit_open_info *info);

/** Maps the caller's result code to an outcome. Called by circuit_done on the
 *  calling thread, outside every internal critical region, exactly once per
 *  circuit_done call, with the call_ctx given to circuit_allow. May run
 *  concurrently with itself. Returning anything but the three outcomes
 *  aborts. */
typedef circuit_outcome (*circuit_classify_fn)(void *arg, void *call_ctx, int result);

/** Receives every transition exactly once, in generation order, each one's
 *  `from` equal to the previous `to`. Never runs concurrently with itself and
 *  never inside an internal critical region; it may call any function of this
 *  breaker (allow and done included) without deadlock, except circuit_free
 *  (which aborts: see circuit_free): transitions those nested calls make are
 *  delivered after this call returns. `call_ctx` is the call_ctx of the
 *  call (circuit_allow, circuit_done, circuit_isolate, circuit_reset) that
 *  made the transition, also when another thread finished it (a trip or an
 *  isolate from closed is an intent any thread may finish, L1; its maker's
 *  call_ctx goes with it). Only when two calls of the same kind (two
 *  failing calls, two isolates) race to make an intent at the same exact
 *  point may the loser's call_ctx be given instead (O6).
 *  `t` is valid only during the call. It runs on whichever thread delivers:
 *  the thread that made the transition, unless another thread is delivering
 *  at the time (that one delivers it) or an EARLIER transition is still being
 *  queued by a thread stopped between making it and queueing it (order comes
 *  first: that thread delivers both once it resumes, before its own call
 *  returns). So once every call has returned, every transition has been
 *  delivered. If observe unwinds (pthread_exit, a C++ exception), the
 *  transitions still queued are delivered by the next circuit_allow or
 *  circuit_done. */
typedef void (*circuit_observe_fn)(void *arg, void *call_ctx, const circuit_transition *t);

/** Everything circuit_new needs. Read during circuit_new only; the callbacks'
 *  args must outlive the breaker. */
typedef struct circuit_spec {
    circuit_config      config;
    circuit_policy      policy;
    circuit_classify_fn classify;  void *classify_arg;  /**< required */
    /** Optional (0.3): NULL means no observer. Transitions are then made,
     *  numbered and counted (circuit_stats.transitions) exactly as with one;
     *  only the call is skipped. */
    circuit_observe_fn  observe;   void *observe_arg;
    /** Optional: the length of each open period (B1-B3). NULL: every
     *  open period is config.open_for_ns. */
    circuit_open_for_fn open_for;  void *open_for_arg;
    /** Given to open_for as circuit_open_info.salt, so that breakers sharing
     *  one open-period function and parameter struct need not probe in step
     *  (circuit_backoff_exponential mixes it into its jitter). Any value but
     *  0 is used as given (a hash of the upstream's name makes it stable
     *  across restarts). 0 (the default): circuit_new gives the breaker the
     *  next number of a process-wide count, 1 for the first breaker built
     *  with salt 0 in the process, then 2, 3, ...; circuit_get_salt tells it. */
    uint64_t            salt;
} circuit_spec;

/** Why a call was rejected. */
typedef struct circuit_rejection {
    circuit_state state;          /**< CIRCUIT_OPEN; CIRCUIT_HALF_OPEN when every
                                       probe slot is taken; CIRCUIT_ISOLATED */
    int64_t       retry_after_ns; /**< ns left open at the moment of rejection:
                                       opened_at + open_for - now, in 1..the
                                       open period chosen (B1); 0 when
                                       half-open or isolated */
} circuit_rejection;

/** A snapshot of a breaker for dashboards and metrics (circuit_get_stats). */
typedef struct circuit_stats {
    circuit_state  state;            /**< what circuit_get_state would return now */
    uint64_t       generation;       /**< of that state; 0 while never left closed */
    circuit_counts counts;           /**< of the current state (zero while open or isolated) */
    int64_t        probes_in_flight; /**< half-open: probe slots held; otherwise 0 */
    int64_t        retry_after_ns;   /**< open: ns left in the open period; otherwise 0 */
    /* Totals since circuit_new; they never decrease. */
    uint64_t admitted, rejected;           /**< circuit_allow answers */
    uint64_t successes, failures, ignored; /**< results reaching their own generation, by outcome */
    uint64_t late;                         /**< results discarded: circuit_done returned false */
    uint64_t released;                     /**< live tickets settled by circuit_release */
    uint64_t timed_out;                    /**< probe timeouts */
    uint64_t transitions;                  /**< transitions made */
} circuit_stats;

/** Opaque breaker. */
typedef struct circuit_breaker circuit_breaker;

/** A call's admission, owned by the caller (usually on its stack; no heap
 *  allocation is ever made for it). Filled by circuit_allow, settled exactly
 *  once by circuit_done or circuit_release. Its contents are private. A
 *  ticket may be settled on another thread than the one that called
 *  circuit_allow; the caller must make the ticket's memory visible to that
 *  thread (any ordinary hand-off does). Its memory may be reused once it is
 *  settled. Initialise it with CIRCUIT_TICKET_INIT (or use
 *  CIRCUIT_TICKET_GUARD) when a scope may be left before circuit_allow.
 *  Settle the ticket itself, never a copy: a memcpy'd live ticket is two
 *  tickets to the library (the behaviour is undefined).
 *
 *  Generations are told apart by their low 30 bits: a ticket kept
 *  outstanding across 2^30 (about 10^9) transitions can be counted in the
 *  later generation that has the same low bits (T2 and T6 hold up to that
 *  bound). Policy transitions pass through an open period (open_for_ns),
 *  so with open_for_ns >= 1 ms that is days of continuous flapping; but
 *  operator transitions have no period: a loop of circuit_isolate +
 *  circuit_reset at full speed reaches 2^30 in under 10 minutes. Likewise a thread stopped inside
 *  circuit_done of a closed success (before its per-CPU count) while 2^27
 *  closed epochs end (each trip, isolate or reset ends one) may count its
 *  success into the closed state that reuses its epoch id. A thread
 *  stopped before writing a closed point's record of counts (in a failure's
 *  circuit_done, or a reset entering closed) is harmless until 2^31 later
 *  points of the same parity (about 2^32 failures and state changes).
 *  A half-open state never reads what an older half-open state left (its
 *  window's failure records, a probe slot released after its timeout fell
 *  due) as its own: entering half-open empties whatever carries its tag. */
typedef struct circuit_ticket {
    uint64_t circuit_private_[5];
} circuit_ticket;

/** A blank ticket: circuit_release on it does nothing; circuit_done on it
 *  aborts. */
#define CIRCUIT_TICKET_INIT {{0, 0, 0, 0, 0}}

/**
 * circuit_new - build a breaker.
 * @out:        receives the breaker on success, NULL on failure.
 * @spec:       configuration, policy and callbacks; copied, not retained.
 * @errbuf:     on EINVAL, receives ONE NUL-terminated message naming every
 *              invalid field with its bound and the value given, truncated to
 *              errbuf_len - 1 bytes. May be NULL (then errbuf_len is ignored).
 * @errbuf_len: size of errbuf in bytes (0 writes nothing).
 *
 * The new breaker is closed (generation 0); no transition is delivered for
 * its creation. Memory: O(window + probes + CPUs), at most
 * CIRCUIT_FOOTPRINT_MAX(window, probes, CPUs configured); it never grows
 * with traffic (only transitions beyond the pool that are not yet delivered
 * hold more, until delivered). Creating and freeing cost O(window + probes
 * + CPUs).
 *
 * Returns 0, EINVAL (invalid config; *out = NULL) or ENOMEM (nothing leaked;
 * *out = NULL).
 * Aborts: out, spec, policy.trip, policy.probe or classify is NULL (observe
 * may be NULL since 0.3).
 * Not thread-safe with respect to the breaker it builds (nothing else can
 * reach it yet). Threads may build and free different breakers at once:
 * circuit_new and circuit_free share the per-CPU arena (CIRCUIT_FOOTPRINT_MAX)
 * and take its process-wide mutex for a few loads and stores, never while
 * calling a callback; no other function takes it. Like malloc's own locks,
 * it makes circuit_new unsafe in a signal handler and in the child of a
 * fork() made while another thread was inside circuit_new or circuit_free.
 */
CIRCUIT_API int circuit_new(circuit_breaker **out, const circuit_spec *spec,
                            char *errbuf, size_t errbuf_len);

/**
 * circuit_free - destroy a breaker and release all its memory.
 * @b: a breaker from circuit_new, or NULL (does nothing).
 *
 * Transitions made but not yet delivered are DISCARDED: observe is not called
 * for them, and their records are freed. The caller must ensure no other call
 * on @b is running or will run, and that no ticket of @b is still to be
 * settled.
 * A breaker cannot be freed from inside one of its own callbacks (observe,
 * classify, trip, probe, open_for, on this thread): the call that runs the
 * callback still uses the breaker after the callback returns. That aborts
 * (it is not made safe): to retire a breaker from observe, hand it to code
 * that frees it after that call has returned. Freeing ANOTHER breaker from
 * a callback is fine.
 * Takes the per-CPU arena's mutex briefly (see circuit_new).
 * Aborts: @b was not built by circuit_new (or was already freed and its
 * memory not reused); called from inside a callback of @b on this thread
 * ("circuit_free: called from inside observe of the same breaker", naming
 * the callback).
 */
CIRCUIT_API void circuit_free(circuit_breaker *b);

/**
 * circuit_allow - ask to make one call.
 * @b:        the breaker.
 * @call_ctx: the caller's context for this call (may be NULL); given back to
 *            classify and to observe for transitions this call makes.
 * @t:        caller-owned ticket, filled when the call is admitted.
 * @rej:      filled when the call is rejected; may be NULL.
 *
 * First delivers transitions that are pending (unless another thread is
 * delivering), then makes the time-driven changes that fell due (open ->
 * half-open at exactly opened_at + the open period, probe timeouts), then
 * decides. While closed it reads no clock. The call that makes open ->
 * half-open is always admitted, as the first probe of that half-open state,
 * in the same atomic step as the transition (S3): even when another
 * thread's result or the operator moves the breaker on before it returns
 * (its result is then late, T6).
 *
 * Returns true when admitted: the ticket is live and must be settled by
 * circuit_done or circuit_release. Returns false when rejected: *rej says
 * why; the ticket is marked rejected (settling it with circuit_done aborts;
 * circuit_release on it does nothing).
 * Thread-safe, lock-free, allocation-free except the transition overflow
 * (T7: a transition this call makes, open -> half-open or a probe timeout,
 * while more than CIRCUIT_TRANSITION_POOL are waiting for delivery, takes
 * one malloc). May run observe (on this thread).
 * Aborts: @b or @t is NULL; @b not built by circuit_new; an abort of what the call runs on this thread: probe returned an
 * invalid state or open_for returned a period <= 0 (for a probe timeout
 * that fell due, or a transition this call makes). The ticket's previous
 * contents are not read (it may be uninitialised), so passing a ticket that
 * is still live overwrites it: that earlier admission is then never settled
 * (a probe slot it held is freed only by its timeout).
 */
CIRCUIT_API bool circuit_allow(circuit_breaker *b, void *call_ctx,
                               circuit_ticket *t, circuit_rejection *rej);

/**
 * circuit_done - settle a ticket with the call's result.
 * @t:      a live ticket from circuit_allow.
 * @result: the caller's result code (0, a negative errno, an HTTP status...);
 *          the library gives it no meaning, only classify does.
 *
 * Calls classify(classify_arg, call_ctx, result) first, outside every
 * internal critical region, while the ticket is still live (if classify
 * unwinds, the ticket stays live and a guard's release frees its probe slot);
 * then settles the ticket; then makes the time-driven changes that fell due
 * (probe timeouts, in due order, including this probe's own); then counts the
 * outcome if the breaker is still in the generation the call was admitted in,
 * asking trip (closed) or probe (half-open); then frees the probe slot, if
 * any and if still held. Delivers transitions before returning (observe may
 * run on this thread).
 *
 * Returns true when the result reached the generation it was admitted in
 * (an ignored outcome included), false when it arrived late and was
 * discarded: a late result never trips, closes or reopens a later state. A
 * probe that timed out still has its result counted if the state has not
 * changed since.
 * Thread-safe, lock-free, allocation-free (except the transition overflow
 * described at CIRCUIT_TRANSITION_POOL).
 * Aborts: @t is NULL; @t was never filled by circuit_allow ("not filled by
 * circuit_allow"); @t was rejected; @t was already settled ("already settled
 * by done" / "already settled by release"); classify returned an invalid
 * outcome; probe returned an invalid state; open_for returned a period <= 0.
 */
CIRCUIT_API bool circuit_done(circuit_ticket *t, int result);

/**
 * circuit_release - settle a ticket without a result.
 * @t: a ticket from circuit_allow, a rejected ticket, or a blank one
 *     (CIRCUIT_TICKET_INIT).
 *
 * If @t is live: settles it, counts nothing, and frees its probe slot at once.
 * If the probe's timeout had already fallen due, the slot is left for the
 * next allow or done to time out as of its due moment (behaviour must not
 * depend on who notices first). If @t is already settled, rejected or blank:
 * does nothing. Calls no callback and delivers nothing, so it is safe during
 * unwinding (it is what CIRCUIT_TICKET_GUARD runs).
 * For a ticket that holds a probe slot (admitted while half-open), circuit_done
 * and circuit_release may race on two threads: exactly one settles it and
 * the slot is freed exactly once; if release wins, the done call aborts as
 * "already settled by release". A ticket admitted while closed is settled
 * without such arbitration (no locked instruction on the hot path, T5): settling it from two threads at once is a caller bug whose
 * outcome is undefined; done-after-release and done-after-done on one thread
 * still abort.
 * Thread-safe, lock-free, allocation-free.
 * Aborts: @t is NULL; @t holds bytes that circuit_allow never wrote.
 */
CIRCUIT_API void circuit_release(circuit_ticket *t);

/**
 * circuit_get_state - the current state, as a pure read.
 *
 * Reports CIRCUIT_HALF_OPEN as soon as the open period has passed (reading the
 * clock only while open). Calls no callback and changes nothing, so it is
 * safe in a metrics callback and inside observe. Thread-safe, lock-free (it
 * reads again only while the state word changes under it).
 * Aborts: @b is NULL or not built by circuit_new.
 */
CIRCUIT_API circuit_state circuit_get_state(const circuit_breaker *b);

/**
 * circuit_get_stats - a snapshot for a dashboard or a /metrics endpoint.
 * @b:   the breaker.
 * @out: receives the snapshot (caller-owned).
 * A pure read (M1): takes no lock, calls no callback, writes no memory
 * another thread reads, and does not seal the per-CPU counters (L6). Under
 * concurrency each field is a value it held during the call (the totals are
 * not one atomic snapshot; state, generation and counts describe one moment
 * of the breaker); in a quiescent breaker every field is exact and
 * admitted = successes + failures + ignored + late + released + (tickets
 * still live). Cost: O(CPUs) loads, in one pass over the per-CPU counters
 * however fast other threads count results (successes cannot starve it),
 * unless two of the totals' batch flushes (one per 4 to 2^20 results of a
 * kind on a CPU: 2^20 admitted, 1024 rejected, 128 ignored or released, 64
 * failures, 4 late) start or end during the pass: then the totals are read
 * again (lock-free).
 * The state word is read again only when another thread moved it during
 * the call: an exact point (a failure, a fold, an intent) while the closed
 * counts are derived, or a transition between an open word and the clock
 * read that decides open or half-open (lock-free: each new try follows
 * another thread's progress).
 * Thread-safe; may run inside observe.
 * Aborts: @b or @out is NULL; @b not built by circuit_new.
 */
CIRCUIT_API void circuit_get_stats(const circuit_breaker *b, circuit_stats *out);

/**
 * circuit_isolate - hold the breaker open until circuit_reset (operator control).
 * @b:        the breaker.
 * @call_ctx: given to observe with the transition this call makes (also
 *   when another thread finishes the isolate's intent, L1; see O6 for the
 *   one race where another call's is given).
 * From closed, open or half-open: makes the transition to CIRCUIT_ISOLATED
 * (cause CIRCUIT_CAUSE_OPERATOR, the final counts of the state left) and
 * returns 0. While isolated every circuit_allow is rejected with
 * {CIRCUIT_ISOLATED, 0}, no policy is asked, no time-driven change happens,
 * and results of tickets admitted before are late (circuit_done returns
 * false). Already isolated: returns EALREADY and changes nothing. The
 * time-driven changes that fell due are made first (an open period that is
 * over: open -> half-open, cause CIRCUIT_CAUSE_TIMER, then half-open ->
 * isolated), as are a trip or isolate another call started (L1).
 * Thread-safe and lock-free: may run on any thread while traffic flows, and
 * inside observe (its transition is then delivered after observe returns).
 * Delivers pending transitions before returning, like circuit_done.
 * Aborts: @b is NULL or not built by circuit_new; probe returned an invalid
 * state, or open_for a period <= 0, while this call made the time-driven
 * changes that fell due first (a probe timeout that reopens).
 */
CIRCUIT_API int circuit_isolate(circuit_breaker *b, void *call_ctx);

/**
 * circuit_reset - close the breaker now, with zero counts (operator control).
 * @b:        the breaker.
 * @call_ctx: given to observe with the transition this call makes.
 * From open, half-open or isolated: makes the transition to CIRCUIT_CLOSED
 * (cause CIRCUIT_CAUSE_OPERATOR) and returns 0; outstanding probes become
 * late. Already closed: returns EALREADY and changes nothing; a trip
 * another call has decided but not yet finished is finished first (the
 * breaker opens, then this call closes it and returns 0). The time-driven
 * changes that fell due are made first too (an open period that is over:
 * open -> half-open, cause CIRCUIT_CAUSE_TIMER, then half-open -> closed).
 * The next open period is then a trip from closed
 * (circuit_open_info.reopens = 0).
 * Thread-safety as circuit_isolate.
 * Aborts: @b is NULL or not built by circuit_new; probe returned an invalid
 * state, or open_for a period <= 0, while this call made the time-driven
 * changes that fell due first (a probe timeout that reopens).
 */
CIRCUIT_API int circuit_reset(circuit_breaker *b, void *call_ctx);

/**
 * circuit_retry_after_s - whole seconds for an HTTP Retry-After header.
 * @r: a rejection filled by circuit_allow.
 * Open: retry_after_ns rounded UP to whole seconds (at least 1).
 * Half-open (every probe slot taken): 1 (a probe slot may free at any moment).
 * Isolated: 0, meaning "send no Retry-After": an operator holds the breaker
 * and no time is known.
 * Returns -1 with errno = EINVAL when @r is NULL or holds an invalid state.
 * Thread-safe (pure).
 */
CIRCUIT_API int64_t circuit_retry_after_s(const circuit_rejection *r);

/**
 * circuit_get_salt - the salt @b gives its open_for function
 * (circuit_open_info.salt): circuit_spec.salt, or the number circuit_new
 * chose when that was 0. Never 0. With it, a test predicts every period of
 * circuit_backoff_exponential (circuit_presets.h). Thread-safe, pure.
 * Aborts: @b is NULL or not built by circuit_new.
 */
CIRCUIT_API uint64_t circuit_get_salt(const circuit_breaker *b);

/**
 * circuit_version - the version of the library linked (which may be newer
 * than the header a program was built with: compare with
 * CIRCUIT_VERSION_MAJOR/MINOR/PATCH).
 * @major, @minor, @patch: each receives its number; each may be NULL.
 * Returns "MAJOR.MINOR.PATCH" (a static string). Thread-safe.
 */
CIRCUIT_API const char *circuit_version(int *major, int *minor, int *patch);

/** "closed", "open", "half-open", "isolated"; "invalid" for any other value.
 *  Static strings; thread-safe. */
CIRCUIT_API const char *circuit_state_name(circuit_state s);

/** "success", "failure", "ignored"; "invalid" for any other value. */
CIRCUIT_API const char *circuit_outcome_name(circuit_outcome o);

/**
 * circuit_rejection_format - describe a rejection for a log line or a 503 body.
 *
 * snprintf-like: writes at most @len bytes including the NUL (nothing when
 * len is 0; @buf may then be NULL) and returns the length the full text has,
 * excluding the NUL; or -1 with errno = EINVAL when @r is NULL or holds an
 * invalid state. Examples: "circuit open: retry after 1.500000000 s",
 * "circuit half-open: every probe slot is taken".
 */
CIRCUIT_API int circuit_rejection_format(const circuit_rejection *r, char *buf, size_t len);

/** circuit_release under the name that CIRCUIT_TICKET_GUARD expanded to in
 *  0.1 and 0.2: the same function (one definition, exported under both
 *  names), kept so that programs compiled against those headers still link.
 *  New code names circuit_release. */
CIRCUIT_API void circuit_ticket_guard_release(circuit_ticket *t);

/**
 * CIRCUIT_TICKET_GUARD(name) - declare a blank ticket `name` that is released
 * (circuit_release) when its scope is left by any path: return, break, goto,
 * pthread_exit, pthread_cancel, or a C++ exception. Built on
 * __attribute__((cleanup)) (GCC and Clang); for unwinding to run it, compile
 * the caller with -fexceptions (C) — the library itself is built so. After
 * circuit_done has settled the ticket, the release does nothing. A guard that
 * fires between allow and done frees the probe slot at once and counts
 * nothing (P3).
 */
#if defined(__GNUC__) || defined(__clang__)
#define CIRCUIT_TICKET_GUARD(name)                                       \
    circuit_ticket name __attribute__((cleanup(circuit_release))) =     \
        CIRCUIT_TICKET_INIT
#endif

#ifdef __cplusplus
}
#endif

#endif /* CIRCUIT_H */
