/*
 * Counting heap allocations: see alloc_count.h. Built twice from this file,
 * as circuit_alloc_count_wrap (ALLOC_COUNT_WRAP) and
 * circuit_alloc_count_interpose (ALLOC_COUNT_INTERPOSE); only the entry
 * points differ, the counting below is shared.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "alloc_count.h"

#include <errno.h>
#include <malloc.h>
#include <semaphore.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(ALLOC_COUNT_WRAP) == defined(ALLOC_COUNT_INTERPOSE)
#error "define exactly one of ALLOC_COUNT_WRAP and ALLOC_COUNT_INTERPOSE"
#endif

int64_t alloc_calls;
int64_t alloc_live;
int64_t alloc_live_bytes;
int64_t alloc_fail_at;
_Thread_local int alloc_park;

static _Thread_local uint64_t thread_calls;
static sem_t parked, resume;

#define ADD(p, v) __atomic_add_fetch((p), (v), __ATOMIC_SEQ_CST)
#define LOAD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)

uint64_t alloc_thread_calls(void)
{
    return thread_calls;
}

void alloc_park_setup(void)
{
    sem_init(&parked, 0, 0);
    sem_init(&resume, 0, 0);
}

void alloc_wait(void)
{
    while (sem_wait(&parked) != 0)
        ;
}

void alloc_release(void)
{
    sem_post(&resume);
}

static void park_if_asked(void)
{
    if (alloc_park) {
        alloc_park = 0;
        sem_post(&parked);
        while (sem_wait(&resume) != 0)
            ;
    }
}

/* Counts one attempt; true when it must fail. */
static bool attempt_fails(void)
{
    thread_calls++;
    int64_t n = ADD(&alloc_calls, 1);
    int64_t at = LOAD(&alloc_fail_at);
    return at != 0 && n == at;
}

static void *note_new(void *p)
{
    if (p != NULL) {
        ADD(&alloc_live, 1);
        ADD(&alloc_live_bytes, (int64_t)malloc_usable_size(p));
    }
    return p;
}

static void note_gone(void *p)
{
    if (p != NULL) {
        ADD(&alloc_live, -1);
        ADD(&alloc_live_bytes, -(int64_t)malloc_usable_size(p));
    }
}

/* ---- where the calls come in, and where they go on to -------------------- */

#ifdef ALLOC_COUNT_WRAP

const char *alloc_count_scope(void)
{
    return "static code (--wrap)";
}

#define ENTRY(name) __wrap_##name
void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
int __real_posix_memalign(void **p, size_t align, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t k, size_t n);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
int __wrap_posix_memalign(void **p, size_t align, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);
#define REAL_MALLOC __real_malloc
#define REAL_CALLOC __real_calloc
#define REAL_REALLOC __real_realloc
#define REAL_FREE __real_free

int ENTRY(posix_memalign)(void **p, size_t align, size_t n)
{
    if (attempt_fails())
        return ENOMEM;
    int rc = __real_posix_memalign(p, align, n);
    if (rc == 0)
        note_new(*p);
    return rc;
}

void *ENTRY(aligned_alloc)(size_t align, size_t n)
{
    if (attempt_fails())
        return NULL;
    return note_new(__real_aligned_alloc(align, n));
}

#else /* ALLOC_COUNT_INTERPOSE */

const char *alloc_count_scope(void)
{
    return "the whole process (interposed)";
}

#define ENTRY(name) name
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t k, size_t n);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t n);
#define REAL_MALLOC __libc_malloc
#define REAL_CALLOC __libc_calloc
#define REAL_REALLOC __libc_realloc
#define REAL_FREE __libc_free

void *memalign(size_t align, size_t n)
{
    if (attempt_fails())
        return NULL;
    return note_new(__libc_memalign(align, n));
}

void *aligned_alloc(size_t align, size_t n)
{
    return memalign(align, n);
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

void *valloc(size_t n)
{
    return memalign((size_t)sysconf(_SC_PAGESIZE), n);
}

void *pvalloc(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return memalign(page, (n + page - 1) / page * page);
}

#endif

void *ENTRY(malloc)(size_t n)
{
    park_if_asked();
    if (attempt_fails())
        return NULL;
    return note_new(REAL_MALLOC(n));
}

void *ENTRY(calloc)(size_t k, size_t n)
{
    if (attempt_fails())
        return NULL;
    return note_new(REAL_CALLOC(k, n));
}

void *ENTRY(realloc)(void *p, size_t n)
{
    if (attempt_fails())
        return NULL;
    int64_t old = p != NULL ? (int64_t)malloc_usable_size(p) : 0;
    void *q = REAL_REALLOC(p, n);
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

void ENTRY(free)(void *p)
{
    note_gone(p);
    REAL_FREE(p);
}
