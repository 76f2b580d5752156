/*
 * circuit-bench, what it prints: the Markdown tables (stdout), the targets,
 * the JSON lines (--json), and the memory table (circuit-bench-memory, run
 * from here).
 *
 * SPDX-License-Identifier: MIT
 *
 * One JSON object per line and figure:
 *   case, variant, threads, window, probes, ns_per_op, mops, min_ns, max_ns,
 *   reps                                       every figure
 *   fairness                                   every figure
 *   scaling                                    when the 1-thread figure of the
 *                                              same case and variant was measured
 *   p50_ns, p99_ns, p999_ns                    the breakers and no_breaker
 *   overhead                                   proxy_cycle: circuit and mutex_breaker
 *   transitions_per_s                          churn
 * bench/check_bench_json.py checks them (the bench-smoke test).
 */
#include "bench.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc_count.h"

extern char **environ;

/* ---- header ------------------------------------------------------------------------ */

static void read_line(const char *path, const char *key, char *out, size_t len)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (key == NULL || strncmp(line, key, strlen(key)) == 0) {
            const char *p = key ? strchr(line, ':') : NULL;
            p = p ? p + 1 + strspn(p + 1, " \t") : line;
            size_t n = strcspn(p, "\n");
            n = n < len - 1 ? n : len - 1;
            memcpy(out, p, n);
            out[n] = '\0';
            break;
        }
    }
    fclose(f);
}

void print_header(FILE *f, const options *o)
{
    char model[128] = "?", load[64] = "?";
    read_line("/proc/cpuinfo", "model name", model, sizeof model);
    read_line("/proc/loadavg", NULL, load, sizeof load);
    /* Which object circuit_allow comes from: the shared library, not a
     * static test build linked in by mistake. */
    Dl_info di;
    bool (*fp)(circuit_breaker *, void *, circuit_ticket *, circuit_rejection *) = circuit_allow;
    void *addr;
    memcpy(&addr, &fp, sizeof addr);
    const char *lib = dladdr(addr, &di) && di.dli_fname ? di.dli_fname : "?";

    fprintf(f, "# circuit-bench\n\n");
    fprintf(f, "- cpu: %s; %d CPUs in the affinity mask (%ld online)\n", model, n_cpus,
            sysconf(_SC_NPROCESSORS_ONLN));
    fprintf(f, "- circuit_allow from: %s\n", lib);
#ifdef NDEBUG
    fprintf(f, "- bench built with NDEBUG (release)\n");
#else
    fprintf(f, "- bench built WITHOUT NDEBUG (not a release build?)\n");
#endif
    fprintf(f, "- load average at start: %s\n", load);
    if (o->ops)
        fprintf(f, "- fixed %" PRIu64 " ops per thread per run, %d rep(s)\n", o->ops, o->reps);
    else
        fprintf(f, "- each figure: median of %d reps of %.3g s after a %.3g s warm-up; "
                   "min and max shown\n", o->reps, o->seconds, o->warmup);
    fprintf(f, "- the reps of the variants of a case (and of the three baselines) are "
               "interleaved, so that load bursts hit them alike\n");
    fprintf(f, "- ns/op is per thread; Mops/s is aggregate; scaling = Mops/s at N threads / "
               "(N x Mops/s at 1 thread); x columns are ns/op ratios (lower is better) against "
               "the same thread count\n");
    fprintf(f, "- latency: one op in %d timed alone with %s (%.3f ticks/ns; an empty timed pair "
               "reads %.0f ns, included in every sample); p50/p99/p99.9 over all threads' samples "
               "of a rep, median of the reps; fairness = fewest / most ops of a thread\n",
            BATCH, tick_source(), ticks_per_ns, tick_overhead_ns);
    fprintf(f, "- proxy_cycle: allow, %" PRId64 " ns of busy work (%.0f spin turns of %.3f ns), "
               "done; overhead = (ns/op - no_breaker ns/op) / no_breaker ns/op, rep by rep\n",
            o->work_ns, (double)o->work_ns / spin_ns_per_iter, spin_ns_per_iter);
    fprintf(f, "- heap allocations counted over %s\n", alloc_count_scope());
    fprintf(f, "- the machine may be shared and noisy: read medians, and the min-max spread "
               "as the noise\n\n");
}

/* ---- the tables ---------------------------------------------------------------------- */

static void ratio_cell(char *buf, size_t len, const result *r, const result *ref)
{
    if (ref == NULL || ref->ns_med <= 0)
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%.3g", r->ns_med / ref->ns_med);
}

static void num_cell(char *buf, size_t len, double v, const char *fmt)
{
    if (v > 0)
        snprintf(buf, len, fmt, v);
    else
        snprintf(buf, len, "-");
}

static void print_table(FILE *f, bool pinned)
{
    fprintf(f, "| case | variant | threads | window | probes | ns/op (median) | min | max | "
               "Mops/s (aggregate) | scaling | p50 ns | p99 ns | p99.9 ns | fairness | "
               "x mutex_breaker | x atomic_floor | x clock | notes |\n");
    fprintf(f, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n");
    for (size_t i = 0; i < n_results; i++) {
        const result *r = &results[i];
        if (r->pinned != pinned)
            continue;
        bool breaker = r->v == V_CIRCUIT || r->v == V_MUTEX;
        char wm[16] = "-", pb[16] = "-", xm[16], xa[16], xc[16], sc[16], p50[16], p99[16],
             p999[16], notes[256] = "";
        if (r->v != V_BASELINE) {
            snprintf(wm, sizeof wm, "%d", r->c->window);
            snprintf(pb, sizeof pb, "%d", r->c->probes);
        }
        const result *mref =
            breaker ? find_result(r->c->name, V_MUTEX, r->c->window, r->c->probes, r->threads)
                    : NULL;
        ratio_cell(xm, sizeof xm, r, mref);
        ratio_cell(xa, sizeof xa, r, find_result("atomic_floor", V_BASELINE, 0, 0, r->threads));
        ratio_cell(xc, sizeof xc, r, find_result("clock", V_BASELINE, 0, 0, r->threads));
        num_cell(sc, sizeof sc, scaling_of(r), "%.2f");
        num_cell(p50, sizeof p50, r->p50_ns, "%.0f");
        num_cell(p99, sizeof p99, r->p99_ns, "%.0f");
        num_cell(p999, sizeof p999, r->p999_ns, "%.0f");
        size_t n = 0;
        if (r->has_overhead)
            n += (size_t)snprintf(notes + n, sizeof notes - n, "overhead %+.2f%%; ",
                                  100.0 * r->overhead);
        if (r->c->setup == SETUP_CHURN)
            n += (size_t)snprintf(notes + n, sizeof notes - n, "%.3g transitions/s; ", r->trans_med);
        if (r->c->setup == SETUP_HALF_OPEN && r->ops > 0)
            n += (size_t)snprintf(notes + n, sizeof notes - n, "%.1f%% admitted; ",
                                  100.0 * (double)r->admitted / (double)r->ops);
        if (r->allocs)
            n += (size_t)snprintf(notes + n, sizeof notes - n, "%" PRIu64 " heap allocs in %" PRIu64
                                  " ops; ", r->allocs, r->ops);
        if (r->broken[0] && n < sizeof notes)
            snprintf(notes + n, sizeof notes - n, "INVALID: %s", r->broken);
        fprintf(f, "| %s | %s | %d | %s | %s | %.2f | %.2f | %.2f | %.2f | %s | %s | %s | %s | "
                   "%.2f | %s | %s | %s | %s |\n",
                r->c->name, variant_names[r->v], r->threads, wm, pb, r->ns_med, r->ns_min,
                r->ns_max, r->mops_med, sc, p50, p99, p999, r->fairness, xm, xa, xc, notes);
    }
}

void print_tables(FILE *f)
{
    fprintf(f, "## Threads pinned to distinct CPUs\n\n");
    print_table(f, true);
    bool any_over = false;
    for (size_t i = 0; i < n_results; i++)
        any_over |= !results[i].pinned;
    if (any_over) {
        fprintf(f, "\n## Oversubscribed (more threads than CPUs, unpinned)\n\n");
        print_table(f, false);
    }
}

/* ---- targets (issue 10; informational, never pass/fail) ------------------------------ */

static void target_row(FILE *f, const char *what, double measured, double bound, bool upper)
{
    bool ok = upper ? measured <= bound : measured >= bound;
    fprintf(f, "| %s | %.3g | %s |\n", what, measured, ok ? "met" : "MISSED");
}

/* a / b of two figures (ns/op, or Mops/s when use_mops), when both exist. */
static void ratio_row(FILE *f, const char *what, const result *a, const result *b, bool use_mops,
                      double bound, bool upper)
{
    if (a == NULL || b == NULL)
        return; /* not measured in this run */
    double x = use_mops ? a->mops_med / b->mops_med : a->ns_med / b->ns_med;
    target_row(f, what, x, bound, upper);
}

void print_targets(FILE *f)
{
    char what[200];
    const result *cs1 = find_result("closed_success", V_CIRCUIT, 64, 1, 1);
    const result *cs2 = find_result("closed_success", V_CIRCUIT, 64, 1, 2);
    const result *ms2 = find_result("closed_success", V_MUTEX, 64, 1, 2);
    const result *pc2 = find_result("proxy_cycle", V_CIRCUIT, 64, 1, 2);
    const result *pm2 = find_result("proxy_cycle", V_MUTEX, 64, 1, 2);
    fprintf(f, "\n## Targets (informational: medians of one run, not pass/fail; rows whose "
               "figures were not measured in this run are left out)\n\n");
    fprintf(f, "| target | measured | status |\n|---|--:|---|\n");
    if (cs2) {
        target_row(f, "closed_success 2 threads: scaling >= 0.9 (aggregate >= 1.8x 1 thread)",
                   scaling_of(cs2), 0.9, false);
        ratio_row(f, "closed_success 2 threads: Mops/s >= 4x mutex_breaker", cs2, ms2, true, 4.0,
                  false);
        if (cs1 && cs1->p999_ns > 0)
            target_row(f, "closed_success 2 threads: p99.9 <= 3x its own 1-thread p99.9",
                       cs2->p999_ns / cs1->p999_ns, 3.0, true);
        if (ms2 && ms2->p999_ns > 0)
            target_row(f, "closed_success 2 threads: p99.9 <= 0.1x mutex_breaker's",
                       cs2->p999_ns / ms2->p999_ns, 0.1, true);
        target_row(f, "closed_success 2 threads: fairness >= 0.8", cs2->fairness, 0.8, false);
    }
    ratio_row(f, "closed_success 1 thread: ns/op <= 3x atomic_floor", cs1,
              find_result("atomic_floor", V_BASELINE, 0, 0, 1), false, 3.0, true);
    if (pc2) {
        target_row(f, "proxy_cycle 2 threads: overhead <= 0.03", pc2->overhead, 0.03, true);
        if (pm2 && pm2->overhead > 0)
            target_row(f, "proxy_cycle 2 threads: overhead <= 0.5x mutex_breaker's",
                       pc2->overhead / pm2->overhead, 0.5, true);
    }
    ratio_row(f, "closed_mixed 2 threads: Mops/s >= 1x mutex_breaker (stretch)",
              find_result("closed_mixed", V_CIRCUIT, 64, 1, 2),
              find_result("closed_mixed", V_MUTEX, 64, 1, 2), true, 1.0, false);
    int tl[3] = {1, 2, n_cpus};
    for (int i = 0; i < 3; i++) {
        if (i == 2 && (n_cpus == 1 || n_cpus == 2))
            break;
        int t = tl[i];
        const result *clk = find_result("clock", V_BASELINE, 0, 0, t);
        snprintf(what, sizeof what, "open_reject %d thread(s): ns/op <= 1.5x clock", t);
        ratio_row(f, what, find_result("open_reject", V_CIRCUIT, 64, 1, t), clk, false, 1.5, true);
        snprintf(what, sizeof what, "get_state %d thread(s): ns/op <= 1.5x clock", t);
        ratio_row(f, what, find_result("get_state", V_CIRCUIT, 64, 1, t), clk, false, 1.5, true);
        snprintf(what, sizeof what,
                 "half_open_probe %d thread(s): probes=65536 ns/op <= 2x probes=64", t);
        ratio_row(f, what, find_result("half_open_probe", V_CIRCUIT, 64, 65536, t),
                  find_result("half_open_probe", V_CIRCUIT, 64, 64, t), false, 2.0, true);
        const result *w[3] = {find_result("closed_success", V_CIRCUIT, 1, 1, t),
                              find_result("closed_success", V_CIRCUIT, 64, 1, t),
                              find_result("closed_success", V_CIRCUIT, 65536, 1, t)};
        if (w[0] && w[1] && w[2]) {
            double lo = w[0]->ns_med, hi = w[0]->ns_med;
            for (int k = 1; k < 3; k++) {
                lo = w[k]->ns_med < lo ? w[k]->ns_med : lo;
                hi = w[k]->ns_med > hi ? w[k]->ns_med : hi;
            }
            snprintf(what, sizeof what,
                     "closed_success %d thread(s): flat in window 1..65536, max/min ns/op <= 1.10",
                     t);
            target_row(f, what, hi / lo, 1.10, true);
        }
    }
}

/* ---- JSON lines ------------------------------------------------------------------------ */

int write_json(const char *path)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        fprintf(stderr, "circuit-bench: %s: %s\n", path, strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < n_results; i++) {
        const result *r = &results[i];
        fprintf(f,
                "{\"case\":\"%s\",\"variant\":\"%s\",\"threads\":%d,\"window\":%d,\"probes\":%d,"
                "\"ns_per_op\":%.6g,\"mops\":%.6g,\"min_ns\":%.6g,\"max_ns\":%.6g,\"reps\":%d,"
                "\"fairness\":%.4g",
                r->c->name, variant_names[r->v], r->threads, r->c->window, r->c->probes, r->ns_med,
                r->mops_med, r->ns_min, r->ns_max, r->reps, r->fairness);
        double sc = scaling_of(r);
        if (sc > 0)
            fprintf(f, ",\"scaling\":%.4g", sc);
        if (r->p50_ns > 0)
            fprintf(f, ",\"p50_ns\":%.6g,\"p99_ns\":%.6g,\"p999_ns\":%.6g", r->p50_ns, r->p99_ns,
                    r->p999_ns);
        if (r->has_overhead)
            fprintf(f, ",\"overhead\":%.6g", r->overhead);
        if (r->c->setup == SETUP_CHURN)
            fprintf(f, ",\"transitions_per_s\":%.1f", r->trans_med);
        fprintf(f, "}\n");
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "circuit-bench: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- memory -------------------------------------------------------------------------------- */

int run_memory_report(const char *json)
{
    char self[PATH_MAX], prog[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "circuit-bench: /proc/self/exe: %s\n", strerror(errno));
        return -1;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    snprintf(prog, sizeof prog, "%s/circuit-bench-memory", self);
    char *argv[] = {prog, json ? "--json" : NULL, (char *)json, NULL};
    fflush(NULL);
    pid_t pid;
    int rc = posix_spawn(&pid, prog, NULL, NULL, argv, environ);
    if (rc != 0) {
        fprintf(stderr, "circuit-bench: %s: %s\n", prog, strerror(rc));
        return -1;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "circuit-bench: circuit-bench-memory failed\n");
        return -1;
    }
    return 0;
}
