#!/usr/bin/env python3
"""docs/NGINX.md, run as written (ctest nginx_recipe).

The guide marks each block with `<!-- nginx-recipe:NAME -->` on the line
before its fence. This test
  1. copies the source tree (what git tracks, as on disk) to WORK/src;
  2. runs the block `build` there verbatim in bash -e, with DESTDIR=WORK/dest
     exported so that the install lands under WORK/dest;
  3. runs the blocks `load` and `conf` verbatim but for the folders
     (/etc/nginx becomes a private WORK/etc, /usr/lib/nginx/modules the
     DESTDIR copy) and the ports (8080-8082 become free ports: a private
     proxy and two nginx origins);
  4. writes a private nginx.conf that includes what those blocks wrote (as
     Debian's /etc/nginx/nginx.conf includes modules-enabled/ and conf.d/),
     runs `nginx -t` on it and starts it (in place of the block `reload`),
     then runs the blocks request and metrics with the ports replaced and
     checks what each shows; then stops the origins and checks the 503.
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
from nx_harness import NGINX, Origin, _NginxBase, free_port, private_folder  # noqa: E402


def blocks(guide):
    out = {}
    lines = guide.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = re.fullmatch(r"<!-- nginx-recipe:(\S+) -->", lines[i])
        if m:
            i += 1
            if not lines[i].startswith("```"):
                raise SystemExit("nginx-recipe:%s is not followed by a fence" % m.group(1))
            body = []
            i += 1
            while not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            out[m.group(1)] = "\n".join(body) + "\n"
        i += 1
    return out


def run(script, cwd, env, what):
    print("---- %s:\n%s----" % (what, script), flush=True)
    r = subprocess.run(["bash", "-e", "-c", script], cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=600)
    print(r.stdout + r.stderr, flush=True)
    if r.returncode != 0:
        raise SystemExit("block %s failed with status %d" % (what, r.returncode))
    return r.stdout


def expect(cond, what):
    if not cond:
        raise SystemExit("FAIL: " + what)
    print("ok:", what, flush=True)


class PrivateNginx(_NginxBase):
    """The guide's nginx: a private nginx.conf that includes the files the
    blocks wrote, as Debian's /etc/nginx/nginx.conf does."""

    def __init__(self, folder, etc, port):
        super().__init__(folder, port)
        self.etc = etc

    def start(self):
        self.conf_path.write_text(
            "include %s/modules-enabled/*.conf;\n" % self.etc + self.common(2)
            + "http {\n%s\n    access_log %s;\n    include %s/conf.d/*.conf;\n}\n"
            % (self.http_common(), self.access_log, self.etc))
        r = subprocess.run([NGINX, "-t", "-p", str(self.folder), "-c", str(self.conf_path),
                            "-e", str(self.error_log)], capture_output=True, text=True)
        print(r.stdout + r.stderr)
        expect(r.returncode == 0, "nginx -t accepts the guide's configuration")
        return super().start()


def main():
    src, work = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    missing = [p for p in ("nginx", "curl") if shutil.which(p) is None
               and not os.path.exists("/usr/sbin/" + p)]
    if missing or not os.path.exists("/usr/share/nginx/src/configure"):
        print(("FAIL" if os.environ.get("CI") == "true" else "SKIP") + ": not installed: "
              + (" ".join(missing) or "nginx-dev"))
        return 1 if os.environ.get("CI") == "true" else 77
    b = blocks(src / "docs" / "NGINX.md")
    for name in ("apt", "build", "load", "conf", "reload", "request", "metrics"):
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
    installed = work / "dest" / "usr/lib/nginx/modules" / "ngx_http_circuit_module.so"
    expect(installed.is_file(), "the build block installed the module where nginx -V's "
           "--modules-path says (/usr/lib/nginx/modules, under DESTDIR)")

    etc = private_folder(work / "etc")
    (etc / "modules-enabled").mkdir(exist_ok=True)
    (etc / "conf.d").mkdir(exist_ok=True)
    proxy_port, o1, o2 = free_port(), free_port(), free_port()

    def local(script):
        return (script.replace("/etc/nginx", str(etc))
                .replace("/usr/lib/nginx/modules", str(installed.parent))
                .replace("127.0.0.1:8080", "127.0.0.1:%d" % proxy_port)
                .replace("127.0.0.1:8081", "127.0.0.1:%d" % o1)
                .replace("127.0.0.1:8082", "127.0.0.1:%d" % o2))

    run(local(b["load"]), work, env, "load")
    run(local(b["conf"]), work, env, "conf")
    origin = Origin(work / "origin", [o1, o2])
    proxy = PrivateNginx(work / "nginx", etc, proxy_port)
    try:
        origin.start()
        proxy.start()
        out = run(local(b["request"]), work, env, "request")
        expect(re.search(r"^HTTP/1\.1 200", out, re.M) and "ok" in out,
               "request: 200 from an origin through the upstream")
        out = run(local(b["metrics"]), work, env, "metrics")
        expect('circuit_state{breaker="shop/127.0.0.1:%d",state="closed"} 1' % o1 in out
               and 'circuit_state{breaker="shop/127.0.0.1:%d",state="closed"} 1' % o2 in out,
               "metrics: both servers' breakers, closed")
        origin.stop()
        # 5 failures in a row per server open both: 10 requests (next
        # upstream tries may take two a request), then a 503
        for _ in range(12):
            subprocess.run(["curl", "-s", "-o", "/dev/null", "http://127.0.0.1:%d/" % proxy_port])
        out = run(local(b["request"]), work, env, "request")
        expect(re.search(r"^HTTP/1\.1 503", out, re.M)
               and re.search(r"^Retry-After: \d+", out, re.M | re.I)
               and "circuit open" in out,
               "request with both servers refused: 503, Retry-After, 'circuit open'")
        out = run(local(b["metrics"]), work, env, "metrics")
        expect('circuit_state{breaker="shop/127.0.0.1:%d",state="open"} 1' % o1 in out,
               "metrics: open")
        expect("closed -> open" in proxy.error_log.read_text(), "the trip is in the error log")
    finally:
        proxy.stop()
        origin.stop()
    print("recipe: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
