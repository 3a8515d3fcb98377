"""Session links: throughput and added latency through the portal's data paths, against
the upstream reached directly and JupyterHub's configurable-http-proxy (CHP), in one run.

    .venv/bin/python bench/proxy.py [--seconds 2] [--rounds 3] [--connections 1,16,64]

Load comes from `wrk` (Debian's C load generator), never from Python. Upstreams:
- "1 KiB": a 1 KiB answer served by HAProxy itself, so the baseline is far above any
  proxy measured (the script says by how much);
- "jupyter /api/status" and "jupyter asset": the dev cluster's JupyterLab run here.
Paths: direct; HAProxy with none of the portal's checks (one frontend, one server: what
the hop itself costs); HAProxy with this portal's configuration (cookie verified on each
request, opener looked up, token added, route pushed by the portal over the admin
socket: proxy/routes.py); CHP (npm, bench/.node/).
Each figure is the median of --rounds runs, the paths taken in turn within each round,
so a slow spell of the machine falls on every path alike.
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


def median(runs: list[tuple[float, float, int]]) -> tuple[float, float, int]:
    """The run of median throughput (its p50 with it), and every run's errors."""
    ordered = sorted(runs)
    rps, p50, _ = ordered[len(ordered) // 2]
    return rps, p50, sum(errors for _, _, errors in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2)
    parser.add_argument("--rounds", type=int, default=3)
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

        print(
            f"wrk, median of {args.rounds} runs of {args.seconds:g} s per figure, loopback HTTP; "
            "req/s (p50 ms); ratio to direct"
        )
        header = f"{'upstream':24} {'path':26}" + "".join(f"{f'{c} conn':>22}" for c in levels)
        print(header)
        for name, (port, path, token) in upstreams.items():
            sid, cookie = stack.add_session(port, token)
            session_headers = stack.session_headers(sid, cookie)
            bare = stack.start_bare_haproxy(port)
            paths = [
                ("direct", f"http://127.0.0.1:{port}{path}", {"Authorization": f"token {token}"}),
                (
                    "HAProxy (no checks)",
                    f"http://127.0.0.1:{bare}{path}",
                    {"Authorization": f"token {token}"},
                ),
                ("HAProxy (portal config)", f"http://127.0.0.1:{hp_port}{path}", session_headers),
            ]
            if chp_port and name == "1 KiB":
                paths.append(("configurable-http-proxy", f"http://127.0.0.1:{chp_port}{path}", {}))
            for _, url, headers in paths:
                wrk(url, headers, 4, 1)  # warm up
            runs: dict[tuple[str, int], list[tuple[float, float, int]]] = {}
            for c in levels:
                for _ in range(args.rounds):
                    for label, url, headers in paths:
                        runs.setdefault((label, c), []).append(wrk(url, headers, c, args.seconds))
            for label, _, _ in paths:
                cells = []
                for c in levels:
                    rps, p50, errors = median(runs[(label, c)])
                    base_rps, base_p50, _ = median(runs[("direct", c)])
                    extra = f" {p50 - base_p50:+.2f}ms" if label != "direct" else ""
                    flag = f" {errors} ERR" if errors else ""
                    cells.append(f"{rps:8.0f} ({p50:.2f}) {rps / base_rps:4.2f}x{extra}{flag}")
                print(
                    f"{name:24} {label:26}" + "".join(f"{cell:>22}" for cell in cells), flush=True
                )
        if not chp_port:
            print("configurable-http-proxy: not measured (npm not available)")


if __name__ == "__main__":
    main()
