"""Start and stop a private Apache Traffic Server (and an nginx origin) for
tests and benchmarks.

Everything lives in one work folder: the runroot (runroot.yaml pointing at
private config, log, run and cache folders), the configuration files, nginx's
configuration and logs. Ports are free ports chosen at start. Processes are
started here and stopped here by the pid this module started (never by name),
also when the caller fails: use the objects as context managers, or call
stop() in a finally block.

    from ats_harness import Nginx, TrafficServer, free_port
    with Nginx(work / "nginx") as origin, \\
         TrafficServer(work / "ats", plugin=so, remap=[...]) as ts:
        ts.get("/", host="shop")

Traffic Server 9.2: traffic_ctl talks to traffic_manager, so with
manager=True (the default) traffic_manager is started and launches
traffic_server; its pid is read from /proc (the manager's child). With
manager=False traffic_server runs alone (no traffic_ctl).

Every process is started in a session of its own (start_new_session, stdin
from /dev/null), and Traffic Server with TS_RUNROOT set to its runroot:
left in the caller's process group, traffic_server's crash logger
(traffic_crashlog, stopped until a crash) gets SIGHUP and SIGCONT when that
group is orphaned (the shell that started the caller exits), wakes, and
writes a bogus crash report; without TS_RUNROOT it writes it to the
system's /var/log/trafficserver (it does not see --run-root). Where
util-linux's setpriv is installed, Traffic Server also gets SIGTERM when
the process that started it dies (--pdeathsig), so that a killed test
leaves no server behind.
"""

import http.client
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

SYSTEM_CONFIG = Path("/etc/trafficserver")


def free_port():
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port, proc, what, timeout_s):
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


def _stop_pid(pid, sig=signal.SIGTERM, timeout_s=10.0):
    """Stop one process we started, by pid; SIGKILL after timeout_s."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        # reap it if it is our child
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:
            pass
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def http_get(port, path="/", host=None, timeout_s=10.0, headers=None):
    """One GET; returns (status, headers dict with lower-case names, body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        h = dict(headers or {})
        if host is not None:
            h["Host"] = host
        conn.request("GET", path, headers=h)
        r = conn.getresponse()
        body = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body
    finally:
        conn.close()


class Nginx:
    """nginx in the foreground on a free port, its config and logs in `folder`.

    Locations (the origin's behaviour, chosen by path):
      /ok...      200 "ok"
      /fail...    500 "fail"
      /notfound   404
      /...        200 "ok"
    Every request is written to access.log, one line each (count_requests).
    """

    def __init__(self, folder, port=None, workers=1, extra_locations=""):
        self.folder = Path(folder).resolve()
        self.port = port or free_port()
        self.workers = workers
        self.extra_locations = extra_locations
        self.proc = None

    @property
    def access_log(self):
        return self.folder / "access.log"

    def start(self):
        f = self.folder
        (f / "tmp").mkdir(parents=True, exist_ok=True)
        self.access_log.write_text("")
        conf = f"""
worker_processes {self.workers};
daemon off;
pid {f}/nginx.pid;
error_log {f}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log {self.access_log};
    client_body_temp_path {f}/tmp;
    proxy_temp_path {f}/tmp;
    fastcgi_temp_path {f}/tmp;
    uwsgi_temp_path {f}/tmp;
    scgi_temp_path {f}/tmp;
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{self.port};
        default_type text/plain;
        location /ok {{ return 200 "ok\\n"; }}
        location /fail {{ return 500 "fail\\n"; }}
        location /notfound {{ return 404 "not found\\n"; }}
        {self.extra_locations}
        location / {{ return 200 "ok\\n"; }}
    }}
}}
"""
        (f / "nginx.conf").write_text(conf)
        self.proc = subprocess.Popen(
            ["nginx", "-p", str(f), "-c", str(f / "nginx.conf"), "-e", str(f / "error.log")],
            stdin=subprocess.DEVNULL, stdout=open(f / "stdout.log", "wb"),
            stderr=subprocess.STDOUT, start_new_session=True)
        _wait_port(self.port, self.proc, "nginx", 10)
        return self

    def count_requests(self, needle=None):
        """Requests nginx has logged (those whose line contains needle)."""
        lines = self.access_log.read_text().splitlines()
        return sum(1 for l in lines if needle is None or needle in l)

    def stop(self):
        if self.proc is not None:
            # SIGTERM: fast shutdown of the master we started and its workers
            _stop_pid(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            self.proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class TrafficServer:
    """A private Traffic Server.

    folder:   work folder (created); config in folder/etc, logs in folder/log.
    remap:    list of remap.config lines.
    plugins:  list of plugin.config lines (e.g. ["/path/circuit.so"]).
    records:  extra records.config lines ("CONFIG name TYPE value").
    threads:  event threads (proxy.config.exec_thread.limit, autoconfig off).
    manager:  start traffic_manager (needed by traffic_ctl) or traffic_server alone.
    packaged_timeouts: keep the package's origin timeouts, connect retries and
              down-server marking (Debian: 30 s, 3 retries, 60 s) instead of
              the tests' (no retry, 1 s marking), as an operator's instance has.
    """

    def __init__(self, folder, remap, plugins=(), records=(), threads=2, manager=True,
                 port=None, plugin_dir="/usr/lib/trafficserver/modules",
                 packaged_timeouts=False):
        self.folder = Path(folder).resolve()
        self.remap = list(remap)
        self.plugins = list(plugins)
        self.records = list(records)
        self.threads = threads
        self.manager = manager
        self.packaged_timeouts = packaged_timeouts
        self.port = port or free_port()
        self.plugin_dir = plugin_dir  # where plugin names without a folder are found
        self.rundir = None        # sockets: a short path (a unix socket path has < 108 bytes)
        self.proc = None          # the process we started (manager or server)
        self.server_pid = None    # traffic_server's pid

    @property
    def etc(self):
        return self.folder / "etc"

    @property
    def log(self):
        return self.folder / "log"

    @property
    def runroot(self):
        return self.folder / "runroot.yaml"

    def write_layout(self):
        """Writes the runroot and the configuration (start() does it unless
        told not to, for a caller that edits the files in between)."""
        self._write_layout()

    def _write_layout(self):
        f = self.folder
        for d in ("etc", "log", "cache", "state"):
            (f / d).mkdir(parents=True, exist_ok=True)
        if self.rundir is None:
            self.rundir = Path(tempfile.mkdtemp(prefix="circuit-ats-"))
        # the packaged defaults (ip_allow.yaml, body_factory, storage...),
        # then our own records.config, remap.config and plugin.config
        for item in SYSTEM_CONFIG.iterdir():
            dst = self.etc / item.name
            if item.is_dir():
                shutil.copytree(item, dst, dirs_exist_ok=True)
            else:
                shutil.copy(item, dst)
        (self.etc / "storage.config").write_text(f"{f}/cache 64M\n")
        self.runroot.write_text(
            "prefix: /usr\nexec_prefix: /usr\nbindir: /usr/bin\nsbindir: /usr/sbin\n"
            f"sysconfdir: {self.etc}\ndatadir: {f}/cache\nincludedir: /usr/include\n"
            f"libdir: /usr/lib/trafficserver\nlibexecdir: {self.plugin_dir}\n"
            f"localstatedir: {f}/state\nruntimedir: {self.rundir}\nlogdir: {self.log}\n"
            f"cachedir: {f}/cache\n")
        self.write_records()
        self.write_remap(self.remap)
        (self.etc / "plugin.config").write_text("".join(l + "\n" for l in self.plugins))

    def write_records(self):
        lines = [
            f"CONFIG proxy.config.http.server_ports STRING {self.port}",
            "CONFIG proxy.config.admin.user_id STRING #-1",
            "CONFIG proxy.config.http.cache.http INT 0",
            "CONFIG proxy.config.exec_thread.autoconfig INT 0",
            f"CONFIG proxy.config.exec_thread.limit INT {self.threads}",
            "CONFIG proxy.config.exec_thread.affinity INT 0",
            "CONFIG proxy.config.url_remap.remap_required INT 1",
            "CONFIG proxy.config.reverse_proxy.enabled INT 1",
            "CONFIG proxy.config.diags.output.status STRING L",
            "CONFIG proxy.config.diags.output.note STRING L",
            "CONFIG proxy.config.proxy_name STRING circuit-test",
            "CONFIG proxy.config.http.insert_response_via_str INT 0",
            "CONFIG proxy.config.log.logging_enabled INT 0",
            "CONFIG proxy.config.hostdb.host_file.path STRING /etc/hosts",
        ]
        if not self.packaged_timeouts:
            lines += [
                "CONFIG proxy.config.http.connect_attempts_max_retries INT 0",
                "CONFIG proxy.config.http.connect_attempts_max_retries_dead_server INT 0",
                "CONFIG proxy.config.http.down_server.cache_time INT 1",
            ]
        lines += self.records
        (self.etc / "records.config").write_text("".join(l + "\n" for l in lines))

    def write_remap(self, lines):
        self.remap = list(lines)
        (self.etc / "remap.config").write_text("".join(l + "\n" for l in self.remap))

    def start(self, timeout_s=60, write_config=True):
        if write_config:
            self._write_layout()
        env = dict(os.environ)
        # the plugin is not built with sanitizers; keep an ASan runtime of the
        # caller's build out of Traffic Server
        env.pop("LD_PRELOAD", None)
        # traffic_crashlog reads the layout from here, not from --run-root:
        # its crash logs go to our log folder, not the system's
        env["TS_RUNROOT"] = str(self.runroot)
        out = open(self.folder / "stdout.log", "wb")
        if self.manager:
            cmd = ["traffic_manager", f"--run-root={self.runroot}", "--nosyslog"]
        else:
            cmd = ["traffic_server", f"--run-root={self.runroot}"]
        # setpriv execs the command (the pid stays the server's). The
        # parent-death signal fires when the THREAD that started the child
        # ends, so only from the main thread (circuit_e2e.py starts its two
        # servers from threads that end at once)
        if shutil.which("setpriv") and threading.current_thread() is threading.main_thread():
            cmd = ["setpriv", "--pdeathsig", "TERM"] + cmd
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, env=env, cwd=self.folder,
                                     start_new_session=True)
        try:
            _wait_port(self.port, self.proc,
                       "traffic_manager" if self.manager else "traffic_server", timeout_s)
            self.server_pid = self._find_server_pid() if self.manager else self.proc.pid
            if self.manager:
                self._wait_ctl(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _find_server_pid(self):
        for _ in range(100):
            try:
                kids = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") \
                    .read_text().split()
            except OSError:
                kids = []
            if not kids:   # a kernel without /proc/.../children: parent pids
                for st in Path("/proc").glob("[0-9]*/stat"):
                    try:
                        fields = st.read_text().rsplit(")", 1)[1].split()
                    except OSError:
                        continue
                    if int(fields[1]) == self.proc.pid:
                        kids.append(st.parent.name)
            for k in kids:
                try:
                    exe = os.readlink(f"/proc/{k}/exe")
                except OSError:
                    continue
                if exe.endswith("traffic_server"):
                    return int(k)
            time.sleep(0.05)
        raise RuntimeError("traffic_manager (pid %d) has no traffic_server child" % self.proc.pid)

    def _wait_ctl(self, timeout_s):
        deadline = time.monotonic() + timeout_s
        while True:
            r = self.ctl("metric", "get", "proxy.process.http.completed_requests", check=False)
            if r.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError("traffic_ctl cannot reach traffic_manager: " + r.stderr)
            time.sleep(0.1)

    def ctl(self, *args, check=True, timeout_s=30):
        """Run traffic_ctl against this instance; returns the CompletedProcess."""
        r = subprocess.run(["traffic_ctl", f"--run-root={self.runroot}", *args],
                           capture_output=True, text=True, timeout=timeout_s)
        if check and r.returncode != 0:
            raise RuntimeError("traffic_ctl %s failed (%d): %s%s"
                               % (" ".join(args), r.returncode, r.stdout, r.stderr))
        return r

    def metrics(self, pattern):
        """{name: value string} from traffic_ctl metric match PATTERN."""
        out = self.ctl("metric", "match", pattern).stdout
        res = {}
        for line in out.splitlines():
            parts = line.split(None, 1)
            if len(parts) == 2:
                res[parts[0]] = parts[1].strip()
        return res

    def diags(self):
        p = self.log / "diags.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def get(self, path="/", host=None, **kw):
        return http_get(self.port, path, host=host, **kw)

    def reload(self, remap=None):
        """Write a new remap.config (if given) and `traffic_ctl config reload`."""
        if remap is not None:
            self.write_remap(remap)
        self.ctl("config", "reload")

    def stop(self):
        # The server first (by the pid read at start), then the manager.
        pids = []
        if self.server_pid is not None and (self.proc is None or self.server_pid != self.proc.pid):
            pids.append(self.server_pid)
        if self.proc is not None:
            pids.insert(0, self.proc.pid)   # manager first: it would restart the server
        for pid in pids:
            _stop_pid(pid, signal.SIGTERM)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.proc = None
        self.server_pid = None
        if self.rundir is not None:
            shutil.rmtree(self.rundir, ignore_errors=True)
            self.rundir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class HangingOrigin:
    """An HTTP origin in this process that can be made to hang.

    Healthy, it answers every request 200 "ok" on kept-alive connections; hung
    (hang()), it still accepts connections and reads requests but answers
    none, holding every connection open until heal() or close(): the outage
    a breaker exists for (a stopped application behind a live socket).
    While hung it counts the connections that brought it a request, new or
    kept alive (`held`), and the requests (`held_requests`). `status` is the
    healthy answer's status (200).
    """

    def __init__(self, port=None):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port or 0))
        self.sock.listen(512)
        self.port = self.sock.getsockname()[1]
        self.hung = False
        self.hung_since = None
        self.held = 0
        self.held_requests = 0
        self.served = 0
        self.status = 200
        self._lock = threading.Lock()
        self._conns = set()
        self._stop = False
        self._t = threading.Thread(target=self._accept, daemon=True)
        self._t.start()

    def _accept(self):
        self.sock.settimeout(0.2)
        while not self._stop:
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            with self._lock:
                self._conns.add(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        buf = b""
        counted = False
        c.settimeout(0.2)
        try:
            while not self._stop:
                while b"\r\n\r\n" not in buf and not self._stop:
                    try:
                        d = c.recv(65536)
                    except socket.timeout:
                        if self.hung is False and counted:
                            return      # healed: the held connection is dropped
                        continue
                    if not d:
                        return
                    buf += d
                if self._stop:
                    return
                buf = buf.split(b"\r\n\r\n", 1)[1]   # GET: no body
                with self._lock:
                    hung = self.hung
                    if hung:
                        self.held_requests += 1
                        if not counted:
                            self.held += 1
                            counted = True
                    else:
                        self.served += 1
                if not hung:
                    c.sendall(b"HTTP/1.1 %d X\r\nContent-Length: 3\r\n"
                              b"Content-Type: text/plain\r\n\r\nok\n" % self.status)
        except OSError:
            pass
        finally:
            with self._lock:
                self._conns.discard(c)
            c.close()

    def hang(self):
        """From now on no request is answered; the counts start at 0.
        Returns the time.monotonic() of the change."""
        with self._lock:
            self.held = 0
            self.held_requests = 0
            self.hung = True
            self.hung_since = time.monotonic()
        return self.hung_since

    def heal(self):
        """Answers again; the connections it held are closed."""
        with self._lock:
            self.hung = False
        return time.monotonic()

    def close(self):
        self._stop = True
        self._t.join()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.close()
            except OSError:
                pass
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def hang_trial(port, host, origin, clients=4, warm_s=3.0, hang_s=50.0, recover_s=40.0,
               path="/"):
    """AT8's trial: `clients` threads in a closed loop of GETs through
    Traffic Server (port, Host: host) to `origin`, a HangingOrigin: healthy
    for warm_s, hung for hang_s, then healthy until a request gets 200
    again (at most recover_s). A client pauses 20 ms after an answer other
    than 200 (2 ms after a 200), so steady traffic, not a flood of 503s.
    Returns the figures (times in s from the hang, latencies in ms):
      open_after_s            first 503 with Retry-After, from the hang
      origin_connections      connections the origin held during the hang
      origin_requests         requests it got during the hang
      fast_503, fast_503_p50_ms, fast_503_p99_ms, fast_503_max_ms
                              the 503s with Retry-After from the opening to
                              the end of the hang, and their latency
      statuses                answers to requests started during the hang
      longest_wait_s          the longest request started during the hang
      healthy_200             200s before the hang
      recovered_after_s       first 200 of a request started after the heal
    and the raw requests (start, end, status, Retry-After) as "requests",
    start and end relative to the hang."""
    res = []
    stop = threading.Event()

    def client():
        while not stop.is_set():
            t = time.monotonic()
            try:
                s, h, _ = http_get(port, path, host=host, timeout_s=120)
                ra = h.get("retry-after")
            except Exception:  # noqa: BLE001 (refused, reset, timed out)
                s, ra = None, None
            res.append((t, time.monotonic(), s, ra))
            time.sleep(0.002 if s == 200 else 0.02)
    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for th in threads:
        th.start()
    first_ok = None
    try:
        time.sleep(warm_s)
        t0 = origin.hang()
        time.sleep(hang_s)
        held, held_req = origin.held, origin.held_requests
        t_heal = origin.heal()
        deadline = time.monotonic() + recover_s
        while first_ok is None and time.monotonic() < deadline:
            first_ok = next((r[1] for r in list(res) if r[0] >= t_heal and r[2] == 200), None)
            time.sleep(0.1)
    finally:
        stop.set()
        for th in threads:
            th.join(130)
    opened = [r for r in res if r[0] >= t0 and r[2] == 503 and r[3] is not None]
    t_open = min((r[1] for r in opened), default=None)
    hang = [r for r in res if t0 <= r[0] < t0 + hang_s]
    fast = [r for r in hang if t_open is not None and r[0] >= t_open and r[2] == 503
            and r[3] is not None]
    lat = sorted(1000 * (r[1] - r[0]) for r in fast)
    statuses = {}
    for r in hang:
        statuses[str(r[2])] = statuses.get(str(r[2]), 0) + 1
    pick = lambda q: round(lat[min(len(lat) - 1, int(q * len(lat)))], 2) if lat else None  # noqa: E731
    return {
        "clients": clients, "hang_s": hang_s,
        "open_after_s": round(t_open - t0, 3) if t_open is not None else None,
        "origin_connections": held, "origin_requests": held_req,
        "fast_503": len(fast), "fast_503_p50_ms": pick(0.5), "fast_503_p99_ms": pick(0.99),
        "fast_503_max_ms": round(lat[-1], 2) if lat else None,
        "statuses": statuses,
        "longest_wait_s": round(max((r[1] - r[0] for r in hang), default=0), 3),
        "healthy_200": sum(1 for r in res if r[0] < t0 and r[2] == 200),
        "recovered_after_s": round(first_ok - t_heal, 3) if first_ok is not None else None,
        "requests": [(round(r[0] - t0, 4), round(r[1] - t0, 4), r[2], r[3]) for r in res],
    }
