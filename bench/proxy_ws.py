"""Session links beyond short requests: WebSocket round trips, 1 GiB streamed each way,
and many open WebSockets under HTTP load; direct against HAProxy with the portal's
configuration (and configurable-http-proxy, CHP, where cheap). Run after bench/proxy.py.

    .venv/bin/python bench/proxy_ws.py [--rtt-count 20000] [--transfer-mib 1024]
        [--ws-conns 500] [--http-conns 1000] [--hold-seconds 10] [--no-chp]

No Python client measures anything here:
1. WebSocket echo round trip: bench/wsbench.c (C, compiled here with gcc: Debian 12
   packages no C WebSocket load tool, neither tcpkali nor websocat), one connection,
   sequential round trips of a small masked text frame each timed with clock_gettime,
   against its own C echo server; every process of the path pinned to one CPU (the
   CPU time each hop adds), then left to the scheduler (adds this VM's cross-CPU
   wake-ups). A Python `websockets` client checks the direct figure.
2. `curl` (C) downloading and uploading --transfer-mib MiB through each path, from and to
   bench/bulk_upstream.py (Python; its direct MB/s is the ceiling), the proxy's RSS
   sampled every 20 ms: a proxy that buffered would grow by the transfer.
3. --ws-conns WebSockets held open over --ws-sessions sessions (wsbench hold, an echo
   every --interval-ms on each) while `wrk` (C) runs --http-conns connections on the
   1 KiB HAProxy-served upstream of bench/proxy.py, split over --http-sessions sessions
   (one wrk each: a browser's connection is to one session host): errors, the portal
   HAProxy's RSS (VmRSS of master and worker) before, during and after, its maxconn
   against the connections it saw, and how often it reused a pooled connection.
--extra-global adds lines to the rendered config's global section, to try a change.
Plain HTTP on loopback, 2 cores shared by clients, proxies and upstreams: the figures
compare proxies, not TLS or a network.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from netutil import free_port, wait_port
from sessionpath import Stack, parse_wrk, rss_kib, tree_pids

BENCH = Path(__file__).resolve().parent
TOKEN = "t" * 32
WS_PATH = "/api/kernels/bench/channels"
HAPROXY_LABEL = "HAProxy (portal config)"
CHP_LABEL = "configurable-http-proxy"


class RssSampler:
    """Peak summed VmRSS (KiB) of some processes, read every ``interval`` seconds."""

    def __init__(self, pids: list[int], interval: float = 0.02) -> None:
        self.pids, self.interval = pids, interval
        self.start = self.peak = rss_kib(pids)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, rss_kib(self.pids))

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_kib(self.pids))


def mib(kib: int) -> str:
    return f"{kib / 1024:.1f}"


def kv(line: str) -> dict[str, float]:
    """wsbench's "key=value ..." line."""
    return {
        key: float(value)
        for key, _, value in (word.partition("=") for word in line.split())
        if value and value.replace(".", "", 1).isdigit()
    }


def pin(pids: list[int], cpus: set[int]) -> None:
    """Every thread of ``pids`` onto ``cpus``."""
    for pid in pids:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                os.sched_setaffinity(int(tid), cpus)
            except OSError:
                pass  # a thread that just ended


def ws_headers(session: dict[str, str] | None) -> list[str]:
    if not session:
        return []
    # A browser's WebSocket always carries its page's Origin: the config checks it.
    return [f"{k}: {v}" for k, v in session.items()] + [f"Origin: http://{session['Host']}"]


def haproxy_stat(stack: Stack) -> list[dict[str, str]]:
    csv = stack.haproxy_admin("show stat").splitlines()
    cols = csv[0].lstrip("# ").split(",")
    return [dict(zip(cols, line.split(","), strict=False)) for line in csv[1:] if line]


def backend_counters(stack: Stack) -> tuple[int, int]:
    """Connections be_sessions opened to notebooks, and requests that reused one."""
    row = next(
        r for r in haproxy_stat(stack) if r["pxname"] == "be_sessions" and r["svname"] == "BACKEND"
    )
    return int(row["connect"] or 0), int(row["reuse"] or 0)


def session_servers(stack: Stack) -> list[dict[str, str]]:
    return [
        row
        for row in haproxy_stat(stack)
        if row["pxname"] == "be_sessions" and row["svname"] not in ("BACKEND", "FRONTEND")
    ]


def rtt(wsbench: Path, port: int, session: dict | None, args) -> dict[str, float]:
    argv = [str(wsbench), "rtt", str(port), WS_PATH]
    hdrs = ws_headers(session)
    subprocess.run([*argv, "500", str(args.ws_size), *hdrs], capture_output=True)  # warm-up
    out = subprocess.run(
        [*argv, str(args.rtt_count), str(args.ws_size), *hdrs], capture_output=True, text=True
    ).stdout
    result = kv(out)
    if result.get("errors", 1) or not result.get("samples"):
        sys.exit(f"bench/proxy_ws.py: WebSocket round trips on port {port} failed: {out}")
    return result


def python_p50(port: int, size: int, count: int = 2000) -> float:
    """p50 µs of a Python `websockets` client's round trips on the direct path."""
    from websockets.sync.client import connect

    message = "x" * size
    times = []
    with connect(f"ws://127.0.0.1:{port}/", compression=None) as ws:
        for _ in range(count + 200):
            t0 = time.perf_counter()
            ws.send(message)
            if ws.recv() != message:
                raise RuntimeError("python sanity client: wrong echo")
            times.append(time.perf_counter() - t0)
    times = sorted(times[200:])
    return times[len(times) // 2] * 1e6


def hold_and_load(
    wsbench: Path, ws_port: int, ws_hdrs: list[str], url: str, targets: list[dict], args, on_open
) -> tuple[dict, tuple[float, float, int]]:
    """--ws-conns WebSockets held open (with traffic) and --http-conns wrk connections at
    once. ``ws_hdrs``: header sets separated by "--", one per session; ``targets``: one
    header set per session, each its own wrk (a browser's connection is to one host)."""
    seconds = args.hold_seconds + 2  # WebSocket traffic covers wrk's whole run
    hold = subprocess.Popen(
        [str(wsbench), "hold", str(ws_port), WS_PATH, str(args.ws_conns), str(seconds)]
        + [str(args.interval_ms), str(args.ws_size), *ws_hdrs],
        stdout=subprocess.PIPE,
        text=True,
    )
    on_open(hold.stdout.readline())
    procs = []
    for n, headers in enumerate(targets):
        conns = args.http_conns // len(targets) + (n < args.http_conns % len(targets))
        argv = ["wrk", "-t", "1", "-c", str(conns), "-d", f"{args.hold_seconds:g}s"]
        argv += ["--latency", "--timeout", "10s"]
        for key, value in headers.items():
            argv += ["-H", f"{key}: {value}"]
        procs.append(subprocess.Popen(argv + [url], stdout=subprocess.PIPE, text=True))
    loads = [parse_wrk(proc.communicate()[0]) for proc in procs]
    rest = hold.communicate(timeout=seconds + 120)[0]
    load = (sum(r[0] for r in loads), max(r[1] for r in loads), sum(r[2] for r in loads))
    lines = rest.strip().splitlines()  # nothing if wsbench failed: counted as errors
    return (kv(lines[-1]) if lines else {}), load


def curl_transfer(url: str, headers: dict[str, str], upload: Path | None) -> tuple[float, str]:
    """(MB/s, problem or "") of one curl download (upload None) or upload."""
    argv = ["curl", "-sS", "--max-time", "300"]
    for key, value in headers.items():
        argv += ["-H", f"{key}: {value}"]
    if upload is None:
        argv += ["-o", "/dev/null", "-w", "%{http_code} %{size_download} %{speed_download}"]
    else:  # -T streams the file (Content-Length); no Expect: 100-continue pause
        argv += ["-T", str(upload), "-H", "Expect:", "-o", "-"]
        argv += ["-w", " %{http_code} %{size_upload} %{speed_upload}"]
    out = subprocess.run(argv + [url], capture_output=True, text=True).stdout.split()
    size = upload.stat().st_size if upload else int(url.rpartition("=")[2])
    if upload is not None:
        if not out or out[0] != str(size):
            return 0.0, f"upstream got {out[0] if out else '?'} of {size} bytes"
        out = out[1:]
    if len(out) != 3 or out[0] != "200" or int(out[1]) != size:
        return 0.0, f"curl: {' '.join(out) or 'failed'}"
    return float(out[2]) / 1e6, ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtt-count", type=int, default=20000, help="round trips per figure")
    parser.add_argument("--ws-size", type=int, default=256, help="WebSocket message bytes")
    parser.add_argument("--transfer-mib", type=int, default=1024)
    parser.add_argument("--transfer-repeat", type=int, default=3, help="median of")
    parser.add_argument("--ws-conns", type=int, default=500)
    parser.add_argument("--ws-sessions", type=int, default=50, help="sessions they spread over")
    parser.add_argument("--interval-ms", type=float, default=200, help="echo period per WS")
    parser.add_argument("--http-conns", type=int, default=1000)
    parser.add_argument("--http-sessions", type=int, default=10, help="sessions wrk rotates")
    parser.add_argument("--hold-seconds", type=float, default=10, help="wrk's run in 3.")
    parser.add_argument(
        "--rounds", type=int, default=2, help="how often 3. loads HAProxy (memory round by round)"
    )
    parser.add_argument("--no-chp", action="store_true", help="skip configurable-http-proxy")
    parser.add_argument(
        "--extra-global",
        action="append",
        default=[],
        metavar="LINE",
        help='a line for HAProxy\'s global section, e.g. "tune.pool-low-fd-ratio 90"',
    )
    args = parser.parse_args()
    for tool in ("wrk", "curl", "gcc"):
        if not shutil.which(tool):
            sys.exit(f"bench/proxy_ws.py: {tool} is missing (apt-get install {tool})")
    # wrk's and wsbench's sockets (HAProxy raises its own limit as root).
    need = args.ws_conns + args.http_conns + 256
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            sys.exit(f"bench/proxy_ws.py: ulimit -n hard limit {hard} < {need}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    errors: list[str] = []

    # The portal's own settings (PROXY_MAXCONN included), on this run's files.
    with Stack("portal-bench-ws-") as stack:
        work = stack.work
        wsbench = work / "wsbench"
        subprocess.run(
            ["gcc", "-O2", "-Wall", "-o", str(wsbench), str(BENCH / "wsbench.c")], check=True
        )
        echo_port, bulk_port = free_port(), free_port()
        echo_server = stack.spawn([str(wsbench), "serve", str(echo_port)])
        stack.spawn([sys.executable, str(BENCH / "bulk_upstream.py"), str(bulk_port)])
        up_port = stack.start_1k_upstream()
        hp_port = stack.start_portal_haproxy(args.extra_global)
        for port in (echo_port, bulk_port, up_port):
            wait_port(port)
        upstreams = [(echo_port, TOKEN)] * args.ws_sessions
        upstreams += [(up_port, TOKEN)] * args.http_sessions + [(bulk_port, TOKEN)]
        sessions = [stack.session_headers(*pair) for pair in stack.add_sessions(upstreams)]
        echoes, https = sessions[: args.ws_sessions], sessions[args.ws_sessions : -1]
        bulk = sessions[-1]
        chp_port = None
        if not args.no_chp:
            chp_port = stack.start_chp(
                f"http://127.0.0.1:{echo_port}", {"/bulk": f"http://127.0.0.1:{bulk_port}"}
            )
        chp_pids = tree_pids(stack.chp.pid) if chp_port and stack.chp else []
        info = stack.haproxy_info()
        hp_pids = stack.haproxy_pids()
        # Each session's server may have a connection limit (PROXY_SESSION_MAXCONN): past
        # it, requests wait in HAProxy's queue ("timeout queue"), then get a 503.
        limits = [int(row["slim"]) for row in session_servers(stack) if row["slim"].isdigit()]
        per_session = min(limits, default=None)
        print(
            f"HAProxy {info.get('Version', '?')} with the portal's configuration"
            f" (maxconn {info.get('Maxconn')}, ulimit-n {info.get('Ulimit-n')},"
            f" per-session server limit {per_session or 'none'}), pids {hp_pids};"
            f" CHP {'4 (npm, bench/.node)' if chp_port else 'not measured (no npm)'}"
        )
        if args.extra_global:
            print(f"   NOT the portal's configuration alone: global + {args.extra_global}")
        for what, conns, count in (
            ("--ws-conns", args.ws_conns, args.ws_sessions),
            ("--http-conns", args.http_conns, args.http_sessions),
        ):
            if per_session and -(-conns // count) > per_session:
                sys.exit(
                    f"bench/proxy_ws.py: {what} {conns} over {count} sessions exceeds the"
                    f" per-session limit {per_session}: the rest would queue, then get 503"
                )

        # 1. WebSocket echo round trip ------------------------------------------------
        print(
            f"\n1. WebSocket echo round trip, µs: {args.ws_size}-byte text frame out, echo"
            f" back, {args.rtt_count} sequential round trips on one connection per figure"
            " (wsbench rtt, C, against the C echo server)"
        )
        paths = [("direct", echo_port, None), (HAPROXY_LABEL, hp_port, echoes[0])]
        if chp_port:
            paths.append((CHP_LABEL, chp_port, None))
        everyone = set(os.sched_getaffinity(0))
        one = {min(everyone)}
        results: dict[str, dict[str, dict[str, float]]] = {"one": {}, "free": {}}
        # One CPU: the client (this process's child), the proxies' threads and the echo
        # server on the same CPU, so a figure is the CPU time of the hops, no wake-ups.
        pinned = [os.getpid(), echo_server.pid, *hp_pids, *chp_pids]
        pin(pinned, one)
        try:
            for label, port, session in paths:
                results["one"][label] = rtt(wsbench, port, session, args)
            py_one = python_p50(echo_port, args.ws_size)
        finally:
            pin(pinned, everyone)
        for label, port, session in paths:
            results["free"][label] = rtt(wsbench, port, session, args)
        cols = f"{'p50':>7}{'p99':>8}{'+p50':>8}{'+p99':>8}{'x p50':>7}"
        print(f"{'':26}| {'one CPU (pinned)':^38}| {'free (scheduler)':^38}")
        print(f"{'path':26}| {cols}| {cols}")
        for label, _, _ in paths:
            cells = []
            for mode in ("one", "free"):
                r, base = results[mode][label], results[mode]["direct"]
                cells.append(
                    f"{r['p50']:7.1f}{r['p99']:8.1f}{r['p50'] - base['p50']:+8.1f}"
                    f"{r['p99'] - base['p99']:+8.1f}{r['p50'] / base['p50']:7.2f}"
                )
            print(f"{label:26}| " + "| ".join(cells))
        direct = results["one"]["direct"]
        wall_ok = abs(direct["wall_per_rt"] - direct["mean"]) <= 0.05 * direct["mean"]
        py_ok = py_one >= direct["p50"]
        print(
            f"   check: direct, one CPU: wall clock per round trip {direct['wall_per_rt']:.1f}"
            f" µs vs mean of the timed ones {direct['mean']:.1f} µs"
            f" ({'agree' if wall_ok else 'DISAGREE'}); a Python `websockets` client on the"
            f" same path and CPU: p50 {py_one:.1f} µs"
            f" ({'slower, as it must be' if py_ok else 'FASTER: the C figure is suspect'});"
            " every echo checked byte for byte, Sec-WebSocket-Accept verified."
        )
        free = results["free"]["direct"]
        if free["p50"] > 1.5 * direct["p50"]:
            print(
                f"   free: the direct round trip takes {free['p50']:.0f} µs against"
                f" {direct['p50']:.0f} µs on one CPU: waking an idle vCPU on each hop"
                " dominates; the pinned figures are the proxies' own cost."
            )
        else:
            print(
                "   free: the scheduler kept the direct pair on one CPU this time (it often"
                " does not: then each hop adds a vCPU wake-up); the pinned figures are"
                " the proxies' own cost."
            )
        if not (wall_ok and py_ok):
            errors.append("WebSocket round-trip check")

        # 2. Large transfers -----------------------------------------------------------
        size = args.transfer_mib * 1024 * 1024
        upload = work / "upload.bin"
        with upload.open("wb") as f:
            f.truncate(size)  # sparse: zeros read from no disk
        print(
            f"\n2. {args.transfer_mib} MiB streamed with curl (C) each way, median of"
            f" {args.transfer_repeat}; upstream bench/bulk_upstream.py (Python);"
            " MB/s = 10^6 B/s; proxy RSS sampled every 20 ms"
        )
        print(
            f"{'path':26}{'down MB/s':>10}{'x':>6}{'up MB/s':>10}{'x':>6}"
            f"    proxy RSS MiB: before -> peak (growth)    range down / up"
        )
        # Warm-up, not shown: the first read of the sparse file fills the page cache.
        url = f"http://127.0.0.1:{bulk_port}/bulk/data"
        curl_transfer(f"{url}?bytes={size}", {}, None)
        curl_transfer(url, {}, upload)
        bulk_paths = [("direct", bulk_port, {}, []), (HAPROXY_LABEL, hp_port, bulk, hp_pids)]
        if chp_port:
            bulk_paths.append((CHP_LABEL, chp_port, {}, chp_pids))
        ceiling = None
        transfers = {}
        for label, port, headers, pids in bulk_paths:
            url = f"http://127.0.0.1:{port}/bulk/data"
            downs, ups, problems = [], [], []
            with RssSampler(pids) as sampler:
                for _ in range(args.transfer_repeat):
                    down, problem_down = curl_transfer(f"{url}?bytes={size}", headers, None)
                    up, problem_up = curl_transfer(url, headers, upload)
                    downs.append(down)
                    ups.append(up)
                    problems += [p for p in (problem_down, problem_up) if p]
            down, up = sorted(downs)[len(downs) // 2], sorted(ups)[len(ups) // 2]
            ceiling = ceiling or (down, up)
            transfers[label] = (down, up)
            memory = "-"
            if pids:
                growth = sampler.peak - sampler.start
                memory = f"{mib(sampler.start)} -> {mib(sampler.peak)} (+{mib(growth)})"
            errors += [f"{label}: {p}" for p in problems]
            print(
                f"{label:26}{down:10.0f}{down / (ceiling[0] or 1):6.2f}{up:10.0f}"
                f"{up / (ceiling[1] or 1):6.2f}    {memory}"
                f"    {min(downs):.0f}-{max(downs):.0f} / {min(ups):.0f}-{max(ups):.0f}"
                + "".join(f"  {p}" for p in problems),
                flush=True,
            )
        upload.unlink()
        hp_down, hp_up = transfers[HAPROXY_LABEL]
        for way, top, hp in (("down", ceiling[0], hp_down), ("up", ceiling[1], hp_up)):
            if top < 1.5 * hp:
                print(
                    f"   {way}: the direct path ({top:.0f} MB/s) is not 1.5x HAProxy's"
                    f" ({hp:.0f}): the client or upstream bounds this figure, so it shows"
                    " HAProxy keeps up, not what HAProxy alone could do."
                )

        # 3. Open WebSockets + HTTP load ---------------------------------------------
        print(
            f"\n3. {args.ws_conns} WebSockets held open over {args.ws_sessions} sessions"
            f" ({args.ws_size}-byte echo every {args.interval_ms:g} ms each: wsbench hold, C)"
            f" + {args.http_conns} wrk connections (C) on the 1 KiB upstream, split over"
            f" {args.http_sessions} sessions (one wrk each), {args.hold_seconds:g} s, at once"
        )
        print(
            f"{'path':26}{'wrk req/s':>10}{'p50 ms':>8}{'wrk err':>8}{'ws open':>8}"
            f"{'ws fail':>8}{'echoes':>9}{'ws err':>7}{'late':>6}{'echo p50/p99 ms':>17}"
            "   (wrk p50: the slowest session's; late: no echo within the period)"
        )
        rss: dict[str, int] = {"before": rss_kib(hp_pids)}
        frontend: dict[str, str] = {}
        queued = connects = reuses = 0
        proxied_ws = [h for session in echoes for h in ["--", *ws_headers(session)]][1:]
        phases = [
            ("direct", echo_port, [], f"http://127.0.0.1:{up_port}/x", [{}] * len(https)),
        ]
        # The proxied load again and again: memory that keeps growing round after round
        # would be a leak; memory taken once and reused is HAProxy's pools.
        for n in range(1, args.rounds + 1):
            label = HAPROXY_LABEL if n == 1 else f"HAProxy, round {n}"
            phases.append((label, hp_port, proxied_ws, f"http://127.0.0.1:{hp_port}/x", https))
        load_rps = {}
        for label, ws_port, ws_hdrs, url, targets in phases:
            proxied = label != "direct"
            suffix = f" ({label.split(', ')[1]})" if label.startswith("HAProxy, ") else ""
            counters = backend_counters(stack)

            def opened(_line: str, proxied: bool = proxied, suffix: str = suffix) -> None:
                if proxied:
                    rss[f"WebSockets open{suffix}"] = rss_kib(hp_pids)

            with RssSampler(hp_pids) as sampler:
                ws, (rps, p50, http_errors) = hold_and_load(
                    wsbench, ws_port, ws_hdrs, url, targets, args, opened
                )
            load_rps.setdefault(label if not proxied else HAPROXY_LABEL, rps)
            ws_errors = int(ws.get("failed", 1) + ws.get("bad", 1) + ws.get("closed", 1))
            ws_errors += int(ws.get("open", 0) - ws.get("still_open", 0))
            if http_errors or ws_errors:
                errors.append(f"{label}: {http_errors} HTTP, {ws_errors} WebSocket errors")
            if proxied:
                rss[f"peak during{suffix}"] = sampler.peak
                time.sleep(1)
                rss[f"after (all closed){suffix}"] = rss_kib(hp_pids)
                stat = haproxy_stat(stack)
                frontend = next(r for r in stat if r["svname"] == "FRONTEND")
                queued = max(int(r["qmax"] or 0) for r in session_servers(stack))
                now = backend_counters(stack)
                connects, reuses = now[0] - counters[0], now[1] - counters[1]
            echo_ms = f"{ws.get('p50', 0) / 1000:.2f}/{ws.get('p99', 0) / 1000:.2f}"
            print(
                f"{label:26}{rps:10.0f}{p50:8.2f}{http_errors:8d}{int(ws.get('open', 0)):8d}"
                f"{int(ws.get('failed', 0)):8d}{int(ws.get('received', 0)):9d}{ws_errors:7d}"
                f"{int(ws.get('late', 0)):6d}{echo_ms:>17}",
                flush=True,
            )
        print(
            "   HAProxy RSS (master + worker), MiB: "
            + ", ".join(f"{k} {mib(v)}" for k, v in rss.items())
        )
        maxconn, peak = int(info.get("Maxconn", 0)), int(frontend.get("smax") or 0)
        print(
            f"   maxconn {maxconn} (settings.PROXY_MAXCONN): the frontend's peak was {peak}"
            f" connections ({peak * 100 // max(maxconn, 1)} %; frontend limit"
            f" {frontend.get('slim')}, ulimit-n {info.get('Ulimit-n')}):"
            f" {'enough' if peak < maxconn else 'NOT ENOUGH'}; most requests waiting in one"
            f" session's queue: {queued}"
        )
        print(
            f"   HAProxy -> upstreams: {connects} new connections, {reuses} reused"
            f" ({100 * reuses // max(connects + reuses, 1)} % of requests on a pooled"
            " connection)"
        )

        hp_rtt = results["one"][HAPROXY_LABEL]["p50"] - direct["p50"]
        print(
            "\nTools: 1. wsbench rtt (C, bench/wsbench.c); 2. curl; 3. wrk + wsbench hold;"
            " RSS: VmRSS in /proc/<pid>/status. Baselines' headroom over HAProxy:"
            f" 1. client + C echo server alone {direct['p50']:.0f} µs p50 (one CPU),"
            f" HAProxy adds {hp_rtt:.0f} µs; 2. bulk_upstream.py {ceiling[0]:.0f} MB/s down"
            f" (x{ceiling[0] / max(hp_down, 1):.1f} HAProxy's), {ceiling[1]:.0f} MB/s up"
            f" (x{ceiling[1] / max(hp_up, 1):.1f}); 3. the 1 KiB upstream"
            f" {load_rps['direct']:.0f} req/s (x{load_rps['direct'] / max(load_rps[HAPROXY_LABEL], 1):.1f})."
        )
        print("errors: " + ("none" if not errors else "; ".join(errors)))
        if errors:
            sys.exit(1)


if __name__ == "__main__":
    main()
