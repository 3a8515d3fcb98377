"""Model endpoints: what the portal's proxy adds to streamed completions, at 1, 16 and
100 concurrent streams, against the model server reached directly, in one run.

    .venv/bin/python bench/endpoints.py [--seconds 4] [--rounds 3] [--streams 1,16,100]

The model server is a stand-in that streams like an OpenAI-compatible one (server-sent
events, one `data:` event per token, the first at once, then one every --interval ms,
--tokens in all, then `data: [DONE]`), written in C with the load client
(bench/ssebench.c): a real model on two CPU cores would be what every path waits on,
and the proxy's share would vanish in it. Each stream is timed from the request to its
first event (time to first token) and to its end. Paths: direct; HAProxy with none of
the portal's checks (one frontend, one server, `option http-no-delay`); HAProxy with the portal's configuration,
the endpoint's route and a key pushed as the portal does (endpoints/routes.py): the
key hashed and looked up on every request, its rate counted, the guard's token added.
Plain HTTP on loopback: the figures compare proxies, not TLS. Each figure is the median
over --rounds runs, the paths taken in turn within each round. The stand-in's own
figure (direct) is the baseline: its time to first token must stay far below a token's
interval, or the machine, not the proxy, is what is measured (the script says).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

from netutil import free_port, wait_port
from sessionpath import Stack

BENCH = Path(__file__).resolve().parent
EID = "e" * 32
METERED = "f" * 32  # a second endpoint: its server behind the endpoint meter
ON_NODE = BENCH.parent / "schedulers" / "on_node"
KEY = "pe_bench_" + "k" * 34

ROUTE = """
import django, sys; django.setup()
from endpoints.routes import EndpointRoute, Runtime
from proxy.routes import instances
eid, port, digest = sys.argv[1], int(sys.argv[2]), sys.argv[3]
for api in instances():
    Runtime(api).add(EndpointRoute(eid, "127.0.0.1", port, "g" * 32, {digest: 100000}))
"""


def run_load(binary: Path, port: int, streams: int, seconds: float, headers: list[str]) -> dict:
    argv = [str(binary), "load", str(port), "/v1/chat/completions", str(streams), f"{seconds:g}"]
    out = subprocess.run(argv + headers, capture_output=True, text=True, check=True).stdout
    return {k: float(v) for k, v in re.findall(r"(\w+)=(-?[\d.]+)", out)}


def median_of(runs: list[dict], key: str) -> float:
    values = sorted(run[key] for run in runs)
    return values[len(values) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--streams", default="1,16,100")
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--interval", type=int, default=10, help="ms between tokens")
    args = parser.parse_args()
    levels = [int(n) for n in args.streams.split(",")]
    if not shutil.which("gcc"):
        sys.exit("bench/endpoints.py: gcc is missing (apt-get install gcc libc6-dev)")

    with Stack("portal-bench-endpoints-", PROXY_MAXCONN="4000") as stack:
        binary = stack.work / "ssebench"
        subprocess.run(
            ["gcc", "-O2", "-Wall", "-o", str(binary), str(BENCH / "ssebench.c")], check=True
        )
        upstream = free_port()
        stack.spawn([str(binary), "serve", str(upstream), str(args.tokens), str(args.interval)])
        wait_port(upstream, timeout=30)
        proxy = stack.start_portal_haproxy()
        digest = hashlib.sha256(KEY.encode()).hexdigest()
        stack.django(ROUTE, EID, str(upstream), digest)
        # (as the portal's endpoints backend: each event sent at once)
        bare = stack.start_bare_haproxy(upstream, ("option http-no-delay",))
        # The endpoint meter as a language model's job runs it (on_node/endpoint_meter.py),
        # in front of the same server, its reports in this run's folder.
        meter = free_port()
        stack.spawn(
            [sys.executable, "-m", "endpoint_meter", "--port", str(meter)]
            + ["--upstream", f"127.0.0.1:{upstream}"],
            {"PYTHONPATH": str(ON_NODE), "PORTAL_METRICS_DIR": str(stack.work / "metrics")},
        )
        wait_port(meter, timeout=30)
        stack.django(ROUTE, METERED, str(meter), digest)
        host = f"Host: ep-{EID}.sessions.localhost"
        key = f"Authorization: Bearer {KEY}"
        paths = [
            ("direct", upstream, []),
            ("HAProxy (no checks)", bare, []),
            ("HAProxy (portal, keyed)", proxy, [host, key]),
            ("endpoint meter alone", meter, []),
            ("HAProxy + endpoint meter", proxy, [f"Host: ep-{METERED}.sessions.localhost", key]),
        ]
        refused = run_load(binary, proxy, 1, 0.5, [host, "Authorization: Bearer pe_wrong"])
        if refused["streams"] or not refused["errors"]:
            sys.exit("bench/endpoints.py: a wrong key was not refused: the route is not keyed")
        for _, port, headers in paths:
            run_load(binary, port, 4, 0.5, headers)  # warm up
        runs: dict[tuple[str, int], list[dict]] = {}
        for streams in levels:
            for _ in range(args.rounds):
                for label, port, headers in paths:
                    found = run_load(binary, port, streams, args.seconds, headers)
                    runs.setdefault((label, streams), []).append(found)

        stream_ms = (args.tokens - 1) * args.interval
        print(
            f"streamed completions: {args.tokens} tokens, one every {args.interval} ms (a "
            f"{stream_ms} ms stream); median of {args.rounds} runs of {args.seconds:g} s"
        )
        print("time to first token p50 / p95 (ms), added to direct; stream end p50 / p95 (ms)")
        header = f"{'path':26}" + "".join(f"{f'{n} streams':>34}" for n in levels)
        print(header)
        for label, _, _ in paths:
            cells = []
            for n in levels:
                mine, base = runs[(label, n)], runs[("direct", n)]
                t50, t95 = median_of(mine, "ttft_p50") / 1000, median_of(mine, "ttft_p95") / 1000
                e50, e95 = median_of(mine, "total_p50") / 1000, median_of(mine, "total_p95") / 1000
                b50 = median_of(base, "ttft_p50") / 1000
                errors = sum(int(r["errors"]) for r in mine)
                extra = f" {t50 - b50:+.2f}" if label != "direct" else "      "
                flag = f" {errors}ERR" if errors else ""
                cells.append(f"{t50:5.2f}/{t95:5.2f}{extra} {e50:5.0f}/{e95:4.0f}{flag}")
            print(f"{label:26}" + "".join(f"{cell:>34}" for cell in cells), flush=True)
        worst = max(median_of(runs[("direct", n)], "ttft_p95") / 1000 for n in levels)
        verdict = "far below" if worst < args.interval / 5 else "NOT far below"
        print(
            f"baseline: the stand-in's own time to first token (p95, up to {worst:.2f} ms) is "
            f"{verdict} a token's interval ({args.interval} ms)"
        )


if __name__ == "__main__":
    main()
