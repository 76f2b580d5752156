/*
 * totals.pml: the flush protocol of the M1 totals (docs/CONTRACT.md M1,
 * with L1 and L5), every interleaving of up to four
 * incrementing threads and one stats reader, checked by SPIN. README.md
 * beside it explains the model; run-spin.sh runs it:
 *
 *   spin -a totals.pml && cc -O2 -DSAFETY -DCOLLAPSE -o pan pan.c && ./pan -m100000
 *
 * THE PROTOCOL (src/percpu.c). Each (breaker, CPU c) has one word P[c] that
 * packs the six M1 totals as bit-fields: field i holds a value f_i (0 ..
 * 2T-1, T = 2^(w-1) for a w-bit field) and a parity bit pp_i. A field that
 * reaches T has its T units moved ("flushed") to the shared total S[i],
 * whose top bit is a parity bit ps_i (its low 63 bits the total). One
 * shared CONTROL word {seq, busy, c, i, pP, pS} lets one flush at a time
 * run (idle: busy = 0; seq only grows: +1 at a flush's START, +1 at its
 * END; END leaves the flush named).
 *   increment(c, i), by any thread (threads migrate: several threads write
 *     one P[c]): v = load P[c]; if f_i(v) = 2T-1 (saturated: a flush busy
 *     elsewhere or stopped), FAA S[i] += 1 (the OVERFLOW path: the total
 *     only, never the parity), then try_flush(c, i), and return; else CAS
 *     P[c] v -> v + 1 in field i (a failure loads again); if the new f_i
 *     >= T, try_flush(c, i). (circuit__total_add, circuit__total_overflow)
 *   try_flush(c, i): ctl = load CONTROL (busy: return); v = load P[c]
 *     (f_i(v) < T: return, someone flushed it); sp = ps_i of a load of
 *     S[i]; CAS CONTROL ctl -> {seq + 1, busy, c, i, pp_i(v), sp} (a failure
 *     returns); the winner alone then: CREDIT (one add of T + 2^63 to S[i]:
 *     T to the total, ps_i flipped), SUBTRACT (a CAS loop on P[c]: f_i -= T,
 *     pp_i flipped), END (store CONTROL = the START's value, idle, its seq
 *     + 1: {seq(ctl) + 2, idle, c, i, pP, pS}). No helping.
 *     (circuit__total_flush)
 *   circuit_get_stats: ctl0 = load CONTROL; load every P[c]; then load every
 *     S[i]; ctl1 = load CONTROL; moves = seq(ctl1) - seq(ctl0) (the STARTs
 *     and ENDs during the pass). The pass is accepted for moves 0, 1, or 2
 *     with ctl0 idle (one flush started and ended); otherwise (two flushes
 *     or more met) it starts again. The flush met: moves 0: ctl0's when
 *     busy, none when idle; else ctl1's (busy or idle). tot_i = S[i] +
 *     sum_c f_i(P[c]); when the flush met is of field i: credited = (ps_i
 *     as read != met.pS), subtracted = (pp_i of P[met.c] as read !=
 *     met.pP), and credited && !subtracted: tot_i -= T. It writes nothing.
 *     (circuit__totals_read)
 *
 * GRANULARITY. Every atomic step makes at most ONE access to shared memory
 * (one P[c], one S[i], CONTROL), as the C code does: a load is a step, a
 * CAS is a step (compare and write together, a d_step), an atomic add is a
 * step; the local computation after a load is folded into the load's step.
 * S[i] is modelled as {Stot[i], Sps[i]} written and read together (one
 * 64-bit word in C). P[c] is packed like the C word: field i's value at
 * bits 3i..3i+1, its parity at bit 3i+2, and an increment or a subtract is
 * the packed add (a carry out of a field would flip its parity bit, as in
 * C). A failed CAS is followed by a load step here, where C's CAS gives the
 * current value: the model has the C code's interleavings and more. Ghost
 * variables (g_*, k_*) change in the same step as the access they describe
 * and are read only by assertions.
 *
 * BOUNDS. 2 CPUs' words, 2 fields (the CONTROL word serialises flushes
 * across fields and CPUs alike, so two of each show every kind of
 * conflict), T = 2 (field values 0..3), up to 4 threads making up to 2
 * increments each on a (CPU, field) of the script, and one reader making
 * READS (0 to 2) stats reads. Widths: seq, S's total and the fields never
 * wrap here (in C seq is wide enough not to repeat within a read).
 *
 * MEMORY. SPIN is sequentially consistent: the model checks the
 * interleavings only. The C code reads with acquire loads (the reader's
 * every load, try_flush's CONTROL load), makes START acq_rel, CREDIT,
 * SUBTRACT and END release, so that a reader that sees a write sees what
 * came before it in the writer's order; README.md's last section says what
 * the argument needs from the C code.
 *
 * PROPERTIES (assertions, each evaluated in the step it describes):
 *   (1) M1 under concurrency: each tot_i a reader reports lies between the
 *       true total (g_true[i]: every increment whose CAS or overflow add was
 *       made) at the start of the pass it reports (its ctl0 load) and at its
 *       end (its ctl1 load), so it is a value the total held during the call;
 *   (2) no field goes out of 0..2T-1: an increment's CAS never carries out
 *       of its field and a SUBTRACT never borrows (f_i >= T there); the
 *       parity of S[i] is flipped by CREDITs only (ps_i = the number of
 *       CREDITs to S[i], mod 2, at every write of S[i]);
 *   (3) at the end (every thread returned): the totals are exact (S[i] +
 *       sum_c f_i = g_true[i]) and CONTROL is idle; with a stopped flusher,
 *       a stats read of the quiescent breaker computes exactly g_true[i];
 *   (4) L1 (-DNP): no non-progress cycle (every increment and every stats
 *       read passes a progress label when it returns), and no invalid end
 *       state: nothing waits, even for a flusher stopped forever (-DSTUCK);
 *       a reader starts a second pass only after another thread's
 *       progress: a flush ENDed during the pass (g_ends);
 *   (5) no field stays saturated for good: an overflow increment that found
 *       CONTROL idle at its add does not return leaving its field at 2T-1
 *       with CONTROL idle and no flush started since its add (else every
 *       later increment of that field takes the overflow path, a shared
 *       write, and none tries a flush: the per-CPU totals of M1 would be
 *       lost for that field for good).
 *
 * Switches:
 *   -DT<t>_OP<n>=<op>  the script: increment n (1-2) of thread t (0-3);
 *                      op = 1 + 2c + i for an increment of field i on CPU
 *                      c's word, 0 none. Default: T0 (0,0) (0,0); T1 (0,0)
 *                      (0,1); T2 (1,1) (1,0); T3 none
 *   -DREADS=<n>        the reader's stats reads (default 1; 0: no reader)
 *   -DINIT_F<c><i>=<n> field i of CPU c's word starts at n < T (the totals
 *                      so far), default 0
 *   -DSTUCK=1          a flusher may stop forever right after its CONTROL
 *                      CAS (the checker picks which, once), -DSTUCK=2 right
 *                      after its CREDIT, -DSTUCK=3 right after its
 *                      SUBTRACT (before its END): every other thread must
 *                      still finish (increments of a field at 2T-1 take
 *                      the overflow path) and the reads stay right
 *   -DTAKEOVER=1       (with -DSTUCK) src/percpu.c's takeover in shared memory:
 *                      START records its thread as the owner; the stopped
 *                      flusher is a dead owner; an increment on the overflow
 *                      path that finds CONTROL busy with a dead owner CASes
 *                      it to itself (seq + 1) and runs the steps the owner
 *                      had not done, each while its parity says not done
 *                      (the owner's steps are parity-checked too), then
 *                      END. (6): after a takeover CONTROL is idle and the
 *                      totals exact; (1)-(5) as before. COVER(12): a
 *                      takeover won
 *   -DCOVER_AT=<n>     fail where the COVER(n) step is reached: shows that
 *                      the search reaches it (README.md lists them)
 * Planted bugs (each must be caught):
 *   -DPLANT_NO_CORRECTION   the reader does not subtract T for a flush
 *                           credited and not subtracted: counted twice
 *   -DPLANT_S_BEFORE_P      the reader loads every S[i] before every P[c]
 *   -DPLANT_SUBTRACT_FIRST  the flusher SUBTRACTs before it CREDITs
 *   -DPLANT_ACCEPT_TWO_BUSY the reader also accepts moves 2 from a busy
 *                           ctl0 (one flush ENDed, another STARTed: it
 *                           corrects for the second only)
 *   -DPLANT_ANY_MOVES       the reader accepts any moves (never a second
 *                           pass), correcting for the flush ctl1 names
 *   -DPLANT_END_CLEARS      END stores {seq + 1, idle} with no identity
 *                           (c, i, pP, pS = 0), the reader unchanged
 *   -DPLANT_MET_FROM_CTL0   the reader takes the flush met from ctl0 when
 *                           moves >= 1 too (idle: the flush before)
 *   -DPLANT_RETRY_ON_CHANGE the reader reads again whenever CONTROL changed
 *                           (the protocol before 3bcdd09: right, but a
 *                           lone START costs a pass, (4))
 *   -DPLANT_NO_RECHECK      try_flush does not check f_i >= T after loading
 *                           CONTROL (its v load stays, for pp_i)
 *   -DPLANT_OVERFLOW_CARRIES the increment has no overflow path: a field at
 *                           2T-1 is incremented anyway (carries)
 *   -DPLANT_OVERFLOW_NO_FLUSH the overflow path returns without try_flush
 *                           (the protocol before commit 3269313): a field
 *                           that reached 2T-1 while another field's flush
 *                           was busy stays there once CONTROL is idle
 *   -DPLANT_TAKEOVER_LIVE   (with -DTAKEOVER) a flush is taken over whatever
 *                           its owner's state: a live owner and its taker
 *                           both run the steps (helping without a
 *                           per-flush tag on the field)
 *   -DPLANT_WAIT_FOR_FLUSH  try_flush waits while CONTROL is busy instead of
 *                           returning (a lock in all but name): with
 *                           -DSTUCK and -DNP, a non-progress cycle
 */

#ifdef COVER_AT
#define COVER(n) assert(COVER_AT != (n))
#else
#define COVER(n) skip
#endif

#define NTHREADS 4
#define MAXOPS 2
#define NCPU 2
#define NF 2
#define T 2
#define FMAX 3 /* 2T-1 */

#ifndef READS
#define READS 1
#endif
#ifndef STUCK
#define STUCK 0
#endif

/* the fields' values at the start (each below T) */
#ifndef INIT_F00
#define INIT_F00 0
#endif
#ifndef INIT_F01
#define INIT_F01 0
#endif
#ifndef INIT_F10
#define INIT_F10 0
#endif
#ifndef INIT_F11
#define INIT_F11 0
#endif

#ifndef T0_OP1
#define T0_OP1 1
#endif
#ifndef T0_OP2
#define T0_OP2 1
#endif
#ifndef T1_OP1
#define T1_OP1 1
#endif
#ifndef T1_OP2
#define T1_OP2 2
#endif
#ifndef T2_OP1
#define T2_OP1 4
#endif
#ifndef T2_OP2
#define T2_OP2 3
#endif
#ifndef T3_OP1
#define T3_OP1 0
#endif
#ifndef T3_OP2
#define T3_OP2 0
#endif

/* P[c]: field i's value at bits 3i..3i+1, its parity pp_i at bit 3i+2 */
#define OFF(i) ((i) * 3)
#define FV(v, i) (((v) >> OFF(i)) & 3)
#define PPV(v, i) (((v) >> (OFF(i) + 2)) & 1)
#define UNIT(i) (1 << OFF(i))
#define PPBIT(i) (1 << (OFF(i) + 2))

/* CONTROL = {seq, owner, busy, c, i, pP, pS}; owner: the START's thread +
 * 1 under -DTAKEOVER (the pid in C), 0 otherwise */
#define MKC(seq, busy, c, i, pp, ps) \
    (((seq) << 8) | (OWNER_ME << 5) | ((busy) << 4) | ((c) << 3) | ((i) << 2) | ((pp) << 1) | (ps))
#define CSEQ(x) ((x) >> 8)
#define COWNER(x) (((x) >> 5) & 7)
#define CBUSY(x) (((x) >> 4) & 1)
#define CC(x) (((x) >> 3) & 1)
#define CI(x) (((x) >> 2) & 1)
#define CPP(x) (((x) >> 1) & 1)
#define CPS(x) ((x) & 1)
#define CBUSYBIT 16
#define COWNERBITS 224
#define CSEQONE 256
#ifdef TAKEOVER
#define OWNER_ME (me + 1)
#else
#define OWNER_ME 0
#endif

byte P[NCPU];
byte Stot[NF];
bit Sps[NF];
int CONTROL;

/* ghosts */
byte g_true[NF];     /* increments made (CAS or overflow add) */
byte g_credits[NF];  /* CREDITs made to S[i] */
bit g_stuck;         /* a flusher stopped forever (-DSTUCK) */
byte g_dead;         /* its thread + 1: a dead owner (-DTAKEOVER) */
bit g_taken;         /* a takeover ENDed the dead owner's flush */
byte g_ends;         /* ENDs made (flushes finished) */

byte script[NTHREADS * MAXOPS];

/* (2): ps_i is flipped by CREDITs only */
#define SPAR(i) assert(Sps[i] == (g_credits[i] & 1))

/* one atomic add to S[i]: the overflow path's +1 (the total only) */
inline overflow_add(i)
{
    d_step {
        Stot[i] = Stot[i] + 1; g_true[i]++; SPAR(i);
        /* ghost for (5): CONTROL idle at the add, and its seq then */
        if
        :: !CBUSY(CONTROL) -> k_idle = 1; k_seq = CSEQ(CONTROL)
        :: else -> skip
        fi
    }
}

/* CREDIT: one add of T + 2^63: T to the total, ps_i flipped */
inline credit(i)
{
    d_step { Stot[i] = Stot[i] + T; Sps[i] = 1 - Sps[i]; g_credits[i]++; SPAR(i) }
}

/* SUBTRACT: the CAS loop on P[c]: f_i -= T, pp_i flipped */
inline subtract(c, i)
{
    do
    :: v = P[c];
        d_step {
            if
            :: P[c] == v ->
                f = FV(v, i); assert(f >= T); f = 0; /* (2): no borrow */
                P[c] = (v - T * UNIT(i)) ^ PPBIT(i); cas = 1
            :: else -> cas = 0
            fi
        };
        if
        :: cas -> break
        :: else -> COVER(5) /* an increment came between */
        fi
    od
}

/* -DTAKEOVER: the steps as src/percpu.c's flush_steps runs them, each
 * unless its parity says done: CREDIT while S[i]'s parity is still pS (a
 * load, then a CAS of the pair: an overflow add may come between),
 * SUBTRACT while the field's parity is still pP */
inline credit_checked(i, ps)
{
    do
    :: atomic { lt = Stot[i]; lp = Sps[i] };
        if
        :: lp != ps -> break
        :: else ->
            d_step {
                if
                :: Stot[i] == lt && Sps[i] == lp ->
                    Stot[i] = Stot[i] + T; Sps[i] = 1 - Sps[i]; g_credits[i]++; SPAR(i); cas = 1
                :: else -> cas = 0
                fi
            };
            if
            :: cas -> break
            :: else -> skip
            fi
        fi
    od;
    atomic { lt = 0; lp = 0; cas = 0 }
}

inline subtract_checked(c, i, pp)
{
    do
    :: v = P[c];
        if
        :: PPV(v, i) != pp -> break
        :: else ->
            d_step {
                if
                :: P[c] == v ->
                    f = FV(v, i); assert(f >= T); f = 0; /* (2): no borrow */
                    P[c] = (v - T * UNIT(i)) ^ PPBIT(i); cas = 1
                :: else -> cas = 0
                fi
            };
            if
            :: cas -> break
            :: else -> skip
            fi
        fi
    od;
    atomic { v = 0; cas = 0 }
}

/* a flusher may stop forever here (-DSTUCK): the thread ends. STOP<n>;
 * is a step only where -DSTUCK=n places the stop (none otherwise) */
#define STOP_HERE \
    if \
    :: !g_stuck -> g_stuck = 1; g_dead = me + 1; goto stopped \
    :: true -> skip \
    fi;
#if STUCK == 1
#define STOP1 STOP_HERE
#else
#define STOP1
#endif
#if STUCK == 2
#define STOP2 STOP_HERE
#else
#define STOP2
#endif
#if STUCK == 3
#define STOP3 STOP_HERE
#else
#define STOP3
#endif

inline try_flush(c, i)
{
#ifdef PLANT_WAIT_FOR_FLUSH
    do
    :: ctl = CONTROL;
        if
        :: CBUSY(ctl) -> skip
        :: else -> break
        fi
    od;
#else
    ctl = CONTROL;
#endif
    if
    :: CBUSY(ctl) -> COVER(2) /* a later increment tries again */
    :: else ->
        v = P[c];
        if
#ifndef PLANT_NO_RECHECK
        :: FV(v, i) < T -> COVER(3) /* someone flushed it */
#endif
        :: else ->
            sp = Sps[i];
            d_step {
                if
                :: CONTROL == ctl ->
                    CONTROL = MKC(CSEQ(ctl) + 1, 1, c, i, PPV(v, i), sp);
                    ctl = CONTROL; cas = 1 /* C: the local busy */
                :: else -> cas = 0
                fi
            };
            if
            :: cas ->
                STOP1
#ifdef PLANT_SUBTRACT_FIRST
                subtract(c, i);
                credit(i);
#else
#ifdef TAKEOVER
                credit_checked(CI(ctl), CPS(ctl));
                STOP2
                subtract_checked(CC(ctl), CI(ctl), CPP(ctl));
#else
                credit(i);
                STOP2
                subtract(c, i);
#endif
                STOP3
#endif
                /* END: idle, seq + 1, still naming the flush (atomic,
                 * not d_step: the SUBTRACT loop's break lands here) */
                atomic {
#ifdef PLANT_END_CLEARS
                    CONTROL = MKC(CSEQ(ctl) + 1, 0, 0, 0, 0, 0);
#else
                    CONTROL = (ctl & ~CBUSYBIT) + CSEQONE;
#endif
                    g_ends++
                }
            :: else -> COVER(4) /* another flush started first */
            fi
        fi
    fi;
    d_step { ctl = 0; sp = 0; v = 0; cas = 0 }
}

/* -DTAKEOVER: a flush whose owner is dead (the stuck thread) is taken
 * over: a CAS naming this thread (seq + 1, the same flush), then the steps
 * the owner had not done, then END */
inline take_over()
{
    ctl = CONTROL;
    if
#ifdef PLANT_TAKEOVER_LIVE
    :: CBUSY(ctl) && COWNER(ctl) != 0 && COWNER(ctl) != me + 1 ->
#else
    :: CBUSY(ctl) && COWNER(ctl) != 0 && COWNER(ctl) == g_dead && COWNER(ctl) != me + 1 ->
#endif
        d_step {
            if
            :: CONTROL == ctl ->
                CONTROL = ((ctl & ~COWNERBITS) | ((me + 1) << 5)) + CSEQONE;
                ctl = CONTROL; cas = 1
            :: else -> cas = 0
            fi
        };
        if
        :: cas ->
            COVER(12);
            credit_checked(CI(ctl), CPS(ctl));
            subtract_checked(CC(ctl), CI(ctl), CPP(ctl));
            atomic { CONTROL = (ctl & ~CBUSYBIT) + CSEQONE; g_ends++; g_taken = 1 }
        :: else -> skip
        fi
    :: else -> skip
    fi;
    atomic { ctl = 0; cas = 0 }
}

inline increment(c, i)
{
    do
    :: v = P[c];
        if
#ifndef PLANT_OVERFLOW_CARRIES
        :: FV(v, i) == FMAX -> /* saturated: a flush is stuck */
            COVER(1);
            overflow_add(i);
#ifdef TAKEOVER
            take_over();
#endif
#ifndef PLANT_OVERFLOW_NO_FLUSH
            try_flush(c, i); /* start its flush if none is busy */
#endif
            /* (5): an overflow add that found CONTROL idle does not return
             * leaving its field at 2T-1 with CONTROL idle and no flush
             * started since the add (CONTROL was idle then, so a changed
             * seq is a START) */
            d_step {
                assert(!k_idle || CSEQ(CONTROL) != k_seq || FV(P[c], i) < FMAX ||
                       CBUSY(CONTROL));
                k_idle = 0; k_seq = 0
            };
            break
#endif
        :: else ->
            d_step {
                if
                :: P[c] == v ->
                    f = FV(v, i); assert(f < FMAX); f = 0; /* (2): no carry */
                    P[c] = v + UNIT(i); g_true[i]++; cas = 1
                :: else -> cas = 0
                fi
            };
            if
            :: cas ->
                if
                :: FV(v, i) + 1 >= T -> try_flush(c, i)
                :: else -> skip
                fi;
                break
            :: else -> COVER(9) /* another increment or a subtract came first */
            fi
        fi
    od;
    atomic { v = 0; cas = 0 }
}

proctype thread(byte me)
{
    byte op, opn, v, sp, f, k_seq, lt;
    bit k_idle, lp;
    int ctl;
    bit cas;

    opn = 0;
    do
    :: opn == MAXOPS -> break
    :: opn < MAXOPS ->
        d_step { op = script[me * MAXOPS + opn]; opn++ };
        if
        :: op != 0 -> increment((op - 1) / 2, (op - 1) % 2)
        :: else -> skip
        fi;
progress_inc:
        op = 0
    od;
stopped:
    skip
}

/* the reader's view of the flush it met (m: a busy CONTROL value naming
 * it, 0: none) for field i, from its loads (pv0, pv1; sq the parity of
 * S[i] it read) */
#define FLUSHING(i) (CBUSY(m) && CI(m) == (i))
#define CREDITED(sq) ((sq) != CPS(m))
#define SUBTRACTED(i) (PPV((CC(m) == 0 -> pv0 : pv1), i) != CPP(m))
#define CORR(i, sq) (FLUSHING(i) && CREDITED(sq) && !SUBTRACTED(i))
#ifdef PLANT_NO_CORRECTION
#define RTOT(i, st, sq) (st + FV(pv0, i) + FV(pv1, i))
#else
#define RTOT(i, st, sq) (st + FV(pv0, i) + FV(pv1, i) - (CORR(i, sq) -> T : 0))
#endif

/* The pass is accepted for mv = seq(ctl1) - seq(ctl0) STARTs and ENDs
 * during it: none, one, or two from an idle ctl0 (one flush started and
 * ended); otherwise (two flushes or more met) it reads again. */
#if defined(PLANT_ANY_MOVES)
#define ACCEPT(mv, c0) 1
#elif defined(PLANT_RETRY_ON_CHANGE)
#define ACCEPT(mv, c0) ((mv) == 0)
#elif defined(PLANT_ACCEPT_TWO_BUSY)
#define ACCEPT(mv, c0) ((mv) <= 2)
#else
#define ACCEPT(mv, c0) ((mv) <= 1 || ((mv) == 2 && !CBUSY(c0)))
#endif
/* the flush met: for mv = 0 the one ctl0 names busy, if any; else the one
 * ctl1 names (END leaves it named) */
#ifdef PLANT_MET_FROM_CTL0
#define MET(mv, c0, c1) (CBUSY(c0) || (mv) > 0 -> (c0) | CBUSYBIT : 0)
#else
#define MET(mv, c0, c1) ((mv) == 0 -> (CBUSY(c0) -> (c0) : 0) : (c1) | CBUSYBIT)
#endif

proctype reader()
{
    byte n, pv0, pv1, st0, st1, lo0, lo1, tot, mv, e0;
    bit sq0, sq1, done;
    int c0, m;

    n = 0;
    do
    :: n == READS -> break
    :: n < READS ->
        do
        :: d_step { c0 = CONTROL; lo0 = g_true[0]; lo1 = g_true[1]; e0 = g_ends };
#ifdef PLANT_S_BEFORE_P
            d_step { st0 = Stot[0]; sq0 = Sps[0] };
            d_step { st1 = Stot[1]; sq1 = Sps[1] };
            pv0 = P[0];
            pv1 = P[1];
#else
            pv0 = P[0];
            pv1 = P[1];
            d_step { st0 = Stot[0]; sq0 = Sps[0] };
            d_step { st1 = Stot[1]; sq1 = Sps[1] };
#endif
            /* ctl1, and the totals computed from the loads (local work
             * folded into the load's step) */
            d_step {
                mv = CSEQ(CONTROL) - CSEQ(c0);
                if
                :: ACCEPT(mv, c0) ->
                    if
                    :: mv == 1 -> COVER(10)
                    :: mv == 2 -> COVER(11)
                    :: else -> skip
                    fi;
                    m = MET(mv, c0, CONTROL);
                    /* (1): a value each total held during the pass (from
                     * its ctl0 load to this ctl1 load) */
                    tot = RTOT(0, st0, sq0);
                    assert(lo0 <= tot); assert(tot <= g_true[0]);
                    tot = RTOT(1, st1, sq1);
                    assert(lo1 <= tot); assert(tot <= g_true[1]);
                    tot = 0; done = 1
                :: else ->
                    /* (4) L1: a second pass only after another thread's
                     * progress: a flush ENDed during this one */
                    assert(g_ends != e0);
                    done = 0
                fi;
                mv = 0; e0 = 0
            };
            if
            :: done -> break
            :: else -> COVER(6)
            fi
        od;
        atomic {
            if
            :: CORR(0, sq0) || CORR(1, sq1) -> COVER(7) /* credited, not subtracted */
            :: (FLUSHING(0) && CREDITED(sq0) && SUBTRACTED(0)) ||
               (FLUSHING(1) && CREDITED(sq1) && SUBTRACTED(1)) -> COVER(8)
            :: else -> skip
            fi;
            n++;
            pv0 = 0; pv1 = 0; st0 = 0; st1 = 0; sq0 = 0; sq1 = 0;
            lo0 = 0; lo1 = 0; c0 = 0; m = 0; done = 0
        };
progress_read:
        skip
    od
}

init {
    byte i, pv0, pv1;
    int c0, m;
    d_step {
        /* the totals so far (fields below T; S empty) */
        P[0] = INIT_F00 * UNIT(0) + INIT_F01 * UNIT(1);
        P[1] = INIT_F10 * UNIT(0) + INIT_F11 * UNIT(1);
        g_true[0] = INIT_F00 + INIT_F10;
        g_true[1] = INIT_F01 + INIT_F11;
        script[0] = T0_OP1; script[1] = T0_OP2;
        script[2] = T1_OP1; script[3] = T1_OP2;
        script[4] = T2_OP1; script[5] = T2_OP2;
        script[6] = T3_OP1; script[7] = T3_OP2
    };
    atomic {
        i = 0;
        do
        :: i < NTHREADS ->
            if
            :: script[i * MAXOPS] != 0 || script[i * MAXOPS + 1] != 0 -> run thread(i)
            :: else -> skip
            fi;
            i++
        :: else -> break
        od;
        if
        :: READS > 0 -> run reader()
        :: else -> skip
        fi
    };
    (_nr_pr == 1);
    /* (3) the quiescent breaker */
    d_step {
        if
        :: !g_stuck ->
            assert(!CBUSY(CONTROL));
            assert(Stot[0] + FV(P[0], 0) + FV(P[1], 0) == g_true[0]);
            assert(Stot[1] + FV(P[0], 1) + FV(P[1], 1) == g_true[1])
        :: else -> skip
        fi;
        /* (6) -DTAKEOVER: a dead owner's flush taken over leaves CONTROL
         * idle and the totals exact, as if no one had died */
        if
        :: g_taken ->
            assert(!CBUSY(CONTROL));
            assert(Stot[0] + FV(P[0], 0) + FV(P[1], 0) == g_true[0]);
            assert(Stot[1] + FV(P[0], 1) + FV(P[1], 1) == g_true[1])
        :: else -> skip
        fi;
        /* a stats read now computes the exact totals (a stopped flusher too) */
        c0 = CONTROL; pv0 = P[0]; pv1 = P[1]; m = MET(0, c0, c0);
        assert(RTOT(0, Stot[0], Sps[0]) == g_true[0]);
        assert(RTOT(1, Stot[1], Sps[1]) == g_true[1])
    }
}
