/*
 * mirror.pml: the closed mirror of src/word.h ("THE CLOSED MIRROR";
 * docs/CONTRACT.md L6 and L8, with L1), every
 * interleaving of three threads, checked by SPIN. README.md beside it
 * explains the model; run-spin.sh runs it:
 *
 *   spin -a mirror.pml && cc -O2 -DSAFETY -DCOLLAPSE -o pan pan.c && ./pan -m100000
 *
 * The mirror (b->mirror, 16 bytes {lo, version}) is OPEN FOR (g, e) or SHUT
 * for (g, e) (or for nothing, NONE, at the start of some scripts). THE RULE:
 * while the mirror is open for (g, e), the state word is closed in
 * generation g, epoch e (an intent in it allowed). circuit_allow admits on
 * an open mirror and closed_success counts on its cell of epoch e without
 * reading the state word; the rule is what makes that right.
 *
 * Planted bugs (each but the second makes pan report THE RULE broken):
 *   -DPLANT_SHUT_ONLY_IF_OPEN  mirror_shut writes only when the mirror is
 *                          open for (g, e): it skips a mirror shut for
 *                          another (g, e) or never set, so a set that read
 *                          that value still succeeds after the word left
 *                          (g, e)
 *   -DPLANT_SET_NO_VERSION mirror_set's CAS compares and writes lo only
 *                          (the version is neither compared nor raised):
 *                          NOT caught, by any script tried: every write
 *                          moves lo forward (property (e)), so lo never
 *                          repeats and a CAS on lo alone fails wherever the
 *                          versioned one does, while epoch ids and
 *                          generation tags do not repeat (README.md)
 *   -DPLANT_SET_CORE_FIRST mirror_set reads the state word BEFORE the mirror
 *   -DPLANT_NO_SHUT        circuit__complete does not shut the mirror before
 *                          its CAS out of (g, e) (the maker's shut right
 *                          after its intent CAS stays)
 * Other switches:
 *   -DT<t>_OP<n>=<op>      the script: operation n (1-3) of thread t (0-2):
 *                          1 allow, 2 failure (an intent and its
 *                          completion), 3 help (complete an intent read
 *                          earlier), 4 reset (open -> closed), 5 call (allow,
 *                          then a success's done); default T0 allow, allow;
 *                          T1 failure, failure; T2 help
 *   -DINIT_OPEN            start open in generation 1, the mirror shut for
 *                          (0, 0) (a trip left closed), instead of closed in
 *                          (0, 0) with the mirror open for it (circuit_new)
 *   -DINIT_NONE            start closed in (0, 0) with the mirror NONE (as
 *                          just after a CAS into closed, before its set)
 *   -DNO_MAKER_SHUT        the intent's maker does not shut right after its
 *                          CAS (only the completers do): the rule must still
 *                          hold (the maker's shut is for L1 and L8, not for
 *                          the rule)
 *   -DCOVER_AT=<n>         fail where the COVER(n) step is reached: shows that
 *                          the search reaches it (README.md lists them)
 *
 * GRANULARITY. Every atomic step makes at most ONE access to shared memory
 * (the state word, the mirror, next_id), as the C code does: a load is a
 * step, a CAS is a step (compare and write together, a d_step), and the
 * local computation after a load is folded into the load's step. The mirror
 * is 16 bytes read and CASed whole (circuit__ld128_acq, cas128_sc); the
 * fast paths read its lo only (one step too).
 *
 * THE MAP (Promela -> C):
 *   mset()        word.c circuit__mirror_set: mirror load, word load, the
 *                 check (closed, no intent, mirror not open for its (g, e)),
 *                 ONE CAS {lo, version} -> {open (g, e), version + 1}
 *   mshut(wi)     word.c circuit__mirror_shut: mirror load; while lo is not
 *                 shut for wi's (g, e): word load (return unless it is wi),
 *                 CAS -> {shut (g, e), version + 1} (a failed CAS gives the
 *                 current value)
 *   allow()       breaker.c circuit_allow: mirror lo load (open: admitted on
 *                 it), else word load (closed: admitted, then mirror_set)
 *   success()     closed.h circuit__closed_success after an allow: mirror
 *                 lo load (open for the ticket's g: counted on the cell of
 *                 its epoch), else word load, mirror_set if closed with no
 *                 intent and the mirror not open for it, then the loop: late
 *                 (another generation or not closed), intent -> complete,
 *                 else counted (the cells are abstracted away)
 *   failure()     closed.c intent_make (from circuit__closed_failure): word
 *                 load, intent -> complete, else the intent CAS, the maker's
 *                 mirror_shut, complete
 *   complete(wi)  closed.c circuit__complete: mirror_shut(wi), [closed_help,
 *                 cells_seal, ledger_add: abstracted away], the decision,
 *                 then ONE CAS of the word from wi: a transition out of
 *                 closed (transition.c, generation + 1), or closed in a fresh
 *                 epoch (fetch_add next_id, percpu.c) and then mirror_set
 *   help()        a completer that read the word earlier (any caller of
 *                 circuit__complete: a success's or a failure's loop, an
 *                 isolate)
 *   reset()       breaker.c operate / transition.c circuit__transition into
 *                 closed from open (a reset; a probe's close from half-open
 *                 is the same CAS): an intent in the word is completed
 *                 first (OP2), then a fresh epoch, [desc_start, bits_start:
 *                 abstracted away], the CAS to closed (generation + 1), then
 *                 mirror_set; EALREADY when the word is closed, no intent
 *
 * PROPERTIES: (a) THE RULE, asserted in the step of every write of the
 * mirror, every CAS of the state word and every read of an open mirror by
 * allow or success (those are all the steps that can make it false, so it
 * is a state invariant); (b) no invalid end state (every thread finishes);
 * (c) with -DNP, no non-progress cycle (L1: each operation passes a
 * progress label when it completes); (d) at the end no intent is left in
 * the word, and when the word was entered into closed during the run and
 * is closed, the mirror is open for it (L8: the fast path is back once the
 * enterer's set is done); (e) FORWARD: every write of the mirror moves its
 * lo forward in the order of the epochs the word entered (epoch ids are
 * taken in that order), none < open < shut within one epoch, so lo never
 * takes a value it held before.
 *
 * ABSTRACTED AWAY: the cells, the descriptors, the bitmap, the ledger, the
 * counts and the trip policy (counting.pml, bitmap.pml); a failure's point
 * CAS with no intent (it changes neither state, generation, epoch nor
 * intent, all the mirror looks at); half-open (a transition out of closed
 * goes to OPEN, isolated is alike for the mirror; a probe's close is the
 * reset's CAS); the generation tag's and epoch id's widths (here they never
 * repeat, asserted; in C 30 and 27 bits). Memory is sequentially consistent
 * (README.md says which orders the C code gives for this).
 */

#ifdef COVER_AT
#define COVER(n) assert(COVER_AT != (n))
#else
#define COVER(n) skip
#endif
#define NTHREADS 3
#define MAXOPS 3

#define OP_NONE 0
#define OP_ALLOW 1
#define OP_FAIL 2
#define OP_HELP 3
#define OP_RESET 4
#define OP_CALL 5

#ifndef T0_OP1
#define T0_OP1 OP_ALLOW
#endif
#ifndef T0_OP2
#define T0_OP2 OP_ALLOW
#endif
#ifndef T0_OP3
#define T0_OP3 OP_NONE
#endif
#ifndef T1_OP1
#define T1_OP1 OP_FAIL
#endif
#ifndef T1_OP2
#define T1_OP2 OP_FAIL
#endif
#ifndef T1_OP3
#define T1_OP3 OP_NONE
#endif
#ifndef T2_OP1
#define T2_OP1 OP_HELP
#endif
#ifndef T2_OP2
#define T2_OP2 OP_NONE
#endif
#ifndef T2_OP3
#define T2_OP3 OP_NONE
#endif

/* the state word, abstracted to {state, intent, generation, epoch} */
#define ST_ISO 0
#define ST_CL 1
#define ST_OPEN 2
#define MKW(st, in, g, e) ((st) | ((in) << 2) | ((g) << 3) | ((e) << 6))
#define WST(w) ((w) & 3)
#define WINT(w) (((w) >> 2) & 1)
#define WGEN(w) (((w) >> 3) & 7)
#define WEP(w) (((w) >> 6) & 15)
#define GEN_MAX 7
#define EPOCH_MAX 15

/* the mirror's lo: {kind, generation, epoch}; its version is beside it */
#define M_NONE 0
#define M_OPEN 1
#define M_SHUT 2
#define MKM(k, g, e) ((k) | ((g) << 2) | ((e) << 5))
#define MKIND(m) ((m) & 3)
#define MGEN(m) (((m) >> 2) & 7)
#define MEP(m) (((m) >> 5) & 15)
/* circuit__mirror_of: open for a closed word's (g, e); the shut value */
/* the order of the mirror's values: the epoch it names (epoch ids are
 * global, taken in the order the word enters them), then none < open < shut */
#define MKEY(m) (MEP(m) * 4 + MKIND(m))
#define MOPEN(w) MKM(M_OPEN, WGEN(w), WEP(w))
#define MSHUT(w) MKM(M_SHUT, WGEN(w), WEP(w))

short core;
byte mir_lo, mir_ver;
byte next_epoch;
/* ghost: a CAS of the word into closed was made (by a completer or a reset) */
bit g_entered;

byte script[NTHREADS * MAXOPS];

/* THE RULE: while the mirror is open for (g, e), the word is closed in g,
 * epoch e (an intent allowed) */
/* (e) every write of the mirror moves it forward: its lo never takes a
 * value it held before (okey: the value's key before the write) */
#define FORWARD assert(MKEY(mir_lo) > okey); okey = 0

#define RULE \
    assert(MKIND(mir_lo) != M_OPEN || \
           (WST(core) == ST_CL && WGEN(core) == MGEN(mir_lo) && WEP(core) == MEP(mir_lo)))

/* circuit__mirror_set */
inline mset()
{
#ifdef PLANT_SET_CORE_FIRST
    sw = core;
    d_step { mlo = mir_lo; mver = mir_ver };
#else
    d_step { mlo = mir_lo; mver = mir_ver };
    sw = core;
#endif
    if
    :: WST(sw) == ST_CL && !WINT(sw) && mlo != MOPEN(sw) ->
        d_step {
#ifdef PLANT_SET_NO_VERSION
            if
            :: mir_lo == mlo -> okey = MKEY(mir_lo); mir_lo = MOPEN(sw); RULE; FORWARD; COVER(1)
            :: else -> COVER(2)
            fi
#else
            if
            :: mir_lo == mlo && mir_ver == mver ->
                okey = MKEY(mir_lo); mir_lo = MOPEN(sw); mir_ver = mver + 1; RULE; FORWARD; COVER(1)
            :: else -> COVER(2) /* lost: another set or a shut came first */
            fi
#endif
        }
    :: else -> skip
    fi;
    d_step { sw = 0; mlo = 0; mver = 0 }
}

/* circuit__mirror_shut(wi) */
inline mshut(wi)
{
    d_step { mlo = mir_lo; mver = mir_ver };
    do
#ifdef PLANT_SHUT_ONLY_IF_OPEN
    :: mlo != MOPEN(wi) -> break
#else
    :: mlo == MSHUT(wi) -> break
#endif
    :: else ->
        if
        :: core != wi -> break /* a completer of a word that moved on */
        :: else -> skip
        fi;
        d_step {
            if
            :: mir_lo == mlo && mir_ver == mver ->
                if :: MKIND(mlo) != M_OPEN -> COVER(3) :: else -> skip fi;
                okey = MKEY(mir_lo); mir_lo = MSHUT(wi); mir_ver = mver + 1; RULE; FORWARD; cas = 1
            :: else -> mlo = mir_lo; mver = mir_ver; cas = 0; COVER(4)
            fi
        };
        if
        :: cas -> break
        :: else -> skip
        fi
    od;
    atomic { mlo = 0; mver = 0; cas = 0 }
}

/* a fresh epoch id (fetch_add next_id), never reused */
inline fresh(e)
{
    d_step { e = next_epoch; next_epoch++; assert(next_epoch <= EPOCH_MAX) }
}

/* circuit__complete(wi): the completer's shut, then ONE CAS out of (g, e) */
inline complete(wi)
{
    if
    :: WST(wi) == ST_CL && WINT(wi) ->
#ifndef PLANT_NO_SHUT
        mshut(wi);
#endif
        /* the decision (trip or stay closed; each completer may decide
         * differently: the sum it sealed may differ) */
        if
        :: nw = MKW(ST_OPEN, 0, WGEN(wi) + 1, 0); assert(WGEN(wi) < GEN_MAX)
        :: fresh(ne); nw = MKW(ST_CL, 0, WGEN(wi), ne)
        fi;
        d_step {
            if
            :: core == wi ->
                core = nw; RULE; cas = 1;
                if :: WST(nw) == ST_CL -> g_entered = 1 :: else -> skip fi
            :: else -> cas = 0
            fi
        };
        if
        :: cas && WST(nw) == ST_CL -> COVER(5); mset() /* open for the new epoch */
        :: else -> skip
        fi
    :: else -> skip
    fi;
    d_step { nw = 0; ne = 0; cas = 0 }
}

/* circuit_allow: admitted on an open mirror, else the word decides */
inline allow()
{
    d_step {
        mlo = mir_lo;
        if
        :: MKIND(mlo) == M_OPEN -> RULE; tgen = MGEN(mlo); admitted = 1
        :: else -> admitted = 0
        fi
    };
    if
    :: !admitted ->
        w = core;
        if
        :: WST(w) == ST_CL -> tgen = WGEN(w); admitted = 1; mset()
        :: else -> skip /* open: allow_slow (no probe modelled): refused */
        fi
    :: else -> skip
    fi;
    d_step { w = 0; mlo = 0 }
}

/* circuit__closed_success for a ticket of generation tgen */
inline success()
{
    d_step {
        mlo = mir_lo;
        if
        :: MKIND(mlo) == M_OPEN && MGEN(mlo) == tgen ->
            RULE; fast = 1 /* counted on the cell of epoch MEP(mlo) */
        :: else -> fast = 0
        fi
    };
    if
    :: !fast ->
        w = core;
        if
        :: WST(w) == ST_CL && !WINT(w) && MOPEN(w) != mlo -> COVER(6); mset()
        :: else -> skip
        fi;
        do
        :: WGEN(w) != tgen || WST(w) != ST_CL -> break /* late */
        :: WGEN(w) == tgen && WST(w) == ST_CL && WINT(w) ->
            w = core; complete(w); w = core
        :: WGEN(w) == tgen && WST(w) == ST_CL && !WINT(w) -> break /* counted */
        od
    :: else -> skip
    fi;
    atomic { w = 0; mlo = 0; fast = 0 }
}

/* a failure whose call ends its epoch: intent_make, then complete */
inline failure()
{
    w = core;
    do
    :: WST(w) != ST_CL -> break /* late */
    :: WST(w) == ST_CL && WINT(w) -> complete(w); w = core
    :: WST(w) == ST_CL && !WINT(w) ->
        d_step {
            if
            :: core == w -> core = w | (1 << 2); w = core; RULE; cas = 1
            :: else -> w = core; cas = 0
            fi
        };
        if
        :: cas ->
#ifndef NO_MAKER_SHUT
            mshut(w);
#endif
            complete(w);
            break
        :: else -> skip
        fi
    od;
    atomic { w = 0; cas = 0 }
}

/* a completer of an intent it read before (it may be stopped in between) */
inline help()
{
    w = core;
    complete(w);
    w = 0
}

/* a transition into closed from open (reset; a probe's close alike) */
inline reset()
{
    w = core;
    do
    :: WST(w) == ST_CL && WINT(w) ->
        /* an intent another call made: finish it first, then decide from
         * the state it leaves (OP2) */
        complete(w); w = core
    :: WST(w) == ST_CL && !WINT(w) -> break /* EALREADY */
    :: WST(w) != ST_CL ->
        fresh(ne);
        d_step {
            assert(WGEN(w) < GEN_MAX);
            if
            :: core == w -> core = MKW(ST_CL, 0, WGEN(w) + 1, ne); RULE; cas = 1; g_entered = 1
            :: else -> w = core; cas = 0
            fi
        };
        if
        :: cas -> COVER(7); mset(); break /* open for the new closed state */
        :: else -> skip
        fi
    od;
    atomic { w = 0; ne = 0; cas = 0 }
}

proctype thread(byte me)
{
    byte op, opn;
    short w, sw, nw;
    byte mlo, mver, ne, tgen, okey;
    bit cas, admitted, fast;

    opn = 0;
    do
    :: opn == MAXOPS -> break
    :: opn < MAXOPS ->
        op = script[me * MAXOPS + opn];
        opn++;
        if
        :: op == OP_ALLOW -> allow(); admitted = 0; tgen = 0
        :: op == OP_FAIL -> failure()
        :: op == OP_HELP -> help()
        :: op == OP_RESET -> reset()
        :: op == OP_CALL ->
            allow();
            if
            :: admitted -> success()
            :: else -> skip
            fi;
            admitted = 0; tgen = 0
        :: else -> skip
        fi;
progress_op:
        op = 0
    od
}

init {
    byte i;
    d_step {
#if defined(INIT_OPEN)
        core = MKW(ST_OPEN, 0, 1, 0);
        mir_lo = MKM(M_SHUT, 0, 0); mir_ver = 1;
#elif defined(INIT_NONE)
        core = MKW(ST_CL, 0, 0, 0);
        mir_lo = MKM(M_NONE, 0, 0); mir_ver = 0;
#else
        /* circuit_new: closed in (0, 0), the mirror open for it */
        core = MKW(ST_CL, 0, 0, 0);
        mir_lo = MKM(M_OPEN, 0, 0); mir_ver = 0;
#endif
        next_epoch = 1;
        script[0] = T0_OP1; script[1] = T0_OP2; script[2] = T0_OP3;
        script[3] = T1_OP1; script[4] = T1_OP2; script[5] = T1_OP3;
        script[6] = T2_OP1; script[7] = T2_OP2; script[8] = T2_OP3
    };
    atomic {
        i = 0;
        do
        :: i < NTHREADS -> run thread(i); i++
        :: else -> break
        od
    };
    (_nr_pr == 1);
    /* every intent made was completed */
    assert(!(WST(core) == ST_CL && WINT(core)));
    RULE;
    /* the word was entered into closed during the run: its enterer's set
     * (or another's) left the mirror open for it (L8: the fast path back) */
    assert(!(g_entered && WST(core) == ST_CL) || mir_lo == MOPEN(core))
}
