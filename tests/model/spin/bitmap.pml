/*
 * bitmap.pml: the closed window's tagged bitmap of src/closed_state.c (the top
 * comment, "THE BITMAP'S UPDATES"; docs/CONTRACT.md L6 and L8 as amended in
 * 0.3, with C1, C2 and L1), every interleaving of three threads, checked by
 * SPIN. README.md beside it explains the model; run-spin.sh runs it:
 *
 *   spin -a bitmap.pml && cc -O2 -DSAFETY -DCOLLAPSE -o pan pan.c && ./pan -m100000
 *
 * A window of W = 4 results, kept as 2 bitmap words of 2 bits each, each
 * word {tag, bits}. Exact point k appends n results (d successes, then a
 * failure if X); the word says what (here d and X directly: in C, d is
 * S - S_{k-1} or a fold's d). After the word's CAS to k: D_k is written,
 * then U(k) is applied word by word (CAS from a word tagged before k to
 * {k, (bits & ~clear) | set}); anyone may do either (closed_help), and
 * before the word leaves k both are complete.
 *
 * Planted bugs (each must make pan report an error):
 *   -DPLANT_UNTAGGED_START  bits_start (transition.c) stores {k0, 0} after its
 *                           check of the state word without comparing the
 *                           word it read: a stopped zeroer wipes a point of
 *                           the closed state another thread entered
 *   -DPLANT_UNTAGGED_APPLY  bits_update_apply does not test the tag: a stale helper
 *                           applies U(k) over a word a later point updated
 *   -DPLANT_UPD_BEFORE_DESC circuit__point_publish applies U(k) before writing D_k: a
 *                           deriver of D_k finds the bitmap moved past
 *                           B(k - 1) and no D_k, on a word still at k
 *   -DPLANT_NO_HELP         a failure maker does not complete U(k) (only D_k)
 *                           before it computes point k + 1 from B(k)
 * Other switches:
 *   -DT<t>_OP<n>=<op>       the script: operation n (1, 2) of thread t (0-2):
 *                           1 point, 2 help (a possibly stale closed_help),
 *                           3 stats read, 4 exit closed, 5 enter closed;
 *                           default T0 point, T1 point, T2 help
 *   -DCOVER_AT=<n>          fail where the COVER(n) step is reached: shows that
 *                           the search reaches it (README.md lists them)
 *   -DINIT_ISOLATED         start isolated (the next closed state's k0 = 3)
 *                           with the bitmap words left by an older state
 *   -DDMAX=<n>              the most successes a point appends (default 3)
 *
 * GRANULARITY. Every atomic step makes at most ONE access to shared memory
 * (the state word, one descriptor slot, one bitmap word): a load is a step,
 * a CAS is a step (compare and write together, a d_step), and the local
 * computation after a load is folded into the load's step (it touches
 * nothing shared). Ghost variables (g_*) are updated in the step of the
 * access they describe and read only by assertions.
 *
 * THE MAP (Promela -> C):
 *   point()       circuit__closed_failure (the no-trip path) and the fold
 *                 CAS of circuit__complete: word load, closed_help, point_append
 *                 from B(k) (bits_count, NULL virt), the re-read of the
 *                 word, ONE CAS to {k+1, d, X}, circuit__point_publish
 *   help()        closed_help from a word read earlier (a stopped thread)
 *   stats()       circuit__closed_counts_at: point_read (write = 0), circuit__bits_update_of,
 *                 point_append with virt = U(k), the re-read of the word
 *   exit_closed() closed_help, then the CAS out of closed (in C an intent
 *                 first and its completion; k_next = k + 2 kept in the word)
 *   enter_closed() transition.c: bits_start, desc_start, the CAS in
 *   point_read()   circuit__point_read + desc_derive
 *   circuit__bits_update_of(), bits_update_apply(), point_append(), bits_count(): the C functions
 *
 * PROPERTIES: (a) a maker's counts are the sequential reference's, in its
 * point's CAS; (b) a validated stats read has the true counts; (c) the
 * bitmap is the true window B(k) when the word leaves k, every word is
 * {k0, 0} at entry; every D_k written is the true one; (d) helping fails
 * only on a stale word; with -DNP, no non-progress cycle (L1).
 *
 * ABSTRACTED AWAY: the cells, epochs, S and intents (counting.pml models
 * them); the run and last outcome (they are in the descriptor, not the
 * bitmap); seq_mod (seq is kept modulo W with the `full` flag, which is
 * all the indices need); the 2^20-points retagging of a word U(k) leaves
 * unchanged (never reached at these bounds: such a word is skipped); the
 * trip (every point stays closed; exit_closed is an isolate). Tags are k
 * itself, compared as integers (no wrap at these bounds).
 */

#define W 4
#ifdef COVER_AT
#define COVER(n) assert(COVER_AT != (n))
#else
#define COVER(n) skip
#endif
#define NTHREADS 3
#define MAXOPS 2
#define KMAX 16

#define OP_NONE 0
#define OP_POINT 1
#define OP_HELP 2
#define OP_READ 3
#define OP_EXIT 4
#define OP_ENTER 5

#ifndef DMAX
#define DMAX 3
#endif

#ifndef T0_OP1
#define T0_OP1 OP_POINT
#endif
#ifndef T0_OP2
#define T0_OP2 OP_NONE
#endif
#ifndef T1_OP1
#define T1_OP1 OP_POINT
#endif
#ifndef T1_OP2
#define T1_OP2 OP_NONE
#endif
#ifndef T2_OP1
#define T2_OP1 OP_HELP
#endif
#ifndef T2_OP2
#define T2_OP2 OP_NONE
#endif

/* the state word: state (0 closed, 1 isolated), gen, k, and what point k
 * appended: d successes, then a failure if x. Isolated: k = the next closed
 * state's k0 (C: b->k_next). */
#define CL 0
#define ISO 1
#define MKW(st, g, k, d, x) ((st) | ((g) << 1) | ((k) << 4) | ((d) << 9) | ((x) << 12))
#define WST(w) ((w) & 1)
#define WGEN(w) (((w) >> 1) & 7)
#define WK(w) (((w) >> 4) & 31)
#define WD(w) (((w) >> 9) & 7)
#define WX(w) (((w) >> 12) & 1)
/* counts: seq (next position mod W), full, failures in the window */
#define MKC(seq, full, fail) ((seq) | ((full) << 2) | ((fail) << 3))
#define CSEQ(c) ((c) & 3)
#define CFULL(c) (((c) >> 2) & 1)
#define CFAIL(c) (((c) >> 3) & 7)
/* a descriptor slot: {tag k, counts} */
#define MKD(k, c) ((k) | ((c) << 5))
#define DK(x) ((x) & 31)
#define DC(x) ((x) >> 5)
/* a bitmap word: {tag, 2 bits} (bit i % 2 of word i / 2 = ring index i) */
#define MKB(t, b) ((t) | ((b) << 5))
#define BTAG(x) ((x) & 31)
#define BBITS(x) ((x) >> 5)
#define PC2(v) (((v) & 1) + (((v) >> 1) & 1))
#define PC4(v) (PC2(v) + PC2((v) >> 2))

short core;
short D[2];
byte bw[2];
/* ghost: the true window at the word's current point (bit i = ring index i
 * holds a failure), its seq and full; gD[k] = the true D_k counts */
byte g_bits, g_seq;
bit g_full;
byte gD[KMAX];

byte script[NTHREADS * MAXOPS];

/* (c) the bitmap holds B(k) = the true window, in the step the word leaves
 * point k (U(k) must be complete by then), and no word is tagged after k */
#define BITMAP_IS_TRUE(k) \
    assert(BBITS(bw[0]) == (g_bits & 3) && BBITS(bw[1]) == (g_bits >> 2) && \
           BTAG(bw[0]) <= (k) && BTAG(bw[1]) <= (k))

/* the ring indices s .. s + m - 1 (mod W) that fall in word j, as a mask */
inline range_mask(j, s, m, out)
{
    out = 0; ri = 0;
    do
    :: ri < m ->
        if
        :: ((s + ri) % W) / 2 == j -> out = out | (1 << (((s + ri) % W) % 2))
        :: else -> skip
        fi;
        ri++
    :: else -> break
    od;
    ri = 0
}

/* what update {us, um, uset} does to word j (uset = W: no failure) */
inline bits_update_masks(j)
{
    range_mask(j, us, um, clr);
    if
    :: uset < W && uset / 2 == j -> set = 1 << (uset % 2)
    :: else -> set = 0
    fi
}

/* bits_count: the failures at indices s .. s + m - 1 of B(k); with virt,
 * U(k) = {us, um, uset} is applied to a copy of each word tagged before k.
 * fresh = 0 when a word is tagged after k. One step per word read. */
inline bits_count(k, virt, s, m)
{
    gone = 0; fresh = 1; jj = s / 2; t = 0;
    do
    :: t < 2 ->
        d_step { range_mask(jj, s, m, msk) };
        if
        :: msk != 0 ->
            d_step {
                bx = bw[jj];
                if
                :: BTAG(bx) > k -> fresh = 0; COVER(2)
                :: else ->
                    bits = BBITS(bx);
                    if
                    :: virt && BTAG(bx) < k ->
                        bits_update_masks(jj);
                        if :: ((bits & (3 ^ clr)) | set) != bits -> COVER(1) :: else -> skip fi;
                        bits = (bits & (3 ^ clr)) | set
                    :: else -> skip
                    fi;
                    gone = gone + PC2(bits & msk)
                fi;
                bx = 0; bits = 0; clr = 0; set = 0
            };
            if
            :: !fresh -> break
            :: else -> skip
            fi
        :: else -> skip
        fi;
        jj = 1 - jj; t++
    :: else -> break
    od;
    atomic { jj = 0; t = 0; msk = 0 }
}

/* point_append: cout = cin + d successes, then a failure if xf, counting the
 * evicted failures in B(k). fresh = 0: the bitmap has moved past k. */
inline point_append(k, virt, cin, d, xf)
{
    d_step { nn = d + xf; fresh = 1; gone = 0; fl = CFAIL(cin) };
    if
    :: nn == 0 -> cout = cin
    :: else ->
        if
        :: nn >= W -> fl = xf; COVER(10)
        :: else ->
            if
            :: fl > 0 -> bits_count(k, virt, CSEQ(cin), nn);
                if
                :: fresh -> fl = (gone < fl -> fl - gone : 0)
                :: else -> skip
                fi
            :: else -> skip
            fi;
            fl = fl + xf
        fi;
        cout = MKC((CSEQ(cin) + nn) % W, (CFULL(cin) || CSEQ(cin) + nn >= W -> 1 : 0), fl)
    fi;
    d_step { nn = 0; fl = 0; gone = 0 }
}

/* point_read (+ desc_derive): c = D_k of word w, from its slot or derived
 * from D_{k-1} and B(k - 1); with wr, written by "read X, check the word,
 * CAS X". ok = 0 when w is stale. */
inline point_read(w, wr)
{
    ok = 1;
    xd = D[WK(w) & 1];
    if
    :: DK(xd) == WK(w) -> c = DC(xd)
    :: else ->
        /* desc_derive */
        p = D[(WK(w) - 1) & 1];
        if
        :: DK(p) != WK(w) - 1 -> fresh = 0
        :: else -> point_append(WK(w) - 1, 0, DC(p), WD(w), WX(w)); c = cout
        fi;
        p = 0;
        if
        :: !fresh ->
            /* D_{k-1} gone, or U(k) begun: then D_k is there */
            xd = D[WK(w) & 1];
            if
            :: DK(xd) == WK(w) -> c = DC(xd); COVER(3)
            :: else -> ok = 0
            fi
        :: fresh && wr ->
            do
            :: now = core;
                if
                :: WST(now) != CL || WGEN(now) != WGEN(w) || WK(now) != WK(w) -> ok = 0; break
                :: else -> skip
                fi;
                d_step {
                    if
                    :: D[WK(w) & 1] == xd ->
                        assert(c == gD[WK(w)]); /* every writer writes the true D_k */
                        D[WK(w) & 1] = MKD(WK(w), c); cas = 1; COVER(4)
                    :: else -> xd = D[WK(w) & 1]; cas = 0
                    fi
                };
                if
                :: cas -> break
                :: DK(xd) == WK(w) ->
                    assert(DC(xd) == c); /* every thread derives the same D_k */
                    COVER(5);
                    break
                :: else -> skip
                fi
            od
        :: fresh && !wr ->
            xd = D[WK(w) & 1];
            if
            :: DK(xd) == WK(w) -> c = DC(xd)
            :: else -> skip
            fi
        fi
    fi;
    atomic { xd = 0; now = 0; cas = 0; fresh = 0; cout = 0 }
}

/* circuit__bits_update_of: U(k) = {us, um, uset} of word w whose D_k is c. ok = 0 when
 * D_{k-1} is gone (w is stale). */
inline circuit__bits_update_of(w)
{
    us = 0; um = 0; uset = W; ok = 1;
    if
    :: !CFULL(c) && CSEQ(c) == 0 -> skip /* the state's first point */
    :: else ->
        p = D[(WK(w) - 1) & 1];
        if
        :: DK(p) != WK(w) - 1 -> ok = 0; COVER(6)
        :: else ->
            d_step {
                um = WD(w) + WX(w);
                if :: um > W -> um = W :: else -> skip fi;
                us = (CSEQ(c) + W - um) % W;
                if :: WX(w) -> uset = (CSEQ(c) + W - 1) % W :: else -> skip fi
            }
        fi;
        p = 0
    fi
}

/* bits_update_apply: U(k) into each word it touches, by a CAS from a word tagged
 * before k; a word whose bits U(k) leaves as they are is not written */
inline bits_update_apply(k)
{
    jj = us / 2; t = 0;
    do
    :: t < 2 ->
        d_step { bits_update_masks(jj) };
        if
        :: clr != 0 ->
            bx = bw[jj];
            do
#ifdef PLANT_UNTAGGED_APPLY
            :: true ->
#else
            :: BTAG(bx) < k ->
#endif
                if
                :: ((BBITS(bx) & (3 ^ clr)) | set) == BBITS(bx) -> COVER(7); break
                :: else ->
                    d_step {
                        if
                        :: bw[jj] == bx -> bw[jj] = MKB(k, (BBITS(bx) & (3 ^ clr)) | set); cas = 1
                        :: else -> bx = bw[jj]; cas = 0; COVER(8)
                        fi
                    };
                    if
                    :: cas -> break
                    :: else -> skip
                    fi
                fi
            :: else -> break
            od
        :: else -> skip
        fi;
        atomic { jj = 1 - jj; t++; bx = 0; cas = 0 }
    :: else -> break
    od;
    atomic { jj = 0; t = 0; clr = 0; set = 0 }
}

/* closed_help: D_k and U(k) in place (the maker's own, with PLANT_NO_HELP:
 * D_k only). ok = 0 when w is stale. */
inline closed_help(w, withupd)
{
    point_read(w, 1);
    if
    :: ok ->
        circuit__bits_update_of(w);
        if
        :: ok && um > 0 && withupd -> bits_update_apply(WK(w))
        :: else -> skip
        fi
    :: else -> skip
    fi;
    d_step { us = 0; um = 0; uset = 0 }
}

/* circuit__point_publish: D_k by "read X, check the word, CAS X", then U(k) */
inline write_desc(w)
{
    xd = D[WK(w) & 1];
    do
    :: DK(xd) == WK(w) -> break
    :: else ->
        now = core;
        if
        :: WST(now) != CL || WGEN(now) != WGEN(w) || WK(now) != WK(w) -> break
        :: else -> skip
        fi;
        d_step {
            if
            :: D[WK(w) & 1] == xd ->
                assert(c == gD[WK(w)]);
                D[WK(w) & 1] = MKD(WK(w), c); xd = MKD(WK(w), c)
            :: else -> xd = D[WK(w) & 1]
            fi
        }
    od;
    atomic { xd = 0; now = 0 }
}

inline circuit__point_publish(w)
{
#ifdef PLANT_UPD_BEFORE_DESC
    circuit__bits_update_of(w);
    if
    :: ok && um > 0 -> bits_update_apply(WK(w))
    :: else -> skip
    fi;
    write_desc(w);
#else
    write_desc(w);
#endif
    closed_help(w, 1)
}

/* ---- the operations ---- */

/* a failure maker (or a fold): point k + 1 from the word at k */
inline point()
{
    w = core;
    do
    :: WST(w) != CL -> break /* late (T2): the state is not closed */
    :: else ->
#ifdef PLANT_NO_HELP
        closed_help(w, 0);
#else
        closed_help(w, 1);
#endif
        if
        :: !ok ->
            now = core;
            assert(now != w); /* (d) helping fails only on a stale word */
            w = now
        :: else ->
            /* what the cells' successes and this call add: d successes, then
             * maybe a failure (n = d + x >= 1; n = W evicts everything) */
            if
            :: pd = 0; px = 1
            :: pd = 1; px = 0
            :: pd = 1; px = 1
#if DMAX >= 2
            :: pd = 2; px = 1
#endif
#if DMAX >= 3
            :: pd = 3; px = 0
            :: pd = 3; px = 1
#endif
            fi;
            /* B(k): closed_help made U(k) complete */
            point_append(WK(w), 0, c, pd, px);
            n = cout;
            now = core; /* the re-read: c and the bitmap belong to w */
            if
            :: !fresh || now != w -> w = now; COVER(9)
            :: else ->
                d_step {
                    if
                    :: core == w ->
                        BITMAP_IS_TRUE(WK(w));
                        /* the sequential reference: append to the ghost */
                        ri = 0;
                        do
                        :: ri < pd + px ->
                            if
                            :: ri == pd + px - 1 && px ->
                                g_bits = g_bits | (1 << ((g_seq + ri) % W))
                            :: else ->
                                g_bits = g_bits & (15 ^ (1 << ((g_seq + ri) % W)))
                            fi;
                            ri++
                        :: else -> break
                        od;
                        ri = 0;
                        if :: g_seq + pd + px >= W -> g_full = 1 :: else -> skip fi;
                        g_seq = (g_seq + pd + px) % W;
                        /* (a) the maker's counts are the reference's */
                        assert(CFAIL(n) == PC4(g_bits) && CSEQ(n) == g_seq && CFULL(n) == g_full);
                        gD[WK(w) + 1] = MKC(g_seq, g_full, PC4(g_bits));
                        if :: WGEN(w) == 2 -> COVER(14) :: else -> skip fi;
                        core = MKW(CL, WGEN(w), WK(w) + 1, pd, px);
                        w = core; cas = 1
                    :: else -> w = core; cas = 0
                    fi
                };
                if
                :: cas -> c = n; circuit__point_publish(w); break
                :: else -> skip
                fi
            fi
        fi
    od;
    atomic { w = 0; now = 0; c = 0; n = 0; pd = 0; px = 0; ok = 0; cas = 0; fresh = 0; cout = 0 }
}

/* a closed_help from a word read before (the thread may be stopped
 * anywhere in between: a stale helper) */
inline help()
{
    w = core;
    if
    :: WST(w) == CL ->
        closed_help(w, 1);
        if
        :: !ok -> now = core; assert(now != w) /* (d) */
        :: else -> skip
        fi
    :: else -> skip
    fi;
    atomic { w = 0; now = 0; c = 0; ok = 0 }
}

/* a stats read (writes nothing): the counts at the word's point plus pd
 * successes counted on the cells since */
inline stats()
{
    w = core;
    tries = 0;
    do
    :: WST(w) != CL || tries == 2 -> break
    :: else ->
        tries++;
        point_read(w, 0);
        if
        :: !ok -> now = core; assert(now != w); w = now /* (d) */
        :: else ->
            circuit__bits_update_of(w);
            /* the successes the cells add since S_k (cells are not modelled) */
            if
            :: pd = 1
            :: pd = 2
            :: pd = 3
            fi;
            if
            :: ok -> point_append(WK(w), 1, c, pd, 0)
            :: else -> fresh = 0
            fi;
            d_step {
                now = core;
                if
                :: fresh && now == w ->
                    /* (b) a validated read has the true counts */
                    t = g_bits; ri = 0;
                    do
                    :: ri < pd -> t = t & (15 ^ (1 << ((g_seq + ri) % W))); ri++
                    :: else -> break
                    od;
                    assert(CFAIL(cout) == PC4(t));
                    t = 0; ri = 0; cas = 1
                :: else -> w = now; cas = 0; COVER(11)
                fi
            };
            if
            :: cas -> break
            :: else -> skip
            fi
        fi
    od;
    atomic { w = 0; now = 0; c = 0; pd = 0; tries = 0; ok = 0; cas = 0; fresh = 0; cout = 0;
             us = 0; um = 0; uset = 0 }
}

/* leave closed at point k (an isolate): U(k) complete first, then the CAS;
 * the next closed state starts at k0 = k + 2 */
inline exit_closed()
{
    w = core;
    do
    :: WST(w) != CL -> break
    :: else ->
        closed_help(w, 1);
        if
        :: !ok -> now = core; assert(now != w); w = now
        :: else ->
            d_step {
                if
                :: core == w ->
                    BITMAP_IS_TRUE(WK(w));
                    core = MKW(ISO, (WGEN(w) + 1) & 7, WK(w) + 2, 0, 0); cas = 1
                :: else -> w = core; cas = 0
                fi
            };
            if
            :: cas -> break
            :: else -> skip
            fi
        fi
    od;
    atomic { w = 0; now = 0; c = 0; ok = 0; cas = 0 }
}

/* enter closed at k0 from the isolated word (transition.c): bits_start,
 * desc_start, the CAS */
inline enter_closed()
{
    w = core;
    ok = (WST(w) == ISO);
    /* bits_start: every word to {k0, 0}, read X, check the word, CAS X */
    jj = 0;
    do
    :: ok && jj < 2 ->
        bx = bw[jj];
        do
        :: BTAG(bx) < WK(w) ->
            now = core;
            if
            :: now != w -> ok = 0; COVER(12); break
            :: else -> skip
            fi;
#ifdef PLANT_UNTAGGED_START
            bw[jj] = MKB(WK(w), 0);
            break
#else
            d_step {
                if
                :: bw[jj] == bx -> bw[jj] = MKB(WK(w), 0); cas = 1
                :: else -> bx = bw[jj]; cas = 0; COVER(13)
                fi
            };
            if
            :: cas -> break
            :: else -> skip
            fi
#endif
        :: else -> break
        od;
        atomic { jj++; bx = 0; cas = 0 }
    :: else -> break
    od;
    jj = 0;
    /* desc_start: D_{k0} = zero counts, read X, check, CAS X */
    if
    :: ok ->
        xd = D[WK(w) & 1];
        do
        :: xd == MKD(WK(w), 0) -> break
        :: else ->
            now = core;
            if
            :: now != w -> ok = 0; break
            :: else -> skip
            fi;
            d_step {
                if
                :: D[WK(w) & 1] == xd -> D[WK(w) & 1] = MKD(WK(w), 0)
                :: else -> skip
                fi;
                xd = D[WK(w) & 1]
            }
        od
    :: else -> skip
    fi;
    if
    :: ok ->
        d_step {
            if
            :: core == w ->
                /* the state starts empty: every word {k0, 0} */
                assert(bw[0] == MKB(WK(w), 0) && bw[1] == MKB(WK(w), 0));
                g_bits = 0; g_seq = 0; g_full = 0; gD[WK(w)] = 0;
                core = MKW(CL, (WGEN(w) + 1) & 7, WK(w), 0, 0)
            :: else -> skip
            fi
        }
    :: else -> skip
    fi;
    d_step { w = 0; now = 0; xd = 0; ok = 0 }
}

proctype thread(byte me)
{
    byte op, opn;
    short w, now, xd, p;
    byte c, n, cout, pd, px, tries;
    bit ok, fresh, cas;
    /* point_append, bits_count, the masks */
    byte nn, fl, gone, jj, t, msk, bx, bits, clr, set, ri;
    /* an update U(k) */
    byte us, um, uset;

    opn = 0;
    do
    :: opn == MAXOPS -> break
    :: opn < MAXOPS ->
        op = script[me * MAXOPS + opn];
        opn++;
        if
        :: op == OP_POINT -> point()
        :: op == OP_HELP -> help()
        :: op == OP_READ -> stats()
        :: op == OP_EXIT -> exit_closed()
        :: op == OP_ENTER -> enter_closed()
        :: else -> skip
        fi;
progress_op:
        op = 0
    od
}

init {
    byte i;
    d_step {
#ifdef INIT_ISOLATED
        /* an older closed state ended at point 1: the words as it left
         * them, the next state starts at k0 = 3 */
        core = MKW(ISO, 1, 3, 0, 0);
        bw[0] = MKB(1, 1); bw[1] = MKB(0, 2);
        D[0] = MKD(0, 0); D[1] = MKD(1, MKC(2, 0, 1));
#else
        /* a closed state entered at k0 = 1 (D_1 zero, every word {1, 0}) */
        core = MKW(CL, 0, 1, 0, 0);
        bw[0] = MKB(1, 0); bw[1] = MKB(1, 0);
        D[0] = MKD(0, 0); D[1] = MKD(1, 0);
        gD[1] = 0;
#endif
        script[0] = T0_OP1; script[1] = T0_OP2;
        script[2] = T1_OP1; script[3] = T1_OP2;
        script[4] = T2_OP1; script[5] = T2_OP2
    };
    atomic {
        i = 0;
        do
        :: i < NTHREADS -> run thread(i); i++
        :: else -> break
        od
    };
    (_nr_pr == 1);
    /* at the end, a closed word's D_k and U(k) are in place (every maker
     * finished its circuit__point_publish) */
    if
    :: WST(core) == CL ->
        assert(D[WK(core) & 1] == MKD(WK(core), gD[WK(core)]));
        BITMAP_IS_TRUE(WK(core))
    :: else -> skip
    fi
}
