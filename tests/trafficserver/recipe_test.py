#!/usr/bin/env python3
"""docs/TRAFFICSERVER.md, run as written (ctest trafficserver_recipe).

The guide marks each block with `<!-- ts-recipe:NAME -->` on the line before
its fence. This test
  1. copies the source tree (what git tracks, as on disk) to WORK/src;
  2. runs the block `build` there verbatim in bash -e, with DESTDIR=WORK/dest
     exported so that the install lands under WORK/dest;
  3. writes a private Traffic Server configuration (a copy of
     /etc/trafficserver, tests/trafficserver/ats_harness.py) and runs the
     blocks `plugin.config` and `remap.config` verbatim but for the folder:
     /etc/trafficserver is replaced by the private copy, and the origin port
     8081 by the port of a private nginx;
  4. starts that Traffic Server (in place of the block `restart`; with
     traffic_manager, for traffic_ctl) with the installed circuit.so as its
     plugin folder, and runs the blocks request, metrics, prometheus,
     isolate, reset with port 8080 replaced by the proxy's port and
     traffic_ctl pointed at the private instance, checking what each shows;
  5. writes the block `prometheus.yml` (the target's port replaced, the
     scrape interval cut to 1 s), checks it with `promtool check config`
     and runs the real `prometheus` on it until the job `circuit` is up and
     the breaker's series are stored (AT9: a plain scrape, no Host header
     set);
  6. runs section 7, the private instance, verbatim but for the ports (8090:
     a free port; 8081: the nginx) with HOME=WORK/home: private-layout,
     private-start, private-use (checking its answers and the log line),
     private-stop (checking that traffic_manager and traffic_server are
     gone). Each block runs in a process group of its own, as a script an
     operator runs from an interactive shell: when its shell exits, what it
     left in that group is orphaned. The test checks that private-start's
     traffic_manager is out of it (traffic_server's crash logger, stopped
     until a crash, must still be there, not woken by SIGHUP, and
     traffic_manager must not have reread its configuration), and that no
     crash log was written, neither in the instance's log folder nor in
     the system's.
Throughout, the system's /var/log/trafficserver must gain no file.
The block `apt` is not run (.ci/run installs those packages and more).
Processes are stopped by the pid the harness started, pass or fail.

usage: recipe_test.py SOURCE_DIR WORK
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ats_harness import Nginx, TrafficServer, _stop_pid, free_port  # noqa: E402


def blocks(guide):
    out = {}
    lines = guide.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = re.fullmatch(r"<!-- ts-recipe:(\S+) -->", lines[i])
        if m:
            i += 1
            if not lines[i].startswith("```"):
                raise SystemExit("ts-recipe:%s is not followed by a fence" % m.group(1))
            body = []
            i += 1
            while not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            out[m.group(1)] = "\n".join(body) + "\n"
        i += 1
    return out


def run(script, cwd, env, what):
    print("---- %s:\n%s----" % (what, script))
    # a group of its own, like a job of an interactive shell (process_group
    # needs Python 3.11)
    r = subprocess.run(["bash", "-e", "-c", script], cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=600, stdin=subprocess.DEVNULL,
                       preexec_fn=os.setpgrp)
    print(r.stdout + r.stderr)
    if r.returncode != 0:
        raise SystemExit("block %s failed with status %d" % (what, r.returncode))
    return r.stdout


def expect(cond, what):
    if not cond:
        raise SystemExit("FAIL: " + what)
    print("ok:", what)


def wait_for(what, pred, timeout_s=45):
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise SystemExit("FAIL: timed out waiting: " + what)
        time.sleep(0.2)
    print("ok:", what)


SYSTEM_LOG = Path("/var/log/trafficserver")


def system_logs():
    """The names in the system's Traffic Server log folder (none if absent)."""
    try:
        return {p.name for p in SYSTEM_LOG.iterdir()}
    except OSError:
        return set()


def main():
    before = system_logs()
    try:
        return recipe()
    finally:
        new = sorted(system_logs() - before)
        if new:
            print("FAIL: the test left new files in %s: %s" % (SYSTEM_LOG, " ".join(new)))
            sys.exit(1)
        print("ok: nothing new in %s (%d files before and after)" % (SYSTEM_LOG, len(before)))


def recipe():
    src, work = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    missing = [p for p in ("traffic_server", "traffic_manager", "traffic_ctl", "nginx", "curl")
               if shutil.which(p) is None]
    if missing:
        print(("FAIL" if os.environ.get("CI") == "true" else "SKIP") + ": not installed: "
              + " ".join(missing))
        return 1 if os.environ.get("CI") == "true" else 77
    b = blocks(src / "docs" / "TRAFFICSERVER.md")
    for name in ("apt", "build", "plugin.config", "remap.config", "restart", "request",
                 "metrics", "prometheus", "prometheus.yml", "isolate", "reset",
                 "private-layout", "private-start", "private-use", "private-stop"):
        expect(name in b, "the guide has the block " + name)

    shutil.rmtree(work, ignore_errors=True)
    (work / "src").mkdir(parents=True)
    files = subprocess.run(["git", "-C", str(src), "ls-files", "-z", "--cached", "--others",
                            "--exclude-standard"], capture_output=True, check=True).stdout
    for f in files.decode().split("\0"):
        p = src / f
        if f and p.is_file():
            (work / "src" / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, work / "src" / f)

    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env["DESTDIR"] = str(work / "dest")
    run(b["build"], work / "src", env, "build")
    plugin_dir = subprocess.run(["tsxs", "-q", "LIBEXECDIR"], capture_output=True, text=True,
                                check=True).stdout.strip()
    installed = Path(str(work / "dest") + plugin_dir)
    expect((installed / "circuit.so").is_file(),
           "the build block installed circuit.so where tsxs -q LIBEXECDIR says (%s, under DESTDIR)"
           % plugin_dir)

    with Nginx(work / "nginx") as origin:
        ts = TrafficServer(work / "ats", remap=[], plugins=[], manager=True,
                           plugin_dir=str(installed))
        try:
            ts.write_layout()
            etc = str(ts.etc)
            for name in ("plugin.config", "remap.config"):
                script = b[name].replace("/etc/trafficserver", etc).replace(
                    "127.0.0.1:8081", "127.0.0.1:%d" % origin.port)
                run(script, work, env, name)
            ts.start(write_config=False)
            ctl = "traffic_ctl() { command traffic_ctl --run-root=%s \"$@\"; }\n" % ts.runroot

            def block(name):
                script = ctl + b[name].replace("127.0.0.1:8080", "127.0.0.1:%d" % ts.port)
                return run(script, work, env, name)

            out = block("request")
            expect(re.search(r"^HTTP/1\.1 200", out, re.M) and "ok" in out,
                   "request: 200 from the origin through the rule")
            wait_for("the metrics reach traffic_ctl", lambda: "plugin.circuit.shop.admitted 1"
                     in ts.ctl("metric", "match", "circuit").stdout)
            out = block("metrics")
            expect("plugin.circuit.shop.state 1" in out and "plugin.circuit.shop.successes 1" in out,
                   "metrics: shop closed, one success")
            out = block("prometheus")
            expect('circuit_state{breaker="shop",state="closed"} 1' in out and
                   'circuit_calls_admitted_total{breaker="shop"} 1' in out,
                   "prometheus: the exposition of shop")
            block("isolate")
            wait_for("the isolation is applied", lambda: "operator isolate: done" in ts.diags())
            out = block("request")
            expect(re.search(r"^HTTP/1\.1 503", out, re.M) and "retry-after" not in out.lower()
                   and "isolated" in out, "request while isolated: 503 without Retry-After")
            block("reset")
            wait_for("the reset is applied", lambda: "operator reset: done" in ts.diags())
            out = block("request")
            expect(re.search(r"^HTTP/1\.1 200", out, re.M), "request after the reset: 200")
            scrape(b["prometheus.yml"], ts.port, work, env)
        finally:
            ts.stop()
        private_instance(b, origin.port, work, env)
    print("recipe: ok")
    return 0


def scrape(block, proxy_port, work, env):
    """The guide's scrape job, run by the real prometheus until it has
    scraped the breaker's series (AT9)."""
    conf = work / "prometheus.yml"
    conf.write_text(block.replace("127.0.0.1:8080", "127.0.0.1:%d" % proxy_port)
                    .replace("scrape_interval: 15s", "scrape_interval: 1s"))
    r = subprocess.run(["promtool", "check", "config", str(conf)], capture_output=True, text=True)
    expect(r.returncode == 0, "promtool check config accepts the guide's scrape job: "
           + r.stdout + r.stderr)
    port = free_port()
    shutil.rmtree(work / "prom", ignore_errors=True)
    proc = subprocess.Popen(["prometheus", "--config.file=%s" % conf,
                             "--storage.tsdb.path=%s" % (work / "prom"),
                             "--web.listen-address=127.0.0.1:%d" % port],
                            stdin=subprocess.DEVNULL, stdout=open(work / "prometheus.log", "wb"),
                            stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def query(q):
        url = "http://127.0.0.1:%d/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": q}))
        try:
            with urllib.request.urlopen(url, timeout=2) as f:
                return json.load(f)["data"]["result"]
        except (OSError, ValueError, KeyError):
            return []
    try:
        wait_for("prometheus scraped the job circuit: up 1",
                 lambda: any(x["value"][1] == "1" for x in query('up{job="circuit"}')), 60)
        wait_for("and stored circuit_state{breaker=\"shop\"}",
                 lambda: query('circuit_state{job="circuit",breaker="shop"}'), 30)
    finally:
        _stop_pid(proc.pid, signal.SIGTERM)
        proc.wait()


def private_instance(b, origin_port, work, env):
    """Section 7 as written: ports 8090 and 8081 replaced, HOME its own."""
    env = dict(env)
    env.pop("DESTDIR", None)
    env["HOME"] = str(work / "home")
    shutil.rmtree(work / "home", ignore_errors=True)
    (work / "home").mkdir()
    ats = work / "home" / "ats"
    port = free_port()
    prelude = "ats=$HOME/ats\n"

    def block(name):
        script = b[name].replace("8090", str(port)).replace("127.0.0.1:8081",
                                                           "127.0.0.1:%d" % origin_port)
        return run(script if name == "private-layout" else prelude + script, work / "src", env,
                   name)

    manager = server = None
    try:
        block("private-layout")
        try:
            block("private-start")
        finally:
            if (ats / "manager.pid").exists():
                manager = int((ats / "manager.pid").read_text())
        for _ in range(100):
            try:
                kids = Path("/proc/%d/task/%d/children" % (manager, manager)).read_text().split()
            except OSError:
                kids = []
            if kids:
                server = int(kids[0])
                break
            time.sleep(0.1)
        expect(manager and server, "private-start: traffic_manager (pid %s) runs traffic_server "
               "(pid %s)" % (manager, server))
        # the block's shell has exited: traffic_manager must be in a session
        # of its own, so that traffic_server's crash logger still waits
        # (stopped) instead of being woken by SIGHUP and writing a crash log
        time.sleep(1)
        expect(os.getsid(manager) == manager,
               "private-start: traffic_manager leads a session of its own (setsid)")
        crashlog = [k for k in children(server) if exe(k).endswith("traffic_crashlog")]
        expect(len(crashlog) == 1 and state(crashlog[0]) == "T",
               "traffic_server's crash logger waits, stopped (%r)"
               % [(k, state(k)) for k in crashlog])
        out = block("private-use")
        expect(re.search(r"^HTTP/1\.1 200", out, re.M) and
               'circuit_state{breaker="shop",state="closed"} 1' in out and
               "breaker shop: operator isolate: done" in out,
               "private-use: 200 through the rule, the exposition, the isolation in diags.log")
        expect("due to SIGHUP" not in (ats / "log" / "manager.log").read_text(errors="replace"),
               "traffic_manager got no SIGHUP (manager.log)")
        block("private-stop")

        def alive(pid):
            try:
                st = Path("/proc/%d/stat" % pid).read_text()
            except OSError:
                return False
            return st.rsplit(")", 1)[1].split()[0] != "Z"   # a zombie has stopped
        gone = lambda: not alive(manager) and not alive(server)  # noqa: E731
        wait_for("private-stop: traffic_manager and traffic_server are gone", gone, 30)
        crashes = sorted(p.name for p in (ats / "log").glob("crash-*"))
        expect(not crashes, "no crash log in the instance's log folder (%r)" % crashes)
    finally:
        for pid in (server, manager):
            if pid:
                _stop_pid(pid, signal.SIGTERM)


def children(pid):
    try:
        return [int(k) for k in
                Path("/proc/%d/task/%d/children" % (pid, pid)).read_text().split()]
    except OSError:
        return []


def exe(pid):
    try:
        return os.readlink("/proc/%d/exe" % pid)
    except OSError:
        return ""


def state(pid):
    try:
        return Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


if __name__ == "__main__":
    sys.exit(main())
