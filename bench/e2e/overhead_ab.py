#!/usr/bin/env python3
"""overhead_ab: what circuit.so costs Traffic Server, as an A/B inside one run.

SPDX-License-Identifier: MIT

One nginx origin, ONE Traffic Server (traffic_manager + traffic_server, 2
event threads, the plugin loaded by plugin.config throughout), one remap
rule. The rule alternates between two forms by `traffic_ctl config reload`:

  on    map http://ab/ http://127.0.0.1:PORT/ @plugin=circuit.so ...  (the
        README's rule: failure-rate:0.5:20, window=40, open-for=5s, and the
        default timeout=5s, so every request gets its origin deadlines)
  off   map http://ab/ http://127.0.0.1:PORT/                          (no plugin)

in the order on, off, off, on, on, off, ... (--pairs pairs, at least 5), so
that neither arm always comes first. After each reload it waits for Traffic
Server's "remap.config finished loading" and --settle-s more, then runs wrk
(same threads, connections and duration every round; Host: ab) for
--round-s seconds and reads traffic_server's CPU time (utime + stime, all
its threads, /proc/PID/stat) before and after. Per round: requests/s, p99
(wrk --latency) and CPU time per request; per pair: the ratios on/off. The
report gives each ratio's median and spread (min, max, interquartile range)
over the pairs: the medians are the plugin's cost, the spread what the
machine's other load does to one round.

Traffic Server runs with the package's origin timeouts and retries
(Debian: 3 connect retries), as an operator's does, so the on arm pays the
plugin's whole per-request work: allow, the deadlines and the retry
override, two transaction hooks, the settle. --test-retries 0 runs it with
the tests' settings instead (no retry override to write).

Processes come from tests/trafficserver/ats_harness.py and are stopped by
the pid it started. Timing is reported, never asserted: exit 0 unless the
run failed (1) or a tool is missing (77).

On a machine shared with other work a round's figures move by tens of per
cent; many short pairs and the median of their ratios (with its bootstrap
interval) are what can be read, and the least CPU time per request of
each arm (the least disturbed round) is given too.

usage: overhead_ab.py --plugin circuit.so --out DIR [--pairs 20] [--round-s 3]
"""

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def cpu_ticks(pid):
    """utime + stime of process pid (all its threads), clock ticks."""
    st = Path(f"/proc/{pid}/stat").read_text()
    f = st[st.rfind(")") + 2:].split()
    return int(f[11]) + int(f[12])   # fields 14 and 15 of proc(5)


def wrk_run(port, a, out):
    cmd = ["wrk", f"-t{a.wrk_threads}", f"-c{a.connections}", f"-d{a.round_s}s", "--latency",
           "-H", "Host: ab", f"http://127.0.0.1:{port}/"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.round_s + 60)
    Path(out).write_text(r.stdout + r.stderr)
    m = re.search(r"(\d+) requests in", r.stdout)
    p99 = re.search(r"^\s+99%\s+([\d.]+)(us|ms|s)\b", r.stdout, re.M)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", r.stdout)
    if not m or not p99:
        raise RuntimeError("cannot read wrk's output: " + r.stdout + r.stderr)
    scale = {"us": 1e-3, "ms": 1.0, "s": 1e3}[p99.group(2)]
    return int(m.group(1)), float(p99.group(1)) * scale, int(non2xx.group(1)) if non2xx else 0


def profile(ts, line, a, out, arm):
    """One round on `line` under `perf record -e cpu-clock` (a software
    clock: no hardware counters needed) on traffic_server: the shares of its
    CPU time in circuit.so and in Traffic Server's plugin-API code
    (e2e_report.py's api_share). None when perf is missing or refused."""
    sys.path.insert(0, str(HERE))
    import e2e_report   # noqa: E402
    if shutil.which("perf") is None:
        return None
    reload_and_wait(ts, line)
    data = out / f"perf-{arm}.data"
    secs = 2 * a.round_s
    w = subprocess.Popen(["wrk", f"-t{a.wrk_threads}", f"-c{a.connections}", f"-d{secs + 2}s",
                          "-H", "Host: ab", f"http://127.0.0.1:{ts.port}/"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1)
        r = subprocess.run(["perf", "record", "-e", "cpu-clock", "-F", "4000", "-p",
                            str(ts.server_pid), "-o", str(data), "--", "sleep", str(secs)],
                           capture_output=True, text=True, timeout=secs + 60)
        if r.returncode != 0:
            print("perf record failed: " + r.stderr.strip()[-300:])
            return None
        r = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "--sort",
                            "dso,sym", "--stdio", "-g", "none", "--percent-limit", "0.01"],
                           capture_output=True, text=True, timeout=120)
        (out / f"perf-{arm}.txt").write_text(r.stdout)
    finally:
        if w.poll() is None:
            w.kill()
        w.wait()
        data.unlink(missing_ok=True)
    samples, rows = e2e_report.parse_perf(r.stdout)
    return {"samples": samples,
            "circuit_so_pct": round(sum(p for p, dso, _ in rows if dso == "circuit.so"), 2),
            "plugin_api_pct": round(e2e_report.api_share(rows), 2)}


def reload_and_wait(ts, line):
    loads = ts.diags().count("remap.config finished loading")
    ts.reload([line])
    deadline = time.monotonic() + 30
    while ts.diags().count("remap.config finished loading") <= loads:
        if time.monotonic() > deadline:
            raise RuntimeError("the reload was not applied")
        time.sleep(0.1)


def spread(xs, seed=1):
    """Median, min, max, quartiles, and a 95 % bootstrap interval of the
    median (2000 resamples, fixed seed: the same data gives the same
    interval)."""
    xs = sorted(xs)
    q = statistics.quantiles(xs, n=4) if len(xs) >= 2 else [xs[0]] * 3
    rnd = random.Random(seed)
    meds = sorted(statistics.median(rnd.choices(xs, k=len(xs))) for _ in range(2000))
    return {"median": statistics.median(xs), "min": xs[0], "max": xs[-1],
            "q1": q[0], "q3": q[2], "ci95": [meds[50], meds[1949]], "n": len(xs)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--harness", default=str(HERE.parent.parent / "tests" / "trafficserver"))
    ap.add_argument("--pairs", type=int, default=20, help="on/off pairs, at least 5")
    ap.add_argument("--round-s", type=int, default=3)
    ap.add_argument("--settle-s", type=float, default=1.0)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--wrk-threads", type=int, default=1)
    ap.add_argument("--ts-threads", type=int, default=2)
    ap.add_argument("--no-profile", action="store_true",
                    help="no perf profile round per arm after the A/B rounds")
    ap.add_argument("--test-retries", action="store_true",
                    help="the tests' origin settings (no connect retry) instead of the package's")
    a = ap.parse_args()
    if a.pairs < 5:
        ap.error("--pairs must be at least 5")
    missing = [t for t in ("traffic_server", "traffic_manager", "traffic_ctl", "nginx", "wrk")
               if shutil.which(t) is None]
    if missing:
        print("SKIP: not installed: " + " ".join(missing))
        return 1 if os.environ.get("CI") == "true" else 77
    sys.path.insert(0, a.harness)
    from ats_harness import Nginx, TrafficServer   # noqa: E402

    plugin = str(Path(a.plugin).resolve())
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    shutil.rmtree(work, ignore_errors=True)
    readme = (HERE.parent.parent / "README.md").read_text()
    m = re.search(r"^map http://shop\.example/ \S+ @plugin=circuit\.so (.*)$", readme, re.M)
    params = m.group(1).replace("name=shop", "name=ab")
    rounds = []
    with Nginx(work / "nginx") as origin:
        on = f"map http://ab/ http://127.0.0.1:{origin.port}/ @plugin={plugin} " + \
             params.replace("@plugin=circuit.so ", "")
        off = f"map http://ab/ http://127.0.0.1:{origin.port}/"
        ts = TrafficServer(work / "ats", remap=[off], plugins=[plugin], manager=True,
                           threads=a.ts_threads, packaged_timeouts=not a.test_retries,
                           records=["CONFIG proxy.config.http.keep_alive_no_activity_timeout_out INT 120"])
        with ts:
            pid = ts.server_pid
            hz = os.sysconf("SC_CLK_TCK")
            # warm up: both forms once, untimed
            for line in (on, off):
                reload_and_wait(ts, line)
                wrk_run(ts.port, argparse.Namespace(**{**vars(a), "round_s": 2}),
                        out / "warmup.txt")
            for i in range(2 * a.pairs):
                arm = ("on", "off", "off", "on")[i % 4]
                reload_and_wait(ts, on if arm == "on" else off)
                time.sleep(a.settle_s)
                c0, t0 = cpu_ticks(pid), time.monotonic()
                n, p99, bad = wrk_run(ts.port, a, out / f"wrk-{i + 1:02d}-{arm}.txt")
                c1, t1 = cpu_ticks(pid), time.monotonic()
                r = {"round": i + 1, "arm": arm, "requests": n, "seconds": t1 - t0,
                     "rps": n / (t1 - t0), "p99_ms": p99, "non2xx": bad,
                     "cpu_s": (c1 - c0) / hz, "cpu_us_per_req": 1e6 * (c1 - c0) / hz / max(n, 1)}
                rounds.append(r)
                print("round %2d %-3s %7d req  %8.0f req/s  p99 %6.2f ms  CPU %.2f s  %.2f us/req"
                      % (r["round"], arm, n, r["rps"], p99, r["cpu_s"], r["cpu_us_per_req"]),
                      flush=True)
            prof = None if a.no_profile else {arm: profile(ts, line, a, out, arm)
                                              for arm, line in (("on", on), ("off", off))}
    pairs = []
    for k in range(a.pairs):
        x, y = rounds[2 * k], rounds[2 * k + 1]
        o, f = (x, y) if x["arm"] == "on" else (y, x)
        pairs.append({"cpu": o["cpu_us_per_req"] / f["cpu_us_per_req"],
                      "rps": o["rps"] / f["rps"], "p99": o["p99_ms"] / f["p99_ms"]})
    summary = {k: spread([p[k] for p in pairs]) for k in ("cpu", "rps", "p99")}
    per_arm = {arm: {k: statistics.median(r[k] for r in rounds if r["arm"] == arm)
                     for k in ("rps", "p99_ms", "cpu_us_per_req")} for arm in ("on", "off")}
    cpu_model = next((l.split(":", 1)[1].strip() for l in
                      Path("/proc/cpuinfo").read_text().splitlines()
                      if l.startswith("model name")), "?")
    res = {"cpu": cpu_model, "cpus": os.cpu_count(),
           "traffic_server": subprocess.run(["traffic_server", "--version"], capture_output=True,
                                            text=True).stdout.strip().splitlines()[0],
           "rule_on": on.replace(plugin, "circuit.so"), "rule_off": off,
           "origin_settings": "tests (no retry)" if a.test_retries else "package (3 retries)",
           "pairs": a.pairs, "round_s": a.round_s, "connections": a.connections,
           "wrk_threads": a.wrk_threads, "ts_threads": a.ts_threads, "rounds": rounds,
           "ratios_per_pair": pairs, "ratios": summary, "medians_per_arm": per_arm,
           "profile": prof}
    (out / "overhead_ab.json").write_text(json.dumps(res, indent=1) + "\n")
    lines = [
        "# circuit.so overhead, A/B in one run",
        "",
        "%s (%d CPUs), %s; Traffic Server %d event threads, origin settings: %s; wrk -t%d -c%d, "
        "%d s rounds, %d on/off pairs alternated by `traffic_ctl config reload` (on, off, off, "
        "on, ...)." % (cpu_model, os.cpu_count(), res["traffic_server"], a.ts_threads,
                       res["origin_settings"], a.wrk_threads, a.connections, a.round_s, a.pairs),
        "",
        "on: `%s`" % res["rule_on"],
        "",
        "| ratio on/off, per pair | median | 95 % interval of the median | min | max | IQR |",
        "| --- | --: | --: | --: | --: | --: |",
    ]
    for k, what in (("cpu", "traffic_server CPU time per request"), ("rps", "requests/s"),
                    ("p99", "p99 latency")):
        s = summary[k]
        lines.append("| %s | %.3f | %.3f-%.3f | %.3f | %.3f | %.3f-%.3f |"
                     % (what, s["median"], s["ci95"][0], s["ci95"][1], s["min"], s["max"],
                        s["q1"], s["q3"]))
    least = {arm: min(r["cpu_us_per_req"] for r in rounds if r["arm"] == arm)
             for arm in ("on", "off")}
    res["least_cpu_us_per_req"] = least
    (out / "overhead_ab.json").write_text(json.dumps(res, indent=1) + "\n")
    lines += ["", "Least CPU time per request of any round (the least disturbed): on %.2f us, "
              "off %.2f us, ratio %.3f." % (least["on"], least["off"], least["on"] / least["off"])]
    c = summary["cpu"]
    lines += ["", "Target, CPU per request with the plugin at most 3 %% above without: %s "
              "(the 95 %% interval of the median, %.3f-%.3f, %s). The interval is as wide as "
              "the rounds' spread lets it be; on a machine shared with other work it "
              "understates the noise (the rounds share its drifting load), so rerun on a "
              "quiet machine with more pairs before reading a few per cent from it."
              % ("shown" if c["ci95"][1] <= 1.03 else "not shown",
                 c["ci95"][0], c["ci95"][1],
                 "at or below 1.03" if c["ci95"][1] <= 1.03 else
                 "above 1.03 throughout" if c["ci95"][0] > 1.03 else "includes 1.03")]
    if prof and prof.get("on") and prof.get("off"):
        pon, poff = prof["on"], prof["off"]
        lines += ["", "Profile (`perf record -e cpu-clock`, one round of %d s per arm, %s / %s "
                  "samples): traffic_server's CPU time in circuit.so %.2f %%; in Traffic "
                  "Server's plugin-API code (hook dispatch, transaction arguments, TS* calls, "
                  "malloc/free) %.2f %% with the plugin, %.2f %% without: a **lower bound** "
                  "of %.2f %% of traffic_server's CPU time (a CPU-per-request ratio of at "
                  "least %.3f). It counts only those symbols; it misses what the plugin makes "
                  "Traffic Server do elsewhere (the copy of the transaction's overridable "
                  "configuration that TSHttpTxnConfigIntSet triggers, memcpy, cache effects)."
                  % (2 * a.round_s, pon["samples"], poff["samples"], pon["circuit_so_pct"],
                     pon["plugin_api_pct"], poff["plugin_api_pct"],
                     pon["circuit_so_pct"] + pon["plugin_api_pct"] - poff["plugin_api_pct"],
                     1 / (1 - (pon["circuit_so_pct"] + pon["plugin_api_pct"]
                               - poff["plugin_api_pct"]) / 100))]
    lines += ["", "| arm (median of rounds) | requests/s | p99 ms | CPU us/request |",
              "| --- | --: | --: | --: |"]
    for arm in ("on", "off"):
        m_ = per_arm[arm]
        lines.append("| %s | %.0f | %.2f | %.2f |" % (arm, m_["rps"], m_["p99_ms"],
                                                   m_["cpu_us_per_req"]))
    lines += ["", "| round | arm | requests | requests/s | p99 ms | CPU s | CPU us/request |",
              "| --: | --- | --: | --: | --: | --: | --: |"]
    for r in rounds:
        lines.append("| %d | %s | %d | %.0f | %.2f | %.2f | %.2f |"
                     % (r["round"], r["arm"], r["requests"], r["rps"], r["p99_ms"], r["cpu_s"],
                        r["cpu_us_per_req"]))
    (out / "overhead_ab.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    if any(r["non2xx"] for r in rounds):
        print("note: some rounds had non-2xx responses: %r"
              % [(r["round"], r["non2xx"]) for r in rounds if r["non2xx"]])
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
