#!/usr/bin/env python3
"""ngx_http_circuit_module on real nginx (ctest label "nginx"): each test
starts a private proxy nginx with 4 workers and the module, in front of nginx
origins (and an origin that accepts and never answers), on free ports in a
temporary folder, checks one group of rules (docs/CONTRACT.md NX1-NX6), and
stops exactly the processes it started, by pid, pass or fail.

usage: nx_tests.py --module SO [--work DIR] [--report JSON] TEST
Exit 0 pass, 1 fail, 77 skipped (no nginx, outside CI).
"""

import argparse
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nx_harness import (AppOrigin, HungOrigin, Load, Origin, Proxy, alive,  # noqa: E402
                        free_port, http_get, stats, wait_port)

FAILED = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        FAILED.append(what)
    return cond


def wait_for(what, pred, timeout_s=20.0, step=0.05):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    check(False, "timed out waiting: " + what)
    return None


def attempts(proxy, ports):
    """Upstream tries the proxy made to these ports (its access log)."""
    want = {"127.0.0.1:%d" % p for p in ports}
    n = 0
    for l in proxy.log_lines():
        for addr in " ".join(l[2:-2]).replace(",", " ").split():
            n += addr in want
    return n


def raw_get(port, path, rcvbuf=None, before_read=None, body_parts=(), pause=0.0):
    """GET `path` (POST when body_parts are given: their total is its
    Content-Length, `pause` seconds between two parts) on a new connection
    (Connection: close) and every byte received until the server closes, a
    response cut short included. rcvbuf: the socket's receive buffer, set
    before connect (a small TCP window); before_read: called once the
    request is sent, before any read."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(30)
    got = b""
    head = b"%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" % (
        b"POST" if body_parts else b"GET", path.encode())
    if body_parts:
        head += b"Content-Length: %d\r\n" % sum(len(b) for b in body_parts)
    try:
        s.connect(("127.0.0.1", port))
        s.sendall(head + b"\r\n")
        for i, part in enumerate(body_parts):
            if i:
                time.sleep(pause)
            s.sendall(part)
        if before_read:
            before_read()
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    except OSError:
        pass
    finally:
        s.close()
    return got


def open_then_half_open(proxy, path, status, name, what):
    """GET `path` answers `status` and opens breaker `name` (policy
    consecutive:1, open-for=1s); then waits out the open period, so that
    the next request is a probe."""
    check(http_get(proxy.port, path)[0] == status and
          stats(proxy.metrics(), name)["state"] == "open", what)
    time.sleep(1.2)


def upstream_block(name, ports, extra="", server_params=""):
    servers = "\n".join("        server 127.0.0.1:%d%s;" % (p, server_params) for p in ports)
    return "    upstream %s {\n%s\n        %s\n    }\n" % (name, servers, extra)


def location(prefix, upstream):
    return "        location %s { proxy_pass http://%s/; }\n" % (prefix, upstream)


# --------------------------------------------------------------------------
# NX2: bad directives fail `nginx -t` naming the bad value
# --------------------------------------------------------------------------

def NX2_bad_directives_fail_nginx_t(work, module):
    p = Proxy(work / "proxy", module, "")
    ok_body = upstream_block("b", [free_port()], "circuit_breaker policy=consecutive:5;")
    rc, out = p.test_config(ok_body, location("/", "b"))
    check(rc == 0, "a good circuit_breaker passes nginx -t (%s)" % out.strip().splitlines()[-1:])
    bad = [
        ("policy=consecutive:0", "policy=consecutive:0"),
        ("policy=sometimes", "policy=sometimes"),
        ("policy=failure-rate:1.5:10", "policy=failure-rate:1.5:10"),
        ("policy=failure-rate:0.5:200 window=100", "MIN_RESULTS exceeds window=100"),
        ("window=0", "window=0"),
        ("window=70000", "window=70000"),
        ("probes=-1", "probes=-1"),
        ("open-for=5", "open-for=5"),
        ("open-for=5s open-for-max=1s", "open-for-max=1s"),
        ("jitter=0.2", "needs \"open-for-max\""),
        ("probe-timeout=0s", "probe-timeout=0s"),
        ("failure-status=600", "failure-status=600"),
        ("colour=blue", "unknown parameter \"colour=blue\""),
        ("window", "invalid parameter \"window\""),
        ("window=10 window=20", "\"window\" is given twice"),
        ("failure-status=500 failure-status=502", "\"failure-status\" is given twice"),
    ]
    for params, needle in bad:
        body = upstream_block("b", [free_port()], "circuit_breaker %s;" % params)
        rc, out = p.test_config(body, location("/", "b"))
        line = next((l for l in out.splitlines() if "[emerg]" in l), "")
        check(rc != 0 and needle in line and ("in %s:" % p.conf_path) in line,
              "nginx -t refuses circuit_breaker %s: %s" % (params, line.strip()))
    # every bad parameter of one directive is named, each on its line
    body = upstream_block("b", [free_port()], "circuit_breaker window=0 probes=0;")
    rc, out = p.test_config(body, location("/", "b"))
    check(rc != 0 and "window=0" in out and "probes=0" in out,
          "two bad parameters: both named")
    rc, out = p.test_config(upstream_block("b", [free_port()], "circuit_breaker;\n"
                                           "        circuit_breaker;"), location("/", "b"))
    check(rc != 0 and "is duplicate" in out, "circuit_breaker twice in one upstream refused")
    rc, out = p.test_config("    circuit_breaker_zone 1k;\n"
                            + upstream_block("b", [free_port()], "circuit_breaker;"),
                            location("/", "b"))
    check(rc != 0 and "circuit_breaker_zone" in out and "1k" in out,
          "circuit_breaker_zone 1k refused")
    # big enough to parse, too small for the breakers: named at its own line
    rc, out = p.test_config("    circuit_breaker_zone 40k;\n"
                            + upstream_block("b", [free_port()], "circuit_breaker;"),
                            location("/", "b"))
    line = next((l for l in out.splitlines() if "[emerg]" in l), "")
    at = 1 + p.conf_path.read_text().splitlines().index("    circuit_breaker_zone 40k;")
    check(rc != 0 and "circuit_breaker_zone 40960 is too small" in line and
          line.rstrip().endswith("in %s:%d" % (p.conf_path, at)),
          "circuit_breaker_zone 40k too small, named at its line: %s" % line.strip())
    # NX6: a breaker's label (upstream/address) must be a Prometheus label
    # value (UTF-8), and one breaker's only
    rc, out = p.test_config(upstream_block("caf\udce9", [free_port()], "circuit_breaker;"),
                            location("/", "caf\udce9"))
    line = next((l for l in out.splitlines() if "[emerg]" in l), "")
    check(rc != 0 and "is not UTF-8" in line and ("in %s:" % p.conf_path) in line,
          "an upstream name that is not UTF-8 refused: %s" % line.strip())
    both = ("    upstream a {\n        server unix:/x/unix:/y;\n        circuit_breaker;\n    }\n"
            "    upstream \"a/unix:/x\" {\n        server unix:/y;\n        circuit_breaker;\n"
            "    }\n")
    rc, out = p.test_config(both, location("/", "a"))
    line = next((l for l in out.splitlines() if "[emerg]" in l), "")
    check(rc != 0 and "two breakers are named \"a/unix:/x/unix:/y\"" in line and
          "upstream \"a\"" in line and "upstream \"a/unix:/x\"" in line,
          "two servers of one label refused, naming both upstreams: %s" % line.strip())
    # a balancing directive after circuit_breaker would replace it: refused
    rc, out = p.test_config(upstream_block("lc", [free_port()], "circuit_breaker;\n"
                                           "        least_conn;"), location("/", "lc"))
    check(rc != 0 and "must come after the balancing directive" in out and "\"lc\"" in out,
          "least_conn after circuit_breaker refused, naming the upstream: %s"
          % next((l for l in out.splitlines() if "[emerg]" in l), "").strip())
    rc, out = p.test_config(upstream_block("lc", [free_port()], "least_conn;\n"
                                           "        circuit_breaker;"), location("/", "lc"))
    check(rc == 0, "least_conn before circuit_breaker passes nginx -t")
    # keepalive wraps the breaker (it calls it): accepted after it too
    rc, out = p.test_config(upstream_block("ka", [free_port()], "circuit_breaker;\n"
                                           "        keepalive 4;"), location("/", "ka"))
    check(rc == 0, "keepalive after circuit_breaker passes nginx -t: %s"
          % next((l for l in out.splitlines() if "[emerg]" in l), "").strip())
    rc, out = p.test_config(upstream_block("b", [free_port()], "circuit_breaker;"),
                            location("/", "b") + "        location = /m { circuit_breaker_metrics; "
                            "circuit_breaker_metrics; }\n")
    check(rc != 0 and "is duplicate" in out, "circuit_breaker_metrics twice in one location "
          "refused")
    for loc in ("location = /m { circuit_breaker_metrics; proxy_pass http://b/; }",
                "location = /m { proxy_pass http://b/; circuit_breaker_metrics; }"):
        rc, out = p.test_config(upstream_block("b", [free_port()], "circuit_breaker;"),
                                location("/", "b") + "        " + loc + "\n")
        check(rc != 0 and "content handler" in out,
              "circuit_breaker_metrics with proxy_pass in one location refused: %s" % loc)
    for bad in ("failure-status=500,", "policy=failure-rate:0x0.8p0:5"):
        rc, out = p.test_config(upstream_block("b", [free_port()], "circuit_breaker %s;" % bad),
                                location("/", "b"))
        check(rc != 0 and bad in out, "%s refused" % bad)


# --------------------------------------------------------------------------
# NX4: a timeout after the status line (a body that hangs) is a failure
# --------------------------------------------------------------------------

def NX4_timeout_after_the_status_is_a_failure(work, module):
    port = free_port()
    origin = HungOrigin([port], first=b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nab")
    body = upstream_block("tb", [port], "circuit_breaker policy=consecutive:2 open-for=60s;")
    server = ("        location /tb/ { proxy_pass http://tb/; proxy_read_timeout 1s; }\n")
    proxy = Proxy(work / "proxy", module, body, server_body=server)
    name = "tb/127.0.0.1:%d" % port
    try:
        origin.start()
        proxy.start()
        for _ in range(2):
            try:
                proxy.get("/tb/x", timeout_s=10)
            except Exception:  # noqa: BLE001 - a response cut short (IncompleteRead)
                pass   # nginx may cut the response short: the body never came
        st = stats(proxy.metrics(), name)
        check(st["failures"] == 2 and st["successes"] == 0,
              "two 200s whose body timed out count as two failures, no success (%s)" % st)
        check(st["state"] == "open", "and they trip consecutive:2 (state %s)" % st["state"])
        status, headers, _, _ = proxy.get("/tb/x")
        check(status == 503, "then the next request gets 503 at once (%d)" % status)
        check(origin.accepted[port] == 2, "and the origin saw 2 connections (%d)"
              % origin.accepted[port])
    finally:
        proxy.stop()
        origin.stop()


# --------------------------------------------------------------------------
# NX3, NX4 with keepalive, before or after circuit_breaker
# --------------------------------------------------------------------------

def NX3_NX4_keepalive_either_order(work, module):
    """keepalive after circuit_breaker wraps it (the breaker decides first,
    then keepalive looks for a cached connection); before it, keepalive hands
    a cached connection to the breaker's peer selection (NGX_DONE). Either
    way every request is admitted or rejected and settled once."""
    pa, pb = free_port(), free_port()
    origin = Origin(work / "origin", [pa, pb])
    cb = "circuit_breaker policy=consecutive:3 open-for=60s;"
    body = (upstream_block("kafter", [pa], cb + "\n        keepalive 8;") +
            upstream_block("kbefore", [pb], "keepalive 8;\n        " + cb))
    server = "".join("        location /%s/ { proxy_pass http://%s/; proxy_http_version 1.1; "
                     "proxy_set_header Connection \"\"; }\n" % (u, u)
                     for u in ("kafter", "kbefore"))
    proxy = Proxy(work / "proxy", module, body, server_body=server)
    try:
        origin.start()
        proxy.start()
        for u, port in (("kafter", pa), ("kbefore", pb)):
            for _ in range(5):
                proxy.get("/%s/" % u)
            codes = [proxy.get("/%s/fail" % u)[0] for _ in range(10)]
            st = stats(proxy.metrics(), "%s/127.0.0.1:%d" % (u, port))
            check(codes == [500] * 3 + [503] * 7,
                  "%s: 3 failures trip it, then 503 at once (%s)" % (u, codes))
            check(st["admitted"] == 8 and st["successes"] == 5 and st["failures"] == 3 and
                  st["rejected"] == 7 and st["state"] == "open",
                  "%s: every request admitted or rejected, each settled once (%s)" % (u, st))
            check(origin.hits(port) == 8, "%s: the origin saw 8 requests, not 15 (%d)"
                  % (u, origin.hits(port)))
    finally:
        proxy.stop()
        origin.stop()


# --------------------------------------------------------------------------
# NX3: a rejecting server is skipped like a down one: it costs no try
# --------------------------------------------------------------------------

def NX3_a_rejecting_server_costs_no_try(work, module):
    """proxy_next_upstream_tries 2 over d1 (refused, its breaker open), d2
    (refused, its breaker closed) and o1 (answers): with d1 marked down every
    request gets 200 (d2, then o1); a rejecting d1 must cost no more."""
    o1, d1, d2 = free_port(), free_port(), free_port()
    cb = "circuit_breaker policy=consecutive:20 open-for=1h;"
    body = "".join("    upstream %s { server 127.0.0.1:%d%s weight=100; server 127.0.0.1:%d; "
                   "server 127.0.0.1:%d; %s }\n" % (u, d1, down, d2, o1, cb)
                   for u, down in (("brk", ""), ("dwn", " down")))
    server = "".join("        location /%s/ { proxy_pass http://%s/; proxy_next_upstream error; "
                     "proxy_next_upstream_tries 2; }\n" % (u, u) for u in ("brk", "dwn"))
    origin = Origin(work / "origin", [o1])
    proxy = Proxy(work / "proxy", module, body, workers=1, server_body=server)
    try:
        origin.start()
        proxy.start()
        name = "brk/127.0.0.1:%d" % d1
        wait_for("d1's breaker opens", lambda: proxy.get("/brk/")[0] and
                 stats(proxy.metrics(), name).get("state") == "open", timeout_s=30)
        got = [proxy.get("/brk/")[0] for _ in range(8)]
        ref = [proxy.get("/dwn/")[0] for _ in range(8)]
        d2st = stats(proxy.metrics(), "brk/127.0.0.1:%d" % d2)
        check(ref == [200] * 8, "with d1 down, every request 200 (%s)" % ref)
        check(d2st["state"] == "closed" and got == [200] * 8,
              "with d1 rejecting, every request 200 too: the skip cost no try (%s; d2 %s with "
              "%d failures)" % (got, d2st["state"], d2st["failures"]))
    finally:
        proxy.stop()
        origin.stop()


# --------------------------------------------------------------------------
# NX4 (and P1): a probe whose body trickles ends at probe-timeout
# --------------------------------------------------------------------------

def NX4_P1_a_trickling_probe_ends_at_probe_timeout(work, module):
    """Each gap of the body is shorter than every nginx timeout, so only the
    module's deadline can end the probe: the whole body would take 200 s."""
    port = free_port()
    origin = HungOrigin([port], first=b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n",
                        trickle=0.2, trickle_from=2)
    body = upstream_block("tk", [port], "circuit_breaker policy=consecutive:1 open-for=1s "
                                        "probe-timeout=1s;")
    server = ("        location /tk/ { proxy_pass http://tk/; proxy_read_timeout 1500ms; }\n")
    proxy = Proxy(work / "proxy", module, body, server_body=server)
    name = "tk/127.0.0.1:%d" % port
    try:
        origin.start()
        proxy.start()
        try:  # connection 1: headers, then nothing: a read timeout trips it
            proxy.get("/tk/x", timeout_s=10)
        except Exception:  # noqa: BLE001 - a response cut short (IncompleteRead)
            pass
        st = stats(proxy.metrics(), name)
        check(st["state"] == "open", "the body's read timeout trips it (%s)" % st)
        time.sleep(1.2)
        t0 = time.monotonic()
        got = raw_get(proxy.port, "/tk/x")
        took = time.monotonic() - t0
        check(origin.accepted[port] == 2, "the probe reached the origin (%d connections)"
              % origin.accepted[port])
        check(took < 10.0 and got.startswith(b"HTTP/1.1 200") and len(got) < 1000,
              "the probe's response was cut at its deadline: %.2f s, %d bytes (the whole body "
              "would take 200 s)" % (took, len(got)))
        st = wait_for("the probe settled", lambda: (lambda x: x if x["admitted"] == 2 and
                                                    x["failures"] + x["late"] == 2 else None)(
            stats(proxy.metrics(), name)), timeout_s=5)
        check(st is not None and st["successes"] == 0 and st["state"] == "open",
              "the cut probe counts as a failure and reopens the breaker (%s)" % st)
        check(st is not None and (st["late"] == 0 or st["timed_out"] == 1),
              "settled once: a failure, or late after its slot timed out (%s)" % st)
    finally:
        proxy.stop()
        origin.stop()


# --------------------------------------------------------------------------
# NX4 (and P1): a probe held up by a slow client is settled by its status
# --------------------------------------------------------------------------

def NX4_P1_a_probe_held_by_a_slow_client_is_settled_by_its_status(work, module):
    """The origin answers the probe at once with 1 MiB; the client reads
    nothing until the probe is settled (its 1 s deadline), so nginx fills its
    buffers (no temp file) and stops reading the origin. The origin answered: the probe
    is a success at its deadline, and the client still gets every byte."""
    port, sport = free_port(), free_port()
    size = 1 << 20
    origin = HungOrigin([port], first=b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size,
                        trickle_from=2, whole=b"y" * size)
    body = upstream_block("sc", [port], "circuit_breaker policy=consecutive:1 open-for=1s "
                                        "probe-timeout=1s;")
    # a server of its own: a small send buffer, so nginx's output stalls soon
    body += ("    server {\n        listen 127.0.0.1:%d sndbuf=8k;\n"
             "        location /sc/ { proxy_pass http://sc/; proxy_read_timeout 1500ms;\n"
             "            proxy_buffering on; proxy_buffer_size 4k; proxy_buffers 4 4k;\n"
             "            proxy_busy_buffers_size 8k; proxy_max_temp_file_size 0; }\n"
             "    }\n" % sport)
    proxy = Proxy(work / "proxy", module, body)
    name = "sc/127.0.0.1:%d" % port
    try:
        origin.start()
        proxy.start()
        wait_port(sport, proxy.proc, "the slow client's server")
        try:  # connection 1: headers, then nothing: a read timeout trips it
            http_get(sport, "/sc/x", timeout_s=10)
        except Exception:  # noqa: BLE001 - a response cut short (IncompleteRead)
            pass
        st = stats(proxy.metrics(), name)
        check(st["state"] == "open", "the body's read timeout trips it (%s)" % st)
        time.sleep(1.2)
        mid = []

        def until_settled():
            # reads nothing until the probe is settled: at its deadline
            # (about 1 s), or never if the deadline cut it (then 10 s)
            mid.append(wait_for("the probe settled, the client not reading", lambda: (
                lambda x: x if x["admitted"] == 2 and x["settled"] == 2 else None)(
                stats(proxy.metrics(), name)), timeout_s=10))
        got = raw_get(sport, "/sc/x", rcvbuf=4096, before_read=until_settled)
        mid = mid[0] if mid else None
        check(origin.accepted[port] == 2, "the probe reached the origin (%d connections)"
              % origin.accepted[port])
        check(mid is not None and mid["admitted"] == 2 and mid["successes"] == 1 and
              mid["state"] == "closed",
              "settled a success at its deadline, the client still reading (%s)" % mid)
        head, _, rest = got.partition(b"\r\n\r\n")
        check(head.startswith(b"HTTP/1.1 200") and len(rest) == size,
              "the slow client got the whole body: %d of %d bytes" % (len(rest), size))
        st = stats(proxy.metrics(), name)
        check(st["admitted"] == 2 and st["successes"] == 1 and st["failures"] == 1 and
              st["late"] == 0 and st["state"] == "closed",
              "settled once: the trip's failure and the probe's success (%s)" % st)
    finally:
        proxy.stop()
        origin.stop()


# --------------------------------------------------------------------------
# NX4 (and P1): an upgrade (websocket) is settled by its 101
# --------------------------------------------------------------------------

def NX4_P1_a_websocket_probe_is_settled_by_its_101(work, module):
    """A probe answered 101 Switching Protocols (proxy_buffering off): the
    101 is the origin's answer, a success; the upgraded connection then
    lives on with the location's timeouts, past the probe's 1 s."""
    port = free_port()
    origin = HungOrigin([port], first=b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                                      b"Connection: Upgrade\r\n\r\n", first_from=2)
    body = upstream_block("ws", [port], "circuit_breaker policy=consecutive:1 open-for=1s "
                                        "probe-timeout=1s;")
    server = ("        location /trip/ { proxy_pass http://ws; proxy_read_timeout 1s; }\n"
              "        location /ws/ { proxy_pass http://ws; proxy_http_version 1.1;\n"
              "            proxy_set_header Upgrade $http_upgrade;\n"
              "            proxy_set_header Connection upgrade;\n"
              "            proxy_buffering off; proxy_read_timeout 10s; }\n")
    proxy = Proxy(work / "proxy", module, body, workers=1, server_body=server)
    name = "ws/127.0.0.1:%d" % port
    try:
        origin.start()
        proxy.start()
        open_then_half_open(proxy, "/trip/", 504, name, "a hung answer opens it")
        s = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        try:
            s.sendall(b"GET /ws/ HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                      b"Connection: Upgrade\r\n\r\n")
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = s.recv(4096)
                if not chunk:
                    break
                head += chunk
            check(head.startswith(b"HTTP/1.1 101"), "the upgrade came through: %r" % head[:40])
            st = stats(proxy.metrics(), name)
            check(st["successes"] == 1 and st["failures"] == 1 and st["state"] == "closed",
                  "the 101 settled the probe as a success and closed the breaker (%s)" % st)
            time.sleep(2.0)  # twice the probe-timeout, the connection idle
            s.settimeout(0.5)
            try:
                alive_still = s.recv(1) != b""
            except socket.timeout:
                alive_still = True
            check(alive_still, "the upgraded connection lives on past the probe-timeout")
        finally:
            s.close()
        st = stats(proxy.metrics(), name)
        check(st["admitted"] == 2 and st["settled"] == 2 and st["state"] == "closed",
              "settled once each (%s)" % st)
    finally:
        proxy.stop()
        origin.stop()


# --------------------------------------------------------------------------
# NX3, NX4: after a refused probe, or a repeated address, the next server
# --------------------------------------------------------------------------

def NX3_NX4_the_next_server_after_a_probe_or_a_repeated_address(work, module):
    """u: a probe to a dead server (refused at once) hands the request on to
    a healthy one, which answers in 1.5 s: that try has the location's
    timeouts (10 s), not the probe's (1 s). d: the dead address twice in
    the block (one breaker) beside a healthy server: once it is open, every
    request reaches the healthy one, none is a 503."""
    dead, ap = free_port(), free_port()
    app = AppOrigin(ap)
    body = ("    upstream u {\n        server 127.0.0.1:%d weight=100;\n"
            "        server 127.0.0.1:%d;\n"
            "        circuit_breaker policy=consecutive:1 open-for=1s probe-timeout=1s;\n    }\n"
            "    upstream d {\n        server 127.0.0.1:%d weight=5;\n"
            "        server 127.0.0.1:%d weight=5;\n        server 127.0.0.1:%d;\n"
            "        circuit_breaker policy=consecutive:1 open-for=1h;\n    }\n"
            % (dead, ap, dead, dead, ap))
    server = ("        location /u/ { proxy_pass http://u; proxy_read_timeout 10s;\n"
              "            proxy_next_upstream error timeout; }\n"
              "        location /d/ { proxy_pass http://d; proxy_next_upstream error timeout; }\n")
    proxy = Proxy(work / "proxy", module, body, workers=1, server_body=server)
    ua, ub = "u/127.0.0.1:%d" % dead, "u/127.0.0.1:%d" % ap
    da = "d/127.0.0.1:%d" % dead
    try:
        app.start()
        proxy.start()
        st1 = http_get(proxy.port, "/u/d/1500/200", timeout_s=30)[0]
        sa = stats(proxy.metrics(), ua)
        check(st1 == 200 and sa["failures"] == 1 and sa["state"] != "closed",
              "the dead server opens, the healthy one answers (%d, %s)" % (st1, sa))
        time.sleep(1.2)  # the dead one half-open: the next request probes it
        st2, _, _, took = http_get(proxy.port, "/u/d/1500/200", timeout_s=30)
        sa, sb = stats(proxy.metrics(), ua), stats(proxy.metrics(), ub)
        check(sa["admitted"] == 2 and sa["failures"] == 2,
              "the request probed the dead server first (%s)" % sa)
        check(st2 == 200 and sb["failures"] == 0 and sb["successes"] == 2,
              "then the healthy server's 1.5 s answer came through with the location's "
              "timeouts: %d in %.2f s, healthy breaker %s" % (st2, took, sb))
        codes = [http_get(proxy.port, "/d/")[0] for _ in range(24)]
        sd = stats(proxy.metrics(), da)
        check(sd["state"] == "open" and sd["failures"] == 1,
              "the repeated dead address: one breaker, open after one failure (%s)" % sd)
        check(codes[1:] == [200] * 23, "with it open, every request reaches the healthy "
              "server (codes %s)" % {c: codes.count(c) for c in set(codes)})
    finally:
        proxy.stop()
        app.stop()


# --------------------------------------------------------------------------
# NX4 (and P1): a probe waiting for a slow uploader is released
# --------------------------------------------------------------------------

def NX4_P1_a_probe_waiting_for_a_slow_uploader_is_released(work, module):
    """proxy_request_buffering off: a probe whose client pauses 2 s in its
    body (the probe-timeout is 1 s) is not the origin's failure: at the
    deadline nginx is still reading the client, the probe is released
    (counts nothing, its slot free), the upload goes on with the location's
    timeouts, and the next request probes and closes the breaker."""
    ap = free_port()
    app = AppOrigin(ap)
    body = upstream_block("up", [ap], "circuit_breaker policy=consecutive:1 open-for=1s "
                                      "probe-timeout=1s;")
    server = ("        location /up/ { proxy_pass http://up; proxy_http_version 1.1;\n"
              "            proxy_request_buffering off; proxy_send_timeout 10s;\n"
              "            proxy_read_timeout 10s; }\n")
    proxy = Proxy(work / "proxy", module, body, workers=1, server_body=server)
    name = "up/127.0.0.1:%d" % ap
    try:
        app.start()
        proxy.start()
        open_then_half_open(proxy, "/up/d/0/500", 500, name, "a 500 opens it")
        got = raw_get(proxy.port, "/up/x", body_parts=(b"12345", b"67890"), pause=2.0)
        st = stats(proxy.metrics(), name)
        check(got.startswith(b"HTTP/1.1 200") and got.endswith(b"got 10\n"),
              "the slow upload reached the origin whole: %r" % got[-40:])
        check(st["admitted"] == 2 and st["released"] == 1 and st["failures"] == 1 and
              st["successes"] == 0 and st["timed_out"] == 0 and st["state"] == "half-open",
              "the probe was released at its deadline, nothing counted (%s)" % st)
        check(any("still reading the client's body at its probe-timeout: released" in l
                  for l in proxy.errors().splitlines()), "and the error log says why")
        check(http_get(proxy.port, "/up/x")[0] == 200 and
              stats(proxy.metrics(), name)["state"] == "closed",
              "the next request probes and closes it")
    finally:
        proxy.stop()
        app.stop()


# --------------------------------------------------------------------------
# NX3, NX4: outage phases, against nginx's max_fails in the same run
# --------------------------------------------------------------------------

CB_PARAMS = "policy=consecutive:3 open-for=4s probes=1 probe-timeout=2s"
PHASE_S = {"healthy": 3.0, "refused": 10.0, "hung": 10.0, "recovery": 8.0}


def NX3_NX4_outage_phases_settle_once_vs_max_fails(work, module, report_path=None):
    cb_ports = [free_port(), free_port()]
    mf_ports = [free_port(), free_port()]
    ab_port, pt_port = free_port(), free_port()
    body = (upstream_block("cb", cb_ports, "circuit_breaker %s;" % CB_PARAMS)
            + upstream_block("mf", mf_ports, "", " max_fails=1 fail_timeout=10s")
            + upstream_block("ab", [ab_port], "circuit_breaker policy=consecutive:3;")
            + upstream_block("pt", [pt_port], "circuit_breaker policy=consecutive:1 "
                             "open-for=1s probe-timeout=1s;"))
    server = (location("/cb/", "cb") + location("/mf/", "mf") + location("/ab/", "ab")
              + "        location /pt/ { proxy_pass http://pt/; proxy_read_timeout 3s; }\n")
    origin = Origin(work / "origin", cb_ports + mf_ports)
    proxy = Proxy(work / "proxy", module, body, server_body=server)
    hung = None
    report = {"module": CB_PARAMS, "max_fails": "max_fails=1 fail_timeout=10s",
              "workers": 4, "servers_per_upstream": 2, "clients_per_upstream": 4,
              "phases": {}}
    try:
        origin.start()
        proxy.start()
        report["workers"] = proxy.nworkers
        cb = Load(proxy.port, "/cb/").start()
        mf = Load(proxy.port, "/mf/").start()
        phase_t = {}

        def phase(name, seconds):
            t0 = time.monotonic()
            a_cb, a_mf = attempts(proxy, cb_ports), attempts(proxy, mf_ports)
            time.sleep(seconds)
            t1 = time.monotonic()
            phase_t[name] = (t0, t1)
            rcb, rmf = cb.since(t0, t1), mf.since(t0, t1)
            row = {}
            for what, rs, a0, ports in (("module", rcb, a_cb, cb_ports),
                                        ("max_fails", rmf, a_mf, mf_ports)):
                statuses = {}
                for r in rs:
                    statuses[str(r[1])] = statuses.get(str(r[1]), 0) + 1
                row[what] = {"requests": len(rs), "statuses": statuses,
                             "origin_hits": attempts(proxy, ports) - a0,
                             "retry_after": sum(1 for r in rs if r[2] is not None)}
            report["phases"][name] = row
            print("phase %-8s module %s | max_fails %s" % (name, row["module"], row["max_fails"]),
                  flush=True)
            return rcb

        rs = phase("healthy", PHASE_S["healthy"])
        check(rs and all(r[1] == 200 for r in rs), "healthy: every /cb/ request 200")

        origin.stop()                                  # refused: nothing listens
        rs = phase("refused", PHASE_S["refused"])
        r503 = [r for r in rs if r[1] == 503]
        check(len(r503) > len(rs) // 2, "refused: most requests 503 (%d of %d)"
              % (len(r503), len(rs)))
        check(r503 and all(r[2] is not None and int(r[2]) >= 1 for r in r503),
              "refused: every 503 has Retry-After >= 1 (whole seconds)")
        lat = sorted(r[3] for r in r503) or [0.0]
        p95 = lat[int(0.95 * (len(lat) - 1))]
        check(p95 < 0.5, "refused: the 503s come at once, no connect attempted (95th "
              "percentile %.3f s, slowest %.3f s, on a loaded 2-core machine)" % (p95, lat[-1]))
        hits = report["phases"]["refused"]["module"]["origin_hits"]
        # per server: 3 failures trip it (and up to 4 clients' tries in
        # flight then), then one probe per open period (4 s)
        bound = 2 * (3 + 4 + math.ceil(PHASE_S["refused"] / 4.0) + 1)
        check(hits <= bound, "refused: origin hits %d <= %d (one breaker per server for all "
              "4 workers: trips, then probes)" % (hits, bound))

        hung = HungOrigin(cb_ports + mf_ports).start()  # accepts, never answers
        rs = phase("hung", PHASE_S["hung"])
        r503 = [r for r in rs if r[1] == 503]
        check(len(r503) > len(rs) // 2, "hung: most requests 503 (%d of %d)"
              % (len(r503), len(rs)))
        hits = report["phases"]["hung"]["module"]["origin_hits"]
        bound = 2 * (3 + 4 + math.ceil(PHASE_S["hung"] / 4.0) + 1)
        check(hits <= bound, "hung: origin hits %d <= %d" % (hits, bound))
        report["phases"]["hung"]["module"]["accepted"] = sum(hung.accepted[p] for p in cb_ports)
        report["phases"]["hung"]["max_fails"]["accepted"] = sum(hung.accepted[p]
                                                                for p in mf_ports)
        hung.stop()
        hung = None

        origin.start()                                  # recovery
        t_back = time.monotonic()
        rs = phase("recovery", PHASE_S["recovery"])
        first_ok = next((r[0] for r in sorted(rs) if r[1] == 200), None)
        check(first_ok is not None and all(r[1] == 200 for r in rs if r[0] > first_ok + 4.5),
              "recovery: 200 again, and only 200 once the probes closed the breakers")
        report["phases"]["recovery"]["module"]["first_200_after_s"] = (
            round(first_ok - t_back, 2) if first_ok else None)
        mrs = [r for r in mf.since(t_back) if r[1] == 200]
        report["phases"]["recovery"]["max_fails"]["first_200_after_s"] = (
            round(min(r[0] for r in mrs) - t_back, 2) if mrs else None)
        cb.stop()
        mf.stop()

        # NX4: a client gone before any origin outcome releases the ticket
        hung = HungOrigin([ab_port]).start()
        s = socket.create_connection(("127.0.0.1", proxy.port))
        s.sendall(b"GET /ab/ HTTP/1.1\r\nHost: x\r\n\r\n")
        wait_for("the hung origin got the request", lambda: hung.accepted[ab_port] == 1)
        s.close()
        st = wait_for("the abort is settled", lambda: (lambda x: x if x["released"] == 1
                                                       else None)(stats(proxy.metrics(),
                                                                        "ab/127.0.0.1:%d"
                                                                        % ab_port)))
        check(st and st["failures"] == 0 and st["admitted"] == 1,
              "client abort: released, nothing counted (%s)" % st)
        hung.stop()
        hung = None

        # a probe waits at most probe-timeout (1 s), not proxy_read_timeout (3 s)
        hung = HungOrigin([pt_port]).start()
        st1, _, _, s1 = http_get(proxy.port, "/pt/")
        time.sleep(1.2)
        st2, _, _, s2 = http_get(proxy.port, "/pt/")
        # the probe: 1 s plus what a loaded machine adds, well short of 3 s
        check(st1 == 504 and s1 > 2.5 and st2 == 504 and s2 < 2.6,
              "a probe times out after probe-timeout: %d in %.2f s closed, %d in %.2f s as a "
              "probe" % (st1, s1, st2, s2))
        hung.stop()
        hung = None

        # NX4: quiescent, every admitted request settled exactly once
        time.sleep(1.2)
        expo = proxy.metrics()
        for p in cb_ports:
            st = stats(expo, "cb/127.0.0.1:%d" % p)
            check(st["admitted"] == st["settled"] and st["admitted"] > 0,
                  "cb/127.0.0.1:%d: admitted %d == settled %d (%d successes, %d failures, "
                  "%d released, %d late)" % (p, st["admitted"], st["settled"], st["successes"],
                                            st["failures"], st["released"], st["late"]))
        total_cb = len(cb.results)
        adm = sum(stats(expo, "cb/127.0.0.1:%d" % p)["admitted"] for p in cb_ports)
        rej = sum(stats(expo, "cb/127.0.0.1:%d" % p)["rejected"] for p in cb_ports)
        report["module_totals"] = {"requests": total_cb, "admitted": adm, "rejected_calls": rej}
        errs = proxy.errors()
        check("closed -> open" in errs and "half-open -> closed" in errs,
              "transitions in the error log (open, and closed again)")
    finally:
        for x in (hung,):
            if x:
                x.stop()
        proxy.stop()
        origin.stop()

    # the comparison, printed and saved
    print("\norigin hits per outage phase, same run, %d workers, 2 servers per upstream, "
          "4 clients per upstream:" % report["workers"])
    print("%-9s %22s %22s" % ("phase", "circuit_breaker", "max_fails=1 10s"))
    for name, row in report["phases"].items():
        print("%-9s %10d of %5d req %10d of %5d req" % (
            name, row["module"]["origin_hits"], row["module"]["requests"],
            row["max_fails"]["origin_hits"], row["max_fails"]["requests"]))
    if report_path:
        Path(report_path).write_text(json.dumps(report, indent=2) + "\n")
        print("report: %s" % report_path)


# --------------------------------------------------------------------------
# NX1, NX6: one breaker across workers
# --------------------------------------------------------------------------

def NX1_NX6_one_breaker_across_workers(work, module):
    port = free_port()      # refused: nothing listens
    body = upstream_block("one", [port], "circuit_breaker policy=consecutive:5 open-for=60s;")
    proxy = Proxy(work / "proxy", module, body, server_body=location("/", "one"))
    name = "one/127.0.0.1:%d" % port
    try:
        proxy.start()
        load = Load(proxy.port, "/", threads=8, pause=0.0).start()
        t_trip = wait_for("the breaker trips", lambda: stats(proxy.metrics(), name).get("state")
                          == "open" and time.monotonic())
        time.sleep(3.0)
        load.stop()
        # nginx logs a request after its response went out: a client may
        # have its last 503 before the line is written (or the count
        # exported); wait until the two agree, or 5 s
        lines, st = [], {}

        def agreed():
            nonlocal lines, st
            lines, st = proxy.log_lines(), stats(proxy.metrics(), name)
            return st.get("rejected") == sum(1 for l in lines if l[1] == "503")
        wait_for("the access log and the counts agree", agreed, timeout_s=5)
        pids_503 = {l[0] for l in lines if l[1] == "503"}
        tries = [l for l in lines if "127.0.0.1:%d" % port in l]
        # the 5th failure trips; a try other workers had in flight at that
        # moment (one each at most: a refused connect fails at once) is late
        check(st["failures"] == 5 and st["admitted"] == 5 + st["late"]
              and st["late"] <= proxy.nworkers - 1,
              "one breaker for %d workers: 5 failures counted, %d late, admitted %d (%s)"
              % (proxy.nworkers, st["late"], st["admitted"], st))
        check(len(tries) == st["admitted"], "the origin was tried %d times in all, each an "
              "admitted call; none after the trip" % len(tries))
        check(len(pids_503) >= 2, "503s came from %d different workers %s"
              % (len(pids_503), sorted(pids_503)))
        check(st["rejected"] == sum(1 for l in lines if l[1] == "503") and st["rejected"] > 50,
              "rejected calls %d == 503s logged" % st["rejected"])
        status, _, text, _ = proxy.get("/metrics")
        if shutil.which("promtool"):
            r = subprocess.run(["promtool", "check", "metrics"], input=text,
                               capture_output=True)
            check(r.returncode == 0, "promtool check metrics accepts the exposition %s"
                  % (r.stdout + r.stderr).decode(errors="replace").strip())
        elif os.environ.get("CI") == "true":
            check(False, "promtool is installed in CI (package prometheus)")
        trips = [l for l in proxy.errors().splitlines() if "closed -> open" in l]
        check(len(trips) == 1 and "[warn]" in trips[0] and name in trips[0],
              "one trip logged, by the worker that made it: %s" % (trips[:2],))
        check(t_trip is not None, "tripped")
    finally:
        proxy.stop()


# --------------------------------------------------------------------------
# NX5: a worker SIGKILLed during traffic; reload keeps state
# --------------------------------------------------------------------------

def NX5_sigkill_worker_during_traffic_exact_counts(work, module, report_path=None):
    ports = [free_port()]
    origin = Origin(work / "origin", ports)
    body = upstream_block("k", ports, "circuit_breaker policy=consecutive:20 open-for=2s;")
    proxy = Proxy(work / "proxy", module, body,
                  server_body="        location / { proxy_pass http://k; "
                  "proxy_read_timeout 5s; }\n")
    name = "k/127.0.0.1:%d" % ports[0]
    try:
        origin.start()
        proxy.start()
        # 8 clients of fast answers, and 8 of slow ones (about 2 s each) so
        # that every worker holds tickets when one is killed
        load = Load(proxy.port, "/", threads=8, pause=0.0).start()
        slow = Load(proxy.port, "/slow", threads=8, pause=0.0).start()
        time.sleep(2.5)
        workers = proxy.workers()
        victim = workers[min(1, len(workers) - 1)]
        os.kill(victim, signal.SIGKILL)
        t_kill = time.monotonic()
        new = wait_for("the master starts a new worker",
                       lambda: (lambda w: w if len(w) == proxy.nworkers and victim not in w
                                else None)(
                           proxy.workers()), 10)
        time.sleep(2.0)
        results = load.stop() + slow.stop()
        time.sleep(1.2)                                  # quiet: every ticket settled
        st = stats(proxy.metrics(), name)
        ok = sum(1 for r in results if r[1] == 200)
        broken = sum(1 for r in results if r[1] != 200)
        lost = st["admitted"] - st["settled"]
        check(new is not None and victim not in (new or []), "worker %d replaced: %s"
              % (victim, new))
        check(0 <= lost <= 16, "tickets the killed worker held: admitted %d - settled %d = %d "
              "(at most its requests in flight)" % (st["admitted"], st["settled"], lost))
        # a 200 the client got was admitted: counted, or held by the dead
        # worker (nginx settles after the response went out); a success
        # counted is a request sent, whether or not its answer arrived
        check(st["successes"] <= ok + broken and st["successes"] + lost >= ok,
              "successes %d <= the clients' 200s + broken requests %d, and successes + lost "
              "%d >= 200s %d" % (st["successes"], ok + broken, st["successes"] + lost, ok))
        after = [r for r in results if r[0] > t_kill + 0.5]
        bad = [r for r in after if r[1] != 200]
        check(after and not bad, "the other workers serve on: %d requests after the kill, "
              "all 200 (not: %s)" % (len(after), [(round(r[0] - t_kill, 2), r[1],
                                                   round(r[3], 2)) for r in bad[:5]]))
        # still usable: failures through the new worker set trip it, probes close it
        for _ in range(40):
            http_get(proxy.port, "/fail")
        st2 = stats(proxy.metrics(), name)
        check(st2["state"] == "open" and st2["failures"] - st["failures"] == 20,
              "after the kill the breaker still trips at exactly 20 failures (%s)" % st2)
        time.sleep(2.2)
        wait_for("a probe closes it", lambda: http_get(proxy.port, "/")[0] == 200
                 and stats(proxy.metrics(), name)["state"] == "closed", 10)
        report = {"workers": proxy.nworkers, "requests": len(results), "client_200": ok, "client_broken": broken,
                  "admitted": st["admitted"], "settled": st["settled"], "tickets_lost": lost,
                  "successes": st["successes"], "failures": st["failures"],
                  "released": st["released"]}
        print("SIGKILL of one of %d workers under 8 + 8 (slow) clients: %s"
              % (proxy.nworkers, report))
        if report_path:
            Path(report_path).write_text(json.dumps(report, indent=2) + "\n")
    finally:
        proxy.stop()
        origin.stop()


def NX5_reload_keeps_unchanged_breakers(work, module):
    p1, p2, p3 = free_port(), free_port(), free_port()   # refused
    keep = upstream_block("keep", [p1], "circuit_breaker policy=consecutive:3 open-for=60s;")
    chg = upstream_block("chg", [p2], "circuit_breaker policy=consecutive:3 open-for=60s;")
    server = location("/keep/", "keep") + location("/chg/", "chg")
    proxy = Proxy(work / "proxy", module, keep + chg, server_body=server)
    k, c, n = "keep/127.0.0.1:%d" % p1, "chg/127.0.0.1:%d" % p2, "keep/127.0.0.1:%d" % p3
    try:
        proxy.start()
        for _ in range(6):
            http_get(proxy.port, "/keep/")
            http_get(proxy.port, "/chg/")
        before = proxy.metrics()
        sk, sc = stats(before, k), stats(before, c)
        check(sk["state"] == "open" and sc["state"] == "open", "both open before the reload")
        keep2 = upstream_block("keep", [p1, p3], "circuit_breaker policy=consecutive:3 "
                               "open-for=60s;")
        chg2 = upstream_block("chg", [p2], "circuit_breaker policy=consecutive:4 open-for=60s;")
        old = proxy.workers()
        new = proxy.reload(keep2 + chg2)
        check(not set(old) & set(new), "the reload replaced every worker")
        after = proxy.metrics()
        sk2, sc2, sn2 = stats(after, k), stats(after, c), stats(after, n)
        check(sk2 == sk, "unchanged server keeps its breaker: %s" % sk2)
        check(sc2["state"] == "closed" and sc2["admitted"] == 0,
              "changed parameters: a fresh breaker (%s)" % sc2)
        check(sn2.get("state") == "closed" and sn2["admitted"] == 0,
              "a new server: a fresh breaker")
        http_get(proxy.port, "/keep/")
        sk3 = stats(proxy.metrics(), k)
        check(sk3["rejected"] == sk["rejected"] + 1 and sk3["admitted"] == sk["admitted"],
              "the kept breaker still rejects after the reload (the request went to the new "
              "server): %s" % sk3)
        built = [l for l in proxy.errors().splitlines() if "breakers built" in l]
        check(built and "2 breakers built, 1 kept with their state" in built[-1],
              "the reload logs what it kept: %s" % built[-1:])
        # L5: the first load's arena (8 units for 2 breakers) has room for
        # the reload's 2 new breakers: no new arena
        check(built and built[0].endswith("in 1 new arenas") and
              built[-1].endswith("in 0 new arenas"),
              "the reload's breakers take the spare units of the first arena: %s"
              % [l.split("circuit: ")[-1] for l in built])
        # a bad directive refuses the reload; the running configuration serves on
        bad = upstream_block("keep", [p1], "circuit_breaker window=0;")
        proxy.write(bad)
        os.kill(proxy.proc.pid, signal.SIGHUP)
        time.sleep(1.0)
        check(set(proxy.workers()) == set(new), "a bad reload keeps the workers")
        check(stats(proxy.metrics(), k) == sk3, "and the breakers")
        # the zone keeps its size over reloads while the breakers fit in it
        # (nginx keeps a zone only at the same size): 600 more servers pass
        # 1 MiB, a new zone (every breaker afresh, said once); removing and
        # adding them again then keeps every breaker
        fill = "".join(upstream_block("f%d" % i, [p1], "circuit_breaker;") for i in range(600))
        proxy.reload(keep2 + chg2 + fill)

        def afresh():
            return [l for l in proxy.errors().splitlines() if "every breaker starts afresh" in l]
        check(len(afresh()) == 1 and stats(proxy.metrics(), c)["admitted"] == 0,
              "growing past the zone: a new zone, said: %s" % afresh())
        for _ in range(4):
            http_get(proxy.port, "/chg/")
        sc4 = stats(proxy.metrics(), c)
        check(sc4["state"] == "open", "chg opens again in the new zone (%s)" % sc4)
        proxy.reload(keep2 + chg2)
        check(stats(proxy.metrics(), c) == sc4, "600 servers fewer: the zone and every "
              "breaker kept (%s)" % stats(proxy.metrics(), c))
        proxy.reload(keep2 + chg2 + fill)
        check(stats(proxy.metrics(), c) == sc4 and len(afresh()) == 1,
              "and 600 back: kept again (%s)" % stats(proxy.metrics(), c))
    finally:
        proxy.stop()


TESTS = {f.__name__: f for f in (
    NX2_bad_directives_fail_nginx_t,
    NX4_timeout_after_the_status_is_a_failure,
    NX4_P1_a_trickling_probe_ends_at_probe_timeout,
    NX4_P1_a_probe_held_by_a_slow_client_is_settled_by_its_status,
    NX4_P1_a_probe_waiting_for_a_slow_uploader_is_released,
    NX4_P1_a_websocket_probe_is_settled_by_its_101,
    NX3_NX4_the_next_server_after_a_probe_or_a_repeated_address,
    NX3_NX4_keepalive_either_order,
    NX3_a_rejecting_server_costs_no_try,
    NX3_NX4_outage_phases_settle_once_vs_max_fails,
    NX1_NX6_one_breaker_across_workers,
    NX5_sigkill_worker_during_traffic_exact_counts,
    NX5_reload_keeps_unchanged_breakers,
)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--module", required=True)
    ap.add_argument("--work", help="parent of the test's temporary folder (default: the "
                    "system's temporary folder); kept when a check fails")
    ap.add_argument("--report", help="where the benchmark-style report goes (JSON)")
    ap.add_argument("test", choices=sorted(TESTS))
    a = ap.parse_args()
    if shutil.which("nginx") is None and not os.path.exists("/usr/sbin/nginx"):
        print(("FAIL" if os.environ.get("CI") == "true" else "SKIP") + ": nginx not installed")
        return 1 if os.environ.get("CI") == "true" else 77
    if a.work:
        Path(a.work).mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="nx-%s-" % a.test.split("_")[0], dir=a.work))
    os.chmod(work, 0o755)
    kw = {"report_path": a.report} if a.report and "report_path" in \
        TESTS[a.test].__code__.co_varnames else {}
    TESTS[a.test](work, a.module, **kw)
    print("%d passed, %d failed" % (0 if FAILED else 1, 1 if FAILED else 0))
    if FAILED:
        print("failed checks:\n  " + "\n  ".join(FAILED))
        print("logs in %s" % work)
        return 1
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
