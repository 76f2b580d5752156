/*
 * The park points of the test build (CIRCUIT__HOOK in the core; a test's
 * hook, testing.h's circuit_test_set_hook, runs at each). Its own header so
 * that the core's internal.h names the points without testing.h.
 */
#ifndef CIRCUIT_TEST_POINTS_H
#define CIRCUIT_TEST_POINTS_H

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
    CIRCUIT_TP_FAST_BEFORE_COUNT,     /* done: the mirror read, before the per-CPU cell CAS (L6) */
    CIRCUIT_TP_FOLD_SEALED,           /* intent completion: every cell sealed, before the sum */
    CIRCUIT_TP_FOLD_MID_SUM,          /* a sum of the cells (a failure's or stats'), mid-way */
    CIRCUIT_TP_INTENT_MADE,           /* an intent is in the word, before its completion */
    CIRCUIT_TP_OPERATOR_BEFORE_CAS,   /* isolate/reset: decided, before the transition CAS */
    CIRCUIT_TP_STATS_READ,            /* get_stats: the word read and checked, before the
                                       * 64-bit generation is rebuilt from its tag */
    CIRCUIT_TP_CELL_BEFORE_START,     /* done: a cell of an ended epoch, before starting it for ours */
    CIRCUIT_TP_CLOSED_START_BEFORE_DESC, /* a transition into closed: the word checked, before
                                          * the CAS of the first point's descriptor */
    /* a probe timeout (P1, docs/design/probes.md, TIMEOUTS): the steps of its claim */
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
                                       * k, before the CAS of its slot (closed_state.c desc_put) */
    CIRCUIT_TP_RESERVE_BEFORE_RAISE,  /* slot0_reserve: a racer's reservation found, the word
                                       * checked open, before the CAS raising its due time */
    CIRCUIT_TP_HALFOPEN_BEFORE_CAS,   /* advance: slot 0 reserved, before the open -> half-open CAS */
    CIRCUIT_TP_PROBE_TAKEN,           /* allow: a probe slot's record taken (admitted), before
                                       * the hint covers its due time (probes.c) */
    CIRCUIT_TP__COUNT
} circuit_test_point;

#endif
