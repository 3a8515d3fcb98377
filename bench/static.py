"""A static file served by a web process against the same file from HAProxy's cache
(issue #43: "static files are served by HAProxy, never through Django processes").

    .venv/bin/python bench/static.py [--seconds 10] [--connections 32]

Starts the served stack (bench/loadstack.py: gunicorn's uvicorn workers, WhiteNoise) on
the PostgreSQL database loadlive_bench and HAProxy in front of it with the portal's own
configuration (`manage.py render_proxy_config`), then loads one collected script (its
hashed name, as pages link it) with wrk (C): straight from the web server, then through
HAProxy, whose cache answers after the first request. Prints both rates, p99s and the
ratio, and checks that no request of the measured run through HAProxy reached the web
server (HAProxy's own count of what it sent to the portal's servers) after one warming
request.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
if str(ROOT) not in sys.path:  # run as a script: bench/ is on the path, not the root
    sys.path.insert(0, str(ROOT))

from bench.load_live import database_url, ensure_database  # noqa: E402
from bench.loadstack import LoadStack  # noqa: E402
from bench.netutil import free_port, wait_port  # noqa: E402

HAPROXY = "/usr/sbin/haproxy"
FILE = "frontend/upload.js"


def wrk(url: str, host: str, seconds: float, connections: int) -> dict[str, float]:
    out = subprocess.run(
        ["wrk", "-t", "2", "-c", str(connections), "-d", f"{seconds:g}s", "--latency"]
        + ["-H", f"Host: {host}", "-H", "Accept-Encoding: gzip", url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", out)
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {
        "rate": rate,
        "p99_ms": float(p99.group(1)) * scale[p99.group(2)] if p99 else float("nan"),
        "bad": int(errors.group(1)) if errors else 0,
    }


def portal_servers(admin: Path) -> list[dict[str, str]]:
    """HAProxy's stats of the portal's servers (be_portal's, from ``show stat``)."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(admin))
        sock.sendall(b"show stat\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    header, *rows = data.decode().splitlines()
    names = header.lstrip("# ").split(",")
    cells = [dict(zip(names, row.split(","), strict=False)) for row in rows]
    return [
        c
        for c in cells
        if c.get("pxname") == "be_portal" and c.get("svname") not in ("BACKEND", None)
    ]


def server_requests(admin: Path) -> int:
    """Requests HAProxy sent to the portal's servers (stot of be_portal's servers)."""
    return sum(int(c.get("stot") or 0) for c in portal_servers(admin))


def wait_up(admin: Path, seconds: float) -> None:
    """Until HAProxy's health checks hold the portal's server up (a server starts down
    until checks pass, so a request before then answers 503)."""
    deadline = time.monotonic() + seconds
    while True:
        servers = portal_servers(admin)
        if servers and all(c.get("status", "").startswith("UP") for c in servers):
            return
        if time.monotonic() > deadline:
            shown = [(c.get("svname"), c.get("status"), c.get("check_status")) for c in servers]
            sys.exit(f"bench/static.py: the portal's server is not up behind HAProxy: {shown}")
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--connections", type=int, default=32)
    args = parser.parse_args()
    url = database_url()
    ensure_database(url)
    tmp = Path(tempfile.mkdtemp(prefix="bench-static-"))
    stack = LoadStack(url, tmp, redis_db=12, prefix="benchstatic")
    proxy_port = free_port()
    admin = tmp / "admin.sock"
    with stack:
        manifest = json.loads((tmp / "static" / "staticfiles.json").read_text())
        path = "/static/" + manifest["paths"][FILE]
        env = {**stack.env, "PORTAL_URL": "http://localhost", "PROXY_MAP_PATH": str(tmp / "map")}
        (tmp / "map").touch()
        config = subprocess.run(
            [sys.executable, "manage.py", "render_proxy_config", "--bind"]
            + [f"127.0.0.1:{proxy_port}", "--portal", f"127.0.0.1:{stack.port}"]
            + ["--admin-socket", f"unix:{admin}"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        (tmp / "haproxy.cfg").write_text(config)
        proxy = subprocess.Popen(
            [HAPROXY, "-db", "-f", str(tmp / "haproxy.cfg")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_port(proxy_port, 20)
            host = "localhost"
            print(
                f"bench/static.py: {path}, {args.connections} connections, {args.seconds:g} s each"
            )
            direct = wrk(f"{stack.base_url}{path}", host, args.seconds, args.connections)
            wait_up(admin, 30)
            # One request first: a burst of clients on a cold entry all go to the server
            # until its first response is stored (about a second of misses measured here).
            warm = f"http://127.0.0.1:{proxy_port}{path}"
            subprocess.run(
                ["curl", "-sSf", "-o", "/dev/null", "-H", f"Host: {host}", "-H"]
                + ["Accept-Encoding: gzip", warm],
                check=True,
                timeout=30,
            )
            before = server_requests(admin)
            cached = wrk(
                f"http://127.0.0.1:{proxy_port}{path}", host, args.seconds, args.connections
            )
            reached = server_requests(admin) - before
        finally:
            proxy.terminate()
            proxy.wait(10)
    shutil.rmtree(tmp, ignore_errors=True)
    ratio = cached["rate"] / direct["rate"]
    print(f"{'served':40} {'req/s':>10} {'p99 ms':>8} {'non-2xx':>8}")
    print(
        f"{'by a web process (WhiteNoise)':40} {direct['rate']:10.0f} {direct['p99_ms']:8.1f} {direct['bad']:8}"
    )
    print(
        f"{'by HAProxy from its cache':40} {cached['rate']:10.0f} {cached['p99_ms']:8.1f} {cached['bad']:8}"
    )
    print(f"ratio: {ratio:.1f}x; requests that reached a web process through HAProxy: {reached}")
    print(f"load average: {os.getloadavg()[0]:.2f}")
    if direct["bad"] or cached["bad"] or reached > 2:
        sys.exit(1)


if __name__ == "__main__":
    main()
