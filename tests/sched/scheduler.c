/*
 * scheduler: the controlled scheduler (scheduler.h says what it does).
 *
 * Invariant: outside sched_run's start and end, exactly one scenario thread
 * is not blocked on its semaphore, and only it touches the run's state; a
 * hand-off is sem_post(next) then sem_wait(own), so the semaphores order
 * every access (no atomics needed here).
 */
#include "scheduler.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct th {
    pthread_t pt;
    sem_t sem;
    bool started, done, dead, killed;
    bool in_op;
    long solo; /* own switch points in a row inside one operation */
} th;

enum { OPT_TICK = SCHED_MAX_THREADS, OPT_DIE = SCHED_MAX_THREADS + 1 };

typedef struct dstep {
    uint8_t choice;
    int8_t cur;       /* the running thread when the choice was made (-1: none) */
    uint16_t enabled; /* options open at this step */
    uint16_t tried;
    int preempt_before;
} dstep;

static struct {
    const sched_opts *o;
    int n;
    th t[SCHED_MAX_THREADS];
    sched_body_fn body;
    void *arg;
    void (*check)(void *);
    sem_t finished;
    int cur;
    long steps, choices;
    int ticks, deaths;
    uint64_t rng;
    int prio[SCHED_MAX_THREADS];
    long change[4];
    long die_at;
    sched_result *out;
    size_t slen;
    int last_tok, last_count;
    bool active, abort;
    sched_verdict verdict;
    int preempts;
    /* REPLAY */
    uint8_t *rp;
    long rp_len;
} R;

static int g_ncpu = 1;
static bool g_migrate;
static void (*g_tick)(int64_t);

/* DFS state, kept across runs */
static dstep *D;
static long d_len, d_prefix;
static int d_bound = 2;

static __thread int my_tid = -1;
static __thread bool my_quiet;
static __thread long my_cpu_reads;

static uint64_t rnd(void)
{
    /* splitmix64 */
    uint64_t z = (R.rng += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}
static long rnd_below(long n) { return n <= 1 ? 0 : (long)(rnd() % (uint64_t)n); }
static double rnd_unit(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }

const char *sched_verdict_name(sched_verdict v)
{
    static const char *const names[] = {"ok", "failed", "livelock", "too long", "diverged"};
    return names[v];
}
const char *sched_strategy_name(sched_strategy s)
{
    static const char *const names[] = {"random", "pct", "dfs", "replay"};
    return names[s];
}

/* ---- the schedule string: tokens 0-5, T, D; runs as "tok*count" ---------- */

static void emit_flush(void)
{
    if (R.last_count == 0)
        return;
    char tok = R.last_tok == OPT_TICK ? 'T' : R.last_tok == OPT_DIE ? 'D' : (char)('0' + R.last_tok);
    size_t room = sizeof R.out->schedule - R.slen;
    int w = R.last_count > 1 ? snprintf(R.out->schedule + R.slen, room, "%s%c*%d", R.slen ? "," : "", tok, R.last_count)
                             : snprintf(R.out->schedule + R.slen, room, "%s%c", R.slen ? "," : "", tok);
    if (w > 0 && (size_t)w < room)
        R.slen += (size_t)w;
    else
        R.slen = sizeof R.out->schedule - 1; /* truncated: replay by seed */
    R.last_count = 0;
}
static void emit(int tok)
{
    if (R.last_count && tok == R.last_tok) {
        R.last_count++;
        return;
    }
    emit_flush();
    R.last_tok = tok;
    R.last_count = 1;
}

static long parse_schedule(const char *s, uint8_t **out)
{
    size_t cap = 1024, len = 0;
    uint8_t *v = malloc(cap);
    while (s && *s) {
        while (*s == ',' || *s == ' ')
            s++;
        if (!*s)
            break;
        int tok;
        if (*s == 'T')
            tok = OPT_TICK;
        else if (*s == 'D')
            tok = OPT_DIE;
        else if (*s >= '0' && *s < '0' + SCHED_MAX_THREADS)
            tok = *s - '0';
        else {
            fprintf(stderr, "sched: bad schedule token '%c'\n", *s);
            exit(2);
        }
        s++;
        long count = 1;
        if (*s == '*')
            count = strtol(s + 1, (char **)&s, 10);
        for (long i = 0; i < count; i++) {
            if (len == cap)
                v = realloc(v, cap *= 2);
            v[len++] = (uint8_t)tok;
        }
    }
    *out = v;
    return (long)len;
}

/* ---- choosing ------------------------------------------------------------- */

static bool enabled(int i) { return !R.t[i].done && !R.t[i].dead; }

static uint16_t options_now(void)
{
    uint16_t m = 0;
    int alive = 0;
    for (int i = 0; i < R.n; i++)
        if (enabled(i)) {
            m |= (uint16_t)(1u << i);
            alive++;
        }
    if (alive == 0)
        return 0;
    if (R.ticks < R.o->max_ticks)
        m |= 1u << OPT_TICK;
    if (R.cur >= 0 && enabled(R.cur) && R.deaths < R.o->max_deaths && alive > 1)
        m |= 1u << OPT_DIE;
    return m;
}

static int cost(int cur, int opt)
{
    if (opt == OPT_TICK || opt == OPT_DIE)
        return 1;
    return (cur >= 0 && enabled(cur) && opt != cur) ? 1 : 0;
}

static int default_thread(void)
{
    if (R.cur >= 0 && enabled(R.cur))
        return R.cur;
    for (int i = 0; i < R.n; i++)
        if (enabled(i))
            return i;
    return -1;
}

static int pick_thread_uniform(uint16_t m)
{
    int cand[SCHED_MAX_THREADS], k = 0;
    for (int i = 0; i < R.n; i++)
        if (m & (1u << i))
            cand[k++] = i;
    return cand[rnd_below(k)];
}

/* One choice: a thread, OPT_TICK or OPT_DIE; -1 when nobody can run. */
static int choose(void)
{
    uint16_t m = options_now();
    if (!(m & ((1u << SCHED_MAX_THREADS) - 1)))
        return -1;
    long step = R.choices++;
    int c = -1;
    switch (R.o->strategy) {
    case SCHED_REPLAY:
        if (step < R.rp_len)
            c = R.rp[step];
        else
            c = default_thread();
        if (c < 0 || !(m & (1u << c))) {
            R.verdict = SCHED_DIVERGED;
            snprintf(R.out->message, sizeof R.out->message,
                     "replay diverged at choice %ld: option %d not open", step, c);
            R.abort = true;
            c = default_thread();
        }
        break;
    case SCHED_RANDOM:
        if ((m & (1u << OPT_TICK)) && rnd_unit() < R.o->tick_p)
            c = OPT_TICK;
        else if ((m & (1u << OPT_DIE)) && rnd_unit() < R.o->die_p)
            c = OPT_DIE;
        else
            c = pick_thread_uniform(m);
        break;
    case SCHED_PCT: {
        for (int j = 0; j < R.o->pct_depth - 1; j++)
            if (R.change[j] == step && R.cur >= 0)
                R.prio[R.cur] = j; /* below every initial priority (>= d) */
        if ((m & (1u << OPT_DIE)) && step == R.die_at)
            c = OPT_DIE;
        else if ((m & (1u << OPT_TICK)) && rnd_unit() < R.o->tick_p)
            c = OPT_TICK;
        else {
            int best = -1;
            for (int i = 0; i < R.n; i++)
                if ((m & (1u << i)) && (best < 0 || R.prio[i] > R.prio[best]))
                    best = i;
            c = best;
        }
        break;
    }
    case SCHED_DFS:
        if (step >= SCHED_MAX_STEPS) {
            c = default_thread();
            break;
        }
        if (step < d_prefix) {
            c = D[step].choice;
            if (!(m & (1u << c)) || D[step].enabled != m) {
                R.verdict = SCHED_DIVERGED;
                snprintf(R.out->message, sizeof R.out->message,
                         "DFS: run diverged from its prefix at choice %ld (the scenario is not deterministic)",
                         step);
                R.abort = true;
                c = default_thread();
            }
        } else {
            c = default_thread();
            D[step] = (dstep){(uint8_t)c, (int8_t)R.cur, m, (uint16_t)(1u << c), R.preempts};
            d_len = step + 1;
        }
        break;
    }
    R.preempts += cost(R.cur, c);
    emit(c);
    return c;
}

/* ---- hand-off ----------------------------------------------------------- */

static void wait_turn(int me)
{
    while (sem_wait(&R.t[me].sem) != 0 && errno == EINTR)
        ;
    if (R.t[me].killed) {
        my_quiet = true;
        pthread_exit(NULL);
    }
}

static void stop_run(void)
{
    R.abort = true;
    sem_post(&R.finished);
}

/* The running thread `me` (or -1: the controller at the start) gives the
 * CPU to whoever the schedule picks; returns when it is `me`'s turn again
 * (never for a dead one). */
static void reschedule(int me)
{
    for (;;) {
        if (R.abort) {
            stop_run();
            if (me >= 0 && !R.t[me].done)
                for (;;)
                    wait_turn(me); /* exits when killed */
            return;
        }
        int c = choose();
        if (c < 0) { /* everyone ended or died */
            sem_post(&R.finished);
            return;
        }
        if (c == OPT_TICK) {
            R.ticks++;
            if (g_tick)
                g_tick(R.o->tick_ns);
            continue;
        }
        if (c == OPT_DIE) {
            R.deaths++;
            R.t[R.cur].dead = true;
            continue; /* choose who runs instead */
        }
        if (c == me)
            return;
        if (me >= 0)
            R.t[me].solo = 0;
        R.out->switches++;
        R.cur = c;
        sem_post(&R.t[c].sem);
        if (me < 0 || R.t[me].done)
            return;
        wait_turn(me);
        if (!R.t[me].dead)
            return;
    }
}

void sched_point(int kind, const void *addr)
{
    (void)kind;
    (void)addr;
    int me = my_tid;
    if (me < 0 || my_quiet || !R.active)
        return;
    R.steps++;
    R.out->points[me]++;
    if (R.t[me].in_op && ++R.t[me].solo > R.o->solo_bound && R.verdict == SCHED_OK) {
        R.verdict = SCHED_LIVELOCK;
        snprintf(R.out->message, sizeof R.out->message,
                 "V5: thread %d ran %ld switch points in a row inside one operation (others stopped)",
                 me, R.t[me].solo);
        R.abort = true;
    }
    if (R.steps > SCHED_MAX_STEPS && R.verdict == SCHED_OK) {
        R.verdict = SCHED_TOO_LONG;
        snprintf(R.out->message, sizeof R.out->message, "more than %d switch points", SCHED_MAX_STEPS);
        R.abort = true;
    }
    if (R.check && !R.abort) {
        my_quiet = true;
        R.check(R.arg);
        my_quiet = false;
    }
    reschedule(me);
}

void sched_op_begin(void)
{
    if (my_tid >= 0) {
        R.t[my_tid].in_op = true;
        R.t[my_tid].solo = 0;
    }
}
void sched_op_end(void)
{
    if (my_tid >= 0)
        R.t[my_tid].in_op = false;
}

int sched_tid(void) { return my_tid; }
void sched_quiet(bool on) { my_quiet = on; }
static uint64_t g_events;
uint64_t sched_event(void) { return ++g_events; }
void sched_event_reset(void) { g_events = 0; }
void sched_set_cpus(int ncpu, bool migrate)
{
    g_ncpu = ncpu < 1 ? 1 : ncpu;
    g_migrate = migrate;
}
void sched_set_clock(void (*tick)(int64_t ns)) { g_tick = tick; }

int circuit__sched_cpu(void);
int circuit__sched_cpu(void)
{
    int me = my_tid < 0 ? 0 : my_tid;
    if (!g_migrate)
        return me % g_ncpu;
    return (int)((me + my_cpu_reads++) % g_ncpu);
}

/* Shared mode (src/shared.c): scenario thread id - 1 plays process id, and
 * a thread that died is a dead process; any other id is alive. */
bool circuit__sched_proc_alive(uint32_t id);
bool circuit__sched_proc_alive(uint32_t id)
{
    if (id < 1 || id > (uint32_t)R.n)
        return true;
    return !R.t[id - 1].dead;
}

/* The checker's build of the core calls this at every atomic (atomics.h). */
void circuit__sched_point(int kind, const void *addr);
void circuit__sched_point(int kind, const void *addr) { sched_point(kind, addr); }

void sched_fail(const char *fmt, ...)
{
    if (R.verdict != SCHED_OK)
        return;
    R.verdict = SCHED_FAILED;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(R.out->message, sizeof R.out->message, fmt, ap);
    va_end(ap);
    if (my_tid >= 0)
        R.abort = true;
}
bool sched_failed(void) { return R.verdict != SCHED_OK; }

/* ---- a run -------------------------------------------------------------- */

typedef struct start_arg {
    int tid;
} start_arg;
static start_arg g_start[SCHED_MAX_THREADS];

static void *thread_main(void *p)
{
    int me = ((start_arg *)p)->tid;
    my_tid = me;
    my_quiet = false;
    my_cpu_reads = 0;
    wait_turn(me);
    R.body(R.arg, me);
    R.t[me].done = true;
    R.t[me].in_op = false;
    reschedule(me);
    my_tid = -1;
    return NULL;
}

void sched_dfs_reset(void)
{
    if (!D)
        D = calloc(SCHED_MAX_STEPS, sizeof *D);
    d_len = 0;
    d_prefix = 0;
}

bool sched_dfs_next(void)
{
    for (long i = d_len - 1; i >= 0; i--) {
        dstep *s = &D[i];
        for (int opt = 0; opt < 16; opt++) {
            uint16_t bit = (uint16_t)(1u << opt);
            if (!(s->enabled & bit) || (s->tried & bit))
                continue;
            int c;
            if (opt == OPT_TICK || opt == OPT_DIE)
                c = 1;
            else
                c = (s->cur >= 0 && (s->enabled & (1u << s->cur)) && opt != s->cur) ? 1 : 0;
            if (s->preempt_before + c > d_bound)
                continue;
            s->tried |= bit;
            s->choice = (uint8_t)opt;
            d_prefix = i + 1;
            d_len = i + 1;
            return true;
        }
    }
    return false;
}

void sched_run(const sched_opts *o, int nthreads, sched_body_fn body, void *arg,
               void (*check)(void *arg), sched_result *out)
{
    memset(out, 0, sizeof *out);
    memset(&R, 0, sizeof R);
    R.o = o;
    R.n = nthreads;
    R.body = body;
    R.arg = arg;
    R.check = check;
    R.out = out;
    R.cur = -1;
    R.rng = o->seed * 0x2545f4914f6cdd1du + 1;
    R.verdict = SCHED_OK;
    R.die_at = -1;
    if (o->strategy == SCHED_DFS) {
        if (!D)
            sched_dfs_reset();
        d_bound = o->max_preemptions;
    }
    if (o->strategy == SCHED_REPLAY)
        R.rp_len = parse_schedule(o->replay, &R.rp);
    if (o->strategy == SCHED_PCT) {
        /* priorities d .. d + n - 1 in a random order; d - 1 change points in
         * [1, k] */
        int d = o->pct_depth < 1 ? 1 : o->pct_depth;
        int perm[SCHED_MAX_THREADS];
        for (int i = 0; i < nthreads; i++)
            perm[i] = i;
        for (int i = nthreads - 1; i > 0; i--) {
            int j = (int)rnd_below(i + 1), x = perm[i];
            perm[i] = perm[j];
            perm[j] = x;
        }
        for (int i = 0; i < nthreads; i++)
            R.prio[i] = d + perm[i];
        long k = o->pct_steps > 1 ? o->pct_steps : 100;
        for (int j = 0; j < d - 1 && j < 4; j++)
            R.change[j] = 1 + rnd_below(k);
        if (o->max_deaths > 0 && rnd_unit() < o->die_p)
            R.die_at = 1 + rnd_below(k);
    }
    sem_init(&R.finished, 0, 0);
    for (int i = 0; i < nthreads; i++) {
        sem_init(&R.t[i].sem, 0, 0);
        g_start[i].tid = i;
        if (pthread_create(&R.t[i].pt, NULL, thread_main, &g_start[i]) != 0) {
            perror("sched: pthread_create");
            exit(2);
        }
        R.t[i].started = true;
    }
    R.active = true;
    reschedule(-1);
    while (sem_wait(&R.finished) != 0 && errno == EINTR)
        ;
    R.active = false;
    /* the run is over: a final check in the controller, then every thread
     * still blocked (dead, or stopped by an abort) exits */
    emit_flush();
    out->steps = R.steps;
    if (!R.abort && check && R.verdict == SCHED_OK)
        check(arg);
    out->verdict = R.verdict;
    for (int i = 0; i < nthreads; i++) {
        if (!R.t[i].done) {
            R.t[i].killed = true;
            sem_post(&R.t[i].sem);
        }
        pthread_join(R.t[i].pt, NULL);
        sem_destroy(&R.t[i].sem);
    }
    sem_destroy(&R.finished);
    free(R.rp);
    R.rp = NULL;
}

/* The controller reads these after a run (the scenario's final checks): */
bool sched_thread_ended(int tid) { return R.t[tid].done; }
