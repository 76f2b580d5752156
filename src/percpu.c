/*
 * Per-CPU counters: the healthy fast path (SPEC L6) and the totals of
 * circuit_get_stats (M1).
 *
 * ONE CACHE LINE PER CPU (circuit__pcpu, 64 bytes): a thread uses the line
 * of the CPU it runs on (sched_getcpu(), which glibc answers from rseq
 * without a system call), so two CPUs never write one line. A thread may be
 * migrated between reading its CPU number and writing, so two threads can
 * meet on one line: every write is an atomic read-modify-write, which keeps
 * the counts exact, and then costs what an uncontended locked instruction
 * costs. Totals are relaxed: they order nothing, and a reader sums them.
 *
 * THE FAST MODE. While closed with no failure in the window, a success is
 * counted in the `fast` record of its CPU's line instead of the state word:
 *     fast = {sealed:1, id:31, count:32}
 * The state word says it is in this mode (lo bit FAST) and names the
 * interval (`id`, 31 bits, handed out by next_id: unique until it wraps);
 * its hi keeps the counts as of the interval's start. Successes only add
 * to seq and run (no failure can be in the window), so the counts are exact
 * once the records are added in. Protocol:
 *
 *   count   (circuit_done, a success; word read: fast, id X, own generation)
 *           v = the record; it must be {unsealed, X}; CAS it to count + 1.
 *           Anything else (sealed, another id, count at its limit): take
 *           the slow path, which folds first.
 *   fold    (a failure; a success that found its record sealed; isolate;
 *           reset; a record at its limit) any thread, given the fast word c:
 *           1. seal: every record {unsealed, X} is CASed to {sealed, X}
 *              (one atomic operation each; a sealed record never changes
 *              again while the word is fast X, so a count that lost to the
 *              seal goes to the slow path). A record with another id (the
 *              losing entry of two that raced prepared it last) holds no
 *              count and is sealed empty as {sealed, X, 0};
 *           2. sum the counts of the records {sealed, X} (a record with
 *              another id means the fold is over: someone else finished);
 *           3. add the sum to the successes total once per interval (the
 *              `folded` ledger, 16-byte CAS keyed by X);
 *           4. ONE CAS of the state word from c to the slow word with
 *              seq += sum, run += sum.
 *           Any thread that finds the fold begun repeats it: the seals and
 *           the sum are idempotent and only the CAS of step 4 can win, so a
 *           thread stopped anywhere in a fold stops nobody (L1). A success
 *           that races a fold either CASed its record before the seal (it is
 *           in the sum) or failed against the seal (it is counted after, on
 *           the slow path): never both, never neither.
 *   enter   (the slow-path success that leaves no failure in the window, a
 *           close, a reset; from the slow word w) X = a fresh id; every
 *           record is CASed to {unsealed, X, 0}, each CAS only after checking
 *           that the word still holds w's low half (while it does, the word
 *           is not fast, so no record holds uncounted successes: a stopped
 *           thread cannot wipe a live count); then ONE CAS of the word from
 *           w to fast X. If that CAS loses, the prepared records are simply
 *           never used (no word names X).
 *
 * MEMORY ORDER: counting, sealing and summing touch one record each with
 * atomic RMWs or loads on that record (coherence orders them); the records
 * need no order with each other. The state word is read with ACQUIRE and
 * CASed with (at least) release, so whoever reads "fast X" sees every record
 * already prepared for X (a fold that saw a record from before the
 * preparation would think the fold was over), and a preparer's record CAS
 * cannot be made before its check of the word. A record written after a
 * check of the word (an entry's reset, a fold's seal of a foreign record)
 * is a RELEASE and every record load an ACQUIRE, so a thread that reads
 * such a record also sees the word its writer checked: this is what keeps
 * a stale entry's check from passing on an old slow word (the orders
 * tests/model/spin/README.md asks for under "Fold").
 *
 * Bounded ids: an id is 31 bits, so a thread stopped between reading the
 * word and its record CAS for 2^31 later fast intervals could count into
 * the interval that reuses its id; each interval needs a failure to end,
 * so this is the same class of bound as the 30-bit generation tag.
 *
 * The SPIN model in tests/model/spin/ checks this protocol exhaustively for
 * small bounds.
 */
#include "percpu.h"

#define FAST_SEALED (UINT64_C(1) << 63)
#define FAST_COUNT_MAX UINT64_C(0xffffffff)

static inline uint64_t fast_make(uint32_t id, uint64_t count)
{
    return ((uint64_t)(id & CIRCUIT__F31_MASK) << 32) | count;
}
static inline uint32_t fast_id(uint64_t r) { return (uint32_t)((r >> 32) & CIRCUIT__F31_MASK); }
static inline uint64_t fast_count(uint64_t r) { return r & FAST_COUNT_MAX; }

void circuit__pcpu_init(circuit_breaker *b)
{
    /* Before the breaker is shared: the records of the first interval
     * (id 1), and the word that names it: closed, generation 0, fast. */
    for (uint32_t i = 0; i < b->ncpu; i++)
        b->pcpu[i].fast = fast_make(1, 0);
    b->next_id = 1;
    circuit__st128_init(&b->core, (circuit__u128){circuit__mklo(CIRCUIT__ST_CLOSED, 0, 1) |
                                                      CIRCUIT__LO_FAST,
                                                  circuit__mkfhi(0, false, 0)});
}

bool circuit__fast_success(circuit_breaker *b, uint64_t lo)
{
    uint32_t id = circuit__lo31(lo);
    uint64_t *rec = &circuit__my_cpu(b)->fast;
    /* relaxed: the CAS below decides; the word's acquire load (caller)
     * already made this interval's preparation visible */
    uint64_t v = circuit__ld_rlx(rec);
    CIRCUIT__HOOK(CIRCUIT_TP_FAST_BEFORE_COUNT);
    for (;;) {
        if ((v & FAST_SEALED) || fast_id(v) != id || fast_count(v) == FAST_COUNT_MAX)
            return false;
        /* relaxed: the fold's seal is an RMW on this record and so sees
         * this count or makes this CAS fail; nothing else is published (as
         * an RMW it continues the release sequence of the entry's reset) */
        if (circuit__cas_rlx(rec, &v, v + 1))
            return true;
    }
}

/* Adds an interval's folded successes to the total once (step 3). */
static void ledger_add(circuit_breaker *b, const circuit__u128 *c, uint64_t sum)
{
    circuit__u128 f = circuit__ld128_acq(&b->folded);
    for (;;) {
        if (f.lo == circuit__ledger_key(c->lo))
            return; /* added by another folder of this interval */
        /* only while the word is still this fast interval (acquire: ordered
         * before the CAS below), so a folder stopped since cannot add an
         * interval twice after a later one was recorded */
        if (circuit__ld128_lo_acq(&b->core) != c->lo)
            return;
        circuit__u128 n = {circuit__ledger_key(c->lo), f.hi + sum};
        if (circuit__cas128_sc(&b->folded, &f, n))
            return;
    }
}

bool circuit__fold(circuit_breaker *b, circuit__u128 *c)
{
    uint32_t id = circuit__lo31(c->lo);
    uint64_t sum = 0;
    /* 1. seal */
    for (uint32_t i = 0; i < b->ncpu; i++) {
        uint64_t *rec = &b->pcpu[i].fast;
        uint64_t v = circuit__ld_acq(rec); /* acquire: see "foreign" below */
        for (;;) {
            if (fast_id(v) == id) {
                /* a seal is an RMW on the record (it sees every count
                 * before it); the word CAS at the end publishes the sum.
                 * acquire on failure: the value returned is looked at */
                if ((v & FAST_SEALED) || circuit__cas_acq(rec, &v, v | FAST_SEALED))
                    break;
                continue;
            }
            /* Foreign: two entries raced and the loser's preparation of
             * this record landed after the winner's (both had checked the
             * slow word). No success was counted into it: counts go only to
             * records named by the word. Seal it empty for this interval,
             * only while the word is still this interval (read X, check,
             * CAS X), so a stopped folder never touches a later interval's
             * live record. */
            if (circuit__ld128_lo_acq(&b->core) != c->lo)
                goto moved;
            /* release: like an entry's reset (below), this write follows a
             * check of the word, which whoever reads the record with acquire
             * must see; acquire on failure: the value is looked at again */
            if (circuit__cas_acq_rel(rec, &v, fast_make(id, 0) | FAST_SEALED))
                break;
        }
    }
    CIRCUIT__HOOK(CIRCUIT_TP_FOLD_SEALED);
    /* 2. sum: every record is now {sealed, id} unless the fold is over */
    for (uint32_t i = 0; i < b->ncpu; i++) {
        /* acquire: a record found reset for a later interval (someone
         * finished this fold) synchronizes with that reset, so the word read
         * next is at least the one the resetting entry saw, never the old
         * fast word again (liveness; tests/model/spin/README.md, "Fold").
         * The value itself is our seal's or later (coherence). */
        uint64_t v = circuit__ld_acq(&b->pcpu[i].fast);
        if (!(v & FAST_SEALED) || fast_id(v) != id)
            goto moved; /* prepared for a later interval: someone finished */
        sum += fast_count(v);
        if (i == 0)
            CIRCUIT__HOOK(CIRCUIT_TP_FOLD_MID_SUM);
    }
    /* 3. the total, once per interval */
    ledger_add(b, c, sum);
    /* 4. one CAS to the exact slow word */
    {
        uint64_t seq = (uint64_t)circuit__fhi_seq(c->hi) + sum;
        bool full = (c->hi & CIRCUIT__FHI_FULL) || seq >= b->window;
        uint64_t run = (uint64_t)circuit__fhi_run(c->hi) + sum;
        if (run > (uint64_t)CIRCUIT_RUN_MAX)
            run = (uint64_t)CIRCUIT_RUN_MAX;
        seq %= b->seq_mod;
        circuit__u128 slow = {
            circuit__mklo(CIRCUIT__ST_CLOSED, circuit__gen(c->lo), (uint32_t)seq),
            (full ? CIRCUIT__HI_FULL : 0) | (run ? (run << CIRCUIT__HI_RUN_SHIFT) : 0)};
        circuit__u128 exp = *c;
        if (circuit__core_cas(b, &exp, slow)) {
            *c = slow;
            return true;
        }
    }
moved:
    *c = circuit__ld128_acq(&b->core); /* acquire: the caller decides again from it */
    return false;
}

bool circuit__enter_fast(circuit_breaker *b, circuit__u128 *c, circuit__u128 slow)
{
    /* A fresh id (relaxed RMW: uniqueness is all it needs). Taken even when
     * the CAS below loses: ids are not dense. */
    uint32_t id = (uint32_t)((circuit__faa_rlx(&b->next_id, 1) + 1) & CIRCUIT__F31_MASK);
    if (id == 0) /* 0 never names an interval, so a zeroed record matches none */
        id = (uint32_t)((circuit__faa_rlx(&b->next_id, 1) + 1) & CIRCUIT__F31_MASK);
    for (uint32_t i = 0; i < b->ncpu; i++) {
        uint64_t *rec = &b->pcpu[i].fast;
        /* read X, check the word, CAS X: acquire, so the check below cannot
         * be satisfied before this read (else a count made after the check
         * could be read here and wiped by the CAS) */
        uint64_t v = circuit__ld_acq(rec);
        for (;;) {
            /* acquire: the record CAS below cannot be made before this
             * check; while the word's low half is c's (not fast), no
             * record holds an uncounted success */
            if (circuit__ld128_lo_acq(&b->core) != c->lo) {
                *c = circuit__ld128_acq(&b->core);
                return false;
            }
            /* RELEASE on success: the reset publishes the check above with
             * it. A stale entry (or fold) that later reads this record, or a
             * count made on top of it (the count CAS is an RMW, so it
             * continues the reset's release sequence), with acquire then sees
             * the word this entry checked, and its own check of the word
             * fails instead of passing on an older slow word and wiping
             * counted successes (tests/model/spin/README.md, "Fold"; C11
             * allows that outcome with an acquire-only reset even where the
             * CPU does not, L7). Acquire on failure: the value returned is
             * checked again. */
            if (circuit__cas_acq_rel(rec, &v, fast_make(id, 0)))
                break;
        }
    }
    CIRCUIT__HOOK(CIRCUIT_TP_ENTRY_BEFORE_CAS);
    uint32_t seq = circuit__seq(slow.lo);
    bool full = (slow.hi & CIRCUIT__HI_FULL) != 0;
    circuit__u128 fast = {circuit__mklo(circuit__code(slow.lo), circuit__gen(slow.lo), id) |
                              CIRCUIT__LO_FAST,
                          circuit__mkfhi(seq, full, circuit__hi_run(slow.hi))};
    /* the CAS is a release: the records prepared above are visible to whoever
     * reads "fast id" with acquire */
    if (circuit__core_cas(b, c, fast)) {
        *c = fast;
        return true;
    }
    return false;
}

uint64_t circuit__fast_pending(const circuit_breaker *b, uint64_t lo)
{
    uint32_t id = circuit__lo31(lo);
    uint64_t sum = 0;
    for (uint32_t i = 0; i < b->ncpu; i++) {
        /* acquire: a reader (stats) re-reads the word after these loads to
         * know they belong to the interval it named */
        uint64_t v = circuit__ld_acq(&b->pcpu[i].fast);
        if (fast_id(v) == id)
            sum += fast_count(v);
    }
    return sum;
}
