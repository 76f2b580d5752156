#!/usr/bin/env python3
# e2e_report.py: the report of the end-to-end scenario on Traffic Server
# (bench/e2e).
#
# SPDX-License-Identifier: MIT
#
# circuit_e2e.py runs nginx, Traffic Server (with and without the circuit.so
# plugin) and wrk, and leaves the raw data in OUT:
#
#   scenario.json        the settings, the phase durations, the overhead rounds
#   overhead/wrk-R-ARM.txt   wrk's output of overhead round R for arm on/off
#   run-ARM/phases.json  one mark per phase start (time, nginx's access-log
#                        line count, the operator call's record) and an end mark
#   run-ARM/wrk-ID.txt   wrk's output for phase ID
#   run-ARM/probe-ID.txt one reply the script fetched itself during phase ID
#   run-ARM/ts-access.log    Traffic Server's access log (circuit_e2e.LOG_FORMAT)
#   run-ARM/diags.log    Traffic Server's diags.log (the plugin's transition lines)
#   run-ARM/nginx-access.log nginx's access log ($msec $status)
#   run-on/metrics.txt   the plugin's Prometheus exposition after the last phase
#   run-ARM/ctl-*.txt    traffic_ctl metric match plugin.circuit / responses
#
# and this script writes OUT/report.md, OUT/e2e.json and the plot
# (OUT/e2e.png, OUT/e2e.svg, drawn by gnuplot), and with --check exits 1
# unless the outcomes hold. Standard library only.
#
# Exit status: 0; 1 when --check is given and a check failed; 2 bad input.

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

PROG = "e2e_report"

# Every phase, in order: its title and its role.
#   healthy   nginx answers 200          noise    nginx answers 500 to ~1 %
#   outage    nginx is broken (the breaker should open)
#   isolate / reset   healthy nginx; the operator's call at the phase start
PHASES = {
    "healthy": ("healthy", "healthy"),
    "errors1": ("1 % upstream errors", "noise"),
    "http503": ("upstream 503", "outage"),
    "down": ("upstream down", "outage"),
    "hung": ("upstream hung", "outage"),
    "back": ("upstream back", "healthy"),
    "final": ("healthy (final)", "healthy"),
    "isolated": ("isolated by the operator", "isolate"),
    "reset": ("reset by the operator", "reset"),
}

# What Traffic Server answered, from its access log.
#   ok          2xx/3xx from the origin
#   http_error  the origin answered 4xx/5xx
#   conn_error  502: no connection to the origin (refused)
#   timeout     504: the origin did not answer in time
#   rejected    503 from the plugin (no origin status, no ERR_ result code)
#   other       anything else
KINDS = ["ok", "http_error", "conn_error", "timeout", "rejected", "other"]


class InputError(Exception):
    pass


# ------------------------------------------------------------------ parsers --

def wrk_ms(text):
    """A wrk duration ("772.00us", "3.36ms", "1.02s", "1.50m") in ms."""
    m = re.fullmatch(r"([0-9.]+)(us|ms|s|m)", text)
    if not m:
        return None
    return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}[m.group(2)]


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
            r["socket_errors"] = sum(int(n) for n in re.findall(r"\d+", line))
    return r


def parse_http(text):
    """A reply as circuit_e2e.py saves it -> status, headers (lower-case
    names), body. None for an empty text."""
    if not text.strip():
        return None
    head, _, body = text.partition("\n\n")
    lines = head.splitlines()
    parts = lines[0].split() if lines else []
    status = int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else None
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return {"status": status, "headers": headers, "body": body.strip()}


def classify(pssc, sssc, crc):
    """One access-log line's kind (KINDS)."""
    if sssc not in ("000", "0", "-"):
        return "ok" if sssc[0] in "23" else "http_error"
    if "CONNECT_FAIL" in crc or pssc == "502":
        return "conn_error"
    if pssc == "504" or "TIMEOUT" in crc:
        return "timeout"
    if pssc == "503" and not crc.startswith("ERR"):
        return "rejected"
    return "other"


def parse_access_line(line):
    """'<t> <ttms> <pssc> <sssc> <crc> <retry-after> <path>' -> (t, kind,
    path) or None for a line that is not one."""
    f = line.split()
    if len(f) < 7:
        return None
    try:
        t = float(f[0])
    except ValueError:
        return None
    return t, classify(f[2], f[3], f[4]), f[6]


_PROM_SAMPLE = re.compile(
    r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)(?:\s+-?\d+)?$")
_PROM_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text):
    """Prometheus text format -> list of (name, {label: value}, float)."""
    samples = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        m = _PROM_SAMPLE.match(line)
        if not m:
            raise InputError(f"metrics line {n} is not a sample: {line!r}")
        try:
            value = float(m.group(3))
        except ValueError:
            raise InputError(f"metrics line {n}: bad value {m.group(3)!r}") from None
        samples.append((m.group(1), dict(_PROM_LABEL.findall(m.group(2) or "")), value))
    return samples


def prom_value(samples, name, **labels):
    """Sum of the samples called name whose labels include `labels`."""
    return sum(v for n, lb, v in samples
               if n == name and all(lb.get(k) == x for k, x in labels.items()))


_TRANSITION = re.compile(
    r"^\[(\w{3})\s+(\d+) (\d\d:\d\d:\d\d)\.(\d{3})\] .*circuit: breaker (\S+): "
    r"(\S+) -> (\S+) \(generation (\d+), cause (\w+)(?:, open for ([0-9.]+) s)?;")


def parse_transitions(text, year):
    """The plugin's transition lines in diags.log (local time, ms) ->
    [{t, breaker, from, to, generation, cause, open_for_s}]."""
    out = []
    for line in text.splitlines():
        m = _TRANSITION.match(line)
        if not m:
            continue
        tm = time.strptime(f"{year} {m.group(1)} {m.group(2)} {m.group(3)}", "%Y %b %d %H:%M:%S")
        out.append({"t": time.mktime(tm) + int(m.group(4)) / 1e3, "breaker": m.group(5),
                    "from": m.group(6), "to": m.group(7), "generation": int(m.group(8)),
                    "cause": m.group(9),
                    "open_for_s": float(m.group(10)) if m.group(10) else None})
    return out


def read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


# ----------------------------------------------------------------- one run --

def load_run(rdir, arm, meta, bucket_s):
    ph = json.loads(read_text(os.path.join(rdir, "phases.json")) or "null")
    if not ph or len(ph["marks"]) < 2 or ph["marks"][-1]["phase"] != "end":
        raise InputError(f"{rdir}/phases.json: missing, or no 'end' mark")
    marks = ph["marks"]
    mt = [m["t"] for m in marks]
    t0, t_end = mt[0], mt[-1]

    def phase_of(t):
        if t < t0:
            return -1
        i = 0
        while i + 1 < len(marks) - 1 and mt[i + 1] <= t:
            i += 1
        return i

    n = len(marks) - 1
    counts = [{k: 0 for k in KINDS} for _ in range(n)]
    nb = int(math.ceil((t_end - t0) / bucket_s)) + 1
    rates = [{k: 0 for k in KINDS + ["upstream", "served"]} for _ in range(nb)]
    rejected_total = 0   # every plugin 503 of the run (probes included), for M1
    with open(os.path.join(rdir, "ts-access.log"), encoding="utf-8", errors="replace") as f:
        for line in f:
            x = parse_access_line(line)
            if x is None:
                continue
            t, kind, path = x
            if t > t_end + 0.5 or path.startswith("__"):
                continue   # the script's own log-flush requests
            rejected_total += kind == "rejected"
            i = phase_of(t)
            if i < 0 or t >= t_end:
                continue
            counts[i][kind] += 1
            b = rates[int((t - t0) / bucket_s)]
            b[kind] += 1
            b["upstream"] += kind != "rejected"
    try:
        with open(os.path.join(rdir, "nginx-access.log"), encoding="utf-8") as f:
            for line in f:
                p = line.split()
                if p:
                    t = float(p[0])
                    if t0 <= t < t_end:
                        rates[int((t - t0) / bucket_s)]["served"] += 1
    except FileNotFoundError:
        pass

    year = time.localtime(t0).tm_year
    trans = []
    for x in parse_transitions(read_text(os.path.join(rdir, "diags.log")), year):
        if x["breaker"] != meta.get("breaker_name", x["breaker"]):
            continue   # the AT8 trial's breaker
        i = phase_of(x["t"])
        x.update(phase=marks[i]["phase"] if i >= 0 else "before",
                 t_s=x["t"] - t0, t_phase_s=x["t"] - mt[max(i, 0)])
        trans.append(x)

    def state_at(t):
        s = "closed" if arm == "on" else "off"
        for x in trans:
            if x["t"] <= t:
                s = x["to"]
        return s

    phases = []
    for i in range(n):
        m = marks[i]
        pid = m["phase"]
        if pid not in PHASES:
            raise InputError(f"{rdir}: unknown phase {pid!r}")
        title, role = PHASES[pid]
        c = counts[i]
        total = sum(c.values())
        p = {"id": pid, "title": title, "role": role, "outage": role == "outage",
             "start_s": mt[i] - t0, "duration_s": mt[i + 1] - mt[i],
             "requests": total, "sent_upstream": total - c["rejected"],
             "served_by_upstream": marks[i + 1]["served"] - m["served"],
             "state_at_start": state_at(mt[i]), "state_at_end": state_at(mt[i + 1]),
             "opened": sum(1 for x in trans if x["phase"] == pid and x["to"] == "open"),
             "wrk": parse_wrk(read_text(os.path.join(rdir, f"wrk-{pid}.txt"))),
             "probe": parse_http(read_text(os.path.join(rdir, f"probe-{pid}.txt"))),
             "operator": m.get("operator")}
        p.update(c)
        phases.append(p)

    bands = []   # (start s, end s, state, open period s)
    if arm == "on":
        state, start, period = "closed", 0.0, None
        for x in trans:
            if x["t_s"] < 0:
                state, period = x["to"], x["open_for_s"]
                continue
            bands.append((start, x["t_s"], state, period))
            state, start, period = x["to"], x["t_s"], x["open_for_s"]
        bands.append((start, t_end - t0, state, period))

    metrics_text = read_text(os.path.join(rdir, "metrics.txt"))
    return {"arm": arm, "dir": rdir, "phases": phases, "transitions": trans,
            "rates": [[(j + 0.5) * bucket_s] + [b[k] / bucket_s for k in KINDS + ["upstream", "served"]]
                      for j, b in enumerate(rates) if (j + 0.5) * bucket_s <= t_end - t0],
            "bands": bands, "end_s": t_end - t0, "rejected_total": rejected_total,
            "metrics_text": metrics_text,
            "metrics": parse_prometheus(metrics_text) if metrics_text else [],
            "ctl_circuit": read_text(os.path.join(rdir, "ctl-circuit.txt")),
            "at8": json.loads(read_text(os.path.join(rdir, "at8.json")) or "null")}


_PERF_LINE = re.compile(r"^\s*([0-9.]+)%\s+(\S+)\s+\[(.)\]\s+(.*?)\s*$")


def parse_perf(text):
    """`perf report --sort dso,sym --stdio -g none` -> samples count and
    [(percent, dso, symbol)]."""
    rows = []
    samples = None
    for line in text.splitlines():
        m = re.match(r"^# Samples: (\S+)", line)
        if m:
            samples = m.group(1)
        if line.startswith("#"):
            continue
        m = _PERF_LINE.match(line)
        if m:
            rows.append((float(m.group(1)), m.group(2), m.group(4)))
    return samples, rows


def summarise_rounds(out, files):
    """wrk and CPU of the overhead rounds in `files` -> per arm: the rounds'
    requests/s, p99, CPU per request, their medians, and the changes."""
    res = {"on": [], "off": []}
    for r in files:
        w = parse_wrk(read_text(os.path.join(out, "overhead", r["file"])))
        # traffic_server's CPU time per request of the round (all threads)
        w["cpu_us"] = (r["ts_cpu_ns"] / 1e3 / w["requests"]
                       if r.get("ts_cpu_ns") and w["requests"] else None)
        res[r["arm"]].append(w)
    summary = {}
    for arm, ws in res.items():
        rps = [w["rps"] for w in ws if w["rps"] is not None]
        p99 = [w["p99_ms"] for w in ws if w["p99_ms"] is not None]
        cpu = [w["cpu_us"] for w in ws if w["cpu_us"] is not None]
        summary[arm] = {"rounds_rps": rps, "rounds_p99_ms": p99, "rounds_cpu_us": cpu,
                        "median_rps": statistics.median(rps) if rps else None,
                        "median_p99_ms": statistics.median(p99) if p99 else None,
                        "median_cpu_us": statistics.median(cpu) if cpu else None,
                        # the least disturbed round: other load only adds CPU time
                        "min_cpu_us": min(cpu) if cpu else None,
                        "requests": sum(w["requests"] or 0 for w in ws),
                        "non2xx": sum(w["non2xx"] for w in ws)}
    on, off = summary["on"], summary["off"]
    if on["median_cpu_us"] and off["median_cpu_us"]:
        summary["cpu_change_pct"] = 100.0 * (on["median_cpu_us"] / off["median_cpu_us"] - 1)
        summary["cpu_added_us"] = on["median_cpu_us"] - off["median_cpu_us"]
        summary["min_cpu_change_pct"] = 100.0 * (on["min_cpu_us"] / off["min_cpu_us"] - 1)
        summary["min_cpu_added_us"] = on["min_cpu_us"] - off["min_cpu_us"]
    if on["median_rps"] and off["median_rps"]:
        summary["rps_change_pct"] = 100.0 * (on["median_rps"] / off["median_rps"] - 1)
    if on["median_p99_ms"] and off["median_p99_ms"]:
        summary["p99_change_pct"] = 100.0 * (on["median_p99_ms"] / off["median_p99_ms"] - 1)
    return summary


def load_overhead(out, meta):
    """The healthy rounds' summary, with the 1 % errors rounds' summary
    under "errors1" and the perf profile under "profile"."""
    files = meta["overhead"]["files"]
    summary = summarise_rounds(out, [r for r in files if r.get("cond", "healthy") == "healthy"])
    err = [r for r in files if r.get("cond") == "errors1"]
    if err:
        summary["errors1"] = summarise_rounds(out, err)
        summary["errors1"]["rounds"] = len(err) // 2
    perf = read_text(os.path.join(out, "overhead", "perf-on.txt"))
    if perf:
        samples, rows = parse_perf(perf)
        mine = [(p, sym) for p, dso, sym in rows if dso == "circuit.so"]
        summary["profile"] = {
            "samples": samples,
            "circuit_so_pct": round(sum(p for p, _ in mine), 2),
            "circuit_so_symbols": [{"pct": p, "symbol": sym} for p, sym in mine[:8]],
            "api_pct": round(api_share(rows), 2),
            "by_dso": {},
        }
        for p, dso, _ in rows:
            summary["profile"]["by_dso"][dso] = round(
                summary["profile"]["by_dso"].get(dso, 0) + p, 2)
        poff = read_text(os.path.join(out, "overhead", "perf-off.txt"))
        if poff:
            s_off, r_off = parse_perf(poff)
            summary["profile"]["off_samples"] = s_off
            summary["profile"]["off_api_pct"] = round(api_share(r_off), 2)
    return summary


# Traffic Server's work for a plugin: its plugin-API code (hook dispatch,
# transaction arguments, the TS* calls; names in traffic_server 9.2), the
# dynamic casts its API calls make, and malloc/free (the plugin keeps a
# small struct per transaction). Compared with and without the plugin.
_API_SYMBOL = re.compile(r"api|Hook|UserArg|INKCont|^_?TS[a-zA-Z]|PluginUserArgs|RemapPlugin",
                         re.I)
_API_LIBC = re.compile(r"^(malloc|free|cfree|_int_malloc|_int_free)(@.*)?$")


def api_share(rows):
    total = 0.0
    for p, dso, sym in rows:
        if (dso == "traffic_server" or dso.startswith("libts")) and _API_SYMBOL.search(sym):
            total += p
        elif dso.startswith("libstdc++") and "dyncast" in sym:
            total += p
        elif dso.startswith("libc.so") and _API_LIBC.match(sym):
            total += p
    return total


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
    """(passed, detail) of `promtool check metrics`; None when not installed."""
    tool = shutil.which("promtool")
    if tool is None:
        return None, "promtool not found (apt-get install prometheus)"
    p = subprocess.run([tool, "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=60)
    out = (p.stdout + p.stderr).strip().replace("\n", "; ")
    return p.returncode == 0, (out or "no findings")


def run_checks(meta, on, off, overhead, promtool):
    c = Checks()
    b = meta["breaker"]
    max_retry = math.ceil(b["open_for_max_ms"] / 1000)
    ph_on = {p["id"]: p for p in on["phases"]}
    ph_off = {p["id"]: p for p in off["phases"]}

    c.add("overhead rounds: every request answered 2xx, both arms",
          overhead["on"]["non2xx"] == 0 and overhead["off"]["non2xx"] == 0
          and overhead["on"]["median_rps"] and overhead["off"]["median_rps"],
          f"non-2xx on {overhead['on']['non2xx']}, off {overhead['off']['non2xx']}")
    e1 = overhead.get("errors1")
    if e1:
        for arm in ("on", "off"):
            o = e1[arm]
            share = o["non2xx"] / o["requests"] if o["requests"] else 0
            c.add(f"overhead rounds with 1 % errors ({arm}): 0.5..2 % non-2xx",
                  0.005 <= share <= 0.02,
                  f"{o['non2xx']} of {o['requests']} = {share:.2%}")
    before = [t for t in on["transitions"] if t["phase"] == "before"]
    c.add("breaker stays closed through the overhead rounds (healthy and 1 % errors)",
          not before, f"{len(before)} transition(s) before the phases")

    for pid in ("healthy", "errors1"):
        p = ph_on.get(pid)
        if p is None:
            continue
        c.add(f"breaker stays closed in phase {pid}",
              p["state_at_end"] == "closed" and not any(
                  t["phase"] == pid for t in on["transitions"]) and p["rejected"] == 0,
              f"state {p['state_at_end']}, {p['rejected']} rejected")
    for arm, ph in (("on", ph_on), ("off", ph_off)):
        p = ph.get("errors1")
        if p is not None and p["requests"]:
            share = p["http_error"] / p["requests"]
            c.add(f"phase errors1 ({arm}): ~1 % upstream errors (0.5..2 %)",
                  0.005 <= share <= 0.02,
                  f"{p['http_error']} of {p['requests']} = {share:.2%}")

    for pid, p in ph_on.items():
        if p["role"] != "outage":
            continue
        q = ph_off.get(pid)
        # Traffic Server's origin timeouts are whole seconds, so in a short
        # hung phase a probe may still be waiting when the phase ends: a
        # breaker already open at the start that never closes counts too.
        closed_in = [t for t in on["transitions"] if t["phase"] == pid and t["to"] == "closed"]
        c.add(f"breaker opens in phase {pid} (or is open at its start and never closes in it)",
              p["opened"] >= 1 or (p["state_at_start"] in ("open", "half-open")
                                   and not closed_in),
              f"{p['opened']} transition(s) to open; at the start {p['state_at_start']}, "
              f"{len(closed_in)} to closed")
        pr = p["probe"] or {"status": None, "headers": {}, "body": ""}
        ra = pr["headers"].get("retry-after", "-")
        ok = (pr["status"] == 503 and pr["body"].startswith(("circuit open:",
                                                              "circuit half-open:"))
              and ra.isdigit() and 1 <= int(ra) <= max_retry)
        c.add(f"503 with Retry-After while open (or half-open, probe slots taken), phase {pid}",
              ok,
              f"status {pr['status']}, Retry-After {ra} (1..{max_retry}), body "
              f"{pr['body'][:40]!r}")
        if q is not None:
            c.add(f"fewer upstream requests with the breaker, phase {pid}",
                  p["sent_upstream"] < q["sent_upstream"],
                  f"{p['sent_upstream']} on vs {q['sent_upstream']} off")
            qra = (q["probe"] or {"headers": {}})["headers"].get("retry-after", "-")
            c.add(f"no Retry-After without the plugin, phase {pid}", qra == "-",
                  f"Retry-After {qra}")
    load_on = sum(p["sent_upstream"] for p in on["phases"] if p["outage"])
    load_off = sum(p["sent_upstream"] for p in off["phases"] if p["outage"])
    c.add("upstream load during the outages with the plugin <= 20 % of without",
          load_on * 5 <= load_off, f"{load_on} on vs {load_off} off")
    fin = ph_on.get("final")
    if fin is not None:
        c.add("breaker closed by the end of the final phase", fin["state_at_end"] == "closed",
              f"state {fin['state_at_end']}")
    rej = sum(p["rejected"] for p in off["phases"])
    c.add("no plugin 503 without the plugin", rej == 0, f"{rej} rejected")

    periods = [t["open_for_s"] for t in on["transitions"]
               if t["to"] == "open" and ph_on.get(t["phase"], {}).get("role") == "outage"]
    if b["open_for_max_ms"] > b["open_for_ms"]:
        ok = len(periods) >= 2 and max(periods) > periods[0] and \
            all(0 < x <= b["open_for_max_ms"] / 1e3 + 1e-9 for x in periods)
        c.add("open periods grow across the outages, up to the cap", ok,
              "periods " + ", ".join(f"{x:.3f}" for x in periods)
              + f" s; cap {b['open_for_max_ms'] / 1e3:g} s")
    bad = [t for t in on["transitions"] if t["cause"] != expected_cause(t)]
    c.add("every transition is logged with its cause (policy, timer, operator)",
          on["transitions"] and not bad,
          f"{len(on['transitions'])} transitions"
          + ("" if not bad else "; wrong: " + ", ".join(
              f"gen {t['generation']} {t['from']}->{t['to']} {t['cause']}" for t in bad[:5])))

    iso, rst = ph_on.get("isolated"), ph_on.get("reset")
    if iso is not None:
        op = iso["operator"] or {}
        tr = [t for t in on["transitions"] if t["phase"] == "isolated"]
        c.add("isolate: traffic_ctl plugin msg circuit 'isolate e2e' succeeds; one transition "
              "closed -> isolated, cause operator",
              op.get("rc") == 0 and len(tr) == 1 and tr[0]["from"] == "closed"
              and tr[0]["to"] == "isolated" and tr[0]["cause"] == "operator",
              f"rc {op.get('rc')}, in force after {op.get('effective_s', 0) * 1e3:.0f} ms; "
              + ("; ".join(f"{t['from']} -> {t['to']} ({t['cause']})" for t in tr) or "none"))
        w = iso["wrk"]
        reqs = w["requests"] or 0
        c.add("isolated: every wrk request answered 503", reqs > 0 and w["non2xx"] == reqs,
              f"wrk: {reqs} requests, {w['non2xx']} non-2xx")
        pr = iso["probe"] or {"status": None, "headers": {}, "body": ""}
        ra = pr["headers"].get("retry-after", "-")
        c.add("isolated: the 503 names the isolated state and sends no Retry-After",
              pr["status"] == 503 and ra == "-" and pr["body"].startswith("circuit isolated"),
              f"status {pr['status']}, Retry-After {ra}, body {pr['body']!r}")
        ropt = (rst or {}).get("operator") or {}
        if "served_after" in op and "served_before" in ropt:
            served = ropt["served_before"] - op["served_after"]
            c.add("isolated: nginx served nothing from the isolation to the reset call",
                  served == 0, f"nginx served +{served}")
    if rst is not None:
        op = rst["operator"] or {}
        tr = [t for t in on["transitions"] if t["phase"] == "reset"]
        first = parse_http(op.get("first_reply") or "") or {"status": None}
        c.add("reset: traffic_ctl ... 'reset e2e' succeeds; one transition isolated -> closed, "
              "cause operator; traffic flows at once",
              op.get("rc") == 0 and len(tr) == 1 and tr[0]["from"] == "isolated"
              and tr[0]["to"] == "closed" and tr[0]["cause"] == "operator"
              and first["status"] == 200,
              f"rc {op.get('rc')}; first request after the call {first['status']} "
              f"({op.get('effective_s', 0) * 1e3:.0f} ms after it); "
              + ("; ".join(f"{t['from']} -> {t['to']} ({t['cause']})" for t in tr) or "none"))
        w = rst["wrk"]
        c.add("reset: every wrk request forwarded (2xx) and served by nginx",
              (w["requests"] or 0) > 0 and w["non2xx"] == 0 and rst["served_by_upstream"] > 0,
              f"wrk {w['requests']} requests, {w['non2xx']} non-2xx; nginx served "
              f"{rst['served_by_upstream']}")

    ms = on["metrics"]
    if ms:
        adm = prom_value(ms, "circuit_calls_admitted_total")
        settled = (prom_value(ms, "circuit_results_total")
                   + prom_value(ms, "circuit_results_late_total")
                   + prom_value(ms, "circuit_tickets_released_total"))
        c.add("Prometheus after the last phase: admitted = results + late + released (M1, "
              "quiescent)", adm == settled, f"{adm:.0f} admitted, {settled:.0f} settled")
        rj = prom_value(ms, "circuit_calls_rejected_total")
        tt = prom_value(ms, "circuit_transitions_total")
        c.add("Prometheus: rejected = the plugin's 503s in Traffic Server's access log; "
              "transitions = the transition lines in diags.log",
              rj == on["rejected_total"] and tt == len(on["transitions"]),
              f"rejected {rj:.0f} vs {on['rejected_total']}; transitions {tt:.0f} vs "
              f"{len(on['transitions'])}")
    c.add("the plugin's Prometheus rule scraped after the last phase", bool(ms),
          f"{len(ms)} samples")
    ok, detail = promtool
    c.add("promtool check metrics passes on the exposition", ok is True, detail)
    c.add("traffic_ctl metric match plugin.circuit lists the breaker's metrics",
          "plugin.circuit.e2e.admitted" in on["ctl_circuit"],
          f"{len(on['ctl_circuit'].splitlines())} lines")
    if meta.get("at8"):
        x, y = on.get("at8"), off.get("at8")
        c.add("AT8 trial ran in both arms", bool(x) and bool(y), f"on {bool(x)}, off {bool(y)}")
        if x:
            c.add("AT8 (on): the README's rule opens within 45 s of the hang",
                  x["open_after_s"] is not None and x["open_after_s"] <= 45,
                  f"opened after {x['open_after_s']} s")
            c.add("AT8 (on): then 503 + Retry-After at once (each < 1 s)",
                  x["fast_503"] > 0 and x["fast_503_max_ms"] < 1000,
                  f"{x['fast_503']} fast 503s, p50 {x['fast_503_p50_ms']} ms, "
                  f"max {x['fast_503_max_ms']} ms")
            c.add("AT8 (on): the origin held at most 60 connections in 50 s",
                  x["origin_connections"] <= 60, f"{x['origin_connections']} connections")
            c.add("AT8 (on): a 200 again once the origin heals",
                  x["recovered_after_s"] is not None, f"after {x['recovered_after_s']} s")
        if y:
            c.add("AT8 (off): no plugin 503 without the plugin", y["fast_503"] == 0,
                  f"{y['fast_503']}")
    return c


# ------------------------------------------------------------------ report --

def fmt_ms(x):
    return "-" if x is None else f"{x:.2f}"


def fmt_pct(x):
    return "-" if x is None else f"{x:+.1f} %"


def saved(on, off):
    rows = []
    for p in on["phases"]:
        if not p["outage"]:
            continue
        q = next((x for x in off["phases"] if x["id"] == p["id"]), None)
        if q is None:
            continue
        rows.append((p, q))
    return rows


def back_to_closed(run):
    """Seconds from the start of phase 'back' to the first transition to
    closed (not by the operator) in it or later; None when there is none."""
    ids = [p["id"] for p in run["phases"]]
    if "back" not in ids:
        return None
    bp = ids.index("back")
    after = set(ids[bp:])
    for t in run["transitions"]:
        if t["phase"] in after and t["to"] == "closed" and t["cause"] != "operator":
            return t["t_s"] - run["phases"][bp]["start_s"]
    return None


def headline(meta, runs, ov):
    """The summary table (Markdown lines), also quoted in the top-level README."""
    if "on" not in runs or "off" not in runs:
        return []
    on, off = runs["on"], runs["off"]
    pon = {p["id"]: p for p in on["phases"]}
    poff = {p["id"]: p for p in off["phases"]}
    L = ["| | with circuit.so | without |", "|---|--:|--:|"]

    def num(x, f="{:,.0f}"):
        return "-" if x is None else f.format(x).replace(",", " ")
    o, f = ov["on"], ov["off"]
    L.append(f"| healthy, overhead rounds (median of {meta['overhead']['rounds']}): requests/s | "
             f"{num(o['median_rps'])} | {num(f['median_rps'])} |")
    L.append(f"| ... p99 | {fmt_ms(o['median_p99_ms'])} ms | {fmt_ms(f['median_p99_ms'])} ms |")
    prof = ov.get("profile")
    if prof:
        L.append(f"| ... share of traffic_server's CPU time in circuit.so (perf, "
                 f"{prof['samples']} samples) | {prof['circuit_so_pct']:.2f} % | - |")
        if "off_api_pct" in prof:
            L.append(f"| ... share in Traffic Server's work for a plugin (hook dispatch, TS* "
                     f"calls, casts, malloc/free) | {prof['api_pct']:.2f} % | "
                     f"{prof['off_api_pct']:.2f} % |")
            L.append(f"| ... a lower bound on the plugin's cost: circuit.so + the difference | "
                     f"{prof['circuit_so_pct'] + prof['api_pct'] - prof['off_api_pct']:.2f} % "
                     f"| - |")
    L.append(f"| ... traffic_server CPU per request, median (least of the rounds) | "
             f"{num(o['median_cpu_us'], '{:.1f}')} ({num(o['min_cpu_us'], '{:.1f}')}) µs | "
             f"{num(f['median_cpu_us'], '{:.1f}')} ({num(f['min_cpu_us'], '{:.1f}')}) µs |")
    e_on, e_off = pon.get("errors1"), poff.get("errors1")
    if e_on and e_off:
        L.append(f"| 1 % upstream errors: 5xx passed on / rejected / breaker at end | "
                 f"{e_on['http_error']} / {e_on['rejected']} / {e_on['state_at_end']} | "
                 f"{e_off['http_error']} / 0 / - |")
        e1 = ov.get("errors1")
        if e1:
            eo, ef = e1["on"], e1["off"]
            L.append(f"| ... overhead rounds with 1 % errors (median of {e1['rounds']}): "
                     f"requests/s, p99, CPU per request | {num(eo['median_rps'])}, "
                     f"{fmt_ms(eo['median_p99_ms'])} ms, {num(eo['median_cpu_us'], '{:.1f}')} µs "
                     f"| {num(ef['median_rps'])}, {fmt_ms(ef['median_p99_ms'])} ms, "
                     f"{num(ef['median_cpu_us'], '{:.1f}')} µs |")
    outs = [p["id"] for p in on["phases"] if p["outage"]]
    s_on = sum(pon[i]["sent_upstream"] for i in outs)
    s_off = sum(poff[i]["sent_upstream"] for i in outs if i in poff)
    n_on = sum(pon[i]["served_by_upstream"] for i in outs)
    n_off = sum(poff[i]["served_by_upstream"] for i in outs if i in poff)
    L.append(f"| requests sent upstream during the {len(outs)} outages "
             f"({' + '.join(str(meta['phase_seconds'][meta['phases'].index(i)]) for i in outs)} s)"
             f" | {num(s_on)} | {num(s_off)} |")
    L.append(f"| ... of which nginx served | {num(n_on)} | {num(n_off)} |")
    L.append(f"| requests answered at once with 503 + Retry-After during the outages | "
             f"{num(sum(pon[i]['rejected'] for i in outs))} | 0 |")
    h_on, h_off = pon.get("hung"), poff.get("hung")
    if h_on and h_off:
        L.append(f"| client latency while the origin hangs, p50 / p99 | "
                 f"{fmt_ms(h_on['wrk']['p50_ms'])} / {fmt_ms(h_on['wrk']['p99_ms'])} ms | "
                 f"{fmt_ms(h_off['wrk']['p50_ms'])} / {fmt_ms(h_off['wrk']['p99_ms'])} ms |")
    periods = [t["open_for_s"] for t in on["transitions"]
               if t["to"] == "open" and pon.get(t["phase"], {}).get("outage")]
    b = meta["breaker"]
    L.append(f"| open periods chosen, trip then each reopen ({b['open_for_ms']} ms doubling, "
             f"cap {b['open_for_max_ms']} ms, jitter <= {b['jitter']:.0%}) | "
             f"{', '.join(f'{x:.2f}' for x in periods)} s | - |")
    btc = back_to_closed(on)
    L.append(f"| from the origin coming back to the breaker closing | "
             f"{'-' if btc is None else f'{btc:.2f} s'} | - |")
    iso = pon.get("isolated")
    if iso:
        L.append(f"| isolated ({iso['duration_s']:.0f} s): requests answered 503 / sent upstream / "
                 f"served by nginx | {num(iso['rejected'])} / {iso['sent_upstream']} / "
                 f"{iso['served_by_upstream']} | - |")
    return L


def write_markdown(meta, runs, overhead, checks, promtool):
    L = []
    add = L.append
    b = meta["breaker"]
    add(f"## libcircuit end-to-end scenario on Apache Traffic Server"
        f"{' (quick)' if meta['quick'] else ''}\n")
    add(f"{meta['versions'].get('traffic_server') or 'Traffic Server'}, "
        f"{meta['ts_threads']} event threads (proxy.config.exec_thread.limit), cache off, "
        f"origin connect/no-activity timeouts {meta['origin_timeout_s']} s; nginx (1 worker) "
        f"as the origin; load: wrk -t{meta['wrk_threads']} -c{meta['connections']} (closed "
        f"loop), everything on 127.0.0.1 of one machine. Arm **on**: the remap rule with "
        f"circuit.so; arm **off**: the same Traffic Server build and settings, the rule "
        f"without the plugin. Phases of {' '.join(map(str, meta['phase_seconds']))} s.\n")
    add("```\n" + meta["remap_on"] + "\n```\n")
    h = headline(meta, runs, overhead)
    if h:
        add("### Summary\n")
        L.extend(h)
        add("")

    ov = overhead

    def rounds_table(o2):
        add("| arm | requests/s per round | median requests/s | p99 ms per round | median p99 ms "
            "| traffic_server CPU µs/request per round | median | least |")
        add("|---|---|---:|---|---:|---|---:|---:|")
        for arm in ("on", "off"):
            o = o2[arm]
            add(f"| {arm} | {', '.join(f'{x:.0f}' for x in o['rounds_rps'])} | "
                f"{o['median_rps'] or 0:.0f} | "
                f"{', '.join(f'{x:.2f}' for x in o['rounds_p99_ms'])} | "
                f"{fmt_ms(o['median_p99_ms'])} | "
                f"{', '.join(f'{x:.1f}' for x in o['rounds_cpu_us'])} "
                f"| {'-' if o['median_cpu_us'] is None else format(o['median_cpu_us'], '.1f')} "
                f"| {'-' if o['min_cpu_us'] is None else format(o['min_cpu_us'], '.1f')} |")

    def changes(o2):
        cpu = ""
        if o2.get("cpu_change_pct") is not None:
            cpu = (f", traffic_server CPU per request {fmt_pct(o2['cpu_change_pct'])} "
                   f"({o2['cpu_added_us']:+.2f} µs; least of the rounds: "
                   f"{fmt_pct(o2['min_cpu_change_pct'])}, {o2['min_cpu_added_us']:+.2f} µs)")
        return (f"requests/s {fmt_pct(o2.get('rps_change_pct'))}, p99 "
                f"{fmt_pct(o2.get('p99_change_pct'))}{cpu}")

    add("### Overhead in the healthy state (same run, rounds alternating on/off)\n")
    rounds_table(ov)
    add(f"\nWith the plugin: {changes(ov)} (medians of {meta['overhead']['rounds']} "
        f"rounds of {meta['overhead']['seconds']} s per arm; target: requests/s within 2 %). "
        f"Both Traffic Servers run the whole time; wrk loads one at a time. CPU per request: "
        f"the CPU time of all of traffic_server's threads during the round "
        f"(/proc/PID/task/*/schedstat) over wrk's request count; it includes Traffic Server's "
        f"own work, so the difference is the plugin's cost. Requests/s and p99 move with "
        f"whatever else runs on the machine, CPU per request less (contention still adds "
        f"to it: the least of the rounds is the least disturbed); the profile below is the "
        f"most direct measure.\n")
    prof = ov.get("profile")
    if prof:
        top = ", ".join(f"{x['symbol']} {x['pct']:.2f} %" for x in prof["circuit_so_symbols"])
        dsos = ", ".join(f"{d} {p:.1f} %" for d, p in sorted(
            prof["by_dso"].items(), key=lambda kv: -kv[1])[:5])
        add(f"Profile (`perf record -e cpu-clock` on traffic_server during one more round with "
            f"the plugin, {prof['samples']} samples, kernel time included): **circuit.so "
            f"{prof['circuit_so_pct']:.2f} %** of traffic_server's CPU time ({top or 'no sample'}; "
            f"the plugin's own code and the statically linked libcircuit). By shared object: "
            f"{dsos}. Traffic Server's own dispatch of the plugin's hooks runs in "
            f"traffic_server and is not in that share"
            + (f"; its work for a plugin (traffic_server's symbols matching "
               f"/{_API_SYMBOL.pattern}/i: hook dispatch, transaction arguments, TS* calls; "
               f"libstdc++'s dynamic casts; libc's malloc/free) takes {prof['api_pct']:.2f} % with "
               f"the plugin and {prof['off_api_pct']:.2f} % without ({prof['off_samples']} "
               f"samples), so the plugin costs at least **"
               f"{prof['circuit_so_pct'] + prof['api_pct'] - prof['off_api_pct']:.2f} %** of "
               f"traffic_server's CPU: a lower bound, since the pattern leaves out what the "
               f"plugin makes Traffic Server do elsewhere (the copy of the transaction's "
               f"overridable configuration that TSHttpTxnConfigIntSet triggers, memcpy, cache "
               f"effects)" if "off_api_pct" in prof else "")
            + ".\n")
    e1 = ov.get("errors1")
    if e1:
        add("### Overhead with 1 % upstream errors (same run, rounds alternating on/off)\n")
        rounds_table(e1)
        add(f"\nBoth origins answer 500 to ~1 % of requests (non-2xx: on {e1['on']['non2xx']} of "
            f"{e1['on']['requests']}, off {e1['off']['non2xx']} of {e1['off']['requests']}). "
            f"With the plugin: {changes(e1)} (medians of {e1['rounds']} rounds of "
            f"{meta['overhead']['seconds']} s per arm). The breaker counts the failures and "
            f"stays closed.\n")

    add("### Requests per phase\n")
    add("| phase | arm | s | requests | req/s | 2xx | upstream 5xx | 502 conn | 504 timeout | "
        "503 breaker | sent upstream | served by nginx | p50 ms | p99 ms | breaker at end |")
    add("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    order = [r for r in ("on", "off") if r in runs]
    nph = max(len(runs[r]["phases"]) for r in order)
    for i in range(nph):
        for r in order:
            if i >= len(runs[r]["phases"]):
                continue
            p = runs[r]["phases"][i]
            w = p["wrk"]
            title = p["title"]
            if r == "off" and p["role"] in ("isolate", "reset"):
                title = p["id"] + " (no plugin, no call)"
            add(f"| {i + 1} {title} | {r} | {p['duration_s']:.1f} | {p['requests']} | "
                f"{w['rps'] or 0:.0f} | {p['ok']} | {p['http_error']} | {p['conn_error']} | "
                f"{p['timeout']} | {p['rejected']} | {p['sent_upstream']} | "
                f"{p['served_by_upstream']} | {fmt_ms(w['p50_ms'])} | {fmt_ms(w['p99_ms'])} | "
                f"{p['state_at_end']} |")
    add("\nCounts from Traffic Server's access log (requests started in the phase); "
        "\"sent upstream\": every request not answered by the plugin (Traffic Server forwarded "
        "it or tried to connect; without the plugin Traffic Server's own down-server cache "
        "may answer 502 without a connection attempt); \"served by nginx\": nginx's access "
        "log (a hung nginx logs nothing); req/s, p50 and p99: wrk.\n")

    if "on" in runs and "off" in runs:
        rows = saved(runs["on"], runs["off"])
        add("### Upstream requests saved during the outages\n")
        add("| phase | sent upstream on | off | saved | served by nginx on | off |")
        add("|---|---:|---:|---:|---:|---:|")
        so = sf = no = nf = 0
        for p, q in rows:
            add(f"| {p['title']} | {p['sent_upstream']} | {q['sent_upstream']} | "
                f"{q['sent_upstream'] - p['sent_upstream']} | {p['served_by_upstream']} | "
                f"{q['served_by_upstream']} |")
            so += p["sent_upstream"]
            sf += q["sent_upstream"]
            no += p["served_by_upstream"]
            nf += q["served_by_upstream"]
        pct = f" ({100.0 * (sf - so) / sf:.1f} %)" if sf else ""
        add(f"| all outages | {so} | {sf} | {sf - so}{pct} | {no} | {nf} |\n")

    if "on" in runs:
        add("### Transitions (arm on, from diags.log)\n")
        add("| t s | phase | +s in phase | from | to | cause | open for s |")
        add("|---:|---|---:|---|---|---|---:|")
        for t in runs["on"]["transitions"]:
            add(f"| {t['t_s']:.3f} | {t['phase']} | {t['t_phase_s']:.3f} | {t['from']} | "
                f"{t['to']} | {t['cause']} | "
                f"{'' if t['open_for_s'] is None else format(t['open_for_s'], '.3f')} |")
        add("")

    if any(r.get("at8") for r in runs.values()):
        add("### AT8: an origin that accepts and never answers, 4 clients\n")
        add("The origin healthy for 3 s, then hung for 50 s, then healthy again; arm on: "
            "the README's rule (`" + " ".join((runs.get("on") or {}).get("at8", {}).get("rule", []))
            + "`); arm off: the same map without the plugin (Traffic Server's own timeouts of "
            f"{meta['origin_timeout_s']} s, no retry).\n")
        add("| arm | opened after s | origin connections in 50 s | fast 503s | their p50 / p99 "
            "/ max ms | answers during the hang | longest wait s | first 200 after the heal s |")
        add("|---|---:|---:|---:|---|---|---:|---:|")
        for r in ("on", "off"):
            x = (runs.get(r) or {}).get("at8")
            if not x:
                continue
            st = ", ".join(f"{k}: {v}" for k, v in sorted(x["statuses"].items()))
            add(f"| {r} | {x['open_after_s'] if x['open_after_s'] is not None else '-'} | "
                f"{x['origin_connections']} | {x['fast_503']} | {x['fast_503_p50_ms']} / "
                f"{x['fast_503_p99_ms']} / {x['fast_503_max_ms']} | {st} | "
                f"{x['longest_wait_s']} | {x['recovered_after_s']} |")
        add("")

    if checks is not None:
        add(f"### Checks: {len(checks.items) - checks.failed} of {len(checks.items)} pass\n")
        for it in checks.items:
            add(f"- {'PASS' if it['pass'] else 'FAIL'}: {it['name']} ({it['detail']})")
        add("")
    return "\n".join(L) + "\n"


def write_json(path, meta, runs, overhead, checks, promtool):
    def phase_json(p):
        w = p["wrk"]
        pr = p["probe"]
        d = {k: p[k] for k in ("id", "title", "role", "requests", "sent_upstream",
                               "served_by_upstream", "state_at_start", "state_at_end",
                               "opened")}
        d.update({k: p[k] for k in KINDS})
        d.update(start_s=round(p["start_s"], 3), duration_s=round(p["duration_s"], 3),
                 wrk_requests=w["requests"], wrk_rps=w["rps"], p50_ms=w["p50_ms"],
                 p99_ms=w["p99_ms"], wrk_non2xx=w["non2xx"],
                 wrk_socket_errors=w["socket_errors"],
                 probe=None if pr is None else {
                     "status": pr["status"], "retry_after": pr["headers"].get("retry-after"),
                     "body": pr["body"][:200]},
                 operator=p["operator"])
        return d

    doc = {"scenario": meta, "overhead": overhead, "summary": headline(meta, runs, overhead),
           "runs": {},
           "checks": None if checks is None else checks.items}
    for r, run in runs.items():
        doc["runs"][r] = {
            "phases": [phase_json(p) for p in run["phases"]],
            "transitions": [{k: (round(v, 3) if isinstance(v, float) else v)
                             for k, v in t.items()} for t in run["transitions"]],
            "metrics": [{"name": n, "labels": lb, "value": v} for n, lb, v in run["metrics"]],
        }
        if run.get("at8"):
            doc["runs"][r]["at8"] = {k: v for k, v in run["at8"].items() if k != "requests"}
        if r == "on":
            doc["runs"][r]["promtool"] = {"pass": promtool[0], "detail": promtool[1]}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


# -------------------------------------------------------------------- plot --

BAND_COLOURS = {"closed": "#d4efd4", "open": "#f7c4c4", "half-open": "#fbe29a",
                "isolated": "#c9c3e6"}
COLS = KINDS + ["upstream", "served"]


def plot(meta, runs, out, bucket_ms):
    """Writes the plot data and e2e.gp, runs gnuplot. Returns an error text
    or None."""
    order = [r for r in ("on", "off") if r in runs and runs[r]["rates"]]
    if not order:
        return None
    for r in order:
        with open(os.path.join(runs[r]["dir"], "rates.tsv"), "w") as f:
            f.write("t_s\t" + "\t".join(COLS) + "\n")
            for row in runs[r]["rates"]:
                f.write(f"{row[0]:.3f}\t" + "\t".join(f"{v:.1f}" for v in row[1:]) + "\n")
    xmax = max(runs[r]["end_s"] for r in order) + 0.05
    n = len(order)
    g = []
    add = g.append
    add("# generated by e2e_report.py: requests/s by kind over time, breaker state as")
    add("# bands (open bands labelled with the open period chosen), phase boundaries")
    add("# dashed. Data: run-*/rates.tsv (Traffic Server's and nginx's access logs).")
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
    add("nz(c) = column(c) > 0 ? column(c) : 1/0")
    add("z0(c) = column(c) > 0 ? column(c) : 0.6")
    col = {k: i + 2 for i, k in enumerate(COLS)}
    for fmt in ("png", "svg"):
        h = 400 * n + 90
        if fmt == "png":
            add(f"set terminal pngcairo size 1500,{h} font 'Sans,11'")
        else:
            add(f"set terminal svg size 1500,{h} font 'Sans,11' background rgb 'white'")
        add(f"set output '{os.path.join(out, 'e2e.' + fmt)}'")
        add(f"set multiplot layout {n},1 title 'Traffic Server ({meta['ts_threads']} event "
            f"threads) in front of nginx: requests/s by kind, {bucket_ms} ms intervals (wrk "
            f"-t{meta['wrk_threads']} -c{meta['connections']}, closed loop)' font ',13'")
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
                    up += p["sent_upstream"]
            add(f"set label 'sent upstream during the outages: {up}' at graph 0.01, graph 0.05 "
                f"left front boxed font ',10'")
            if r == "on":
                add("set title 'with circuit.so  (background: green closed, red open with the "
                    "open period chosen, yellow half-open, violet isolated)' font ',12'")
            else:
                add("set title 'without the plugin  (the same Traffic Server; every request "
                    "is forwarded)' font ',12'")
            add("set key" if i == 0 else "unset key")
            add("set xlabel 'seconds since the scenario start'")
            rates = os.path.join(run["dir"], "rates.tsv")
            series = [("ok", "#1a9641", "2xx from nginx"),
                      ("http_error", "#8e44ad", "5xx from nginx"),
                      ("conn_error", "#8c510a", "502 no connection"),
                      ("timeout", "#e66101", "504 timeout"),
                      ("rejected", "#2166ac", "503 from the breaker")]
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
    h = parse_http("HTTP/1.1 503\nretry-after: 1\ncontent-type: text/plain\n\n"
                   "circuit open: retry after 0.5 s\n")
    expect("http status", h["status"], 503)
    expect("http retry-after", h["headers"].get("retry-after"), "1")
    expect("http body", h["body"], "circuit open: retry after 0.5 s")
    expect("http empty", parse_http(""), None)
    # Traffic Server access-log lines, as LOG_FORMAT writes them
    expect("log ok", parse_access_line("1796153760.492 0 200 200 TCP_MISS - a"),
           (1796153760.492, "ok", "a"))
    expect("log upstream 500", parse_access_line("1.5 0 500 500 TCP_MISS - x")[1], "http_error")
    expect("log refused", parse_access_line("1.5 0 502 000 ERR_CONNECT_FAIL - x")[1],
           "conn_error")
    expect("log timeout", parse_access_line("1.5 1887 504 000 ERR_READ_TIMEOUT - x")[1],
           "timeout")
    expect("log rejected", parse_access_line("1.5 0 503 000 TCP_MISS 1 x")[1], "rejected")
    expect("log isolated", parse_access_line("1.5 0 503 000 TCP_MISS - x")[1], "rejected")
    expect("log upstream 503", parse_access_line("1.5 0 503 503 TCP_MISS - x")[1], "http_error")
    expect("log garbage", parse_access_line("not a line"), None)
    tr = parse_transitions(
        "[Dec  1 19:41:01.568] [ET_NET 1] WARNING: circuit: breaker e2e: closed -> open "
        "(generation 1, cause policy, open for 0.440 s; counts: 50 successes)\n"
        "[Dec  1 19:41:02.008] [ET_NET 1] NOTE: circuit: breaker e2e: open -> half-open "
        "(generation 2, cause timer; counts: 0 successes)\n"
        "[Dec  1 19:41:11.421] traffic_server NOTE: circuit: breaker e2e: operator isolate: done\n"
        "[Dec  1 19:41:12.648] traffic_server NOTE: circuit: breaker e2e: isolated -> closed "
        "(generation 15, cause operator; counts: 0 successes)\n", 2026)
    expect("transitions", [(t["from"], t["to"], t["generation"], t["cause"], t["open_for_s"])
                           for t in tr],
           [("closed", "open", 1, "policy", 0.44), ("open", "half-open", 2, "timer", None),
            ("isolated", "closed", 15, "operator", None)])
    expect("transition ms", round(tr[1]["t"] - tr[0]["t"], 3), 0.44)
    ps, pr = parse_perf("# Samples: 8K of event 'cpu-clock'\n#\n"
                        "    26.67%  [kernel.kallsyms]     [k] pvm_irq_enable\n"
                        "     0.29%  circuit.so            [.] txn_hook\n"
                        "     0.07%  traffic_server        [.] HttpSM::state_api_callout\n")
    expect("perf samples", ps, "8K")
    expect("perf rows", pr, [(26.67, "[kernel.kallsyms]", "pvm_irq_enable"),
                             (0.29, "circuit.so", "txn_hook"),
                             (0.07, "traffic_server", "HttpSM::state_api_callout")])
    m = parse_prometheus('# HELP a_total x\n# TYPE a_total counter\na_total 3\n'
                         'b{state="open",x="q\\"z"} 1.5e0\nc 2 1700000000\n')
    expect("prom samples", m, [("a_total", {}, 3.0),
                               ("b", {"state": "open", "x": 'q\\"z'}, 1.5), ("c", {}, 2.0)])
    expect("prom value", prom_value(m, "b", state="open"), 1.5)
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
    ap = argparse.ArgumentParser(prog=PROG, description="The report of circuit-e2e from the "
                                 "raw data in --out.")
    ap.add_argument("--self-test", action="store_true", help="check the parsers and exit")
    ap.add_argument("--out", help="the scenario's output folder (scenario.json, run-on/, ...)")
    ap.add_argument("--check", action="store_true", help="exit 1 unless every check passes")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--bucket-ms", type=int, default=250, help="the plot's interval")
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test()
    if not a.out:
        ap.error("--out is required")
    try:
        meta = json.loads(read_text(os.path.join(a.out, "scenario.json")) or "null")
        if meta is None:
            raise InputError(f"no scenario.json in {a.out}")
        runs = {}
        for r in ("on", "off"):
            rdir = os.path.join(a.out, f"run-{r}")
            if os.path.exists(os.path.join(rdir, "phases.json")):
                runs[r] = load_run(rdir, r, meta, a.bucket_ms / 1e3)
        overhead = load_overhead(a.out, meta)
    except (InputError, KeyError, ValueError, OSError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    if not runs:
        print(f"{PROG}: no run data in {a.out}", file=sys.stderr)
        return 2
    promtool = (None, "no exposition scraped")
    if "on" in runs and runs["on"]["metrics_text"]:
        promtool = promtool_check(runs["on"]["metrics_text"])
    checks = run_checks(meta, runs["on"], runs["off"], overhead, promtool) \
        if "on" in runs and "off" in runs else None
    md = write_markdown(meta, runs, overhead, checks, promtool)
    with open(os.path.join(a.out, "report.md"), "w", encoding="utf-8") as f:
        f.write(md)
    write_json(os.path.join(a.out, "e2e.json"), meta, runs, overhead, checks, promtool)
    sys.stdout.write(md)
    if not a.no_plot:
        err = plot(meta, runs, a.out, a.bucket_ms)
        print(f"{PROG}: " + (err or f"plot: {a.out}/e2e.png, {a.out}/e2e.svg"), file=sys.stderr)
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
