"""Training metrics: ingest rate, cost of log() in a training loop, log() to browser
latency, and the time to the first chart of a 1,000,000-point job.

Each figure is set against a baseline measured in the same run:
- ingest: bulk ingest() vs saving one row per point;
- log(): a loop with log() on every step vs the same loop without it;
- latency: the full path (log -> HTTP upload -> ingest -> channel layer -> websocket)
  against a uvicorn server on loopback, vs the two 1 s batching intervals it contains;
- first chart: the downsampled history the websocket sends vs reading every point.

Runs on a throwaway SQLite database unless DATABASE_URL is set.

    .venv/bin/python bench/metrics.py [--points 1000000] [--samples 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from netutil import free_port, wait_port

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TMP = Path(tempfile.mkdtemp(prefix="bench-metrics-"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ.setdefault("PORTAL_DEMO", "1")
os.environ.setdefault("DATABASE_URL", f"sqlite:///{TMP / 'bench.sqlite3'}")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import transaction  # noqa: E402
from django.test import Client  # noqa: E402

from metrics import ingest, query  # noqa: E402
from metrics.models import MetricPoint, MetricSeries  # noqa: E402
from schedulers.on_node import portal_metrics  # noqa: E402
from tests import factories  # noqa: E402


def records(start: int, n: int, keys=("loss", "acc", "lr", "grad_norm")) -> list[ingest.Record]:
    return [
        ingest.Record(
            s, 0, 0, s, 1.7e9 + s * 0.01, {k: (s % 97) / 97 + i for i, k in enumerate(keys)}
        )
        for s in range(start, start + n)
    ]


def bench_ingest(user, cluster, n_points: int) -> None:
    job = factories.training_job(user, cluster)
    t = time.perf_counter()
    done = 0
    while done < n_points // 4:
        batch = min(2500, n_points // 4 - done)
        ingest.ingest(job, records(done, batch))
        done += batch
    bulk = time.perf_counter() - t
    rate = n_points / bulk

    naive_job = factories.training_job(user, cluster)
    series = MetricSeries.objects.create(job=naive_job, key="loss")
    n_naive = min(20_000, n_points)
    t = time.perf_counter()
    with transaction.atomic():
        for s in range(n_naive):
            MetricPoint.objects.create(series=series, seq=s, step=s, value=0.5, time=1.7e9)
    naive_rate = n_naive / (time.perf_counter() - t)
    print(
        f"ingest: {rate:,.0f} points/s bulk (ingest(), batches of 2,500 records x 4 metrics, "
        f"{n_points:,} points in {bulk:.1f} s) vs {naive_rate:,.0f} points/s one row per save "
        f"-> {rate / naive_rate:.1f}x"
    )
    return job


def bench_first_chart(job) -> None:
    total = sum(s.points for s in MetricSeries.objects.filter(job=job))
    t = time.perf_counter()
    message = json.dumps({"type": "history", "series": query.history(job.pk, 1200)})
    downsampled = time.perf_counter() - t
    t = time.perf_counter()
    everything = json.dumps(
        [
            list(MetricPoint.objects.filter(series=s).values_list("step", "value", "time", "seq"))
            for s in MetricSeries.objects.filter(job=job)
        ]
    )
    full = time.perf_counter() - t
    print(
        f"first chart, {total:,} points in {job.metric_series.count()} series: history message "
        f"ready in {downsampled * 1000:.0f} ms ({len(message) / 1e6:.2f} MB, 1,200 px wide) vs "
        f"{full * 1000:.0f} ms and {len(everything) / 1e6:.1f} MB to read and send every point "
        f"-> {full / downsampled:.1f}x faster, {len(everything) / len(message):.0f}x smaller"
    )


def bench_log_overhead(steps: int) -> None:
    run = portal_metrics.Run(str(TMP / "log-bench"), url="", system_interval=0)
    calls = 100_000
    t = time.perf_counter()
    for i in range(calls):
        run.log(step=i, loss=0.5, acc=0.9)
    per_call = (time.perf_counter() - t) / calls

    def work(i):
        return sum(j * j for j in range(20_000))  # a stand-in for a ~1 ms training step

    t = time.perf_counter()
    for i in range(steps):
        work(i)
    bare = time.perf_counter() - t
    t = time.perf_counter()
    for i in range(steps):
        work(i)
        run.log(step=i, loss=0.5, acc=0.9)
    logged = time.perf_counter() - t
    run.close()
    print(
        f"log(): {per_call * 1e6:.1f} us per call ({calls:,} calls, two metrics, file only); "
        f"a loop of {bare / steps * 1e3:.2f} ms steps logging every step ran "
        f"{logged / bare:.3f}x as long as without log() ({steps:,} steps)"
    )


def bench_latency(user, cluster, samples: int) -> None:
    import websockets

    job = factories.training_job(user, cluster)
    token = ingest.issue_token(job)
    (TMP / "token").write_text(token)
    client = Client()
    client.force_login(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    port = free_port()
    server = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "uvicorn"),
            "portal.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env={**os.environ},
    )
    try:
        wait_port(port)
        run = portal_metrics.Run(
            str(TMP / "latency"),
            url=f"http://127.0.0.1:{port}/api/v1/jobs/{job.pk}/metrics/ingest/",
            token_file=str(TMP / "token"),
            system_interval=0,
        )

        async def measure() -> list[float]:
            url = f"ws://127.0.0.1:{port}/ws/jobs/{job.pk}/metrics/"
            headers = {"Cookie": cookie, "Origin": f"http://127.0.0.1:{port}"}
            latencies = []
            async with websockets.connect(url, additional_headers=headers) as ws:
                json.loads(await ws.recv())  # history
                for i in range(samples):
                    sent = time.perf_counter()
                    run.log(step=i, loss=1.0 / (i + 1))
                    while True:
                        message = json.loads(await asyncio.wait_for(ws.recv(), 10))
                        seqs = [r[3] for rows in message.get("points", {}).values() for r in rows]
                        if i in seqs:
                            break
                    latencies.append(time.perf_counter() - sent)
                    await asyncio.sleep(0.3)
            return latencies

        latencies = asyncio.run(measure())
        run.close()
    finally:
        server.terminate()
        server.wait(10)
    latencies.sort()
    p50 = statistics.median(latencies)
    p95 = latencies[int(0.95 * (len(latencies) - 1))]
    print(
        f"log() -> browser: p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms over {samples} "
        f"points (HTTP upload + ingest + channel layer + websocket); the client batches "
        f"up to 1 s, the socket sends at once after a quiet second"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--log-steps", type=int, default=5_000)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    user = factories.user("bench-metrics")
    cluster = factories.cluster("bench", ssh_host="localhost", host_key="SHA256:" + "A" * 43)
    factories.partition(cluster, "cpu")
    print(f"database: {os.environ['DATABASE_URL'].split('@')[-1]}")
    bench_log_overhead(args.log_steps)
    job = bench_ingest(user, cluster, args.points)
    bench_first_chart(job)
    bench_latency(user, cluster, args.samples)


if __name__ == "__main__":
    main()
