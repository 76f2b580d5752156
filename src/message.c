/*
 * Text the library writes (message.h): the bounded text buffer, the
 * error-message builder, the shortest round-trip decimal and the abort path.
 *
 * SPDX-License-Identifier: MIT
 */
#include "message.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the text buffer ------------------------------------------------------ */

void circuit__text_put(circuit__text *t, const char *s, size_t n)
{
    if (t->len > 0 && t->used < t->len - 1) {
        size_t room = t->len - 1 - t->used;
        size_t k = n < room ? n : room;
        memcpy(t->buf + t->used, s, k);
        t->buf[t->used + k] = '\0';
    }
    t->used += n;
}

void circuit__text_str(circuit__text *t, const char *s)
{
    circuit__text_put(t, s, strlen(s));
}

void circuit__text_vfmt(circuit__text *t, const char *fmt, va_list ap)
{
    char *at = NULL;
    size_t room = 0;
    if (t->len > 0 && t->used < t->len - 1) {
        at = t->buf + t->used;
        room = t->len - t->used; /* vsnprintf truncates and terminates */
    }
    int n = vsnprintf(at, room, fmt, ap);
    if (n > 0)
        t->used += (size_t)n;
}

void circuit__text_fmt(circuit__text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    circuit__text_vfmt(t, fmt, ap);
    va_end(ap);
}

/* ---- the message builder -------------------------------------------------- */

void circuit__msg_start(circuit__msg *m, char *buf, size_t len, const char *what)
{
    m->text = (circuit__text){buf, buf ? len : 0, 0};
    m->clauses = 0;
    if (m->text.len > 0)
        buf[0] = '\0';
    circuit__text_fmt(&m->text, "invalid %s:", what);
}

void circuit__msg_add(circuit__msg *m, const char *fmt, ...)
{
    circuit__text_str(&m->text, m->clauses > 0 ? "; " : " ");
    va_list ap;
    va_start(ap, fmt);
    circuit__text_vfmt(&m->text, fmt, ap);
    va_end(ap);
    m->clauses++;
}

int circuit__msg_end(circuit__msg *m)
{
    if (m->clauses > 0)
        return EINVAL;
    if (m->text.len > 0)
        m->text.buf[0] = '\0';
    return 0;
}

/* ---- numbers ---------------------------------------------------------------- */

void circuit__format_double(char *buf, size_t len, double v)
{
    if (isnan(v)) {
        snprintf(buf, len, "nan");
        return;
    }
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        if (isinf(v) || strtod(buf, NULL) == v)
            break;
    }
    const char *e = strchr(buf, 'e');
    if (e != NULL) {
        long exp10 = strtol(e + 1, NULL, 10);
        if (exp10 >= 0 && exp10 < 17 && exp10 + 1 > prec)
            prec = (int)exp10 + 1;
    }
    snprintf(buf, len, "%.*g", prec, v);
}

/* ---- the abort path ----------------------------------------------------------- */

void circuit__abort(const char *fmt, ...)
{
    /* One write, so that the line cannot interleave with other threads'
     * output on stderr. */
    char line[512];
    size_t n = (size_t)snprintf(line, sizeof line, "libcircuit: ");
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
    va_end(ap);
    if (k > 0)
        n += (size_t)k < sizeof line - n - 1 ? (size_t)k : sizeof line - n - 2;
    line[n++] = '\n';
    ssize_t unused = write(STDERR_FILENO, line, n);
    (void)unused;
    abort();
}
