/*
 * The bench's allocation counter: the program defines malloc, free and the
 * rest, passing them on to glibc's own entry points (__libc_malloc, ...),
 * so every allocation in the process is counted, libcircuit.so's included.
 * Plain (unsanitized) builds only. The counters are process-wide and
 * updated atomically; alloc_thread_calls is the calling thread's own count.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CIRCUIT_BENCH_ALLOC_COUNT_H
#define CIRCUIT_BENCH_ALLOC_COUNT_H

#include <stdint.h>

extern int64_t alloc_calls;      /* allocation attempts */
extern int64_t alloc_live;       /* blocks allocated and not yet freed */
extern int64_t alloc_live_bytes; /* their usable bytes (malloc_usable_size) */

uint64_t alloc_thread_calls(void);
const char *alloc_count_scope(void);

#endif
