"""The session data path as the bench scripts run it (bench/proxy.py, bench/proxy_ws.py):
the portal's HAProxy (its configuration rendered by proxy.haproxy.render_config, routes
pushed over its admin socket, the cookie a JWT from proxy.codes.make_cookie), a 1 KiB
upstream served by HAProxy itself, configurable-http-proxy (CHP), wrk, and the memory
of a process tree. Plain HTTP on loopback; everything lives in one temporary directory.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from netutil import free_port, wait_port

ROOT = Path(__file__).resolve().parents[1]
NODE_DIR = ROOT / "bench" / ".node"
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"

UPSTREAM_CFG = """global
    pidfile {work}/upstream.pid
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend upstream
    bind 127.0.0.1:{port}
    http-request return status 200 content-type text/plain file {work}/1k.txt
"""

# HAProxy with nothing of the portal's: one frontend, one server, the same timeouts and
# connection reuse as the portal's configuration. What the proxy hop itself costs.
BARE_CFG = """global
    pidfile {work}/bare-{port}.pid
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend bare
    bind 127.0.0.1:{port}
    default_backend upstream
backend upstream
{options}    server up 127.0.0.1:{upstream} pool-max-conn -1 pool-purge-delay 5s
"""

# Per (port, token) pair after argv[1] (a unique prefix): a user, a running notebook job
# and its session, routed in HAProxy to 127.0.0.1:port; prints "session-id Cookie-header"
# lines. mark_ready() pushes each route to HAProxy, as in the portal (proxy/routes.py).
SETUP = """
import django, sys; django.setup()
from proxy import codes
from proxy.models import SessionLink
from tests import factories
c = factories.cluster("bench", ssh_host="localhost", host_key="SHA256:" + "A" * 43)
p = factories.partition(c, "p")
i = factories.image("i", "i")
name = codes.cookie_name()
pairs = sys.argv[2:]
for n in range(0, len(pairs), 2):
    port, token = int(pairs[n]), pairs[n + 1]
    u = factories.user(f"bench-{sys.argv[1]}-{n // 2}")
    j = factories.job(u, c, "", partition=p, image=i, kind="notebook", state="running", node="127.0.0.1")
    s = SessionLink.for_job(j)
    assert s.mark_ready("127.0.0.1", port, token)
    print(s.public_id, name + "=" + codes.make_cookie(s.public_id, u.pk))
"""


def wrk(
    url: str, headers: dict, connections: int, seconds: float, threads: int | None = None
) -> tuple[float, float, int]:
    """(requests/s, p50 ms, non-2xx or socket errors) from wrk."""
    threads = threads or min(connections, 2)
    argv = ["wrk", "-t", str(threads), "-c", str(connections)]
    argv += ["-d", f"{seconds:g}s", "--latency"]
    for key, value in headers.items():
        argv += ["-H", f"{key}: {value}"]
    out = subprocess.run(argv + [url], capture_output=True, text=True, check=True).stdout
    return parse_wrk(out)


def parse_wrk(out: str) -> tuple[float, float, int]:
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = re.search(r"50%\s+([\d.]+)(us|ms|s)\b", out)
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[p50.group(2)]
    errors = sum(
        int(n) for n in re.findall(r"(?:Non-2xx or 3xx responses|errors: \w+):?\s+(\d+)", out)
    )
    errors += sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", out))
    return rps, float(p50.group(1)) * scale, errors


def chp_binary() -> Path | None:
    """configurable-http-proxy from npm into bench/.node/ (None without npm)."""
    binary = NODE_DIR / "node_modules" / ".bin" / "configurable-http-proxy"
    if binary.exists() or not shutil.which("npm"):
        return binary if binary.exists() else None
    NODE_DIR.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "npm",
            "install",
            "--prefix",
            str(NODE_DIR),
            "--no-audit",
            "--no-fund",
            "--silent",
            "configurable-http-proxy@4",
        ],
        check=True,
        timeout=600,
    )
    return binary if binary.exists() else None


def tree_pids(root: int) -> list[int]:
    """``root`` and its descendants (HAProxy -W: the master and its worker)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rpartition(")")[2].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo += children.get(pid, [])
    return pids


def rss_kib(pids: list[int]) -> int:
    """The sum of VmRSS over ``pids`` (KiB), those gone counting 0."""
    total = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
        total += int(found.group(1)) if found else 0
    return total


class Stack:
    """Processes and files of one bench run; ``close()`` (or ``with``) ends them all."""

    def __init__(self, prefix: str = "portal-bench-", **settings_env: str) -> None:
        self.work = Path(tempfile.mkdtemp(prefix=prefix))
        self.procs: list[subprocess.Popen] = []
        self.env = {
            **os.environ,
            "PORTAL_DEMO": "1",
            "PORTAL_DATA_DIR": str(self.work),
            "PROXY_SESSION_SCHEME": "http",
            "PROXY_SESSION_DOMAIN": "sessions.localhost",
            "DJANGO_SETTINGS_MODULE": "portal.settings",
            "PROXY_INSTANCES": f"unix:{self.work}/admin.sock",
            "PROXY_MAP_PATH": str(self.work / "tokens.map"),
            **settings_env,
        }
        self.env.pop("DATABASE_URL", None)
        self.haproxy: subprocess.Popen | None = None
        self.chp: subprocess.Popen | None = None
        self.config = ""
        self._sessions = 0

    def __enter__(self) -> Stack:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def spawn(self, argv, extra_env=None, **popen) -> subprocess.Popen:
        popen.setdefault("stdout", subprocess.DEVNULL)
        popen.setdefault("stderr", subprocess.DEVNULL)
        proc = subprocess.Popen(argv, cwd=ROOT, env={**self.env, **(extra_env or {})}, **popen)
        self.procs.append(proc)
        return proc

    def django(self, code: str, *argv: str) -> str:
        return subprocess.run(
            [sys.executable, "-c", code, *argv],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def start_1k_upstream(self) -> int:
        """HAProxy answering 1 KiB to anything: far above every proxy measured."""
        (self.work / "1k.txt").write_text("x" * 1024)
        port = free_port()
        (self.work / "upstream.cfg").write_text(UPSTREAM_CFG.format(work=self.work, port=port))
        self.spawn([HAPROXY, "-db", "-f", str(self.work / "upstream.cfg")])
        return port

    def start_bare_haproxy(self, upstream: int, options: tuple[str, ...] = ()) -> int:
        """HAProxy in front of 127.0.0.1:upstream with none of the portal's checks (and
        the backend ``options`` given); its port."""
        port = free_port()
        path = self.work / f"bare-{port}.cfg"
        lines = "".join(f"    {option}\n" for option in options)
        path.write_text(
            BARE_CFG.format(work=self.work, port=port, upstream=upstream, options=lines)
        )
        self.spawn([HAPROXY, "-db", "-f", str(path)])
        wait_port(port, timeout=30)
        return port

    def start_portal_haproxy(self, extra_global: list[str] | None = None) -> int:
        """The portal's HAProxy, configured as `make demo` would, but plain HTTP; its
        port. ``extra_global``: lines added to the global section (to try a change).
        Sessions need the database, migrated here."""
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=self.env, check=True
        )
        (self.work / "tokens.map").write_text("")
        port, portal_port = free_port(), free_port()
        self.config = self.django(
            "import django; django.setup()\nfrom proxy.haproxy import render_config\n"
            f"print(render_config(bind='127.0.0.1:{port}', tls_pem=None, "
            f"portal_upstream='127.0.0.1:{portal_port}'))"
        )
        if extra_global:
            lines = "".join(f"    {line}\n" for line in extra_global)
            self.config = self.config.replace("\nglobal\n", f"\nglobal\n{lines}", 1)
        (self.work / "haproxy.cfg").write_text(self.config)
        self.haproxy = self.spawn([HAPROXY, "-W", "-db", "-f", str(self.work / "haproxy.cfg")])
        wait_port(port, timeout=60)
        return port

    def add_session(self, port: int, token: str) -> tuple[str, str]:
        """A session routed to 127.0.0.1:port with the notebook token ``token``:
        (session id, its Cookie header)."""
        return self.add_sessions([(port, token)])[0]

    def add_sessions(self, upstreams: list[tuple[int, str]]) -> list[tuple[str, str]]:
        """add_session for each (port, token), in one Django process."""
        self._sessions += 1
        argv = [str(x) for pair in upstreams for x in pair]
        out = self.django(SETUP, str(self._sessions), *argv)
        return [tuple(line.split()) for line in out.splitlines() if line.strip()]

    @staticmethod
    def session_headers(sid: str, cookie: str) -> dict[str, str]:
        return {"Host": f"{sid}.sessions.localhost", "Cookie": cookie}

    def haproxy_admin(self, command: str) -> str:
        """One command on the portal HAProxy's admin socket."""
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(5)
            sock.connect(str(self.work / "admin.sock"))
            sock.sendall(command.encode() + b"\n")
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        return answer.decode()

    def haproxy_info(self) -> dict[str, str]:
        return dict(
            line.split(": ", 1)
            for line in self.haproxy_admin("show info").splitlines()
            if ": " in line
        )

    def haproxy_pids(self) -> list[int]:
        return tree_pids(self.haproxy.pid) if self.haproxy else []

    def start_chp(self, default_target: str, routes: dict[str, str] | None = None) -> int | None:
        """CHP with ``default_target`` and ``routes`` (path prefix -> target); its port,
        or None without npm."""
        chp = chp_binary()
        if not chp:
            return None
        port, api_port = free_port(), free_port()
        self.chp = self.spawn(
            [
                str(chp),
                "--ip",
                "127.0.0.1",
                "--port",
                str(port),
                "--api-ip",
                "127.0.0.1",
                "--api-port",
                str(api_port),
                "--default-target",
                default_target,
                "--log-level",
                "error",
            ],
            {"CONFIGPROXY_AUTH_TOKEN": "bench"},
        )
        wait_port(port)
        wait_port(api_port)
        for prefix, target in (routes or {}).items():
            request = urllib.request.Request(
                f"http://127.0.0.1:{api_port}/api/routes{prefix}",
                data=json.dumps({"target": target}).encode(),
                headers={"Authorization": "token bench"},
                method="POST",
            )
            urllib.request.urlopen(request, timeout=10).close()  # noqa: S310 (loopback)
        return port

    def close(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(self.work, ignore_errors=True)
