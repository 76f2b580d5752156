/*
 * Test-only seam (TM3). Compiled into the `circuit_testable` static
 * library only (CIRCUIT_TESTING=1); the installed library has no clock
 * parameter and no hooks. Never installed.
 */
#ifndef CIRCUIT_TESTING_H
#define CIRCUIT_TESTING_H

#include "circuit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- clock ------------------------------------------------------------- */
/* By default the test build reads a settable clock that starts at
 * 1 000 000 000 ns and only moves when told to. All functions are atomic and
 * may be called from any thread. */
void    circuit_test_clock_set(int64_t now_ns);
int64_t circuit_test_clock_advance(int64_t delta_ns);  /* returns the new time */
int64_t circuit_test_clock_now(void);
/* true: read CLOCK_MONOTONIC instead of the settable clock (real-time tests). */
void    circuit_test_clock_use_real(bool real);

#include "test_points.h"

/* Called at each point above by the thread passing it; NULL disables. The
 * hook runs inside the library: it must not call the breaker. */
typedef void (*circuit_test_hook_fn)(circuit_test_point point, void *arg);
void circuit_test_set_hook(circuit_test_hook_fn fn, void *arg);

/* ---- state injection (saturation tests, C2/C3) -------------------- */
/* Sets the current run to `run` results of kind `kind` (SUCCESS or FAILURE)
 * and, while half-open, timed_out to `timed_out`. Single-threaded use only.
 * Returns 0, or EINVAL when the values do not fit the current state. */
int circuit_test_force_counts(circuit_breaker *b, circuit_outcome kind, int64_t run,
                              int64_t timed_out);

/* The CPU count the next circuit_new sizes its per-CPU part by (1..4096;
 * 0: the configured CPUs, the default). Breakers already built keep
 * theirs. For the L5 bound at CPU counts this machine does not have. */
void circuit_test_set_cpus(uint32_t n);

/* Shared mode: the process id a handle's flushes record as their owner
 * (the schedule checker's threads play processes 1, 2, ...). */
void circuit_test_shared_proc(circuit_breaker *b, uint32_t id);

/* Bytes allocated for the breaker by circuit_new (L5): its block and
 * its units of the per-CPU arena (16 bytes per CPU). */
size_t circuit_test_footprint(const circuit_breaker *b);

/* Transitions made and not yet delivered (queued or waiting for a gap). */
int64_t circuit_test_pending(const circuit_breaker *b);

/* CAS attempts on any breaker's state word since the process started (all
 * threads; the L6 test: healthy successes attempt none). */
uint64_t circuit_test_core_cas_attempts(void);

/* Read-modify-writes of cache lines that other CPUs write, made by the
 * counting paths since the process started (all breakers, all threads):
 * state-word CASes, descriptor and ring record CASes, seals, the ledger,
 * epoch ids, and the tries of the delivery role (a call that finds a
 * transition pending and the role free). A success's count on its own CPU's cell and the per-CPU totals
 * are not among them (L8: zero for successes, a few per failure). */
uint64_t circuit_test_shared_rmws(void);

/* Words of the closed window's failure bitmap read to count the failures an
 * exact point evicts, since the process started (all breakers, all
 * threads): L6 bounds them by O(window / 64) per
 * failure, however many successes came before it. */
uint64_t circuit_test_window_words(void);

/* Passes circuit_get_stats made over the per-CPU lines since the process
 * started (all breakers, all threads): one per call unless a read has to
 * start again (the M1 bounded-read test). */
uint64_t circuit_test_stats_passes(void);

/* True while closed with no intent being completed (closed successes count
 * on per-CPU cells, L6). */
bool circuit_test_fast_mode(const circuit_breaker *b);

/* Ends the current closed epoch now (a FOLD: the cells' successes become
 * part of the exact counts); returns true when the breaker is closed and
 * this call made the fold's intent. */
bool circuit_test_fold(circuit_breaker *b);

/* Counts n successes at once on the calling thread's CPU cell while closed
 * (as n closed successes would, without their tickets: the M1 totals do
 * not see them). For S_k's limit (2^29 - 1 successes between two exact
 * points) without 2^29 calls. Single-threaded use, after at least one
 * success of the current epoch on this CPU (a cell starts with its first
 * success). Returns 0; EINVAL when not closed or an intent is being
 * completed; EAGAIN when the cell is not this epoch's, is sealed, or would
 * reach its 2^32 - 1 limit. */
int circuit_test_add_successes(circuit_breaker *b, uint32_t n);

/* Moves an isolated breaker n generations on at once (its 64-bit
 * generation and the word's 30-bit tag; nothing delivered, nothing else
 * changed), as n transitions would, for the bounds on generation tags
 * without 2^30 calls. Single-threaded use, with no transition waiting for
 * delivery. Returns 0; EINVAL when not isolated or a transition waits;
 * EAGAIN when the word moved. */
int circuit_test_skip_generations(circuit_breaker *b, uint64_t n);

#ifdef __cplusplus
}
#endif

#endif
