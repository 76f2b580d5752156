/*
 * What the timed programs print: the Markdown tables (stdout), the targets
 * and the JSON lines (--json).
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
 *   work_ns, work_measured_ns                  proxy_cycle: the busy work asked per op,
 *                                              and what no_breaker measured per op at
 *                                              the same thread count (its ns/op)
 *   transitions_per_s                          churn
 *   cpu_ns_per_op, cpu_share                   every figure: the threads' CPU time per op,
 *                                              and CPU time / run time (< 1: other
 *                                              processes took the CPUs)
 *   mops_together, together_share              closed allow + done loops and proxy_cycle:
 *                                              aggregate Mops/s over the time in which
 *                                              every thread was making progress, and that
 *                                              time / the run's (runner.c, together())
 *   failure_fraction                           closed_mixed_*: 1 / EVERY
 * bench/check_bench_json.py checks them (the bench-smoke test).
 */
#include "bench.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "alloc_count.h"

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

    fprintf(f, "# %s\n\n", bench_name);
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
    if (work_calibrated_ns > 0)
        fprintf(f, "- proxy_cycle: allow, %" PRId64 " ns of busy work (a spin on the time stamp "
                   "counter), done; the work calibrated against the no_breaker loop itself (%d "
                   "tries: %" PRIu64 " ticks; that loop's last calibration run measured %.1f ns per op, "
                   "%+.2f %% of the work asked); overhead = (ns/op - no_breaker ns/op) / no_breaker ns/op, rep by "
                   "rep\n", o->work_ns, work_calibration_tries, work_ticks, work_calibrated_ns,
                100.0 * (work_calibrated_ns / (double)o->work_ns - 1));
    else
        fprintf(f, "- proxy_cycle: allow, %" PRId64 " ns of busy work (%" PRIu64 " ticks, not "
                   "calibrated against the no_breaker loop), done; overhead = (ns/op - no_breaker "
                   "ns/op) / no_breaker ns/op, rep by rep\n", o->work_ns, work_ticks);
    fprintf(f, "- closed_mixed_<F>pct: each result fails with probability F %% (seeded "
               "pseudo-random per thread: geometric gaps, not a fixed period); the trip policy "
               "never trips (shared-line RMWs per op, L8: bench_rmw)\n");
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
        if (r->cpu_share > 0 && r->cpu_share < 0.95)
            n += (size_t)snprintf(notes + n, sizeof notes - n,
                                  "ran %.0f%% of the time (%.2f CPU ns/op); ", 100 * r->cpu_share,
                                  r->cpu_ns_med);
        if (r->v == V_NONE && r->c->loop == LOOP_PROXY)
            n += (size_t)snprintf(notes + n, sizeof notes - n, "measured work %.1f ns/op; ",
                                  r->ns_med);
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

/* ---- the closed_mixed family ----------------------------------------------------------- */

/* 1 in EVERY, as the table's first column says it. */
static void failures_cell(char *buf, size_t len, uint64_t every)
{
    if (every == 0)
        snprintf(buf, len, "none");
    else
        snprintf(buf, len, "1 in %" PRIu64 " (%g %%)", every, 100.0 / (double)every);
}

/* Successes and the closed_mixed family, windows 64 and 1024: the table of
 * counting under real traffic (1 and 2 threads, against mutex_breaker). */
void print_mixed_table(FILE *f)
{
    static const char *const names[] = {"closed_success", "closed_mixed_0.01pct",
                                        "closed_mixed_0.1pct", "closed_mixed_1pct",
                                        "closed_mixed_10pct"};
    static const uint64_t every[] = {0, 10000, 1000, 100, 10};
    static const int windows[] = {64, 1024};
    bool any = false;
    for (size_t i = 1; i < sizeof names / sizeof names[0]; i++)
        any |= find_result(names[i], V_CIRCUIT, 64, 1, 1) != NULL ||
               find_result(names[i], V_CIRCUIT, 1024, 1, 1) != NULL;
    if (!any)
        return;
    fprintf(f, "\n## Counting under real traffic: successes and closed_mixed (one breaker, "
               "never trips; Mops/s aggregate, medians)\n\n"
               "CPU share: the threads' CPU time / run time (1: nothing else ran on their CPUs); "
               "2t / 1t by CPU time = 2 x the 1-thread CPU ns/op / the 2-thread CPU ns/op (what the "
               "scaling would be if the threads had had their CPUs to themselves, at the "
               "contention they actually met); while all ran: aggregate Mops/s counted only over "
               "the time in which every thread was making progress (batch marks at most 20 us "
               "apart), the only figures here that compare 2 threads running together with 1 "
               "when other processes take the CPUs\n\n");
    fprintf(f, "| failures | window | 1 thread Mops/s | 2 threads Mops/s | 2t / 1t | "
               "mutex_breaker 2 threads Mops/s | 2t vs mutex | ns/op 1t / 2t | p99.9 ns 1t / 2t "
               "| mutex p99.9 ns 2t | fairness 2t (mutex) | "
               "CPU share 1t / 2t | 2t / 1t by CPU time | "
               "while all ran: 1t / 2t Mops/s (share of the run) | ... 2t / 1t | ... 2t vs mutex |\n");
    fprintf(f, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (size_t wi = 0; wi < 2; wi++) {
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            int w = windows[wi];
            const result *c1 = find_result(names[i], V_CIRCUIT, w, 1, 1);
            const result *c2 = find_result(names[i], V_CIRCUIT, w, 1, 2);
            const result *m2 = find_result(names[i], V_MUTEX, w, 1, 2);
            if (c1 == NULL && c2 == NULL)
                continue;
            char fc[64], a[16] = "-", b[16] = "-", sc[16] = "-", mm[16] = "-", vm[16] = "-",
                 ns[32] = "-", pp[32] = "-", mp[16] = "-", fa[32] = "-";
            failures_cell(fc, sizeof fc, every[i]);
            if (c1)
                snprintf(a, sizeof a, "%.1f", c1->mops_med);
            if (c2)
                snprintf(b, sizeof b, "%.1f", c2->mops_med);
            if (c1 && c2 && c1->mops_med > 0)
                snprintf(sc, sizeof sc, "%.2f", c2->mops_med / c1->mops_med);
            if (m2) {
                snprintf(mm, sizeof mm, "%.1f", m2->mops_med);
                snprintf(mp, sizeof mp, "%.0f", m2->p999_ns);
            }
            if (c2 && m2 && m2->mops_med > 0)
                snprintf(vm, sizeof vm, "%.2fx", c2->mops_med / m2->mops_med);
            if (c1 && c2) {
                snprintf(ns, sizeof ns, "%.1f / %.1f", c1->ns_med, c2->ns_med);
                snprintf(pp, sizeof pp, "%.0f / %.0f", c1->p999_ns, c2->p999_ns);
            }
            if (c2)
                snprintf(fa, sizeof fa, m2 ? "%.2f (%.2f)" : "%.2f", c2->fairness,
                         m2 ? m2->fairness : 0.0);
            char sh[32] = "-", cs[16] = "-";
            if (c1 && c2 && c2->cpu_ns_med > 0) {
                snprintf(sh, sizeof sh, "%.2f / %.2f", c1->cpu_share, c2->cpu_share);
                snprintf(cs, sizeof cs, "%.2f", 2 * c1->cpu_ns_med / c2->cpu_ns_med);
            }
            char tg[64] = "-", ts[16] = "-", tm[16] = "-";
            if (c1 && c2 && c1->mops_together > 0 && c2->mops_together > 0) {
                snprintf(tg, sizeof tg, "%.1f / %.1f (%.2f / %.2f)", c1->mops_together,
                         c2->mops_together, c1->together_share, c2->together_share);
                snprintf(ts, sizeof ts, "%.2f", c2->mops_together / c1->mops_together);
            }
            if (c2 && m2 && c2->mops_together > 0 && m2->mops_together > 0)
                snprintf(tm, sizeof tm, "%.2fx", c2->mops_together / m2->mops_together);
            fprintf(f, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | "
                       "%s | %s |\n",
                    fc, w, a, b, sc, mm, vm, ns, pp, mp, fa, sh, cs, tg, ts, tm);
        }
    }
}

/* ---- targets (informational, never pass/fail) --------------------------------------- */

static void target_row(FILE *f, const char *what, double measured, double bound, bool upper)
{
    bool ok = upper ? measured <= bound : measured >= bound;
    fprintf(f, "| %s | %.3g | %s %.3g | %s |\n", what, measured, upper ? "<=" : ">=", bound,
            ok ? "met" : "MISSED");
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

/* 2 threads' aggregate >= lo_1t x its 1 thread's and >= lo_mutex x mutex_breaker's. */
static void scaling_rows(FILE *f, const char *name, int window, double lo_1t, double lo_mutex)
{
    char what[200];
    const result *c1 = find_result(name, V_CIRCUIT, window, 1, 1);
    const result *c2 = find_result(name, V_CIRCUIT, window, 1, 2);
    const result *m2 = find_result(name, V_MUTEX, window, 1, 2);
    snprintf(what, sizeof what, "%s window %d, 2 threads: aggregate Mops/s / 1 thread's", name,
             window);
    ratio_row(f, what, c2, c1, true, lo_1t, false);
    snprintf(what, sizeof what, "%s window %d, 2 threads: Mops/s / mutex_breaker's at 2 threads",
             name, window);
    ratio_row(f, what, c2, m2, true, lo_mutex, false);
    /* the same while every thread ran (runner.c, together()) */
    if (c1 && c2 && c1->mops_together > 0 && c2->mops_together > 0) {
        snprintf(what, sizeof what, "... the same two while all threads ran: 2t / 1t");
        target_row(f, what, c2->mops_together / c1->mops_together, lo_1t, false);
        if (m2 && m2->mops_together > 0) {
            snprintf(what, sizeof what, "... vs mutex_breaker");
            target_row(f, what, c2->mops_together / m2->mops_together, lo_mutex, false);
        }
    }
}

void print_targets(FILE *f)
{
    char what[200];
    const result *cs1 = find_result("closed_success", V_CIRCUIT, 64, 1, 1);
    const result *cs2 = find_result("closed_success", V_CIRCUIT, 64, 1, 2);
    const result *ms2 = find_result("closed_success", V_MUTEX, 64, 1, 2);
    const result *pc2 = find_result("proxy_cycle", V_CIRCUIT, 64, 1, 2);
    const result *pm2 = find_result("proxy_cycle", V_MUTEX, 64, 1, 2);
    const result *pn1 = find_result("proxy_cycle", V_NONE, 64, 1, 1);
    const result *pn2 = find_result("proxy_cycle", V_NONE, 64, 1, 2);
    char model[128] = "?";
    read_line("/proc/cpuinfo", "model name", model, sizeof model);
    fprintf(f, "\n## Targets (informational: ratios of medians of this one run and binary, "
               "not pass/fail; rows whose figures were not measured in this run are left "
               "out; cpu: %s, %d CPUs)\n\n", model, n_cpus);
    fprintf(f, "| target | measured | bound | status |\n|---|--:|--:|---|\n");
    static const char *const tight[] = {"closed_mixed_1pct", "closed_mixed_0.1pct"};
    for (int i = 0; i < 2; i++)
        for (int w = 64; w <= 1024; w *= 16)
            scaling_rows(f, tight[i], w, 1.8, 4.0);
    for (int w = 64; w <= 1024; w *= 16)
        scaling_rows(f, "closed_mixed_10pct", w, 1.0, 1.5);
    scaling_rows(f, "closed_success", 64, 1.8, 4.0);
    if (cs2) {
        if (cs1 && cs1->p999_ns > 0)
            target_row(f, "closed_success window 64, 2 threads: p99.9 / its own 1-thread p99.9",
                       cs2->p999_ns / cs1->p999_ns, 3.0, true);
        if (ms2 && ms2->p999_ns > 0)
            target_row(f, "closed_success window 64, 2 threads: p99.9 / mutex_breaker's",
                       cs2->p999_ns / ms2->p999_ns, 0.1, true);
        target_row(f, "closed_success window 64, 2 threads: fairness", cs2->fairness, 0.8, false);
    }
    ratio_row(f, "closed_success window 64, 1 thread: ns/op / atomic_floor's", cs1,
              find_result("atomic_floor", V_BASELINE, 0, 0, 1), false, 3.0, true);
    const result *pn[2] = {pn1, pn2};
    for (int i = 0; i < 2; i++) {
        if (pn[i] == NULL || work_asked_ns <= 0)
            continue;
        snprintf(what, sizeof what, "proxy_cycle no_breaker %d thread(s): |ns/op / work asked "
                 "(%" PRId64 " ns) - 1|", i + 1, work_asked_ns);
        double e = pn[i]->ns_med / (double)work_asked_ns - 1;
        target_row(f, what, e < 0 ? -e : e, 0.05, true);
        /* the op's own time, which other processes' load moves less than
         * ns/op; information only: it leaves out the loop's per-op cost,
         * which the work is calibrated to include (runner.c) */
        e = (pn[i]->p50_ns - tick_overhead_ns) / (double)work_asked_ns - 1;
        fprintf(f, "| ... the op's own time (p50 of a timed op minus the empty timed pair: "
                   "%.0f ns): %+.3f | - | - | information: the loop's own per-op cost is "
                   "outside it |\n",
                pn[i]->p50_ns - tick_overhead_ns, e);
    }
    if (pc2) {
        target_row(f, "proxy_cycle 2 threads: overhead over no_breaker", pc2->overhead, 0.03,
                   true);
        if (pm2 && pm2->overhead > 0)
            target_row(f, "proxy_cycle 2 threads: overhead / mutex_breaker's",
                       pc2->overhead / pm2->overhead, 0.5, true);
        if (pn2 && pn2->mops_together > 0 && pc2->mops_together > 0)
            target_row(f, "... overhead while all threads ran (no_breaker Mops/s / circuit's - 1)",
                       pn2->mops_together / pc2->mops_together - 1, 0.03, true);
    }
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
        fprintf(stderr, "bench: %s: %s\n", path, strerror(errno));
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
        if (r->c->loop == LOOP_PROXY) {
            const result *nb = find_result(r->c->name, V_NONE, r->c->window, r->c->probes,
                                           r->threads);
            fprintf(f, ",\"work_ns\":%" PRId64, work_asked_ns);
            if (nb)
                fprintf(f, ",\"work_measured_ns\":%.6g", nb->ns_med);
        }
        if (case_family(r->c))
            fprintf(f, ",\"failure_fraction\":%.6g", case_failure_fraction(r->c));
        if (r->cpu_ns_med > 0)
            fprintf(f, ",\"cpu_ns_per_op\":%.6g,\"cpu_share\":%.4g", r->cpu_ns_med, r->cpu_share);
        if (r->mops_together > 0)
            fprintf(f, ",\"mops_together\":%.6g,\"together_share\":%.4g", r->mops_together,
                    r->together_share);
        fprintf(f, "}\n");
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "bench: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}
