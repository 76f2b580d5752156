/*
 * Counting while half-open (halfopen.h; docs/CONTRACT.md C1, S4, P1, P2,
 * T6): few probes by design, so every result goes through the state word.
 *
 * INVARIANTS
 *   - the ring holds a record for a result of this generation exactly when
 *     that result is a failure; only the newest record may be missing, and
 *     whoever appends next writes it first (helping);
 *   - a record is written or cleared only while the word is at the point
 *     it belongs to ("read X, check the word, CAS X", X read with acquire);
 *   - a probe policy's answer is checked: any state other than closed,
 *     open or half-open aborts (S4).
 * The ring's protocol and bounds: docs/design/halfopen-window.md.
 */
#include "halfopen.h"
#include "transition.h"

/* ConcurrencyKit's exponential backoff for lost CAS races on the state word.
 * Its builtins mode keeps the header free of inline assembly TSan would not
 * see (it only spins; it orders nothing). */
#ifdef CIRCUIT__TSAN
#define CK_USE_CC_BUILTINS 1
#endif
#include <ck_backoff.h>

/* First wait after a lost CAS, in ck_backoff iterations (doubles each loss,
 * up to CK_BACKOFF_CEILING). Short: a loss on the slow path usually means
 * one other result got in first. */
#define CAS_BACKOFF_FIRST 16u

/* The probe policy's answer, checked (S4: any other value aborts). */
static circuit_state ask_probe(circuit_breaker *b, const circuit_counts *c)
{
    circuit_state d;
    {
        CIRCUIT__CB_FRAME(frame, b, CIRCUIT__CB_PROBE);
        d = b->policy.probe(b->policy.arg, c);
    }
    if (d != CIRCUIT_CLOSED && d != CIRCUIT_OPEN && d != CIRCUIT_HALF_OPEN)
        circuit__abort("probe policy returned an invalid state (%d); it must return "
                       "CIRCUIT_CLOSED, CIRCUIT_OPEN or CIRCUIT_HALF_OPEN",
                       (int)d);
    return d;
}


/* A failure record: {valid, generation tag, seq, 1}. */
#define REC_VALID (UINT64_C(1) << 63)
static inline uint64_t rec_make(uint32_t gen, uint32_t seq)
{
    return REC_VALID | ((uint64_t)(gen & CIRCUIT__GEN_MASK) << 33) | ((uint64_t)seq << 1) | 1u;
}
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
        uint64_t lo = circuit__ld128_lo_acq(&b->s->core);
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
            if (circuit__ld128_lo_acq(&b->s->core) != lo)
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


/* Computes the word after appending one result to c (half-open).
 * Returns true when the result it evicts is a failure recorded in the ring
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
            fail--; /* the evicted result is a failure */
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

    /* half-open: the state's no-probe-0 mark is kept (docs/design/state-word.md) */
    out->lo = circuit__word_lo(circuit__code(c.lo), gen, nseq) |
              (circuit__code(c.lo) == CIRCUIT__ST_HALF_OPEN ? c.lo & CIRCUIT__LO_NO_PROBE0 : 0);
    out->hi = (uint64_t)fail | (full ? CIRCUIT__HI_FULL : 0) |
              (failure ? CIRCUIT__HI_LAST_FAIL : 0) | ((uint64_t)run << CIRCUIT__HI_RUN_SHIFT) |
              (hi & (CIRCUIT__HI_TO_MASK << CIRCUIT__HI_TO_SHIFT));
    return evicted_failure;
}


/* Counts one probe's success or failure of generation `gen` through the
 * state word (half-open: few probes by design). Returns false when late. */
bool circuit__halfopen_count(circuit_breaker *b, uint32_t gen, bool failure, void *call_ctx,
                       int64_t now)
{
    circuit__u128 c = circuit__ld128_acq(&b->s->core); /* acquire: table core */
    ck_backoff_t backoff = CAS_BACKOFF_FIRST;
    for (;;) {
        if (circuit__gen(c.lo) != gen)
            return false; /* late: never touches a later generation (T2, T6) */
        unsigned code = circuit__code(c.lo);
        if (code != CIRCUIT__ST_HALF_OPEN)
            return false; /* unreachable: a probe's generation is half-open */
        circuit__ring_help(b, c);
        circuit__u128 n;
        bool evicted_failure = circuit__append(b, c, failure, &n);
        /* acquire: after the ring read inside append */
        if (circuit__ld128_lo_acq(&b->s->core) != c.lo) {
            /* c went stale while we read its evicted record: the counts would
             * mix two states, and no policy may see that. */
            c = circuit__ld128_acq(&b->s->core);
            continue;
        }
        circuit_counts cnt;
        circuit__word_counts(b, n, &cnt);
        circuit__u128 before = c;
        {
            circuit_state to = ask_probe(b, &cnt);
            CIRCUIT__HOOK(CIRCUIT_TP_DONE_BEFORE_CAS);
            if (to != CIRCUIT_HALF_OPEN) {
                if (circuit__transition(b, &c, to, CIRCUIT_CAUSE_POLICY, &cnt, now,
                                        call_ctx))
                    return true;
            } else if (circuit__core_cas(b, &c, n)) {
                circuit__ring_after_count(b, before, failure, evicted_failure);
                return true;
            }
        }
        /* Lost a CAS to another result: back off before the next try, so
         * two CPUs do not keep stealing the line from each other
         * (exponential; not a lock: no one waits for anyone). */
        ck_backoff_eb(&backoff);
        /* The next try counts after results that were counted after our
         * clock read: a reopen it makes starts its open period now, when
         * it is counted, not at that older reading (S4) */
#if !defined(CIRCUIT_PLANT_PROBE_STALE_CLOCK)
        now = circuit__now();
#endif
    }
}

circuit__timeout_result circuit__count_timeout(circuit_breaker *b, circuit__u128 *c, int64_t due,
                                               void *call_ctx)
{
    circuit__u128 n = {c->lo, circuit__hi_add_timeout(c->hi)};
    circuit_counts cnt;
    circuit__word_counts(b, n, &cnt);
    circuit_state d = ask_probe(b, &cnt);
    if (d != CIRCUIT_HALF_OPEN)
        return circuit__transition(b, c, d, CIRCUIT_CAUSE_POLICY, &cnt, due, call_ctx)
                   ? CIRCUIT__TIMEOUT_COUNTED
                   : CIRCUIT__TIMEOUT_LOST;
    if (n.hi == c->hi)
        return CIRCUIT__TIMEOUT_SATURATED; /* nothing to write: timed_out is at its maximum */
    return circuit__core_cas(b, c, n) ? CIRCUIT__TIMEOUT_COUNTED : CIRCUIT__TIMEOUT_LOST;
}
