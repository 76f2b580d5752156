/*
 * delivery.pml: the transition delivery hand-off of src/delivery.c (O1,
 * O2, O3: nothing stranded), every interleaving of three threads, checked by
 * SPIN. README.md beside it explains the model; run-spin.sh runs it:
 *
 *   spin -a delivery.pml && cc -O2 -DSAFETY -o pan pan.c && ./pan -m100000
 *
 * Planted bugs (each must make pan report an error):
 *   -DPLANT_NO_SECOND_LOOK      the deliverer does not look at the stack
 *                               again after giving the flag back
 *   -DPLANT_TRY_BEFORE_PUSH     a publisher tries the flag before pushing
 *   -DPLANT_NO_STORE_LOAD_FENCE the deliverer's look at the stack is done
 *                               before its store of the flag is visible (what
 *                               the hardware may do without a full fence
 *                               between the two: README.md)
 *
 * WHAT IS MODELLED
 * A "call" is an allow or done whose state-word CAS made a transition. The
 * CAS numbers it: generation g = ++made (one atomic step, the linearisation
 * point of the transition). Between that CAS and the push the publisher may
 * be stopped for as long as the checker likes, so records reach the stack out
 * of generation order. Records are named by their generation; the lock-free
 * stack is a set of them (bit g of `stack`), pushed one at a time, detached
 * all at once (__cds_lfs_pop_all is one exchange). The deliverer's ordered
 * list `held` and `next_gen` are touched only by the flag holder.
 *
 * circuit__deliver_pending looks at the role before trying it (so that a
 * call that finds it held writes nothing); SPIN's interleavings are
 * sequentially consistent, which the fence_sc before that look gives the C.
 *
 * An observe may itself make a transition (a nested call, O2): it publishes
 * and tries the flag, which its own thread holds, and returns; the outer loop
 * delivers it. The pool, the 30-bit tags and unwinding (O5) are not modelled.
 */

/* Calls (transitions made) per thread: -DCALLS0=2 -DCALLS1=1 -DCALLS2=1 by
 * default, plus one nested call from observe somewhere in the run. */
#ifndef CALLS0
#define CALLS0 2
#endif
#ifndef CALLS1
#define CALLS1 1
#endif
#ifndef CALLS2
#define CALLS2 1
#endif
#define CALLS (CALLS0 + CALLS1 + CALLS2)

byte made;          /* transitions made (the state word's generation) */
byte stack;         /* published, not yet detached: bit g for generation g */
byte pending;       /* published and not yet delivered (breaker->pending) */
bit  delivering;    /* the delivery role */
byte held;          /* the deliverer's ordered list: bit g (flag holder only) */
byte next_gen = 1;  /* next generation due (flag holder only) */
bit  nested_left = 1;

/* ghosts */
byte delivered;     /* bit g: generation g was given to observe */
byte last;          /* the generation observe got last */
byte in_observe;    /* threads inside observe */

inline observe(g, ng, won)
{
    in_observe++;
    assert(in_observe == 1);                   /* O2: never two at once */
    d_step {
        assert(g == last + 1);                 /* O1: in generation order */
        assert((delivered & (1 << g)) == 0);   /* O1: exactly once */
        delivered = delivered | (1 << g);
        last = g
    };
    /* a nested call that makes a transition, once in the whole run */
    if
    :: atomic { nested_left -> nested_left = 0; made++; ng = made };
        pending++;
        stack = stack | (1 << ng);
        /* its own deliver: the flag is taken (by this very thread) */
        atomic {
            if
            :: delivering == 0 -> delivering = 1; won = 1
            :: else -> won = 0
            fi
        };
        assert(!won);
        ng = 0
    :: skip
    fi;
    in_observe--
}

/* circuit__deliver */
inline deliver(g, ng, won, nwon, taken, none_left)
{
    do
    :: atomic {
           if
           :: delivering == 0 -> delivering = 1; won = 1
           :: else -> won = 0
           fi
       };
       if
       :: !won -> break /* someone is delivering: they will see our records */
       :: else -> skip
       fi;
       do
       :: /* take_published: detach everything at once, merge into held */
          atomic { taken = stack; stack = 0 };
          d_step { held = held | taken; taken = 0 };
          do
          :: (held & (1 << next_gen)) != 0 ->
              d_step { g = next_gen; held = held & ~(1 << g); next_gen++ };
              pending--;
              observe(g, ng, nwon);
              g = 0
          :: else -> break
          od;
          if
          :: stack == 0 -> break
          :: else -> skip /* more was published meanwhile: go round */
          fi
       od;
#ifndef PLANT_NO_STORE_LOAD_FENCE
       delivering = 0;           /* seq_cst store (a full barrier) ... */
       none_left = (stack == 0);     /* ... then the look at the stack */
#else
       none_left = (stack == 0);     /* the load passes the store */
       delivering = 0;
#endif
#ifdef PLANT_NO_SECOND_LOOK
       break;
#endif
       if
       :: none_left -> break
       :: else -> skip /* published after our last look: go round */
       fi
    od;
    skip;
    d_step { won = 0; none_left = 0 }
}

proctype caller(byte calls)
{
    byte g, mine, ng, taken;
    bit won, nwon, none_left;

    do
    :: calls > 0 ->
        atomic { made++; mine = made; calls-- }; /* the CAS that made the transition */
#ifndef PLANT_TRY_BEFORE_PUSH
        pending++;                               /* circuit__publish */
        stack = stack | (1 << mine);             /* cds_lfs_push */
        if                                       /* circuit__deliver_pending: */
        :: pending != 0 ->                       /* (fence_sc, SC here) a look */
            if                                   /* at the role first (0.3) */
            :: delivering == 0 -> deliver(g, ng, won, nwon, taken, none_left)
            :: else -> skip /* held: the holder's second look sees our push */
            fi
        :: else -> skip
        fi;
#else
        pending++;
        if
        :: pending != 0 -> deliver(g, ng, won, nwon, taken, none_left)
        :: else -> skip
        fi;
        stack = stack | (1 << mine);
#endif
progress_call:
        mine = 0
    :: else -> break
    od
}

init {
    atomic {
        run caller(CALLS0);
        run caller(CALLS1);
        run caller(CALLS2)
    };
    (_nr_pr == 1); /* every call has returned */

    /* O3: nothing stranded; O1: all delivered, once each, in order */
    assert(made >= CALLS && made <= CALLS + 1 && made <= 7);
    assert(delivered == (1 << (made + 1)) - 2);
    assert(last == made && next_gen == made + 1);
    assert(stack == 0 && held == 0 && pending == 0 && delivering == 0 && in_observe == 0)
}
