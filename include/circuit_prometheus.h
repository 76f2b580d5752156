/*
 * libcircuit: circuit_stats in the Prometheus text exposition format.
 *
 * SPDX-License-Identifier: MIT
 *
 * Built on the public API of <circuit.h> only, beside the core like the
 * presets; part of the same library. It formats, it does
 * not serve: put its output in the body of your own /metrics handler, with
 * the content type "text/plain; version=0.0.4; charset=utf-8".
 *
 * The idiom (one breaker per upstream, an admin endpoint):
 *
 *     circuit_stats st[N];
 *     const char *names[N];
 *     for (size_t i = 0; i < N; i++) {
 *         circuit_get_stats(up[i].breaker, &st[i]);      // a pure read (M1)
 *         names[i] = up[i].name;
 *     }
 *     int n = circuit_stats_format_prometheus_many(st, names, N, buf, sizeof buf);
 *     if (n < 0)             -> a bad name or state (errno EINVAL)
 *     else if (n >= sizeof buf) -> grow buf to n + 1 and call again
 *
 * Format them all in ONE call: the exposition format allows each metric's
 * HELP and TYPE lines once, so the output of two calls cannot simply be
 * concatenated (promtool and the Prometheus server reject a repeated TYPE
 * line).
 *
 * Many breakers (10^4, 10^5 upstreams: about 1.1 KiB of text each, so 110
 * MB for 10^5): use the stream form, which hands the text to your writer in
 * 16 KiB chunks as it goes, instead of one buffer of the whole text:
 *
 *     static int send_chunk(void *conn, const char *data, size_t len)
 *     {
 *         return write_all(conn, data, len) == 0 ? 0 : EIO;   // 0: go on
 *     }
 *     ...
 *     int rc = circuit_stats_write_prometheus_many(st, names, N, send_chunk, conn);
 *
 * Cost: both forms are linear in the text they write (the names are checked
 * to be different with one hash table, not pair by pair): time per breaker
 * does not grow with the number of breakers.
 *
 * The series. Every series carries the label breaker="<name>" (left out
 * when the one-breaker call is given a NULL name). Durations are in seconds,
 * counters end in _total, names follow the Prometheus naming conventions and
 * pass `promtool check metrics` (a test runs it on every build).
 *
 *   gauges: the current state (circuit_stats fields in brackets)
 *   circuit_state{state="closed"|"open"|"half-open"|"isolated"}
 *                           1 for the state the breaker is in, 0 for the
 *                           three others: one series per state, so
 *                           circuit_state{state="open"} == 1 selects open
 *                           breakers and sum by (state) counts them.
 *                           [state, named as circuit_state_name does]
 *   circuit_generation      generation of the current state: the number of
 *                           the transition that entered it (1, 2, ...); 0
 *                           while the breaker never left closed. [generation]
 *   circuit_window_results{outcome="success"|"failure"}
 *                           results among the latest `window` counted in the
 *                           current state (zero while open or isolated).
 *                           [counts.successes, counts.failures]
 *   circuit_consecutive_results{outcome="success"|"failure"}
 *                           the current run; at most one is non-zero.
 *                           [counts.consecutive_successes, _failures]
 *   circuit_half_open_probe_timeouts
 *                           probes timed out in the current half-open state.
 *                           [counts.timed_out]
 *   circuit_probes_in_flight
 *                           half-open: probe slots held; otherwise 0.
 *                           [probes_in_flight]
 *   circuit_retry_after_seconds
 *                           open: time left in the open period, in seconds
 *                           with nanosecond digits; otherwise 0.
 *                           [retry_after_ns / 1e9]
 *
 *   counters: totals since circuit_new (never decrease)
 *   circuit_calls_admitted_total          circuit_allow returned true [admitted]
 *   circuit_calls_rejected_total          circuit_allow returned false [rejected]
 *   circuit_results_total{outcome="success"|"failure"|"ignored"}
 *                                         results counted in the generation
 *                                         they were admitted in, by outcome
 *                                         [successes, failures, ignored]
 *   circuit_results_late_total            results discarded: circuit_done
 *                                         returned false [late]
 *   circuit_tickets_released_total        live tickets settled by
 *                                         circuit_release [released]
 *   circuit_probe_timeouts_total          probe timeouts [timed_out]
 *   circuit_transitions_total             transitions made [transitions]
 *
 *   Calls in flight: in a quiescent breaker, admitted = sum of results +
 *   late + released + calls still in flight (M1's identity), so
 *     circuit_calls_admitted_total - on(breaker) sum by(breaker)(circuit_results_total)
 *       - circuit_results_late_total - circuit_tickets_released_total
 *   is the calls in flight. Under concurrency the fields are not one atomic
 *   snapshot, so while traffic flows it is approximate (it may even dip
 *   below 0 for a moment).
 *
 * Values are printed as integers (the seconds gauge as a decimal with nine
 * digits after the point). Prometheus stores floats: a counter above 2^53
 * (about 9 * 10^15) is rounded by the server, never by this formatter.
 */
#ifndef CIRCUIT_PROMETHEUS_H
#define CIRCUIT_PROMETHEUS_H

#include "circuit.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * circuit_stats_format_prometheus_many - the exposition of n breakers.
 * stats:    n snapshots from circuit_get_stats.
 * breakers: n label values for the `breaker` label, each a NUL-terminated
 *            UTF-8 string (any bytes that are valid UTF-8, the empty string
 *            included), all different. Backslash, double quote and newline
 *            are escaped as the format requires. May be NULL only when n is
 *            1: then the series carry no breaker label.
 * n:        number of breakers; 0 writes an empty text.
 * buf:      where the text goes; may be NULL when len is 0.
 * len:      size of buf in bytes.
 *
 * snprintf-like: writes at most len bytes including the terminating NUL
 * (nothing when len is 0) and returns the length of the full text,
 * excluding the NUL, so a return >= len means the text was cut: call again
 * with a buffer of at least the return value + 1 bytes. The text is about
 * 1.8 KiB of HELP and TYPE lines plus about 1.1 KiB per breaker (with a
 * short name; the name appears in 18 series), and ends with a newline.
 *
 * Returns -1 and sets errno to EINVAL, writing an empty string to buf (when
 * len > 0), when: stats is NULL and n > 0; breakers is NULL and n > 1; a
 * name is NULL (n > 1), not valid UTF-8, or equal to another; a state is not
 * one of the four. Returns -1 with errno EOVERFLOW when the text would be
 * longer than INT_MAX (use the stream form), and -1 with errno ENOMEM when
 * the table that checks the names could not be allocated. Never aborts.
 * Cost: O(length of the text); allocates one temporary table of 2n to 4n
 * words to check that the names differ (n > 1), freed before it returns.
 * Thread-safe (reads its arguments, writes only buf and errno).
 */
CIRCUIT_API int circuit_stats_format_prometheus_many(const circuit_stats *stats,
                                                     const char *const *breakers, size_t n,
                                                     char *buf, size_t len);

/**
 * circuit_prometheus_write_fn - receives the text of the stream form.
 * arg:  the caller's argument.
 * data: the next len bytes of the text (not NUL-terminated); valid only
 *        during the call.
 * len:  1..16384.
 * Returns 0 to go on, or any non-zero value to stop: the stream function
 * then writes nothing more and returns that value.
 */
typedef int (*circuit_prometheus_write_fn)(void *arg, const char *data, size_t len);

/**
 * circuit_stats_write_prometheus_many - the exposition of n breakers,
 * streamed: the same text as circuit_stats_format_prometheus_many (byte for
 * byte), handed to write in chunks of at most 16 KiB, in order, as it is
 * made; no buffer of the whole text exists at any time.
 * stats, breakers, n: as for circuit_stats_format_prometheus_many (all
 *        checked before the first byte is written: a bad argument writes
 *        nothing).
 * write: called once per chunk, on the calling thread; must not be NULL.
 * arg:   passed to write.
 *
 * Returns 0 when the whole text was written (n = 0 writes nothing); EINVAL
 * for the arguments the buffer form refuses, or write NULL; ENOMEM when
 * its chunk (16 KiB) or the names' table could not be allocated; otherwise
 * the first non-zero value write returned (then part of the text was
 * written). Sets no errno of its own. Never aborts.
 * Cost: O(length of the text); memory: 16 KiB plus the names' table (2n to
 * 4n words), freed before it returns. Thread-safe (reads its arguments).
 */
CIRCUIT_API int circuit_stats_write_prometheus_many(const circuit_stats *stats,
                                                    const char *const *breakers, size_t n,
                                                    circuit_prometheus_write_fn write,
                                                    void *arg);

/**
 * circuit_stats_format_prometheus - the exposition of one breaker.
 * s:       a snapshot from circuit_get_stats.
 * breaker: the value of the `breaker` label, or NULL for no label.
 * buf, len: as for circuit_stats_format_prometheus_many.
 *
 * The same as circuit_stats_format_prometheus_many(s, &breaker, 1, buf,
 * len) (or with breakers NULL when breaker is NULL). To serve several
 * breakers on one endpoint use the _many call: two outputs of this one
 * cannot be concatenated (see the file comment).
 */
CIRCUIT_API int circuit_stats_format_prometheus(const circuit_stats *s, const char *breaker,
                                                char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* CIRCUIT_PROMETHEUS_H */
