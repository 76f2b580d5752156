/*
 * stress_fork: one breaker in shared memory, N worker processes, some
 * killed by SIGKILL at random points (SH1-SH5).
 *
 *   stress_fork [procs] [milliseconds] [seed] [kills] [arena]
 *
 * The parent builds the breaker in a memfd (circuit_shared_init), maps it
 * MAP_SHARED and forks `procs` workers. Every odd worker maps the memfd a
 * second time at another address (a hint far from the first mapping) and
 * attaches there (SH1: offsets, no pointer). Each worker runs two threads
 * of allow + done (random outcomes, some releases, a few isolate/reset,
 * stats reads) on the real clock with short open periods and probe
 * timeouts. The parent SIGKILLs `kills` workers at random moments and reaps
 * them (a zombie still counts as alive, SH2); the survivors keep going for
 * the whole duration, settle every ticket and exit. Then, on the final
 * stats (the parent attaches a handle of its own):
 *
 *   M1/SH2  admitted = successes + failures + ignored + late + released +
 *           live, where live (no survivor holds a ticket) is what the dead
 *           workers held: between the tickets each surely held and those it
 *           may have held (killed inside allow or a settle);
 *   S4      probes in flight <= P at every stats read of every worker and
 *           at the end (a dead worker's probes timed out: P1);
 *   SH3     every generation delivered at most once over all workers'
 *           observes, each worker's in increasing order, never concurrently
 *           with itself, with a call_ctx of its own (none from another
 *           process); generations 1..transitions all delivered but those a
 *           dead worker may have made and not yet delivered; consecutive
 *           generations chain (one's `to` is the next one's `from`);
 *   SH2     the survivors finished (none stopped: the run would time out),
 *           and after the kills a last survivor's flushes still run: the
 *           totals stay exact (the identity above) however often a flusher
 *           died.
 * With "arena" (L5 in shared memory), the breaker's per-CPU part is unit 1
 * of an arena of 4 (circuit_shared_init_in_arena, all in the one memfd),
 * and units 0, 2 and 3 belong to three neighbour breakers that every worker
 * thread also calls (successes only) between its other calls: the
 * neighbours share each CPU's line with the stressed breaker's cells and
 * packed totals, and must end with admitted = successes exactly (but for a
 * call a killed worker was inside), within the calls the workers finished,
 * and no failure, rejection or transition.
 * Exit 0 (pass), 1 (a rule failed), 77 (no memfd). One summary line.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "circuit.h"
#include "circuit_shared.h"
#include "testing.h"

/* ThreadSanitizer's runtime makes 16-byte atomics atomic with a mutex of
 * its own process (tsan_interface_atomic.cpp): two processes' CASes of the
 * state word are then not atomic with each other. The TSan build cannot
 * run the core across processes at all; it skips (77). */
#if defined(__SANITIZE_THREAD__)
#define STRESS_FORK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define STRESS_FORK_TSAN 1
#endif
#endif

#define MAX_PROCS 32
#define THREADS 2
#define MAX_TRANS (1 << 19)
#define PROBES 2

typedef struct tr_rec {
    uint64_t gen;
    int from, to;
} tr_rec;

/* One worker's log, in a MAP_SHARED area the parent reads after it ended. */
typedef struct proc_log {
    _Atomic uint64_t admitted_ok; /* allows that returned true (after the return) */
    _Atomic uint64_t settled;     /* done/release calls that returned */
    _Atomic int phase[THREADS];   /* 1: inside allow; 2: inside a settle; 0: neither */
    _Atomic int nb_phase[THREADS]; /* arena mode: inside a neighbour's call */
    _Atomic uint64_t nb_done[3];  /* arena mode: neighbour calls finished, per neighbour */
    _Atomic uint64_t ops;
    _Atomic uint64_t ntrans;
    _Atomic int in_observe;
    _Atomic int bad;
    _Atomic int finished;
    char why[256];
    uintptr_t map_addr;
    tr_rec trans[MAX_TRANS];
} proc_log;

static proc_log *logs;
static int me = -1;
static bool in_parent = true;
static int parent_fails;
static int64_t run_ms;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (!in_parent) {
        if (atomic_exchange(&logs[me].bad, 1) == 0)
            vsnprintf(logs[me].why, sizeof logs[me].why, fmt, ap);
    } else {
        parent_fails++;
        fprintf(stderr, "stress_fork: FAIL: ");
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
    }
    va_end(ap);
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* ---- policies (pure, the same in every process) --------------------------- */
static bool trip(void *arg, const circuit_counts *c)
{
    (void)arg;
    return c->failures >= 4 || c->consecutive_failures >= 3;
}
static circuit_state probe(void *arg, const circuit_counts *c)
{
    (void)arg;
    if (c->failures > 0 || c->timed_out > 0)
        return CIRCUIT_OPEN;
    return c->successes >= 2 ? CIRCUIT_CLOSED : CIRCUIT_HALF_OPEN;
}
static circuit_outcome classify(void *arg, void *ctx, int result)
{
    (void)arg, (void)ctx;
    return (circuit_outcome)result;
}

/* call_ctx: (worker + 1) << 32 | a counter; an observe must see its own */
static void observe(void *arg, void *ctx, const circuit_transition *t)
{
    (void)arg;
    proc_log *l = &logs[me];
    if (atomic_exchange(&l->in_observe, 1))
        fail("O2: observe ran concurrently with itself in worker %d", me);
    uint64_t c = (uint64_t)(uintptr_t)ctx;
    if (ctx && (c >> 32) != (uint64_t)me + 1)
        fail("SH3: worker %d's observe got call_ctx %#" PRIx64 " (worker %d's)", me, c,
             (int)(c >> 32) - 1);
    uint64_t n = atomic_load(&l->ntrans);
    if (n > 0 && l->trans[n - 1].gen >= t->generation)
        fail("SH3: worker %d delivered generation %" PRIu64 " after %" PRIu64, me, t->generation,
             l->trans[n - 1].gen);
    if (n < MAX_TRANS) {
        l->trans[n] = (tr_rec){t->generation, (int)t->from, (int)t->to};
        atomic_store(&l->ntrans, n + 1);
    }
    atomic_store(&l->in_observe, 0);
}

static circuit_spec make_spec(void)
{
    circuit_spec s;
    memset(&s, 0, sizeof s);
    s.config = (circuit_config){.window = 20, .probes = PROBES, .open_for_ns = 200000,
                                .probe_timeout_ns = 300000};
    s.policy.trip = trip;
    s.policy.probe = probe;
    s.classify = classify;
    s.observe = observe;
    s.salt = 7;
    return s;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- a worker --------------------------------------------------------------- */
static circuit_breaker *wb;
static circuit_breaker *nb[3]; /* arena mode: the neighbours */
static bool arena_mode;
static _Atomic uint64_t ctx_seq;

/* arena mode: where each part is in the memfd */
#define NB_ARENA_UNITS 4
static size_t off_main, off_nb[3], size_total;

static void *worker_thread(void *arg)
{
    int th = (int)(intptr_t)arg;
    proc_log *l = &logs[me];
    uint64_t s = UINT64_C(0x9e3779b97f4a7c15) * (uint64_t)(me * THREADS + th + 1) ^ (uint64_t)getpid();
    int64_t end = now_ms() + run_ms;
    circuit_stats prev;
    memset(&prev, 0, sizeof prev);
    while (now_ms() < end && !atomic_load(&l->bad)) {
        for (int k = 0; k < 64; k++) {
            uint64_t r = rnd(&s);
            void *ctx = (void *)(uintptr_t)(((uint64_t)me + 1) << 32 | (atomic_fetch_add(&ctx_seq, 1) & 0xffffffffu));
            unsigned op = (unsigned)(r % 1000);
            if (op < 2) {
                circuit_isolate(wb, ctx);
            } else if (op < 6) {
                circuit_reset(wb, ctx);
            } else if (op >= 30 && op < 130 && arena_mode) {
                int n = (int)((r >> 32) % 3);
                circuit_ticket t = CIRCUIT_TICKET_INIT;
                circuit_rejection rej;
                atomic_store(&l->nb_phase[th], 1);
                if (!circuit_allow(nb[n], NULL, &t, &rej))
                    fail("L5: neighbour %d rejected (%s)", n, circuit_state_name(rej.state));
                else
                    circuit_done(&t, CIRCUIT_SUCCESS);
                atomic_fetch_add(&l->nb_done[n], 1);
                atomic_store(&l->nb_phase[th], 0);
            } else if (op < 30) {
                circuit_stats st;
                circuit_get_stats(wb, &st);
                if (st.probes_in_flight < 0 || st.probes_in_flight > PROBES)
                    fail("S4: %" PRId64 " probes in flight, P = %d", st.probes_in_flight, PROBES);
#define MONO(f)                                                                                  \
    if (st.f < prev.f)                                                                           \
        fail("M1: " #f " went down from %" PRIu64 " to %" PRIu64, (uint64_t)prev.f, (uint64_t)st.f);
                MONO(admitted) MONO(rejected) MONO(successes) MONO(failures) MONO(ignored)
                MONO(late) MONO(released) MONO(timed_out) MONO(transitions)
#undef MONO
                prev = st;
            } else {
                circuit_ticket t = CIRCUIT_TICKET_INIT;
                circuit_rejection rej;
                atomic_store(&l->phase[th], 1);
                bool ok = circuit_allow(wb, ctx, &t, &rej);
                if (ok)
                    atomic_fetch_add(&l->admitted_ok, 1);
                atomic_store(&l->phase[th], 0);
                if (ok) {
                    if ((r >> 40 & 31) == 0)
                        usleep((useconds_t)(r >> 46 & 511)); /* a slow call: probes time out */
                    unsigned o = (unsigned)(r >> 20) % 100;
                    atomic_store(&l->phase[th], 2);
                    if (o < 5)
                        circuit_release(&t);
                    else
                        circuit_done(&t, o < 60 ? CIRCUIT_SUCCESS : o < 90 ? CIRCUIT_FAILURE
                                                                         : CIRCUIT_IGNORED);
                    atomic_fetch_add(&l->settled, 1);
                    atomic_store(&l->phase[th], 0);
                }
            }
            atomic_fetch_add(&l->ops, 1);
        }
    }
    return NULL;
}

static int worker(int i, int fd, void *base, size_t size)
{
    me = i;
    in_parent = false;
    void *mem = base;
    if (i % 2 == 1) {
        /* SH1: the same memory at another address in this process */
        void *hint = (char *)base + ((size_t)(i + 1) << 32);
        mem = mmap(hint, size_total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (mem == MAP_FAILED || mem == base) {
            fail("SH1: second mapping failed (%s)", strerror(errno));
            return 1;
        }
    }
    logs[i].map_addr = (uintptr_t)mem;
    circuit_spec spec = make_spec();
    char err[256];
    int rc = circuit_shared_attach(&wb, (char *)mem + off_main, size, &spec, err, sizeof err);
    for (int n = 0; arena_mode && rc == 0 && n < 3; n++)
        rc = circuit_shared_attach(&nb[n], (char *)mem + off_nb[n], size, &spec, err, sizeof err);
    if (rc) {
        fail("attach: %d %s", rc, err);
        return 1;
    }
    pthread_t th[THREADS];
    for (int k = 0; k < THREADS; k++)
        pthread_create(&th[k], NULL, worker_thread, (void *)(intptr_t)k);
    for (int k = 0; k < THREADS; k++)
        pthread_join(th[k], NULL);
    circuit_shared_detach(wb);
    for (int n = 0; arena_mode && n < 3; n++)
        circuit_shared_detach(nb[n]);
    atomic_store(&logs[i].finished, 1);
    return 0;
}

/* ---- the parent ------------------------------------------------------------------ */
int main(int argc, char **argv)
{
    int procs = argc > 1 ? atoi(argv[1]) : 6;
    run_ms = argc > 2 ? atol(argv[2]) : 3000;
    uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 0) : 1;
    int kills = argc > 4 ? atoi(argv[4]) : 3;
    arena_mode = argc > 5 && strcmp(argv[5], "arena") == 0;
    if (procs < 2 || procs > MAX_PROCS || kills >= procs || (argc > 5 && !arena_mode)) {
        fprintf(stderr, "usage: stress_fork [procs 2..%d] [ms] [seed] [kills < procs] [arena]\n",
                MAX_PROCS);
        return 2;
    }
#ifdef STRESS_FORK_TSAN
    fprintf(stderr, "stress_fork: SKIP: under ThreadSanitizer 16-byte atomics are a mutex of "
                    "one process, not atomic across processes\n");
    return 77;
#endif
    circuit_test_clock_use_real(true);
    circuit_spec spec = make_spec();
    size_t size = circuit_shared_size(&spec.config);
    if (arena_mode) {
        /* [arena][neighbour 0][the breaker][neighbour 1][neighbour 2], each
         * part aligned: the breaker takes unit 1 of 4 */
        size = circuit_shared_size_in_arena(&spec.config);
        size_t a = circuit_shared_arena_size(NB_ARENA_UNITS);
        size_t each = size; /* a multiple of CIRCUIT_SHARED_ALIGN */
        off_nb[0] = a;
        off_main = a + each;
        off_nb[1] = a + 2 * each;
        off_nb[2] = a + 3 * each;
        size_total = a + 4 * each;
    } else {
        off_main = 0;
        size_total = size;
    }
    int fd = memfd_create("circuit-stress", 0);
    if (fd < 0) {
        fprintf(stderr, "stress_fork: SKIP: memfd_create: %s\n", strerror(errno));
        return 77;
    }
    if (ftruncate(fd, (off_t)size_total) != 0)
        return perror("ftruncate"), 1;
    void *base = mmap(NULL, size_total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    logs = mmap(NULL, sizeof(proc_log) * (size_t)(procs + 1), PROT_READ | PROT_WRITE,
                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED || logs == MAP_FAILED)
        return perror("mmap"), 1;
    char err[512];
    if (arena_mode) {
        if (circuit_shared_arena_init(base, off_nb[0], NB_ARENA_UNITS, err, sizeof err) != 0) {
            fprintf(stderr, "stress_fork: arena: %s\n", err);
            return 1;
        }
        /* units in order: neighbour 0, the breaker, neighbours 1 and 2 */
        size_t order[4] = {off_nb[0], off_main, off_nb[1], off_nb[2]};
        for (int k = 0; k < 4; k++)
            if (circuit_shared_init_in_arena((char *)base + order[k], size, base, &spec, err,
                                             sizeof err) != 0) {
                fprintf(stderr, "stress_fork: init in arena: %s\n", err);
                return 1;
            }
    } else if (circuit_shared_init(base, size, &spec, err, sizeof err) != 0) {
        fprintf(stderr, "stress_fork: init: %s\n", err);
        return 1;
    }
    pid_t pid[MAX_PROCS];
    for (int i = 0; i < procs; i++) {
        pid[i] = fork();
        if (pid[i] == 0)
            _exit(worker(i, fd, base, size));
    }
    /* kills at random moments in the first 80 % of the run */
    uint64_t s = seed * UINT64_C(0x9e3779b97f4a7c15) | 1u;
    bool killed[MAX_PROCS] = {false};
    int64_t start = now_ms();
    for (int k = 0; k < kills; k++) {
        int64_t at = (int64_t)(rnd(&s) % (uint64_t)(run_ms * 8 / 10 + 1));
        int64_t wait = start + at - now_ms();
        if (wait > 0)
            usleep((useconds_t)(wait * 1000));
        int v;
        do
            v = (int)(rnd(&s) % (uint64_t)procs);
        while (killed[v]);
        kill(pid[v], SIGKILL);
        killed[v] = true;
        waitpid(pid[v], NULL, 0); /* reaped: its pid no longer exists (SH2) */
    }
    int failed = 0;
    for (int i = 0; i < procs; i++) {
        if (killed[i])
            continue;
        int st = 0;
        waitpid(pid[i], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !logs[i].finished) {
            fprintf(stderr, "stress_fork: FAIL: worker %d (survivor) ended with status %#x: %s\n", i,
                    st, logs[i].why);
            failed = 1;
        }
    }
    for (int i = 0; i < procs; i++)
        if (atomic_load(&logs[i].bad)) {
            fprintf(stderr, "stress_fork: FAIL: worker %d%s: %s\n", i, killed[i] ? " (killed)" : "",
                    logs[i].why);
            failed = 1;
        }

    /* the final checks, through a handle of the parent's own (its log is
     * the last: the parent is a process too) */
    me = procs;
    circuit_breaker *h = NULL;
    if (circuit_shared_attach(&h, (char *)base + off_main, size, &spec, err, sizeof err) != 0) {
        fprintf(stderr, "stress_fork: attach (parent): %s\n", err);
        return 1;
    }
    /* L5 in an arena: the neighbours' counts, exact beside the stressed
     * breaker's units */
    uint64_t nb_calls = 0;
    for (int n = 0; arena_mode && n < 3; n++) {
        circuit_breaker *hn = NULL;
        if (circuit_shared_attach(&hn, (char *)base + off_nb[n], size, &spec, err, sizeof err) != 0) {
            fprintf(stderr, "stress_fork: attach (parent, neighbour %d): %s\n", n, err);
            return 1;
        }
        circuit_stats sn;
        circuit_get_stats(hn, &sn);
        uint64_t done = 0, inside = 0;
        for (int i = 0; i < procs; i++) {
            done += logs[i].nb_done[n];
            for (int k = 0; k < THREADS; k++)
                inside += killed[i] && logs[i].nb_phase[k];
        }
        nb_calls += done;
        if (sn.successes < done || sn.successes > done + inside || sn.admitted < sn.successes ||
            sn.admitted > done + inside)
            fail("L5/M1: neighbour %d: admitted %" PRIu64 ", successes %" PRIu64 ", but the "
                 "workers finished %" PRIu64 " calls (%" PRIu64 " more in a killed worker)",
                 n, sn.admitted, sn.successes, done, inside);
        if (sn.failures || sn.rejected || sn.transitions || sn.late || sn.ignored || sn.released ||
            sn.timed_out || sn.state != CIRCUIT_CLOSED)
            fail("L5: neighbour %d holds counts it never had: failures %" PRIu64 " rejected %" PRIu64
                 " transitions %" PRIu64 " late %" PRIu64 " state %s",
                 n, sn.failures, sn.rejected, sn.transitions, sn.late,
                 circuit_state_name(sn.state));
        circuit_shared_detach(hn);
    }
    /* Time-driven changes due by now (a dead worker's probe timing out) are
     * made by the next call: a read first, then a call. */
    circuit_stats st;
    circuit_get_stats(h, &st);
    if (st.probes_in_flight > PROBES)
        fail("S4: %" PRId64 " probes in flight at the end, P = %d", st.probes_in_flight, PROBES);
    /* SH2: every probe slot a dead worker held times out, wherever it was
     * killed (finding F5: between two steps of taking or freeing a slot):
     * once probe_timeout has passed with no survivor left, PROBES allows in
     * a row may be refused for the state (a timeout may reopen) but never
     * {HALF_OPEN}, which would be a slot held for good */
    usleep(1000);
    {
        circuit_ticket t[PROBES];
        int held = 0;
        for (int i = 0; i < PROBES; i++) {
            circuit_rejection rej = {CIRCUIT_CLOSED, 0};
            t[held] = (circuit_ticket)CIRCUIT_TICKET_INIT;
            if (circuit_allow(h, NULL, &t[held], &rej)) {
                held++;
                continue;
            }
            if (rej.state == CIRCUIT_HALF_OPEN) {
                circuit_get_stats(h, &st);
                fail("SH2/P1: probe_timeout after the last survivor, allow %d of %d refused "
                     "{half-open}: %" PRId64 " probes in flight (%d of them this check's)",
                     i + 1, PROBES, st.probes_in_flight, held);
            }
        }
        for (int i = 0; i < held; i++)
            circuit_release(&t[i]);
    }
    circuit_get_stats(h, &st);
    uint64_t settled = st.successes + st.failures + st.ignored + st.late + st.released;
    int64_t live_lo = 0, live_hi = 0;
    uint64_t ops = 0, ntr = 0;
    for (int i = 0; i < procs; i++) {
        proc_log *l = &logs[i];
        ops += l->ops;
        if (!killed[i])
            continue;
        int64_t held = (int64_t)l->admitted_ok - (int64_t)l->settled;
        int64_t lo = held, hi = held;
        for (int k = 0; k < THREADS; k++) {
            if (l->phase[k] == 1)
                hi++; /* killed in allow: it may have been admitted */
            if (l->phase[k] == 2)
                lo--; /* killed in a settle: it may have counted */
        }
        live_lo += lo;
        live_hi += hi;
    }
    int64_t live = (int64_t)st.admitted - (int64_t)settled;
    if (live < live_lo || live > live_hi)
        fail("M1/SH2: admitted %" PRIu64 " - settled %" PRIu64 " = %" PRId64
             ", but the dead workers held between %" PRId64 " and %" PRId64,
             st.admitted, settled, live, live_lo, live_hi);

    /* SH3: the transitions over every worker's observe */
    uint64_t n = st.transitions;
    tr_rec *by = calloc(n + 1, sizeof *by);
    int *who = calloc(n + 1, sizeof *who);
    for (int i = 0; i <= procs; i++) {
        proc_log *l = &logs[i];
        ntr += l->ntrans;
        if (l->ntrans >= MAX_TRANS)
            fail("worker %d: more than %d transitions, log full", i, MAX_TRANS);
        for (uint64_t k = 0; k < l->ntrans; k++) {
            uint64_t g = l->trans[k].gen;
            if (g < 1 || g > n) {
                fail("SH3: generation %" PRIu64 " delivered, %" PRIu64 " made", g, n);
                continue;
            }
            if (who[g])
                fail("SH3: generation %" PRIu64 " delivered twice (workers %d and %d)", g, who[g] - 1, i);
            who[g] = i + 1;
            by[g] = l->trans[k];
        }
    }
    uint64_t missing = 0;
    for (uint64_t g = 1; g <= n; g++) {
        if (!who[g]) {
            missing++;
            continue;
        }
        if (g > 1 && who[g - 1] && by[g - 1].to != by[g].from)
            fail("O1: generation %" PRIu64 " goes %d -> %d, generation %" PRIu64 " from %d", g - 1,
                 by[g - 1].from, by[g - 1].to, g, by[g].from);
    }
    /* a worker killed between a transition and its delivery takes it along:
     * a few per kill at most (its pool, and a record being made per thread) */
    if (missing > (uint64_t)kills * (CIRCUIT_TRANSITION_POOL + THREADS))
        fail("SH3: %" PRIu64 " generations of %" PRIu64 " never delivered, %d workers killed", missing,
             n, kills);
    if (kills == 0 && missing)
        fail("O3: %" PRIu64 " generations never delivered with no worker killed", missing);
    int moved = 0;
    for (int i = 0; i < procs; i++)
        moved += logs[i].map_addr != (uintptr_t)base;
    circuit_shared_detach(h);
    free(by);
    free(who);
    if (logs[0].map_addr && moved == 0)
        fail("SH1: no worker mapped the breaker at another address");
    printf("stress_fork: %d processes (%d mapped elsewhere), %d killed, %" PRIu64 " operations, "
           "admitted %" PRIu64 " settled %" PRIu64 " dead-held %" PRId64 " [%" PRId64 ", %" PRId64
           "], transitions %" PRIu64 " delivered %" PRIu64 " lost with the dead %" PRIu64
           ", timed out %" PRIu64 ", final %s%s",
           procs, moved, kills, ops, st.admitted, settled, live, live_lo, live_hi, n, ntr, missing,
           st.timed_out, circuit_state_name(st.state), arena_mode ? "" : "\n");
    if (arena_mode)
        printf(", arena: 3 neighbours exact over %" PRIu64 " calls\n", nb_calls);
    return failed || parent_fails ? 1 : 0;
}
