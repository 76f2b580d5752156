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

/* ---- park points (L1 progress tests) ------------------------------ */
typedef enum circuit_test_point {
    CIRCUIT_TP_ALLOW_BEFORE_ADMIT = 1, /* allow: state word loaded, before the ticket is admitted */
    CIRCUIT_TP_DONE_BEFORE_CAS,       /* done: counts computed, before the CAS that counts */
    CIRCUIT_TP_RELEASE_BEFORE_CAS,    /* release: before the CAS that settles the ticket */
    CIRCUIT_TP_DELIVERY_WON,          /* a thread has just won the delivery role */
    CIRCUIT_TP_AFTER_PUBLISH,         /* a transition is queued, delivery not yet attempted */
    CIRCUIT_TP_SLOT_HELD,             /* allow: probe slot acquired, before returning */
    CIRCUIT_TP_RING_BEFORE_WRITE,     /* done: counted, before writing its window slot
                                       * (half-open) or the point's bitmap update (closed) */
    CIRCUIT_TP_FAST_BEFORE_COUNT,     /* done: closed word read, before the per-CPU cell CAS (L6) */
    CIRCUIT_TP_FOLD_SEALED,           /* intent completion: every cell sealed, before the sum */
    CIRCUIT_TP_FOLD_MID_SUM,          /* a sum of the cells (a failure's or stats'), mid-way */
    CIRCUIT_TP_INTENT_MADE,           /* an intent is in the word, before its completion */
    CIRCUIT_TP_OPERATOR_BEFORE_CAS,   /* isolate/reset: decided, before the transition CAS */
    CIRCUIT_TP_STATS_READ,            /* get_stats: the word read and checked, before the
                                       * 64-bit generation is rebuilt from its tag */
    CIRCUIT_TP_CELL_BEFORE_START,     /* done: a cell of an ended epoch, before starting it for ours */
    CIRCUIT_TP_CLOSED_START_BEFORE_DESC, /* a transition into closed: the word checked, before
                                          * the CAS of the first point's descriptor */
    /* a probe timeout (P1, probes.c's TIMEOUTS): the steps of its claim */
    CIRCUIT_TP_TIMEOUT_BEFORE_CLAIM,  /* a scan found a due probe, before the claim word's CAS */
    CIRCUIT_TP_TIMEOUT_CLAIMED,       /* the claim word names it, before the CAS taking its slot */
    CIRCUIT_TP_TIMEOUT_TAKEN,         /* its slot taken from the probe, before the counting CAS */
    CIRCUIT_TP_TIMEOUT_COUNTED,       /* counted, before the CAS freeing its slot */
    CIRCUIT_TP_TIMEOUT_FREED,         /* slot freed, before the CAS retiring the claim */
    CIRCUIT_TP_TIMEOUT_IDLE_READ,     /* a scan read the claim word idle, before reading the slot */
    CIRCUIT_TP_STATS_BEFORE_COUNTS,   /* get_stats, closed: the word and the cells read, before
                                       * the counts are derived from the descriptor and bitmap */
    CIRCUIT_TP_CLOSED_START_BEFORE_BITS, /* a transition into closed: the word checked, before
                                          * the CAS emptying a word of the closed bitmap */
    CIRCUIT_TP_MIRROR_BEFORE_SET,     /* the closed mirror: the mirror, then the word (closed,
                                       * no intent) read, before the CAS that sets it */
    CIRCUIT_TP_MIRROR_BEFORE_SHUT,    /* an intent's completer: the word checked, before the
                                       * CAS that shuts the closed mirror */
    CIRCUIT_TP_INTENT_BEFORE_CAS,     /* an intent's maker: its O6 record written, before the
                                       * intent's CAS */
    CIRCUIT_TP_STATE_READ,            /* get_state: an open word read, before the clock read */
    CIRCUIT_TP_STATS_COUNTS_TRY,      /* get_stats, closed: the top of each try deriving the counts */
    CIRCUIT_TP_TOTALS_STARTED,        /* a packed total's flush: START won, before its CREDIT */
    CIRCUIT_TP_TOTALS_CREDITED,       /* the flush credited the shared total, before its SUBTRACT */
    CIRCUIT_TP_TOTALS_SUBTRACTED,     /* the field lowered, before the flush's END */
    CIRCUIT_TP_TOTALS_READ,           /* get_stats: the packed fields read, before the shared
                                       * totals and the second load of the flush control word */
    CIRCUIT_TP_DESC_BEFORE_CAS,       /* a closed point's descriptor D_k: the word checked at
                                       * k, before the CAS of its slot (counting.c desc_put) */
    CIRCUIT_TP_RESERVE_BEFORE_RAISE,  /* slot0_reserve: a racer's reservation found, the word
                                       * checked open, before the CAS raising its due time */
    CIRCUIT_TP_HALFOPEN_BEFORE_CAS,   /* advance: slot 0 reserved, before the open -> half-open CAS */
    CIRCUIT_TP__COUNT
} circuit_test_point;

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
 * part of the exact counts); returns true when the breaker was closed and
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
