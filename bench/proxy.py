"""Requests per second and added latency: direct, through the session proxy, and
through JupyterHub's configurable-http-proxy (CHP), in one run on this machine.

    .venv/bin/python bench/proxy.py [--seconds 5] [--concurrency 16]

The upstream is a small uvicorn app answering 1 KiB. CHP is installed from the
npm registry into bench/.node/ on first use (skipped, with a note, without npm).
All three use plain HTTP on loopback so the figures compare proxies, not TLS.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from netutil import free_port, wait_port

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
NODE_DIR = ROOT / "bench" / ".node"

UPSTREAM_APP = """
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"x" * 1024})
"""


async def load(
    url: str, headers: dict, seconds: float, concurrency: int
) -> tuple[float, list[float]]:
    import httpx

    latencies: list[float] = []
    deadline = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(headers=headers, limits=limits, timeout=10) as client:

        async def worker():
            while time.perf_counter() < deadline:
                start = time.perf_counter()
                response = await client.get(url)
                assert response.status_code == 200, (url, response.status_code, response.text[:200])
                latencies.append(time.perf_counter() - start)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
    return len(latencies) / elapsed, latencies


def chp_binary() -> Path | None:
    binary = NODE_DIR / "node_modules" / ".bin" / "configurable-http-proxy"
    if binary.exists():
        return binary
    if not shutil.which("npm"):
        return None
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
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="portal-bench-proxy-"))
    procs: list[subprocess.Popen] = []
    env = {
        **os.environ,
        "PORTAL_DEMO": "1",
        "PORTAL_DATA_DIR": str(work),
        "DATABASE_URL": "",
        "SESSION_SCHEME": "http",
    }
    env.pop("DATABASE_URL")

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

    try:
        (work / "upstream.py").write_text(UPSTREAM_APP)
        up_port = free_port()
        spawn(
            [
                str(BIN / "uvicorn"),
                "upstream:app",
                "--app-dir",
                str(work),
                "--port",
                str(up_port),
                "--log-level",
                "warning",
            ]
        )
        # A database with one ready session pointing at the upstream.
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True
        )
        proxy_port = free_port()
        setup = subprocess.run(
            [
                sys.executable,
                "-c",
                f"""
import django; django.setup()
from django.contrib.auth import get_user_model
from jobs.models import Cluster, Partition, ContainerImage, Job
from proxy.models import Session
from proxy.codes import make_cookie
u = get_user_model().objects.create_user("bench")
c = Cluster.objects.create(name="bench", ssh_host="localhost", host_key="SHA256:" + "A" * 43)
p = Partition.objects.create(cluster=c, name="p")
i = ContainerImage.objects.create(name="i", slug="i", runtime="none")
j = Job.objects.create(owner=u, cluster=c, partition=p, image=i, kind="notebook", state="running")
s = Session.for_job(j)
s.mark_ready("127.0.0.1", {up_port}, "t" * 32)
print(s.public_id, make_cookie(s.public_id, u.pk))
""",
            ],
            cwd=ROOT,
            env={**env, "DJANGO_SETTINGS_MODULE": "portal.settings"},
            capture_output=True,
            text=True,
            check=True,
        )
        public_id, cookie = setup.stdout.split()
        spawn(
            [
                str(BIN / "uvicorn"),
                "proxy.asgi:application",
                "--port",
                str(proxy_port),
                "--log-level",
                "warning",
            ],
            {"SESSION_PUBLIC_PORT": str(proxy_port)},
        )
        targets = [("direct", f"http://127.0.0.1:{up_port}/api/x", {})]
        wait_port(up_port)
        wait_port(proxy_port)
        targets.append(
            (
                "portal proxy",
                f"http://127.0.0.1:{proxy_port}/api/x",
                {
                    "host": f"{public_id}.sessions.localhost:{proxy_port}",
                    "cookie": f"portal_session={cookie}",
                },
            )
        )
        chp = chp_binary()
        if chp:
            chp_port, api_port = free_port(), free_port()
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
                    str(api_port),
                    "--default-target",
                    f"http://127.0.0.1:{up_port}",
                    "--log-level",
                    "error",
                ],
                {"CONFIGPROXY_AUTH_TOKEN": "bench"},
            )
            wait_port(chp_port)
            targets.append(("configurable-http-proxy", f"http://127.0.0.1:{chp_port}/api/x", {}))

        results = {}
        for name, url, headers in targets:
            asyncio.run(load(url, headers, 1, args.concurrency))  # warm up
            results[name] = asyncio.run(load(url, headers, args.seconds, args.concurrency))

        base_rps, base_lat = results["direct"]
        base_p50 = statistics.median(base_lat) * 1000
        print(
            f"{args.concurrency} concurrent clients, {args.seconds:.0f} s each, 1 KiB responses, loopback HTTP"
        )
        print(
            f"{'':26} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'added p50 ms':>13} {'req/s vs direct':>16}"
        )
        for name, (rps, lat) in results.items():
            lat_ms = sorted(x * 1000 for x in lat)
            p50, p99 = statistics.median(lat_ms), lat_ms[int(len(lat_ms) * 0.99) - 1]
            print(
                f"{name:26} {rps:9.0f} {p50:8.2f} {p99:8.2f} {p50 - base_p50:13.2f} {rps / base_rps:15.2f}x"
            )
        if "configurable-http-proxy" not in results:
            print("configurable-http-proxy: not measured (npm not available)")
        else:
            ours, theirs = results["portal proxy"][0], results["configurable-http-proxy"][0]
            print(f"portal proxy / configurable-http-proxy throughput: {ours / theirs:.2f}x")
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
