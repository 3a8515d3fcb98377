"""Session links: throughput and added latency through the portal's data paths, against
the upstream reached directly and JupyterHub's configurable-http-proxy (CHP), in one run.

    .venv/bin/python bench/proxy.py [--seconds 5] [--connections 1,16,64]

Load comes from `wrk` (Debian's C load generator), never from Python. Upstreams:
- "1 KiB": a 1 KiB answer served by HAProxy itself, so the baseline is far above any
  proxy measured (the script says by how much);
- "jupyter /api/status" and "jupyter asset": the dev cluster's JupyterLab run here.
Paths: direct; HAProxy with this portal's configuration (cookie verified on each
request, token added, route pushed by the portal over the admin socket: proxy/routes.py);
CHP (npm, bench/.node/).
All plain HTTP on loopback, so the figures compare proxies, not TLS.
"""

from __future__ import annotations

import argparse
import secrets
import shutil
import sys
from pathlib import Path

from netutil import free_port, wait_port
from sessionpath import Stack, wrk

BIN = Path(sys.executable).parent
JUPYTER = Path("/opt/portal-devcluster/jupyter")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--connections", default="1,16,64")
    args = parser.parse_args()
    levels = [int(n) for n in args.connections.split(",")]
    if not shutil.which("wrk"):
        sys.exit("bench/proxy.py: wrk is missing (apt-get install wrk)")

    with Stack("portal-bench-proxy-", PROXY_MAXCONN="2000") as stack:
        # Upstreams: HAProxy answering 1 KiB, and JupyterLab (if the dev cluster installed it).
        up_port = stack.start_1k_upstream()
        upstreams = {"1 KiB": (up_port, "/x", "t" * 32)}
        if (JUPYTER / "bin" / "jupyter").exists():
            jp_port, token = free_port(), secrets.token_urlsafe(24)
            assets = sorted(
                (JUPYTER / "share/jupyter/lab/static").glob("*.js"), key=lambda p: p.stat().st_size
            )
            asset = assets[len(assets) // 2]
            stack.spawn(
                [
                    str(JUPYTER / "bin" / "jupyter"),
                    "lab",
                    "--no-browser",
                    "--allow-root",
                    f"--port={jp_port}",
                    "--ip=127.0.0.1",
                    f"--ServerApp.root_dir={stack.work}",
                    # Behind a proxy the Host is the session's, as on a compute node
                    # (where Jupyter listens on all addresses and allows it anyway).
                    "--ServerApp.allow_remote_access=True",
                ],
                {"JUPYTER_TOKEN": token, "HOME": str(stack.work)},
            )
            upstreams["jupyter /api/status"] = (jp_port, "/api/status", token)
            upstreams[f"jupyter asset ({asset.stat().st_size // 1024} KiB)"] = (
                jp_port,
                f"/static/lab/{asset.name}",
                token,
            )
        # The portal's HAProxy, configured as `make demo` would, but plain HTTP.
        hp_port = stack.start_portal_haproxy()
        for port in (up_port, *(p for p, _, _ in upstreams.values())):
            wait_port(port, timeout=60)
        chp_port = stack.start_chp(f"http://127.0.0.1:{up_port}")

        print(f"wrk, {args.seconds:g} s per figure, loopback HTTP; req/s (p50 ms); ratio to direct")
        header = f"{'upstream':24} {'path':26}" + "".join(f"{f'{c} conn':>22}" for c in levels)
        print(header)
        for name, (port, path, token) in upstreams.items():
            sid, cookie = stack.add_session(port, token)
            session_headers = stack.session_headers(sid, cookie)
            paths = [
                ("direct", f"http://127.0.0.1:{port}{path}", {"Authorization": f"token {token}"}),
                ("HAProxy (portal config)", f"http://127.0.0.1:{hp_port}{path}", session_headers),
            ]
            if chp_port and name == "1 KiB":
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
        if not chp_port:
            print("configurable-http-proxy: not measured (npm not available)")


if __name__ == "__main__":
    main()
