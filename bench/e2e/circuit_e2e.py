#!/usr/bin/env python3
"""circuit-e2e: the end-to-end scenario of libcircuit on Apache Traffic Server.

SPDX-License-Identifier: MIT

Real traffic_server (2 event threads) with the circuit.so remap plugin in
front of real nginx, loaded by wrk, against the same Traffic Server without
the plugin, in one invocation:

  1. overhead   both Traffic Servers up at once, each with its own healthy
                nginx; wrk alternates between them (on, off, off, on, ...)
                for --overhead-rounds rounds: requests/s and p99 with and
                without the plugin, same run, same machine state
  2. scenario   for each arm (on = with the plugin, off = without), the
                phases, wrk running through each:
                  healthy   nginx answers 200
                  errors1   nginx answers 500 to 1 % of requests (split_clients
                            on $request_id): the breaker must stay closed
                  http503   nginx answers 503 (new config, SIGHUP)
                  down      nginx stopped: connection refused
                  hung      nginx started, then SIGSTOPped: read timeouts
                  back      hung nginx killed, healthy nginx started
                  final     healthy
                  isolated  healthy; `traffic_ctl plugin msg circuit
                            "isolate e2e"` at its start
                  reset     healthy; `... "reset e2e"` at its start
                then (full run; --at8 / --no-at8) the AT8 trial on the same
                Traffic Server: a rule with the README's example parameters
                (arm off: the same map without the plugin) in front of an
                origin in this process that hangs for 50 s, 4 clients
                (tests/trafficserver/ats_harness.py hang_trial): time to
                open, fast 503s, origin connections, recovery

This script only orchestrates and collects raw data in OUT/ (overhead.json,
run-on/, run-off/: phases.json, wrk-*.txt, Traffic Server's access log
(one line per request: time, latency, status to the client, status from the
origin, result code, Retry-After, path), its diags.log (the plugin's
transition lines), nginx's access log, the plugin's Prometheus exposition,
traffic_ctl metrics); e2e_report.py (next to this file) writes the report
(OUT/report.md, OUT/e2e.json, OUT/e2e.png/.svg) and with --check exits 1
unless the outcomes hold.

Processes: Traffic Server (traffic_manager, which launches traffic_server)
and nginx come from tests/trafficserver/ats_harness.py (the module the
plugin's own tests use: private runroot/config/log folders, free ports,
stopped by the pid it started, never by name). Every process is stopped when
this script exits, on error or SIGTERM/SIGINT too. Everything binds and
targets 127.0.0.1 only.

Exit status: 0; 1 a check failed or a run failed; 2 bad usage; 77 a tool is
missing (outside CI; with CI=true a missing tool is exit 1).
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

PROG = "circuit-e2e"
HERE = Path(__file__).resolve().parent

PHASES = ["healthy", "errors1", "http503", "down", "hung", "back", "final", "isolated",
          "reset"]
# phases during which the script fetches one reply itself, and the state it
# waits for in that reply
# (a breaker that rejects while half-open, every probe slot taken, also
# answers 503 with Retry-After: the hung phase often shows that)
PROBE_WANT = {"http503": ("open", "half-open"), "down": ("open", "half-open"),
              "hung": ("open", "half-open"), "isolated": ("isolated",)}
BREAKER = "e2e"          # the breaker's name (remap rule parameter name=)
HOST = "e2e"             # the Host of the scenario's remap rule
METRICS_HOST = "circuit-metrics"

# Traffic Server's access log: one line per transaction.
#   cqtq  client request time (epoch s, ms)    ttms  total time (ms)
#   pssc  status sent to the client            sssc  status from the origin (000: none)
#   crc   result code (TCP_MISS, ERR_CONNECT_FAIL, ERR_READ_TIMEOUT, ...)
#   {Retry-After}psh  the Retry-After sent     cqup  path (no leading '/')
LOG_FORMAT = "%<cqtq> %<ttms> %<pssc> %<sssc> %<crc> %<{Retry-After}psh> %<cqup>"

stop_requested = False


def log(*a):
    print(PROG + ":", *a, file=sys.stderr, flush=True)


class Failure(Exception):
    pass


# ------------------------------------------------------------------ nginx --

def upstream_port():
    """A free port OUTSIDE the kernel's ephemeral range. While the upstream
    is down Traffic Server makes thousands of connection attempts to it; were
    it ephemeral, one attempt could get it as its own source port and connect
    to itself (TCP simultaneous open), faking an upstream."""
    lo, hi = 32768, 60999
    try:
        lo, hi = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        pass
    a, b = (10000, lo - 1) if lo > 12000 else (hi + 1, 65535)
    for _ in range(200):
        p = random.randint(a, b)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p))
                return p
            except OSError:
                continue
    raise Failure("no free upstream port in %d-%d" % (a, b))


def children(pid):
    """The pids of pid's children: /proc/PID/task/PID/children, or, on a
    kernel without it (CONFIG_PROC_CHILDREN off), every /proc/N/stat whose
    parent pid is pid."""
    try:
        return [int(k) for k in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        pass
    kids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            st = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        fields = st[st.rfind(")") + 2:].split()   # after "pid (comm) "
        if len(fields) > 1 and fields[1] == str(pid):
            kids.append(int(d))
    return kids


class Upstream:
    """nginx as the scenario's origin: master + 1 worker in the foreground,
    every file under `folder`, one access log for the whole run (nginx
    appends across restarts). Modes (the answer to every request):
      healthy   200 "ok"
      errors1   500 to 1 % of requests (split_clients on $request_id), 200 else
      http503   503
    /ready answers like the mode but is not logged."""

    def __init__(self, harness, folder, port):
        self.h = harness
        self.folder = Path(folder)
        self.port = port
        self.proc = None
        self.stopped = False
        (self.folder / "tmp").mkdir(parents=True, exist_ok=True)

    @property
    def access_log(self):
        return self.folder / "access.log"

    def write_conf(self, mode):
        f = self.folder
        body = {"healthy": 'return 200 "ok\\n";',
                "errors1": 'if ($e2e_fail) { return 500 "upstream error\\n"; }\n'
                           '            return 200 "ok\\n";',
                "http503": 'return 503 "upstream failing\\n";'}[mode]
        ready = "503" if mode == "http503" else "200"
        (f / "nginx.conf").write_text(f"""
worker_processes 1;
pid {f}/nginx.pid;
error_log {f}/error.log notice;
events {{ worker_connections 4096; }}
http {{
    log_format e2e '$msec $status';
    access_log {f}/access.log e2e;
    client_body_temp_path {f}/tmp;
    proxy_temp_path {f}/tmp;
    fastcgi_temp_path {f}/tmp;
    uwsgi_temp_path {f}/tmp;
    scgi_temp_path {f}/tmp;
    keepalive_requests 10000000;
    keepalive_timeout 60s;
    default_type text/plain;
    split_clients "${{request_id}}" $e2e_fail {{
        1%  1;
        *   "";
    }}
    server {{
        listen 127.0.0.1:{self.port};
        location = /ready {{ access_log off; return {ready} "ready\\n"; }}
        location / {{
            {body}
        }}
    }}
}}
""")
        self.mode = mode

    def launch(self):
        f = self.folder
        self.proc = subprocess.Popen(
            ["nginx", "-p", str(f), "-c", str(f / "nginx.conf"), "-e", str(f / "error.log"),
             "-g", "daemon off;"],
            stdin=subprocess.DEVNULL, stdout=open(f / "stdout.log", "ab"),
            stderr=subprocess.STDOUT, start_new_session=True)
        self.stopped = False

    def wait_ready(self, want, timeout_s=10):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Failure("nginx exited (%s); see %s/error.log" % (self.proc.returncode, self.folder))
            try:
                if self.h.http_get(self.port, "/ready", timeout_s=1)[0] == want:
                    return
            except Exception:  # not listening yet, or the old worker closing
                pass
            time.sleep(0.05)
        raise Failure("nginx on %d did not answer %d within %g s" % (self.port, want, timeout_s))

    def start(self, mode="healthy"):
        self.write_conf(mode)
        self.launch()
        self.wait_ready(503 if mode == "http503" else 200)

    def reload(self, mode):
        """New config by SIGHUP; waits until it answers and the old worker
        has exited (no keep-alive connection gets the old answers)."""
        self.write_conf(mode)
        old = set(children(self.proc.pid))
        os.kill(self.proc.pid, signal.SIGHUP)
        self.wait_ready(503 if mode == "http503" else 200)
        deadline = time.monotonic() + 5
        while old & set(children(self.proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)

    def hang(self):
        """Started healthy, then master and worker SIGSTOPped as soon as it
        listens: the kernel accepts connections into the backlog and nobody
        answers."""
        self.write_conf("healthy")
        self.launch()
        self.h._wait_port(self.port, self.proc, "nginx", 10)
        deadline = time.monotonic() + 5
        while not children(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(self.proc.pid, signal.SIGSTOP)
        for k in children(self.proc.pid):
            os.kill(k, signal.SIGSTOP)
        self.stopped = True

    def stop(self):
        """Stops the master we started and its workers, by pid (SIGKILL when
        it was SIGSTOPped)."""
        if self.proc is None:
            return
        pid = self.proc.pid
        if self.stopped:
            kids = children(pid)
            for k in kids + [pid]:
                try:
                    os.kill(k, signal.SIGKILL)
                    os.kill(k, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        else:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(pid, signal.SIGKILL)
            self.proc.wait()
        # the workers are the master's children: gone with it (it waits for
        # them on SIGTERM; on SIGKILL they were killed by pid above)
        self.proc = None
        self.stopped = False

    def served(self):
        try:
            with open(self.access_log, "rb") as f:
                return sum(1 for _ in f)
        except FileNotFoundError:
            return 0


# ---------------------------------------------------------- Traffic Server --

def make_ts_class(harness):
    class E2ETrafficServer(harness.TrafficServer):
        """The harness's Traffic Server plus an access log in LOG_FORMAT."""

        def _write_layout(self):
            super()._write_layout()
            (self.etc / "logging.yaml").write_text(
                "logging:\n  formats:\n    - name: e2e\n      format: '%s'\n"
                "  logs:\n    - filename: e2e\n      format: e2e\n      mode: ascii\n"
                % LOG_FORMAT)

        @property
        def access_log(self):
            return self.log / "e2e.log"

    return E2ETrafficServer


def ts_records(a):
    return [
        "CONFIG proxy.config.log.logging_enabled INT 3",
        "CONFIG proxy.config.log.max_secs_per_buffer INT 1",
        # a hung origin: answered 504 after ~1-2 s (whole seconds only)
        f"CONFIG proxy.config.http.transaction_no_activity_timeout_out INT {a.origin_timeout_s}",
        f"CONFIG proxy.config.http.connect_attempts_timeout INT {a.origin_timeout_s}",
    ]


def breaker_params(a):
    return [f"name={BREAKER}", f"policy=failure-rate:{a.ratio}:{a.min_results}",
            f"window={a.window}", f"probes={a.probes}", f"successes={a.close_after}",
            f"open-for={a.open_for_ms}ms", f"open-for-max={a.open_for_max_ms}ms",
            f"jitter={a.jitter}", f"probe-timeout={a.probe_timeout_ms}ms",
            f"timeout={a.origin_timeout_s}s", "failure-status=500-599"]


def remap_lines(arm, plugin, port, a):
    origin = f"http://127.0.0.1:{port}/"
    if arm == "off":
        return [f"map http://{HOST}/ {origin}"]
    pp = " ".join("@pparam=" + p for p in breaker_params(a))
    return [f"map http://{HOST}/ {origin} @plugin={plugin} {pp}",
            f"map http://{METRICS_HOST}/ {origin} @plugin={plugin} @pparam=metrics"]


# -------------------------------------------------------------------- load --

def wrk(port, seconds, out, a):
    """wrk through Traffic Server's scenario rule; output kept in `out`."""
    cmd = ["wrk", f"-t{a.wrk_threads}", f"-c{a.connections}", f"-d{seconds}s", "--timeout", "5s",
           "--latency", "-H", f"Host: {HOST}", f"http://127.0.0.1:{port}/"]
    with open(out, "w") as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)
        try:
            rc = p.wait(timeout=seconds + 30)
        except subprocess.TimeoutExpired:
            raise Failure("wrk did not finish: " + " ".join(cmd))
        finally:
            if p.poll() is None:   # timed out, or interrupted
                p.kill()
                p.wait()
    if rc != 0:
        log(f"wrk exited with {rc} ({out})")
    return Path(out).read_text()


def reply_text(status, headers, body):
    lines = [f"HTTP/1.1 {status}"] + [f"{k}: {v}" for k, v in headers.items()]
    return "\n".join(lines) + "\n\n" + body.decode(errors="replace")


def get_reply(h, port, path="/", host=HOST, timeout_s=3):
    try:
        return h.http_get(port, path, host=host, timeout_s=timeout_s)
    except Exception as e:  # refused, reset, timed out, bad status line
        return None, {}, str(e).encode()


def probe_rejection(h, port, out, start_s, end_s, want):
    """From start_s to end_s after now, asks Traffic Server directly (not
    through wrk), 150 ms apart, until it answers 503 naming the first state
    of `want` (the plugin's body starts "circuit <state>"). `out` gets that
    reply, else the last 503 naming a state of `want`, else the last 503,
    else the last reply."""
    t0 = time.monotonic()
    time.sleep(start_s)
    best = None
    while time.monotonic() - t0 < end_s and not stop_requested:
        st, hd, body = get_reply(h, port, "/probe")
        named = st == 503 and any(body.startswith(f"circuit {w}".encode()) for w in want)
        if named and body.startswith(f"circuit {want[0]}".encode()):
            best = (st, hd, body, True)
            break
        if best is None or (st == 503 and not best[3]) or named:
            best = (st, hd, body, named)
        time.sleep(0.15)
    if best is not None:
        Path(out).write_text(reply_text(*best[:3]))


# ------------------------------------------------------------------ a run --

def wait_for(pred, timeout_s, every_s=0.05):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(every_s)
    return None


def operator_call(ts, verb, rdir, up, a):
    """The operator's call at the start of phase isolated/reset (arm on):
    traffic_ctl plugin msg, then wait until Traffic Server answers as the
    call says (the message is delivered asynchronously). Returns what the
    report needs."""
    rec = {"verb": verb}
    if verb == "reset":
        rec["served_before"] = up.served()
    t = time.time()
    r = ts.ctl("plugin", "msg", "circuit", f"{verb} {BREAKER}", check=False)
    rec.update(t_call=t, rc=r.returncode, out=(r.stdout + r.stderr).strip())
    want = 503 if verb == "isolate" else 200
    got = wait_for(lambda: (lambda x: x if x[0] == want else None)(
        get_reply(ts.h, ts.port, f"/{verb}-check")), 5, 0.02)
    rec["t_effective"] = time.time()
    rec["effective_s"] = rec["t_effective"] - t
    rec["first_reply"] = reply_text(*got) if got else None
    if verb == "isolate":
        # nginx's count once the isolation is in force: the report checks
        # that it does not grow until the reset call
        time.sleep(0.05)
        rec["served_after"] = up.served()
    return rec


def flush_access_log(ts, tag, timeout_s=15):
    """Traffic Server writes its access log from a buffer: asks for /TAG
    until its line is there, so that the log holds every earlier request."""
    def there():
        try:
            with open(ts.access_log, "rb") as f:
                f.seek(max(0, os.path.getsize(ts.access_log) - 65536))
                return (" " + tag + "\n").encode() in f.read()
        except OSError:
            return False
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        get_reply(ts.h, ts.port, "/" + tag)
        if wait_for(there, 1.2, 0.1):
            return True
    log(f"warning: the access log of {ts.folder} did not show /{tag} within {timeout_s} s")
    return False


def run_scenario(arm, ts, up, a, out, durations):
    R = out / f"run-{arm}"
    shutil.rmtree(R, ignore_errors=True)
    R.mkdir(parents=True)
    # everything before this run in the logs is cut off by time: t0
    flush_access_log(ts, f"__begin_{arm}")
    marks = []
    log(f"run '{arm}': Traffic Server on 127.0.0.1:{ts.port} (pid {ts.server_pid}), nginx on "
        f"127.0.0.1:{up.port}, phases {' '.join(map(str, durations))} s")
    for i, pid in enumerate(PHASES):
        if stop_requested:
            raise Failure("interrupted")
        d = durations[i]
        # the upstream's condition first, then the mark
        if pid == "errors1":
            up.reload("errors1")
        elif pid == "http503":
            up.reload("http503")
        elif pid == "down":
            up.stop()
        elif pid == "hung":
            up.hang()
        elif pid == "back":
            up.stop()
            up.start("healthy")
        mark = {"phase": pid, "t": time.time(), "served": up.served(), "duration_s": d}
        if arm == "on" and pid in ("isolated", "reset"):
            mark["operator"] = operator_call(ts, "isolate" if pid == "isolated" else "reset", R, up, a)
        log(f"run '{arm}': phase {i + 1}/{len(PHASES)} {pid} ({d} s)")
        prober = None
        want = PROBE_WANT.get(pid)
        if want and (arm == "on" or pid != "isolated"):
            prober = threading.Thread(target=probe_rejection, daemon=True, args=(
                ts.h, ts.port, R / f"probe-{pid}.txt", d * 0.4, d * 0.85, want))
            prober.start()
        wrk(ts.port, d, R / f"wrk-{pid}.txt", a)
        if prober:
            prober.join(10)
        marks.append(mark)
    marks.append({"phase": "end", "t": time.time(), "served": up.served()})
    # the plugin's exposition and Traffic Server's metrics, after the last phase
    if arm == "on":
        st, hd, body = get_reply(ts.h, ts.port, "/metrics", host=METRICS_HOST)
        (R / "metrics.txt").write_bytes(body if st == 200 else b"")
        if st != 200:
            log(f"run '{arm}': the metrics rule answered {st}")
    for pat, name in (("plugin.circuit", "ctl-circuit.txt"),
                      ("proxy.process.http.*_responses", "ctl-responses.txt")):
        r = ts.ctl("metric", "match", pat, check=False)
        (R / name).write_text(r.stdout)
    flush_access_log(ts, f"__end_{arm}")
    (R / "phases.json").write_text(json.dumps({"arm": arm, "marks": marks}, indent=1) + "\n")
    return R


def readme_rule_params():
    """The @pparam words of the README's example remap line (AT8's rule)."""
    text = (HERE.parent.parent / "README.md").read_text()
    m = re.search(r"^map http://shop\.example/ \S+ @plugin=circuit\.so (.*)$", text, re.M)
    if not m:
        raise Failure("README.md has no example line 'map http://shop.example/ ...'")
    return re.findall(r"@pparam=(\S+)", m.group(1))


def at8_trial(arm, ts, plugin, a, R):
    """AT8 on this arm's Traffic Server: a new rule (Host: at8) in front of a
    HangingOrigin, added by a reload (the scenario's breaker is kept, AT6);
    figures and raw requests to R/at8.json."""
    h = ts.h
    params = readme_rule_params()
    with h.HangingOrigin() as origin:
        line = f"map http://at8/ http://127.0.0.1:{origin.port}/"
        if arm == "on":
            line += f" @plugin={plugin} " + " ".join("@pparam=" + p for p in params)
        loads = ts.diags().count("remap.config finished loading")
        ts.reload(ts.remap + [line])
        if not wait_for(lambda: ts.diags().count("remap.config finished loading") > loads, 40):
            raise Failure("the reload adding the AT8 rule was not applied")
        log(f"run '{arm}': AT8 trial: 4 clients, origin healthy 3 s, hung 50 s, healthy again")
        fig = h.hang_trial(ts.port, "at8", origin, path="/at8")
    fig["rule"] = ([] if arm == "off" else params)
    (R / "at8.json").write_text(json.dumps(fig) + "\n")
    log(f"run '{arm}': AT8: opened after {fig['open_after_s']} s, {fig['fast_503']} fast 503s, "
        f"{fig['origin_connections']} origin connections in 50 s")


def collect(arm, ts, up, R):
    """Copies the logs into the run folder (after Traffic Server stopped)."""
    for src, dst in ((ts.access_log, "ts-access.log"), (ts.log / "diags.log", "diags.log"),
                     (up.access_log, "nginx-access.log")):
        if Path(src).exists():
            shutil.copy(src, R / dst)


def cpu_ns(pid):
    """CPU time (ns) of every thread of process pid so far, from
    /proc/PID/task/*/schedstat (first field: time on the CPU)."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for t in tasks:
        try:
            total += int(Path(f"/proc/{pid}/task/{t}/schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass   # a thread that just ended
    return total


def overhead(tss, ups, a, out):
    """wrk alternates between the two Traffic Servers (an nginx behind
    each): on, off, off, on, on, off, ... so neither arm always goes first;
    first with healthy origins (--overhead-rounds), then with both origins
    answering 500 to ~1 % of requests (half as many rounds, at least 2: the
    breaker must stay closed and cost nothing more there). Each round also
    records traffic_server's CPU time (all its threads), so the report can
    give CPU per request, which other load on the machine disturbs less than
    requests/s."""
    O = out / "overhead"
    shutil.rmtree(O, ignore_errors=True)
    O.mkdir(parents=True)
    rounds = []
    for cond, n in (("healthy", a.overhead_rounds), ("errors1", max(2, a.overhead_rounds // 2))):
        if cond != "healthy":
            for up in ups.values():
                up.reload(cond)
        for r in range(n):
            order = ("on", "off") if r % 2 == 0 else ("off", "on")
            for arm in order:
                if stop_requested:
                    raise Failure("interrupted")
                f = O / f"wrk-{cond}-{r + 1}-{arm}.txt"
                c0 = cpu_ns(tss[arm].server_pid)
                wrk(tss[arm].port, a.overhead_s, f, a)
                c1 = cpu_ns(tss[arm].server_pid)
                rounds.append({"cond": cond, "round": r + 1, "arm": arm, "file": f.name,
                               "ts_cpu_ns": None if c0 is None or c1 is None else c1 - c0})
        log(f"overhead: {n} rounds of {a.overhead_s} s per arm, origin {cond}, done")
        if cond == "healthy" and not a.no_profile:
            for arm in ("on", "off"):
                profile(arm, tss[arm], a, O)
    for up in ups.values():
        up.reload("healthy")
    return rounds


def profile(arm, ts, a, O):
    """One more round on the arm under `perf record -e cpu-clock` (a
    software clock: works without hardware counters) on traffic_server's
    pid: which share of its CPU time (kernel included) is spent in circuit.so
    and, compared with the arm without the plugin, in Traffic Server's own
    plugin-API code. Leaves overhead/perf-ARM.txt (perf report by shared
    object and symbol); skipped with a note when perf is missing or fails."""
    if shutil.which("perf") is None:
        log("overhead: perf not found (apt-get install linux-perf): no profile")
        return
    data = O / "perf.data"
    secs = max(4, 4 * a.overhead_s)
    w = subprocess.Popen(["wrk", f"-t{a.wrk_threads}", f"-c{a.connections}", f"-d{secs + 2}s",
                          "-H", f"Host: {HOST}", f"http://127.0.0.1:{ts.port}/"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1)
        r = subprocess.run(["perf", "record", "-e", "cpu-clock", "-F", "4000", "-p",
                            str(ts.server_pid), "-o", str(data), "--", "sleep", str(secs)],
                           capture_output=True, text=True, timeout=secs + 60)
        if r.returncode != 0:
            log("overhead: perf record failed: " + r.stderr.strip()[-300:])
            return
        r = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "--sort",
                            "dso,sym", "--stdio", "-g", "none", "--percent-limit", "0.01"],
                           capture_output=True, text=True, timeout=120)
        (O / f"perf-{arm}.txt").write_text(r.stdout)
    except subprocess.TimeoutExpired:
        log("overhead: perf timed out: no profile")
    finally:
        if w.poll() is None:
            w.kill()
        w.wait()
        data.unlink(missing_ok=True)
        Path(str(data) + ".old").unlink(missing_ok=True)


# -------------------------------------------------------------------- main --

def import_harness(path):
    sys.path.insert(0, str(path))
    try:
        import ats_harness
    except ImportError as e:
        raise Failure(f"cannot import ats_harness from {path}: {e}") from None
    return ats_harness


def missing_tools(a):
    need = [("traffic_server", "trafficserver"), ("traffic_manager", "trafficserver"),
            ("traffic_ctl", "trafficserver"), ("nginx", "nginx-light"), ("wrk", "wrk")]
    if a.check:
        need.append(("promtool", "prometheus"))
    if not a.no_plot and os.environ.get("CI") == "true":
        need.append(("gnuplot", "gnuplot-nox"))   # elsewhere: a report without the plot
    return [f"{t} (apt-get install {p})" for t, p in need if shutil.which(t) is None]


def main(argv):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    ap.add_argument("--plugin", help="circuit.so (the build's src/trafficserver/circuit.so)")
    ap.add_argument("--harness", default=str(HERE.parent.parent / "tests" / "trafficserver"),
                    help="folder of ats_harness.py (default: the source tree's tests/trafficserver)")
    ap.add_argument("--out", default="e2e-out")
    ap.add_argument("--quick", action="store_true",
                    help="shortened: 1-2 s phases, 2 overhead rounds of 1 s (about 75 s)")
    ap.add_argument("--check", action="store_true", help="exit 1 unless the outcomes hold")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--phase-s", type=int, default=4, help="seconds per phase (full run)")
    ap.add_argument("--overhead-rounds", type=int, default=None)
    ap.add_argument("--overhead-s", type=int, default=None)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--wrk-threads", type=int, default=2)
    ap.add_argument("--ts-threads", type=int, default=2, help="Traffic Server event threads")
    ap.add_argument("--window", type=int, default=100)
    ap.add_argument("--probes", type=int, default=2)
    ap.add_argument("--min-results", type=int, default=20)
    ap.add_argument("--ratio", type=float, default=0.5)
    ap.add_argument("--close-after", type=int, default=3)
    ap.add_argument("--open-for-ms", type=int, default=None, help="default 1000 (quick 500)")
    ap.add_argument("--open-for-max-ms", type=int, default=None, help="default 3000 (quick 1500)")
    ap.add_argument("--jitter", type=float, default=0.2)
    ap.add_argument("--probe-timeout-ms", type=int, default=3000)
    ap.add_argument("--origin-timeout-s", type=int, default=1,
                    help="Traffic Server's origin connect and no-activity timeouts (whole s)")
    ap.add_argument("--no-profile", action="store_true",
                    help="no perf profile of traffic_server after the overhead rounds")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (OUT/work)")
    ap.add_argument("--at8", dest="at8", action="store_true", default=None,
                    help="run the AT8 trial after the phases (default: in the full run)")
    ap.add_argument("--no-at8", dest="at8", action="store_false",
                    help="no AT8 trial (the default with --quick; ctest AT8_... runs it)")
    ap.add_argument("--deadline-s", type=int, default=None,
                    help="stop everything and fail after this many seconds (default 240, "
                         "full run 600, 840 with the AT8 trial): inside ctest's TIMEOUT, "
                         "whose kill would leave "
                         "Traffic Server and nginx running")
    a = ap.parse_args(argv)

    if a.quick:
        durations = [1, 2, 2, 2, 2, 2, 2, 1, 1]
        a.open_for_ms = a.open_for_ms or 500
        a.open_for_max_ms = a.open_for_max_ms or 1500
        a.overhead_rounds = a.overhead_rounds or 2
        a.overhead_s = a.overhead_s or 1
    else:
        durations = [a.phase_s] * len(PHASES)
        a.open_for_ms = a.open_for_ms or 1000
        a.open_for_max_ms = a.open_for_max_ms or 3000
        a.overhead_rounds = a.overhead_rounds or 12
        a.overhead_s = a.overhead_s or 2
    if a.open_for_max_ms < a.open_for_ms:
        ap.error("--open-for-max-ms must be >= --open-for-ms")
    if a.at8 is None:
        a.at8 = not a.quick

    miss = missing_tools(a)
    if miss:
        if os.environ.get("CI") == "true":
            log("FAIL (CI=true): missing: " + ", ".join(miss))
            return 1
        log("SKIP: missing: " + ", ".join(miss))
        return 77
    plugin = Path(a.plugin or "").resolve()
    if not a.plugin or not plugin.is_file():
        log(f"circuit.so not found at {a.plugin} (--plugin)")
        return 2
    report_py = HERE / "e2e_report.py"

    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()

    def on_signal(sig, frame):
        global stop_requested
        stop_requested = True
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGALRM, on_signal)
    signal.alarm(a.deadline_s or (240 if a.quick else (840 if a.at8 else 600)))

    h = import_harness(a.harness)
    TS = make_ts_class(h)
    ups, tss = {}, {}
    status = 0
    try:
        for arm in ("on", "off"):
            ups[arm] = Upstream(h, work / f"nginx-{arm}", upstream_port())
            ups[arm].start("healthy")
            tss[arm] = TS(work / f"ats-{arm}", remap=remap_lines(arm, plugin, ups[arm].port, a),
                          plugins=[str(plugin)] if arm == "on" else [],
                          records=ts_records(a), threads=a.ts_threads)
            tss[arm].h = h
        # both Traffic Servers start at once (each takes ~10 s)
        errs = {}

        def start(arm):
            try:
                tss[arm].start(timeout_s=60)
            except Exception as e:  # reported below
                errs[arm] = e
        th = [threading.Thread(target=start, args=(arm,)) for arm in tss]
        for t in th:
            t.start()
        for t in th:
            t.join()
        if errs:
            raise Failure("Traffic Server did not start: " + "; ".join(
                f"{k}: {v}" for k, v in errs.items()))
        for arm in tss:
            st, _, body = get_reply(h, tss[arm].port, "/")
            if st != 200:
                raise Failure(f"Traffic Server ({arm}) answers {st} through the scenario rule"
                              f" ({body[:200]!r})")
        started = time.time()
        rounds = overhead(tss, ups, a, out)
        runs = {}
        for arm in ("on", "off"):
            runs[arm] = run_scenario(arm, tss[arm], ups[arm], a, out, durations)
            if a.at8:
                at8_trial(arm, tss[arm], plugin, a, runs[arm])
            tss[arm].stop()
            ups[arm].stop()
            collect(arm, tss[arm], ups[arm], runs[arm])
        meta = {
            "started": started, "quick": a.quick, "phase_seconds": durations,
            "phases": PHASES, "wrk_threads": a.wrk_threads, "connections": a.connections,
            "ts_threads": a.ts_threads, "origin_timeout_s": a.origin_timeout_s,
            "at8": a.at8, "breaker_name": BREAKER,
            "breaker": {"window": a.window, "probes": a.probes, "min_results": a.min_results,
                        "ratio": a.ratio, "close_after": a.close_after,
                        "open_for_ms": a.open_for_ms, "open_for_max_ms": a.open_for_max_ms,
                        "jitter": a.jitter, "probe_timeout_ms": a.probe_timeout_ms},
            "remap_on": remap_lines("on", "circuit.so", "PORT", a)[0],
            "overhead": {"rounds": a.overhead_rounds, "seconds": a.overhead_s,
                         "files": rounds},
            "versions": {"traffic_server": subprocess.run(
                ["traffic_server", "--version"], capture_output=True, text=True).stdout.strip()
                .splitlines()[0] if shutil.which("traffic_server") else None},
        }
        (out / "scenario.json").write_text(json.dumps(meta, indent=1) + "\n")
    except (Failure, KeyboardInterrupt, OSError, RuntimeError) as e:
        log(f"failed: {e!r}")
        status = 1
    finally:
        signal.alarm(0)
        for arm in list(tss):
            tss[arm].stop()
        for arm in list(ups):
            ups[arm].stop()
        if status == 0 and not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    if status != 0:
        return status
    cmd = [sys.executable, str(report_py), "--out", str(out)]
    if a.check:
        cmd.append("--check")
    if a.no_plot:
        cmd.append("--no-plot")
    return subprocess.run(cmd).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
