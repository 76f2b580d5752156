/*
 * The per-CPU part (percpu.h): the arena that holds every breaker's units,
 * and the slow side of the packed totals (a flush, the overflow path, the
 * reader). docs/design/percpu.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "percpu.h"

/* ---- processes (the owner of a flush in shared memory) -------------------- */

uint32_t circuit__proc_self(void)
{
    pid_t p = getpid();
    return p > 0 && (uint64_t)p < (UINT64_C(1) << 22) ? (uint32_t)p : 0; /* 0: no takeover */
}

#ifdef CIRCUIT_SCHED
bool circuit__sched_proc_alive(uint32_t id);
#endif

bool circuit__proc_alive(uint32_t id)
{
#ifdef CIRCUIT_SCHED
    return circuit__sched_proc_alive(id);
#else
    /* ESRCH: no such process. A zombie (killed, not yet reaped) still
     * exists, and EPERM means it exists under another user. */
    return kill((pid_t)id, 0) == 0 || errno != ESRCH;
#endif
}

uint64_t circuit__proc_start(uint32_t id)
{
#ifdef CIRCUIT_SCHED
    (void)id;
    return 0; /* the checker's processes: told apart by circuit__sched_proc_alive */
#else
    /* field 22 of /proc/PID/stat: the start time in clock ticks after boot,
     * which never changes for one process; counted after the ')' that ends
     * the command name (which may hold spaces and parentheses). Read the
     * same way for this process as for another (its pid's directory, then
     * "stat" in it): an emulator such as qemu-user answers /proc/self/stat
     * and /proc/MYPID/stat itself, with values no other process reads. */
    char path[40], buf[512];
    snprintf(path, sizeof path, "/proc/%u", id ? id : (uint32_t)getpid());
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return 0;
    int fd = openat(dfd, "stat", O_RDONLY | O_CLOEXEC);
    close(dfd);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    for (int field = 2; p && field < 22; field++)
        p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, NULL, 10) & CIRCUIT__START_MASK : 0;
#endif
}

/* ---- the arena (docs/design/percpu.md) ----------------------------------------
 * One process-wide mutex guards the chunks' bookkeeping, taken only by
 * circuit_new and circuit_free; no call on a breaker takes it (L1;
 * stress.nolock checks it). */
typedef struct arena_chunk {
    struct arena_chunk *next, *prev; /* in `partial` while it has a free unit */
    uint64_t used;                   /* bit u: unit u taken */
    uint64_t full;                   /* every unit taken: units bits */
    uint32_t ncpu;
    uint32_t units;                  /* CIRCUIT__ARENA_FIRST or _UNITS */
    /* then the ncpu regions, from the next line boundary: the chunk
     * is one block, so a breaker finds it from its unit */
} arena_chunk;
#define CHUNK_HEAD ((size_t)CIRCUIT_CACHELINE)
_Static_assert(sizeof(arena_chunk) <= CHUNK_HEAD, "the regions start on a line");

_Static_assert(CIRCUIT__ARENA_UNITS == 64, "one 64-bit mask of units per chunk");
_Static_assert(CIRCUIT__ARENA_FIRST * sizeof(circuit__pcpu) % CIRCUIT_CACHELINE == 0 &&
                   CIRCUIT__ARENA_UNITS * sizeof(circuit__pcpu) % CIRCUIT_CACHELINE == 0,
               "no two CPUs share a line");

/* The chunks with a free unit (full ones are reached only from their
 * breakers), so that taking and giving a unit cost O(1) however many
 * breakers there are (only a test builds breakers for several CPU counts
 * at once: then the first chunk of the right count is looked for). */
static pthread_mutex_t arena_mu = PTHREAD_MUTEX_INITIALIZER;
static arena_chunk *partial; /* under arena_mu */
static uint64_t arena_live;  /* breakers holding units, under arena_mu */

static void partial_link(arena_chunk *ch)
{
    ch->prev = NULL;
    ch->next = partial;
    if (partial)
        partial->prev = ch;
    partial = ch;
}

static void partial_unlink(arena_chunk *ch)
{
    if (ch->prev)
        ch->prev->next = ch->next;
    else
        partial = ch->next;
    if (ch->next)
        ch->next->prev = ch->prev;
}

static inline char *chunk_regions(arena_chunk *ch) { return (char *)ch + CHUNK_HEAD; }

bool circuit__pcpu_take(circuit_breaker *b)
{
    uint32_t ncpu = b->ncpu;
    arena_chunk *ch;
    pthread_mutex_lock(&arena_mu);
    for (ch = partial; ch && ch->ncpu != ncpu; ch = ch->next)
        ;
    if (!ch) {
        /* a small chunk while the process has few breakers: one breaker
         * alone holds 128 bytes per CPU, not 1 KB */
        uint32_t units = arena_live < CIRCUIT__ARENA_FIRST ? CIRCUIT__ARENA_FIRST : CIRCUIT__ARENA_UNITS;
        void *mem = NULL;
        if (posix_memalign(&mem, CIRCUIT_CACHELINE,
                           CHUNK_HEAD + (size_t)ncpu * units * sizeof(circuit__pcpu)) != 0) {
            pthread_mutex_unlock(&arena_mu);
            return false;
        }
        ch = mem;
        ch->used = 0;
        ch->units = units;
        ch->full = units == 64 ? UINT64_MAX : (UINT64_C(1) << units) - 1;
        ch->ncpu = ncpu;
        partial_link(ch);
    }
    unsigned u = (unsigned)__builtin_ctzll(~ch->used);
    ch->used |= UINT64_C(1) << u;
    if (ch->used == ch->full)
        partial_unlink(ch); /* full */
    arena_live++;
    pthread_mutex_unlock(&arena_mu);
    b->arena_unit = (uint16_t)u;
    b->pcpu_stride = (uint16_t)(ch->units * sizeof(circuit__pcpu));
    b->pcpu0 = chunk_regions(ch) + (size_t)u * sizeof(circuit__pcpu);
    /* Before the breaker is shared; the unit's last owner is gone (the
     * mutex orders its circuit_free before this) */
    for (uint32_t i = 0; i < ncpu; i++)
        *circuit__unit(b, i) = (circuit__pcpu){0, 0};
    return true;
}

void circuit__pcpu_give(circuit_breaker *b)
{
    arena_chunk *ch =
        (arena_chunk *)(void *)(b->pcpu0 - (size_t)b->arena_unit * sizeof(circuit__pcpu) - CHUNK_HEAD);
    bool last;
    pthread_mutex_lock(&arena_mu);
    arena_live--;
    if (ch->used == ch->full)
        partial_link(ch); /* a free unit again */
    ch->used &= ~(UINT64_C(1) << b->arena_unit);
    last = ch->used == 0;
    if (last)
        partial_unlink(ch);
    pthread_mutex_unlock(&arena_mu);
    if (last)
        free(ch);
}

/* ---- the packed totals' slow side (percpu.h) -------------------------------- */

/* tot_ctl: {seq:24 | owner:22 | c:12 | i:3 | pS:1 | pP:1 | busy:1}, busy the
 * low bit. owner: the pid of the process whose thread STARTed the flush (or
 * took it over), 0 for circuit_new's breakers (no takeover) */
#define CTL_BUSY UINT64_C(1)
#define CTL_PP_SHIFT 1
#define CTL_PS_SHIFT 2
#define CTL_I_SHIFT 3
#define CTL_C_SHIFT 6
#define CTL_OWNER_SHIFT 18
#define CTL_OWNER_MASK ((UINT64_C(1) << 22) - 1)
#define CTL_SEQ_SHIFT 40
#define CTL_SEQ_ONE (UINT64_C(1) << CTL_SEQ_SHIFT)
_Static_assert(CIRCUIT__T_NPACKED <= 8, "the field fits 3 bits");
_Static_assert(CIRCUIT__MAX_CPUS <= 4096, "the CPU fits 12 bits");

static inline uint32_t ctl_c(uint64_t ctl) { return (uint32_t)(ctl >> CTL_C_SHIFT) & 0xfffu; }
static inline enum circuit__total ctl_i(uint64_t ctl)
{
    return (enum circuit__total)((ctl >> CTL_I_SHIFT) & 7u);
}
static inline uint32_t ctl_owner(uint64_t ctl) { return (uint32_t)((ctl >> CTL_OWNER_SHIFT) & CTL_OWNER_MASK); }
static inline uint64_t ctl_with_owner(uint64_t ctl, uint32_t owner)
{
    return (ctl & ~(CTL_OWNER_MASK << CTL_OWNER_SHIFT)) | ((uint64_t)owner & CTL_OWNER_MASK) << CTL_OWNER_SHIFT;
}

/* Shared mode: the record of who started the flush tot_ctl names (seq and
 * start time), read by a thread that would take it over (flush_take_over). */
static void owner_record(circuit_breaker *b, uint64_t ctl)
{
    /* release: after the START it describes (table: tot_owner) */
    circuit__st_rel(&b->s->tot_owner, (ctl >> CTL_SEQ_SHIFT) << 40 | b->proc_start);
}

/* The steps of the flush that `busy` names, each done unless already done:
 * its owner runs them all; a taker of a dead owner's flush runs the rest.
 * Only one live thread runs them at a time (the owner, or the one taker
 * whose CAS won), so "not yet done" read from a parity stays true until
 * its own CAS: a parity flips only in a flush's step. */
static void flush_steps(circuit_breaker *b, uint64_t busy)
{
    enum circuit__total t = ctl_i(busy);
    uint64_t batch = circuit__tot_batch(t);
    uint64_t *s = &b->s->tot_shared[t];
    uint64_t ps = (busy >> CTL_PS_SHIFT) & 1u, pp = (busy >> CTL_PP_SHIFT) & 1u;
    CIRCUIT__SHARED_RMW();
    /* CREDIT: +T and the parity flipped, one RMW, unless the parity says it
     * is done. release: before the SUBTRACT, so a reader that sees the
     * subtract sees it (table: tot_shared); relaxed load: the CAS decides */
    uint64_t sv = circuit__ld_rlx(s);
    while ((sv >> 63) == ps && !circuit__cas_rel(s, &sv, sv + batch + CIRCUIT__SHARED_PARITY))
        ;
    CIRCUIT__HOOK(CIRCUIT_TP_TOTALS_CREDITED);
    /* SUBTRACT: only this thread lowers the field now; the CAS loses only
     * to adds. release: after the CREDIT (table: pcpu[].tot) */
    uint64_t *w = &circuit__unit(b, ctl_c(busy))->tot;
    uint64_t flip = UINT64_C(1) << (circuit__tot_shift(t) + circuit__tot_width(t));
    uint64_t v = circuit__ld_rlx(w); /* relaxed: the CAS decides */
    /* release CAS: after the CREDIT (table: pcpu[].tot) */
    while (circuit__tot_parity(v, t) == pp &&
           !circuit__cas_rel(w, &v, (v - (batch << circuit__tot_shift(t))) ^ flip))
        ;
    CIRCUIT__HOOK(CIRCUIT_TP_TOTALS_SUBTRACTED);
    CIRCUIT__SHARED_RMW();
    /* END: idle, seq + 1, still naming this flush (a reader that met it
     * learns which one from here). release: the next START (acquire) sees
     * the credit and the subtract; a CAS, since a taker may have moved the
     * word on if this owner was declared dead (table: tot_ctl) */
    uint64_t cur = busy;
    circuit__cas_rel(&b->s->tot_ctl, &cur, (busy & ~CTL_BUSY) + CTL_SEQ_ONE);
}

void circuit__total_flush(circuit_breaker *b, uint32_t c, enum circuit__total t)
{
    /* acquire: the last flush's END (release) is seen with what it did, so
     * the parities recorded below are current (table: tot_ctl) */
    uint64_t ctl = circuit__ld_acq(&b->s->tot_ctl);
    if (ctl & CTL_BUSY)
        return; /* one at a time: a later add of this field tries again */
    uint64_t *w = &circuit__unit(b, c)->tot;
    /* relaxed: after the acquire above; only a flush, which needs tot_ctl
     * busy, lowers a field or flips a parity, and the START below fails if
     * one ran since (table: pcpu[].tot, tot_ctl) */
    uint64_t v = circuit__ld_rlx(w);
    if (circuit__tot_value(v, t) < circuit__tot_batch(t))
        return; /* flushed meanwhile */
    uint64_t *s = &b->s->tot_shared[t];
    uint64_t ps = circuit__ld_rlx(s) >> 63; /* relaxed: as above */
    uint64_t busy = ((ctl >> CTL_SEQ_SHIFT) + 1) << CTL_SEQ_SHIFT | (uint64_t)c << CTL_C_SHIFT |
                    (uint64_t)t << CTL_I_SHIFT | ps << CTL_PS_SHIFT |
                    circuit__tot_parity(v, t) << CTL_PP_SHIFT | CTL_BUSY;
    busy = ctl_with_owner(busy, b->proc);
    CIRCUIT__SHARED_RMW();
    /* START. acq_rel: acquire as the load above; release: a reader that
     * sees it busy sees the state it started from (table: tot_ctl) */
    if (!circuit__cas_acq_rel(&b->s->tot_ctl, &ctl, busy))
        return;
    if (b->shared)
        owner_record(b, busy);
    CIRCUIT__HOOK(CIRCUIT_TP_TOTALS_STARTED);
    flush_steps(b, busy);
}

/* Shared mode (SH2): a flush whose owner process is dead would hold the
 * role forever, and every field at its top would then count on the shared
 * line (the overflow path) for good. The first thread that needs the role
 * and finds its owner gone takes it over: a CAS naming itself (seq + 1, the
 * same flush), then the steps the owner had not done. Asked only on the
 * overflow path (a field at its top: rare while flushes run).
 *
 * Gone: no process has the owner's pid, or the process that has it now
 * (this one included) started at another time than the owner did (its pid
 * was reused). The owner records {seq, its start time} in tot_owner right
 * after its START; a taker trusts the record only while tot_ctl still
 * names that flush (read before and after it), so a start time is always
 * compared with the flush it belongs to. An owner killed between its START
 * and that store leaves no record: then only a pid no process has tells. */

static bool owner_gone(const circuit_breaker *b, uint64_t ctl, uint32_t owner)
{
    bool mine = owner == b->proc;
    if (!mine && !circuit__proc_alive(owner))
        return true;
    /* acquire: the record follows its START (table: tot_owner) */
    uint64_t rec = circuit__ld_acq(&b->s->tot_owner);
    if (rec >> 40 != (ctl >> CTL_SEQ_SHIFT) || b->proc_start == 0 ||
        (rec & CIRCUIT__START_MASK) == 0)
        return false; /* no record of this flush, or a start time unknown here or there */
    uint64_t start = mine ? b->proc_start : circuit__proc_start(owner);
    /* acquire: the record was this flush's if tot_ctl still names it */
    return start != 0 && start != (rec & CIRCUIT__START_MASK) &&
           circuit__ld_acq(&b->s->tot_ctl) == ctl;
}

static void flush_take_over(circuit_breaker *b)
{
    /* acquire: as circuit__total_flush's (table: tot_ctl) */
    uint64_t ctl = circuit__ld_acq(&b->s->tot_ctl);
    uint32_t owner = ctl_owner(ctl);
    if (!(ctl & CTL_BUSY) || owner == 0 || !owner_gone(b, ctl, owner))
        return;
    uint64_t mine = ctl_with_owner(ctl + CTL_SEQ_ONE, b->proc);
    CIRCUIT__SHARED_RMW();
    /* acq_rel: acquire, the dead owner's steps are seen (its CASes were
     * releases); release, as a START (table: tot_ctl) */
    if (circuit__cas_acq_rel(&b->s->tot_ctl, &ctl, mine)) {
        owner_record(b, mine);
        flush_steps(b, mine);
    }
}

void circuit__total_overflow(circuit_breaker *b, uint32_t c, enum circuit__total t)
{
    CIRCUIT__SHARED_RMW();
    /* relaxed: a total (+1 leaves the parity bit alone: the total stays far
     * below 2^63) (table: tot_shared) */
    circuit__faa_rlx(&b->s->tot_shared[t], 1);
    if (b->shared)
        flush_take_over(b);
    /* the field at its top waits for a flush: start it if none is busy */
    circuit__total_flush(b, c, t);
}

void circuit__totals_read(const circuit_breaker *b, uint64_t out[CIRCUIT__T_NPACKED])
{
    /* each CPU's six parity bits, as read: the one flush a read may meet is
     * known only at its end */
    uint8_t par[CIRCUIT__MAX_CPUS];
    for (;;) {
        /* acquire, all of them, in this order: tot_ctl, the fields, the
         * shared totals, tot_ctl (docs/design/percpu.md) */
        uint64_t ctl0 = circuit__ld_acq(&b->s->tot_ctl); /* table: tot_ctl */
        for (int t = 0; t < CIRCUIT__T_NPACKED; t++)
            out[t] = 0;
        for (uint32_t i = 0; i < b->ncpu; i++) {
            uint64_t v = circuit__ld_acq(&circuit__unit(b, i)->tot); /* table: pcpu[].tot */
            uint8_t p = 0;
            for (int t = 0; t < CIRCUIT__T_NPACKED; t++) {
                out[t] += circuit__tot_value(v, (enum circuit__total)t);
                p |= (uint8_t)(circuit__tot_parity(v, (enum circuit__total)t) << t);
            }
            par[i] = p;
        }
        CIRCUIT__HOOK(CIRCUIT_TP_TOTALS_READ);
        uint64_t shared[CIRCUIT__T_NPACKED];
        for (int t = 0; t < CIRCUIT__T_NPACKED; t++) {
            shared[t] = circuit__ld_acq(&b->s->tot_shared[t]); /* table: tot_shared */
            out[t] += shared[t] & ~CIRCUIT__SHARED_PARITY;
        }
        uint64_t ctl1 = circuit__ld_acq(&b->s->tot_ctl); /* table: tot_ctl */
        /* How many STARTs and ENDs happened during the read: at most one
         * flush may have met it (a flush that ended before ctl0 is wholly
         * seen, one that starts after ctl1 not at all). */
        uint64_t moves = ((ctl1 >> CTL_SEQ_SHIFT) - (ctl0 >> CTL_SEQ_SHIFT)) &
                         ((UINT64_C(1) << (64 - CTL_SEQ_SHIFT)) - 1);
        uint64_t met; /* the control word naming the flush met, 0: none */
        if (moves == 0)
            met = (ctl0 & CTL_BUSY) ? ctl0 : 0;
        else if (moves == 1 || (moves == 2 && !(ctl0 & CTL_BUSY)))
            met = ctl1 | CTL_BUSY; /* it started, ended, or both: ctl1 names it */
        else
            continue; /* two flushes or more: another thread's progress */
        if (met) {
            enum circuit__total t = ctl_i(met);
            bool credited = (shared[t] >> 63) != ((met >> CTL_PS_SHIFT) & 1u);
            bool subtracted = ((unsigned)(par[ctl_c(met)] >> t) & 1u) != ((met >> CTL_PP_SHIFT) & 1u);
            if (credited && !subtracted)
                out[t] -= circuit__tot_batch(t); /* in both places: once */
        }
        return;
    }
}

__thread circuit__cpu_tls circuit__cpu __attribute__((tls_model("initial-exec")));

uint32_t circuit__cpu_first(void)
{
    if (__rseq_size != 0) {
        const volatile struct rseq *rs =
            (const volatile struct rseq *)(const void *)((const char *)__builtin_thread_pointer() +
                                                         __rseq_offset);
        int32_t c = (int32_t)rs->cpu_id;
        if (c >= 0) {
            circuit__cpu.at = (const volatile int32_t *)(const volatile void *)&rs->cpu_id;
            return (uint32_t)c;
        }
    }
    int cpu = sched_getcpu();
    circuit__cpu.own = cpu < 0 ? 0u : (uint32_t)cpu;
    circuit__cpu.left = CIRCUIT__CPU_REREAD - 1;
    return circuit__cpu.own;
}

void circuit__total_add_slow(circuit_breaker *b, uint32_t c, enum circuit__total t)
{
    uint64_t *w = &circuit__unit(b, c)->tot;
    const uint64_t top = (UINT64_C(1) << circuit__tot_width(t)) - 1;
    uint64_t v = circuit__ld_rlx(w); /* relaxed: the CAS decides */
    for (;;) {
        uint64_t f = circuit__tot_value(v, t);
        if (f == top) {
            circuit__total_overflow(b, c, t);
            return;
        }
        /* relaxed: a total orders nothing; the CAS keeps the field below
         * its top (table: pcpu[].tot) */
        if (circuit__cas_rlx(w, &v, v + (UINT64_C(1) << circuit__tot_shift(t)))) {
            if (f + 1 >= circuit__tot_batch(t))
                circuit__total_flush(b, c, t);
            return;
        }
    }
}

bool circuit__total_add_slow_true(circuit_breaker *b, uint32_t c, enum circuit__total t)
{
    circuit__total_add_slow(b, c, t);
    return true;
}
