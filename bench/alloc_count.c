/*
 * The bench's allocation counter: see alloc_count.h.
 *
 * SPDX-License-Identifier: MIT
 */
#include "alloc_count.h"

#include <errno.h>
#include <malloc.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

int64_t alloc_calls;
int64_t alloc_live;
int64_t alloc_live_bytes;
static _Thread_local uint64_t thread_calls;

#define ADD(p, v) __atomic_add_fetch((p), (v), __ATOMIC_RELAXED)

uint64_t alloc_thread_calls(void) { return thread_calls; }

#ifdef BENCH_NO_INTERPOSE /* a sanitizer build: its runtime owns malloc */

const char *alloc_count_scope(void) { return "nothing (a sanitizer build counts no allocation)"; }

#else

const char *alloc_count_scope(void) { return "the whole process (interposed)"; }

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t k, size_t n);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t n);

static void *note_new(void *p)
{
    thread_calls++;
    ADD(&alloc_calls, 1);
    if (p != NULL) {
        ADD(&alloc_live, 1);
        ADD(&alloc_live_bytes, (int64_t)malloc_usable_size(p));
    }
    return p;
}

void *malloc(size_t n) { return note_new(__libc_malloc(n)); }
void *calloc(size_t k, size_t n) { return note_new(__libc_calloc(k, n)); }
void *memalign(size_t align, size_t n) { return note_new(__libc_memalign(align, n)); }
void *aligned_alloc(size_t align, size_t n) { return memalign(align, n); }
void *valloc(size_t n) { return memalign((size_t)sysconf(_SC_PAGESIZE), n); }

void *pvalloc(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return memalign(page, (n + page - 1) / page * page);
}

int posix_memalign(void **p, size_t align, size_t n)
{
    if (align < sizeof(void *) || (align & (align - 1)) != 0)
        return EINVAL;
    void *q = memalign(align, n);
    if (q == NULL)
        return ENOMEM;
    *p = q;
    return 0;
}

void *realloc(void *p, size_t n)
{
    thread_calls++;
    ADD(&alloc_calls, 1);
    int64_t old = p != NULL ? (int64_t)malloc_usable_size(p) : 0;
    void *q = __libc_realloc(p, n);
    if (q != NULL) {
        if (p == NULL)
            ADD(&alloc_live, 1);
        ADD(&alloc_live_bytes, (int64_t)malloc_usable_size(q) - old);
    } else if (p != NULL && n == 0) { /* glibc: realloc(p, 0) frees p */
        ADD(&alloc_live, -1);
        ADD(&alloc_live_bytes, -old);
    }
    return q;
}

void free(void *p)
{
    if (p != NULL) {
        ADD(&alloc_live, -1);
        ADD(&alloc_live_bytes, -(int64_t)malloc_usable_size(p));
    }
    __libc_free(p);
}

#endif
