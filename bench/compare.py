"""Comparing runs: the first render of a comparison of 10, 100 and 1,000 runs with 5
metrics of 10,000 points each (50 million points at 1,000 runs), grouped by learning rate.

Runs are seeded straight into the database through ingest() (the path that keeps each
series' 64-bucket summary, metrics/summary.py), not through a cluster. The figure
is the time to build the comparison (metrics/compare/data.py) and its JSON, and the whole
page through Django's test client, with the database queries each made; the baseline
is what a plain per-run read costs: every series downsampled to 64 points from its raw
points (metrics/query.py, what a job page does per chart), measured up to
``--baseline-runs`` runs and scaled linearly beyond (it is one query per series).

Runs on a throwaway SQLite database unless DATABASE_URL is set.

    .venv/bin/python bench/compare.py [--runs 10,100,1000] [--points 10000]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TMP = Path(tempfile.mkdtemp(prefix="bench-compare-"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ.setdefault("PORTAL_DEMO", "1")
os.environ.setdefault("DATABASE_URL", f"sqlite:///{TMP / 'bench.sqlite3'}")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, override_settings  # noqa: E402

from jobs.models import JobTag  # noqa: E402
from metrics import ingest, query  # noqa: E402
from metrics.compare.data import Options, compare  # noqa: E402
from metrics.models import MetricSeries  # noqa: E402
from tests import factories  # noqa: E402

METRICS = ("loss", "val_loss", "accuracy", "val_accuracy", "lr")
LRS = (0.001, 0.01, 0.1)
STORAGES = {  # the page's static URLs without collectstatic's manifest
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}


def seed_runs(user, cluster, n: int, points: int, start: int) -> list[int]:
    """``n`` runs, each ``points`` steps of the five metrics, ingested in batches."""
    ids = []
    for r in range(start, start + n):
        lr, seed = LRS[r % 3], r // 3
        job = factories.job(
            user, cluster, f"python train.py --lr {lr} --seed {seed}", params={"lr": lr}
        )
        JobTag.objects.create(job=job, name=f"seed={seed}")
        rng = random.Random(r)
        rate = 3 * lr**0.5
        for lo in range(0, points, ingest.MAX_RECORDS):
            batch = []
            for s in range(lo, min(points, lo + ingest.MAX_RECORDS)):
                decay = math.exp(-rate * s / points * 10)
                noise = rng.random() * 0.05
                batch.append(
                    ingest.Record(
                        s,
                        0,
                        0,
                        s,
                        1.7e9 + s * 0.1,
                        {
                            "loss": decay + noise,
                            "val_loss": decay * 1.1 + noise,
                            "accuracy": 1 - decay * 0.9 - noise,
                            "val_accuracy": 1 - decay - noise,
                            "lr": lr * (1 - s / points),
                        },
                    )
                )
            ingest.ingest(job, batch)
        ids.append(job.pk)
    return ids


def first_render(user, ids: list[int]) -> tuple[float, int, float, int, int]:
    """(ms, queries) for the data and its JSON, (ms, queries, bytes) for the whole page."""
    options = Options(ids=tuple(ids), group="param.lr", baseline="group:0.01")
    with CaptureQueriesContext(connection) as data_queries:
        t = time.perf_counter()
        body = json.dumps(compare(user, options).as_dict())
        data_ms = (time.perf_counter() - t) * 1000
    client = Client()
    client.force_login(user)
    url = f"/compare/?ids={','.join(map(str, ids))}&group=param.lr&baseline=group:0.01"
    with CaptureQueriesContext(connection) as page_queries:
        t = time.perf_counter()
        response = client.get(url, HTTP_HOST="localhost")
        page_ms = (time.perf_counter() - t) * 1000
    assert response.status_code == 200, response.content[:300]
    assert len(body) > 0
    return data_ms, len(data_queries), page_ms, len(page_queries), len(response.content)


def plain_read(ids: list[int]) -> tuple[float, int]:
    """Every run's series downsampled from its raw points, one by one."""
    t = time.perf_counter()
    total = 0
    for series in MetricSeries.objects.filter(job_id__in=ids).defer("summary"):
        data = query.read_series(series, width=64)
        total += data.total
    return (time.perf_counter() - t) * 1000, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="10,100,1000")
    parser.add_argument("--points", type=int, default=10_000)
    parser.add_argument("--baseline-runs", type=int, default=100)
    args = parser.parse_args()
    sizes = sorted(int(n) for n in args.runs.split(","))
    call_command("migrate", verbosity=0)
    user = factories.user("bench-compare")
    cluster = factories.cluster("bench", ssh_host="localhost", host_key="SHA256:" + "A" * 43)
    factories.partition(cluster, "cpu")
    print(f"database: {os.environ['DATABASE_URL'].split('@')[-1]}")
    ids: list[int] = []
    for n in sizes:
        t = time.perf_counter()
        before = len(ids)
        ids += seed_runs(user, cluster, n - before, args.points, before)
        seeded = time.perf_counter() - t
        points = (n - before) * len(METRICS) * args.points
        print(
            f"seeded {n - before} runs ({points:,} points) through ingest() in {seeded:.0f} s "
            f"({points / max(seeded, 1e-9):,.0f} points/s)"
        )
        with override_settings(PORTAL_PAGE_CLUSTER_RATE="100000/min", STORAGES=STORAGES):
            first_render(user, ids[:n])  # warm the code paths, not the data
            data_ms, data_q, page_ms, page_q, size = first_render(user, ids[:n])
        measured = min(n, args.baseline_runs)
        plain_ms, plain_points = plain_read(ids[:measured])
        plain_ms *= n / measured
        note = "" if measured == n else f", scaled from {measured} runs"
        print(
            f"compare {n:>5} runs x {len(METRICS)} metrics x {args.points:,} points, grouped by "
            f"lr: data+JSON {data_ms:,.0f} ms ({data_q} queries), page {page_ms:,.0f} ms "
            f"({page_q} queries, {size / 1e6:.1f} MB) vs {plain_ms:,.0f} ms to downsample "
            f"every series from its points ({n * len(METRICS)} queries{note}) "
            f"-> {plain_ms / page_ms:.0f}x"
        )


if __name__ == "__main__":
    main()
