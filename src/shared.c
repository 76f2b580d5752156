/*
 * One breaker in memory several processes map (SH1-SH5): the region's
 * layout, circuit_shared_init / _attach / _detach, and what identifies a
 * process (a flush's owner, percpu.c).
 *
 * THE REGION (offsets from its start; nothing in it is a pointer, so each
 * process may map it anywhere, SH1):
 *   0                  the header (circuit__region): magic, layout version,
 *                      the config, the sizes and the offsets below
 *   off_shared         the shared state (circuit__shared, internal.h)
 *   off_shared + its size   the arrays, as circuit_new lays them out
 *                      (breaker.c: probe slots, closed bitmap, ring)
 *   off_pcpu           the per-CPU part: one unit per CPU, each on a cache
 *                      line of its own (pcpu_stride = the line), so that no
 *                      two CPUs write one line (L6); absent when the units
 *                      are in an arena (below)
 * THE ARENA (circuit_shared_arena_init): the per-CPU units of many shared
 * breakers, laid out as circuit_new's arena chunks are (percpu.c): after
 * its header, one region per CPU, `capacity` units of 16 bytes each,
 * rounded up to a line; a breaker's unit for CPU i is i regions after its
 * unit for CPU 0, so one CPU's units of several breakers share that CPU's
 * lines and two CPUs never share one (L5's 16 bytes per CPU, L6). A
 * breaker built in an arena records the arena's distance from itself (both
 * lie in one mapping, so the distance is the same in every process) and
 * its unit index. Units are taken by a CAS on `taken` and never given back.
 * A handle (attach) is a process-local circuit_breaker: the constants
 * copied from the header, this process's callbacks, pointers into its own
 * mapping computed from the offsets, its delivery (SH3). Every function of
 * circuit.h runs the same code on it as on circuit_new's breaker, whose
 * block holds a handle and the shared state side by side.
 * docs/design/shared-memory.md has the audit of what a killed process
 * leaves behind.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include "circuit_shared.h"
#include "closed_state.h"
#include "delivery.h"
#include "percpu.h"

#define REGION_MAGIC UINT64_C(0x6369726373686d31) /* "circshm1" */
#define ARENA_MAGIC UINT64_C(0x6369726370637531)  /* "circpcu1" */
#define UNIT ((uint32_t)sizeof(circuit__pcpu))
#define NO_ARENA INT64_MIN /* arena_off of a breaker whose units are its own */

typedef struct circuit__region {
    uint64_t magic;        /* written last by init; 0 while it builds */
    uint32_t layout;       /* CIRCUIT_SHARED_LAYOUT */
    uint32_t ncpu;         /* per-CPU units */
    uint64_t size;         /* bytes the breaker takes (circuit_shared_size) */
    circuit_config cfg;    /* as init was given it (SH5) */
    uint64_t salt;
    uint64_t seq_mod, window_magic;
    uint64_t off_shared, off_arrays, off_pcpu; /* off_pcpu 0: the units are in an arena */
    uint32_t pcpu_stride;  /* bytes between two CPUs' units: the cache line, or the arena's
                            * region */
    uint32_t cacheline;    /* CIRCUIT_CACHELINE of the build that laid it out */
    int64_t arena_off;     /* the arena's address minus this region's; NO_ARENA: none */
    uint64_t unit;         /* the unit index in the arena */
} circuit__region;

typedef struct circuit__arena {
    uint64_t magic;        /* written last by circuit_shared_arena_init */
    uint32_t layout;       /* CIRCUIT_SHARED_LAYOUT */
    uint32_t ncpu;         /* regions */
    uint32_t capacity;     /* units per region */
    uint32_t stride;       /* bytes of one region: capacity x 16, rounded up to a line */
    uint32_t cacheline;    /* CIRCUIT_CACHELINE of the build that laid it out */
    uint32_t pad;
    uint64_t size;         /* circuit_shared_arena_size(capacity) */
    uint64_t taken;        /* units handed out (atomic: CAS, never goes down) */
} circuit__arena;

#define ARENA_HEAD ((size_t)CIRCUIT_CACHELINE)
_Static_assert(CIRCUIT_SHARED_ALIGN == CIRCUIT_CACHELINE,
               "the memory is aligned to the line the per-CPU parts are laid out by");
_Static_assert(sizeof(circuit__arena) <= ARENA_HEAD, "the arena's header fits its line");
_Static_assert(CIRCUIT_SHARED_ARENA_MAX * 16 <= UINT16_MAX - CIRCUIT_CACHELINE,
               "an arena region's stride fits the handle's 16 bits");

static size_t up(size_t n, size_t a) { return (n + a - 1) / a * a; }

typedef struct layout {
    size_t off_shared, off_arrays, off_pcpu, size;
} layout;

/* ncpu 0: the units are in an arena (off_pcpu 0) */
static layout layout_of(const circuit_config *cfg, uint32_t ncpu)
{
    layout l;
    l.off_shared = up(sizeof(circuit__region), 64);
    l.off_arrays = l.off_shared + sizeof(circuit__shared);
    size_t end = l.off_arrays + circuit__arrays_bytes((uint32_t)cfg->window, (uint32_t)cfg->probes);
    l.off_pcpu = ncpu ? up(end, CIRCUIT_CACHELINE) : 0;
    l.size = ncpu ? l.off_pcpu + (size_t)ncpu * CIRCUIT_CACHELINE : up(end, CIRCUIT_SHARED_ALIGN);
    return l;
}

static size_t arena_stride(uint32_t capacity) { return up((size_t)capacity * UNIT, CIRCUIT_CACHELINE); }

static bool config_valid(const circuit_config *cfg)
{
    return cfg->window >= 1 && cfg->window <= CIRCUIT_MAX_COUNT && cfg->probes >= 1 &&
           cfg->probes <= CIRCUIT_MAX_COUNT && cfg->open_for_ns > 0 && cfg->probe_timeout_ns > 0;
}

size_t circuit_shared_size(const circuit_config *cfg)
{
    if (!cfg || !config_valid(cfg))
        return 0;
    return layout_of(cfg, circuit__cpus_configured()).size;
}

size_t circuit_shared_size_in_arena(const circuit_config *cfg)
{
    if (!cfg || !config_valid(cfg))
        return 0;
    return layout_of(cfg, 0).size;
}

size_t circuit_shared_arena_size(unsigned capacity)
{
    if (capacity < 1 || capacity > CIRCUIT_SHARED_ARENA_MAX)
        return 0;
    return ARENA_HEAD + (size_t)circuit__cpus_configured() * arena_stride(capacity);
}

/* True when the first and last bytes of [p, p + n) are in pages this
 * process maps (mincore fails with ENOMEM on an unmapped page): attach reads
 * an arena only where something is mapped, so a breaker whose arena is not
 * in its mapping is refused rather than a fault. */
static bool mapped(const void *p, size_t n)
{
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    unsigned char v;
    uintptr_t first = (uintptr_t)p & ~(pg - 1), last = ((uintptr_t)p + n - 1) & ~(pg - 1);
    return mincore((void *)first, pg, &v) == 0 && mincore((void *)last, pg, &v) == 0;
}

/* ---- init ------------------------------------------------------------------ */

/* What is wrong with an arena, for a breaker of this process: NULL if
 * nothing. Plain loads: its init's stores were published by the caller. */
static const char *arena_problem(const circuit__arena *a, uint32_t ncpu)
{
    if (a->magic != ARENA_MAGIC)
        return "holds no arena (not circuit_shared_arena_init's)";
    if (a->layout != CIRCUIT_SHARED_LAYOUT || a->cacheline != CIRCUIT_CACHELINE)
        return "was laid out by another layout version or line size";
    if (a->ncpu != ncpu || a->capacity < 1 || a->capacity > CIRCUIT_SHARED_ARENA_MAX ||
        a->stride != arena_stride(a->capacity) ||
        a->size != ARENA_HEAD + (uint64_t)a->ncpu * a->stride)
        return "has a damaged header (its CPU count, capacity, stride or size)";
    return NULL;
}

int circuit_shared_arena_init(void *arena, size_t len, unsigned capacity, char *errbuf,
                              size_t errbuf_len)
{
    if (!arena)
        circuit__abort("circuit_shared_arena_init: arena is NULL");
    size_t need = circuit_shared_arena_size(capacity);
    bool misaligned = ((uintptr_t)arena % CIRCUIT_SHARED_ALIGN) != 0;
    if (need == 0 || len < need || misaligned) {
        circuit__msg m;
        circuit__msg_start(&m, errbuf, errbuf_len, "circuit_shared_arena_init");
        if (need == 0)
            circuit__msg_add(&m, "capacity = %u (must be 1..%d)", capacity, CIRCUIT_SHARED_ARENA_MAX);
        else if (len < need)
            circuit__msg_add(&m, "len = %zu (must be at least %zu, circuit_shared_arena_size)", len,
                             need);
        if (misaligned)
            circuit__msg_add(&m, "arena = %p (must be aligned to %d bytes)", arena,
                             CIRCUIT_SHARED_ALIGN);
        if (len >= sizeof(uint64_t) && !misaligned)
            ((circuit__arena *)arena)->magic = 0; /* no arena here now */
        return circuit__msg_end(&m);
    }
    /* Before any process uses it (the caller publishes it): plain stores */
    memset(arena, 0, need);
    circuit__arena *a = arena;
    a->layout = CIRCUIT_SHARED_LAYOUT;
    a->ncpu = circuit__cpus_configured();
    a->capacity = capacity;
    a->stride = (uint32_t)arena_stride(capacity);
    a->cacheline = CIRCUIT_CACHELINE;
    a->size = need;
    a->magic = ARENA_MAGIC;
    return 0;
}

/* circuit_shared_init and circuit_shared_init_in_arena (arena NULL: the
 * units are the region's own) */
static int shared_init(void *mem, size_t len, void *arena, const circuit_spec *spec, char *errbuf,
                       size_t errbuf_len, const char *fn)
{
    circuit__check_spec(NULL, spec, fn);
    if (!mem)
        circuit__abort("%s: mem is NULL", fn);
    /* CFG2's one message: the config's clauses and the policy's (K1), then
     * the memory's, then the arena's */
    char said[1024];
    int rc = circuit__validate(&spec->config, &spec->policy, said, sizeof said);
    uint32_t ncpu = circuit__cpus_configured();
    layout l = layout_of(&spec->config, arena ? 0 : ncpu);
    /* the size needed is known whenever the config is (the policy may
     * still refuse it) */
    bool small = config_valid(&spec->config) && len < l.size;
    bool misaligned = ((uintptr_t)mem % CIRCUIT_SHARED_ALIGN) != 0;
    bool arena_misaligned = arena && ((uintptr_t)arena % CIRCUIT_SHARED_ALIGN) != 0;
    const char *arena_bad = arena && !arena_misaligned ? arena_problem(arena, ncpu) : NULL;
    /* the breaker's bytes must not be the arena's (init would overwrite
     * units other breakers count on, or the arena's header) */
    bool overlap = arena && !arena_misaligned && !arena_bad &&
                   (uintptr_t)mem < (uintptr_t)arena + ((const circuit__arena *)arena)->size &&
                   (uintptr_t)arena < (uintptr_t)mem + l.size;
    circuit__region *r = mem;
    if (rc != 0 || small || misaligned || arena_misaligned || arena_bad || overlap) {
        circuit__msg m;
        circuit__msg_start(&m, errbuf, errbuf_len, fn);
        if (rc) {
            const char *p = strchr(said, ':');
            circuit__msg_add(&m, "%s", p ? p + 2 : said);
        }
        if (small)
            circuit__msg_add(&m, "len = %zu (must be at least %zu, %s)", len, l.size,
                             arena ? "circuit_shared_size_in_arena" : "circuit_shared_size");
        if (misaligned)
            circuit__msg_add(&m, "mem = %p (must be aligned to %d bytes)", mem, CIRCUIT_SHARED_ALIGN);
        if (arena_misaligned)
            circuit__msg_add(&m, "arena = %p (must be aligned to %d bytes)", arena,
                             CIRCUIT_SHARED_ALIGN);
        if (arena_bad)
            circuit__msg_add(&m, "arena = %p %s", arena, arena_bad);
        if (overlap)
            circuit__msg_add(&m, "mem = %p (%zu bytes) overlaps the arena at %p (%llu bytes)", mem,
                             l.size, arena,
                             (unsigned long long)((const circuit__arena *)arena)->size);
        if (len >= sizeof r->magic && !misaligned && !overlap)
            r->magic = 0; /* no breaker here now */
        circuit__msg_end(&m);
        return EINVAL;
    }
    uint64_t unit = 0;
    circuit__arena *a = arena;
    if (a) {
        /* relaxed: the CAS only hands out an index; the unit's zeroes were
         * published with the arena, and it is never handed out twice */
        uint64_t taken = circuit__ld_rlx(&a->taken);
        do {
            if (taken >= a->capacity) {
                circuit__text t = {errbuf, errbuf_len, 0};
                circuit__text_fmt(&t, "%s: the arena's %u units are all taken (a unit is never "
                                      "given back: build a new arena)",
                                  fn, a->capacity);
                if (len >= sizeof r->magic)
                    r->magic = 0;
                return ENOSPC;
            }
        } while (!circuit__cas_rlx(&a->taken, &taken, taken + 1)); /* relaxed: as above */
        unit = taken;
    }
    /* Before any process uses it (the caller publishes it): plain stores */
    memset(mem, 0, l.size);
    r->layout = CIRCUIT_SHARED_LAYOUT;
    r->ncpu = ncpu;
    r->size = l.size;
    r->cfg = spec->config;
    uint64_t salt = spec->salt;
    if (!salt)
        salt = ((uint64_t)getpid() << 32 ^ (uint64_t)circuit__now()) | 1u;
    r->salt = salt;
    uint32_t window = (uint32_t)spec->config.window;
    r->seq_mod = (uint64_t)window * ((UINT64_C(1) << 31) / window);
    r->window_magic = UINT64_MAX / window + 1;
    r->off_shared = l.off_shared;
    r->off_arrays = l.off_arrays;
    r->off_pcpu = l.off_pcpu;
    r->pcpu_stride = a ? a->stride : CIRCUIT_CACHELINE;
    r->cacheline = CIRCUIT_CACHELINE;
    r->arena_off = a ? (int64_t)((intptr_t)arena - (intptr_t)mem) : NO_ARENA;
    r->unit = unit;
    /* the shared state's first values, through a handle of this process
     * that lives only for the call (the same code as circuit_new) */
    circuit_breaker scratch;
    circuit_breaker *h = &scratch;
    memset(h, 0, sizeof *h);
    circuit__handle_carve(h, (circuit__shared *)(void *)((char *)mem + l.off_shared),
                          (char *)mem + l.off_arrays, window, (uint32_t)spec->config.probes);
    h->ncpu = ncpu;
    h->pcpu0 = a ? (char *)a + ARENA_HEAD + unit * UNIT : (char *)mem + l.off_pcpu;
    h->pcpu_stride = (uint16_t)r->pcpu_stride;
    h->seq_mod = r->seq_mod;
    h->window_magic = r->window_magic;
    circuit__closed_init(h); /* the state word: closed, generation 0 */
    circuit__st128_init(&h->s->probe_hint, (circuit__u128){(uint64_t)INT64_MAX, 0});
    r->magic = REGION_MAGIC;
    return 0;
}

int circuit_shared_init(void *mem, size_t len, const circuit_spec *spec, char *errbuf,
                        size_t errbuf_len)
{
    return shared_init(mem, len, NULL, spec, errbuf, errbuf_len, "circuit_shared_init");
}

int circuit_shared_init_in_arena(void *mem, size_t len, void *arena, const circuit_spec *spec,
                                 char *errbuf, size_t errbuf_len)
{
    if (!arena)
        circuit__abort("circuit_shared_init_in_arena: arena is NULL");
    return shared_init(mem, len, arena, spec, errbuf, errbuf_len, "circuit_shared_init_in_arena");
}

/* ---- attach / detach ----------------------------------------------------- */

int circuit_shared_attach(circuit_breaker **out, void *mem, size_t len, const circuit_spec *spec,
                          char *errbuf, size_t errbuf_len)
{
    circuit__check_spec(out, spec, "circuit_shared_attach");
    if (!mem)
        circuit__abort("circuit_shared_attach: mem is NULL");
    circuit__text none = {errbuf, errbuf_len, 0};
    circuit__text_str(&none, ""); /* an empty message unless one follows */
    const circuit__region *r = mem;
    if (((uintptr_t)mem % CIRCUIT_SHARED_ALIGN) != 0 || len < sizeof *r) {
        circuit__msg m;
        circuit__msg_start(&m, errbuf, errbuf_len, "circuit_shared_attach");
        if (((uintptr_t)mem % CIRCUIT_SHARED_ALIGN) != 0)
            circuit__msg_add(&m, "mem = %p (must be aligned to %d bytes)", mem, CIRCUIT_SHARED_ALIGN);
        if (len < sizeof *r)
            circuit__msg_add(&m, "len = %zu (smaller than the header, %zu bytes)", len, sizeof *r);
        return circuit__msg_end(&m);
    }
    /* Plain loads: init's stores were published to us by the caller */
    if (r->magic != REGION_MAGIC) {
        circuit__text t = {errbuf, errbuf_len, 0};
        circuit__text_fmt(&t, "circuit_shared_attach: mem holds no breaker (magic %#llx, not "
                              "circuit_shared_init's)",
                          (unsigned long long)r->magic);
        return EPROTO;
    }
    if (r->layout != CIRCUIT_SHARED_LAYOUT || r->cacheline != CIRCUIT_CACHELINE) {
        circuit__text t = {errbuf, errbuf_len, 0};
        circuit__text_fmt(&t, "circuit_shared_attach: the breaker has layout version %u with %u-byte "
                              "lines; this library reads version %d with %d-byte lines",
                          r->layout, r->cacheline, CIRCUIT_SHARED_LAYOUT, CIRCUIT_CACHELINE);
        return EPROTO;
    }
    /* A header init did not write (damaged, forged, or another build's):
     * every recorded size and offset must be the ones its config gives,
     * before any is used to place a pointer */
    bool in_arena = r->arena_off != NO_ARENA;
    layout l = layout_of(&r->cfg, in_arena ? 0 : r->ncpu);
    const circuit__arena *ar = NULL;
    const char *damage = NULL;
    uint64_t window = (uint64_t)r->cfg.window;
    if (!config_valid(&r->cfg) || r->ncpu < 1 || r->ncpu > CIRCUIT__MAX_CPUS)
        damage = "its config or CPU count";
    else if (r->seq_mod != window * ((UINT64_C(1) << 31) / window) ||
             r->window_magic != UINT64_MAX / window + 1 || r->salt == 0)
        damage = "the values it derives from its config, or its salt";
    else if (r->size != l.size || r->off_shared != l.off_shared || r->off_arrays != l.off_arrays ||
             r->off_pcpu != l.off_pcpu ||
             (!in_arena && r->pcpu_stride != CIRCUIT_CACHELINE))
        damage = "its sizes or offsets";
    else if (in_arena && ((r->arena_off % CIRCUIT_SHARED_ALIGN) != 0 || r->arena_off == 0))
        damage = "its arena's place";
    else if (in_arena) {
        ar = (const circuit__arena *)(const void *)((const char *)mem + r->arena_off);
        const char *why = !mapped(ar, ARENA_HEAD) ? "is not mapped in this process (the arena "
                                                    "and the breaker must lie in one mapping)"
                                                  : arena_problem(ar, r->ncpu);
        if (!why && !mapped(ar, ar->size))
            why = "is not mapped whole in this process";
        if (why) {
            circuit__text t = {errbuf, errbuf_len, 0};
            circuit__text_fmt(&t, "circuit_shared_attach: the breaker's arena (at %+lld bytes) %s",
                              (long long)r->arena_off, why);
            return EPROTO;
        }
        /* relaxed: `taken` only grows, and this unit was taken before the
         * breaker's init was published to us */
        if (r->unit >= ar->capacity || r->unit >= circuit__ld_rlx(&ar->taken) ||
            r->pcpu_stride != ar->stride)
            damage = "its unit in the arena";
    }
    if (damage) {
        circuit__text t = {errbuf, errbuf_len, 0};
        circuit__text_fmt(&t, "circuit_shared_attach: mem holds a damaged breaker header (%s)",
                          damage);
        return EPROTO;
    }
    /* SH5: the config, field by field; the memory's size */
    circuit__msg m;
    circuit__msg_start(&m, errbuf, errbuf_len, "circuit_shared_attach");
    const circuit_config *a = &spec->config, *i = &r->cfg;
    if (a->window != i->window)
        circuit__msg_add(&m, "config.window = %d (the shared breaker's is %d)", a->window, i->window);
    if (a->probes != i->probes)
        circuit__msg_add(&m, "config.probes = %d (the shared breaker's is %d)", a->probes, i->probes);
    if (a->open_for_ns != i->open_for_ns)
        circuit__msg_add(&m, "config.open_for_ns = %lld (the shared breaker's is %lld)",
                         (long long)a->open_for_ns, (long long)i->open_for_ns);
    if (a->probe_timeout_ns != i->probe_timeout_ns)
        circuit__msg_add(&m, "config.probe_timeout_ns = %lld (the shared breaker's is %lld)",
                         (long long)a->probe_timeout_ns, (long long)i->probe_timeout_ns);
    if (len < r->size)
        circuit__msg_add(&m, "len = %zu (the shared breaker takes %llu bytes)", len,
                         (unsigned long long)r->size);
    if (circuit__msg_end(&m) != 0)
        return EINVAL;
    circuit_breaker *b = NULL;
    if (posix_memalign((void **)&b, 64, sizeof *b) != 0)
        return ENOMEM;
    memset(b, 0, sizeof *b);
    char *base = mem;
    circuit__handle_carve(b, (circuit__shared *)(void *)(base + r->off_shared), base + r->off_arrays,
                          (uint32_t)i->window, (uint32_t)i->probes);
    b->cfg = *i;
    circuit__handle_callbacks(b, spec);
    b->salt = r->salt;
    b->seq_mod = r->seq_mod;
    b->window_magic = r->window_magic;
    b->ncpu = r->ncpu;
    b->pcpu0 = ar ? (char *)(uintptr_t)ar + ARENA_HEAD + r->unit * UNIT : base + r->off_pcpu;
    b->pcpu_stride = (uint16_t)r->pcpu_stride;
    b->footprint = (uint32_t)sizeof *b;
    b->proc = circuit__proc_self();
    b->proc_start = circuit__proc_start(0);
    b->shared = 1;
    circuit__delivery_init(b);
    b->magic = CIRCUIT__MAGIC;
    *out = b;
    return 0;
}

void circuit_shared_detach(circuit_breaker *b)
{
    if (!b)
        return;
    circuit__check_breaker(b, "circuit_shared_detach");
    if (!b->shared)
        circuit__abort("circuit_shared_detach: the breaker was built by circuit_new; free it "
                       "with circuit_free");
    circuit__check_no_callback(b, "circuit_shared_detach");
    circuit__delivery_destroy(b);
    *(volatile uint64_t *)&b->magic = 0; /* as circuit_free (single-threaded by contract) */
    free(b);
}

#ifdef CIRCUIT_TESTING
#include "testing.h"

void circuit_test_shared_proc(circuit_breaker *b, uint32_t id)
{
    circuit__check_breaker(b, "circuit_test_shared_proc");
    b->proc = id & ((UINT32_C(1) << 22) - 1);
}
#endif
