#!/usr/bin/env python3
# e2e_report.py: the report of the end-to-end scenario (bench/e2e).
#
# SPDX-License-Identifier: MIT
#
# circuit-e2e (the shell script) runs nginx, circuit-proxy and wrk through the
# phases and leaves the raw data of each run in OUT/run-on and OUT/run-off:
#
#   stats.jsonl     the proxy's JSON lines, written at exit: a summary (with
#                   the breaker's circuit_get_stats), per-interval counters,
#                   the transitions its observe callback logged, and one mark
#                   per phase boundary (cumulative counters and stats)
#   served.txt      nginx's access-log line count at each mark
#   wrk-ID.txt      wrk's output for phase ID
#   probe-ID.txt    one reply the script fetched itself during phase ID
#   admin-ID.txt    the admin port's reply to the operator call of phase ID
#                   (a JSON snapshot of the counters taken right after it)
#   served-ID.txt   nginx's access-log line count at that call (after the
#                   isolate call, before the reset call)
#   metrics.txt     GET /metrics on the admin port, scraped after the last phase
#
# This script turns them into OUT/report.md (Markdown), OUT/e2e.json and the
# plot (OUT/e2e.png and OUT/e2e.svg, drawn by gnuplot from data written
# here), and checks the outcomes. Standard library only.
#
# Exit status: 0, 1 when --check is given and a check failed (or a run is
# missing), 2 on bad input.

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys

PROG = "e2e_report"

# Every phase the script may run, in order: its title and its role.
#   healthy   nginx answers 200
#   outage    nginx is broken (the breaker should open)
#   isolate   healthy nginx; the operator isolates the breaker at its start
#   reset     healthy nginx; the operator resets the breaker at its start
PHASES = {
    "healthy": ("healthy", "healthy"),
    "http503": ("upstream 503", "outage"),
    "down": ("upstream down", "outage"),
    "hung": ("upstream hung", "outage"),
    "back": ("upstream back", "healthy"),
    "final": ("healthy (final)", "healthy"),
    "isolated": ("isolated by the operator", "isolate"),
    "reset": ("reset by the operator", "reset"),
}

KINDS = ["ok", "http_error", "conn_error", "timeout", "rejected", "cancelled",
         "local_error", "upstream"]

# Totals of circuit_stats, in the order the report lists them.
TOTALS = ["admitted", "rejected", "successes", "failures", "ignored", "late",
          "released", "timed_out", "transitions"]


class InputError(Exception):
    pass


# ------------------------------------------------------------------ parsers --

def wrk_ms(text):
    """A wrk duration ("772.00us", "3.36ms", "1.02s", "1.50m") in ms."""
    m = re.fullmatch(r"([0-9.]+)(us|ms|s|m)", text)
    if not m:
        return None
    scale = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}[m.group(2)]
    return float(m.group(1)) * scale


def parse_wrk(text):
    """wrk --latency output -> requests, rps, p50_ms, p99_ms, non2xx,
    socket_errors (None where wrk printed nothing)."""
    r = {"requests": None, "rps": None, "p50_ms": None, "p99_ms": None,
         "non2xx": 0, "socket_errors": 0}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 2 and f[0] == "50%":
            r["p50_ms"] = wrk_ms(f[1])
        elif len(f) >= 2 and f[0] == "99%":
            r["p99_ms"] = wrk_ms(f[1])
        elif " requests in " in line:
            r["requests"] = int(f[0])
        elif line.startswith("Requests/sec:"):
            r["rps"] = float(f[1])
        elif "Non-2xx or 3xx responses:" in line:
            r["non2xx"] = int(f[-1])
        elif line.strip().startswith("Socket errors:"):
            # Socket errors: connect 0, read 0, write 0, timeout 0
            r["socket_errors"] = sum(int(n) for n in re.findall(r"\d+", line))
    return r


def parse_http(text):
    """A raw HTTP reply (CRs stripped) -> status, headers (lower-case names),
    body. None for an empty text."""
    if not text.strip():
        return None
    head, _, body = text.partition("\n\n")
    lines = head.splitlines()
    status = None
    parts = lines[0].split() if lines else []
    if len(parts) >= 2 and parts[0].startswith("HTTP/") and parts[1].isdigit():
        status = int(parts[1])
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return {"status": status, "headers": headers, "body": body.strip()}


_PROM_SAMPLE = re.compile(
    r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)(?:\s+-?\d+)?$")
_PROM_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text):
    """Prometheus text format -> list of (name, {label: value}, float);
    comment lines are skipped. Raises InputError on a line it cannot read."""
    samples = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        m = _PROM_SAMPLE.match(line)
        if not m:
            raise InputError(f"metrics line {n} is not a sample: {line!r}")
        labels = dict(_PROM_LABEL.findall(m.group(2) or ""))
        try:
            value = float(m.group(3))
        except ValueError:
            raise InputError(f"metrics line {n}: bad value {m.group(3)!r}") from None
        samples.append((m.group(1), labels, value))
    return samples


def read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def read_jsonl(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise InputError(f"{path}:{n}: {e}") from None
    return out


# ----------------------------------------------------------------- one run --

def load_run(rdir, run):
    """The raw data of one run -> a dict the report and the checks read."""
    lines = read_jsonl(os.path.join(rdir, "stats.jsonl"))
    summary = next((x for x in lines if x["type"] == "summary"), None)
    marks = [x for x in lines if x["type"] == "mark"]
    trans = [x for x in lines if x["type"] == "transition"]
    buckets = [x for x in lines if x["type"] == "bucket"]
    if summary is None or len(marks) < 2 or marks[-1]["phase"] != "end":
        raise InputError(f"{rdir}/stats.jsonl: no summary, or no 'end' mark")
    served = [int(x) for x in read_text(os.path.join(rdir, "served.txt")).split()]
    if len(served) != len(marks):
        raise InputError(f"{rdir}/served.txt: {len(served)} counts for {len(marks)} marks")

    t0 = marks[0]["t_ms"] / 1e3
    mt = [m["t_ms"] / 1e3 for m in marks]
    phases = []
    for i, m in enumerate(marks[:-1]):
        pid = m["phase"]
        if pid not in PHASES:
            raise InputError(f"{rdir}: unknown phase {pid!r}")
        title, role = PHASES[pid]
        nxt = marks[i + 1]
        p = {"id": pid, "title": title, "role": role, "outage": role == "outage",
             "start_s": mt[i] - t0, "duration_s": mt[i + 1] - mt[i],
             "served_by_upstream": served[i + 1] - served[i],
             "state_at_start": m["state"], "state_at_end": nxt["state"]}
        for k in KINDS:
            p[k] = nxt[k] - m[k]
        if m.get("breaker") and nxt.get("breaker"):
            p["breaker_delta"] = {k: nxt["breaker"][k] - m["breaker"][k] for k in TOTALS}
        else:
            p["breaker_delta"] = None
        p["wrk"] = parse_wrk(read_text(os.path.join(rdir, f"wrk-{pid}.txt")))
        p["probe"] = parse_http(read_text(os.path.join(rdir, f"probe-{pid}.txt")))
        p["admin"] = parse_http(read_text(os.path.join(rdir, f"admin-{pid}.txt")))
        p["operator"] = None
        if p["admin"] is not None and p["admin"]["body"].startswith("{"):
            try:
                p["operator"] = json.loads(p["admin"]["body"])
            except json.JSONDecodeError as e:
                raise InputError(f"{rdir}/admin-{pid}.txt: {e}") from None
        served_op = read_text(os.path.join(rdir, f"served-{pid}.txt")).split()
        p["served_at_operator"] = int(served_op[0]) if served_op else None
        p["end_mark"] = nxt
        phases.append(p)

    def phase_of(t):
        i = 0
        while i + 1 < len(phases) and mt[i + 1] <= t:
            i += 1
        return i

    transitions = []
    for x in trans:
        t = x["t_ms"] / 1e3
        i = phase_of(t)
        transitions.append({
            "phase": phases[i]["id"] if t >= mt[0] else "before",
            "t_phase_s": t - mt[i], "t_s": t - t0,
            "from": x["from"], "to": x["to"], "generation": x["generation"],
            "cause": x.get("cause"),
            "open_for_s": (x["open_for_ms"] / 1e3) if x.get("to") == "open" else None})
    for p in phases:
        p["opened"] = sum(1 for x in transitions if x["phase"] == p["id"] and x["to"] == "open")

    bucket_s = summary["bucket_ms"] / 1e3
    rates = []
    for b in buckets:
        bt = b["t_ms"] / 1e3
        if bt + bucket_s <= t0 or bt >= mt[-1]:
            continue
        rates.append([bt + bucket_s / 2 - t0] + [b[k] / bucket_s for k in KINDS])

    bands = []  # (start s, end s, state, open period s or None)
    if marks[0]["state"] != "off":
        state, start, period = "closed", 0.0, None
        for x in transitions:
            if x["t_s"] < 0:
                state, period = x["to"], x["open_for_s"]
                continue
            bands.append((start, x["t_s"], state, period))
            state, start, period = x["to"], x["t_s"], x["open_for_s"]
        bands.append((start, mt[-1] - t0, state, period))

    metrics_text = read_text(os.path.join(rdir, "metrics.txt"))
    return {"run": run, "dir": rdir, "summary": summary, "phases": phases,
            "transitions": transitions, "rates": rates, "bands": bands,
            "bucket_s": bucket_s, "end_s": mt[-1] - t0,
            "metrics_text": metrics_text,
            "metrics": parse_prometheus(metrics_text) if metrics_text else []}


# ------------------------------------------------------------------ checks --

class Checks:
    def __init__(self):
        self.items = []

    def add(self, name, ok, detail):
        self.items.append({"name": name, "pass": bool(ok), "detail": detail})

    @property
    def failed(self):
        return sum(1 for c in self.items if not c["pass"])


def expected_cause(t):
    if t["from"] == "open" and t["to"] == "half-open":
        return "timer"
    if t["to"] == "isolated" or t["from"] == "isolated":
        return "operator"
    return "policy"


def promtool_check(text):
    """(passed, detail) of `promtool check metrics` on the text; passed is
    None when promtool is not installed."""
    tool = shutil.which("promtool")
    if tool is None:
        return None, "promtool not found (apt-get install prometheus)"
    p = subprocess.run([tool, "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=60)
    out = (p.stdout + p.stderr).strip().replace("\n", "; ")
    return p.returncode == 0, (out or "no findings")


def run_checks(a, on, off, promtool):
    c = Checks()
    max_retry = math.ceil(a.open_for_max_ms / 1000)
    ph_on = {p["id"]: p for p in on["phases"]}
    ph_off = {p["id"]: p for p in off["phases"]}

    # The upstream outages (the scenario of issue 6).
    for pid, p in ph_on.items():
        if p["role"] != "outage":
            continue
        q = ph_off.get(pid)
        c.add(f"breaker opens in phase {pid}", p["opened"] >= 1,
              f"{p['opened']} transition(s) to open")
        pr = p["probe"] or {"status": None, "headers": {}, "body": ""}
        ra = pr["headers"].get("retry-after", "-")
        cs = pr["headers"].get("x-circuit-state", "-")
        ok = (pr["status"] == 503 and cs == "open" and pr["body"].startswith("circuit open: ")
              and ra.isdigit() and 1 <= int(ra) <= max_retry)
        c.add(f"503 with Retry-After while open, phase {pid}", ok,
              f"status {pr['status']}, Retry-After {ra} (1..{max_retry}), X-Circuit-State {cs}")
        if q is not None:
            c.add(f"fewer upstream requests with the breaker, phase {pid}",
                  p["upstream"] < q["upstream"], f"{p['upstream']} on vs {q['upstream']} off")
            qra = (q["probe"] or {"headers": {}})["headers"].get("retry-after", "-")
            c.add(f"no Retry-After without the breaker, phase {pid}", qra == "-",
                  f"Retry-After {qra}")
    load_on = sum(p["upstream"] for p in on["phases"] if p["outage"])
    load_off = sum(p["upstream"] for p in off["phases"] if p["outage"])
    c.add("upstream load during outages on <= 20% of off", load_on * 5 <= load_off,
          f"{load_on} on vs {load_off} off")
    fin = ph_on.get("final")
    if fin is not None:
        back = back_to_closed(on)
        c.add("breaker closed by the end of the final phase", fin["state_at_end"] == "closed",
              f"state {fin['state_at_end']}; closed "
              + ("never" if back is None else f"{back:.3f} s") + " after the upstream came back")
    rej = sum(p["rejected"] for p in off["phases"])
    c.add("no rejections without the breaker", rej == 0, f"{rej} rejected")

    # Open-period backoff (B1-B3): the periods chosen grow across the outage.
    periods = [t["open_for_s"] for t in on["transitions"]
               if t["to"] == "open" and ph_on.get(t["phase"], {}).get("role") == "outage"]
    if a.open_for_max_ms > a.open_for_ms:
        ok = len(periods) >= 2 and max(periods) > periods[0] and \
            all(0 < x <= a.open_for_max_ms / 1e3 + 1e-9 for x in periods)
        c.add("open periods grow across the outage, up to the cap", ok,
              "periods " + ", ".join(f"{x:.3f}" for x in periods)
              + f" s; cap {a.open_for_max_ms / 1e3:g} s")
    bad = [t for t in on["transitions"] if t["cause"] != expected_cause(t)]
    c.add("every transition carries its cause (policy, timer, operator)", not bad,
          f"{len(on['transitions'])} transitions"
          + ("" if not bad else "; wrong: " + ", ".join(
              f"gen {t['generation']} {t['from']}->{t['to']} {t['cause']}" for t in bad[:5])))

    # Operator control (OP1, OP2): isolate a healthy upstream, then reset.
    # "While isolated" is exact: from the snapshot the isolate call answered
    # with to the one the reset call answered with (and nginx's log counted
    # after the one, before the other), so requests of the previous phase
    # still being finished when a phase starts cannot blur it.
    iso, rst = ph_on.get("isolated"), ph_on.get("reset")
    if iso is not None:
        w = iso["wrk"]
        reqs = w["requests"] or 0
        op = iso["operator"] or {}
        c.add("isolate: POST /admin/isolate answers 200, done, state isolated",
              iso["admin"] is not None and iso["admin"]["status"] == 200
              and op.get("result") == "done" and op.get("state") == "isolated",
              "reply " + (f"{iso['admin']['status']} result {op.get('result')} state "
                          f"{op.get('state')}" if iso["admin"] else "none"))
        tr = [t for t in on["transitions"] if t["phase"] == "isolated"]
        c.add("isolate: one transition closed -> isolated, cause operator",
              len(tr) == 1 and tr[0]["from"] == "closed" and tr[0]["to"] == "isolated"
              and tr[0]["cause"] == "operator",
              "; ".join(f"{t['from']} -> {t['to']} ({t['cause']})" for t in tr) or "none")
        c.add("isolated: every request answered 503",
              reqs > 0 and w["non2xx"] == reqs,
              f"wrk: {reqs} requests, {w['non2xx']} non-2xx")
        pr = iso["probe"] or {"status": None, "headers": {}, "body": ""}
        cs = pr["headers"].get("x-circuit-state", "-")
        ra = pr["headers"].get("retry-after", "-")
        c.add("isolated: the 503 names the isolated state and sends no Retry-After",
              pr["status"] == 503 and cs == "isolated" and ra == "-"
              and pr["body"].startswith("circuit isolated"),
              f"status {pr['status']}, X-Circuit-State {cs}, Retry-After {ra}, "
              f"body {pr['body']!r}")
        if rst is not None and rst["operator"] and iso["operator"] \
                and iso["operator"].get("breaker") and rst["operator"].get("breaker"):
            a0, a1 = iso["operator"], rst["operator"]
            admitted = a1["breaker"]["admitted"] - a0["breaker"]["admitted"]
            rejected = a1["breaker"]["rejected"] - a0["breaker"]["rejected"]
            up = a1["upstream"] - a0["upstream"]
            served = (rst["served_at_operator"] - iso["served_at_operator"]
                      if rst["served_at_operator"] is not None
                      and iso["served_at_operator"] is not None else None)
            c.add("isolated: zero upstream traffic (from the isolate call to the reset call)",
                  admitted == 0 and up == 0 and served == 0 and rejected >= reqs,
                  f"circuit_stats admitted +{admitted}, rejected +{rejected}; proxy sent "
                  f"upstream +{up}; nginx served +{served}")
        else:
            c.add("isolated: zero upstream traffic (from the isolate call to the reset call)",
                  False, "no operator snapshot")
    if rst is not None:
        op = rst["operator"] or {}
        tr = [t for t in on["transitions"] if t["phase"] == "reset"]
        c.add("reset: POST /admin/reset answers 200, done, state closed; one transition "
              "isolated -> closed, cause operator",
              rst["admin"] is not None and rst["admin"]["status"] == 200
              and op.get("result") == "done" and op.get("state") == "closed"
              and len(tr) == 1 and tr[0]["from"] == "isolated" and tr[0]["to"] == "closed"
              and tr[0]["cause"] == "operator",
              "reply " + (f"{rst['admin']['status']} result {op.get('result')} state "
                          f"{op.get('state')}" if rst["admin"] else "none") + "; "
              + ("; ".join(f"{t['from']} -> {t['to']} ({t['cause']})" for t in tr) or "none"))
        pr = rst["probe"] or {"status": None}
        w = rst["wrk"]
        after = None
        if op.get("breaker") and rst["end_mark"].get("breaker"):
            after = rst["end_mark"]["breaker"]["rejected"] - op["breaker"]["rejected"]
        c.add("reset: traffic resumes at once (the first request after the call is forwarded; "
              "nothing rejected after it)",
              pr["status"] == 200 and after == 0 and (w["requests"] or 0) > 0
              and w["non2xx"] == 0 and rst["served_by_upstream"] > 0,
              f"first request {pr['status']}; circuit_stats rejected +{after} after the call; "
              f"wrk {w['requests']} requests, {w['non2xx']} non-2xx; served by nginx "
              f"{rst['served_by_upstream']}")

    # Stats (M1) and /metrics.
    b = on["summary"].get("breaker")
    if b is not None:
        settled = b["successes"] + b["failures"] + b["ignored"] + b["late"] + b["released"]
        c.add("circuit_get_stats at exit: admitted = successes + failures + ignored + late "
              "+ released (M1, quiescent)", b["admitted"] == settled,
              f"{b['admitted']} admitted, {settled} settled")
        c.add("circuit_get_stats at exit: rejected and transitions match the proxy's own counts",
              b["rejected"] == on["summary"]["rejected"]
              and b["transitions"] == len(on["transitions"]),
              f"rejected {b['rejected']} vs {on['summary']['rejected']}; transitions "
              f"{b['transitions']} vs {len(on['transitions'])} observed")
    c.add("/metrics scraped after the last phase", bool(on["metrics"]),
          f"{len(on['metrics'])} samples")
    ok, detail = promtool
    c.add("promtool check metrics passes on the scraped /metrics", ok is True, detail)
    return c


def back_to_closed(run):
    """Seconds from the start of phase 'back' to the first transition to
    closed in it or later (None when there is none)."""
    ids = [p["id"] for p in run["phases"]]
    if "back" not in ids:
        return None
    bp = ids.index("back")
    after = set(ids[bp:])
    start = run["phases"][bp]["start_s"]
    for t in run["transitions"]:
        if t["phase"] in after and t["to"] == "closed" and t["cause"] != "operator":
            return t["t_s"] - start
    return None


# ------------------------------------------------------------------ report --

def fmt_ms(x):
    return "-" if x is None else f"{x:.2f}"


def write_markdown(a, runs, checks, headline, promtool):
    L = []
    add = L.append
    add(f"## libcircuit end-to-end scenario{' (quick)' if a.quick else ''}\n")
    durs = " ".join(str(d) for d in a.phase_seconds)
    backoff = (f"open {a.open_for_ms} ms doubling at each reopen up to {a.open_for_max_ms} ms, "
               f"each cut by up to {a.backoff_jitter:.0%} (circuit_backoff_exponential, seed "
               f"{a.backoff_seed})"
               if a.open_for_max_ms > a.open_for_ms else f"open {a.open_for_ms} ms")
    add(f"Load: wrk -t{a.wrk_threads} -c{a.connections} per phase (closed loop), phases of "
        f"{durs} s. Breaker: window {a.window}, probes {a.probes}, failure rate >= {a.ratio} "
        f"over >= {a.min_results} results, close after {a.close_after} probe successes, "
        f"{backoff}, probe timeout {a.probe_timeout_ms} ms. Upstream timeout "
        f"{a.upstream_timeout_ms} ms.\n")

    add("### Requests per phase\n")
    add("| phase | breaker | s | forwarded OK | upstream 5xx | conn error | timeout 504 | "
        "rejected 503 | client gone | sent upstream | served by nginx | p50 ms | p99 ms | "
        "breaker at end |")
    add("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    order = [r for r in ("on", "off") if r in runs]
    nph = max(len(runs[r]["phases"]) for r in order)
    for i in range(nph):
        for r in order:
            if i >= len(runs[r]["phases"]):
                continue
            p = runs[r]["phases"][i]
            add(f"| {i + 1} {p['title']} | {r} | {p['duration_s']:.1f} | {p['ok']} | "
                f"{p['http_error']} | {p['conn_error']} | {p['timeout']} | {p['rejected']} | "
                f"{p['cancelled']} | {p['upstream']} | {p['served_by_upstream']} | "
                f"{fmt_ms(p['wrk']['p50_ms'])} | {fmt_ms(p['wrk']['p99_ms'])} | "
                f"{p['state_at_end']} |")
    add("\n\"sent upstream\": requests the proxy sent or tried to send (connection attempts "
        "included); \"served by nginx\": lines in nginx's access log; latencies: wrk, per "
        "phase. In the run without the breaker the operator calls answer 409 (no breaker), "
        "so its last two phases are plain healthy traffic.\n")

    if "on" in runs:
        on = runs["on"]
        add("### Breaker transitions (breaker on; seconds after the phase start)\n")
        add("| phase | +s | transition | generation | cause | open period s |")
        add("|---|---:|---|---:|---|---:|")
        for t in on["transitions"]:
            op = "" if t["open_for_s"] is None else f"{t['open_for_s']:.3f}"
            add(f"| {t['phase']} | {t['t_phase_s']:.3f} | {t['from']} -> {t['to']} | "
                f"{t['generation']} | {t['cause']} | {op} |")
        add("")
        b = on["summary"].get("breaker")
        if b is not None:
            add("### Breaker stats (circuit_get_stats when the proxy exits)\n")
            add("| " + " | ".join(TOTALS) + " |")
            add("|" + "---:|" * len(TOTALS))
            add("| " + " | ".join(str(b[k]) for k in TOTALS) + " |")
            add(f"\nState {b['state']}, generation {b['generation']}, probes in flight "
                f"{b['probes_in_flight']}. Per phase, the library's own totals moved by:\n")
            add("| phase | " + " | ".join(TOTALS) + " |")
            add("|---|" + "---:|" * len(TOTALS))
            for p in on["phases"]:
                d = p["breaker_delta"]
                if d is not None:
                    add(f"| {p['id']} | " + " | ".join(str(d[k]) for k in TOTALS) + " |")
            add("")
        if on["metrics_text"]:
            ok, detail = promtool
            verdict = {True: "passes", False: "FAILS", None: "not run"}[ok]
            add("### /metrics (scraped from the admin port after the last phase)\n")
            add(f"`promtool check metrics`: {verdict} ({detail}).\n")
            add("```")
            add(on["metrics_text"].rstrip("\n"))
            add("```\n")

    h = headline
    add("### Headline\n")
    add("| | breaker on | breaker off |")
    add("|---|---:|---:|")

    def both(key, fmt=str):
        return " | ".join("-" if h[key].get(r) is None else fmt(h[key][r]) for r in ("on", "off"))
    add(f"| load on the upstream during the outages (requests sent upstream, phases "
        f"{h['outage_phases']}) | {both('upstream_load_during_outages')} |")
    add(f"| ... of which served by nginx | {both('served_during_outages')} |")
    lat = h["hung_latency_ms"]
    add("| client latency while the upstream hangs, p50 / p99 ms | "
        + " | ".join(f"{fmt_ms(lat[r]['p50'])} / {fmt_ms(lat[r]['p99'])}" for r in ("on", "off"))
        + " |")
    bc = h["back_to_closed_s"]
    add("| time from upstream back to breaker closed | "
        + ("never" if bc is None else f"{bc:.3f} s (it was {h['state_when_back']} then)")
        + " | n/a |")
    if h["open_periods_s"]:
        add("| open periods chosen during the outages, s | "
            + ", ".join(f"{x:.2f}" for x in h["open_periods_s"]) + " | n/a |")
    add("")
    add(f"Latency percentiles are wrk's, which it corrects for coordinated omission: with the "
        f"breaker on, the few ~{a.upstream_timeout_ms} ms probes of the hung phase lift its p99 "
        f"far above the fast rejections that make up the p50.\n")

    if checks is not None:
        add("### Checks\n")
        for c in checks.items:
            add(f"- {'PASS' if c['pass'] else 'FAIL'}: {c['name']} ({c['detail']})")
        add(f"\n{len(checks.items) - checks.failed} passed, {checks.failed} failed")
    return "\n".join(L) + "\n"


def make_headline(runs):
    h = {"upstream_load_during_outages": {}, "served_during_outages": {},
         "hung_latency_ms": {r: {"p50": None, "p99": None} for r in ("on", "off")},
         "back_to_closed_s": None, "state_when_back": None, "open_periods_s": [],
         "outage_phases": ""}
    for r, run in runs.items():
        out = [i + 1 for i, p in enumerate(run["phases"]) if p["outage"]]
        h["outage_phases"] = f"{out[0]}-{out[-1]}" if out else "-"
        h["upstream_load_during_outages"][r] = sum(p["upstream"] for p in run["phases"]
                                                   if p["outage"])
        h["served_during_outages"][r] = sum(p["served_by_upstream"] for p in run["phases"]
                                            if p["outage"])
        for p in run["phases"]:
            if p["id"] == "hung":
                h["hung_latency_ms"][r] = {"p50": p["wrk"]["p50_ms"], "p99": p["wrk"]["p99_ms"]}
    if "on" in runs:
        on = runs["on"]
        bc = back_to_closed(on)
        h["back_to_closed_s"] = None if bc is None else round(bc, 3)
        ids = [p["id"] for p in on["phases"]]
        if "back" in ids and ids.index("back") > 0:
            h["state_when_back"] = on["phases"][ids.index("back") - 1]["state_at_end"]
        roles = {p["id"]: p["role"] for p in on["phases"]}
        h["open_periods_s"] = [round(t["open_for_s"], 6) for t in on["transitions"]
                               if t["to"] == "open" and roles.get(t["phase"]) == "outage"]
    return h


def write_json(path, a, runs, checks, headline, promtool):
    def phase_json(p):
        w = p["wrk"]
        pr = p["probe"]
        return {
            "id": p["id"], "title": p["title"], "role": p["role"], "outage": p["outage"],
            "start_s": round(p["start_s"], 3), "duration_s": round(p["duration_s"], 3),
            "forwarded_ok": p["ok"], "upstream_error": p["http_error"],
            "conn_error": p["conn_error"], "timeout": p["timeout"], "rejected": p["rejected"],
            "client_gone": p["cancelled"], "local_error": p["local_error"],
            "sent_upstream": p["upstream"], "served_by_upstream": p["served_by_upstream"],
            "wrk_requests": w["requests"], "wrk_rps": w["rps"], "p50_ms": w["p50_ms"],
            "p99_ms": w["p99_ms"], "wrk_non2xx": w["non2xx"],
            "wrk_socket_errors": w["socket_errors"], "opened": p["opened"],
            "breaker_at_end": p["state_at_end"], "breaker_delta": p["breaker_delta"],
            "probe": None if pr is None else {
                "status": pr["status"],
                "retry_after": pr["headers"].get("retry-after"),
                "circuit_state": pr["headers"].get("x-circuit-state"),
                "body": pr["body"]},
            "operator": None if p["admin"] is None else {
                "status": p["admin"]["status"], "reply": p["operator"] or p["admin"]["body"],
                "served_by_upstream_at_call": p["served_at_operator"]},
        }

    doc = {
        "scenario": {
            "quick": a.quick, "phase_seconds": a.phase_seconds, "wrk_threads": a.wrk_threads,
            "connections": a.connections,
            "breaker": {"window": a.window, "probes": a.probes, "min_results": a.min_results,
                        "ratio": a.ratio, "close_after": a.close_after,
                        "open_for_ms": a.open_for_ms, "open_for_max_ms": a.open_for_max_ms,
                        "backoff_jitter": a.backoff_jitter, "backoff_seed": a.backoff_seed,
                        "probe_timeout_ms": a.probe_timeout_ms},
            "upstream_timeout_ms": a.upstream_timeout_ms, "bucket_ms": a.bucket_ms},
        "runs": {},
        "headline": headline,
        "checks": None if checks is None else checks.items,
    }
    for r, run in runs.items():
        doc["runs"][r] = {
            "phases": [phase_json(p) for p in run["phases"]],
            "transitions": [{k: (round(v, 3) if isinstance(v, float) else v)
                             for k, v in t.items()} for t in run["transitions"]],
            "breaker_stats_at_exit": run["summary"].get("breaker"),
            "metrics": [{"name": n, "labels": lb, "value": v} for n, lb, v in run["metrics"]],
        }
        if r == "on":
            doc["runs"][r]["promtool"] = {"pass": promtool[0], "detail": promtool[1]}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


# -------------------------------------------------------------------- plot --

BAND_COLOURS = {"closed": "#d4efd4", "open": "#f7c4c4", "half-open": "#fbe29a",
                "isolated": "#c9c3e6"}


def plot(a, runs, out):
    """Writes the plot data and e2e.gp, runs gnuplot. Returns an error text
    or None."""
    order = [r for r in ("on", "off") if r in runs and runs[r]["rates"]]
    if not order:
        return None
    for r in order:
        run = runs[r]
        with open(os.path.join(run["dir"], "rates.tsv"), "w") as f:
            f.write("t_s\t" + "\t".join(KINDS) + "\n")
            for row in run["rates"]:
                f.write(f"{row[0]:.3f}\t" + "\t".join(f"{v:.1f}" for v in row[1:]) + "\n")
    xmax = max(runs[r]["end_s"] for r in order) + 0.05
    n = len(order)
    g = []
    add = g.append
    add("# generated by e2e_report.py: requests/s by kind over time, breaker state as")
    add("# bands (open bands labelled with the open period chosen), phase boundaries")
    add("# dashed. Data: run-*/rates.tsv.")
    add("set datafile separator tab")
    add("set logscale y")
    add("set yrange [0.45:1000000]")
    add("set ytics ('0' 0.6, '1' 1, '10' 10, '100' 100, '1k' 1000, '10k' 10000, "
        "'100k' 100000) nomirror")
    add("set ylabel 'requests/s (log scale)'")
    add("set grid ytics lc rgb '#d0d0d0' lw 0.5")
    add("set border 3")
    add("set xtics nomirror")
    add(f"set xrange [0:{xmax:.2f}]")
    add("set lmargin 11")
    add("set rmargin 27")
    add("set style textbox opaque noborder")
    add("set key at screen 0.995, screen 0.93 right top vertical Left reverse noenhanced "
        "samplen 2.5 spacing 1.3 box lc rgb '#bbbbbb'")
    # A kind's rate, or undefined when zero (log scale); 'sent upstream' shows
    # zero on the '0' line, so that the outages read as load, not gaps.
    add("nz(c) = column(c) > 0 ? column(c) : 1/0")
    add("z0(c) = column(c) > 0 ? column(c) : 0.6")
    col = {k: i + 2 for i, k in enumerate(KINDS)}
    for fmt in ("png", "svg"):
        h = 400 * n + 90
        if fmt == "png":
            add(f"set terminal pngcairo size 1500,{h} font 'Sans,11'")
        else:
            add(f"set terminal svg size 1500,{h} font 'Sans,11' background rgb 'white'")
        add(f"set output '{os.path.join(out, 'e2e.' + fmt)}'")
        add(f"set multiplot layout {n},1 title 'circuit-proxy in front of nginx: requests/s by "
            f"kind, {a.bucket_ms} ms intervals (wrk -t{a.wrk_threads} -c{a.connections}, closed "
            f"loop)' font ',13'")
        for i, r in enumerate(order):
            run = runs[r]
            add("unset object")
            add("unset arrow")
            add("unset label")
            for j, (s, e, st, period) in enumerate(run["bands"], 1):
                add(f"set object {j} rect from {s:.3f}, graph 0 to {e:.3f}, graph 1 "
                    f"fc rgb '{BAND_COLOURS.get(st, '#ffffff')}' fs solid 1.0 noborder behind")
                if st == "open" and period is not None and e - s >= xmax / 60:
                    add(f"set label '{period:.2g} s' at {(s + e) / 2:.3f}, graph 0.88 center "
                        f"front font ',9' tc rgb '#9b1c1c'")
            up = 0
            for p in run["phases"]:
                if p["start_s"] > 0:
                    add(f"set arrow from {p['start_s']:.3f}, graph 0 to {p['start_s']:.3f}, "
                        f"graph 1 nohead dt 2 lw 1.5 lc rgb '#333333' front")
                add(f"set label \"{p['id']}\" at {p['start_s'] + p['duration_s'] / 2:.3f}, "
                    f"graph 0.955 center front boxed font ',10'")
                if p["outage"]:
                    up += p["upstream"]
            add(f"set label 'sent upstream during the outages: {up}' at graph 0.01, graph 0.05 "
                f"left front boxed font ',10'")
            if r == "on":
                add("set title 'breaker ON  (background: green closed, red open with the open "
                    "period chosen, yellow half-open, violet isolated)' font ',12'")
            else:
                add("set title 'breaker OFF  (--no-breaker: every request is forwarded)' "
                    "font ',12'")
            add("set key" if i == 0 else "unset key")
            add("set xlabel 'seconds since the scenario start'")
            rates = os.path.join(run["dir"], "rates.tsv")
            series = [("ok", "#1a9641", "forwarded OK"), ("http_error", "#8e44ad", "upstream 5xx"),
                      ("conn_error", "#8c510a", "conn error 502"),
                      ("timeout", "#e66101", "timeout 504"),
                      ("rejected", "#2166ac", "rejected 503 (fast)")]
            parts = []
            for j, (k, colour, title) in enumerate(series):
                src = f"'{rates}'" if j == 0 else "''"
                parts.append(f"{src} using 1:(nz({col[k]})) every ::1 with linespoints lw 2 pt 7 "
                             f"ps 0.45 lc rgb '{colour}' title '{title}'")
            parts.append(f"'' using 1:(z0({col['upstream']})) every ::1 with histeps lw 1.5 "
                         f"lc rgb '#000000' title 'sent upstream'")
            add("plot " + ", \\\n     ".join(parts))
        add("unset multiplot")
        add("set output")
    gp = os.path.join(out, "e2e.gp")
    with open(gp, "w") as f:
        f.write("\n".join(g) + "\n")
    if shutil.which("gnuplot") is None:
        return "gnuplot not found (apt-get install gnuplot-nox): no plot"
    p = subprocess.run(["gnuplot", gp], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        return "gnuplot failed: " + p.stderr.strip()
    return None


# --------------------------------------------------------------- self-test --

def self_test():
    """Checks the parsers on fixed inputs; exit 0 or 1."""
    fails = []

    def expect(name, got, want):
        if got != want:
            fails.append(f"{name}: got {got!r}, want {want!r}")

    wrk = ("Running 2s test @ http://127.0.0.1:1/\n  2 threads and 32 connections\n"
           "  Latency Distribution\n     50%  772.00us\n     75%    3.36ms\n"
           "     99%    1.50s\n  52551 requests in 2.09s, 10.89MB read\n"
           "  Socket errors: connect 1, read 2, write 0, timeout 4\n"
           "  Non-2xx or 3xx responses: 52551\nRequests/sec:  25115.97\n")
    w = parse_wrk(wrk)
    expect("wrk p50", w["p50_ms"], 0.772)
    expect("wrk p99", w["p99_ms"], 1500.0)
    expect("wrk requests", w["requests"], 52551)
    expect("wrk non2xx", w["non2xx"], 52551)
    expect("wrk socket errors", w["socket_errors"], 7)
    expect("wrk rps", w["rps"], 25115.97)
    expect("wrk minutes", wrk_ms("1.50m"), 90000.0)
    h = parse_http("HTTP/1.0 503 Service Unavailable\nX-Circuit-State: isolated\n"
                   "Content-Type: text/plain\n\ncircuit isolated by an operator\n")
    expect("http status", h["status"], 503)
    expect("http header", h["headers"].get("x-circuit-state"), "isolated")
    expect("http no retry-after", h["headers"].get("retry-after"), None)
    expect("http body", h["body"], "circuit isolated by an operator")
    expect("http empty", parse_http(""), None)
    m = parse_prometheus('# HELP a_total x\n# TYPE a_total counter\na_total 3\n'
                         'b{state="open",x="q\\"z"} 1.5e0\nc 2 1700000000\n')
    expect("prom samples", m, [("a_total", {}, 3.0),
                               ("b", {"state": "open", "x": 'q\\"z'}, 1.5),
                               ("c", {}, 2.0)])
    try:
        parse_prometheus("not a sample line {\n")
        fails.append("prom: a bad line was accepted")
    except InputError:
        pass
    expect("cause timer", expected_cause({"from": "open", "to": "half-open"}), "timer")
    expect("cause operator", expected_cause({"from": "half-open", "to": "isolated"}), "operator")
    expect("cause policy", expected_cause({"from": "half-open", "to": "open"}), "policy")
    for f in fails:
        print(f"{PROG}: self-test: FAIL: {f}", file=sys.stderr)
    print(f"{PROG}: self-test: {'FAILED' if fails else 'passed'}")
    return 1 if fails else 0


# -------------------------------------------------------------------- main --

def main(argv):
    ap = argparse.ArgumentParser(
        prog=PROG, fromfile_prefix_chars="@",
        description="The report of circuit-e2e from the raw data in --out; "
                    "@FILE reads arguments from FILE, one a line (circuit-e2e "
                    "leaves OUT/report.args).")
    ap.add_argument("--self-test", action="store_true", help="check the parsers and exit")
    ap.add_argument("--out", help="the scenario's output directory (run-on/, run-off/ inside)")
    ap.add_argument("--runs", default="on off")
    ap.add_argument("--check", action="store_true", help="exit 1 unless every check passes")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--phase-seconds", default="", help="durations, space-separated")
    ap.add_argument("--wrk-threads", type=int, default=2)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--window", type=int, default=100)
    ap.add_argument("--probes", type=int, default=2)
    ap.add_argument("--min-results", type=int, default=20)
    ap.add_argument("--ratio", type=float, default=0.5)
    ap.add_argument("--close-after", type=int, default=3)
    ap.add_argument("--open-for-ms", type=int, default=1000)
    ap.add_argument("--open-for-max-ms", type=int, default=3000)
    ap.add_argument("--backoff-seed", type=int, default=1)
    ap.add_argument("--backoff-jitter", type=float, default=0.2)
    ap.add_argument("--probe-timeout-ms", type=int, default=1000)
    ap.add_argument("--upstream-timeout-ms", type=int, default=300)
    ap.add_argument("--bucket-ms", type=int, default=250)
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test()
    if not a.out:
        ap.error("--out is required")
    a.phase_seconds = [int(x) for x in a.phase_seconds.split()]

    runs = {}
    try:
        for r in a.runs.split():
            rdir = os.path.join(a.out, f"run-{r}")
            if os.path.exists(os.path.join(rdir, "stats.jsonl")):
                runs[r] = load_run(rdir, r)
    except (InputError, KeyError, ValueError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    if not runs:
        print(f"{PROG}: no run data in {a.out}", file=sys.stderr)
        return 2

    promtool = (None, "no /metrics scrape")
    if "on" in runs and runs["on"]["metrics_text"]:
        promtool = promtool_check(runs["on"]["metrics_text"])
    checks = run_checks(a, runs["on"], runs["off"], promtool) \
        if "on" in runs and "off" in runs else None
    headline = make_headline(runs)
    md = write_markdown(a, runs, checks, headline, promtool)
    with open(os.path.join(a.out, "report.md"), "w", encoding="utf-8") as f:
        f.write(md)
    write_json(os.path.join(a.out, "e2e.json"), a, runs, checks, headline, promtool)
    sys.stdout.write(md)
    if not a.no_plot:
        err = plot(a, runs, a.out)
        print(f"{PROG}: " + (err or f"plot: {a.out}/e2e.png, {a.out}/e2e.svg"),
              file=sys.stderr)
    print(f"{PROG}: report: {a.out}/report.md, {a.out}/e2e.json", file=sys.stderr)
    if a.check:
        if checks is None:
            print(f"{PROG}: --check needs both runs", file=sys.stderr)
            return 1
        if checks.failed:
            print(f"{PROG}: {checks.failed} check(s) failed", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
