"""Start and stop a private nginx proxy with ngx_http_circuit_module, nginx
origins and hung origins, for the NX tests (tests/nginx/nx_tests.py) and the
recipe test.

Each instance lives in its own folder (configuration, logs, temp folders)
inside a temporary folder (mode 0755, under the system's temporary folder):
when the tests run as root, nginx's workers run as nobody and must reach
their temp folders. When not root, the master runs as the current user and
`user` is left out.
Ports are free ports chosen at start. Processes are started here and
stopped here by the pid this module started (the master; never by name),
also when the caller fails: use the objects as context managers.

    from nx_harness import Origin, Proxy, free_port
    with Origin(work / "origin", ports) as o, Proxy(work / "proxy", so, body) as p:
        p.get("/cb/")
"""

import http.client
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

NGINX = "/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else "nginx"


def free_port():
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError("%s exited with status %s before listening on %d"
                               % (what, proc.returncode, port))
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("%s did not listen on port %d within %g s" % (what, port, timeout_s))


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def stop_pid(proc, sig=signal.SIGTERM, timeout_s=10.0):
    """Stop one process we started (a Popen), by its pid; SIGKILL after timeout_s."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.kill(proc.pid, sig)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def children(pid):
    """Pids whose parent is pid (nginx's workers of one master)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                rest = f.read().split(") ", 1)[1].split()
        except OSError:
            continue
        if int(rest[1]) == pid and rest[0] != "Z":
            out.append(int(d))
    return sorted(out)


def http_get(port, path="/", timeout_s=10.0):
    """One GET on a new connection; (status, headers with lower-case names, body, seconds)."""
    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        conn.request("GET", path, headers={"Connection": "close"})
        r = conn.getresponse()
        body = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body, time.monotonic() - t0
    finally:
        conn.close()


def private_folder(folder):
    """The folder and its tmp/, readable and searchable by nginx's workers
    (nobody, when the tests run as root). Its parents are left as they are:
    the tests put it in a folder of their own under the system's temporary
    folder."""
    folder = Path(folder).resolve()
    (folder / "tmp").mkdir(parents=True, exist_ok=True)
    for p in (folder, folder / "tmp"):
        os.chmod(p, 0o755)
    return folder


def _user_line():
    return "user nobody nogroup;" if os.geteuid() == 0 else ""


class _NginxBase:
    """One nginx master we start (daemon off) and stop by its pid."""

    def __init__(self, folder, port):
        self.folder = private_folder(folder)
        self.port = port
        self.proc = None

    @property
    def conf_path(self):
        return self.folder / "nginx.conf"

    @property
    def error_log(self):
        return self.folder / "error.log"

    @property
    def access_log(self):
        return self.folder / "access.log"

    def common(self, workers):
        f = self.folder
        return f"""
{_user_line()}
worker_processes {workers};
daemon off;
pid {f}/nginx.pid;
error_log {self.error_log} notice;
events {{ worker_connections 1024; }}
"""

    def http_common(self):
        f = self.folder
        return f"""
    client_body_temp_path {f}/tmp/body;
    proxy_temp_path {f}/tmp/proxy;
    fastcgi_temp_path {f}/tmp/fastcgi;
    uwsgi_temp_path {f}/tmp/uwsgi;
    scgi_temp_path {f}/tmp/scgi;
    default_type text/plain;
"""

    def start(self):
        self.error_log.touch()
        self.access_log.write_text("")
        self.proc = subprocess.Popen(
            [NGINX, "-p", str(self.folder), "-c", str(self.conf_path), "-e", str(self.error_log)],
            stdout=open(self.folder / "stdout.log", "ab"), stderr=subprocess.STDOUT)
        wait_port(self.port, self.proc, "nginx (%s)" % self.folder.name)
        return self

    def workers(self):
        return children(self.proc.pid) if self.proc else []

    def stop(self):
        if self.proc is not None:
            master = self.proc.pid
            workers = self.workers()
            stop_pid(self.proc)      # SIGTERM: fast shutdown of the master and its workers
            deadline = time.monotonic() + 5
            while any(alive(w) for w in workers) and time.monotonic() < deadline:
                time.sleep(0.05)
            for w in workers:        # a worker of ours that outlived its master
                if alive(w) and w != master:
                    try:
                        os.kill(w, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            self.proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class Origin(_NginxBase):
    """An nginx origin listening on several ports: 200 "ok" on /, 500 on /fail,
    2 KiB at 1 KiB/s on /slow (about 2 s); access log "PORT URI STATUS" per
    request."""

    def __init__(self, folder, ports):
        super().__init__(folder, ports[0])
        self.ports = list(ports)

    def start(self):
        listens = "\n".join("        listen 127.0.0.1:%d;" % p for p in self.ports)
        conf = self.common(1) + f"""
http {{
{self.http_common()}
    log_format hits '$server_port $request_uri $status';
    access_log {self.access_log} hits;
    server {{
{listens}
        location /fail {{ return 500 "fail\\n"; }}
        location /slow {{ limit_rate 1k; return 200 "{"s" * 2047}\\n"; }}
        location / {{ return 200 "ok\\n"; }}
    }}
}}
"""
        self.conf_path.write_text(conf)
        super().start()
        for p in self.ports[1:]:
            wait_port(p, self.proc, "origin")
        return self

    def hits(self, port=None):
        lines = self.access_log.read_text().splitlines()
        return sum(1 for l in lines if port is None or l.split(" ", 1)[0] == str(port))


class HungOrigin:
    """Listens on ports, accepts every connection and never answers (it
    holds the sockets until stop); counts the connections accepted. With
    `first`, it sends those bytes (e.g. a status line and headers) and then
    hangs. With `trickle` (seconds), from connection `trickle_from` (1 is the
    first) on, it then sends one more byte every `trickle` seconds: a body
    whose gaps stay under a read timeout while the whole never ends. With
    `whole` instead, from connection `trickle_from` on, it sends `first` and
    then `whole` at once (as fast as the reader takes it) and holds the
    socket. Connections before `first_from` get nothing at all."""

    def __init__(self, ports, first=b"", trickle=None, trickle_from=1, whole=None,
                 first_from=1):
        self.first, self.first_from = first, first_from
        self.whole = whole
        self.trickle, self.trickle_from = trickle, trickle_from
        self.ports = list(ports)
        self.accepted = {p: 0 for p in self.ports}
        self.socks, self.held = [], []
        self.stopping = False
        self.threads = []
        self.lock = threading.Lock()

    def start(self):
        for p in self.ports:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", p))
            s.listen(512)
            s.settimeout(0.2)
            self.socks.append(s)
            t = threading.Thread(target=self._accept, args=(s, p), daemon=True)
            t.start()
            self.threads.append(t)
        return self

    def _accept(self, s, port):
        while not self.stopping:
            try:
                c, _ = s.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                self.accepted[port] += 1
                self.held.append(c)
                n = self.accepted[port]
            if (self.trickle or self.whole is not None) and n >= self.trickle_from:
                t = threading.Thread(target=self._trickle, args=(c,), daemon=True)
                t.start()
                self.threads.append(t)
            elif self.first and n >= self.first_from:
                try:
                    c.sendall(self.first)
                except OSError:
                    pass

    def _trickle(self, c):
        try:
            c.sendall(self.first)
            if self.whole is not None:
                c.sendall(self.whole)
                return
            while not self.stopping:
                time.sleep(self.trickle)
                c.sendall(b"x")
        except OSError:
            pass

    def stop(self):
        self.stopping = True
        for t in self.threads:
            t.join()
        for s in self.socks + self.held:
            s.close()
        self.socks, self.held = [], []

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class AppOrigin:
    """An HTTP/1.1 origin in this process (a thread per connection) that
    reads each request's whole body (Content-Length) before it answers, as
    an application does: a path holding /d/MS/CODE waits MS milliseconds,
    then answers CODE with "got N" (N: the body's bytes); any other path
    answers 200 at once. `requests` lists (method, path, body bytes) as they are
    answered."""

    def __init__(self, port):
        import http.server
        origin = self
        self.requests = []

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def answer(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                m = re.search(r"/d/(\d+)/(\d+)", self.path)
                ms, code = (int(m.group(1)), int(m.group(2))) if m else (0, 200)
                time.sleep(ms / 1000.0)
                origin.requests.append((self.command, self.path, len(body)))
                out = b"got %d\n" % len(body)
                self.send_response(code)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST = answer

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
        self.server.daemon_threads = True
        self.port = port

    def start(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class Proxy(_NginxBase):
    """The nginx under test: load_module, `workers` workers, a reuseport
    listener (connections spread over the workers), `body` inside http{}
    (upstreams and locations of the server), /metrics serving the
    exposition. Access log: "PID STATUS UPSTREAM_ADDR UPSTREAM_STATUS URI"."""

    def __init__(self, folder, module, body, workers=None, port=None, server_body=""):
        super().__init__(folder, port or free_port())
        self.module = Path(module).resolve()
        self.body = body
        self.server_body = server_body
        self.nworkers = workers or int(os.environ.get("NX_WORKERS", "4"))

    def write(self, body=None, server_body=None):
        if body is not None:
            self.body = body
        if server_body is not None:
            self.server_body = server_body
        conf = f"load_module {self.module};\n" + self.common(self.nworkers) + f"""
http {{
{self.http_common()}
    log_format nx '$pid $status $upstream_addr $upstream_status $request_uri';
    access_log {self.access_log} nx;
    proxy_connect_timeout 1s;
    proxy_read_timeout 1s;
    proxy_next_upstream off;
{self.body}
    server {{
        listen 127.0.0.1:{self.port} reuseport;
        location = /metrics {{ circuit_breaker_metrics; }}
{self.server_body}
    }}
}}
"""
        # bytes as given: a test may name an upstream in bytes that are not
        # UTF-8 ("\udce9" here is the byte 0xe9 in the file)
        self.conf_path.write_bytes(conf.encode("utf-8", "surrogateescape"))

    def start(self):
        self.write()
        super().start()
        self.wait_workers()
        return self

    def wait_workers(self, old=(), timeout_s=15.0):
        """Until nginx has its worker count and none of `old` is alive."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            w = self.workers()
            if len(w) == self.nworkers and not any(alive(p) for p in old):
                return w
            time.sleep(0.05)
        raise RuntimeError("nginx did not reach %d workers (now %s)" % (self.nworkers,
                                                                        self.workers()))

    def reload(self, body=None, server_body=None):
        """Writes the new configuration, SIGHUP to the master (what `nginx -s
        reload` sends), and waits until only new workers are left."""
        old = self.workers()
        self.write(body, server_body)
        os.kill(self.proc.pid, signal.SIGHUP)
        return self.wait_workers(old, 20.0)

    def test_config(self, body, server_body=""):
        """`nginx -t` on a configuration with this body: (status, output)."""
        saved = (self.body, self.server_body)
        self.write(body, server_body)
        r = subprocess.run([NGINX, "-t", "-p", str(self.folder), "-c", str(self.conf_path),
                            "-e", str(self.error_log)], capture_output=True, text=True,
                           errors="replace")
        self.body, self.server_body = saved
        return r.returncode, r.stdout + r.stderr

    def get(self, path, timeout_s=10.0):
        return http_get(self.port, path, timeout_s)

    def metrics(self):
        """The exposition as {(metric, breaker, other labels...): value}."""
        status, _, body, _ = self.get("/metrics")
        if status != 200:
            raise RuntimeError("/metrics answered %d" % status)
        return parse_exposition(body.decode())

    def log_lines(self):
        return [l.split(" ") for l in self.access_log.read_text().splitlines() if l]

    def errors(self):
        return self.error_log.read_text(errors="replace")


def parse_exposition(text):
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^(\w+)\{(.*)\} (\S+)$', line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2)))
        key = (m.group(1), labels.pop("breaker", None)) + tuple(sorted(labels.values()))
        out[key] = float(m.group(3))
    return out


def stats(expo, breaker):
    """circuit_stats-like totals of one breaker from the exposition."""
    g = lambda *k: int(expo.get(k[:1] + (breaker,) + k[1:], 0))  # noqa: E731
    st = {
        "admitted": g("circuit_calls_admitted_total"),
        "rejected": g("circuit_calls_rejected_total"),
        "successes": g("circuit_results_total", "success"),
        "failures": g("circuit_results_total", "failure"),
        "ignored": g("circuit_results_total", "ignored"),
        "late": g("circuit_results_late_total"),
        "released": g("circuit_tickets_released_total"),
        "timed_out": g("circuit_probe_timeouts_total"),
        "transitions": g("circuit_transitions_total"),
        "generation": g("circuit_generation"),
        "in_flight_probes": g("circuit_probes_in_flight"),
    }
    for s in ("closed", "open", "half-open", "isolated"):
        if expo.get(("circuit_state", breaker, s)) == 1:
            st["state"] = s
    st["settled"] = (st["successes"] + st["failures"] + st["ignored"] + st["late"]
                     + st["released"])
    return st


class Load:
    """`threads` clients, each sending GETs on new connections to `path` as
    fast as answers come (with `pause` between), until stop(). Records
    (t_start, status, retry_after, seconds) per request; status 0 when the
    connection failed."""

    def __init__(self, port, path, threads=4, pause=0.02, timeout_s=5.0):
        self.port, self.path, self.nthreads = port, path, threads
        self.pause, self.timeout_s = pause, timeout_s
        self.results = []
        self.lock = threading.Lock()
        self.stopping = False
        self.threads = []

    def _run(self):
        while not self.stopping:
            t0 = time.monotonic()
            try:
                st, h, _, secs = http_get(self.port, self.path, self.timeout_s)
                rec = (t0, st, h.get("retry-after"), secs)
            except (OSError, http.client.HTTPException):
                rec = (t0, 0, None, time.monotonic() - t0)
            with self.lock:
                self.results.append(rec)
            time.sleep(self.pause)

    def start(self):
        for _ in range(self.nthreads):
            t = threading.Thread(target=self._run, daemon=True)
            t.start()
            self.threads.append(t)
        return self

    def stop(self):
        self.stopping = True
        for t in self.threads:
            t.join()
        return self.results

    def since(self, t0, t1=None):
        with self.lock:
            return [r for r in self.results if r[0] >= t0 and (t1 is None or r[0] < t1)]
