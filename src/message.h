/*
 * Text the library writes: one bounded text buffer (snprintf's contract),
 * the error-message builder on top of it, the shortest round-trip decimal
 * of a double, and the one abort path. Defined in message.c; used by the
 * core's validation (config.c), the presets (presets.c) and the Prometheus
 * formatter (prometheus.c). The lowest floor of src/: it calls nothing else
 * of the library.
 *
 * SPDX-License-Identifier: MIT
 *
 * Messages have one shape everywhere (CFG2):
 *     invalid <what>: <clause>; <clause>; ...
 * each clause naming one bad field, the value given and its bound, e.g.
 *     invalid circuit_config: window = 0 (must be 1..65536); probes = 0 (must be 1..65536)
 * Aborts print one line, "libcircuit: <cause>\n", in a single write(2).
 *
 * Internal (circuit__ prefix): hidden in the shared library, never installed.
 */
#ifndef CIRCUIT_MESSAGE_H
#define CIRCUIT_MESSAGE_H

#include <stdarg.h>
#include <stddef.h>

/* Text written straight into a caller's buffer, as snprintf does: kept
 * NUL-terminated and truncated to len - 1 bytes (buf may be NULL or len 0:
 * nothing is written); `used` counts what the full text needs, so the
 * caller can return it. The fields are in this order so that
 * `{buf, len, 0}` starts one. */
typedef struct circuit__text {
    char  *buf;
    size_t len;
    size_t used;
} circuit__text;

/* Appends n bytes of s. */
void circuit__text_put(circuit__text *t, const char *s, size_t n);
/* Appends the NUL-terminated s. */
void circuit__text_str(circuit__text *t, const char *s);
/* Appends printf-formatted text. */
__attribute__((format(printf, 2, 3))) void circuit__text_fmt(circuit__text *t, const char *fmt,
                                                             ...);
__attribute__((format(printf, 2, 0))) void circuit__text_vfmt(circuit__text *t, const char *fmt,
                                                              va_list ap);

/* An error message being built: "invalid <what>:" and its clauses. */
typedef struct circuit__msg {
    circuit__text text;
    int clauses; /* clauses added so far: > 0 means "something is invalid" */
} circuit__msg;

/* Starts "invalid <what>:" in buf. */
void circuit__msg_start(circuit__msg *m, char *buf, size_t len, const char *what);

/* Appends one clause: " <text>", preceded by ";" after the first clause. The
 * format must not start with a space. */
__attribute__((format(printf, 2, 3))) void circuit__msg_add(circuit__msg *m, const char *fmt,
                                                            ...);

/* Ends the message: with no clause, clears the buffer (an empty string) and
 * returns 0; otherwise leaves the message and returns EINVAL. */
int circuit__msg_end(circuit__msg *m);

/* The shortest decimal text that reads back as `v` (a ratio of 1.0000000001
 * is not shown as "1"), without an exponent while the value has at most 17
 * digits before the point; "nan" and "inf" as printf spells them. */
void circuit__format_double(char *buf, size_t len, double v);

/* Prints "libcircuit: <message>" and a newline on stderr in one write (so the
 * line cannot interleave with other threads' output) and calls abort(). */
__attribute__((noreturn, format(printf, 1, 2))) void circuit__abort(const char *fmt, ...);

#endif /* CIRCUIT_MESSAGE_H */
