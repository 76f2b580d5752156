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
     traffic_ctl pointed at the private instance, checking what each shows.
The block `apt` is not run (.ci/run installs those packages and more).
Processes are stopped by the pid the harness started, pass or fail.

usage: recipe_test.py SOURCE_DIR WORK
"""

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ats_harness import Nginx, TrafficServer  # noqa: E402


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
    r = subprocess.run(["bash", "-e", "-c", script], cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=600)
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


def main():
    src, work = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    missing = [p for p in ("traffic_server", "traffic_manager", "traffic_ctl", "nginx", "curl")
               if shutil.which(p) is None]
    if missing:
        print(("FAIL" if os.environ.get("CI") == "true" else "SKIP") + ": not installed: "
              + " ".join(missing))
        return 1 if os.environ.get("CI") == "true" else 77
    b = blocks(src / "docs" / "TRAFFICSERVER.md")
    for name in ("apt", "build", "plugin.config", "remap.config", "restart", "request",
                 "metrics", "prometheus", "isolate", "reset"):
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
        finally:
            ts.stop()
    print("recipe: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
