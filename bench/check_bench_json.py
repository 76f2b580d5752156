#!/usr/bin/env python3
"""Check the --json output of the timed benchmarks (the bench-smoke tests).

usage: check_bench_json.py [--bench PROG [--case NAME]] [--no-require] FILE

With --bench, first runs `PROG --quick --case NAME --json FILE` (PROG: one
of bench_scale, bench_closed_mixed, ...; NAME: closed_success by default; a
comma list, and "closed_mixed" names the family) and fails if it exits
non-zero. Then every line of FILE must be one JSON object, of one of three
kinds (memory and create_free: bench_memory's):

  a figure   case, variant: non-empty strings; variant one of circuit,
             mutex_breaker, no_breaker, baseline; threads, reps: integers
             >= 1; window, probes: integers >= 0; ns_per_op, mops, min_ns,
             max_ns: numbers > 0 with min_ns <= ns_per_op <= max_ns;
             fairness in [0, 1]; scaling > 0, present exactly when the file
             holds the 1-thread figure of the same case, variant, window and
             probes; p50_ns <= p99_ns <= p999_ns, all > 0, required for
             circuit, mutex_breaker and no_breaker; overhead (a number) and
             transitions_per_s (>= 0) when present.
             closed_mixed_<F>pct (F: 0.01, 0.1, 1, 10, ...): failure_fraction
             required and equal to F / 100. proxy_cycle: work_ns (integer
             >= 0) required, work_measured_ns (> 0) when present.
             cpu_ns_per_op (>= 0) and cpu_share (in [0, 1.5]: CPU time
             clocks are coarse), mops_together (>= 0) and together_share
             (in [0, 1]) when present.
  memory     case "memory": variant circuit or mutex_breaker; window, probes,
             cpus: integers >= 1; bytes, heap_bytes: integers > 0;
             per_cpu_bytes, heap_blocks: integers >= 0; not_freed_bytes: 0.
  create_free  case "create_free": variant circuit or mutex_breaker; memory
             cold or warm; window,
             probes, breakers, cpus: integers >= 1; create_ns, free_ns:
             numbers > 0; heap_bytes: integer > 0; not_freed_bytes: 0.

Unless --no-require, FILE must hold figures of each case NAME for circuit
and mutex_breaker, and of each baseline NAME (atomic_floor, clock, empty).
How fast is never pass or fail here. Exit 0 when FILE is good, 1 otherwise
(each problem printed).
"""

import argparse
import json
import math
import re
import subprocess
import sys

VARIANTS = {"circuit", "mutex_breaker", "no_breaker", "baseline"}
MIXED = re.compile(r"closed_mixed_([0-9]+(?:\.[0-9]+)?)pct")
SAMPLED = {"circuit", "mutex_breaker", "no_breaker"}


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v):
    return is_int(v) or (isinstance(v, float) and math.isfinite(v))


def check_figure(o, problems):
    for k in ("case", "variant"):
        if not isinstance(o.get(k), str) or not o[k]:
            problems.append(f"'{k}' missing, not a string or empty")
    if o.get("variant") not in VARIANTS:
        problems.append(f"variant {o.get('variant')!r} is not one of {sorted(VARIANTS)}")
    for k, low in (("threads", 1), ("reps", 1), ("window", 0), ("probes", 0)):
        if not is_int(o.get(k)) or o[k] < low:
            problems.append(f"'{k}' = {o.get(k)!r} is not an integer >= {low}")
    for k in ("ns_per_op", "mops", "min_ns", "max_ns"):
        if not is_num(o.get(k)) or o[k] <= 0:
            problems.append(f"'{k}' = {o.get(k)!r} is not a number > 0")
    if not problems and not o["min_ns"] <= o["ns_per_op"] <= o["max_ns"]:
        problems.append("not min_ns <= ns_per_op <= max_ns")
    f = o.get("fairness")
    if not is_num(f) or not 0 <= f <= 1:
        problems.append(f"'fairness' = {f!r} is not in [0, 1]")
    if "scaling" in o and (not is_num(o["scaling"]) or o["scaling"] <= 0):
        problems.append(f"'scaling' = {o['scaling']!r} is not a number > 0")
    pct = [o.get(k) for k in ("p50_ns", "p99_ns", "p999_ns")]
    if o.get("variant") in SAMPLED or any(p is not None for p in pct):
        if not all(is_num(p) and p > 0 for p in pct):
            problems.append(f"p50_ns, p99_ns, p999_ns = {pct} are not all numbers > 0")
        elif not pct[0] <= pct[1] <= pct[2]:
            problems.append("not p50_ns <= p99_ns <= p999_ns")
    if "overhead" in o and not is_num(o["overhead"]):
        problems.append(f"'overhead' = {o['overhead']!r} is not a number")
    t = o.get("transitions_per_s", 0)
    if not is_num(t) or t < 0:
        problems.append(f"'transitions_per_s' = {t!r} is not a number >= 0")
    if "cpu_ns_per_op" in o and (not is_num(o["cpu_ns_per_op"]) or o["cpu_ns_per_op"] < 0):
        problems.append(f"'cpu_ns_per_op' = {o['cpu_ns_per_op']!r} is not a number >= 0")
    if "cpu_share" in o and (not is_num(o["cpu_share"]) or not 0 <= o["cpu_share"] <= 1.5):
        problems.append(f"'cpu_share' = {o['cpu_share']!r} is not in [0, 1.5]")
    for k, hi in (("mops_together", math.inf), ("together_share", 1.01)):
        if k in o and (not is_num(o[k]) or not 0 <= o[k] <= hi):
            problems.append(f"'{k}' = {o[k]!r} is not in [0, {hi}]")
    m = MIXED.fullmatch(str(o.get("case", "")))
    ff = o.get("failure_fraction")
    if m:
        want = float(m.group(1)) / 100
        if not is_num(ff) or not math.isclose(ff, want, rel_tol=1e-4):
            problems.append(f"'failure_fraction' = {ff!r}: {o['case']} needs {want!r}")
    elif ff is not None:
        problems.append(f"'failure_fraction' = {ff!r} on a case that is not closed_mixed_*")
    if o.get("case") == "proxy_cycle":
        if not is_int(o.get("work_ns")) or o["work_ns"] < 0:
            problems.append(f"'work_ns' = {o.get('work_ns')!r} is not an integer >= 0")
        if "work_measured_ns" in o and (not is_num(o["work_measured_ns"])
                                        or o["work_measured_ns"] <= 0):
            problems.append(f"'work_measured_ns' = {o['work_measured_ns']!r} is not a number > 0")


def check_memory(o, problems):
    if o.get("variant") not in ("circuit", "mutex_breaker"):
        problems.append(f"memory variant {o.get('variant')!r} is not circuit or mutex_breaker")
    for k, low in (("window", 1), ("probes", 1), ("cpus", 1), ("bytes", 1), ("heap_bytes", 1),
                   ("per_cpu_bytes", 0), ("heap_blocks", 0)):
        if not is_int(o.get(k)) or o[k] < low:
            problems.append(f"'{k}' = {o.get(k)!r} is not an integer >= {low}")
    if o.get("not_freed_bytes") != 0:
        problems.append(f"'not_freed_bytes' = {o.get('not_freed_bytes')!r}: free left bytes")


def check_create_free(o, problems):
    if o.get("variant") not in ("circuit", "mutex_breaker"):
        problems.append(f"create_free variant {o.get('variant')!r} is not circuit or mutex_breaker")
    if o.get("memory") not in ("cold", "warm"):
        problems.append(f"create_free memory {o.get('memory')!r} is not cold or warm")
    for k in ("window", "probes", "breakers", "cpus", "heap_bytes"):
        if not is_int(o.get(k)) or o[k] < 1:
            problems.append(f"'{k}' = {o.get(k)!r} is not an integer >= 1")
    for k in ("create_ns", "free_ns"):
        if not is_num(o.get(k)) or o[k] <= 0:
            problems.append(f"'{k}' = {o.get(k)!r} is not a number > 0")
    if o.get("not_freed_bytes") != 0:
        problems.append(f"'not_freed_bytes' = {o.get('not_freed_bytes')!r}: free left bytes")


def named(case_list, name):
    """The figure's case is one of the comma list (closed_mixed: the family)."""
    for c in case_list.split(","):
        if name == c or (c == "closed_mixed" and MIXED.fullmatch(name or "")):
            return True
    return False


BASELINES = ("atomic_floor", "clock", "empty")


def check_file(path, case, require):
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        return [f"{path}: {e}"]
    errors, figures = [], []
    for n, line in enumerate(lines, 1):
        problems = []
        try:
            o = json.loads(line)
        except json.JSONDecodeError as e:
            problems.append(f"not JSON: {e}")
            o = None
        if o is not None and not isinstance(o, dict):
            problems.append("not a JSON object")
        elif o is not None:
            if o.get("case") == "memory":
                check_memory(o, problems)
            elif o.get("case") == "create_free":
                check_create_free(o, problems)
            else:
                check_figure(o, problems)
                figures.append(o)
        errors += [f"{path}:{n}: {p}\n  {line}" for p in problems]
    if not lines:
        errors.append(f"{path}: holds no figure")

    def key(o):
        return (o.get("case"), o.get("variant"), o.get("window"), o.get("probes"))

    one_thread = {key(o) for o in figures if o.get("threads") == 1}
    for o in figures:
        if (key(o) in one_thread) != ("scaling" in o):
            errors.append(f"{path}: {key(o)} at {o.get('threads')} threads: 'scaling' must be "
                          "present exactly when the 1-thread figure is")
    if require:
        seen = {(o.get("case"), o.get("variant")) for o in figures}
        for c in case.split(","):
            for v in (("baseline",) if c in BASELINES else ("circuit", "mutex_breaker")):
                if not any(named(c, n) and sv == v for n, sv in seen):
                    errors.append(f"{path}: no figure for {c}/{v}")
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", help="run this timed benchmark program first")
    ap.add_argument("--case", default="closed_success")
    ap.add_argument("--no-require", action="store_true")
    ap.add_argument("json")
    a = ap.parse_args()
    if a.bench:
        rc = subprocess.run([a.bench, "--quick", "--case", a.case, "--json", a.json]).returncode
        if rc != 0:
            print(f"check_bench_json: {a.bench} exited with {rc}", file=sys.stderr)
            return 1
    errors = check_file(a.json, a.case, not a.no_require)
    for e in errors:
        print(f"check_bench_json: {e}", file=sys.stderr)
    if errors:
        return 1
    print(f"check_bench_json: {a.json} is well-formed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
