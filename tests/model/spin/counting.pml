/*
 * counting.pml: the closed-state counting protocol of src/closed.c and src/closed_state.c
 * (docs/CONTRACT.md S2 and L6, C1, C2, C4, T2, L1, L8),
 * every interleaving of three threads on two CPUs' cells, checked by SPIN.
 * README.md beside it explains the model; run-spin.sh runs it:
 *
 *   spin -a counting.pml && cc -O2 -DSAFETY -DCOLLAPSE -o pan pan.c && ./pan -m100000
 *
 * Planted bugs (each must make pan report an error):
 *   -DPLANT_COUNT_SEALED   a success's increment does not check the sealed
 *                          bit (closed_success's CAS loop condition): it
 *                          counts into a cell an intent has sealed and summed
 *   -DPLANT_SEAL_SKIPS_CELL  cells_seal leaves the last cell unsealed (and its
 *                          sum does not insist on it)
 *   -DPLANT_NO_RECHECK     closed_failure does not read the word again after
 *                          its descriptor and cell reads: trip is asked with
 *                          counts of a point the word has already left
 *   -DPLANT_START_NO_CHECK a success starts an ended epoch's cell for its own
 *                          epoch without checking the word (the "read X,
 *                          check, CAS X" of closed_success): caught only when
 *                          two epochs can end while it is stopped
 *                          (-DCELL_MAX=1 with an isolate: README.md)
 *   -DPLANT_SEAL_NO_FOREIGN  cells_seal gives up at a cell of another epoch
 *                          instead of sealing it empty: an intent made after
 *                          an epoch change can never be completed (a
 *                          livelock: with -DNP, a non-progress cycle)
 * Other switches:
 *   -DT<t>_OP<n>=<op>      the script: operation n (1, 2) of thread t (0-2)
 *   -DCELL_MAX=<n>         a cell's limit (C: 2^32 - 1), default 2, so that
 *                          the FOLD intent of a cell at its limit is reached
 *   -DCOVER_AT=<n>         fail where the COVER(n) step is reached: shows that
 *                          the search reaches it (README.md lists them)
 *
 * GRANULARITY. Every atomic step makes at most ONE access to shared memory
 * (the state word, one cell, one descriptor slot, the ledger, next_id), as
 * the C code does: a load is one step, a CAS is one step (compare and write
 * together), and a multi-cell read (cells_sum, the seal and sum loops) is
 * one step per cell with every other thread free to run in between. Ghost
 * variables (g_*) are updated in the same step as the access they describe;
 * they are never read by the protocol, only by assertions.
 *
 * THE MAP (Promela step -> C, src/closed.c or src/closed_state.c unless named):
 *   admit                  breaker.c allow: a ticket of the closed generation
 *   success()              circuit__closed_success: the closed mirror's fast
 *                          path (an unsealed cell of the epoch the mirror names:
 *                          +1, without reading the word), then the
 *                          lo load, intent -> complete,
 *                          the cell load, the relaxed CAS loop (+1), the acquire
 *                          reload of the cell, limit -> FOLD intent, a sealed
 *                          cell of another epoch -> "read X, check the word,
 *                          CAS X" to {unsealed, e, 1}, else reload lo
 *   failure()              circuit__closed_failure: word load, intent ->
 *                          complete, closed_help, cells_sum (one step per
 *                          cell), the S < S_k check, the re-read of the word,
 *                          ask_trip, ONE word CAS to {k+1, X, S}, circuit__point_publish;
 *                          a trip / sealed / at-limit sum -> intent_make(FAILURE)
 *   isolate()              breaker.c's isolate loop from closed + circuit__
 *                          closed_isolate: closed_help, intent_make(ISOLATE)
 *   point_read()            circuit__point_read + desc_derive (write = 1: the
 *                          "read X, check the word, CAS X" of D_k)
 *   intent_make()               intent_make: CAS w -> w + intent (+ ASKED, hi = {k, S})
 *   complete()             circuit__complete: closed_help, cells_seal, the
 *                          S < S_k check, the decision, ledger_add, then the
 *                          transition CAS (transition.c) or the CAS to a fresh
 *                          epoch {k+1, X, F, d} and circuit__point_publish
 *   cells_seal()           cells_seal: per cell load, then CAS to sealed (own
 *                          epoch) or "read X, check the word, CAS X" to
 *                          {sealed, e, 0} (another epoch); then per cell load
 *                          and sum, false on a cell not {sealed, e}
 *   ledger_add()           ledger_add: load folded, key check, word check,
 *                          CAS folded {key, sum + S}
 *   fresh epoch            percpu.c circuit__fresh_epoch (fetch_add next_id)
 *
 * ABSTRACTED AWAY (what the model does not check):
 *   - the window: the counts are the generation's totals {successes,
 *     failures} (an unbounded window); the ring, its records and clears,
 *     evictions (point_append's ring reads), the run and last outcome are not
 *     modelled, nor the ring's part of closed_help and circuit__point_publish;
 *   - widths: epoch ids 4 bits (asserted never to wrap here), k 3 bits
 *     (descriptor tags: the full k), cells count to CELL_MAX; "S too large
 *     for the word" (S > 2^29 - 1, a descriptor's S) is not modelled (it takes the same
 *     intent_make(FAILURE) path as a sealed or at-limit sum, which is);
 *   - one closed generation: a trip or an isolate ends the run's closed
 *     state (open, half-open, reset, the descriptor emptying of a new closed
 *     state, probes and timeouts are other models' and tests' business);
 *     a call admitted in it and finishing after it ends is late (T2);
 *   - the clock, call_ctx, observe/delivery (delivery.pml), the M1 totals
 *     and stats' reads; the policy is pure (L4): TRIP below;
 *   - a thread runs its whole call on the CPU it started on (my_cpu is read
 *     once, as in C; the checker picks the CPU), and memory is sequentially
 *     consistent: README.md says which orders the C code gives for this.
 */

#define NCPU 2

/* COVER(n): with -DCOVER_AT=n, an assertion that fails where step n is
 * reached (the README's coverage list); otherwise nothing. */
#ifdef COVER_AT
#define COVER(n) assert(COVER_AT != (n))
#else
#define COVER(n) skip
#endif
#define NTHREADS 3
#define MAXOPS 2

#ifndef CELL_MAX
#define CELL_MAX 2
#endif

/* ---- the 16-byte state word, one int read and CASed whole ----------------
 * lo: state (2 bits) | epoch (4) | X | F | intent (2) | ASKED   (bits 0-10)
 * hi: k (3 bits) | S or d (4 bits)                                (bits 11-17)
 * The transition's word (open, isolated) keeps only the state. */
#define ST_CLOSED   0
#define ST_OPEN     1
#define ST_ISOLATED 2
#define I_NONE      0
#define I_FOLD      1
#define I_FAILURE   2
#define I_ISOLATE   3
#define LO_MASK     2047
#define ST(w)       ((w) & 3)
#define EPOCH(w)    (((w) >> 2) & 15)
#define XB(w)       (((w) >> 6) & 1)
#define FB(w)       (((w) >> 7) & 1)
#define INTENT(w)   (((w) >> 8) & 3)
#define ASKED(w)    (((w) >> 10) & 1)
#define K(w)        (((w) >> 11) & 7)
#define SD(w)       (((w) >> 14) & 15)
#define LO(w)       ((w) & LO_MASK)
#define MKW(e, x, f, in, asked, k, sd) \
    (ST_CLOSED + ((e) << 2) + ((x) << 6) + ((f) << 7) + ((in) << 8) + ((asked) << 10) + \
     ((k) << 11) + ((sd) << 14))
#define WITH_INTENT(w, in) ((w) + ((in) << 8))
#define WITH_ASKED(w, s)   (((w) & (LO_MASK + (7 << 11))) + (1 << 10) + ((s) << 14))

/* ---- a cell: {sealed, epoch, count} (C: 1, 31, 32 bits) ---- */
#define C_CNT(v)    ((v) & 7)
#define C_EP(v)     (((v) >> 3) & 15)
#define C_SEALED(v) (((v) >> 7) & 1)
#define MKC(s, e, n) ((s) * 128 + ((e) << 3) + (n))

/* ---- a descriptor D_k: {valid, tag k, successes, failures, S_k} ---- */
#define D_VALID(x) ((x) & 1)
#define D_K(x)     (((x) >> 1) & 7)
#define D_SUCC(x)  (((x) >> 4) & 15)
#define D_FAIL(x)  (((x) >> 8) & 3)
#define D_S(x)     (((x) >> 10) & 15)
#define MKD(k, s, f, S) (1 + ((k) << 1) + ((s) << 4) + ((f) << 8) + ((S) << 10))
#define DESC_IS(x, k) (D_VALID(x) && D_K(x) == (k))

/* ---- the successes ledger `folded` {key, sum}: key = epoch + 1 (0: none) ---- */
#define L_KEY(f)  ((f) & 31)
#define L_SUM(f)  (((f) >> 5) & 31)
#define MKL(key, sum) ((key) + ((sum) << 5))

/* The trip policy (pure, L4): the failures are at least 2 and outnumber the
 * successes; so a success counted between a trip's ask and its completion
 * can turn the decision round (the ASKED shortcut and the re-ask). */
#define TRIP(s, f) ((f) >= 2 && (f) > (s))

/* ---- the operations of the scripts ---- */
#define OP_NONE    0
#define OP_SUCCESS 1 /* allow, then done(success) */
#define OP_FAILURE 2 /* allow, then done(failure) */
#define OP_ISOLATE 3 /* circuit_isolate from closed (an operator) */

#ifndef T0_OP1
#define T0_OP1 OP_SUCCESS
#endif
#ifndef T0_OP2
#define T0_OP2 OP_SUCCESS
#endif
#ifndef T1_OP1
#define T1_OP1 OP_FAILURE
#endif
#ifndef T1_OP2
#define T1_OP2 OP_FAILURE
#endif
#ifndef T2_OP1
#define T2_OP1 OP_SUCCESS
#endif
#ifndef T2_OP2
#define T2_OP2 OP_NONE
#endif

/* circuit_new (percpu.c circuit__pcpu_init): closed, epoch 0, point 0 with
 * D_0 written, every cell {unsealed, epoch 0, 0}, next_id 0, the ledger
 * empty. */
int word = MKW(0, 0, 0, I_NONE, 0, 0, 0);
byte cell[NCPU];
short desc[2]; /* D_0 (zero counts) is written into slot 0 by init */
short folded = 0;
byte next_id = 0;
byte script[NTHREADS * MAXOPS];

/* Ghosts: what the counts must be. */
byte g_ep[16];        /* successes counted into cells tagged with epoch e */
byte g_sealed[16];    /* the sealed sum a completion CAS of epoch e took (+1; 0: not ended) */
byte g_ended;         /* successes of the epochs already ended (folded into points) */
byte g_fail;          /* failures counted (exact points and completions) */
byte g_succ_true;     /* successes whose done returned true */
byte g_fail_true;     /* failures whose done returned true */
byte g_late;          /* results whose done returned false (T2) */
byte g_rejected;      /* calls not admitted (the breaker had left closed) */
bit  g_trans;         /* the closed state ended (open or isolated) */
byte g_final_succ;    /* the transition's final counts (C4) */
byte g_final_fail;

/* The counts of a point the word has just been CASed to, with S its cells'
 * sum, are exact: its successes less S are those of the ended epochs. */
#define POINT_EXACT(ns, S, nf) assert((ns) - (S) == g_ended && (nf) == g_fail)

/* ---- point_read(w, write): D_k for the word w (circuit__point_read) --------
 * out: cc_ok, cc_s, cc_f, cc_S. desc_derive when D_k is not there yet. */
inline point_read(W, WRITE)
{
    cc_k = K(W);
    cc_x = desc[cc_k & 1]; /* acquire load of the slot */
    if
    :: DESC_IS(cc_x, cc_k) ->
        d_step { cc_s = D_SUCC(cc_x); cc_f = D_FAIL(cc_x); cc_S = D_S(cc_x); cc_ok = 1 }
    :: else ->
        /* desc_derive: D_{k-1} and the word at k (D_0 is there from the
         * start, as percpu.c writes it: no point is special) */
        COVER(1);
        cc_p = desc[(cc_k - 1) & 1];
        if
        :: DESC_IS(cc_p, cc_k - 1) ->
            d_step { cc_s = D_SUCC(cc_p); cc_f = D_FAIL(cc_p); cc_S = D_S(cc_p); cc_ok = 1 }
        :: else -> cc_ok = 0
        fi;
        if
        :: cc_ok && FB(W) -> d_step { cc_s = cc_s + SD(W); cc_f = cc_f + XB(W); cc_S = 0 }
        :: cc_ok && !FB(W) && SD(W) >= cc_S ->
            d_step { cc_s = cc_s + SD(W) - cc_S; cc_f = cc_f + XB(W); cc_S = SD(W) }
        :: cc_ok && !FB(W) && SD(W) < cc_S -> COVER(2); cc_ok = 0 /* not D_{k-1}'s word */
        :: else -> skip
        fi;
        if
        :: cc_ok && WRITE ->
            /* read X (above), check the word, CAS X */
            do
            :: atomic {
                   if
                   :: ST(word) != ST_CLOSED || K(word) != cc_k -> COVER(3); cc_ok = 0; break
                   :: else -> skip
                   fi
               };
               atomic {
                   if
                   :: desc[cc_k & 1] == cc_x -> desc[cc_k & 1] = MKD(cc_k, cc_s, cc_f, cc_S); break
                   :: else -> cc_x = desc[cc_k & 1] /* the CAS hands back what it found */
                   fi
               };
               if
               :: DESC_IS(cc_x, cc_k) ->
                   COVER(4); /* written meanwhile by another helper */
                   d_step { cc_s = D_SUCC(cc_x); cc_f = D_FAIL(cc_x); cc_S = D_S(cc_x) };
                   break
               :: else -> skip
               fi
            od
        :: cc_ok && !WRITE ->
            cc_x = desc[cc_k & 1];
            if
            :: DESC_IS(cc_x, cc_k) ->
                d_step { cc_s = D_SUCC(cc_x); cc_f = D_FAIL(cc_x); cc_S = D_S(cc_x) }
            :: else -> skip
            fi
        :: else -> skip
        fi
    fi;
    skip;
    d_step { cc_k = 0; cc_x = 0; cc_p = 0 }
}

#ifdef PLANT_START_NO_CHECK
#define START_NO_CHECK 1
#else
#define START_NO_CHECK 0
#endif
#ifdef PLANT_SEAL_NO_FOREIGN
#define SEAL_NO_FOREIGN 1
#else
#define SEAL_NO_FOREIGN 0
#endif
#ifdef PLANT_SEAL_SKIPS_CELL
#define SKIP_SEAL(i) ((i) == NCPU - 1)
#else
#define SKIP_SEAL(i) 0
#endif

/* ---- cells_seal(wi): seal every cell for wi's epoch, then sum them -------
 * out: sl_ok, sl_sum. */
inline cells_seal(WI)
{
    sl_ok = 1;
    sl_i = 0;
    do
    :: sl_i == NCPU -> break
    :: sl_i < NCPU && sl_ok && SKIP_SEAL(sl_i) -> sl_i++ /* PLANT_SEAL_SKIPS_CELL */
    :: sl_i < NCPU && sl_ok && !SKIP_SEAL(sl_i) ->
        sl_v = cell[sl_i]; /* acquire */
        do
        :: C_EP(sl_v) == EPOCH(WI) && C_SEALED(sl_v) -> break
        :: C_EP(sl_v) == EPOCH(WI) && !C_SEALED(sl_v) ->
            atomic { /* acq_rel CAS to sealed */
                if
                :: cell[sl_i] == sl_v -> cell[sl_i] = sl_v | 128; break
                :: else -> sl_v = cell[sl_i]
                fi
            }
        :: C_EP(sl_v) != EPOCH(WI) ->
            /* another epoch's cell: sealed empty, only while the word holds
             * the intent (read X, check, CAS X) */
            atomic {
                if
                :: LO(word) != LO(WI) || SEAL_NO_FOREIGN -> COVER(5); sl_ok = 0; break
                :: else -> skip
                fi
            };
            atomic {
                if
                :: cell[sl_i] == sl_v -> COVER(6); cell[sl_i] = MKC(1, EPOCH(WI), 0); break
                :: else -> sl_v = cell[sl_i]
                fi
            }
        od;
        sl_i++
    :: sl_i < NCPU && !sl_ok -> break
    od;
    sl_sum = 0;
    sl_i = 0;
    do
    :: sl_i == NCPU || !sl_ok -> break
    :: else ->
        atomic {
            sl_v = cell[sl_i]; /* relaxed, after our own seal */
#ifdef PLANT_SEAL_SKIPS_CELL
            if
            :: C_EP(sl_v) != EPOCH(WI) -> sl_ok = 0
            :: else -> sl_sum = sl_sum + C_CNT(sl_v)
            fi;
#else
            if
            :: C_EP(sl_v) != EPOCH(WI) || !C_SEALED(sl_v) -> sl_ok = 0
            :: else -> sl_sum = sl_sum + C_CNT(sl_v)
            fi;
#endif
            sl_i++
        }
    od;
    skip;
    d_step { sl_i = 0; sl_v = 0 }
}

/* ---- ledger_add(wi, S): the epoch's sum, once (M1) ---- */
inline ledger_add(WI, S)
{
    lg_f = folded; /* acquire */
    do
    :: L_KEY(lg_f) == EPOCH(WI) + 1 -> COVER(7); break /* added by another completer */
    :: else ->
        atomic {
            if
            :: LO(word) != LO(WI) -> break /* only while the word holds the intent */
            :: else -> skip
            fi
        };
        atomic {
            if
            :: folded == lg_f -> folded = MKL(EPOCH(WI) + 1, L_SUM(lg_f) + (S)); break
            :: else -> lg_f = folded
            fi
        }
    od;
    lg_f = 0
}

/* ---- complete(wi): any thread completes the intent of word wi ---- */
inline complete(W)
{
    cp_wi = W;
    if
    :: ST(cp_wi) != ST_CLOSED || INTENT(cp_wi) == I_NONE -> skip
    :: else ->
        point_read(cp_wi, 1);
        if
        :: !cc_ok -> skip
        :: else ->
            cells_seal(cp_wi);
            if
            :: !sl_ok -> COVER(18)
            :: sl_ok && sl_sum < cc_S -> COVER(19)
            :: else ->
                /* (c) the sealed sum is every success the epoch's cells took:
                 * no cell of it can change any more */
                assert(sl_sum == g_ep[EPOCH(cp_wi)]);
                d_step {
                    cp_ns = cc_s + sl_sum - cc_S;
                    cp_nf = cc_f + (INTENT(cp_wi) == I_FAILURE);
                    if
                    :: INTENT(cp_wi) == I_ISOLATE -> COVER(8); cp_to = ST_ISOLATED
                    :: INTENT(cp_wi) == I_FAILURE && ASKED(cp_wi) && sl_sum == SD(cp_wi) ->
                        COVER(9); cp_to = ST_OPEN /* its maker's trip said true for these counts */
                    :: INTENT(cp_wi) == I_FAILURE && !(ASKED(cp_wi) && sl_sum == SD(cp_wi)) &&
                       TRIP(cp_ns, cp_nf) -> COVER(10); cp_to = ST_OPEN
                    :: INTENT(cp_wi) == I_FAILURE && !(ASKED(cp_wi) && sl_sum == SD(cp_wi)) &&
                       !TRIP(cp_ns, cp_nf) -> COVER(11); cp_to = ST_CLOSED
                    :: else -> cp_to = ST_CLOSED
                    fi
                };
                ledger_add(cp_wi, sl_sum);
                if
                :: cp_to != ST_CLOSED ->
                    /* circuit__transition: one CAS from the intent word */
                    atomic {
                        if
                        :: word == cp_wi ->
                            word = cp_to;
                            /* C4: the final counts are exact; (c) every cell sealed */
                            assert(C_SEALED(cell[0]) && C_EP(cell[0]) == EPOCH(cp_wi) &&
                                   C_SEALED(cell[1]) && C_EP(cell[1]) == EPOCH(cp_wi));
                            assert(cp_ns == g_ended + g_ep[EPOCH(cp_wi)] &&
                                   cp_nf == g_fail + (INTENT(cp_wi) == I_FAILURE));
                            g_ended = cp_ns;
                            g_fail = cp_nf;
                            g_sealed[EPOCH(cp_wi)] = sl_sum + 1;
                            g_trans = 1;
                            g_final_succ = cp_ns;
                            g_final_fail = cp_nf
                        :: else -> skip
                        fi
                    }
                :: else ->
                    atomic { /* circuit__fresh_epoch */
                        next_id++;
                        assert(next_id < 16); /* the model's epoch ids do not wrap */
                        cp_e = next_id
                    };
                    atomic {
                        if
                        :: word == cp_wi ->
                            cp_nw = MKW(cp_e, INTENT(cp_wi) == I_FAILURE, 1, I_NONE, 0,
                                        K(cp_wi) + 1, sl_sum - cc_S);
                            word = cp_nw;
                            assert(C_SEALED(cell[0]) && C_EP(cell[0]) == EPOCH(cp_wi) &&
                                   C_SEALED(cell[1]) && C_EP(cell[1]) == EPOCH(cp_wi));
                            assert(K(cp_wi) < 7);
                            g_ended = g_ended + g_ep[EPOCH(cp_wi)];
                            g_fail = g_fail + (INTENT(cp_wi) == I_FAILURE);
                            g_sealed[EPOCH(cp_wi)] = sl_sum + 1;
                            POINT_EXACT(cp_ns, 0, cp_nf)
                        :: else -> COVER(20); cp_nw = 0
                        fi
                    };
                    if
                    :: cp_nw != 0 -> point_read(cp_nw, 1) /* circuit__point_publish: D_{k+1} */
                    :: else -> skip
                    fi
                fi
            fi
        fi
    fi;
    skip;
    d_step { cp_wi = 0; cp_ns = 0; cp_nf = 0; cp_to = 0; cp_e = 0; cp_nw = 0;
             sl_sum = 0; sl_ok = 0; cc_ok = 0; cc_s = 0; cc_f = 0; cc_S = 0 }
}

/* ---- intent_make(w, kind, asked S): CAS w -> w + intent, then complete ----
 * in: in_w (the word, no intent in it); out: in_ok (false: w moved, in_w
 * is the word found). */
inline intent_make(KIND, ASKED_ON, ASKED_S)
{
    atomic {
        if
        :: ASKED_ON -> in_wi = WITH_INTENT(WITH_ASKED(in_w, ASKED_S), KIND)
        :: else -> in_wi = WITH_INTENT(in_w, KIND)
        fi;
        if
        :: word == in_w -> word = in_wi; in_ok = 1
        :: else -> in_w = word; in_ok = 0
        fi
    };
    if
    :: in_ok -> complete(in_wi)
    :: else -> skip
    fi;
    in_wi = 0
}

/* ---- the thread: a script of calls ---- */
proctype thread(byte me)
{
    byte op, opn, cpu;
    bit admitted;
    /* success */
    int sc_lo;
    byte sc_v, sc_ep;
    bit sc_done;
    /* failure */
    int fl_w;
    byte fl_S, fl_i, fl_v, fl_ns, fl_nf, fl_lo, fl_before;
    bit fl_sealed, fl_lim, fl_asked, fl_done;
    /* point_read */
    byte cc_k, cc_s, cc_f, cc_S;
    short cc_x, cc_p;
    bit cc_ok;
    /* cells_seal, ledger_add, complete, intent_make */
    byte sl_i, sl_v, sl_sum;
    bit sl_ok;
    short lg_f;
    int cp_wi, cp_nw, in_w, in_wi;
    byte cp_ns, cp_nf, cp_to, cp_e;
    bit in_ok;

    opn = 0;
    do
    :: opn == MAXOPS -> break
    :: opn < MAXOPS ->
        op = script[me * MAXOPS + opn];
        opn++;
        if
        :: op == OP_NONE -> skip
        :: op == OP_SUCCESS || op == OP_FAILURE ->
            /* allow: admitted while closed (a ticket of the closed generation) */
            atomic {
                if
                :: ST(word) == ST_CLOSED -> admitted = 1; fl_before = g_succ_true
                :: else -> admitted = 0; g_rejected++
                fi
            };
            if
            :: !admitted -> skip
            :: admitted && op == OP_SUCCESS ->
                /* ---- circuit__closed_success ---- */
                if /* circuit__my_cpu: the checker picks it */
                :: cpu = 0
                :: cpu = 1
                fi;
                sc_done = 0;
#ifndef NO_MIRROR
                /* The closed mirror (src/word.h) first: while it is open
                 * for (g, e) the word is closed in g, epoch e, with or
                 * without an intent (tests/model/spin/mirror.pml checks that
                 * rule), and it may be shut at any time before e ends. So
                 * reading it open is reading a closed word's epoch,
                 * whatever its intent; the checker also tries it shut. The
                 * fast path counts only on an unsealed cell of that epoch,
                 * else it falls to the word (below). */
                if
                :: atomic { ST(word) == ST_CLOSED -> sc_ep = EPOCH(word) };
                    sc_v = cell[cpu]; /* relaxed */
                    do
                    :: C_EP(sc_v) == sc_ep && !C_SEALED(sc_v) && C_CNT(sc_v) < CELL_MAX ->
                        atomic { /* relaxed CAS, +1 */
                            if
                            :: cell[cpu] == sc_v ->
                                COVER(21);
                                cell[cpu] = sc_v + 1;
                                g_ep[sc_ep]++;
                                g_succ_true++;
                                sc_done = 1;
                                break
                            :: else -> sc_v = cell[cpu]
                            fi
                        }
                    :: else -> break
                    od
                :: true -> skip /* the mirror shut */
                fi;
                sc_ep = 0;
#endif
                sc_lo = LO(word); /* acquire */
                do
                :: sc_done -> break
                :: !sc_done && ST(sc_lo) != ST_CLOSED ->
                    COVER(14); g_late++; sc_done = 1 /* T2 */
                :: !sc_done && ST(sc_lo) == ST_CLOSED && INTENT(sc_lo) != I_NONE ->
                    in_w = word;
                    complete(in_w);
                    in_w = 0;
                    sc_lo = LO(word)
                :: !sc_done && ST(sc_lo) == ST_CLOSED && INTENT(sc_lo) == I_NONE ->
                    sc_v = cell[cpu]; /* relaxed */
                    do
#ifdef PLANT_COUNT_SEALED
                    :: C_EP(sc_v) == EPOCH(sc_lo) && C_CNT(sc_v) < CELL_MAX ->
#else
                    :: C_EP(sc_v) == EPOCH(sc_lo) && !C_SEALED(sc_v) && C_CNT(sc_v) < CELL_MAX ->
#endif
                        atomic { /* relaxed CAS, +1 */
                            if
                            :: cell[cpu] == sc_v ->
                                cell[cpu] = sc_v + 1;
                                g_ep[EPOCH(sc_lo)]++;
                                g_succ_true++;
                                sc_done = 1;
                                break
                            :: else -> sc_v = cell[cpu]
                            fi
                        }
                    :: else -> break
                    od;
                    if
                    :: sc_done -> skip
                    :: else ->
                        sc_v = cell[cpu]; /* acquire */
                        if
                        :: C_EP(sc_v) == EPOCH(sc_lo) && !C_SEALED(sc_v) && C_CNT(sc_v) < CELL_MAX ->
                            skip /* changed under us: count again (lo unchanged) */
                        :: C_EP(sc_v) == EPOCH(sc_lo) && !C_SEALED(sc_v) && C_CNT(sc_v) >= CELL_MAX ->
                            /* at its limit: the epoch ends by a FOLD */
                            in_w = word;
                            if
                            :: LO(in_w) == sc_lo ->
                                point_read(in_w, 1);
                                if
                                :: cc_ok -> COVER(12); intent_make(I_FOLD, 0, 0)
                                :: else -> skip
                                fi
                            :: else -> skip
                            fi;
                            in_w = 0;
                            sc_lo = LO(word)
                        :: C_EP(sc_v) != EPOCH(sc_lo) && C_SEALED(sc_v) ->
                            /* an ended epoch's cell: start it for ours (read X,
                             * check the word, CAS X) */
                            if
                            :: LO(word) == sc_lo || START_NO_CHECK ->
                                atomic {
                                    if
                                    :: cell[cpu] == sc_v ->
                                        COVER(13);
                                        cell[cpu] = MKC(0, EPOCH(sc_lo), 1);
                                        g_ep[EPOCH(sc_lo)]++;
                                        g_succ_true++;
                                        sc_done = 1
                                    :: else -> skip
                                    fi
                                }
                            :: else -> skip
                            fi;
                            if
                            :: !sc_done -> sc_lo = LO(word)
                            :: else -> skip
                            fi
                        :: else -> sc_lo = LO(word) /* sealed for ours, or a later epoch */
                        fi
                    fi;
                    sc_v = 0
                od;
                skip;
                d_step { sc_lo = 0; sc_done = 0; cpu = 0 }
            :: admitted && op == OP_FAILURE ->
                /* ---- circuit__closed_failure ---- */
                fl_w = word; /* acquire */
                fl_done = 0;
                do
                :: fl_done -> break
                :: !fl_done && ST(fl_w) != ST_CLOSED ->
                    COVER(15); g_late++; fl_done = 1 /* T2 */
                :: !fl_done && ST(fl_w) == ST_CLOSED && INTENT(fl_w) != I_NONE ->
                    complete(fl_w);
                    fl_w = word
                :: !fl_done && ST(fl_w) == ST_CLOSED && INTENT(fl_w) == I_NONE ->
                    point_read(fl_w, 1); /* closed_help */
                    if
                    :: !cc_ok -> fl_w = word
                    :: else ->
                        /* cells_sum: one relaxed load per cell */
                        fl_S = 0; fl_sealed = 0; fl_lim = 0; fl_i = 0;
                        do
                        :: fl_i == NCPU -> break
                        :: else ->
                            atomic {
                                if
                                :: fl_i == 0 -> fl_lo = g_ep[EPOCH(fl_w)] /* ghost: the true sum at the read's start */
                                :: else -> skip
                                fi;
                                fl_v = cell[fl_i];
                                if
                                :: C_EP(fl_v) == EPOCH(fl_w) ->
                                    fl_S = fl_S + C_CNT(fl_v);
                                    fl_sealed = fl_sealed | C_SEALED(fl_v);
                                    fl_lim = fl_lim | (C_CNT(fl_v) >= CELL_MAX)
                                :: else -> skip
                                fi;
                                fl_i++
                            }
                        od;
                        fl_v = 0;
                        fl_asked = 0;
                        if
                        :: fl_sealed || fl_lim -> skip /* the point must end the epoch */
                        :: !(fl_sealed || fl_lim) && fl_S < cc_S -> COVER(16); fl_w = word; fl_S = 0 /* not c's word */
                        :: !(fl_sealed || fl_lim) && fl_S >= cc_S ->
                            d_step { fl_ns = cc_s + fl_S - cc_S; fl_nf = cc_f + 1 };
                            /* the re-read of the word after the cell reads, and
                             * ask_trip with exact counts (S2 as amended): (b) */
#ifndef PLANT_NO_RECHECK
                            atomic {
                                if
                                :: word != fl_w -> COVER(17); fl_w = word; fl_ns = 0
                                :: else ->
#endif
                                    /* the sum lies between the true totals at the
                                     * start and the end of the read */
                                    assert(fl_lo <= fl_S && fl_S <= g_ep[EPOCH(fl_w)]);
                                    /* exact, this failure included (C1, C2) */
                                    assert(fl_ns - fl_S == g_ended && fl_nf == g_fail + 1);
                                    /* every success whose done returned before
                                     * this call began is in (S2 as amended) */
                                    assert(fl_ns >= fl_before);
                                    fl_asked = 1
#ifndef PLANT_NO_RECHECK
                                fi
                            };
#endif
                            if
                            :: fl_asked && !TRIP(fl_ns, fl_nf) ->
                                fl_asked = 0;
                                /* ONE CAS to {k + 1, X, S} */
                                atomic {
                                    if
                                    :: word == fl_w ->
                                        assert(K(fl_w) < 7);
                                        word = MKW(EPOCH(fl_w), 1, 0, I_NONE, 0, K(fl_w) + 1, fl_S);
                                        fl_w = word;
                                        g_fail++;
                                        POINT_EXACT(fl_ns, fl_S, fl_nf);
                                        fl_done = 1
                                    :: else -> fl_w = word
                                    fi
                                };
                                if
                                :: fl_done ->
                                    point_read(fl_w, 1); /* circuit__point_publish: D_{k+1} */
                                    g_fail_true++
                                :: else -> skip
                                fi
                            :: else -> skip /* fl_asked: trip said true */
                            fi
                        fi;
                        if
                        :: !fl_done && (fl_sealed || fl_lim || fl_asked) ->
                            /* intent_make(FAILURE): the point ends the epoch */
                            in_w = fl_w;
                            intent_make(I_FAILURE, fl_asked, fl_S);
                            if
                            :: in_ok -> g_fail_true++; fl_done = 1
                            :: else -> fl_w = in_w
                            fi;
                            in_w = 0
                        :: else -> skip
                        fi
                    fi;
                    skip;
                    d_step { fl_S = 0; fl_sealed = 0; fl_lim = 0; fl_asked = 0; fl_ns = 0;
                             fl_nf = 0; fl_lo = 0; fl_i = 0; cc_ok = 0; cc_s = 0; cc_f = 0; cc_S = 0 }
                od;
                skip;
                d_step { fl_w = 0; fl_done = 0 }
            fi;
            skip;
            d_step { admitted = 0; fl_before = 0 }
        :: op == OP_ISOLATE ->
            /* ---- breaker.c isolate from closed ---- */
            in_w = word; /* acquire */
            do
            :: ST(in_w) != ST_CLOSED -> break /* it left closed: not modelled further */
            :: ST(in_w) == ST_CLOSED && INTENT(in_w) != I_NONE ->
                complete(in_w);
                in_w = word
            :: ST(in_w) == ST_CLOSED && INTENT(in_w) == I_NONE ->
                /* circuit__closed_isolate: closed_help, intent_make(ISOLATE) */
                point_read(in_w, 1);
                if
                :: !cc_ok -> in_w = word
                :: else ->
                    intent_make(I_ISOLATE, 0, 0);
                    if
                    :: in_ok -> break
                    :: else -> skip
                    fi
                fi
            od;
            skip;
            d_step { in_w = 0; in_ok = 0; cc_ok = 0; cc_s = 0; cc_f = 0; cc_S = 0 }
        fi;
progress_op:
        skip
    od
}

init {
    byte t, i, e, sum;
    d_step {
        desc[0] = MKD(0, 0, 0, 0);
        script[0] = T0_OP1; script[1] = T0_OP2;
        script[2] = T1_OP1; script[3] = T1_OP2;
        script[4] = T2_OP1; script[5] = T2_OP2
    };
    atomic {
        t = 0;
        do
        :: t < NTHREADS -> run thread(t); t++
        :: else -> break
        od
    };
    (_nr_pr == 1); /* every thread has finished */
    d_step {
        /* every call settled: counted, late or not admitted */
        t = 0; i = 0;
        do
        :: i < NTHREADS * MAXOPS ->
            if
            :: script[i] == OP_SUCCESS || script[i] == OP_FAILURE -> t++
            :: else -> skip
            fi;
            i++
        :: else -> break
        od;
        assert(g_succ_true + g_fail_true + g_late + g_rejected == t);
        /* no intent is left for no one to complete */
        assert(ST(word) != ST_CLOSED || INTENT(word) == I_NONE);
        /* (a) no success lost or counted twice: the ledger holds the ended
         * epochs' sums, the live epoch's cells the rest */
        sum = 0;
        if
        :: ST(word) == ST_CLOSED ->
            i = 0;
            do
            :: i < NCPU ->
                if
                :: C_EP(cell[i]) == EPOCH(word) -> sum = sum + C_CNT(cell[i])
                :: else -> skip
                fi;
                i++
            :: else -> break
            od
        :: else -> skip
        fi;
        assert(L_SUM(folded) + sum == g_succ_true);
        /* (c) no success landed in an epoch's cells after its seal and sum */
        e = 0;
        do
        :: e < 16 ->
            assert(g_sealed[e] == 0 || g_sealed[e] == g_ep[e] + 1);
            e++
        :: else -> break
        od;
        /* the counts now are exact: D_k and the cells since, or the final
         * counts of the transition (C4), late results excluded (T2) */
        if
        :: ST(word) == ST_CLOSED ->
            assert(DESC_IS(desc[K(word) & 1], K(word))); /* the helping invariant */
            assert(D_SUCC(desc[K(word) & 1]) + sum - D_S(desc[K(word) & 1]) == g_succ_true &&
                   D_FAIL(desc[K(word) & 1]) == g_fail_true)
        :: else ->
            assert(g_trans && g_final_succ == g_succ_true && g_final_fail == g_fail_true)
        fi
    }
}
