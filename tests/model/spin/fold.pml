/*
 * fold.pml: the per-CPU fold protocol of the healthy fast path (SPEC L6, with
 * C1, C2, C4 and T2), every interleaving of three threads, checked by SPIN.
 * README.md beside it explains the model; run-spin.sh runs it:
 *
 *   spin -a fold.pml && cc -O2 -DSAFETY -o pan pan.c && ./pan -m100000
 *
 * Planted bugs (each must make pan report an error):
 *   -DPLANT_SUM_BEFORE_SEAL  the fold sums the records before sealing them
 *   -DPLANT_ENTRY_NO_CHECK   entry resets a record without first checking
 *                            that the state word is still the one it entered
 *                            from
 * Other switches:
 *   -DFINE_GRAINED           the two single-record CAS loops (a fast success's
 *                            increment, a fold's seal) as the load + CAS +
 *                            retry loops the C code runs, not as the one
 *                            atomic step each implements (more states, same
 *                            verdicts)
 *   -DNO_PROGRESS_ASSERT     leave out the assertion that a fold leaves the
 *                            word changed, so that a fold that can never
 *                            finish shows as a non-progress cycle (-DNP)
 *   -DT<t>_OP<n>=<op>        the script: operation n (1, 2) of thread t (0-2)
 *
 * GRANULARITY: every atomic step below makes at most ONE access to shared
 * memory (the state word, one record, next_id), plus local computation and
 * ghost bookkeeping, so the interleavings explored are those of the
 * hardware's single accesses (sequentially consistent: README.md).
 */

#define NCPU 2
#define NTHREADS 3
#define MAXOPS 2

/* ---- the 16-byte state word, as one int read and written whole ---- */
#define W_FAST  1                    /* fast mode: successes go to the records */
#define W_FAIL  2                    /* the window (1 result) holds a failure */
#define W_FULL  4                    /* the window's fill: 0 or 1 */
#define GEN_SH  3                    /* 3 bits of generation */
#define ID_SH   8                    /* 8 bits of interval id (fast mode only) */
#define SEQ_SH  16                   /* 8 bits: results counted in this generation */
#define RUN_SH  24                   /* 7 bits: consecutive successes */
#define GEN(w)  (((w) >> GEN_SH) & 7)
#define ID(w)   (((w) >> ID_SH) & 255)
#define SEQ(w)  (((w) >> SEQ_SH) & 255)
#define RUN(w)  (((w) >> RUN_SH) & 127)
#define FAST(w) ((w) & W_FAST)
#define FAIL(w) (((w) & W_FAIL) / W_FAIL)
#define FULL(w) (((w) & W_FULL) / W_FULL)
#define MKWORD(fast, fail, full, gen, id, seq, run) \
    ((fast) * W_FAST + (fail) * W_FAIL + (full) * W_FULL + ((gen) << GEN_SH) + \
     ((id) << ID_SH) + ((seq) << SEQ_SH) + ((run) << RUN_SH))

/* ---- a per-CPU record: one 8-byte word {sealed:1, id, count} ---- */
#define R_SEALED_BIT 65536
#define R_ID_SH      8
#define R_CNT(v)     ((v) & 255)
#define R_ID(v)      (((v) >> R_ID_SH) & 255)
#define R_SEALED(v)  (((v) & R_SEALED_BIT) / R_SEALED_BIT)
#define MKREC(sealed, id, cnt) ((sealed) * R_SEALED_BIT + ((id) << R_ID_SH) + (cnt))
#define LIVE(v, x)   (R_ID(v) == (x) && !R_SEALED(v))

/* ---- the operations of the scripts ---- */
#define OP_NONE       0
#define OP_SUCCESS    1  /* allow, then done(success) */
#define OP_FAILURE    2  /* allow, then done(failure) */
#define OP_FOLD       3  /* wants exact counts: a stats read, isolate's first step */
#define OP_TRANSITION 4  /* fold, then a new generation with zero counts */
#define OP_ANY        5  /* FAILURE, FOLD or TRANSITION: the checker tries each */

/* The scripts, two operations per thread. The default is the brief's mix:
 * T0 success, success; T1 failure | fold | transition; T2 success. */
#ifndef T0_OP1
#define T0_OP1 OP_SUCCESS
#endif
#ifndef T0_OP2
#define T0_OP2 OP_SUCCESS
#endif
#ifndef T1_OP1
#define T1_OP1 OP_ANY
#endif
#ifndef T1_OP2
#define T1_OP2 OP_NONE
#endif
#ifndef T2_OP1
#define T2_OP1 OP_SUCCESS
#endif
#ifndef T2_OP2
#define T2_OP2 OP_NONE
#endif

/* circuit_new: closed, fast mode with interval 1, both records {1, 0} */
int word = MKWORD(1, 0, 0, 0, 1, 0, 0);
int r[NCPU];
byte next_id = 1; /* the shared interval counter (fetch_add) */
byte script[NTHREADS * MAXOPS];

/* Ghosts: what the counts must be. Each counting step (a record CAS, a state
 * word CAS) updates them in the same atomic step. */
byte g_count;   /* results counted in the current generation */
byte g_run;     /* consecutive successes in the current generation */
bit  g_fail;    /* the last result counted in this generation is a failure */
byte g_carried; /* results counted in generations already left */
byte g_true;    /* results whose done returned true */
byte g_late;    /* results whose done returned false */
byte g_started; /* results admitted */

/* Every write of the state word carries the exact counts (C1, C2). */
#define EXACT(nw) \
    assert(SEQ(nw) == g_count && RUN(nw) == g_run && FAIL(nw) == g_fail && \
           FULL(nw) == (g_count > 0))

/* Seal r[i] if it is a live record of w's interval. */
inline seal(i, w, v, ok)
{
#ifdef FINE_GRAINED
    v = r[i];
    do
    :: LIVE(v, ID(w)) ->
        atomic {
            if
            :: r[i] == v -> r[i] = v | R_SEALED_BIT; ok = 1
            :: else -> v = r[i]; ok = 0 /* the CAS hands back what it found */
            fi
        };
        if
        :: ok -> break
        :: else -> skip
        fi
    :: else -> break
    od;
    skip;
    d_step { v = 0; ok = 0 }
#else
    /* the load + CAS + retry loop on r[i], as the one atomic step it
     * implements: it writes only at its successful CAS */
    atomic {
        if
        :: LIVE(r[i], ID(w)) -> r[i] = r[i] | R_SEALED_BIT
        :: else -> skip
        fi
    }
#endif
}

/* Add r[i] to the fold's sum, unless an earlier record showed another id. */
inline sum_one(i, w, v, sum, foreign)
{
    atomic {
        if
        :: foreign -> skip
        :: else ->
            v = r[i];
            if
            :: R_ID(v) == ID(w) ->
#ifndef PLANT_SUM_BEFORE_SEAL
                assert(R_SEALED(v)); /* sealed stays sealed until the next entry */
#endif
                sum = sum + R_CNT(v)
            :: else -> foreign = 1 /* an entry reused it: this fold is finished */
            fi;
            v = 0
        fi
    }
}

/*
 * FOLD the fast interval of w (FAST, id X), by any thread that needs exact
 * counts: seal every record of X, sum them, one CAS of the state word from w.
 * A thread stopped anywhere in here stops nobody: every other thread that
 * finds w does the same and one CAS wins.
 */
inline fold(w, v, sum, ok, foreign)
{
#ifndef PLANT_SUM_BEFORE_SEAL
    seal(0, w, v, ok);
    seal(1, w, v, ok);
#endif
    sum_one(0, w, v, sum, foreign);
    sum_one(1, w, v, sum, foreign);
#ifdef PLANT_SUM_BEFORE_SEAL
    seal(0, w, v, ok);
    seal(1, w, v, ok);
#endif
    atomic {
        if
        :: !foreign && word == w ->
            word = MKWORD(0, 0, (FULL(w) || sum > 0), GEN(w), 0, SEQ(w) + sum, RUN(w) + sum);
            EXACT(word)
        :: else -> skip /* lost the CAS, or found the fold finished */
        fi;
        /* Progress: the caller goes round only because the word moved
         * (this CAS or another thread's); w, FAST with a unique id, never
         * comes back. */
#ifndef NO_PROGRESS_ASSERT
        assert(word != w);
#endif
        sum = 0; foreign = 0
    }
}

/*
 * ENTRY into fast mode, by the thread whose slow-path success wrote W (slow,
 * no failure in the window): a fresh id, every record reset to it, then one
 * CAS of the state word from W.
 */
inline enter(W, X, i, v)
{
    atomic { next_id++; X = next_id; i = 0 } /* fetch_add(next_id) + 1 */
    do
    :: i < NCPU ->
        v = r[i];
#ifndef PLANT_ENTRY_NO_CHECK
        if
        :: word != W -> goto entry_done /* the word moved: abandon the entry */
        :: else -> skip
        fi;
#endif
        atomic {
            if
            :: r[i] == v -> r[i] = MKREC(0, X, 0); i++
            :: else -> skip /* changed under us: load it again */
            fi;
            v = 0
        }
    :: else -> break
    od;
    atomic {
        if
        :: word == W -> word = W | W_FAST | (X << ID_SH)
        :: else -> skip /* the word moved: abandon the entry */
        fi
    };
entry_done:
    skip;
    d_step { X = 0; i = 0; v = 0 }
}

proctype thread(byte me)
{
    byte k, op, tg, c, X, i, sum;
    bit ok, foreign, success;
    int w, v, nw;

    do
    :: k == MAXOPS -> break
    :: k < MAXOPS ->
        atomic {
            op = script[me * MAXOPS + k];
            if
            :: op == OP_ANY ->
                if
                :: op = OP_FAILURE
                :: op = OP_FOLD
                :: op = OP_TRANSITION
                fi
            :: else -> skip
            fi
        };
        if
        :: op == OP_SUCCESS || op == OP_FAILURE ->
            /* allow: closed admits every call; the ticket keeps the generation */
            atomic { tg = GEN(word); g_started++; success = (op == OP_SUCCESS) };

            /* done, the fast path (a success only): read the word; if FAST in
             * the ticket's generation, one CAS on this CPU's record */
            if
            :: success ->
                atomic {
                    w = word;
                    if
                    :: FAST(w) && GEN(w) == tg ->
                        if /* the CPU: threads migrate, any record may be used */
                        :: c = 0
                        :: c = 1
                        fi
                    :: else -> c = NCPU /* not fast: the slow path */
                    fi
                };
                if
                :: c < NCPU ->
#ifdef FINE_GRAINED
                    v = r[c];
                    do
                    :: !LIVE(v, ID(w)) -> break /* sealed or reused: the slow path */
                    :: else ->
                        atomic {
                            if
                            :: r[c] == v ->
                                r[c] = v + 1; g_count++; g_run++; g_true++;
                                goto op_done
                            :: else -> v = r[c]
                            fi
                        }
                    od
#else
                    atomic {
                        if
                        :: LIVE(r[c], ID(w)) ->
                            r[c] = r[c] + 1; g_count++; g_run++; g_true++;
                            goto op_done /* counted: done returns true */
                        :: else -> skip /* sealed or reused: the slow path */
                        fi
                    }
#endif
                :: else -> skip
                fi
            :: else -> skip
            fi;

            /* done, the slow path: fold if fast, then one CAS of the word */
slow:
            atomic {
                w = word;
                if
                :: GEN(w) != tg -> g_late++; goto op_done /* late: done returns false */
                :: else -> skip
                fi
            };
            if
            :: FAST(w) ->
                fold(w, v, sum, ok, foreign);
                goto slow
            :: else ->
                atomic {
                    if
                    :: success -> nw = MKWORD(0, 0, 1, GEN(w), 0, SEQ(w) + 1, RUN(w) + 1)
                    :: else -> nw = MKWORD(0, 1, 1, GEN(w), 0, SEQ(w) + 1, 0)
                    fi;
                    if
                    :: word == w ->
                        word = nw; g_count++; g_true++;
                        if
                        :: success -> g_run++; g_fail = 0
                        :: else -> g_run = 0; g_fail = 1
                        fi;
                        EXACT(nw)
                    :: else -> goto slow /* the CAS failed: read the word again */
                    fi
                };
                if
                :: success -> enter(nw, X, i, v) /* window 1: no failure left in it */
                :: else -> skip
                fi
            fi

        :: op == OP_FOLD ->
fold_again:
            atomic { w = word };
            if
            :: FAST(w) -> fold(w, v, sum, ok, foreign); goto fold_again
            :: else -> skip /* exact counts in the word */
            fi

        :: op == OP_TRANSITION ->
transition_again:
            atomic { w = word };
            if
            :: FAST(w) -> fold(w, v, sum, ok, foreign); goto transition_again
            :: else ->
                atomic {
                    if
                    :: word == w ->
                        EXACT(w); /* the transition carries the exact final counts (C4) */
                        g_carried = g_carried + SEQ(w);
                        word = MKWORD(0, 0, 0, GEN(w) + 1, 0, 0, 0);
                        g_count = 0; g_run = 0; g_fail = 0
                    :: else -> goto transition_again
                    fi
                }
            fi
        :: else -> skip
        fi;
op_done:
progress_op:
        skip;
        d_step {
            k++; op = 0; tg = 0; c = 0; X = 0; i = 0; sum = 0; ok = 0; foreign = 0;
            success = 0; w = 0; v = 0; nw = 0
        }
    od
}

init {
    byte sum;
    bit ok, foreign;
    int w, v;

    atomic {
        r[0] = MKREC(0, 1, 0);
        r[1] = MKREC(0, 1, 0);
        script[0] = T0_OP1; script[1] = T0_OP2;
        script[2] = T1_OP1; script[3] = T1_OP2;
        script[4] = T2_OP1; script[5] = T2_OP2;
        run thread(0);
        run thread(1);
        run thread(2)
    };
    (_nr_pr == 1); /* every thread has finished */

    /* One final fold; then every result whose done returned true is counted
     * exactly once, and nothing else is. */
    w = word;
    if
    :: FAST(w) -> fold(w, v, sum, ok, foreign)
    :: else -> skip
    fi;
    assert(!FAST(word));
    EXACT(word);
    assert(g_carried + SEQ(word) == g_true);
    assert(g_true + g_late == g_started) /* every admitted result settled */
}
