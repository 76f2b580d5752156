/*
 * One breaker in shared memory (SH1-SH5): building, attaching and what a
 * process killed at a chosen instruction leaves to the others.
 *
 * Processes here are real: a forked child attaches its own handle, runs to
 * a test point of the core (circuit_test_set_hook), or to a chosen line,
 * and SIGKILLs itself there; the parent reaps it (its pid then no longer exists) and checks what
 * the breaker gives the survivors. The fork stress (tests/stress/
 * stress_fork.c) does the same at random points; the schedule checker
 * (tests/sched, scenarios shared_*) at every switch point.
 */
#include "helpers.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "circuit_shared.h"
#include "internal.h" /* tot_ctl's busy bit (SH2's takeover) */

TestSuite(sh);

#define SH_OPEN 1000000
#define SH_PROBE 500000

typedef struct seen {
    int n;
    circuit_transition t[64];
    void *ctx[64];
} seen;

static bool trip1(void *arg, const circuit_counts *c)
{
    (void)arg;
    return c->failures >= 1;
}
static circuit_state probe1(void *arg, const circuit_counts *c)
{
    (void)arg;
    if (c->failures > 0 || c->timed_out > 0)
        return CIRCUIT_OPEN;
    return c->successes >= 1 ? CIRCUIT_CLOSED : CIRCUIT_HALF_OPEN;
}
static circuit_outcome sh_cls(void *arg, void *ctx, int result)
{
    (void)arg, (void)ctx;
    return (circuit_outcome)result;
}
static void obs(void *arg, void *ctx, const circuit_transition *t)
{
    seen *s = arg;
    if (s->n < 64) {
        s->t[s->n] = *t;
        s->ctx[s->n++] = ctx;
    }
}

static circuit_spec spec_of(seen *s, int window, int probes)
{
    circuit_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.config = (circuit_config){window, probes, SH_OPEN, SH_PROBE};
    sp.policy.trip = trip1;
    sp.policy.probe = probe1;
    sp.classify = sh_cls;
    sp.observe = obs;
    sp.observe_arg = s;
    return sp;
}

/* a MAP_SHARED region (survives fork) of the size the config needs */
static void *region(const circuit_config *cfg, size_t *len)
{
    *len = circuit_shared_size(cfg);
    cr_assert(*len > 0);
    void *m = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(m != MAP_FAILED);
    return m;
}

static bool call(circuit_breaker *b, void *ctx, int outcome)
{
    circuit_ticket t = CIRCUIT_TICKET_INIT;
    circuit_rejection rej;
    if (!circuit_allow(b, ctx, &t, &rej))
        return false;
    circuit_done(&t, outcome);
    return true;
}

/* ---- SH1 ------------------------------------------------------------------ */

Test(sh, SH1_size_init_attach)
{
    circuit_config bad = {0, 1, 1, 1};
    cr_expect_eq(circuit_shared_size(&bad), 0);
    cr_expect_eq(circuit_shared_size(NULL), 0);
    seen s = {0};
    circuit_spec sp = spec_of(&s, 4, 1);
    size_t len;
    void *m = region(&sp.config, &len);
    /* the whole breaker, per-CPU part included: the config's arrays and a
     * line per CPU */
    cr_expect_geq(len, circuit__arrays_bytes(4, 1) + circuit__cpus_configured() * CIRCUIT_CACHELINE);
    char err[256];
    cr_assert_eq(circuit_shared_init(m, len, &sp, err, sizeof err), 0, "%s", err);
    circuit_breaker *b;
    cr_assert_eq(circuit_shared_attach(&b, m, len, &sp, err, sizeof err), 0, "%s", err);
    cr_expect_eq(circuit_get_state(b), CIRCUIT_CLOSED); /* S1 */
    cr_expect(call(b, NULL, CIRCUIT_SUCCESS));
    cr_expect(call(b, NULL, CIRCUIT_FAILURE)); /* trips */
    cr_expect_eq(circuit_get_state(b), CIRCUIT_OPEN);
    cr_expect_eq(s.n, 1);
    circuit_stats st;
    circuit_get_stats(b, &st);
    cr_expect_eq(st.admitted, 2);
    cr_expect_eq(st.successes, 1);
    cr_expect_eq(st.failures, 1);
    cr_expect_eq(st.transitions, 1);
    circuit_shared_detach(b);
    munmap(m, len);
}

/* The region holds no pointer: its bytes copied elsewhere are the same
 * breaker, and one memfd mapped twice in one process is one breaker at two
 * addresses. */
Test(sh, SH1_relocated_and_two_mappings)
{
    seen s = {0};
    circuit_spec sp = spec_of(&s, 8, 2);
    size_t len = circuit_shared_size(&sp.config);
    int fd = memfd_create("sh1", 0);
    cr_assert(fd >= 0);
    cr_assert_eq(ftruncate(fd, (off_t)len), 0);
    void *a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    void *c = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    cr_assert(a != MAP_FAILED && c != MAP_FAILED && a != c);
    cr_assert_eq(circuit_shared_init(a, len, &sp, NULL, 0), 0);
    circuit_breaker *ha, *hc;
    seen s2 = {0};
    circuit_spec sp2 = spec_of(&s2, 8, 2);
    cr_assert_eq(circuit_shared_attach(&ha, a, len, &sp, NULL, 0), 0);
    cr_assert_eq(circuit_shared_attach(&hc, c, len, &sp2, NULL, 0), 0);
    for (int i = 0; i < 5; i++)
        cr_expect(call(ha, NULL, CIRCUIT_SUCCESS));
    circuit_stats sa, sc;
    circuit_get_stats(ha, &sa);
    circuit_get_stats(hc, &sc);
    cr_expect_eq(sc.admitted, 5);
    cr_expect_eq(sc.successes, 5);
    cr_expect(call(hc, NULL, CIRCUIT_FAILURE)); /* trips, through the other mapping */
    cr_expect_eq(circuit_get_state(ha), CIRCUIT_OPEN);
    /* copied bytes: the same breaker (a quiescent copy) */
    void *copy = NULL;
    cr_assert_eq(posix_memalign(&copy, CIRCUIT_SHARED_ALIGN, len), 0);
    memcpy(copy, a, len);
    circuit_breaker *hx;
    cr_assert_eq(circuit_shared_attach(&hx, copy, len, &sp, NULL, 0), 0);
    circuit_stats sx;
    circuit_get_stats(hx, &sx);
    cr_expect_eq(sx.state, CIRCUIT_OPEN);
    cr_expect_eq(sx.admitted, 6);
    cr_expect_eq(sx.failures, 1);
    cr_expect_eq(sx.transitions, 1);
    circuit_shared_detach(hx);
    free(copy);
    circuit_shared_detach(ha);
    circuit_shared_detach(hc);
    munmap(a, len);
    munmap(c, len);
    close(fd);
}

/* ---- SH2: a process killed at a chosen point -------------------------------- */

static circuit_test_point kill_at;
static void kill_hook(circuit_test_point p, void *arg)
{
    (void)arg;
    if (p == kill_at)
        raise(SIGKILL);
}

/* The pid the next child's handle claims (0: its own): a pid reused by
 * another process, played through the test seam. */
static pid_t claim_pid;
static bool claim_no_start; /* and its start time unknown (no /proc there) */
static pid_t last_child;

/* Runs body(b, shared counter) in a child attached to m; the child kills
 * itself at `at` (0: does not). Returns after reaping it. */
static void child(void *m, size_t len, circuit_spec *sp, circuit_test_point at,
                  void (*body)(circuit_breaker *b, volatile int64_t *n), volatile int64_t *n)
{
    pid_t p = fork();
    cr_assert(p >= 0);
    last_child = p;
    if (p == 0) {
        circuit_breaker *b;
        if (circuit_shared_attach(&b, m, len, sp, NULL, 0) != 0)
            _exit(3);
        if (claim_pid)
            circuit_test_shared_proc(b, (uint32_t)claim_pid);
        if (claim_no_start)
            b->proc_start = 0;
        kill_at = at;
        circuit_test_set_hook(kill_hook, NULL);
        body(b, n);
        _exit(0);
    }
    int st = 0;
    cr_assert_eq(waitpid(p, &st, 0), p);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the child was to die (point %d), status %#x",
              at, st);
}

static void ignored_until_killed(circuit_breaker *b, volatile int64_t *n)
{
    for (int i = 0; i < 100000; i++) {
        circuit_ticket t = CIRCUIT_TICKET_INIT;
        circuit_rejection rej;
        (*n)++; /* before the call: the kill comes inside its done */
        if (circuit_allow(b, NULL, &t, &rej))
            circuit_done(&t, CIRCUIT_IGNORED);
    }
}

/* A flusher of the packed totals killed between its CREDIT and its
 * SUBTRACT: the units are in both places, once counted; the flush role is
 * taken over by the next thread that needs it, which finishes the steps.
 * reuse 1: the survivor has the dead flusher's pid (a reused pid: only the
 * start times differ); reuse 2: a live, older process has it; reuse 3: as
 * 2, but the flusher knew no start time of its own: nothing tells it from
 * that live process, so the role must stay held (never two live runners),
 * the counts exact on the shared line. */
static void flush_killed_at(circuit_test_point at, int reuse)
{
    circuit_test_set_cpus(1); /* every process counts on unit 0 */
    seen s = {0};
    circuit_spec sp = spec_of(&s, 4, 1);
    size_t len;
    void *m = region(&sp.config, &len);
    cr_assert_eq(circuit_shared_init(m, len, &sp, NULL, 0), 0);
    volatile int64_t *n = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    *n = 0;
    pid_t sleeper = 0;
    if (reuse >= 2) {
        sleeper = fork();
        cr_assert(sleeper >= 0);
        if (sleeper == 0) {
            pause();
            _exit(0);
        }
        usleep(50000); /* a start time some clock ticks earlier than the flusher's */
        claim_pid = sleeper;
        claim_no_start = reuse == 3;
    }
    if (reuse == 1) {
        /* start times are kept in clock ticks: the child (the owner) must
         * start in a later tick than this process (its pid's next holder),
         * or the two are one process to the taker. Criterion forked this
         * process just now: wait three ticks. */
        long tck = sysconf(_SC_CLK_TCK);
        usleep((useconds_t)(3000000 / (tck > 0 ? tck : 100)));
    }
    child(m, len, &sp, at, ignored_until_killed, n);
    claim_pid = 0;
    claim_no_start = false;
    circuit_breaker *b;
    cr_assert_eq(circuit_shared_attach(&b, m, len, &sp, NULL, 0), 0);
    if (reuse == 1)
        circuit_test_shared_proc(b, (uint32_t)last_child);
    circuit__shared *sh = b->s;
    cr_assert(sh->tot_ctl & 1u, "the dead flusher's role is still held");
    circuit_stats st;
    circuit_get_stats(b, &st);
    /* the child's n-th call was inside its done: its ignored was added */
    cr_expect_eq(st.ignored, (uint64_t)*n, "ignored %llu, the child counted %lld",
                 (unsigned long long)st.ignored, (long long)*n);
    cr_expect_eq(st.admitted, (uint64_t)*n);
    /* 400 more on the same unit: the field reaches its top, the overflow
     * path finds the owner gone and takes the flush over */
    for (int i = 0; i < 400; i++)
        cr_assert(call(b, NULL, CIRCUIT_IGNORED));
    if (reuse == 3)
        cr_expect_eq(sh->tot_ctl & 1u, 1, "taken over from a process that may be alive");
    else
        cr_expect_eq(sh->tot_ctl & 1u, 0, "the flush was not taken over");
    circuit_get_stats(b, &st);
    cr_expect_eq(st.ignored, (uint64_t)*n + 400);
    cr_expect_eq(st.admitted, (uint64_t)*n + 400);
    /* and flushes run again: 1000 more, exact */
    for (int i = 0; i < 1000; i++)
        cr_assert(call(b, NULL, CIRCUIT_IGNORED));
    circuit_get_stats(b, &st);
    cr_expect_eq(st.ignored, (uint64_t)*n + 1400);
    cr_expect_eq(st.admitted, (uint64_t)*n + 1400);
    circuit_shared_detach(b);
    circuit_test_set_cpus(0);
    if (sleeper) {
        kill(sleeper, SIGKILL);
        waitpid(sleeper, NULL, 0);
    }
}

Test(sh, SH2_flusher_killed_after_credit) { flush_killed_at(CIRCUIT_TP_TOTALS_CREDITED, 0); }
Test(sh, SH2_flusher_killed_after_start) { flush_killed_at(CIRCUIT_TP_TOTALS_STARTED, 0); }
Test(sh, SH2_flusher_killed_after_subtract) { flush_killed_at(CIRCUIT_TP_TOTALS_SUBTRACTED, 0); }
/* its pid reused: by the survivor itself, or by another live process */
Test(sh, SH2_flusher_killed_its_pid_reused_by_the_taker)
{
    flush_killed_at(CIRCUIT_TP_TOTALS_CREDITED, 1);
}
Test(sh, SH2_flusher_killed_its_pid_reused_by_a_live_process)
{
    flush_killed_at(CIRCUIT_TP_TOTALS_CREDITED, 2);
}
Test(sh, SH2_flusher_with_no_start_time_is_never_taken_from_a_live_pid)
{
    flush_killed_at(CIRCUIT_TP_TOTALS_CREDITED, 3);
}

static void probe_and_die(circuit_breaker *b, volatile int64_t *n)
{
    (void)n;
    circuit_ticket t = CIRCUIT_TICKET_INIT;
    circuit_rejection rej;
    if (circuit_allow(b, NULL, &t, &rej))
        raise(SIGKILL); /* holding the probe slot */
    _exit(4);
}

static void three_tickets_and_die(circuit_breaker *b, volatile int64_t *n)
{
    (void)n;
    circuit_ticket t[3];
    circuit_rejection rej;
    for (int i = 0; i < 3; i++)
        if (!circuit_allow(b, NULL, &t[i], &rej))
            _exit(5);
    raise(SIGKILL);
}

/* A dead process's probe slot times out (P1); its tickets are never
 * counted: admitted exceeds settled by what it held. */
Test(sh, SH2_dead_probe_times_out_and_tickets_stay_live)
{
    circuit_test_clock_set(T0);
    seen s = {0};
    circuit_spec sp = spec_of(&s, 4, 1);
    size_t len;
    void *m = region(&sp.config, &len);
    cr_assert_eq(circuit_shared_init(m, len, &sp, NULL, 0), 0);
    circuit_breaker *b;
    cr_assert_eq(circuit_shared_attach(&b, m, len, &sp, NULL, 0), 0);
    child(m, len, &sp, 0, three_tickets_and_die, NULL);
    circuit_stats st;
    circuit_get_stats(b, &st);
    cr_expect_eq(st.admitted - (st.successes + st.failures + st.ignored + st.late + st.released), 3);
    cr_expect(call(b, NULL, CIRCUIT_FAILURE)); /* open */
    circuit_test_clock_advance(SH_OPEN);
    child(m, len, &sp, 0, probe_and_die, NULL);
    circuit_ticket t = CIRCUIT_TICKET_INIT;
    circuit_rejection rej;
    cr_expect_not(circuit_allow(b, NULL, &t, &rej), "the dead process holds the one probe");
    cr_expect_eq(rej.state, CIRCUIT_HALF_OPEN);
    circuit_test_clock_advance(SH_PROBE);
    /* its timeout reopens (probe1: a timeout reopens) */
    cr_expect_not(circuit_allow(b, NULL, &t, &rej));
    circuit_get_stats(b, &st);
    cr_expect_eq(st.timed_out, 1);
    cr_expect_eq(st.state, CIRCUIT_OPEN);
    circuit_test_clock_advance(SH_OPEN);
    cr_expect(call(b, NULL, CIRCUIT_SUCCESS)); /* a probe of ours closes */
    cr_expect_eq(circuit_get_state(b), CIRCUIT_CLOSED);
    circuit_shared_detach(b);
}

/* SH2, P1 (finding F5): a process killed right after the CAS that took a
 * probe slot, before it made sure the timeout scan looks for its due time
 * (CIRCUIT_TP_PROBE_TAKEN, in hint_note's place), leaves a slot that still
 * times out: once probe_timeout has passed, the next allow times it out and
 * is admitted to it. The policy keeps probing after a timeout, so a slot
 * held for good shows as a refusal {HALF_OPEN}. hint_raised: the dying
 * allow first timed out an earlier probe, a scan that raises the timeout
 * hint past what it saw (the window in which an uncapped hint hides the
 * dead probe's due for good). Before the fix (a bit, then the record) the
 * same kill left the slot held: refused {HALF_OPEN}, timed_out 0, for as
 * long as the generation lasted. */
static circuit_state probe_stay(void *arg, const circuit_counts *c)
{
    (void)arg;
    return c->failures > 0 ? CIRCUIT_OPEN : CIRCUIT_HALF_OPEN;
}

static void take_and_die(circuit_breaker *b, volatile int64_t *n)
{
    (void)n;
    circuit_ticket t = CIRCUIT_TICKET_INIT;
    circuit_rejection rej;
    circuit_allow(b, NULL, &t, &rej); /* killed inside, at CIRCUIT_TP_PROBE_TAKEN */
    _exit(4);
}

/* A shared breaker whose probe policy keeps probing, with `probes` slots,
 * tripped and past its open period; the region in *m, *len. */
static circuit_breaker *stay_breaker_due(seen *s, circuit_spec *sp, int probes, void **m,
                                         size_t *len)
{
    circuit_test_clock_set(T0);
    *sp = spec_of(s, 4, probes);
    sp->policy.probe = probe_stay;
    *m = region(&sp->config, len);
    cr_assert_eq(circuit_shared_init(*m, *len, sp, NULL, 0), 0);
    circuit_breaker *b;
    cr_assert_eq(circuit_shared_attach(&b, *m, *len, sp, NULL, 0), 0);
    cr_assert(call(b, NULL, CIRCUIT_FAILURE)); /* open */
    circuit_test_clock_advance(SH_OPEN);
    return b;
}

static void killed_taking_a_slot(bool hint_raised)
{
    seen s = {0};
    circuit_spec sp;
    size_t len;
    void *m;
    circuit_breaker *b = stay_breaker_due(&s, &sp, 1, &m, &len);
    circuit_ticket p = CIRCUIT_TICKET_INIT;
    circuit_rejection rej;
    cr_assert(circuit_allow(b, NULL, &p, &rej), "the first probe (half-open)");
    uint64_t timeouts = 0;
    if (hint_raised) {
        circuit_test_clock_advance(SH_PROBE); /* p is due: the child's allow times it out */
        timeouts = 1;
    } else {
        circuit_done(&p, CIRCUIT_SUCCESS); /* stays half-open, the slot free */
    }
    child(m, len, &sp, CIRCUIT_TP_PROBE_TAKEN, take_and_die, NULL);
    circuit_stats st;
    circuit_get_stats(b, &st);
    cr_assert_eq(st.state, CIRCUIT_HALF_OPEN);
    cr_assert_eq(st.probes_in_flight, 1, "the dead process holds the one slot");
    cr_assert_eq(st.timed_out, timeouts);
    circuit_ticket t = CIRCUIT_TICKET_INIT;
    cr_assert_not(circuit_allow(b, NULL, &t, &rej), "not due yet: refused for the dead probe");
    cr_assert_eq(rej.state, CIRCUIT_HALF_OPEN);
    circuit_test_clock_advance(SH_PROBE + 1);
    bool ok = circuit_allow(b, NULL, &t, &rej);
    circuit_get_stats(b, &st);
    cr_assert(ok, "probe_timeout after the kill, the dead probe's slot is free: refused {%s}, in "
                  "flight %lld, timed_out %lld",
              circuit_state_name(rej.state), (long long)st.probes_in_flight, (long long)st.timed_out);
    cr_assert_eq(st.timed_out, timeouts + 1, "the dead probe timed out");
    cr_assert_eq(st.probes_in_flight, 1);
    circuit_done(&t, CIRCUIT_SUCCESS);
    if (hint_raised)
        circuit_done(&p, CIRCUIT_SUCCESS); /* late: P2, counted while half-open */
    circuit_shared_detach(b);
}

/* SH2, P1: an admitter slow between its clock read and the CAS that takes
 * its slot (meanwhile another process's scan raised the timeout hint past
 * its due time), then killed right after that CAS. Its due time is in the
 * past already; the hint must not hide it until that scan's clock +
 * probe_timeout: the slot times out at the next allow. Planted twin
 * HINT_AFTER_ONLY (the hint lowered only after the take): refused
 * {HALF_OPEN} for 20 probe timeouts more (a fresh review's repro). */
static volatile int *stall_flag;
static void stall_then_kill(circuit_test_point p, void *arg)
{
    (void)arg;
    if (p == CIRCUIT_TP_ALLOW_BEFORE_ADMIT && !stall_flag[1]) {
        stall_flag[0] = 1;
        while (!stall_flag[1])
            usleep(1000);
    }
    if (p == CIRCUIT_TP_PROBE_TAKEN)
        raise(SIGKILL);
}

Test(sh, SH2_P1_killed_after_a_slow_take_past_a_raised_hint)
{
    seen s = {0};
    circuit_spec sp;
    size_t len;
    void *m;
    circuit_breaker *b = stay_breaker_due(&s, &sp, 2, &m, &len);
    stall_flag = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(stall_flag != MAP_FAILED);
    cr_assert(call(b, NULL, CIRCUIT_SUCCESS)); /* half-open, both slots free */
    const int64_t stall = 20 * (int64_t)SH_PROBE;
    pid_t c = fork();
    cr_assert(c >= 0);
    if (c == 0) {
        circuit_breaker *cb;
        if (circuit_shared_attach(&cb, m, len, &sp, NULL, 0) != 0)
            _exit(3);
        circuit_test_set_hook(stall_then_kill, NULL);
        circuit_ticket ct = CIRCUIT_TICKET_INIT;
        circuit_rejection cr;
        circuit_allow(cb, NULL, &ct, &cr); /* clock read at T; stalls; takes slot 1; killed */
        _exit(4);
    }
    while (!stall_flag[0])
        usleep(1000);
    circuit_test_clock_advance(stall);
    circuit_ticket p = CIRCUIT_TICKET_INIT, q = CIRCUIT_TICKET_INIT;
    circuit_rejection rej;
    cr_assert(circuit_allow(b, NULL, &p, &rej), "P: slot 0 (its scan raises the hint)");
    stall_flag[1] = 1;
    int st = 0;
    cr_assert_eq(waitpid(c, &st, 0), c);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the child was to die, status %#x", st);
    circuit_test_clock_advance(1);
    bool ok = circuit_allow(b, NULL, &q, &rej);
    circuit_stats sts;
    circuit_get_stats(b, &sts);
    cr_assert(ok, "the dead probe was due %lld ns ago, yet refused {%s}: in flight %lld, "
                  "timed_out %lld",
              (long long)(stall + 1 - SH_PROBE), circuit_state_name(rej.state),
              (long long)sts.probes_in_flight, (long long)sts.timed_out);
    cr_assert_eq(sts.timed_out, 1, "the dead probe timed out");
    circuit_done(&q, CIRCUIT_SUCCESS);
    circuit_done(&p, CIRCUIT_SUCCESS);
    circuit_shared_detach(b);
}

Test(sh, SH2_P1_killed_after_taking_a_probe_slot) { killed_taking_a_slot(false); }
Test(sh, SH2_P1_killed_after_taking_a_slot_past_a_raised_hint) { killed_taking_a_slot(true); }

/* After attach, a worker's path allocates nothing and takes no lock of the
 * allocator (transitions included, within the pool). */
Test(sh, SH2_no_allocation_after_attach)
{
    circuit_test_clock_set(T0);
    seen s = {0};
    circuit_spec sp = spec_of(&s, 4, 1);
    size_t len;
    void *m = region(&sp.config, &len);
    cr_assert_eq(circuit_shared_init(m, len, &sp, NULL, 0), 0);
    circuit_breaker *b;
    cr_assert_eq(circuit_shared_attach(&b, m, len, &sp, NULL, 0), 0);
    int64_t before = A_LOAD(&alloc_calls);
    for (int i = 0; i < 2000; i++) {
        call(b, NULL, i % 7 == 0 ? CIRCUIT_FAILURE : CIRCUIT_SUCCESS);
        if (i % 50 == 0)
            circuit_test_clock_advance(SH_OPEN);
        circuit_stats st;
        circuit_get_stats(b, &st);
    }
    circuit_isolate(b, NULL);
    circuit_reset(b, NULL);
    cr_expect_eq(A_LOAD(&alloc_calls) - before, 0, "%lld allocations on the worker path",
                 (long long)(A_LOAD(&alloc_calls) - before));
    cr_expect_gt(s.n, 10);
    circuit_shared_detach(b);
}

/* SH2 with threads: while one thread of the process is stalled inside its
 * observe, its other threads make transitions that wait for it. The first
 * CIRCUIT_TRANSITION_POOL + CIRCUIT_SHARED_TRANSITION_POOL waiting records
 * come from the handle's pool and the process's reserve (no allocation);
 * the one past them is the only allocation, from the process's heap; all
 * are delivered afterwards, in order, exactly once, and the reserve is
 * whole again (a second round allocates nothing either). */
typedef struct stall {
    sem_t inside, go;
    int stall_at; /* the delivery that stalls */
    uint64_t gens[2 * (CIRCUIT_TRANSITION_POOL + CIRCUIT_SHARED_TRANSITION_POOL) + 8];
    int n;
} stall;

static void stall_obs(void *arg, void *ctx, const circuit_transition *t)
{
    (void)ctx;
    stall *st = arg;
    if (st->n < (int)(sizeof st->gens / sizeof st->gens[0]))
        st->gens[st->n] = t->generation;
    if (st->n++ == st->stall_at) {
        sem_post(&st->inside);
        sem_wait(&st->go);
    }
}

static void *isolate_once(void *arg)
{
    circuit_isolate(arg, NULL); /* makes generation 1 and delivers: stalls */
    return NULL;
}

Test(sh, SH2_no_allocation_while_its_observe_is_stalled_up_to_the_pool)
{
    seen unused = {0};
    stall st;
    memset(&st, 0, sizeof st);
    sem_init(&st.inside, 0, 0);
    sem_init(&st.go, 0, 0);
    circuit_spec sp = spec_of(&unused, 4, 1);
    sp.observe = stall_obs;
    sp.observe_arg = &st;
    size_t len;
    void *m = region(&sp.config, &len);
    cr_assert_eq(circuit_shared_init(m, len, &sp, NULL, 0), 0);
    circuit_breaker *b;
    cr_assert_eq(circuit_shared_attach(&b, m, len, &sp, NULL, 0), 0);
    enum { HELD = CIRCUIT_TRANSITION_POOL + CIRCUIT_SHARED_TRANSITION_POOL };
    int made = 0;
    for (int round = 0; round < 2; round++) {
        /* an isolate whose delivery stalls (reset first when isolated) */
        if (made % 2 == 1) {
            circuit_reset(b, NULL);
            made++;
        }
        st.stall_at = made;
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, isolate_once, b), 0);
        sem_wait(&st.inside); /* its record is held by the stalled observe */
        made++;
        int64_t before = A_LOAD(&alloc_calls);
        /* reset, isolate, ...: each a transition that waits for the stalled
         * observe, until pool and reserve are used up */
        for (int k = 1; k < HELD; k++, made++) {
            if (made % 2 == 1)
                circuit_reset(b, NULL);
            else
                circuit_isolate(b, NULL);
        }
        cr_expect_eq(A_LOAD(&alloc_calls) - before, 0,
                     "round %d: %lld allocations with %d transitions waiting (pool and reserve "
                     "hold %d)",
                     round, (long long)(A_LOAD(&alloc_calls) - before), (int)HELD, (int)HELD);
        if (round == 0) {
            /* one more: the one allocation */
            if (made % 2 == 1)
                circuit_reset(b, NULL);
            else
                circuit_isolate(b, NULL);
            made++;
            cr_expect_eq(A_LOAD(&alloc_calls) - before, 1,
                         "past pool and reserve: one record from the heap");
        }
        sem_post(&st.go);
        pthread_join(th, NULL);
        cr_expect_eq(st.n, made, "round %d: %d transitions made, %d delivered", round, made, st.n);
    }
    circuit_stats s;
    circuit_get_stats(b, &s);
    cr_expect_eq(s.transitions, (uint64_t)made);
    for (int i = 0; i < made && i < st.n; i++)
        cr_expect_eq(st.gens[i], (uint64_t)i + 1, "delivery %d: generation %llu", i,
                     (unsigned long long)st.gens[i]);
    circuit_shared_detach(b);
    sem_destroy(&st.inside);
    sem_destroy(&st.go);
    munmap(m, len);
}

/* ---- SH3: each transition to the observe of the process that made it ------ */

Test(sh, SH3_each_handle_delivers_its_own)
{
    circuit_test_clock_set(T0);
    seen sa = {0}, sb = {0};
    circuit_spec pa = spec_of(&sa, 4, 1), pb = spec_of(&sb, 4, 1);
    size_t len;
    void *m = region(&pa.config, &len);
    cr_assert_eq(circuit_shared_init(m, len, &pa, NULL, 0), 0);
    circuit_breaker *a, *b;
    cr_assert_eq(circuit_shared_attach(&a, m, len, &pa, NULL, 0), 0);
    cr_assert_eq(circuit_shared_attach(&b, m, len, &pb, NULL, 0), 0);
    cr_expect(call(a, (void *)1, CIRCUIT_FAILURE));  /* g1 closed -> open, by a */
    circuit_test_clock_advance(SH_OPEN);
    cr_expect(call(b, (void *)2, CIRCUIT_SUCCESS));  /* g2 -> half-open, g3 -> closed, by b */
    cr_expect(call(a, (void *)3, CIRCUIT_FAILURE));  /* g4 closed -> open, by a */
    cr_expect_eq(circuit_isolate(b, (void *)4), 0);  /* g5, by b */
    cr_assert_eq(sa.n, 2);
    cr_assert_eq(sb.n, 3);
    cr_expect_eq(sa.t[0].generation, 1);
    cr_expect_eq(sa.t[1].generation, 4);
    cr_expect_eq(sb.t[0].generation, 2);
    cr_expect_eq(sb.t[1].generation, 3);
    cr_expect_eq(sb.t[2].generation, 5);
    cr_expect_eq(sa.ctx[0], (void *)1);
    cr_expect_eq(sa.ctx[1], (void *)3);
    cr_expect_eq(sb.ctx[2], (void *)4);
    /* every generation once over both, chained */
    cr_expect_eq(sa.t[1].from, sb.t[1].to);
    circuit_stats st;
    circuit_get_stats(a, &st);
    cr_expect_eq(st.transitions, 5);
    circuit_shared_detach(a);
    circuit_shared_detach(b);
}

/* ---- SH4: every other call works on a handle ------------------------------- */

Test(sh, SH4_circuit_api_on_a_handle)
{
    circuit_test_clock_set(T0);
    seen s = {0};
    circuit_spec sp = spec_of(&s, 2, 1);
    sp.salt = 42;
    size_t len;
    void *m = region(&sp.config, &len);
    cr_assert_eq(circuit_shared_init(m, len, &sp, NULL, 0), 0);
    circuit_breaker *b;
    sp.salt = 7; /* attach ignores it: the breaker's is init's */
    cr_assert_eq(circuit_shared_attach(&b, m, len, &sp, NULL, 0), 0);
    cr_expect_eq(circuit_get_salt(b), 42);
    circuit_ticket t = CIRCUIT_TICKET_INIT;
    circuit_rejection rej;
    cr_assert(circuit_allow(b, NULL, &t, &rej));
    circuit_release(&t);
    cr_expect(call(b, NULL, CIRCUIT_FAILURE));
    cr_expect_not(circuit_allow(b, NULL, &t, &rej));
    cr_expect_eq(rej.state, CIRCUIT_OPEN);
    cr_expect_eq(rej.retry_after_ns, SH_OPEN);
    cr_expect_eq(circuit_isolate(b, NULL), 0);
    cr_expect_eq(circuit_isolate(b, NULL), EALREADY);
    cr_expect_eq(circuit_reset(b, NULL), 0);
    circuit_stats st;
    circuit_get_stats(b, &st);
    cr_expect_eq(st.admitted, 2);
    cr_expect_eq(st.released, 1);
    cr_expect_eq(st.rejected, 1);
    cr_expect_eq(st.transitions, 3);
    circuit_shared_detach(b);
}

static void free_handle(void)
{
    seen s = {0};
    circuit_spec sp = spec_of(&s, 2, 1);
    size_t len;
    void *m = region(&sp.config, &len);
    circuit_shared_init(m, len, &sp, NULL, 0);
    circuit_breaker *b;
    circuit_shared_attach(&b, m, len, &sp, NULL, 0);
    circuit_free(b);
}
Test(sh, SH4_circuit_free_on_a_handle_aborts, .signal = SIGABRT) { free_handle(); }

Test(sh, SH4_detach_of_circuit_new_breaker_aborts, .signal = SIGABRT)
{
    seen s = {0};
    circuit_spec sp = spec_of(&s, 2, 1);
    circuit_breaker *b;
    circuit_new(&b, &sp, NULL, 0);
    circuit_shared_detach(b);
}

/* ---- SH5: attach checks magic, layout version and the config --------------- */

static int refusing_check(void *arg, const circuit_config *cfg, char *err, size_t n)
{
    (void)arg, (void)cfg;
    snprintf(err, n, "no, thanks");
    return EINVAL;
}

Test(sh, SH5_init_one_message_for_every_problem)
{
    seen s = {0};
    circuit_spec sp = spec_of(&s, 4, 1);
    size_t len = circuit_shared_size(&sp.config);
    char *m = NULL;
    cr_assert_eq(posix_memalign((void **)&m, CIRCUIT_SHARED_ALIGN, len + CIRCUIT_SHARED_ALIGN), 0);
    char err[512];
    cr_expect_eq(circuit_shared_init(m + 8, len - 8, &sp, err, sizeof err), EINVAL);
    cr_expect(strstr(err, "len = ") && strstr(err, "must be at least"), "%s", err);
    cr_expect(strstr(err, "must be aligned to"), "%s", err);
    sp.policy.check = refusing_check;
    cr_expect_eq(circuit_shared_init(m, len - 8, &sp, err, sizeof err), EINVAL);
    cr_expect(strstr(err, "policy: no, thanks") && strstr(err, "must be at least"),
              "the policy's complaint and the length, in one message: %s", err);
    sp.config.window = 0;
    cr_expect_eq(circuit_shared_init(m + 8, len, &sp, err, sizeof err), EINVAL);
    cr_expect(strstr(err, "window = 0") && strstr(err, "policy: no, thanks") &&
                  strstr(err, "aligned"),
              "%s", err);
    free(m);
}

Test(sh, SH5_attach_refuses_a_mismatch)
{
    seen s = {0};
    circuit_spec sp = spec_of(&s, 4, 1);
    size_t len;
    void *m = region(&sp.config, &len);
    cr_assert_eq(circuit_shared_init(m, len, &sp, NULL, 0), 0);
    circuit_breaker *b = (circuit_breaker *)1;
    char err[512];
    circuit_spec other = sp;
    other.config.window = 5;
    other.config.probe_timeout_ns = 7;
    cr_expect_eq(circuit_shared_attach(&b, m, len, &other, err, sizeof err), EINVAL);
    cr_expect_null(b);
    cr_expect(strstr(err, "config.window = 5 (the shared breaker's is 4)") &&
                  strstr(err, "config.probe_timeout_ns = 7"),
              "%s", err);
    cr_expect_eq(circuit_shared_attach(&b, m, len - 64, &sp, err, sizeof err), EINVAL);
    cr_expect(strstr(err, "len = "), "%s", err);
    /* the layout version */
    uint32_t *layout = (uint32_t *)((char *)m + 8);
    *layout += 1;
    cr_expect_eq(circuit_shared_attach(&b, m, len, &sp, err, sizeof err), EPROTO);
    cr_expect(strstr(err, "layout version"), "%s", err);
    *layout -= 1;
    /* the magic */
    uint64_t saved = *(uint64_t *)m;
    *(uint64_t *)m = 0x1234;
    cr_expect_eq(circuit_shared_attach(&b, m, len, &sp, err, sizeof err), EPROTO);
    cr_expect(strstr(err, "holds no breaker"), "%s", err);
    *(uint64_t *)m = saved;
    cr_expect_eq(circuit_shared_attach(&b, m, len, &sp, err, sizeof err), 0);
    cr_expect_eq(err[0], '\0');
    circuit_shared_detach(b);
}

/* ---- arenas: many breakers' per-CPU parts, 16 bytes per CPU each (L5) ------ */

/* A MAP_SHARED mapping holding an arena of `cap` units and then `n`
 * breakers of the given windows, built in order (breaker k takes unit k).
 * Returns the mapping; the breakers' offsets in off[]. */
static char *arena_with(unsigned cap, int n, const int *windows, seen *s, size_t *off, size_t *len,
                        size_t *each)
{
    size_t a = circuit_shared_arena_size(cap);
    cr_assert(a > 0);
    *len = a;
    for (int k = 0; k < n; k++) {
        circuit_spec sp = spec_of(s, windows[k], 1);
        each[k] = circuit_shared_size_in_arena(&sp.config);
        off[k] = *len;
        *len += each[k];
    }
    char *m = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(m != MAP_FAILED);
    char err[512];
    cr_assert_eq(circuit_shared_arena_init(m, a, cap, err, sizeof err), 0, "%s", err);
    for (int k = 0; k < n; k++) {
        circuit_spec sp = spec_of(s, windows[k], 1);
        cr_assert_eq(circuit_shared_init_in_arena(m + off[k], each[k], m, &sp, err, sizeof err), 0,
                     "breaker %d: %s", k, err);
    }
    return m;
}

static void successes_then_failure(circuit_breaker *b, volatile int64_t *n)
{
    for (int i = 0; i < 3000; i++)
        call(b, NULL, CIRCUIT_SUCCESS);
    (void)n;
}

/* L5: in an arena, a shared breaker's per-CPU part is 16 bytes per CPU, and
 * (window 64, probes 1) takes at most 2.5 KB on 64 CPUs, arena share
 * included; breakers whose units share each CPU's lines count exactly,
 * each its own, from two processes at once. */
Test(sh, L5_arena_units_are_16_bytes_per_cpu_and_64_1_fits_2_5_kb_on_64_cpus)
{
    circuit_config c64 = {64, 1, SH_OPEN, SH_PROBE};
    static const uint32_t counts[] = {1, 2, 3, 64, 65, 4096};
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        uint32_t n = counts[k];
        circuit_test_set_cpus(n);
        /* 16 bytes per CPU per breaker once a region's line is full: 400
         * units fill 100 lines of 64 bytes (50 of 128) */
        size_t head = circuit_shared_arena_size(400) - (size_t)n * 6400;
        cr_expect_eq(head, CIRCUIT_CACHELINE, "%u CPUs: the arena is a header and 16 B/CPU/unit", n);
        cr_expect_eq(circuit_shared_arena_size(401) - circuit_shared_arena_size(400),
                     (size_t)n * CIRCUIT_CACHELINE, "%u CPUs: unit 401 starts a line per CPU", n);
        if (n == 64) {
            for (unsigned cap = 8; cap <= 64; cap *= 8) {
                double per = (double)circuit_shared_size_in_arena(&c64) +
                             (double)circuit_shared_arena_size(cap) / cap;
                cr_log_info("(64, 1) on 64 CPUs in an arena of %u: %.0f bytes per breaker", cap,
                            per);
                cr_expect_leq(per, 2560.0, "(64, 1) on 64 CPUs, arena of %u: %.0f bytes (2.5 KB)",
                              cap, per);
            }
            /* without an arena, a line per CPU */
            cr_expect_gt(circuit_shared_size(&c64), 64u * CIRCUIT_CACHELINE);
        }
    }
    circuit_test_set_cpus(0);
    cr_expect_eq(circuit_shared_arena_size(0), 0);
    cr_expect_eq(circuit_shared_arena_size(CIRCUIT_SHARED_ARENA_MAX + 1), 0);
    cr_expect_gt(circuit_shared_arena_size(CIRCUIT_SHARED_ARENA_MAX), 0);

    /* five breakers of different windows in an arena of 5 (a line of 4,
     * and one on the next) */
    circuit_test_clock_set(T0);
    seen s = {0};
    static const int windows[5] = {1, 4, 64, 100, 8};
    size_t off[5], each[5], len;
    char *m = arena_with(5, 5, windows, &s, off, &len, each);
    circuit_breaker *b[5];
    for (int k = 0; k < 5; k++) {
        circuit_spec sp = spec_of(&s, windows[k], 1);
        cr_assert_eq(circuit_shared_attach(&b[k], m + off[k], each[k], &sp, NULL, 0), 0);
    }
    /* units 1 and 2 from two child processes at once, the parent on unit 3 */
    for (int k = 1; k <= 2; k++) {
        pid_t p = fork();
        cr_assert(p >= 0);
        if (p == 0) {
            circuit_breaker *cb;
            circuit_spec sp = spec_of(&s, windows[k], 1);
            if (circuit_shared_attach(&cb, m + off[k], each[k], &sp, NULL, 0) != 0)
                _exit(3);
            successes_then_failure(cb, NULL);
            _exit(0);
        }
    }
    for (int i = 0; i < 1000; i++)
        call(b[3], NULL, CIRCUIT_SUCCESS);
    for (int k = 1; k <= 2; k++) {
        int st;
        cr_assert(wait(&st) > 0);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    cr_expect(call(b[4], NULL, CIRCUIT_FAILURE)); /* trips unit 4's breaker alone */
    static const uint64_t want[5] = {0, 3000, 3000, 1000, 0};
    for (int k = 0; k < 5; k++) {
        circuit_stats st;
        circuit_get_stats(b[k], &st);
        cr_expect_eq(st.successes, want[k], "breaker %d: %llu successes, not %llu", k,
                     (unsigned long long)st.successes, (unsigned long long)want[k]);
        cr_expect_eq(st.admitted, want[k] + (k == 4));
        cr_expect_eq(st.failures, (uint64_t)(k == 4));
        cr_expect_eq(st.state, k == 4 ? CIRCUIT_OPEN : CIRCUIT_CLOSED, "breaker %d", k);
    }
    /* the arena is full: no sixth breaker, and its memory holds none */
    char err[512];
    circuit_spec sp = spec_of(&s, 4, 1);
    char *sixth = NULL;
    cr_assert_eq(posix_memalign((void **)&sixth, CIRCUIT_SHARED_ALIGN, each[1]), 0);
    cr_expect_eq(circuit_shared_init_in_arena(sixth, each[1], m, &sp, err, sizeof err), ENOSPC);
    cr_expect(strstr(err, "5 units are all taken"), "%s", err);
    circuit_breaker *x;
    cr_expect_eq(circuit_shared_attach(&x, sixth, each[1], &sp, err, sizeof err), EPROTO);
    free(sixth);
    for (int k = 0; k < 5; k++)
        circuit_shared_detach(b[k]);
    munmap(m, len);
}

/* SH1 in an arena: the arena and the breaker in one memfd, mapped twice at
 * different addresses, are one breaker; so is a quiescent byte copy of
 * the whole mapping. */
Test(sh, SH1_arena_relocated_and_two_mappings)
{
    seen s = {0}, s2 = {0};
    circuit_spec sp = spec_of(&s, 8, 2), sp2 = spec_of(&s2, 8, 2);
    size_t a = circuit_shared_arena_size(4), each = circuit_shared_size_in_arena(&sp.config);
    size_t off = a, len = off + each;
    int fd = memfd_create("sh1a", 0);
    cr_assert(fd >= 0);
    cr_assert_eq(ftruncate(fd, (off_t)len), 0);
    char *m1 = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    char *m2 = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    cr_assert(m1 != MAP_FAILED && m2 != MAP_FAILED && m1 != m2);
    cr_assert_eq(circuit_shared_arena_init(m1, a, 4, NULL, 0), 0);
    cr_assert_eq(circuit_shared_init_in_arena(m1 + off, each, m1, &sp, NULL, 0), 0);
    circuit_breaker *h1, *h2, *hx;
    cr_assert_eq(circuit_shared_attach(&h1, m1 + off, each, &sp, NULL, 0), 0);
    cr_assert_eq(circuit_shared_attach(&h2, m2 + off, each, &sp2, NULL, 0), 0);
    for (int i = 0; i < 5; i++)
        cr_expect(call(h1, NULL, CIRCUIT_SUCCESS));
    circuit_stats st;
    circuit_get_stats(h2, &st);
    cr_expect_eq(st.successes, 5, "the per-CPU successes, seen through the other mapping");
    cr_expect(call(h2, NULL, CIRCUIT_FAILURE));
    cr_expect_eq(circuit_get_state(h1), CIRCUIT_OPEN);
    char *copy = NULL;
    cr_assert_eq(posix_memalign((void **)&copy, CIRCUIT_SHARED_ALIGN, len), 0);
    memcpy(copy, m1, len);
    cr_assert_eq(circuit_shared_attach(&hx, copy + off, each, &sp, NULL, 0), 0);
    circuit_get_stats(hx, &st);
    cr_expect_eq(st.admitted, 6);
    cr_expect_eq(st.successes, 5);
    cr_expect_eq(st.state, CIRCUIT_OPEN);
    circuit_shared_detach(hx);
    circuit_shared_detach(h1);
    circuit_shared_detach(h2);
    free(copy);
    munmap(m1, len);
    munmap(m2, len);
    close(fd);
}

/* SH5 for arenas: every bad argument named in one message, nothing taken. */
Test(sh, SH5_arena_errors_name_every_problem)
{
    char *m = NULL;
    size_t a = circuit_shared_arena_size(4);
    cr_assert_eq(posix_memalign((void **)&m, CIRCUIT_SHARED_ALIGN, a + 4096), 0);
    memset(m, 0, a + 4096);
    char err[512];
    cr_expect_eq(circuit_shared_arena_init(m, a, 0, err, sizeof err), EINVAL);
    cr_expect(strstr(err, "capacity = 0 (must be 1..4000)"), "%s", err);
    cr_expect_eq(circuit_shared_arena_init(m + 8, a - 1, 4, err, sizeof err), EINVAL);
    cr_expect(strstr(err, "len = ") && strstr(err, "must be aligned to"), "%s", err);
    /* memory holding no arena, and a bad config: one message for both */
    seen s = {0};
    circuit_spec sp = spec_of(&s, 4, 1);
    sp.config.probes = 0;
    char *mem = m + a;
    cr_expect_eq(circuit_shared_init_in_arena(mem, 2048, m, &sp, err, sizeof err), EINVAL);
    cr_expect(strstr(err, "probes = 0") && strstr(err, "holds no arena"), "%s", err);
    /* a good arena, then a bad config: no unit is taken */
    cr_assert_eq(circuit_shared_arena_init(m, a, 1, NULL, 0), 0);
    cr_expect_eq(circuit_shared_init_in_arena(mem, 2048, m, &sp, err, sizeof err), EINVAL);
    sp.config.probes = 1;
    cr_expect_eq(circuit_shared_init_in_arena(mem, 2048, m, &sp, err, sizeof err), 0, "%s", err);
    free(m);
}

/* SH5: attach refuses a header init did not write (a damaged size, CPU
 * count or arena) before it places any pointer by it. */
Test(sh, SH5_attach_refuses_a_damaged_header)
{
    seen s = {0};
    circuit_spec sp = spec_of(&s, 4, 1);
    size_t len;
    char *m = region(&sp.config, &len);
    cr_assert_eq(circuit_shared_init(m, len, &sp, NULL, 0), 0);
    circuit_breaker *b;
    char err[512];
    /* header: magic 0, layout 8, ncpu 12, size 16 */
    uint32_t *ncpu = (uint32_t *)(void *)(m + 12);
    uint64_t *size = (uint64_t *)(void *)(m + 16);
    *size -= 64;
    cr_expect_eq(circuit_shared_attach(&b, m, len, &sp, err, sizeof err), EPROTO);
    cr_expect(strstr(err, "damaged breaker header (its sizes or offsets)"), "%s", err);
    *size += 64;
    *ncpu += 1000;
    cr_expect_eq(circuit_shared_attach(&b, m, len, &sp, err, sizeof err), EPROTO);
    cr_expect(strstr(err, "damaged"), "%s", err);
    *ncpu -= 1000;
    /* the values init derives from the config (seq_mod at 56), the salt
     * (48: never 0) */
    uint64_t *salt = (uint64_t *)(void *)(m + 48), *seq_mod = (uint64_t *)(void *)(m + 56);
    uint64_t keep = *seq_mod;
    *seq_mod += 4;
    cr_expect_eq(circuit_shared_attach(&b, m, len, &sp, err, sizeof err), EPROTO);
    cr_expect(strstr(err, "derives from its config"), "%s", err);
    *seq_mod = keep;
    keep = *salt;
    *salt = 0;
    cr_expect_eq(circuit_shared_attach(&b, m, len, &sp, err, sizeof err), EPROTO);
    *salt = keep;
    cr_expect_eq(circuit_shared_attach(&b, m, len, &sp, err, sizeof err), 0, "%s", err);
    circuit_shared_detach(b);
    munmap(m, len);
    /* a breaker in an arena whose arena is gone */
    size_t off[1], each[1], alen;
    static const int w4[1] = {4};
    char *am = arena_with(2, 1, w4, &s, off, &alen, each);
    uint64_t magic = *(uint64_t *)(void *)am;
    *(uint64_t *)(void *)am = 0;
    cr_expect_eq(circuit_shared_attach(&b, am + off[0], each[0], &sp, err, sizeof err), EPROTO);
    cr_expect(strstr(err, "arena") && strstr(err, "holds no arena"), "%s", err);
    *(uint64_t *)(void *)am = magic;
    cr_expect_eq(circuit_shared_attach(&b, am + off[0], each[0], &sp, err, sizeof err), 0, "%s", err);
    circuit_shared_detach(b);
    munmap(am, alen);

    /* the arena in another mapping than the breaker: init cannot tell, but
     * once that mapping is gone attach refuses (EPROTO), never faults */
    size_t a = circuit_shared_arena_size(2), each1 = circuit_shared_size_in_arena(&sp.config);
    char *arena = mmap(NULL, a, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    char *bm = mmap(NULL, each1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(arena != MAP_FAILED && bm != MAP_FAILED);
    cr_assert_eq(circuit_shared_arena_init(arena, a, 2, NULL, 0), 0);
    cr_assert_eq(circuit_shared_init_in_arena(bm, each1, arena, &sp, err, sizeof err), 0, "%s", err);
    munmap(arena, a);
    cr_expect_eq(circuit_shared_attach(&b, bm, each1, &sp, err, sizeof err), EPROTO);
    cr_expect(strstr(err, "is not mapped in this process"), "%s", err);
    munmap(bm, each1);
}

/* SH1: a breaker's memory must not overlap its arena: init refuses it (it
 * would overwrite the arena's header or units) and leaves the arena whole. */
Test(sh, SH1_init_refuses_a_breaker_overlapping_its_arena)
{
    seen s = {0};
    circuit_spec sp = spec_of(&s, 4, 1);
    size_t a = circuit_shared_arena_size(8), each = circuit_shared_size_in_arena(&sp.config);
    char *m = mmap(NULL, a + each, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(m != MAP_FAILED);
    cr_assert_eq(circuit_shared_arena_init(m, a, 8, NULL, 0), 0);
    char err[512];
    char *at[3] = {m, m + 64, m + (a - 64) / 64 * 64};
    for (int k = 0; k < 3; k++) {
        cr_expect_eq(circuit_shared_init_in_arena(at[k], each, m, &sp, err, sizeof err), EINVAL,
                     "breaker at arena + %td", at[k] - m);
        cr_expect(strstr(err, "overlaps the arena"), "%s", err);
    }
    /* the arena is whole: a breaker beside it is built */
    char *after = m + a;
    cr_expect_eq(circuit_shared_init_in_arena(after, each, m, &sp, err, sizeof err), 0, "%s", err);
    munmap(m, a + each);
}
