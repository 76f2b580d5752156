/*
 * timeout.pml: the claim of a probe timeout in src/probes.c (TIMEOUTS, a-d;
 * docs/CONTRACT.md P1 with T5, T6, L1), every interleaving of three
 * threads, checked by SPIN. README.md beside it explains the model;
 * run-spin.sh runs it:
 *
 *   spin -a timeout.pml && cc -O2 -DSAFETY -o pan pan.c && ./pan -m100000
 *
 * Planted bugs (each must make pan report an error):
 *   -DPLANT_FREE_THEN_COUNT  0.2's scan: free the due probe's slot (its
 *                            record), then count the timeout in a separate
 *                            step, dropped if the generation moved: a
 *                            timeout that fell due is lost
 *   -DPLANT_NO_ORDINAL       the claim's count does not check that the
 *                            word's timed_out is still t0: two helpers
 *                            count one timeout twice
 *   -DPLANT_TAKEN_IS_DONE    a scan that finds the slot taken (after it read
 *                            the claim word idle) takes the timeout for
 *                            counted and goes on: the isolate that follows
 *                            can come before the count
 *
 * WHAT IS MODELLED
 * A half-open state (generation 1) with two probe slots, each holding a
 * probe whose timeout has fallen due. Three threads:
 *   scanners (two; -DSCANNERS=1: one): each a call whose clock says both
 *           probes are due, so it times out every busy, due slot of the
 *           generation it read (process_timeouts' scan), in slot order;
 *   interference: optionally first the done of probe 0 with a clock
 *           BEFORE its due time (it frees the slot if no timeout took it:
 *           the probe settled, P2/T5); then a call that scans (it is after
 *           the due times) and admits a new probe (not due) to a free slot,
 *           reusing it, or not; then one that scans and makes a transition
 *           (an isolate: generation 2) from the word it read, with the final
 *           counts of that word.
 * Each shared word is one variable group changed in one atomic step (a CAS
 * compares the whole word). The state word keeps {generation, half-open,
 * timed_out} (results are not modelled; the probe policy always says stay,
 * so a timeout never makes a transition here); the claim word {n, active,
 * t0, slot, gen, reuse}; a slot record {gen, reuse, busy, taken, due},
 * which IS the slot (since finding F5 there is no bitmap: a slot is held in
 * generation g while its record is busy with g, so taking and freeing are
 * one step each). Timestamps are not modelled: "due" is a bit.
 * Saturation of timed_out (the claim's other branch) is not modelled.
 *
 * CHECKED
 *   - a probe's timeout is counted at most once (at every count);
 *   - the transition's final counts hold every timeout that fell due before
 *     it: timed_out = 2 - (probes settled before their timeout);
 *   - at the end, each of the two due probes was either settled by its done
 *     before its timeout, or its timeout was counted, exactly one of them;
 *   - no invalid end state (every thread finishes); with -DNP (run-spin.sh
 *     --np) no cycle without progress: no thread waits for another (L1).
 */

#ifndef SCANNERS
#define SCANNERS 2       /* 1 or 2 scanner threads (the progress run: 1) */
#endif
#define NS 2             /* probe slots */
#define RMAX 3           /* reuse values 0..2 */
#define PID(s, r) ((s) * RMAX + (r))

/* the state word */
byte w_gen = 1;
bit  w_half = 1;
byte w_to;

/* slot records */
byte s_gen[NS];
byte s_reuse[NS];
bit  s_busy[NS];
bit  s_taken[NS];
bit  s_due[NS];

/* the claim word */
byte c_n;
bit  c_act;
byte c_t0;
byte c_slot;
byte c_gen;
byte c_reuse;

/* ghosts */
byte g_counted[NS * RMAX];
byte g_settled[NS * RMAX];
byte g_timed[NS * RMAX];   /* freed for a timeout (free-then-count only) */
byte finished;

#ifdef PLANT_FREE_THEN_COUNT
/* 0.2: the CAS that frees a due probe's record, then the count. */
inline timeout_one(g, i, r)
{
    ok = 0;
    atomic {
        if
        :: s_gen[i] == g && s_reuse[i] == r && s_busy[i] ->
            s_busy[i] = 0; ok = 1; g_timed[PID(i, r)]++
        :: else -> skip
        fi
    };
    if
    :: ok ->
        do
        :: atomic { lg = w_gen; lh = w_half; lt = w_to };
            if
            :: lg != g || !lh -> break   /* moot: the timeout is dropped */
            :: else ->
                atomic {
                    if
                    :: w_gen == lg && w_half == lh && w_to == lt ->
                        w_to++; g_counted[PID(i, r)]++;
                        assert(g_counted[PID(i, r)] == 1); ok = 2
                    :: else -> skip
                    fi
                };
                if :: ok == 2 -> break :: else -> skip fi
            fi
        od
    :: else -> skip
    fi
}
#else
/* d. free the claim's slot if a timeout holds it, then make the claim idle */
inline claim_retire(kn, kt0, ks, kg, kr)
{
    ok = 0;
    atomic {
        if
        :: s_gen[ks] == kg && s_reuse[ks] == kr && s_busy[ks] && s_taken[ks] ->
            s_busy[ks] = 0; ok = 1
        :: else -> skip
        fi
    };
    atomic {
        if
        :: c_n == kn && c_act && c_t0 == kt0 && c_slot == ks && c_gen == kg && c_reuse == kr ->
            c_act = 0; c_t0 = 0; c_slot = 0; c_gen = 0; c_reuse = 0
        :: else -> skip
        fi
    }
}

/* b-d for the claim {kn, kt0, ks, kg, kr} */
inline claim_finish(kn, kt0, ks, kg, kr)
{
    /* b. take the slot from its probe */
    atomic {
        if
        :: s_gen[ks] == kg && s_reuse[ks] == kr && s_busy[ks] && !s_taken[ks] -> s_taken[ks] = 1
        :: else -> skip
        fi
    };
    atomic { ok = (s_gen[ks] == kg && s_reuse[ks] == kr && s_busy[ks] && s_taken[ks]) };
    if
    :: ok ->
        /* c. count it once */
        do
        :: atomic { lg = w_gen; lh = w_half; lt = w_to };
            if
            :: lg != kg || !lh -> break
#ifndef PLANT_NO_ORDINAL
            :: lg == kg && lh && lt != kt0 -> break
            :: lg == kg && lh && lt == kt0 ->
#else
            :: lg == kg && lh ->
#endif
                atomic {
                    if
                    :: w_gen == lg && w_half == lh && w_to == lt ->
                        w_to++; g_counted[PID(ks, kr)]++;
                        assert(g_counted[PID(ks, kr)] == 1); ok = 2
                    :: else -> skip
                    fi
                };
                if :: ok == 2 -> break :: else -> skip fi
            fi
        od
    :: else -> skip
    fi;
    claim_retire(kn, kt0, ks, kg, kr)
}

/* a. claim the due probe (slot i, reuse r) of generation g, helping first */
inline timeout_one(g, i, r)
{
    do
    :: atomic { kn = c_n; ka = c_act; kt0 = c_t0; ks = c_slot; kg = c_gen; kr = c_reuse };
        if
        :: ka -> claim_finish(kn, kt0, ks, kg, kr)
        :: else ->
            atomic {
                ok = (s_gen[i] == g && s_reuse[i] == r && s_busy[i]);
                ka = s_taken[i]
            };
            if
#ifndef PLANT_TAKEN_IS_DONE
            :: ok && ka -> skip   /* claimed since our read: read the claim again, finish it */
#else
            :: ok && ka -> break
#endif
            :: !ok -> break       /* settled, or timed out and counted */
            :: else ->
                atomic { lg = w_gen; lh = w_half; lt = w_to };
                if
                :: lg != g || !lh -> break
                :: else -> skip
                fi;
                atomic {
                    if
                    :: c_n == kn && !c_act && c_t0 == kt0 && c_slot == ks && c_gen == kg &&
                       c_reuse == kr ->
                        c_n = kn + 1; c_act = 1; c_t0 = lt; c_slot = i; c_gen = g; c_reuse = r;
                        ok = 3
                    :: else -> ok = 0
                    fi
                };
                if
                :: ok == 3 ->
                    kn = kn + 1; kt0 = lt; ks = i; kg = g; kr = r;
                    claim_finish(kn, kt0, ks, kg, kr);
                    break
                :: else -> skip
                fi
            fi
        fi
    od
}
#endif

/* process_timeouts' scan: every busy, due slot of the generation read */
inline scan()
{
    atomic { g = w_gen; lh = w_half };
    if
    :: lh ->
        i = 0;
        do
        :: i < NS ->
            atomic { ok = (s_busy[i] && s_due[i] && s_gen[i] == g); r = s_reuse[i] };
            if :: ok -> timeout_one(g, i, r) :: else -> skip fi;
            if :: w_gen != g -> break :: else -> skip fi;
            i++
        :: else -> break
        od
    :: else -> skip
    fi
}

proctype scanner()
{
    byte g, i, r, lg, lt, kn, kt0, ks, kg, kr;
    bit lh, ka;
    byte ok;
    scan();
progress_scan:
    finished++
}

proctype interference()
{
    byte g, i, r, lg, lt, kn, kt0, ks, kg, kr;
    bit lh, ka;
    byte ok;
    byte settled = 0;
    /* probe 0's done with a clock before its due time: no scan; its
     * release of the slot (slot_free: the record must still be {tag}) */
    if
    :: atomic {
           if
           :: s_gen[0] == 1 && s_reuse[0] == 1 && s_busy[0] && !s_taken[0] ->
               s_busy[0] = 0; g_settled[PID(0, 1)]++; settled = 1
           :: else -> skip
           fi
       }
    :: skip
    fi;
    /* maybe an allow after the due times: the scan, then a new probe in a
     * free slot: one CAS of a record not held in the word's generation
     * (slot_take) */
    if
    :: skip
    :: scan();
    atomic {
        if
        :: w_half && !(s_busy[0] && s_gen[0] == w_gen) ->
            s_reuse[0] = s_reuse[0] + 1; s_gen[0] = w_gen; s_busy[0] = 1; s_taken[0] = 0;
            s_due[0] = 0
        :: w_half && s_busy[0] && s_gen[0] == w_gen && !(s_busy[1] && s_gen[1] == w_gen) ->
            s_reuse[1] = s_reuse[1] + 1; s_gen[1] = w_gen; s_busy[1] = 1; s_taken[1] = 0;
            s_due[1] = 0
        :: else -> skip   /* full */
        fi
    }
    fi;
    /* an isolate after the due times: the scan, then the transition from
     * the word read, with that word's counts as its final counts */
    scan();
    do
    :: atomic { lg = w_gen; lh = w_half; lt = w_to };
        atomic {
            if
            :: w_gen == lg && w_half == lh && w_to == lt ->
                assert(lt == 2 - settled);   /* every due timeout counted first */
                w_gen = 2; w_half = 0; ok = 1
            :: else -> ok = 0
            fi
        };
        if :: ok -> break :: else -> skip fi
    od;
progress_isolate:
    finished++
}

init
{
    atomic {
        s_gen[0] = 1; s_reuse[0] = 1; s_busy[0] = 1; s_due[0] = 1;
        s_gen[1] = 1; s_reuse[1] = 1; s_busy[1] = 1; s_due[1] = 1;
        run scanner();
#if SCANNERS > 1
        run scanner();
#endif
        run interference()
    };
    finished == SCANNERS + 1;
    /* each due probe: settled before its timeout, or timed out and counted */
    assert(g_settled[PID(0, 1)] + g_counted[PID(0, 1)] == 1);
    assert(g_settled[PID(1, 1)] + g_counted[PID(1, 1)] == 1);
    assert(w_gen == 2 && w_half == 0)
}
