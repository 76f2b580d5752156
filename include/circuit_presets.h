/*
 * libcircuit presets: ready-made policies and classifiers.
 *
 * SPDX-License-Identifier: MIT
 *
 * Everything here is built on the public API of <circuit.h> and nothing in
 * the core depends on it: presets live beside the core, never inside it.
 * They are part of the same library (libcircuit.so / libcircuit.a); include
 * this header to use them.
 *
 * Two policies
 *   circuit_consecutive   open after N failures in a row.
 *   circuit_failure_rate  open when at least a given share of the latest
 *                         results failed, once the window holds enough.
 *   Both behave the same way while half-open: any failed probe reopens, a
 *   run of M probe successes closes, and a probe timeout keeps probing.
 *
 * One open-period function (B1-B3)
 *   circuit_backoff_exponential  each reopen doubles the open period, from a
 *                         base to a cap, with a jitter that is a fixed
 *                         function of (your seed, the breaker's salt, the
 *                         generation).
 *
 * Two classifiers
 *   circuit_classify_errno  for results in the "0 or a negative errno"
 *                           convention (liburing, the kernel, most C code).
 *   circuit_classify_http   for results that are HTTP status codes, with
 *                           transport errors as negative errnos.
 *
 * Example: open after 5 failures in a row, close after 2 good probes.
 *
 *     static circuit_consecutive pol;           // must outlive the breaker
 *     char err[256];
 *     if (circuit_consecutive_init(&pol, 5, 2, err, sizeof err) != 0)
 *         die("%s", err);
 *     circuit_spec spec = {
 *         .config   = { .window = 20, .probes = 2,
 *                       .open_for_ns = 5000000000, .probe_timeout_ns = 2000000000 },
 *         .policy   = circuit_consecutive_policy(&pol),
 *         .classify = circuit_classify_errno,
 *         .observe  = log_transition,
 *     };
 *
 * Thread-safety (L4, B3)
 *   The breaker asks its policy (and its open_for function) without any lock, from whichever thread
 *   counts a result or notices a probe timeout, possibly from several threads
 *   at once and possibly more than once for one result. Every trip and probe
 *   function installed by the *_policy builders below is a pure function of
 *   the counts it is given and of the read-only parameter struct: it keeps no
 *   state, writes nothing, allocates nothing, takes no lock and never calls
 *   the breaker; so is circuit_backoff_exponential_open_for, of its struct
 *   and of the circuit_open_info it is given. The classifiers are pure functions of their `result`
 *   argument. All of them may therefore be called concurrently from any
 *   number of threads, and one parameter struct may serve any number of
 *   breakers at once.
 *   The *_init functions write only the struct they are given; initialise a
 *   struct before any breaker uses it and do not change it afterwards.
 *
 * What a probe timeout does, and why
 *   A probe that holds its slot longer than probe_timeout_ns is timed out by
 *   the core (P1): its slot is freed, counts.timed_out grows by one, and
 *   the probe policy is asked. Both preset policies answer
 *   CIRCUIT_HALF_OPEN ("keep probing") to a timeout, whatever timed_out
 *   says, so the freed slot goes to the next call. A timeout is not evidence
 *   that the dependency failed: the ticket may have been lost by the caller,
 *   or the dependency may be slow but healthy, and the probe's result still
 *   counts if it arrives before the state changes (P2). Reopening on a
 *   timeout would keep a slow but healthy dependency cut off for good.
 *   A dependency that hangs is caught by the call's own deadline instead:
 *   give every call a deadline no longer than probe_timeout_ns, report its
 *   expiry as -ETIMEDOUT, which both classifiers count as a failure, and a
 *   failed probe reopens the breaker. A caller who wants timeouts to reopen
 *   writes a probe function that looks at counts->timed_out.
 *
 * A hung or half-healthy upstream
 *   Hung (it accepts calls and never answers): every call in flight before
 *   the first deadline expires fails (-ETIMEDOUT), and the breaker opens when
 *   the policy's condition is met. While half-open a probe keeps its slot for
 *   probe_timeout_ns; if that is SHORTER than the call's deadline, the slot is
 *   freed while the first probe still hangs, a second probe is admitted, and
 *   the first one's result comes late (not counted). Keep probe_timeout_ns >=
 *   the call's deadline.
 *   Half-healthy (some calls fail): any failed probe reopens, and
 *   circuit_backoff_exponential doubles the period at each reopen. With base
 *   1 s, no jitter and successes 2, an upstream failing one call in two stays
 *   cut off 1 + 2 + 4 + 8 = 15 s or more in about 4 cases out of 10. If that is
 *   too strict, lower cap_ns, or write a probe function that reopens on a
 *   share of failures among several probes (config.probes > 1).
 *
 * Three ways a call can end without an answer, and which the presets count
 *   1. The caller gave up: its client went away, the request was aborted, the
 *      process is shutting down. This says nothing about the dependency.
 *      Report -ECANCELED: both classifiers return CIRCUIT_IGNORED (not
 *      counted, frees the probe slot, C5).
 *   2. The caller's own deadline ran out while it waited for the dependency:
 *      the per-request timeout of a proxy, an HTTP client's total timeout, a
 *      gRPC per-call deadline, or a deadline inherited from an inbound
 *      request. Report -ETIMEDOUT: both classifiers count it as a FAILURE.
 *      A dependency that hangs ends EVERY call this way, so a classifier that
 *      ignored this case would never open the breaker on a hung dependency.
 *   3. A deadline inside the call ran out: a connect or read timeout of the
 *      transport (-ETIMEDOUT), or the dependency's own gateway timeout (HTTP
 *      504). Both classifiers count it as a FAILURE.
 *   Only case 1 is ignored. Keep cases 1 and 2 apart when the call ends:
 *   "my deadline fired" is -ETIMEDOUT, "my caller cancelled me" is
 *   -ECANCELED. A caller who decides that some deadline of its own says
 *   nothing about the dependency (for instance an inbound client's very short
 *   deadline) may report it as -ECANCELED, knowing that a hung dependency is
 *   then detected only by the calls whose deadline is not ignored.
 *
 * Errors
 *   The *_init functions return 0 or EINVAL (pthread-style: a positive errno,
 *   errno itself is not set). Nothing is defaulted, rounded or clamped. On
 *   EINVAL the struct is zeroed, and errbuf receives ONE NUL-terminated
 *   message naming every invalid argument with the value given and its
 *   bound, in the manner of circuit_new (CFG2), for example
 *     invalid circuit_failure_rate: min_results = 0 (must be 1..100, the
 *     config's window); ratio = 1.5 (must be in (0, 1]); successes = 0
 *     (must be 1..2147483647)
 *   (one line), truncated to errbuf_len - 1 bytes. On success errbuf holds
 *   an empty string. errbuf may be NULL; errbuf_len 0 writes nothing.
 *   Programming errors abort with one line on stderr starting with
 *   "libcircuit: " (CFG4): see "Aborts" per function.
 */
#ifndef CIRCUIT_PRESETS_H
#define CIRCUIT_PRESETS_H

#include "circuit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Consecutive failures                                                      */
/* ------------------------------------------------------------------------ */

/**
 * circuit_consecutive - parameters of the "N failures in a row" policy.
 *
 * Closed: trips as soon as counts.consecutive_failures >= failures, i.e. on
 *   the failures-th failure in a row. A success ends the run (so N failures
 *   in total, spread between successes, never trip); an ignored result
 *   neither extends nor ends it (C5). The window is not looked at, so
 *   config.window may be anything valid.
 * Half-open: any failed probe reopens the breaker for a fresh open_for_ns;
 *   the breaker closes once counts.consecutive_successes >= successes; a
 *   probe timeout keeps probing (see the file comment). Since a failure
 *   reopens at once, "successes in a row" is simply the successes counted in
 *   this half-open period. With config.probes = successes, a burst of
 *   `successes` probes that all succeed closes the breaker.
 *
 * Both fields are counts of results, 1..CIRCUIT_RUN_MAX (the consecutive
 * runs stop growing at CIRCUIT_RUN_MAX, so a larger value could never be
 * reached). The fields are public so that a struct can be read back or
 * logged; fill them through circuit_consecutive_init.
 */
typedef struct circuit_consecutive {
    int64_t failures;   /**< failures in a row that open, 1..CIRCUIT_RUN_MAX */
    int64_t successes;  /**< probe successes in a row that close, 1..CIRCUIT_RUN_MAX */
} circuit_consecutive;

/**
 * circuit_consecutive_init - validate and fill a consecutive policy.
 * p:          the struct to fill; on EINVAL it is zeroed.
 * failures:   failures in a row that open the breaker, 1..CIRCUIT_RUN_MAX.
 * successes:  probe successes in a row that close it, 1..CIRCUIT_RUN_MAX.
 * errbuf:     on EINVAL, ONE message naming every invalid argument with its
 *              bound and the value given; may be NULL.
 * errbuf_len: size of errbuf in bytes.
 *
 * Returns 0 or EINVAL. Writes only *p and errbuf. Thread-safe as long as no
 * other thread uses *p at the same time.
 * Aborts: p is NULL.
 */
CIRCUIT_API int circuit_consecutive_init(circuit_consecutive *p, int64_t failures,
                                         int64_t successes, char *errbuf,
                                         size_t errbuf_len);

/**
 * circuit_consecutive_policy - the policy for circuit_spec.policy.
 * p: a struct filled by circuit_consecutive_init. It is NOT copied: the
 *     policy's arg points to it, so it must stay valid and unchanged for as
 *     long as any breaker built with the policy exists.
 *
 * The returned trip and probe functions are pure (see "Thread-safety").
 * Aborts: p is NULL, or holds values circuit_consecutive_init would reject
 * (for example a struct zeroed by a failed init).
 */
CIRCUIT_API circuit_policy circuit_consecutive_policy(const circuit_consecutive *p);

/* ------------------------------------------------------------------------ */
/* Failure rate                                                              */
/* ------------------------------------------------------------------------ */

/**
 * circuit_failure_rate - parameters of the "share of failures" policy.
 *
 * Closed: let results = counts.successes + counts.failures, the results in
 *   the window (the latest config.window counted results, C1; ignored
 *   results are not results). The breaker trips when
 *       results >= min_results  and  failures >= ratio * results
 *   after each counted failure (the core asks trip after failures only,
 *   S2). So when min_results is reached by a
 *   success, the breaker trips at the next failure if the rate still holds
 *   then: with min_results 4 and ratio 0.5, failure, failure, failure,
 *   success stays closed (4 results, but the 4th is a success), and one
 *   more failure trips (4 of 5); had 5 successes come first instead of one,
 *   that failure (4 of 9) would not.
 *   The compare is ">=": exactly 50% failures trips a 0.5 policy, exactly
 *   100% trips a 1.0 policy, and no failures never trips (ratio > 0).
 *
 *   Floating point: a ratio is usually written in decimal (0.07, 0.35) and
 *   stored in binary, slightly off; 0.07 * 100 evaluates to
 *   7.000000000000001, so a naive compare would not trip on 7 failures out of
 *   100 with ratio 0.07. The policy therefore forgives a shortfall of less
 *   than 2^-24 of one failure: it trips when
 *       failures >= 1  and  failures >= ratio * results - 2^-24.
 *   For any ratio meant as a fraction a/b with b <= CIRCUIT_MAX_COUNT (so
 *   every decimal with up to 4 digits after the point, every percentage with
 *   up to 2 decimals divided by 100, 1/3, ...) this gives exactly the answer
 *   of the exact compare failures * b >= a * results, for every results up
 *   to CIRCUIT_MAX_COUNT: when failures / results is below a/b, failures
 *   falls short of a/b * results by at least 1/b >= 2^-16 of a failure, far
 *   more than the slack plus the rounding of the ratio and of the product
 *   (together under 2^-35). For another ratio the answer can differ from the
 *   exact compare only when ratio * results lies less than 2^-24 above a
 *   whole number.
 *
 * Half-open: as for circuit_consecutive: any failed probe reopens, a run of
 *   `successes` probe successes closes, a probe timeout keeps probing. The
 *   ratio is not used while half-open.
 *
 * The window (K1): the policy has a `check`, so circuit_new refuses a
 *   breaker whose config.window is smaller than min_results (such a window
 *   never holds min_results results, and the breaker would never trip). It
 *   returns EINVAL with CFG2's single message, which ends with the clause
 *     policy: circuit_failure_rate min_results = 50 exceeds window = 10 (the
 *     window never holds that many results, so the policy would never trip)
 *   after any clause about the config's own fields. One struct may serve
 *   breakers of different windows, as long as each is >= min_results.
 *
 * Units: min_results and successes are counts of results; ratio is a share,
 * failures / results (0.5 is 50%).
 */
typedef struct circuit_failure_rate {
    int64_t min_results;  /**< results the window must hold before the ratio
                               applies, 1..config.window */
    double  ratio;        /**< share of failures that opens, in (0, 1] */
    int64_t successes;    /**< probe successes in a row that close,
                               1..CIRCUIT_RUN_MAX */
} circuit_failure_rate;

/**
 * circuit_failure_rate_init - validate and fill a failure-rate policy.
 * p:           the struct to fill; on EINVAL it is zeroed.
 * cfg:         the config of the breaker(s) the policy is for, or NULL
 *               to initialise the policy from its own parameters.
 *               Only cfg->window is read (a min_results larger than the
 *               window could never be reached). Not retained. With NULL,
 *               min_results is checked against 1..CIRCUIT_MAX_COUNT here and
 *               against each breaker's window when circuit_new builds it
 *               (the policy's check, K1).
 * min_results: 1..cfg->window (1..CIRCUIT_MAX_COUNT when cfg is NULL).
 * ratio:       in (0, 1]; NaN is invalid.
 * successes:   1..CIRCUIT_RUN_MAX.
 * errbuf:      on EINVAL, ONE message naming every invalid argument with
 *               its bound and the value given; may be NULL.
 * errbuf_len:  size of errbuf in bytes.
 *
 * If cfg->window is itself outside 1..CIRCUIT_MAX_COUNT, that is reported
 * too (EINVAL) and min_results is checked against 1..CIRCUIT_MAX_COUNT.
 * Returns 0 or EINVAL. Writes only *p and errbuf.
 * Aborts: p is NULL.
 */
CIRCUIT_API int circuit_failure_rate_init(circuit_failure_rate *p, const circuit_config *cfg,
                                          int64_t min_results, double ratio,
                                          int64_t successes, char *errbuf,
                                          size_t errbuf_len);

/**
 * circuit_failure_rate_policy - the policy for circuit_spec.policy.
 * p: a struct filled by circuit_failure_rate_init; NOT copied (the policy's
 *     arg points to it): it must stay valid and unchanged for as long as any
 *     breaker built with the policy exists.
 *
 * The returned trip and probe functions are pure (see "Thread-safety"). The
 * returned check (K1) makes circuit_new fail with EINVAL, naming
 * min_results and the window, when config.window < p->min_results; it
 * accepts every other config (circuit_new itself reports a window outside
 * 1..CIRCUIT_MAX_COUNT).
 * Aborts: p is NULL, or holds values circuit_failure_rate_init would reject
 * whatever the window (min_results outside 1..CIRCUIT_MAX_COUNT, ratio
 * outside (0, 1], successes outside 1..CIRCUIT_RUN_MAX), for example a
 * struct zeroed by a failed init.
 */
CIRCUIT_API circuit_policy circuit_failure_rate_policy(const circuit_failure_rate *p);

/* ------------------------------------------------------------------------ */
/* Exponential open periods (circuit_open_for_fn, B1-B3)               */
/* ------------------------------------------------------------------------ */

/**
 * circuit_backoff_exponential - open periods that double on each reopen,
 * from base_ns to cap_ns, shortened by a deterministic jitter.
 *
 * When the breaker opens, the core asks circuit_backoff_exponential_open_for
 * with a circuit_open_info (B1, B2). The period, in ns, is
 *
 *     p      = min(cap_ns, base_ns * 2^reopens)
 *     key    = splitmix64(seed, salt)
 *     u      = (splitmix64(key, generation) >> 11) * 2^-53       in [0, 1)
 *     period = p - trunc(p * jitter * u)                          (double math)
 *
 * where reopens is info->reopens (0 for a trip from closed, k for the k-th
 * reopen since the breaker last closed: a failed probe doubles the wait, a
 * close or circuit_reset starts again at base_ns), generation is
 * info->generation, salt is info->salt (the breaker's salt: circuit_spec.salt,
 * or the number circuit_new chose; circuit_get_salt(b) tells it), and
 * splitmix64(seed, n) is the n-th output of the
 * SplitMix64 generator seeded with `seed` (G. L. Steele, D. Lea and C. H.
 * Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014,
 * doi:10.1145/2660193.2660195):
 *
 *     z = seed + n * 0x9e3779b97f4a7c15                           (mod 2^64)
 *     z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
 *     z = (z ^ (z >> 27)) * 0x94d049bb133111eb
 *     splitmix64(seed, n) = z ^ (z >> 31)
 *
 * So every period lies in ((1 - jitter) * p, p]: the cap is never exceeded,
 * and with jitter 0 the periods are exactly base, 2 base, 4 base, ..., cap.
 * The jitter only shortens, and it is NOT random: it is a fixed function of
 * (seed, salt, generation). Breakers of one process that share this struct
 * differ by their salt (by default each breaker gets its own), so upstreams
 * that failed together do not probe together; processes differ by the seed
 * (give each a different one: a pid, a host id). A test that knows the seed
 * and the salt (set circuit_spec.salt, or read circuit_get_salt) predicts
 * every period. The same seed, salt, generation and reopens always give the
 * same period (B3: the core may ask more than once for one
 * transition). A period is never below 1 ns.
 *
 * Example: 1 s, 2 s, 4 s, ... up to 60 s, each cut by up to 20%.
 *
 *     static circuit_backoff_exponential bo;     // must outlive the breaker
 *     if (circuit_backoff_exponential_init(&bo, CIRCUIT_S(1), CIRCUIT_S(60), 0.2,
 *                                          (uint64_t)getpid(), err, sizeof err) != 0)
 *         die("%s", err);
 *     circuit_backoff_exponential_use(&spec, &bo);  // spec.open_for, spec.open_for_arg
 *
 * With an open_for function set, config.open_for_ns is still required and
 * validated by circuit_new but not used for the periods.
 */
typedef struct circuit_backoff_exponential {
    int64_t  base_ns; /**< the first open period (reopens = 0), ns, > 0 */
    int64_t  cap_ns;  /**< the longest open period, ns, >= base_ns */
    double   jitter;  /**< largest share cut off a period, in [0, 1); 0: none */
    uint64_t seed;    /**< any value; give processes different ones (breakers
                           differ by their salt, circuit_spec.salt) */
} circuit_backoff_exponential;

/**
 * circuit_backoff_exponential_init - validate and fill the parameters.
 * p:          the struct to fill; on EINVAL it is zeroed.
 * base_ns:    first open period, ns, > 0 (CIRCUIT_S(1), CIRCUIT_MS(500)).
 * cap_ns:     longest open period, ns, >= base_ns (equal: no growth).
 * jitter:     largest share of a period cut off, in [0, 1); NaN is invalid.
 * seed:       any value (see circuit_backoff_exponential).
 * errbuf:     on EINVAL, ONE message naming every invalid argument with its
 *              bound and the value given, e.g. "invalid
 *              circuit_backoff_exponential: base_ns = 0 (must be > 0);
 *              jitter = 1 (must be in [0, 1))"; may be NULL.
 * errbuf_len: size of errbuf in bytes.
 *
 * Returns 0 or EINVAL. Writes only *p and errbuf.
 * Aborts: p is NULL.
 */
CIRCUIT_API int circuit_backoff_exponential_init(circuit_backoff_exponential *p,
                                                 int64_t base_ns, int64_t cap_ns,
                                                 double jitter, uint64_t seed, char *errbuf,
                                                 size_t errbuf_len);

/**
 * circuit_backoff_exponential_open_for - the circuit_open_for_fn.
 * arg:  a const circuit_backoff_exponential * filled by _init.
 * info: what the core says about the open state being entered.
 *
 * Returns the period of the formula above, >= 1. Pure (B3): reads only
 * *arg and *info, writes nothing, takes no lock; safe on any number of
 * threads at once. Also callable directly, to log or test the schedule.
 * Aborts: arg or info is NULL, or *arg holds values _init would reject.
 */
CIRCUIT_API int64_t circuit_backoff_exponential_open_for(void *arg,
                                                         const circuit_open_info *info);

/**
 * circuit_backoff_exponential_use - set spec->open_for and spec->open_for_arg.
 * spec: the spec being filled for circuit_new.
 * p:    a struct filled by circuit_backoff_exponential_init; NOT copied: it
 *        must stay valid and unchanged while any breaker built with it exists.
 *
 * Equivalent to .open_for = circuit_backoff_exponential_open_for,
 * .open_for_arg = p, after checking *p.
 * Aborts: spec or p is NULL, or *p holds values _init would reject.
 */
CIRCUIT_API void circuit_backoff_exponential_use(circuit_spec *spec,
                                                 const circuit_backoff_exponential *p);

/* ------------------------------------------------------------------------ */
/* Classifiers (circuit_classify_fn)                                         */
/* ------------------------------------------------------------------------ */
/* Both ignore classify_arg and call_ctx (pass NULL as classify_arg), keep no
 * state and may run concurrently with themselves. See the file comment for
 * the three ways a call can end without an answer. */

/**
 * circuit_classify_errno - classify a result in the "0 or -errno" convention.
 *
 *   result == 0            CIRCUIT_SUCCESS
 *   result > 0             CIRCUIT_SUCCESS: a count of bytes or items, as
 *                          read(), send() or an io_uring completion return.
 *                          Pthread-style codes (a POSITIVE error number) must
 *                          be negated before circuit_done, or they count as
 *                          successes.
 *   result == -ECANCELED   CIRCUIT_IGNORED: the caller gave up.
 *   any other result < 0   CIRCUIT_FAILURE, -ETIMEDOUT included (a deadline,
 *                          the caller's or one inside the call, ran out).
 */
CIRCUIT_API circuit_outcome circuit_classify_errno(void *arg, void *call_ctx, int result);

/**
 * circuit_classify_http - classify an HTTP status code, or a transport error.
 *
 *   500..599               CIRCUIT_FAILURE: the dependency failed (504, its
 *                          gateway's deadline, included).
 *   429                    CIRCUIT_FAILURE: the dependency is shedding load;
 *                          backing off is what it asks for.
 *   any other result >= 0  CIRCUIT_SUCCESS: 1xx-3xx, and 4xx other than 429
 *                          (the dependency answered; the request was at
 *                          fault). The classifier does not check that the
 *                          value is a real status: 0 and values above 599
 *                          are successes too, so report a call that got no
 *                          response as a negative errno, never as 0.
 *   result == -ECANCELED   CIRCUIT_IGNORED: the caller gave up.
 *   any other result < 0   CIRCUIT_FAILURE: no response (-ECONNREFUSED,
 *                          -ECONNRESET, -ETIMEDOUT for any deadline, ...).
 */
CIRCUIT_API circuit_outcome circuit_classify_http(void *arg, void *call_ctx, int result);

#ifdef __cplusplus
}
#endif

#endif /* CIRCUIT_PRESETS_H */
