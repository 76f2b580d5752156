/*
 * libcircuit: one breaker shared by several processes (SH1-SH5).
 *
 * SPDX-License-Identifier: MIT
 *
 * A multi-process server (nginx: one worker process per core) wants ONE
 * breaker per upstream, seen by every worker. The breaker is built once in
 * memory the caller maps into every process (an nginx shared zone,
 * mmap(MAP_SHARED), a memfd or shm_open file); each process then attaches a
 * handle that carries its own callbacks. Every function of circuit.h works
 * on that handle unchanged (SH4); this header adds only building, attaching
 * and detaching. Rule ids are defined in docs/CONTRACT.md; the layout and
 * the audit of what a killed process leaves behind are in
 * docs/design/shared-memory.md.
 *
 * The shared memory holds no pointer: the breaker's parts are located by
 * offsets from the start of the memory, so each process may map it at a
 * different address (SH1). The per-CPU part lives inside it, or in an
 * arena in the same mapping (circuit_shared_init_in_arena: 16 bytes per CPU,
 * L5).
 *
 * Processes and death (SH2). After circuit_shared_init, no function a
 * worker calls on a handle takes a lock that another process could hold,
 * and none allocates while at most CIRCUIT_TRANSITION_POOL (4) transitions
 * per handle, and CIRCUIT_SHARED_TRANSITION_POOL (63) more in the whole
 * process, wait for their observe. More can wait only while a thread of
 * the process is inside an observe (stalled, or calling the breaker) and
 * its other threads, or that observe, make that many more: never in a
 * single-threaded worker whose observe does not call the breaker (nginx's).
 * Past that the record is malloc'ed from the process's own heap, never
 * shared, rather than lost or waited for. A process
 * killed at any instruction (SIGKILL, the OOM killer, a crash) leaves every
 * other process the whole function of the breaker:
 *   - no lock and no role stays held: a role it held inside the shared
 *     memory (a per-CPU totals flush) is taken over by the next process
 *     that needs it once the holder is gone: its pid no longer exists
 *     (kill(pid, 0) fails with ESRCH: the parent must reap a killed
 *     worker, as nginx's master does; a zombie still counts as alive), or
 *     the process that now has that pid started at another time
 *     (/proc/PID/stat: a reused pid). A start time that cannot be read
 *     (no /proc, or hidepid hiding another user's process) or was never
 *     recorded (the owner killed between its START and its record) never
 *     counts as another process: the role then waits until no process has
 *     that pid;
 *   - its probe slots time out after probe_timeout (P1);
 *   - its in-flight tickets are never settled: circuit_stats.admitted may
 *     exceed successes + failures + ignored + late + released + (live
 *     tickets of the living) by at most the tickets the dead process held;
 *   - transitions it made and had not yet delivered to its own observe are
 *     lost to observers (they are still numbered and counted in
 *     circuit_stats.transitions: SH3), and an intent it had begun (a trip,
 *     an isolate) is finished by the next call of another process.
 *
 * Transitions (SH3). Each transition is numbered (generation) and counted in
 * the shared stats, and is delivered to the observe of the process whose
 * call made it, with that call's call_ctx when the call was that process's
 * (O6); a process never sees another process's call_ctx. Within one
 * process the O1-O5 guarantees hold for the transitions that process made:
 * each exactly once, in increasing generation, never concurrently with
 * itself; generations made by other processes are skipped, so `from` need
 * not equal the previous delivery's `to`. Merged over all processes'
 * observes, the transitions have every generation 1, 2, 3, ... exactly
 * once (but for what a dead process had not delivered).
 *
 * A probe slot is taken, with its due time, and freed by one atomic step
 * each, so a process killed at any instruction holds no slot past its
 * timeout; one killed before the timeout scan was told of its probe's due
 * time is found by a later scan, since no scan sets the scan's hint more
 * than probe_timeout past its own clock (SH2). One killed inside a probe's circuit_done, after its result
 * was counted and before its slot was freed, leaves that slot to time out
 * at its due time: that probe counts as a result and as a timeout
 * (finding F4, open).
 *
 * Not covered: sharing across machines or across kernels (the memory must
 * be coherent between the CPUs of one host); processes of different
 * builds of the library (the layout version refuses them, SH5); processes
 * in different pid or time namespaces, which must not share a breaker (a
 * role's owner is named by its pid and its start time as its namespaces
 * show them: another pid namespace looks up another process, and another
 * time namespace shifts every start time it reads, so either could take
 * over a live owner's flush); a handle used in a process other than the one that attached
 * it (a forked child attaches its own; a copied handle would name the wrong
 * process as a role's owner).
 */
#ifndef CIRCUIT_SHARED_H
#define CIRCUIT_SHARED_H

#include <stddef.h>

#include "circuit.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The alignment, in bytes, the shared functions require of the memory:
 *  the cache line the library lays per-CPU parts out by (64 on x86-64, 128
 *  on aarch64; mmap and nginx's slab pages give more). Every size they
 *  return is a multiple of it, so parts laid end to end stay aligned. */
#if defined(__aarch64__)
#define CIRCUIT_SHARED_ALIGN 128
#else
#define CIRCUIT_SHARED_ALIGN 64
#endif

/** Transition records a process keeps for all its shared handles, beyond
 *  each handle's own CIRCUIT_TRANSITION_POOL (6 KB of the library's static
 *  memory, never shared): a process allocates nothing while at most this
 *  many more of its transitions wait for its observes (SH2). A child forked
 *  while some are in use (the parent's transitions waiting for its
 *  observe) inherits them as in use: its reserve is that much smaller
 *  (nginx's master attaches nothing, so its workers start with all 63). */
#define CIRCUIT_SHARED_TRANSITION_POOL 63

/** The layout version that circuit_shared_init writes and
 *  circuit_shared_attach requires (SH5). It changes whenever the layout
 *  of the shared memory does; processes built against different versions
 *  cannot share a breaker. */
#define CIRCUIT_SHARED_LAYOUT 3

/*
 * circuit_shared_size - bytes of shared memory one breaker needs.
 * @cfg: the configuration the breaker will be built with.
 *
 * Returns the size in bytes, per-CPU part included (one cache line per CPU
 * configured, sysconf(_SC_NPROCESSORS_CONF), so that no two CPUs write one
 * line: 64 bytes on x86-64, 128 on aarch64), or 0 when @cfg is NULL or
 * invalid (CFG1: the message is circuit_shared_init's). Depends only on
 * @cfg and the machine: every process on one host computes the same value.
 * A line per CPU is 4 (8 on aarch64) times L5's 16 bytes: a server with
 * many breakers puts their per-CPU parts in one arena instead (below).
 * Thread-safe; no callback, no allocation.
 */
CIRCUIT_API size_t circuit_shared_size(const circuit_config *cfg);

/*
 * Arenas: the per-CPU parts of many shared breakers, 16 bytes per CPU each
 * (L5). An arena holds one region per CPU configured; a region holds
 * @capacity units of 16 bytes (rounded up to a cache line), and a breaker
 * takes the same unit in every region, so the units of up to 4 (8 on
 * aarch64) breakers share each CPU's lines and two CPUs never write one
 * line (the layout of the Linux kernel's alloc_percpu, as circuit_new's
 * process-wide arena). A breaker built by circuit_shared_init_in_arena
 * takes one unit for good (a unit is never given back: to reuse the
 * memory, rebuild the arena and every breaker in it, no process attached)
 * and records where the arena is relative to itself: the arena and the
 * breaker's memory must lie in ONE mapping (one mmap, one nginx zone), so
 * that the distance between them is the same in every process.
 * For (window 64, probes 1) on 64 CPUs a breaker then takes
 * circuit_shared_size_in_arena = 960 bytes plus 1 024 in the arena:
 * under 2 KB. A region is rounded up to a line, so 16 bytes per CPU holds
 * for arenas of a multiple of 4 units (8 on aarch64); an arena for one
 * breaker costs a line per CPU, as circuit_shared_init does.
 */

/** The most units one arena holds: its region per CPU stays under 64 KB. */
#define CIRCUIT_SHARED_ARENA_MAX 4000

/*
 * circuit_shared_arena_size - bytes of an arena for @capacity breakers.
 * @capacity: 1..CIRCUIT_SHARED_ARENA_MAX units.
 *
 * Returns a cache line of header plus one region per CPU configured, each
 * @capacity x 16 bytes rounded up to a cache line; 0 when @capacity is out
 * of range. Thread-safe; no allocation.
 */
CIRCUIT_API size_t circuit_shared_arena_size(unsigned capacity);

/*
 * circuit_shared_arena_init - lay out an empty arena in caller memory.
 * @arena:      at least circuit_shared_arena_size(@capacity) bytes, aligned
 *              to CIRCUIT_SHARED_ALIGN; owned by the caller (never freed).
 * @len:        the size of @arena in bytes.
 * @capacity:   units: the breakers it can hold, 1..CIRCUIT_SHARED_ARENA_MAX.
 * @errbuf:     on EINVAL, one message naming every problem; may be NULL.
 * @errbuf_len: size of @errbuf in bytes.
 *
 * Returns 0 or EINVAL (a @capacity out of range, @len too small, a
 * misaligned @arena). Aborts: @arena is NULL.
 * Not thread-safe with respect to @arena: publish it as circuit_shared_init
 * says, before any breaker is built in it.
 */
CIRCUIT_API int circuit_shared_arena_init(void *arena, size_t len, unsigned capacity,
                                          char *errbuf, size_t errbuf_len);

/*
 * circuit_shared_size_in_arena - bytes of a breaker whose per-CPU part is
 * in an arena: circuit_shared_size without the line per CPU. 0 when @cfg is
 * NULL or invalid. Thread-safe; no allocation.
 */
CIRCUIT_API size_t circuit_shared_size_in_arena(const circuit_config *cfg);

/*
 * circuit_shared_init_in_arena - circuit_shared_init, with the per-CPU part
 * a unit of @arena.
 * @mem, @len:  at least circuit_shared_size_in_arena(&spec->config) bytes,
 *              in the same mapping as @arena.
 * @arena:      built by circuit_shared_arena_init (in any process).
 * @spec, @errbuf, @errbuf_len: as circuit_shared_init.
 *
 * Takes one unit of @arena for good, even if @mem is built again later.
 * Returns 0; EINVAL as circuit_shared_init, and when @arena is misaligned
 * or holds no arena of this layout (one message naming every problem;
 * no unit is taken); ENOSPC when every unit is taken. On an error @mem is
 * left with no valid magic.
 * Aborts: as circuit_shared_init, and when @arena is NULL.
 * Thread-safe with respect to @arena (breakers may be built in one arena
 * at once by several threads or processes: a CAS hands out the units); not
 * with respect to @mem (as circuit_shared_init).
 */
CIRCUIT_API int circuit_shared_init_in_arena(void *mem, size_t len, void *arena,
                                             const circuit_spec *spec, char *errbuf,
                                             size_t errbuf_len);

/*
 * circuit_shared_init - build a closed breaker in caller memory.
 * @mem:        at least circuit_shared_size(&spec->config) bytes, aligned to
 *              CIRCUIT_SHARED_ALIGN, writable, and mapped shared
 *              (MAP_SHARED) if other processes are to see it. Owned by the
 *              caller; the library never frees or unmaps it.
 * @len:        the size of @mem in bytes.
 * @spec:       configuration and policy. The config is copied into @mem
 *              (attach compares against it, SH5); policy.check is asked as
 *              circuit_new asks it (K1). The callbacks are NOT stored: each
 *              process gives its own to circuit_shared_attach, including
 *              this one. spec->salt is stored (0: a salt derived from the
 *              pid and the clock, never 0) and every process's open_for sees
 *              it.
 * @errbuf:     on EINVAL, ONE message naming every problem (each invalid
 *              config field with its bound and value, the policy's
 *              complaint, a @len too small with the size needed, a
 *              misaligned @mem), truncated to errbuf_len - 1 bytes; may be
 *              NULL.
 * @errbuf_len: size of @errbuf in bytes.
 *
 * The breaker is closed, generation 0 (S1). Nothing is allocated: the
 * memory holds the whole breaker. To rebuild a breaker in the same memory
 * (a configuration change), every process must detach first.
 *
 * Returns 0 or EINVAL (and @mem is then left with no valid magic).
 * Aborts: @mem or @spec is NULL; policy.trip, policy.probe or classify is
 * NULL (as circuit_new, CFG4).
 * Not thread-safe with respect to @mem: no process may use the memory while
 * it is being built; publish it to other processes afterwards (fork after
 * init, or any synchronisation that orders the writes, such as a futex, a
 * pipe or nginx's init_zone sequence).
 */
CIRCUIT_API int circuit_shared_init(void *mem, size_t len, const circuit_spec *spec,
                                    char *errbuf, size_t errbuf_len);

/*
 * circuit_shared_attach - a process's handle on a shared breaker.
 * @out:        receives the handle on success, NULL on failure.
 * @mem:        memory built by circuit_shared_init (in this process or
 *              another), mapped at any address, aligned to
 *              CIRCUIT_SHARED_ALIGN.
 * @len:        the size of @mem as this process mapped it.
 * @spec:       this process's callbacks (policy, classify, observe,
 *              open_for and their args: they must outlive the handle), and
 *              spec->config, which must equal the config given to
 *              circuit_shared_init field by field (SH5). spec->salt is
 *              ignored (the breaker's salt is init's). policy.check is not
 *              asked again.
 * @errbuf:     on EINVAL or EPROTO, ONE message naming every problem (each
 *              config field that differs, with init's value and this one);
 *              may be NULL.
 * @errbuf_len: size of @errbuf in bytes.
 *
 * The handle is process-local (malloc'ed): it holds this process's
 * callbacks, its transition delivery (SH3: this process's observe gets the
 * transitions its own calls make), its own view of where the parts are
 * mapped, and a pool of CIRCUIT_TRANSITION_POOL transition records (about
 * 700 bytes in all on x86-64). Every
 * function of circuit.h takes it where it takes a circuit_breaker, from
 * any thread of this process; a handle must not be used in another process
 * (after fork, the child attaches its own). A process may attach several
 * handles to one breaker; each delivers only its own transitions.
 *
 * Returns 0; EINVAL (a bad @len or alignment, @len smaller than the size
 * init recorded, or a config different from init's: the message names the
 * fields); EPROTO (@mem does not hold a breaker: wrong magic, a breaker
 * of another CIRCUIT_SHARED_LAYOUT, a header whose sizes, offsets or
 * arena unit are not the ones its config gives, or an arena that is not
 * where the breaker says); or ENOMEM (nothing leaked). A breaker built in
 * an arena needs the arena mapped as well, at the same distance (one
 * mapping holding both).
 * Aborts: @out, @mem or @spec is NULL; policy.trip, policy.probe or
 * classify is NULL (CFG4).
 * Thread-safe: attaching never writes the shared memory.
 */
CIRCUIT_API int circuit_shared_attach(circuit_breaker **out, void *mem, size_t len,
                                      const circuit_spec *spec, char *errbuf,
                                      size_t errbuf_len);

/*
 * circuit_shared_detach - free a process's handle.
 * @b: a handle from circuit_shared_attach, or NULL (does nothing).
 *
 * Frees the handle only; the shared breaker and its memory are untouched
 * and stay usable by every other handle. Transitions this handle made and
 * had not yet delivered are discarded (as circuit_free does). Tickets
 * admitted through it must be settled first (like circuit_free, detaching
 * under a live ticket is a caller bug; a ticket never settled counts as a
 * dead process's would).
 * Aborts: @b was not attached by circuit_shared_attach (circuit_free on a
 * handle aborts the other way round: "use circuit_shared_detach"); called
 * from inside a callback of the same handle.
 * Not thread-safe with respect to @b: no other call may run on it.
 */
CIRCUIT_API void circuit_shared_detach(circuit_breaker *b);

#ifdef __cplusplus
}
#endif

#endif /* CIRCUIT_SHARED_H */
