/*
 * alloc_count: the one place where libcircuit's tests count heap
 * allocations (and make one fail or stop); the bench has its own
 * (bench/alloc_count.c).
 *
 * Linked into a program as one of two CMake object libraries
 * (tests/CMakeLists.txt), which differ only in which calls reach the
 * counters:
 *
 *   circuit_alloc_count_wrap       linked with -Wl,--wrap=malloc,... : the
 *                                  calls made by code linked statically into
 *                                  the program (the test itself,
 *                                  circuit_testable, circuit_model) come here
 *                                  and go on to the real allocator. Works in
 *                                  the ASan+UBSan build: the sanitizer's
 *                                  runtime keeps owning malloc.
 *   circuit_alloc_count_interpose  the program itself defines malloc, free and
 *                                  the rest, passing them on to glibc's own
 *                                  entry points (__libc_malloc, ...): every
 *                                  call in the process comes here, shared
 *                                  libraries included (libcircuit.so,
 *                                  liburcu-cds.so). Plain builds only, so it
 *                                  is never compiled with a sanitizer.
 *
 * The counters are process-wide and updated atomically: read them with
 * __atomic_load_n (the tests' A_LOAD) and set them with __atomic_store_n.
 */
#ifndef CIRCUIT_ALLOC_COUNT_H
#define CIRCUIT_ALLOC_COUNT_H

#include <stdbool.h>
#include <stdint.h>

extern int64_t alloc_calls;      /* allocation attempts (malloc, calloc, realloc, ...) */
extern int64_t alloc_live;       /* blocks allocated and not yet freed */
extern int64_t alloc_live_bytes; /* the usable bytes of those blocks (malloc_usable_size) */
extern int64_t alloc_fail_at;    /* the attempt that makes alloc_calls reach this value
                                    fails (NULL / ENOMEM); 0: none fails */

/* Set by a thread: its next malloc stops, after alloc_park_setup(), until
 * alloc_release(); the test waits for it with alloc_wait(). The core mallocs
 * only a transition record beyond its pool, between the CAS that made the
 * transition and queueing it, so this parks a thread exactly there. */
extern _Thread_local int alloc_park;
void alloc_park_setup(void);
void alloc_wait(void);
void alloc_release(void);

/* Allocation attempts made by the calling thread so far (no atomic: cheap
 * enough to read around a measured loop). */
uint64_t alloc_thread_calls(void);

/* Which calls the counters see: "static code (--wrap)" or "the whole process
 * (interposed)". */
const char *alloc_count_scope(void);

#endif
