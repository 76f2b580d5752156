/*
 * Counting: the result -> counts step (C1-C5, S2, P1, L6, L8). A counted
 * success or failure, or a probe timeout, becomes the new counts of the
 * current state, and the policy asked with them decides whether the state
 * changes (through transition.c). Below it: the per-CPU lines (percpu.c)
 * and the window's ring (window.c), the lower floor of this layer.
 *
 * LAYER INTERFACE (counting.h; what the rest of the core asks of counting):
 *   circuit__count          count one settled result of a ticket admitted in
 *                           generation `gen` (success, failure or ignored),
 *                           with its M1 total; false when late (T2)
 *   circuit__count_timeout  one attempt to count a probe timeout (P1) and
 *                           ask the probe policy (probes.c makes it once)
 *   circuit__counts         the counts a word stands for (policies, stats,
 *                           the final counts of a transition)
 *   circuit__closed_*       the closed exact points (below): isolate and
 *                           fold for breaker.c, counts for stats.c
 * Callers: breaker.c (count, counts, closed_isolate/fold/complete), probes.c
 * (count_timeout), stats.c (counts). What sits under the interface (the
 * per-CPU lines, the window, the word's closed layout) is this layer's own
 * and may change without the callers changing.
 */
#include <errno.h>

#include "counting.h"
#include "percpu.h"
#include "transition.h"
#include "window.h"

/* CIRCUIT_PLANT_ACQ_RESTART: a planted defect for the schedule checker to
 * find (test builds only): an acquire-only CAS restarting a sealed cell for
 * a new epoch (closed_success). */
#if defined(CIRCUIT_PLANT_ACQ_RESTART) && !defined(CIRCUIT_TESTING)
#error "CIRCUIT_PLANT_ACQ_RESTART is a defect planted for the test build only"
#endif

/*
 * CLOSED: counting while closed (docs/CONTRACT.md S2 and L6, L8,
 * C1, C2, C4, T2, M1): successes never share a cache line; a failure makes
 * the counts exact by reading the per-CPU cells, without sealing them.
 *
 * PARTS
 *   cells    one 8-byte cell per CPU (on that CPU's line, circuit__pcpu.cell):
 *                {sealed:1, epoch:31, count:32}
 *            A success adds one to the cell of the CPU it runs on, tagged
 *            with the word's epoch (a CAS on its own line: no line another
 *            CPU writes, L6). Counts only grow within an epoch.
 *   word     the 16-byte state word (internal.h), closed layout:
 *              lo  state | gen tag | epoch id | X | F | intent
 *              hi  k (exact points of this generation) | S or d
 *            An EXACT POINT is an update of the word that fixes the counts:
 *            a failure, a fold, a transition. k numbers them. The word keeps
 *            S_k, the sum of the epoch's cells the point was computed from
 *            (F = 0), or, when the point also started a new epoch (a fold,
 *            F = 1), the successes d it folded (saturated at 2^32 - 1).
 *            X says the point counted a failure.
 *   desc     two 16-byte descriptors D[k & 1]: the counts at exact point k
 *            (seq, full, failures in the window, last outcome, run, S_k),
 *            tagged with k. They hold what does not fit in the word.
 *   bitmap   the window's failures, one bit per ring index (a result's
 *            position modulo the window), in 16-byte words {tag, 64 bits}
 *            (b->cbits; the one word of a window <= 64 sits on the state
 *            word's line). The tag is the point k whose update U(k) last
 *            changed the word. U(k) clears the bits of the indices point k
 *            appended (they evict the results a window before them) and
 *            sets its failure's bit. A success writes none of it. (Half-open
 *            keeps window.c's ring of records, one result at a time.)
 *
 * THE COUNTS at any moment: D_k plus the successes counted on cells since
 * it, S - S_k, where S is the sum of the cells tagged with the word's epoch.
 * Each cell only grows, so a sum read cell by cell lies between the true
 * totals at the start and at the end of the read: it equals the true total
 * at some instant in between, which is where the reader's exact point is
 * linearised (a counter's value is all the window needs: successes are
 * interchangeable, only their number and the failures' positions matter).
 *
 * A FAILURE (closed, ticket of this generation), from word w at point k:
 *   1. C = D_k (read it, or derive it: below); make sure U(k) is in the
 *      bitmap (helping: only the newest point's can be missing);
 *   2. S = sum of the cells of w's epoch (O(CPUs) loads, no write);
 *   3. C' = C + (S - S_k) successes + this failure: the successes slide the
 *      window by n = S - S_k + 1 positions; the failures they evict are the
 *      bits set at the n ring indices the new positions take, counted a
 *      64-bit word at a time: at most window / 64 + 2 words, however many
 *      successes came before, and none once n >= window (all leave);
 *   4. ask trip(C') (S2: only after a failure, exact counts
 *      including it);
 *   5. no trip: ONE CAS of the word to {k + 1, X, S}; then write D_{k+1}
 *      and then U(k + 1) (after the CAS, in that order; anyone may).
 *      trip: the point must also close the epoch: see INTENTS.
 *   Shared-line RMWs: the word CAS, the descriptor CAS and U's CAS of each
 *   bitmap word whose bits it changes (its failure's word, and each word
 *   holding a failure its new results evict; with a window <= 64 all on the
 *   state word's line): a few per failure ON AVERAGE (L8), however many CPUs
 *   and successes there are. Each clearing CAS clears a bit an earlier
 *   failure set, so they are at most one per failure over time; but one
 *   failure after a window's worth of results makes one per word that held
 *   a failure, up to window / 64 + 2 (docs/CONTRACT.md L6 says so).
 *
 * DERIVING D_k (when its writer has not written it yet): D_k is a function
 * of D_{k-1}, the word at k and B(k - 1), the bitmap as U(k - 1) left it, so
 * every thread computes the same value. The word moved to k only after
 * D_{k-1} and U(k - 1) were complete (helping), and D_k is written before
 * U(k), so while a reader sees the slot without D_k the bitmap words it
 * reads are those of B(k - 1); a word tagged k means U(k) has begun, so D_k
 * is there: the reader takes it. A reader that derives re-reads the slot
 * and takes D_k from it if it appeared meanwhile.
 *
 * THE BITMAP'S UPDATES. U(k) is a function of D_{k-1} and the word at k
 * (what point k appended: d successes, then its failure if X), so anyone
 * computes the same. It is applied word by word with a CAS from a word
 * tagged before k to {k, bits with U(k)}: once per word whoever applies it,
 * and a stopped thread's CAS from an older value fails, because the tag is
 * part of the word and only grows (point numbers never restart). A word U(k)
 * does not touch keeps its older tag: it already holds B(k) for its indices.
 * Before an intent is made at k, U(k) is complete (the intent word no longer
 * says what k appended). The transition into closed sets every word to {k0,
 * 0} before its CAS (transition.c). A reader that writes nothing (stats)
 * applies U(k) to its own copy of each word still tagged before k.
 *
 * INTENTS (a trip, an isolate, a cell at its limit, S too large for the
 * word): the epoch must end, so that no success counts into it after the
 * counts are fixed (C4, T2). The caller CASes w to w + intent (nothing else
 * changes) and shuts the closed mirror at once (so that the calls after it
 * read the word and help), then anyone who sees the intent COMPLETES it,
 * the same way:
 *   0. shut the closed mirror for w's (gen, epoch) (word.h);
 *   a. seal every cell of the epoch (a cell of another epoch holds nothing
 *      of this one: it is sealed empty, only while the word still holds the
 *      intent: read X, check, CAS X);
 *   b. S = the sealed sum (exact: a sealed cell never changes again);
 *   c. C' = C + (S - S_k) successes (+ the failure of a FAILURE intent);
 *   d. FAILURE: trip(C')? ISOLATE: to isolated. Else the point stays closed;
 *   e. add S to the successes ledger once per epoch (M1);
 *   f. ONE CAS from the intent word to the new state (a transition with
 *      final counts C'), or to {k + 1, a fresh epoch, F, d = S - S_k},
 *      after which the winner sets the closed mirror for the fresh epoch.
 * Every completer computes the same decision (policies are pure, L4), so a
 * thread stopped anywhere stops nobody (L1); only the clock reading and the
 * call_ctx of the completer that wins may differ.
 *
 * A SUCCESS first reads the closed mirror (word.h), on a line no failure
 * writes: open for (its gen, e) and its CPU's cell {unsealed, e, n below
 * the limit}: CAS to n + 1, counted, without reading the word (the mirror
 * is shut before e ends, and the cell is sealed before e ends). Otherwise
 * it goes by the word's low half lo (gen, epoch e, intent), and sets the
 * mirror if lo is closed with no intent and the mirror did not say so:
 *   - wrong generation: late (T2);  intent set: complete it, start again;
 *   - its CPU's cell {unsealed, e, n}: CAS to n + 1: counted;
 *   - {sealed, e}: an intent is being completed: complete it, start again;
 *   - {sealed, other epoch}: that epoch ended (every epoch ends sealed), so
 *     start the cell for e: read X, check the word still holds lo, CAS X to
 *     {unsealed, e, 1} (lazy: a new epoch prepares no cell);
 *   - {unsealed, other epoch}: our word is stale: read it again.
 *   - {unsealed, e, at the limit}: make a FOLD intent and complete it.
 *
 * MEMORY ORDER. The word is read with acquire and CASed with seq_cst. A
 * failure's cell loads come after its acquire load of the word, so they see
 * at least what the previous exact point summed (its loads were before its
 * release CAS): S >= S_k. A success's cell CAS is relaxed: only the cell's
 * modification order matters (a seal is an RMW on the cell, so it reads
 * every count before it, and a count after it fails). Seals are acq_rel: a
 * success that sees a seal sees the intent word behind it. "Read X, check
 * the word, CAS X" reads X with acquire. Descriptor and bitmap CASes are
 * seq_cst (a reader that sees a word tagged k sees D_k, written before).
 * Bitmap words are read with acquire, and every reader checks the state
 * word after them.
 *
 * BOUNDS. Epoch ids are 27 bits (taken from next_id): a thread would be
 * confused only if stopped for 2^27 epochs; epochs end only at intents.
 * Cells are 32 bits and S_k at most 2^29 - 1 (CIRCUIT__D_S_MAX, what a
 * descriptor holds); an epoch ends (a FOLD) before either overflows: a
 * cell at its limit, or a failure that sums more than S_k's limit.
 * Descriptor tags are k in full (32 bits): a stopped thread's "read X,
 * check, CAS X" on a slot could find its X again only after 2^31 writes of
 * that slot (0.3's first tag, k's low 14 bits, came back after 8 191: a
 * reset or a failure stopped before its descriptor CAS across 8 191 closed
 * states overwrote the live D_k, and every later failure, stats read and
 * isolate spun, L1). The descriptor's seq is a ring index (modulo the
 * window), which frees the bits. Point numbers never restart:
 * a closed state starts at k0 = the last closed state's final k + 2, with
 * D_{k0} (zero counts) written before the state is entered (transition.c),
 * so a slot still holding an older state's descriptor never carries a tag
 * of this state's points, and a stopped thread's "read X, check, CAS X" on
 * a slot cannot find its X there again (a descriptor value does not name
 * its generation, and small counts repeat from state to state: 0.3's first
 * version emptied the slots instead, and a stopped emptier could erase a
 * new state's D_1 equal bit for bit to the old D_1 it had read). Bitmap
 * tags are k itself (32 bits, compared modulo 2^32): a word U(k) would not
 * change is not written, unless its tag is 2^20 points old, and every U(k)
 * touches the words of the indices it appends, so every word's tag stays
 * within 2^20 + window points of the newest point, far within 2^31.
 *
 * Checked by: the differential against the reference model (tests/model,
 * every count after every op, windows 1, 64 and 65536 at 0.1 %, 1 % and
 * 50 % failures), the stopped-thread tests at each park point
 * (tests/test_l6_fastpath.c, tests/stress/stress_park.c) and TSan stress.
 * tests/model/spin/counting.pml model-checks this protocol with SPIN (the
 * cells, the word, the descriptors, the ledger and the intents, every shared
 * access one step; the window abstracted to totals).
 */

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
        CIRCUIT__CB_FRAME(frame, b, "probe");
        d = b->policy.probe(b->policy.arg, c);
    }
    if (d != CIRCUIT_CLOSED && d != CIRCUIT_OPEN && d != CIRCUIT_HALF_OPEN)
        circuit__abort("probe policy returned an invalid state (%d); it must return "
                       "CIRCUIT_CLOSED, CIRCUIT_OPEN or CIRCUIT_HALF_OPEN",
                       (int)d);
    return d;
}

/* The trip policy's answer (S2). */
static bool ask_trip(circuit_breaker *b, const circuit_counts *cnt)
{
    CIRCUIT__CB_FRAME(frame, b, "trip");
    return b->policy.trip(b->policy.arg, cnt);
}

void circuit__counts(const circuit_breaker *b, circuit__u128 c, circuit_counts *out)
{
    unsigned code = circuit__code(c.lo);
    if (code == CIRCUIT__ST_OPEN || code == CIRCUIT__ST_ISOLATED) {
        *out = (circuit_counts){0, 0, 0, 0, 0};
        return;
    }
    if (code == CIRCUIT__ST_CLOSED) {
        /* the exact point's counts plus the cells since, read only */
        uint64_t cells = circuit__cells_read(b, circuit__cepoch(c.lo));
        (void)circuit__closed_counts_at(b, c, &cells, out);
        return;
    }
    int64_t n = (c.hi & CIRCUIT__HI_FULL) ? (int64_t)b->window : (int64_t)circuit__seq(c.lo);
    int64_t f = circuit__hi_fail(c.hi);
    int64_t run = circuit__hi_run(c.hi);
    bool last_fail = (c.hi & CIRCUIT__HI_LAST_FAIL) != 0;
    out->successes = n - f;
    out->failures = f;
    out->consecutive_successes = last_fail ? 0 : run;
    out->consecutive_failures = last_fail ? run : 0;
    out->timed_out = circuit__hi_to(c.hi);
}

/* Counts one probe's success or failure of generation `gen` through the
 * state word (half-open: few probes by design). Returns false when late. */
static bool count_slow(circuit_breaker *b, uint32_t gen, bool failure, void *call_ctx,
                       int64_t now)
{
    circuit__u128 c = circuit__ld128_acq(&b->core); /* acquire: table core */
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
        if (circuit__ld128_lo_acq(&b->core) != c.lo) {
            /* c went stale while we read its evicted record: the counts would
             * mix two states, and no policy may see that. */
            c = circuit__ld128_acq(&b->core);
            continue;
        }
        circuit_counts cnt;
        circuit__counts(b, n, &cnt);
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


bool circuit__count(circuit_breaker *b, uint32_t gen, bool probe, circuit_outcome o,
                    void *call_ctx, int64_t now, bool have_now)
{
    bool counted;
    if (o == CIRCUIT_IGNORED) {
        /* acquire: table core */
        counted = circuit__gen(circuit__ld128_lo_acq(&b->core)) == gen;
        circuit__total_add(b, counted ? CIRCUIT__T_IGNORED : CIRCUIT__T_LATE);
        return counted;
    }
    if (probe) {
        counted = count_slow(b, gen, o == CIRCUIT_FAILURE, call_ctx, now);
        circuit__total_add(b, !counted ? CIRCUIT__T_LATE
                              : o == CIRCUIT_FAILURE ? CIRCUIT__T_FAILURES
                                                     : CIRCUIT__T_SUCCESSES);
        return counted;
    }
    if (o == CIRCUIT_FAILURE) {
        /* an exact point: S2 (0.3) asks trip */
        counted = circuit__closed_failure(b, gen, &now, &have_now, call_ctx) == CIRCUIT__COUNTED;
        circuit__total_add(b, counted ? CIRCUIT__T_FAILURES : CIRCUIT__T_LATE);
        return counted;
    }
    /* a closed success (its cell count is in the successes ledger) */
    counted = circuit__closed_success(b, gen, call_ctx) == CIRCUIT__COUNTED;
    if (!counted)
        circuit__total_add(b, CIRCUIT__T_LATE);
    return counted;
}

circuit__timeout_result circuit__count_timeout(circuit_breaker *b, circuit__u128 *c, int64_t due,
                                               void *call_ctx)
{
    circuit__u128 n = {c->lo, circuit__hi_add_timeout(c->hi)};
    circuit_counts cnt;
    circuit__counts(b, n, &cnt);
    circuit_state d = ask_probe(b, &cnt);
    if (d != CIRCUIT_HALF_OPEN)
        return circuit__transition(b, c, d, CIRCUIT_CAUSE_POLICY, &cnt, due, call_ctx)
                   ? CIRCUIT__TIMEOUT_COUNTED
                   : CIRCUIT__TIMEOUT_LOST;
    if (n.hi == c->hi)
        return CIRCUIT__TIMEOUT_SATURATED; /* nothing to write: timed_out is at its maximum */
    return circuit__core_cas(b, c, n) ? CIRCUIT__TIMEOUT_COUNTED : CIRCUIT__TIMEOUT_LOST;
}

/* ---- cells ------------------------------------------------------------- */

/* counting.h has their layout (closed_success's fast path inlines); short
 * names here */
#define CELL_SEALED CIRCUIT__CELL_SEALED
#define CELL_COUNT_MAX CIRCUIT__CELL_COUNT_MAX
#define cell_make circuit__cell_make
#define cell_epoch circuit__cell_epoch
#define cell_count circuit__cell_count

/* ---- descriptors -------------------------------------------------------- */

/* counting.h packs them (circuit__desc_pack / _is / _unpack, word.h's
 * layout); short names here */
#define desc_pack circuit__desc_pack
#define desc_is circuit__desc_is
#define desc_unpack circuit__desc_unpack

/* ---- the closed window: a bitmap of its failures ---------------------------- */

/* The bits of ring indices [a, z) that fall in bitmap word j. */
static inline uint64_t span_mask(uint32_t j, uint64_t a, uint64_t z)
{
    uint64_t lo = (uint64_t)j * 64u, hi = lo + 64u;
    if (a < lo)
        a = lo;
    if (z > hi)
        z = hi;
    if (a >= z)
        return 0;
    uint64_t n = z - a;
    return (n == 64 ? ~UINT64_C(0) : (UINT64_C(1) << n) - 1u) << (a - lo);
}

/* The indices s .. s + m - 1 modulo the window as (at most) two spans
 * [from, to) that do not wrap; returns how many. */
static inline int spans(const circuit_breaker *b, uint32_t s, uint32_t m, uint64_t sp[2][2])
{
    uint64_t W = b->window, e = (uint64_t)s + m;
    int n = 0;
    if (m == 0)
        return 0;
    sp[n][0] = s;
    sp[n++][1] = e < W ? e : W;
    if (e > W) {
        sp[n][0] = 0;
        sp[n++][1] = e - W;
    }
    return n;
}

/* What update u does to word j: the bits it clears, the one it sets. */
static inline void upd_masks(const circuit_breaker *b, const circuit__upd *u, uint32_t j,
                             uint64_t *clr, uint64_t *set)
{
    uint64_t sp[2][2];
    int n = spans(b, u->s, u->m, sp);
    *clr = 0;
    for (int g = 0; g < n; g++)
        *clr |= span_mask(j, sp[g][0], sp[g][1]);
    int64_t base = (int64_t)j * 64;
    *set = u->set >= base && u->set < base + 64 ? UINT64_C(1) << (u->set - base) : 0;
}

/* The failures at ring indices s .. s + m - 1 (m < window) of the bitmap as
 * point k left it: B(k). A word tagged before k has not taken U(k) yet:
 * when `virt` (U(k)) is given it is applied to the copy read (a reader that
 * writes nothing); otherwise the caller has made sure U(k) is complete, so
 * such a word is one U(k) does not touch. False when a word is tagged after
 * k: a later point's update is in it, so the caller's word is stale. The
 * caller checks the state word after these reads. */
static bool bits_count(const circuit_breaker *b, uint32_t k, const circuit__upd *virt, uint32_t s,
                       uint32_t m, uint32_t *out)
{
    uint64_t sp[2][2];
    int n = spans(b, s, m, sp);
    uint32_t count = 0;
    for (int g = 0; g < n; g++) {
        for (uint32_t j = (uint32_t)(sp[g][0] / 64u); j <= (uint32_t)((sp[g][1] - 1u) / 64u); j++) {
            /* acquire: the caller validates the word after these reads */
            circuit__u128 x = circuit__ld128_acq(circuit__cbits(b, j));
#if defined(CIRCUIT_PLANT_STATS_MOVED_RING)
            /* PLANTED BUG (tests/sched/PLANTS.md): a reader (virt) counts the bits of a
             * window a later point moved, as the ring's readers did */
            if (!virt && circuit__tag_before(k, (uint32_t)x.lo))
                return false;
#else
            if (circuit__tag_before(k, (uint32_t)x.lo))
                return false; /* a point after k updated it */
#endif
            uint64_t bits = x.hi;
            if (virt && circuit__tag_before(x.lo, k)) {
                uint64_t clr, set;
                upd_masks(b, virt, j, &clr, &set);
                bits = (bits & ~clr) | set;
            }
            count += (uint32_t)__builtin_popcountll(bits & span_mask(j, sp[g][0], sp[g][1]));
            CIRCUIT__WINDOW_WORDS(1);
        }
    }
    *out = count;
    return true;
}

/* Applies U(k) to every word it touches that has not taken it yet (tag
 * before k): anyone may, any number of times; the tag makes it once. A
 * stopped thread's CAS from a word it read before U(k) (or a later update)
 * was applied fails: the tag is part of the word and only grows. */
static void upd_apply(circuit_breaker *b, uint32_t k, const circuit__upd *u)
{
    uint64_t sp[2][2];
    int n = spans(b, u->s, u->m, sp);
    for (int g = 0; g < n; g++) {
        for (uint32_t j = (uint32_t)(sp[g][0] / 64u); j <= (uint32_t)((sp[g][1] - 1u) / 64u); j++) {
            uint64_t clr, set;
            upd_masks(b, u, j, &clr, &set);
            /* acquire: the value a failed CAS hands back is used again */
            circuit__u128 x = circuit__ld128_acq(circuit__cbits(b, j));
            while (circuit__tag_before(x.lo, k)) {
                /* A word whose bits U(k) leaves as they are already holds
                 * B(k): no write (the tag may stay older; readers take a
                 * word tagged before k as one U(k) leaves alone), unless
                 * its tag is 2^20 points old: retagged then, so that tags
                 * stay within 2^31 of every k that compares them. */
                if (((x.hi & ~clr) | set) == x.hi && (uint32_t)(k - (uint32_t)x.lo) < (1u << 20))
                    break;
                CIRCUIT__SHARED_RMW();
                /* table: cbits (a reader that sees tag k sees D_k, written before) */
                if (circuit__cas128_sc(circuit__cbits(b, j), &x, (circuit__u128){k, (x.hi & ~clr) | set}))
                    break;
            }
        }
    }
}

/* ---- the window: results appended in bulk ------------------------------ */

/* Appends d successes, then a failure if `failure`, to c, the counts at
 * point k. The failures that leave are counted in the bitmap as point k
 * left it (bits_count; `virt` as there): O(window / 64) words at most,
 * however many successes came before, and none once everything leaves (d + 1
 * >= window). False when the bitmap has moved past k (the caller's word is
 * stale). */
bool circuit__cc_apply(const circuit_breaker *b, uint32_t k, const circuit__upd *virt,
                       const circuit__cc *c, uint64_t d, bool failure, circuit__cc *out)
{
    uint64_t W = b->window;
    uint64_t n = d + (failure ? 1u : 0u);
    *out = *c;
    if (n == 0)
        return true;
    uint64_t s = c->seq; /* ring index of the first new result (< W) */
    uint32_t fail = c->fail;
    if (n >= W) {
        fail = failure ? 1u : 0u; /* every result of the old window leaves */
    } else {
        /* W > 1 here. The new results at positions s .. s + n - 1 evict
         * the n positions a window before them, whose ring indices are the
         * same; an index no result of this
         * state has reached yet holds a 0 (the state started empty). */
        if (fail > 0) {
            uint32_t gone;
            if (!bits_count(b, k, virt, circuit__mod_window(b, (uint32_t)s), (uint32_t)n, &gone))
                return false;
            fail = gone < fail ? fail - gone : 0;
        }
        if (failure)
            fail++;
    }
    uint64_t run = c->run;
    bool last_fail = c->last_fail;
    if (d > 0) {
        run = (last_fail || run == 0) ? d : run + d;
        last_fail = false;
    }
    if (failure) {
        run = (!last_fail || run == 0) ? 1 : run + 1;
        last_fail = true;
    }
    if (run > (uint64_t)CIRCUIT_RUN_MAX)
        run = (uint64_t)CIRCUIT_RUN_MAX;
    out->fail = fail;
    out->run = (uint32_t)run;
    out->last_fail = last_fail;
    out->full = c->full || s + n >= W;
    out->seq = (uint32_t)((s + n % W) % W); /* a ring index: descriptors keep it so */
    return true;
}

void circuit__cc_counts(const circuit_breaker *b, const circuit__cc *c, circuit_counts *out)
{
    int64_t n = c->full ? (int64_t)b->window : (int64_t)c->seq;
    out->successes = n - (int64_t)c->fail;
    out->failures = c->fail;
    out->consecutive_successes = c->last_fail ? 0 : c->run;
    out->consecutive_failures = c->last_fail ? c->run : 0;
    out->timed_out = 0;
}

/* ---- reading the counts at an exact point ------------------------------- */

static inline bool word_at(uint64_t lo, uint64_t hi, uint32_t gen, uint32_t k)
{
    return circuit__code(lo) == CIRCUIT__ST_CLOSED && circuit__gen(lo) == gen &&
           circuit__ck(hi) == k;
}

/* The successes point k (word w, no intent) appended after D_{k-1} (prev):
 * the folded count of a fold (saturated), else S_k - S_{k-1}. False when w
 * cannot be the word after prev. */
static inline bool point_successes(circuit__u128 w, const circuit__cc *prev, uint64_t *d)
{
    if (w.lo & CIRCUIT__LO_F)
        *d = circuit__csd(w.hi);
    else if (circuit__csd(w.hi) >= prev->S)
        *d = circuit__csd(w.hi) - prev->S;
    else
        return false;
    return true;
}

/* D_k from D_{k-1} and the word w at k. False when D_{k-1} is not there
 * (w is stale). */
static bool desc_derive(const circuit_breaker *b, circuit__u128 w, circuit__cc *out)
{
    uint32_t k = circuit__ck(w.hi);
    circuit__cc prev;
    /* acquire: a value it held, checked against the word by the caller.
     * D_{k0} of the state's first point is there before the state is
     * (transition.c), so no point is special. */
    circuit__u128 p = circuit__ld128_acq(&b->desc[(k - 1) & 1u]);
    if (!desc_is(p, k - 1))
        return false;
    desc_unpack(p, &prev);
    uint64_t d;
    if (!point_successes(w, &prev, &d))
        return false; /* not the word D_{k-1} belongs to */
    /* B(k - 1): U(k - 1) was complete before the word left k - 1, and U(k)
     * comes after D_k: a word tagged k means D_k is there (the caller
     * looks) */
    if (!circuit__cc_apply(b, k - 1, NULL, &prev, d, (w.lo & CIRCUIT__LO_X) != 0, out))
        return false;
    out->S = (w.lo & CIRCUIT__LO_F) ? 0 : circuit__csd(w.hi);
    return true;
}

/* Writes D_k = *c into its slot, which held x when read (with acquire),
 * only while the word is still at w's point k: read X, check the word, CAS
 * X, so a stopped writer cannot put an old point's counts over a newer
 * one. If D_k appears meanwhile, *c becomes that one (the same value, as
 * derived). False when the word moved past k (whoever moved it wrote D_k). */
static bool desc_put(circuit_breaker *b, circuit__u128 w, circuit__u128 x, circuit__cc *c)
{
    uint32_t k = circuit__ck(w.hi);
    circuit__u128 *slot = &b->desc[k & 1u];
    circuit__u128 want = desc_pack(c, k);
    while (!desc_is(x, k)) {
        circuit__u128 now = circuit__ld128_acq(&b->core); /* acquire: table core */
        if (!word_at(now.lo, now.hi, circuit__gen(w.lo), k))
            return false;
        CIRCUIT__HOOK(CIRCUIT_TP_DESC_BEFORE_CAS);
        CIRCUIT__SHARED_RMW();
        if (circuit__cas128_sc(slot, &x, want)) /* table: desc */
            return true;
    }
    desc_unpack(x, c); /* written meanwhile: that one is right */
    return true;
}

bool circuit__closed_cc(circuit_breaker *b, circuit__u128 w, circuit__cc *out, bool write)
{
    uint32_t k = circuit__ck(w.hi);
    circuit__u128 *slot = &b->desc[k & 1u];
    /* acquire: what was written before it (the bitmap is read after it) */
    circuit__u128 x = circuit__ld128_acq(slot);
    if (desc_is(x, k)) {
        desc_unpack(x, out);
        return true;
    }
    if (!desc_derive(b, w, out)) {
        /* D_{k-1} gone (the word is stale), or U(k) begun: then D_k is
         * there (acquire: table cbits) */
        x = circuit__ld128_acq(slot);
        if (!desc_is(x, k))
            return false;
        desc_unpack(x, out);
        return true;
    }
    if (write)
        return desc_put(b, w, x, out);
    /* a reader that writes nothing: if D_k appeared meanwhile, the bitmap
     * may have moved under the derivation: take D_k */
    x = circuit__ld128_acq(slot);
    if (desc_is(x, k))
        desc_unpack(x, out);
    return true;
}

/* ---- the bitmap and the descriptor after a point ------------------------ */

/* U(k) of a point whose counts are ck, after it appended n results (its
 * failure last when `failure`): clear the slots of the min(n, window)
 * newest positions, set its failure's. Nothing for a window of 1. */
static void upd_make(const circuit_breaker *b, const circuit__cc *ck, uint64_t n, bool failure,
                     circuit__upd *u)
{
    *u = (circuit__upd){0, 0, -1};
    if (b->window == 1 || n == 0)
        return;
    uint32_t m = n >= b->window ? b->window : (uint32_t)n;
    u->s = circuit__mod_window(b, (uint32_t)circuit__seq_sub(b, ck->seq, m));
    u->m = m;
    if (failure)
        u->set = circuit__mod_window(b, (uint32_t)circuit__seq_sub(b, ck->seq, 1));
}

/* U(k) of the word w at point k (no intent), whose counts are ck: from
 * D_{k-1} and what the word says point k appended (d successes, then its
 * failure if X). The state's first point has none (the transition that
 * entered it emptied the bitmap). False when D_{k-1} is gone (w is stale). */
static bool upd_of(const circuit_breaker *b, circuit__u128 w, const circuit__cc *ck, circuit__upd *u)
{
    *u = (circuit__upd){0, 0, -1};
    if (b->window == 1 || (!ck->full && ck->seq == 0))
        return true; /* window 1 (the word's last outcome), or nothing appended */
    uint32_t k = circuit__ck(w.hi);
    /* acquire: checked against the word by the caller, like D_k */
    circuit__u128 p = circuit__ld128_acq(&b->desc[(k - 1) & 1u]);
    if (!desc_is(p, k - 1))
        return false;
    circuit__cc prev;
    desc_unpack(p, &prev);
    uint64_t d;
    if (!point_successes(w, &prev, &d))
        return false;
    bool x = (w.lo & CIRCUIT__LO_X) != 0;
    upd_make(b, ck, d + (x ? 1u : 0u), x, u);
    return true;
}

/* Makes sure D_k and U(k) are in place before the word leaves point k (the
 * helping invariant; an intent word's were before the intent was made).
 * False when w is stale. */
bool circuit__closed_help(circuit_breaker *b, circuit__u128 w, circuit__cc *c)
{
    if (!circuit__closed_cc(b, w, c, true))
        return false;
    if (circuit__cintent(w.lo) != CIRCUIT__INTENT_NONE)
        return true;
    circuit__upd u;
    if (!upd_of(b, w, c, &u))
        return false;
    if (u.m == 0)
        return true;
    CIRCUIT__HOOK(CIRCUIT_TP_RING_BEFORE_WRITE);
    upd_apply(b, circuit__ck(w.hi), &u);
    return true;
}

/* After the CAS that made point k (word w, counts c, n results appended,
 * the last a failure when `failure`; all known to its maker): D_k (desc_put,
 * as a deriver writes it), then U(k) from the same numbers upd_of derives
 * it from. Anyone else who needs them goes through closed_help. */
static void after_point(circuit_breaker *b, circuit__u128 w, circuit__cc *c, uint64_t n,
                        bool failure)
{
    /* acquire: before the check in desc_put */
    if (!desc_put(b, w, circuit__ld128_acq(&b->desc[circuit__ck(w.hi) & 1u]), c))
        return; /* moved on: whoever moved it wrote D_k and U(k) first */
    circuit__upd u;
    upd_make(b, c, n, failure, &u); /* what upd_of would derive, known here */
    if (u.m == 0)
        return;
    CIRCUIT__HOOK(CIRCUIT_TP_RING_BEFORE_WRITE);
    upd_apply(b, circuit__ck(w.hi), &u);
}

/* ---- cells: sum and seal ----------------------------------------------- */

/* The sum of the cells of `epoch`; *sealed set when one is sealed. */
static uint64_t cells_sum(const circuit_breaker *b, uint32_t epoch, bool *sealed, bool *at_limit)
{
    uint64_t sum = 0;
    *sealed = false;
    *at_limit = false;
    for (uint32_t i = 0; i < b->ncpu; i++) {
        /* relaxed: after the word's acquire load (program order); each a
         * value the cell held, and cells only grow within an epoch */
        uint64_t v = circuit__ld_rlx(&circuit__unit(b, i)->cell);
        if (cell_epoch(v) != epoch)
            continue;
        sum += cell_count(v);
        if (v & CELL_SEALED)
            *sealed = true;
        if (cell_count(v) == CELL_COUNT_MAX)
            *at_limit = true;
        if (i == 0)
            CIRCUIT__HOOK(CIRCUIT_TP_FOLD_MID_SUM);
    }
    return sum;
}

/* Seals every cell for the epoch of intent word wi and returns the sum;
 * false when the word left wi (someone completed it). */
static bool cells_seal(circuit_breaker *b, circuit__u128 wi, uint64_t *sum)
{
    uint32_t epoch = circuit__cepoch(wi.lo);
    uint64_t s = 0;
    for (uint32_t i = 0; i < b->ncpu; i++) {
        uint64_t *cell = &circuit__unit(b, i)->cell;
        uint64_t v = circuit__ld_acq(cell); /* acquire: checked below (foreign) */
        for (;;) {
            if (cell_epoch(v) == epoch) {
                /* acq_rel: counts before it are in v; a success that sees
                 * the seal sees the intent word */
                if (v & CELL_SEALED)
                    break;
                CIRCUIT__SHARED_RMW();
                if (circuit__cas_acq_rel(cell, &v, v | CELL_SEALED)) /* table: pcpu[].cell */
                    break;
                continue;
            }
            /* another epoch's cell holds nothing of this one: seal it empty,
             * only while the word still holds the intent (read X, check,
             * CAS X) */
            if (circuit__ld128_lo_acq(&b->core) != wi.lo)
                return false;
            CIRCUIT__SHARED_RMW();
            if (circuit__cas_acq_rel(cell, &v, cell_make(epoch, 0) | CELL_SEALED))
                break;
        }
    }
    CIRCUIT__HOOK(CIRCUIT_TP_FOLD_SEALED);
    for (uint32_t i = 0; i < b->ncpu; i++) {
        /* relaxed: after our own seal of it (coherence) */
        uint64_t v = circuit__ld_rlx(&circuit__unit(b, i)->cell);
        if (cell_epoch(v) != epoch || !(v & CELL_SEALED))
            return false; /* started for a later epoch: completed by another */
        s += cell_count(v);
    }
    *sum = s;
    return true;
}

/* Adds an epoch's sealed sum to the successes total once (M1). */
static void ledger_add(circuit_breaker *b, circuit__u128 wi, uint64_t sum)
{
    uint64_t key = circuit__ledger_key(wi.lo);
    circuit__u128 f = circuit__ld128_acq(&b->folded); /* table: folded */
    for (;;) {
        if (f.lo == key)
            return; /* added by another completer */
        /* only while the word still holds the intent (acquire: ordered
         * before the CAS), so a stopped completer adds nothing twice */
        if (circuit__ld128_lo_acq(&b->core) != wi.lo)
            return;
        circuit__u128 n = {key, f.hi + sum};
        CIRCUIT__SHARED_RMW();
        if (circuit__cas128_sc(&b->folded, &f, n)) /* table: folded */
            return;
    }
}


/* ---- intents -------------------------------------------------------------- */

/* Completes the intent of word wi. `now`/`call_ctx`: for a transition. */
/* Who made an intent (O6): its maker's call_ctx, keyed by the intent it
 * was made for, {gen tag, kind, k}, written before the intent's CAS, which
 * publishes it. Whoever completes the intent (L1: any thread) gives
 * observe that call_ctx, not its own. One record per kind that makes a
 * transition (a failure's trip, an operator's isolate; a fold makes none
 * and writes none), so a maker of one kind never overwrites the other's:
 * an isolate racing a request's trip at the same point keeps the
 * operator's call_ctx. A maker never replaces a record of a later point
 * (it read a word that moved on: its intent CAS will fail). Makers of the
 * same kind that lose the race for the same point may still write after
 * the winner (two failing calls at one point: the call_ctx given is then
 * the loser's, another failing call of the same breaker); a completer that
 * finds another key gives its own. */
static inline circuit__u128 *intent_ctx_of(const circuit_breaker *b, circuit__u128 wi)
{
#if defined(CIRCUIT_PLANT_INTENT_CALL_CTX)
    /* PLANTED BUG (tests/sched/PLANTS.md): one record
     * shared by trip and isolate makers (O6) */
    (void)wi;
    return (circuit__u128 *)(uintptr_t)&b->intent_ctx[0];
#endif
    /* the records are shared and atomic: a const breaker still names them */
    return (circuit__u128 *)(uintptr_t)&b->intent_ctx[circuit__cintent(wi.lo) ==
                                                       CIRCUIT__INTENT_ISOLATE];
}

static inline uint64_t intent_key(circuit__u128 wi)
{
    return ((uint64_t)circuit__gen(wi.lo) << 34) | ((uint64_t)circuit__cintent(wi.lo) << 32) |
           circuit__ck(wi.hi);
}

static void intent_ctx_put(circuit_breaker *b, circuit__u128 wi, void *call_ctx)
{
    if (circuit__cintent(wi.lo) == CIRCUIT__INTENT_FOLD)
        return; /* a fold makes no transition: nothing to observe */
    circuit__u128 *rec = intent_ctx_of(b, wi);
    /* the key in the low half: a 16-byte read checks the low half twice,
     * and keys only grow, where call_ctx values repeat (atomics.h) */
    circuit__u128 want = {intent_key(wi), (uint64_t)(uintptr_t)call_ctx};
    circuit__u128 x = circuit__ld128_acq(rec); /* acquire: table intent_ctx */
    while (x.lo != want.lo || x.hi != want.hi) {
        /* A record of a later point (k only grows, never restarts) is a
         * newer maker's: ours was computed from a word that has moved on,
         * its intent CAS will fail, and it must not hide the newer one */
#if !defined(CIRCUIT_PLANT_INTENT_STALE_MAKER)
        if (x.lo != 0 && (int32_t)((uint32_t)x.lo - circuit__ck(wi.hi)) > 0)
            return;
#else
        /* PLANTED BUG (tests/sched/PLANTS.md): a stale
         * maker replaces a later point's record (O6) */
#endif
        /* sc: an older or same-point record may be replaced; the intent
         * CAS after it publishes it */
        if (circuit__cas128_sc(rec, &x, want))
            return;
    }
}

static void *intent_ctx_get(const circuit_breaker *b, circuit__u128 wi, void *own)
{
    /* acquire: after the caller's acquire of the intent word (table intent_ctx) */
    circuit__u128 x = circuit__ld128_acq(intent_ctx_of(b, wi));
    return x.lo == intent_key(wi) ? (void *)(uintptr_t)x.hi : own;
}

void circuit__complete(circuit_breaker *b, circuit__u128 wi, int64_t *now, bool *have_now,
                       void *call_ctx)
{
    unsigned kind = circuit__cintent(wi.lo);
    if (circuit__code(wi.lo) != CIRCUIT__ST_CLOSED || kind == CIRCUIT__INTENT_NONE)
        return; /* no intent in it (the word moved on before it was read) */
    call_ctx = intent_ctx_get(b, wi, call_ctx); /* O6: the maker's */
    circuit__cc c;
    if (!circuit__closed_help(b, wi, &c))
        return;
    /* the closed mirror leaves (g, e) before the seals do (word.h) */
    circuit__mirror_shut(b, wi);
    uint64_t S;
    if (!cells_seal(b, wi, &S))
        return;
    if (S < c.S)
        return; /* cannot be for the word it was read from: moved on */
    uint64_t d = S - c.S;
    circuit__cc n;
    bool failure = kind == CIRCUIT__INTENT_FAILURE;
    /* B(k): U(k) was complete before the intent was made */
    if (!circuit__cc_apply(b, circuit__ck(wi.hi), NULL, &c, d, failure, &n))
        return; /* the bitmap moved past k: so did the word */
    circuit_counts cnt;
    circuit__cc_counts(b, &n, &cnt);
    circuit_state to = CIRCUIT_CLOSED;
    if (kind == CIRCUIT__INTENT_ISOLATE)
        to = CIRCUIT_ISOLATED;
    else if (failure && (wi.lo & CIRCUIT__LO_ASKED) && S == circuit__csd(wi.hi))
        to = CIRCUIT_OPEN; /* the same counts its maker's trip said true for (L4) */
    else if (failure && ask_trip(b, &cnt))
        to = CIRCUIT_OPEN;
    ledger_add(b, wi, S);
    circuit__u128 w = wi;
    if (to != CIRCUIT_CLOSED) {
        /* read here, not earlier: the trip is made now (S4), whatever the
         * caller read before it lost CASes to other points */
#if defined(CIRCUIT_PLANT_PROBE_STALE_CLOCK)
        /* PLANTED BUG (tests/sched/PLANTS.md): a lost
         * counting CAS keeps its clock read, and a trip uses the caller's
         * (S4: a reopen or trip dated at a stale reading) */
        if (!*have_now)
            *now = circuit__now();
#else
        *now = circuit__now();
#endif
        *have_now = true;
        CIRCUIT__HOOK(CIRCUIT_TP_DONE_BEFORE_CAS);
        circuit__transition(b, &w, to,
                            to == CIRCUIT_ISOLATED ? CIRCUIT_CAUSE_OPERATOR : CIRCUIT_CAUSE_POLICY,
                            &cnt, *now, call_ctx);
        return;
    }
    uint32_t k1 = circuit__ck(wi.hi) + 1;
    uint64_t dsat = d > CIRCUIT__SD_MAX ? CIRCUIT__SD_MAX : d;
    circuit__u128 nw = {circuit__mkclo(circuit__gen(wi.lo), circuit__fresh_epoch(b), failure, true, 0),
                        circuit__mkchi(k1, dsat)};
    CIRCUIT__HOOK(CIRCUIT_TP_DONE_BEFORE_CAS);
    if (circuit__core_cas(b, &w, nw)) {
        n.S = 0;
        after_point(b, nw, &n, d + (failure ? 1u : 0u), failure);
        circuit__mirror_set(b); /* open for the new epoch */
    }
}

/* CASes w to w + intent `kind` (or finds an intent already there) and
 * completes it. Returns false when w moved before the intent was made.
 * asked_S: a failure whose trip said true with the cells' sum *asked_S.
 * D_k must be in place (circuit__closed_help) before: the intent word's
 * upper half no longer holds S_k. */
static bool intend(circuit_breaker *b, circuit__u128 *w, unsigned kind, const uint64_t *asked_S,
                   int64_t *now, bool *have_now, void *call_ctx)
{
    if (circuit__cintent(w->lo) == CIRCUIT__INTENT_NONE) {
        circuit__u128 wi = {w->lo | ((uint64_t)kind << CIRCUIT__LO_INTENT_SHIFT), w->hi};
        if (asked_S) {
            wi.lo |= CIRCUIT__LO_ASKED;
            wi.hi = circuit__mkchi(circuit__ck(w->hi), *asked_S);
        }
        intent_ctx_put(b, wi, call_ctx);
        CIRCUIT__HOOK(CIRCUIT_TP_INTENT_BEFORE_CAS);
        if (!circuit__core_cas(b, w, wi))
            return false;
        *w = wi;
        /* at once (complete shuts it too): the calls that follow read the
         * word, see the intent and help complete it (L1) */
        circuit__mirror_shut(b, wi);
        CIRCUIT__HOOK(CIRCUIT_TP_INTENT_MADE);
    }
    circuit__complete(b, *w, now, have_now, call_ctx);
    return true;
}

/* ---- results -------------------------------------------------------------- */

circuit__closed_result circuit__closed_success_slow(circuit_breaker *b, uint32_t gen,
                                                   void *call_ctx, uint64_t m, uint64_t *cell)
{
    int64_t now = 0;
    bool have_now = false;
    /* The mirror shut, or the cell sealed, of another epoch or at its
     * limit: the state word decides (below). acquire: as above */
    uint64_t lo = circuit__ld128_lo_acq(&b->core);
    if (circuit__code(lo) == CIRCUIT__ST_CLOSED && circuit__cintent(lo) == CIRCUIT__INTENT_NONE &&
        circuit__mirror_of(lo) != m)
        circuit__mirror_set(b);
    for (;;) {
        if (circuit__gen(lo) != gen || circuit__code(lo) != CIRCUIT__ST_CLOSED)
            return CIRCUIT__LATE; /* T2 (a closed ticket's generation was closed) */
        if (circuit__cintent(lo) != CIRCUIT__INTENT_NONE) {
            /* acquire: table core */
            circuit__complete(b, circuit__ld128_acq(&b->core), &now, &have_now, call_ctx);
            lo = circuit__ld128_lo_acq(&b->core); /* acquire: table core */
            continue;
        }
        uint32_t epoch = circuit__cepoch(lo);
        /* relaxed: the CAS below decides */
        uint64_t v = circuit__ld_rlx(cell);
        CIRCUIT__HOOK(CIRCUIT_TP_FAST_BEFORE_COUNT);
        while (cell_epoch(v) == epoch && !(v & CELL_SEALED) && cell_count(v) < CELL_COUNT_MAX) {
            /* relaxed: a seal is an RMW on this cell, so it reads this
             * count or makes this CAS fail */
            if (circuit__cas_rlx(cell, &v, v + 1))
                return CIRCUIT__COUNTED; /* L6: on this CPU's line */
        }
        /* acquire: if sealed, the intent word behind the seal is seen below */
        v = circuit__ld_acq(cell);
        if (cell_epoch(v) == epoch && !(v & CELL_SEALED)) {
            if (cell_count(v) < CELL_COUNT_MAX)
                continue; /* changed under us: count again */
            /* at its limit: the epoch ends by a FOLD */
            circuit__u128 w = circuit__ld128_acq(&b->core);
            circuit__cc c;
            if (w.lo == lo && circuit__closed_help(b, w, &c))
                intend(b, &w, CIRCUIT__INTENT_FOLD, NULL, &now, &have_now, call_ctx);
        } else if (cell_epoch(v) != epoch && (v & CELL_SEALED)) {
            /* an ended epoch's cell (every epoch ends with its cells sealed):
             * start it for ours. Read X (above), check the word, CAS X. */
            CIRCUIT__HOOK(CIRCUIT_TP_CELL_BEFORE_START);
            /* acq_rel: acquire, after the cell's ended epoch; release, so a
             * get_stats that reads this start (acquire) then reads the word
             * out of the ended epoch (stats.c, "still E") */
            if (circuit__ld128_lo_acq(&b->core) == lo &&
#if defined(CIRCUIT_PLANT_ACQ_RESTART)
                circuit__cas_acq(cell, &v, cell_make(epoch, 1)))
#else
                circuit__cas_acq_rel(cell, &v, cell_make(epoch, 1)))
#endif
                return CIRCUIT__COUNTED;
        }
        /* Sealed for our epoch (an intent is being completed: it shows in
         * the word), a later epoch's cell, or the word moved: read it again.
         * acquire: pairs with the intent CAS behind a seal. */
        lo = circuit__ld128_lo_acq(&b->core);
    }
}

bool circuit__halfopen_window_start(circuit_breaker *b, uint32_t gen, uint64_t lo)
{
    return circuit__ring_start(b, gen, lo);
}

#ifdef CIRCUIT_TESTING
/* testing.h: n successes at once on the calling CPU's cell (S_k's limit) */
int circuit_test_add_successes(circuit_breaker *b, uint32_t n)
{
    circuit__check_breaker(b, "circuit_test_add_successes");
    uint64_t lo = circuit__ld128_lo_acq(&b->core); /* acquire: table core */
    if (circuit__code(lo) != CIRCUIT__ST_CLOSED || circuit__cintent(lo) != CIRCUIT__INTENT_NONE)
        return EINVAL;
    uint64_t *cell = &circuit__my_cpu(b)->cell;
    uint64_t v = circuit__ld_acq(cell); /* acquire: the CAS below decides */
    if (cell_epoch(v) != circuit__cepoch(lo) || (v & CELL_SEALED) ||
        cell_count(v) + n >= CELL_COUNT_MAX)
        return EAGAIN;
    /* relaxed: as a success's count (single-threaded use) */
    return circuit__cas_rlx(cell, &v, v + n) ? 0 : EAGAIN;
}
#endif

circuit__closed_result circuit__closed_failure(circuit_breaker *b, uint32_t gen, int64_t *now,
                                               bool *have_now, void *call_ctx)
{
    /* the exact point CASes the state word's line: fetch it for writing
     * once, not shared and then again for the CAS */
    circuit__prefetch_w(&b->core);
    circuit__u128 w = circuit__ld128_acq(&b->core); /* acquire: table core */
    for (;;) {
        if (circuit__gen(w.lo) != gen || circuit__code(w.lo) != CIRCUIT__ST_CLOSED)
            return CIRCUIT__LATE;
        if (circuit__cintent(w.lo) != CIRCUIT__INTENT_NONE) {
            circuit__complete(b, w, now, have_now, call_ctx);
            w = circuit__ld128_acq(&b->core); /* acquire: table core */
            continue;
        }
        circuit__cc c;
        if (!circuit__closed_help(b, w, &c)) {
            w = circuit__ld128_acq(&b->core); /* acquire: table core */
            continue;
        }
        bool sealed, at_limit;
        uint64_t S = cells_sum(b, circuit__cepoch(w.lo), &sealed, &at_limit);
        bool need_intent = sealed || at_limit || S > CIRCUIT__D_S_MAX;
        bool asked = false;
        circuit__cc n;
        if (!need_intent) {
            if (S < c.S) { /* not the word c belongs to */
                w = circuit__ld128_acq(&b->core); /* acquire: table core */
                continue;
            }
            /* B(k): closed_help made U(k) complete */
            bool fresh = circuit__cc_apply(b, circuit__ck(w.hi), NULL, &c, S - c.S, true, &n);
            /* acquire: after the bitmap and cell reads: c, S and the
             * bitmap belong to w */
            circuit__u128 again = circuit__ld128_acq(&b->core);
            if (!fresh || again.lo != w.lo || again.hi != w.hi) {
                w = again;
                continue;
            }
            circuit_counts cnt;
            circuit__cc_counts(b, &n, &cnt);
            /* S2 (0.3): asked after each failure, with exact counts */
            if (!ask_trip(b, &cnt)) {
                circuit__u128 nw = {circuit__mkclo(gen, circuit__cepoch(w.lo), true, false, 0),
                                    circuit__mkchi(circuit__ck(w.hi) + 1, S)};
                CIRCUIT__HOOK(CIRCUIT_TP_DONE_BEFORE_CAS);
                if (circuit__core_cas(b, &w, nw)) {
                    n.S = S;
                    after_point(b, nw, &n, S - c.S + 1u, true);
                    return CIRCUIT__COUNTED;
                }
                continue;
            }
            asked = true;
        }
        /* the point must end the epoch: trip, or a sealed / full cell */
        circuit__u128 wi = w;
        if (!intend(b, &wi, CIRCUIT__INTENT_FAILURE, asked ? &S : NULL, now, have_now, call_ctx)) {
            w = wi;
            continue;
        }
        /* Completed (by us or another completer): the failure was counted
         * in the point that left the intent word, or it tripped. */
        return CIRCUIT__COUNTED;
    }
}

/* Ends closed generation of w (isolate): the caller's intent. Returns
 * false when w moved first. */
bool circuit__closed_isolate(circuit_breaker *b, circuit__u128 *w, int64_t now, void *call_ctx)
{
    bool have_now = true;
    circuit__cc c;
    if (!circuit__closed_help(b, *w, &c)) {
        *w = circuit__ld128_acq(&b->core); /* acquire: table core */
        return false;
    }
    return intend(b, w, CIRCUIT__INTENT_ISOLATE, NULL, &now, &have_now, call_ctx);
}

bool circuit__closed_fold(circuit_breaker *b, circuit__u128 *w)
{
    int64_t now = 0;
    bool have_now = false;
    circuit__cc c;
    if (!circuit__closed_help(b, *w, &c)) {
        *w = circuit__ld128_acq(&b->core); /* acquire: table core */
        return false;
    }
    return intend(b, w, CIRCUIT__INTENT_FOLD, NULL, &now, &have_now, NULL);
}

/* ---- reading (stats, tests) ----------------------------------------------- */

uint64_t circuit__cells_read(const circuit_breaker *b, uint32_t epoch)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < b->ncpu; i++) {
        /* acquire: each a value it held, all read before the caller reads
         * the word again (stats' order) */
        uint64_t v = circuit__ld_acq(&circuit__unit(b, i)->cell);
        if (cell_epoch(v) == epoch)
            sum += cell_count(v);
    }
    return sum;
}

/* A reader's counts at the word w, plus `cells` successes counted since its
 * exact point. Deriving them reads the bitmap (evictions), which the
 * exact points AFTER w's rewrite: a reader whose word was overtaken while
 * it read could miss an eviction and report more failures than the window
 * holds (failures 17 in a window of 16). So the reads are validated: they are a value the window
 * held when the word is still at w's point (same generation and point k)
 * after them (acquire, in this order; a point's bitmap writes come after its
 * word CAS). Otherwise the newer word is taken, without the cells (they
 * were read for the older point), for as long as the word moves: only an
 * exact point (a failure, a fold, an intent) moves it, never a success, so
 * each new try follows another thread's progress (lock-free; giving up
 * after a few tries would report counts no moment held, M1). When the
 * newer word is no longer
 * closed (an isolate or a trip ended the state while the reader read), the
 * reads are NOT valid either: the counts reported are that word's own, and
 * so is the word returned, whose state and generation the caller reports
 * (else a closed snapshot could mix points: successes 0, failures 2, a run
 * of 1 success). Returns the word the counts belong to. */

circuit__u128 circuit__closed_counts_at(const circuit_breaker *b, circuit__u128 w,
                                        const uint64_t *cells, circuit_counts *out)
{
    circuit__cc c, n;
    for (;;) {
        CIRCUIT__HOOK(CIRCUIT_TP_STATS_COUNTS_TRY);
        /* read only (write = false): the cast drops nothing written */
        if (!circuit__closed_cc((circuit_breaker *)(uintptr_t)b, w, &c, false)) {
            /* the word moved past the descriptors it names: its point was
             * made during the call; take the newest word */
            circuit__u128 now = circuit__ld128_acq(&b->core); /* acquire: then D */
            if (circuit__code(now.lo) != CIRCUIT__ST_CLOSED) {
#if defined(CIRCUIT_PLANT_STATS_MOVED_RING)
                /* PLANTED BUG (tests/sched/PLANTS.md):
                 * zero counts reported with the old closed word (M1) */
                *out = (circuit_counts){0, 0, 0, 0, 0};
                return w;
#endif
                circuit__counts(b, now, out); /* not closed: no recursion */
                return now;
            }
            w = now;
            cells = NULL;
            continue;
        }
        uint64_t d = cells && *cells > c.S ? *cells - c.S : 0;
        n = c; /* defined even when the reads below fail every try */
        /* B(k): U(k) may not be complete yet (its maker is between the
         * word's CAS and the update), and a reader writes nothing: it
         * applies U(k) to its own copy of each word not tagged k yet. An
         * intent word's U(k) was complete before the intent. */
        circuit__upd u, *virt = NULL;
        bool fresh = true;
        if (circuit__cintent(w.lo) == CIRCUIT__INTENT_NONE) {
#if defined(CIRCUIT_PLANT_STATS_MOVED_RING)
            (void)upd_of(b, w, &c, &u); /* PLANTED: D_{k-1} gone, read on */
#else
            fresh = upd_of(b, w, &c, &u);
#endif
            virt = &u;
        }
        fresh = fresh && circuit__cc_apply(b, circuit__ck(w.hi), virt, &c, d, false, &n);
        /* acquire: after the bitmap and descriptor reads above (table core) */
        circuit__u128 now = circuit__ld128_acq(&b->core);
        if (fresh && word_at(now.lo, now.hi, circuit__gen(w.lo), circuit__ck(w.hi)))
            break;
#if defined(CIRCUIT_PLANT_STATS_MOVED_RING)
        /* PLANTED BUG (tests/sched/PLANTS.md): a word no
         * longer closed ends the validation, and the derivation from a
         * window that moved is reported with the old closed word (M1) */
        if (circuit__code(now.lo) != CIRCUIT__ST_CLOSED)
            break;
#else
        if (circuit__code(now.lo) != CIRCUIT__ST_CLOSED) {
            circuit__counts(b, now, out); /* not closed: no recursion */
            return now;
        }
#endif
        w = now;
        cells = NULL;
    }
    circuit__cc_counts(b, &n, out);
    return w;
}
