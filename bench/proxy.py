"""Session links: throughput and added latency through the portal's data paths, against
the upstream reached directly and JupyterHub's configurable-http-proxy (CHP), in one run.

    .venv/bin/python bench/proxy.py [--seconds 5] [--connections 1,16,64]

Load comes from `wrk` (Debian's C load generator), never from Python. Upstreams:
- "1 KiB": a 1 KiB answer served by HAProxy itself, so the baseline is far above any
  proxy measured (the script says by how much);
- "jupyter /api/status" and "jupyter asset": the dev cluster's JupyterLab run here.
Paths: direct; HAProxy with this portal's configuration (cookie verified on each
request, token added, route pushed over the admin socket: proxy/haproxy.py); the Python
proxy (proxy/app.py, while it still serves the links); CHP (npm, bench/.node/).
All plain HTTP on loopback, so the figures compare proxies, not TLS.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from netutil import free_port, wait_port

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
NODE_DIR = ROOT / "bench" / ".node"
JUPYTER = Path("/opt/portal-devcluster/jupyter")
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

SETUP = """
import django, sys; django.setup()
from django.contrib.auth import get_user_model
from jobs.models import Cluster, Partition, ContainerImage, Job
from proxy import haproxy
from proxy.codes import make_cookie
from proxy.models import Session
from django.conf import settings
u = get_user_model().objects.create_user("bench-" + sys.argv[1])
c, _ = Cluster.objects.get_or_create(name="bench", defaults=dict(ssh_host="localhost", host_key="SHA256:" + "A" * 43))
p, _ = Partition.objects.get_or_create(cluster=c, name="p")
i, _ = ContainerImage.objects.get_or_create(slug="i", defaults=dict(name="i", runtime="none"))
j = Job.objects.create(owner=u, cluster=c, partition=p, image=i, kind="notebook", state="running", node="127.0.0.1")
s = Session.for_job(j)
s.mark_ready("127.0.0.1", int(sys.argv[2]), sys.argv[3])
api = haproxy.RuntimeAPI(settings.PROXY_ADMIN_SOCKET, settings.PROXY_MAP_PATH)
api.add(haproxy.Route(s.public_id, "127.0.0.1", int(sys.argv[2]), sys.argv[3]))
print(s.public_id, make_cookie(s.public_id, u.pk))
"""


def wrk(url: str, headers: dict, connections: int, seconds: float) -> tuple[float, float, int]:
    """(requests/s, p50 ms, non-2xx or socket errors) from wrk."""
    argv = ["wrk", "-t", str(min(connections, 2)), "-c", str(connections)]
    argv += ["-d", f"{seconds:g}s", "--latency"]
    for key, value in headers.items():
        argv += ["-H", f"{key}: {value}"]
    out = subprocess.run(argv + [url], capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = re.search(r"50%\s+([\d.]+)(us|ms|s)\b", out)
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[p50.group(2)]
    errors = sum(
        int(n) for n in re.findall(r"(?:Non-2xx or 3xx responses|errors: \w+):?\s+(\d+)", out)
    )
    errors += sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", out))
    return rps, float(p50.group(1)) * scale, errors


def chp_binary() -> Path | None:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--connections", default="1,16,64")
    args = parser.parse_args()
    levels = [int(n) for n in args.connections.split(",")]
    if not shutil.which("wrk"):
        sys.exit("bench/proxy.py: wrk is missing (apt-get install wrk)")

    work = Path(tempfile.mkdtemp(prefix="portal-bench-proxy-"))
    procs: list[subprocess.Popen] = []
    env = {
        **os.environ,
        "PORTAL_DEMO": "1",
        "PORTAL_DATA_DIR": str(work),
        "SESSION_SCHEME": "http",
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "PROXY_ADMIN_SOCKET": f"unix:{work}/admin.sock",
        "PROXY_MAP_PATH": str(work / "tokens.map"),
        "PROXY_MAXCONN": "2000",
    }
    env.pop("DATABASE_URL", None)

    def spawn(argv, extra_env=None):
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env={**env, **(extra_env or {})},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(proc)
        return proc

    def django(code: str, *argv: str) -> str:
        return subprocess.run(
            [sys.executable, "-c", code, *argv],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    try:
        # Upstreams: HAProxy answering 1 KiB, and JupyterLab (if the dev cluster installed it).
        (work / "1k.txt").write_text("x" * 1024)
        up_port = free_port()
        (work / "upstream.cfg").write_text(UPSTREAM_CFG.format(work=work, port=up_port))
        spawn([HAPROXY, "-db", "-f", str(work / "upstream.cfg")])
        upstreams = {"1 KiB": (up_port, "/x", "t" * 32)}
        if (JUPYTER / "bin" / "jupyter").exists():
            jp_port, token = free_port(), secrets.token_urlsafe(24)
            assets = sorted(
                (JUPYTER / "share/jupyter/lab/static").glob("*.js"), key=lambda p: p.stat().st_size
            )
            asset = assets[len(assets) // 2]
            spawn(
                [
                    str(JUPYTER / "bin" / "jupyter"),
                    "lab",
                    "--no-browser",
                    "--allow-root",
                    f"--port={jp_port}",
                    "--ip=127.0.0.1",
                    f"--ServerApp.root_dir={work}",
                    # Behind a proxy the Host is the session's, as on a compute node
                    # (where Jupyter listens on all addresses and allows it anyway).
                    "--ServerApp.allow_remote_access=True",
                ],
                {"JUPYTER_TOKEN": token, "HOME": str(work)},
            )
            upstreams["jupyter /api/status"] = (jp_port, "/api/status", token)
            upstreams[f"jupyter asset ({asset.stat().st_size // 1024} KiB)"] = (
                jp_port,
                f"/static/lab/{asset.name}",
                token,
            )
        # The portal's HAProxy, configured as `make demo` would, but plain HTTP.
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True
        )
        (work / "tokens.map").write_text("")
        hp_port, portal_port = free_port(), free_port()
        config = django(
            "import django; django.setup()\nfrom proxy.haproxy import render_config\n"
            f"print(render_config(bind='127.0.0.1:{hp_port}', tls_pem=None, "
            f"portal_upstream='127.0.0.1:{portal_port}'))"
        )
        (work / "haproxy.cfg").write_text(config)
        spawn([HAPROXY, "-W", "-db", "-f", str(work / "haproxy.cfg")])
        py_port = free_port()
        spawn(
            [
                str(BIN / "uvicorn"),
                "proxy.asgi:application",
                "--port",
                str(py_port),
                "--log-level",
                "warning",
            ],
            {"SESSION_PUBLIC_PORT": str(py_port)},
        )
        for port in (up_port, hp_port, py_port, *(p for p, _, _ in upstreams.values())):
            wait_port(port, timeout=60)
        chp = chp_binary()
        chp_port = free_port()
        if chp:
            spawn(
                [
                    str(chp),
                    "--ip",
                    "127.0.0.1",
                    "--port",
                    str(chp_port),
                    "--api-ip",
                    "127.0.0.1",
                    "--api-port",
                    str(free_port()),
                    "--default-target",
                    f"http://127.0.0.1:{up_port}",
                    "--log-level",
                    "error",
                ],
                {"CONFIGPROXY_AUTH_TOKEN": "bench"},
            )
            wait_port(chp_port)

        print(f"wrk, {args.seconds:g} s per figure, loopback HTTP; req/s (p50 ms); ratio to direct")
        header = f"{'upstream':24} {'path':26}" + "".join(f"{f'{c} conn':>22}" for c in levels)
        print(header)
        for n, (name, (port, path, token)) in enumerate(upstreams.items()):
            sid, cookie = django(SETUP, str(n), str(port), token).split()
            session_headers = {
                "Host": f"{sid}.sessions.localhost",
                "Cookie": f"portal_session={cookie}",
            }
            paths = [
                ("direct", f"http://127.0.0.1:{port}{path}", {"Authorization": f"token {token}"}),
                ("HAProxy (portal config)", f"http://127.0.0.1:{hp_port}{path}", session_headers),
                (
                    "Python proxy (proxy/app)",
                    f"http://127.0.0.1:{py_port}{path}",
                    {**session_headers, "Host": f"{sid}.sessions.localhost:{py_port}"},
                ),
            ]
            if chp and name == "1 KiB":
                paths.append(("configurable-http-proxy", f"http://127.0.0.1:{chp_port}{path}", {}))
            base = {}
            for label, url, headers in paths:
                wrk(url, headers, 4, 1)  # warm up
                cells = []
                for c in levels:
                    rps, p50, errors = wrk(url, headers, c, args.seconds)
                    if label == "direct":
                        base[c] = (rps, p50)
                    ratio = rps / base[c][0]
                    extra = f" {p50 - base[c][1]:+.2f}ms" if label != "direct" else ""
                    flag = f" {errors} ERR" if errors else ""
                    cells.append(f"{rps:8.0f} ({p50:.2f}) {ratio:4.2f}x{extra}{flag}")
                print(
                    f"{name:24} {label:26}" + "".join(f"{cell:>22}" for cell in cells), flush=True
                )
        if not chp:
            print("configurable-http-proxy: not measured (npm not available)")
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
