/*
 * descslot.pml: the closed descriptors' two slots across closed states
 * (docs/CONTRACT.md L1, C4; src/closed_state.c desc_put, src/transition.c
 * desc_start). counting.pml checks one closed generation; this model checks
 * what it leaves out: slots reused by later closed states whose counts
 * repeat bit for bit, and a writer stopped anywhere in its "read X, check
 * the word, CAS X" across them.
 *
 * PROCESSES
 *   main     the breaker's life: closed states one after another. A state
 *            entered at point k0 (k0 = the previous state's last point +
 *            2, transition.c) writes D_{k0} = zero counts, then makes its
 *            points k0 + 1 .. k0 + PTS (a failure each: D_k = the counts
 *            k - k0), each D written (read X, check, CAS X, as every
 *            writer) before the word moves past it (the helping
 *            invariant), then the state ends (a trip) and the next begins.
 *            At every point it checks that the live slot holds D_K: the
 *            assertion a stale overwrite breaks (in C every later failure,
 *            stats read and isolate then spin: nobody can derive D_K).
 *   stale    a writer of one point: reads the word (its point kw), reads
 *            its slot X, then loops as desc_put does: while X is not D_kw:
 *            check the word still at kw (else stop: whoever moved it wrote
 *            D_kw), CAS the slot from X to D_kw (failing: X = what it
 *            found). The checker may stop it between any two steps while
 *            main goes on (the check and the CAS are separate steps).
 *
 * A descriptor is one short: tag * 16 + counts (counts < 16). The tag is
 * the point number with TAG_MASK applied: the C code's is the whole 32-bit
 * k (here: every k the run reaches, TAG_MASK 255); -DTAG_MASK=3 is the
 * planted bug, tags of 2 bits as 0.3's first cut had 14, which the
 * checker must catch.
 *
 *   -DSTATES=n    closed states main makes (default 6)
 *   -DPTS=n       points per state after its first (default 1)
 *   -DTAG_MASK=m  the tag's mask (default 255: the whole k in this run)
 *   -DSTALE_K=k   the point the stopped writer writes (default 5)
 */
#ifndef STATES
#define STATES 6
#endif
#ifndef PTS
#define PTS 1
#endif
#ifndef TAG_MASK
#define TAG_MASK 255
#endif

#define MKD(k, c) ((((k) & TAG_MASK) * 16) + (c))
#define NONE (-1) /* a slot never written: no valid descriptor */

short desc[2] = NONE;
byte word_k;            /* the word's point number */
byte word_k0;           /* its state's first point: D_k's counts are k - k0 */
bool word_live;         /* a closed state is in the word (false between states) */
bool main_done;

/* one "read X, check, CAS X" writer of D_kw into slot kw & 1 (desc_put) */
inline put(kw, c, x, ok)
{
    do
    :: x == MKD(kw, c) -> break /* written meanwhile: that one is right */
    :: else ->
       if
       :: !(word_live && word_k == kw) -> break /* the word moved: stop */
       :: else -> skip
       fi;
       /* stopped here: the check is done, the CAS to come */
       atomic {
           if
           :: desc[kw & 1] == x -> desc[kw & 1] = MKD(kw, c); ok = true; break
           :: else -> x = desc[kw & 1]
           fi
       }
    od
}

active proctype main()
{
    byte k = 1, k0, s = 0, p;
    short x;
    bool ok;
    do
    :: s < STATES ->
       k0 = k;
       /* entering closed at k0: D_{k0} (zero counts) before the word
        * names the state (desc_start: the word checked is the state's
        * predecessor, modelled as "no state live") */
       x = desc[k0 & 1];
       if
       :: x != MKD(k0, 0) ->
          atomic { if :: desc[k0 & 1] == x -> desc[k0 & 1] = MKD(k0, 0) :: else -> skip fi }
       :: else -> skip
       fi;
       assert(desc[k0 & 1] == MKD(k0, 0));
       atomic { word_k = k0; word_k0 = k0; word_live = true };
       p = 0;
       do
       :: p < PTS ->
          /* a failure: the word moves to k + 1, then D_{k+1} is written */
          assert(desc[k & 1] == MKD(k, k - k0)); /* the helping invariant */
          atomic { k++; word_k = k };
          x = desc[k & 1];
          ok = false;
          put(k, k - k0, x, ok);
          assert(desc[k & 1] == MKD(k, k - k0)); /* L1/C4: the live D_k */
          p++
       :: else -> break
       od;
       /* the state ends (a trip); the next starts at k + 2 */
       assert(desc[k & 1] == MKD(k, k - k0));
       atomic { word_live = false; k = k + 2 };
       s++
    :: else -> break
    od;
    main_done = true
}

/* A writer of point STALE_K (default 5: the second state's first failure,
 * whose slot holds the first state's D_1): it reads the word and its slot,
 * and may be stopped at any step after. */
#ifndef STALE_K
#define STALE_K 5
#endif
active proctype stale()
{
    byte kw, c;
    short x;
    bool ok = false;
    /* a run in which it never reads the word at STALE_K ends with it here */
end_wait:
    atomic { word_live && word_k == STALE_K; kw = word_k; c = word_k - word_k0 };
    x = desc[kw & 1];
    put(kw, c, x, ok)
}

/* at the end the last state's descriptors are intact */
active proctype watch()
{
    main_done;
    assert(desc[(word_k) & 1] == MKD(word_k, word_k - word_k0))
}
