/*
 * Counting (counting.c): the result -> counts step. Its interface is listed
 * at the top of counting.c; the per-CPU lines (percpu.h) and the window's
 * ring (window.h) are its lower floor. Above transitions (a counted result
 * may trip, close or reopen the breaker), below probes and the public calls.
 */
#ifndef CIRCUIT_COUNTING_H
#define CIRCUIT_COUNTING_H

#include "percpu.h"

/* Counts one settled result of a ticket admitted in generation `gen`
 * (S2, P2, C1-C5, T2, L6): a probe's (probe = true) through the state word;
 * a closed success on this CPU's cell; a closed failure as an exact point
 * (counting.c's CLOSED comment); CIRCUIT_IGNORED by its total only; adds
 * the M1 total. `now` is read lazily when !have_now (only a trip needs it).
 * Returns false when the result is late: the state left the ticket's
 * generation. */
bool circuit__count(circuit_breaker *b, uint32_t gen, bool probe, circuit_outcome o,
                    void *call_ctx, int64_t now, bool have_now);

/* One attempt to count a probe timeout, due at `due`, into the half-open
 * word *c (P1): asks the probe policy with *c's counts plus the timeout,
 * then CASes the word from *c to the counted word, or makes the transition
 * the policy asked for (a reopen starts its open period at `due`).
 * COUNTED: this call's CAS won (the word holds the timeout, or left *c's
 * generation by it); SATURATED: timed_out is at CIRCUIT_TIMED_OUT_MAX and
 * the policy said stay, so there is nothing to write; LOST: the word moved,
 * *c is its new value. Adds no total: the caller (probes.c) makes sure each
 * timeout is counted once, and adds M1's total. */
typedef enum circuit__timeout_result {
    CIRCUIT__TIMEOUT_COUNTED,
    CIRCUIT__TIMEOUT_SATURATED,
    CIRCUIT__TIMEOUT_LOST
} circuit__timeout_result;
circuit__timeout_result circuit__count_timeout(circuit_breaker *b, circuit__u128 *c, int64_t due,
                                               void *call_ctx);

/* The counts the word c stands for: zero while open or isolated; closed:
 * its exact point's plus the successes the cells hold (read, not sealed). */
void circuit__counts(const circuit_breaker *b, circuit__u128 c, circuit_counts *out);

/* ---- closed (the exact points, counting.c's CLOSED comment) ------------- */
typedef struct circuit__cc {   /* the counts at an exact point (a descriptor) */
    uint32_t seq;              /* results counted in this generation, mod seq_mod */
    bool full;                 /* seq has reached window */
    uint32_t fail;             /* failures in the window */
    bool last_fail;            /* the newest result was a failure */
    uint32_t run;              /* its run (saturated) */
    uint64_t S;                /* cells' sum of the epoch at this point (0 after a fold) */
} circuit__cc;
/* The closed bitmap's update of one exact point, U(k): clear the bits of
 * the m ring indices from s on (modulo the window: the indices of the m
 * positions the point appended, which evict the m before them), then set
 * the bit of index `set` (its failure; -1: none). */
typedef struct circuit__upd {
    uint32_t s, m;
    int64_t set;
} circuit__upd;
typedef enum circuit__closed_result { CIRCUIT__COUNTED, CIRCUIT__LATE } circuit__closed_result;
bool circuit__cc_apply(const circuit_breaker *b, uint32_t k, const circuit__upd *virt,
                       const circuit__cc *c, uint64_t d, bool failure, circuit__cc *out);
void circuit__cc_counts(const circuit_breaker *b, const circuit__cc *c, circuit_counts *out);
bool circuit__closed_cc(circuit_breaker *b, circuit__u128 w, circuit__cc *out, bool write);
bool circuit__closed_help(circuit_breaker *b, circuit__u128 w, circuit__cc *c);
/* Completes the intent of closed word wi (anyone may; the same decision). */
void circuit__complete(circuit_breaker *b, circuit__u128 wi, int64_t *now, bool *have_now,
                       void *call_ctx);
circuit__closed_result circuit__closed_success(circuit_breaker *b, uint32_t gen, void *call_ctx);
circuit__closed_result circuit__closed_failure(circuit_breaker *b, uint32_t gen, int64_t *now,
                                               bool *have_now, void *call_ctx);
/* isolate from closed (an intent); false when *w moved first (re-read). */
bool circuit__closed_isolate(circuit_breaker *b, circuit__u128 *w, int64_t now, void *call_ctx);
/* ends the epoch of closed word *w (a fold intent, tests and count limits) */
bool circuit__closed_fold(circuit_breaker *b, circuit__u128 *w);
uint64_t circuit__cells_read(const circuit_breaker *b, uint32_t epoch);
/* a reader's counts at closed word w plus `cells` successes since its point;
 * returns the word they belong to (a newer one, maybe not closed, when w was
 * overtaken during the read): report its state and generation */
circuit__u128 circuit__closed_counts_at(const circuit_breaker *b, circuit__u128 w,
                                        const uint64_t *cells, circuit_counts *out);

#endif
