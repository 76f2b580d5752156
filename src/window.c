/*
 * The count window: the latest `window` counted results of the current
 * state (C1). The state word carries seq (results appended so far), the
 * number of failures in the window and the last outcome; the ring remembers
 * which of the latest `window` results were FAILURES, one 8-byte record per
 * failure at index seq % window. Successes write nothing.
 *
 * A record is {valid, generation tag, seq, failure}. Appending result s
 * evicts result e = s - window: it was a failure exactly when the ring slot
 * of e holds the record (current generation, e); anything else there (an
 * older record, another generation's, nothing) means e was a success. So the
 * ring needs no clearing at a state change, except of records tagged with
 * the new half-open generation's 30 bits, which an older half-open state
 * 2^30 transitions ago left (circuit__ring_start, O(window) loads when
 * half-open is entered).
 *
 * A failure record is written after the CAS of the state word that counted
 * it, by its appender, or by whichever thread appends next ("helping"):
 * before appending result s+1, a thread makes sure that record s, if s was a
 * failure (the word's last outcome), is in the ring. Only the newest record
 * can therefore be missing, and the one an append evicts (e <= s - 2 when
 * window >= 2) is always there. A window of 1 needs no ring: the evicted
 * result is the last outcome kept in the word.
 *
 * A record is written only while it is the pending one (the state word is
 * still in its generation, at seq s+1), by a compare-and-swap from the value
 * read before that check: a thread stopped for a while cannot write an old
 * record over a newer one. When a success evicts a failure, the evicting
 * thread clears the failure's record (a CAS from exactly that record), so a
 * slot never keeps a record from a lap ago: seq counts modulo seq_mod (about
 * 2^31), and a record left for that long would alias a later result. Both
 * stay exact unless one thread is stopped, inside done, for about 2^31
 * results of one generation.
 *
 * MEMORY ORDER: a record is read, the state word is checked, then the
 * record is CASed ("read X, check the word, CAS X"): the record load is
 * ACQUIRE so the check cannot be satisfied before it (on a weakly ordered
 * CPU the check could otherwise see a newer word than the record value,
 * and a stale record would be written over a newer one). A record written
 * by the helper of result s must be visible to the thread that evicts s a
 * lap later: the helper's next state-word CAS is a release after the
 * record CAS, and the evicter's read of the word is an acquire, so the
 * record CAS itself can be relaxed.
 *
 * Closed (counting.c) keeps its window as a bitmap of failures instead,
 * updated once per exact point (many results at a time), so that a failure
 * after many successes reads O(window / 64) words, not one record per
 * result. Here: half-open, one result at a time through the word.
 *
 * Written for this project: neither ConcurrencyKit nor liburcu offers a
 * counting window.
 */
#include "window.h"

#define REC_VALID CIRCUIT__REC_VALID
#define rec_make circuit__rec_make
static inline uint32_t rec_gen(uint64_t r) { return (uint32_t)((r >> 33) & CIRCUIT__GEN_MASK); }
static inline uint32_t rec_seq(uint64_t r) { return (uint32_t)(r >> 1); }

static void ring_write(circuit_breaker *b, uint32_t gen, uint32_t seq)
{
    uint64_t *slot = &b->ring[circuit__mod_window(b, seq)];
    uint64_t want = rec_make(gen, seq);
    /* acquire: the check of the word below must not pass before this read */
    uint64_t cur = circuit__ld_acq(slot);
    while (cur != want) {
        /* Pending means the state word is at (gen, seq + 1), slow mode.
         * Later than that, the thread that moved it past seq + 1 wrote this
         * record first. acquire: ordered before the CAS below. */
        uint64_t lo = circuit__ld128_lo_acq(&b->core);
        if (circuit__gen(lo) != gen || circuit__code(lo) != CIRCUIT__ST_HALF_OPEN ||
            circuit__seq_sub(b, circuit__seq(lo), seq) != 1)
            return;
        /* the write needs no release (our next state-word CAS publishes it
         * to evicters); acquire because a failed CAS hands back the value
         * the loop re-checks the word against */
        if (circuit__cas_acq(slot, &cur, want))
            return;
    }
}

void circuit__ring_clear(circuit_breaker *b, uint32_t gen, uint32_t seq)
{
    uint64_t *slot = &b->ring[circuit__mod_window(b, seq)];
    uint64_t old = rec_make(gen, seq);
    /* relaxed: only ever replaces exactly this record (a newer one makes it
     * fail harmlessly); nothing is read through it */
    CIRCUIT__SHARED_RMW();
    circuit__cas_rlx(slot, &old, 0);
}

bool circuit__ring_start(circuit_breaker *b, uint32_t gen, uint64_t lo)
{
    if (b->window == 1)
        return true;
    for (uint32_t i = 0; i < b->window; i++) {
        /* acquire: the check of the word below must not pass before it */
        uint64_t r = circuit__ld_acq(&b->ring[i]);
        while ((r & REC_VALID) && rec_gen(r) == gen) {
            /* acquire: table core */
            if (circuit__ld128_lo_acq(&b->core) != lo)
                return false;
            CIRCUIT__SHARED_RMW();
            /* acquire on failure: the value handed back is checked again;
             * the transition CAS that follows (release) publishes it */
            if (circuit__cas_acq(&b->ring[i], &r, 0))
                break;
        }
    }
    return true;
}

void circuit__ring_after_count(circuit_breaker *b, circuit__u128 c, bool failure,
                               bool evicted_failure)
{
    if (b->window == 1 || !(failure || evicted_failure))
        return;
    CIRCUIT__HOOK(CIRCUIT_TP_RING_BEFORE_WRITE);
    uint32_t gen = circuit__gen(c.lo), seq = circuit__seq(c.lo);
    if (failure) /* replaces the evicted record, same slot */
        ring_write(b, gen, seq);
    else
        circuit__ring_clear(b, gen, (uint32_t)circuit__seq_sub(b, seq, b->window));
}

void circuit__ring_help(circuit_breaker *b, circuit__u128 c)
{
    if (b->window == 1)
        return;
    uint32_t seq = circuit__seq(c.lo);
    if (!(c.hi & CIRCUIT__HI_LAST_FAIL))
        return; /* the newest result is a success: nothing to write */
    if (!(c.hi & CIRCUIT__HI_FULL) && seq == 0)
        return; /* nothing appended yet in this state */
    uint32_t prev = (uint32_t)circuit__seq_sub(b, seq, 1);
    ring_write(b, circuit__gen(c.lo), prev);
}


/* Computes the word after appending one result to c (closed or half-open).
 * Returns true when the result it evicts was a failure recorded in the ring
 * (the caller clears that record once its CAS succeeds). When c is stale the
 * result is garbage, and the caller's CAS from c fails. */
bool circuit__append(circuit_breaker *b, circuit__u128 c, bool failure, circuit__u128 *out)
{
    uint32_t seq = circuit__seq(c.lo);
    uint32_t gen = circuit__gen(c.lo);
    uint64_t hi = c.hi;
    uint32_t fail = circuit__hi_fail(hi);
    bool full = (hi & CIRCUIT__HI_FULL) != 0;
    bool last_fail = (hi & CIRCUIT__HI_LAST_FAIL) != 0;
    uint32_t run = circuit__hi_run(hi);
    bool evicted_failure = false;

    if (b->window == 1) {
        if (full && last_fail)
            fail--;
        full = true;
    } else if (full) {
        uint32_t old = (uint32_t)circuit__seq_sub(b, seq, b->window);
        /* acquire: the caller re-checks the word after this read */
        uint64_t r = circuit__ld_acq(&b->ring[circuit__mod_window(b, seq)]);
        if ((r & REC_VALID) && rec_gen(r) == gen && rec_seq(r) == old && fail > 0) {
            fail--; /* the evicted result was a failure */
            evicted_failure = true;
        }
    } else if (seq + 1 == b->window) {
        full = true;
    }
    if (failure)
        fail++;
    if (run == 0 || last_fail != failure)
        run = 1;
    else if (run < (uint32_t)CIRCUIT_RUN_MAX)
        run++;
    uint32_t nseq = ((uint64_t)seq + 1 == b->seq_mod) ? 0 : seq + 1;

    /* half-open: the state's no-probe-0 mark is kept (word.h) */
    out->lo = circuit__mklo(circuit__code(c.lo), gen, nseq) |
              (circuit__code(c.lo) == CIRCUIT__ST_HALF_OPEN ? c.lo & CIRCUIT__LO_NO_PROBE0 : 0);
    out->hi = (uint64_t)fail | (full ? CIRCUIT__HI_FULL : 0) |
              (failure ? CIRCUIT__HI_LAST_FAIL : 0) | ((uint64_t)run << CIRCUIT__HI_RUN_SHIFT) |
              (hi & (CIRCUIT__HI_TO_MASK << CIRCUIT__HI_TO_SHIFT));
    return evicted_failure;
}
