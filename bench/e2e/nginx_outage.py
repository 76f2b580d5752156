#!/usr/bin/env python3
"""circuit-e2e-nginx: the outage scenario on nginx, for the benchmark job.

SPDX-License-Identifier: MIT

Runs the outage test of the nginx module's own tests
(tests/nginx/nx_tests.py, NX3_NX4_outage_phases_settle_once_vs_max_fails,
imported, not copied): a private proxy nginx with --workers workers (4) and
ngx_http_circuit_module.so, two upstreams of two nginx origin servers each,
one with `circuit_breaker` and one with nginx's own `max_fails=1
fail_timeout=10s`, 4 clients per upstream, through the phases healthy,
refused (origins stopped), hung (accept, never answer), recovery; then the
test's client-abort and probe-timeout checks and admitted == settled. Its
raw figures (nginx-outage.json) become the report: OUT/nginx-outage.md (also
on stdout) and OUT/nginx-outage.json (the test's figures, the phases'
lengths, the checks), beside the Traffic Server scenario's report.md.

Processes come from tests/nginx/nx_harness.py: free ports, a private prefix
under the system's temporary folder (kept, and named, when a check fails or
with --keep), every process stopped by the pid it started, pass or fail.

usage: nginx_outage.py --module SO --out DIR [--workers 4] [--check] [--keep]
       nginx_outage.py --self-test          (the report from fixed figures)
Exit status: 0; 1 a check failed (with --check) or the run failed; 77
skipped: no module (not built), or no nginx outside CI.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

PROG = "circuit-e2e-nginx"
HERE = Path(__file__).resolve().parent
TEST = "NX3_NX4_outage_phases_settle_once_vs_max_fails"


def log(msg):
    print("%s: %s" % (PROG, msg), flush=True)


def import_tests(harness):
    sys.path.insert(0, str(Path(harness).resolve()))
    import nx_tests   # noqa: E402  (imports nx_harness from the same folder)
    return nx_tests


# --------------------------------------------------------------------------
# the report
# --------------------------------------------------------------------------

def _n(x):
    return "-" if x is None else "{:,}".format(x).replace(",", " ")


def _statuses(side):
    st = side.get("statuses", {})
    other = sum(v for k, v in st.items() if k not in ("200", "502", "503", "504"))
    return [st.get("200", 0), st.get("503", 0), side.get("retry_after", 0),
            st.get("502", 0), st.get("504", 0), other]


def render(rep):
    """Markdown for the figures in rep (the test's JSON plus meta and checks)."""
    ph = rep["phases"]
    secs = rep.get("phase_s", {})
    out = ["## libcircuit outage scenario on nginx", ""]
    out.append("nginx %s, %d worker processes, ngx_http_circuit_module (one breaker per "
               "upstream server, shared by the workers) against nginx's own passive check "
               "on the same origins, in the same run; %d servers per upstream, %d clients "
               "per upstream (closed loop, 20 ms pause, new connection per request), "
               "everything on 127.0.0.1 of one machine. proxy_connect_timeout 1s, "
               "proxy_read_timeout 1s, proxy_next_upstream off."
               % (rep.get("nginx", "?"), rep["workers"], rep["servers_per_upstream"],
                  rep["clients_per_upstream"]))
    out.append("")
    out.append("- module: `circuit_breaker %s;`" % rep["module"])
    out.append("- max_fails: `server ... %s;`" % rep["max_fails"])
    out.append("- phases: " + ", ".join("%s %g s" % (k, secs.get(k, 0)) for k in ph)
               + " (refused: the origins stopped; hung: a listener that accepts and never "
               "answers; recovery: the origins started again)")
    out.append("")
    out.append("### Origin hits per phase")
    out.append("")
    out.append("Upstream tries the proxy made (its access log's `$upstream_addr`), out of "
               "the clients' requests: hits are counted between the phase marks, requests by "
               "their start, so a request in flight at a mark may fall on either side.")
    out.append("")
    out.append("| phase | module: origin hits | of requests | max_fails: origin hits "
               "| of requests |")
    out.append("|---|--:|--:|--:|--:|")
    tot = [0, 0, 0, 0]
    for name, row in ph.items():
        m, f = row["module"], row["max_fails"]
        out.append("| %s | %s | %s | %s | %s |" % (name, _n(m["origin_hits"]),
                                                  _n(m["requests"]), _n(f["origin_hits"]),
                                                  _n(f["requests"])))
        if name in ("refused", "hung"):
            for i, v in enumerate((m["origin_hits"], m["requests"], f["origin_hits"],
                                   f["requests"])):
                tot[i] += v
    out.append("| **outage (refused + hung)** | **%s** | %s | **%s** | %s |"
               % tuple(_n(v) for v in tot))
    out.append("")
    out.append("### Responses per phase")
    out.append("")
    out.append("| phase | side | requests | 200 | 503 | with Retry-After | 502 | 504 | other |")
    out.append("|---|---|--:|--:|--:|--:|--:|--:|--:|")
    for name, row in ph.items():
        for side in ("module", "max_fails"):
            s = row[side]
            out.append("| %s | %s | %s | %s |" % (name, side, _n(s["requests"]),
                                                " | ".join(_n(v) for v in _statuses(s))))
    out.append("")
    rec = ph.get("recovery", {})
    hung = ph.get("hung", {})
    out.append("### Recovery and the hung origin")
    out.append("")
    out.append("| | module | max_fails |")
    out.append("|---|--:|--:|")
    out.append("| first 200 after the origins came back | %s | %s |" % tuple(
        "-" if rec.get(s, {}).get("first_200_after_s") is None
        else "%.2f s" % rec[s]["first_200_after_s"] for s in ("module", "max_fails")))
    out.append("| connections the hung origin accepted | %s | %s |" % tuple(
        _n(hung.get(s, {}).get("accepted")) for s in ("module", "max_fails")))
    t = rep.get("module_totals")
    if t:
        out.append("")
        out.append("Module, whole run (the exposition): %s requests, %s admitted, %s rejected "
                   "calls (a request is one call per server tried)."
                   % (_n(t["requests"]), _n(t["admitted"]), _n(t["rejected_calls"])))
    checks = rep.get("checks", [])
    if checks:
        failed = [w for ok, w in checks if not ok]
        out.append("")
        out.append("### Checks (%d of %d hold)" % (len(checks) - len(failed), len(checks)))
        out.append("")
        for ok, what in checks:
            out.append("- %s %s" % ("ok:" if ok else "**FAIL:**", what))
    out.append("")
    return "\n".join(out)


SELF_TEST = {
    "module": "policy=consecutive:3 open-for=4s probes=1 probe-timeout=2s",
    "max_fails": "max_fails=1 fail_timeout=10s", "workers": 4, "servers_per_upstream": 2,
    "clients_per_upstream": 4, "nginx": "1.22.1",
    "phase_s": {"healthy": 3.0, "refused": 10.0, "hung": 10.0, "recovery": 8.0},
    "phases": {
        "healthy": {"module": {"requests": 400, "statuses": {"200": 400}, "origin_hits": 400,
                               "retry_after": 0},
                    "max_fails": {"requests": 398, "statuses": {"200": 398},
                                  "origin_hits": 398, "retry_after": 0}},
        "refused": {"module": {"requests": 1500, "statuses": {"503": 1490, "502": 10},
                               "origin_hits": 12, "retry_after": 1490},
                    "max_fails": {"requests": 1400, "statuses": {"502": 1400},
                                  "origin_hits": 20, "retry_after": 0}},
        "hung": {"module": {"requests": 1500, "statuses": {"503": 1496, "504": 4},
                            "origin_hits": 6, "retry_after": 1496, "accepted": 6},
                 "max_fails": {"requests": 200, "statuses": {"502": 190, "504": 10},
                               "origin_hits": 10, "retry_after": 0, "accepted": 10}},
        "recovery": {"module": {"requests": 900, "statuses": {"503": 100, "200": 800},
                                "origin_hits": 802, "retry_after": 100,
                                "first_200_after_s": 2.1},
                     "max_fails": {"requests": 800, "statuses": {"502": 300, "200": 500},
                                   "origin_hits": 505, "retry_after": 0,
                                   "first_200_after_s": 6.3}}},
    "module_totals": {"requests": 4300, "admitted": 1230, "rejected_calls": 6200},
    "checks": [[True, "healthy: every /cb/ request 200"], [False, "an example failure"]],
}


def self_test():
    md = render(SELF_TEST)
    want = ["| refused | 12 | 1 500 | 20 | 1 400 |",
            "| **outage (refused + hung)** | **18** | 3 000 | **30** | 1 600 |",
            "| hung | module | 1 500 | 0 | 1 496 | 1 496 | 0 | 4 | 0 |",
            "| first 200 after the origins came back | 2.10 s | 6.30 s |",
            "| connections the hung origin accepted | 6 | 10 |",
            "### Checks (1 of 2 hold)", "- **FAIL:** an example failure"]
    missing = [w for w in want if w not in md]
    for w in missing:
        print("FAIL: not in the report: %s" % w)
    if missing:
        print(md)
        return 1
    print("ok: the report renders the fixed figures (%d lines)" % len(md.splitlines()))
    return 0


# --------------------------------------------------------------------------
# the run
# --------------------------------------------------------------------------

def main(argv):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    ap.add_argument("--module", help="ngx_http_circuit_module.so (the build's src/nginx/)")
    ap.add_argument("--harness", default=str(HERE.parent.parent / "tests" / "nginx"),
                    help="folder of nx_tests.py and nx_harness.py (default: the source "
                    "tree's tests/nginx)")
    ap.add_argument("--out", default="e2e-out", help="the report's folder")
    ap.add_argument("--workers", type=int, default=4, help="nginx worker processes")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when one of the test's checks fails")
    ap.add_argument("--keep", action="store_true", help="keep the nginx folders and logs")
    ap.add_argument("--self-test", action="store_true",
                    help="render the report from fixed figures and check it")
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test()

    if not a.module or not Path(a.module).is_file():
        log("SKIP: the nginx module was not built (%s), so there is no outage scenario on "
            "nginx: apt-get install nginx-dev nginx-light, configure with CIRCUIT_NGINX=AUTO "
            "or ON (src/nginx/CMakeLists.txt)" % (a.module or "no --module"))
        return 77
    nginx = "/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else shutil.which("nginx")
    if not nginx:
        ci = os.environ.get("CI") == "true"
        log("%s: nginx not installed (apt-get install nginx-light)" % ("FAIL" if ci else "SKIP"))
        return 1 if ci else 77

    os.environ["NX_WORKERS"] = str(a.workers)    # nx_harness.Proxy's worker count
    nx = import_tests(a.harness)
    checks = []
    orig_check = nx.check

    def check(cond, what):
        checks.append((bool(cond), what))
        return orig_check(cond, what)
    nx.check = check            # the test calls its module's check(): record every one

    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / "nginx-outage.json"
    md_path = out / "nginx-outage.md"
    for p in (json_path, md_path):
        if p.exists():
            p.unlink()
    # under the system's temporary folder: nginx's workers (nobody, when run
    # as root) must reach their folders, which a build tree may not allow
    work = Path(tempfile.mkdtemp(prefix="nx-e2e-"))
    os.chmod(work, 0o755)
    log("%s with %d workers, %s (work folder %s)" % (TEST, a.workers, a.module, work))
    t0 = time.monotonic()
    try:
        getattr(nx, TEST)(work, a.module, report_path=str(json_path))
    except Exception as e:      # a harness failure (a port, a start): the run failed
        log("FAIL: the run failed: %r (logs in %s)" % (e, work))
        return 1
    if not json_path.exists():
        log("FAIL: the test wrote no figures (logs in %s)" % work)
        return 1
    rep = json.loads(json_path.read_text())
    rep["phase_s"] = dict(nx.PHASE_S)
    rep["nginx"] = os.popen("%s -v 2>&1" % nginx).read().strip().split("/")[-1]
    rep["checks"] = checks
    rep["seconds"] = round(time.monotonic() - t0, 1)
    json_path.write_text(json.dumps(rep, indent=2) + "\n")
    md = render(rep)
    md_path.write_text(md)
    print()
    print(md)
    log("report: %s, %s" % (md_path, json_path))
    failed = [w for ok, w in checks if not ok]
    if failed or a.keep:
        log("nginx folders and logs kept in %s" % work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    if failed:
        log("%d of %d checks failed%s" % (len(failed), len(checks),
                                          "" if a.check else " (reported; --check fails)"))
        return 1 if a.check else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
