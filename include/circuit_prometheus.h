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
 *   late + released + calls still in flight (SPEC M1's identity), so
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
 * @stats:    n snapshots from circuit_get_stats.
 * @breakers: n label values for the `breaker` label, each a NUL-terminated
 *            UTF-8 string (any bytes that are valid UTF-8, the empty string
 *            included), all different. Backslash, double quote and newline
 *            are escaped as the format requires. May be NULL only when n is
 *            1: then the series carry no breaker label.
 * @n:        number of breakers; 0 writes an empty text.
 * @buf:      where the text goes; may be NULL when @len is 0.
 * @len:      size of @buf in bytes.
 *
 * snprintf-like: writes at most @len bytes including the terminating NUL
 * (nothing when @len is 0) and returns the length of the full text,
 * excluding the NUL, so a return >= @len means the text was cut: call again
 * with a buffer of at least the return value + 1 bytes. The text is about
 * 1.8 KiB of HELP and TYPE lines plus about 1.1 KiB per breaker (with a
 * short name; the name appears in 18 series), and ends with a newline.
 *
 * Returns -1 and sets errno to EINVAL, writing an empty string to @buf (when
 * @len > 0), when: @stats is NULL and n > 0; @breakers is NULL and n > 1; a
 * name is NULL (n > 1), not valid UTF-8, or equal to another; a state is not
 * one of the four. Returns -1 with errno EOVERFLOW when the text would be
 * longer than INT_MAX. Never aborts.
 * Thread-safe (reads its arguments, writes only @buf and errno).
 */
CIRCUIT_API int circuit_stats_format_prometheus_many(const circuit_stats *stats,
                                                     const char *const *breakers, size_t n,
                                                     char *buf, size_t len);

/**
 * circuit_stats_format_prometheus - the exposition of one breaker.
 * @s:       a snapshot from circuit_get_stats.
 * @breaker: the value of the `breaker` label, or NULL for no label.
 * @buf, @len: as for circuit_stats_format_prometheus_many.
 *
 * The same as circuit_stats_format_prometheus_many(s, &breaker, 1, buf,
 * len) (or with breakers NULL when @breaker is NULL). To serve several
 * breakers on one endpoint use the _many call: two outputs of this one
 * cannot be concatenated (see the file comment).
 */
CIRCUIT_API int circuit_stats_format_prometheus(const circuit_stats *s, const char *breaker,
                                                char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* CIRCUIT_PROMETHEUS_H */
