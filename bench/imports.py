"""Importing runs (#46): 1,000 runs logged by MLflow's, W&B's and TensorBoard's own
clients (devtools/run_samples.py: 400 into an ``mlruns`` store, 300 W&B offline runs, 300
TensorBoard run folders, each 2 metrics × ``--steps`` steps), imported into one person's
jobs, then imported again; a sample of runs checked point by point against what was logged.

The target is the issue's: the 1,000 runs in under 10 minutes on this machine. The
baseline, in the same run, is reading the same runs with the same readers and storing
nothing (the floor a store-side change could reach): the ratio is what storing costs.

Runs on a throwaway SQLite database unless DATABASE_URL is set (PostgreSQL is what a
centre runs; `make bench-imports` sets it).

    .venv/bin/python bench/imports.py [--runs 1000] [--steps 100] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TMP = Path(tempfile.mkdtemp(prefix="bench-imports-"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ.setdefault("PORTAL_DEMO", "1")
os.environ.setdefault("DATABASE_URL", f"sqlite:///{TMP / 'bench.sqlite3'}")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from devtools.run_samples import METRICS, value  # noqa: E402
from jobs.models import Job  # noqa: E402
from metrics.models import MetricPoint, MetricSeries  # noqa: E402
from tests import factories  # noqa: E402
from tracking.imports import find, service  # noqa: E402
from tracking.imports.source import SourceRun  # noqa: E402
from tracking.models import ImportedRun  # noqa: E402


def make(out: Path, runs: int, steps: int) -> float:
    mlflow, wandb = runs * 4 // 10, runs * 3 // 10
    tensorboard = runs - mlflow - wandb
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "devtools.run_samples",
            str(out),
            f"--steps={steps}",
            f"--mlflow={mlflow}",
            f"--wandb={wandb}",
            f"--tensorboard={tensorboard}",
        ],
        check=True,
        cwd=ROOT,
        env={**os.environ, "WANDB_SILENT": "true"},
    )
    return time.perf_counter() - started


def read_only(folder: Path) -> tuple[float, int, int]:
    """The baseline: every run found and every point read, nothing stored."""
    started = time.perf_counter()
    runs = points = 0
    for found in find.runs(folder):
        if isinstance(found, SourceRun):
            runs += 1
            points += sum(1 for _ in found.points())
    return time.perf_counter() - started, runs, points


def check_sample(owner, steps: int, sample: int) -> int:
    """``sample`` imported runs, every logged point equal to what was logged; returns the
    points compared."""
    jobs = list(Job.objects.filter(owner=owner, kind=Job.Kind.IMPORTED).exclude(name=""))
    random.Random(46).shuffle(jobs)
    compared = 0
    for job in jobs[:sample]:
        n = int(job.name.rsplit("-", 1)[1])
        for key in METRICS:
            series = MetricSeries.objects.get(job=job, key=key, system=False)
            got = list(
                MetricPoint.objects.filter(series=series)
                .order_by("seq")
                .values_list("step", "value")
            )
            want = [(s, value(key, n, s)) for s in range(steps)]
            if got != want:
                raise SystemExit(f"MISMATCH in {job.name} {key}: {got[:3]} vs {want[:3]}")
            compared += len(got)
    return compared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--sample", type=int, default=100, help="runs checked point by point")
    parser.add_argument("--keep", type=Path, help="reuse (or keep) the logged runs here")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    folder = args.keep or TMP / "runs"
    if not folder.exists():
        made = make(folder, args.runs, args.steps)
        print(f"logged {args.runs} runs with the tools' own clients in {made:.0f} s")
    owner = factories.user(f"importer-{int(time.time())}")

    floor, runs, points = read_only(folder)
    print(
        f"baseline: reading them, storing nothing: {floor:.1f} s ({runs} runs, {points:,} points)"
    )

    started = time.perf_counter()
    first = service.import_path(owner, folder)
    took = time.perf_counter() - started
    print(
        f"import: {took:.1f} s for {len(first.imported)} runs, {first.points:,} points "
        f"({first.points / took:,.0f} points/s; {first.refused_count} refused) "
        f"= {took / floor:.1f}x the reading alone; target < 600 s: "
        f"{'MET' if took < 600 and len(first.imported) == args.runs else 'NOT MET'}"
    )
    before = (Job.objects.count(), MetricPoint.objects.count(), ImportedRun.objects.count())
    started = time.perf_counter()
    second = service.import_path(owner, folder)
    again = time.perf_counter() - started
    after = (Job.objects.count(), MetricPoint.objects.count(), ImportedRun.objects.count())
    print(
        f"second import: {again:.1f} s, {len(second.imported)} imported, {second.already} "
        f"already there; jobs, points, imports {before} -> {after}: "
        f"{'UNCHANGED' if before == after and not second.imported else 'CHANGED'}"
    )
    compared = check_sample(owner, args.steps, args.sample)
    print(f"point by point: {args.sample} runs, {compared:,} points equal to what was logged")


if __name__ == "__main__":
    main()
