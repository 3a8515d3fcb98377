"""A trial's objective from the metrics its jobs logged (metrics): per job the
metric's series of the lowest rank and latest attempt, read by step (at most the last
MAX_POINTS points), reduced as the experiment says. Pure functions below the first."""

from __future__ import annotations

import math

from metrics.models import MetricPoint, MetricSeries

# Bounds of one controller step's reading: the last points of each open job's series.
MAX_POINTS = 2_000
INTERMEDIATE_STEPS = 2_000


def job_points(job_id: int, metric: str) -> list[tuple[int, float]]:
    """(step, value) of ``metric`` as job ``job_id`` logged it, by step."""
    series = (
        MetricSeries.objects.filter(job_id=job_id, key=metric, system=False)
        .order_by("rank", "-attempt")
        .first()
    )
    if series is None:
        return []
    rows = (
        MetricPoint.objects.filter(series=series)
        .order_by("-step", "-seq")
        .values_list("step", "value")[:MAX_POINTS]
    )
    by_step: dict[int, float] = {}
    for step, value in rows:  # newest first: a repeated step keeps its latest value
        by_step.setdefault(step, value)
    return sorted(by_step.items())


def reduce(points: list[tuple[int, float]], how: str, last_n: int, maximize: bool) -> float | None:
    """The objective of one run: its last value, its best, or the mean of its last N."""
    values = [v for _, v in points if math.isfinite(v)]
    if not values:
        return None
    if how == "best":
        return max(values) if maximize else min(values)
    if how == "mean_last":
        tail = values[-last_n:]
        return math.fsum(tail) / len(tail)
    return values[-1]


def intermediate(per_job: list[list[tuple[int, float]]]) -> dict[int, float]:
    """The trial's objective by step: at each step, the mean over the jobs (folds) that
    logged it; the last INTERMEDIATE_STEPS steps."""
    sums: dict[int, list[float]] = {}
    for points in per_job:
        for step, value in points:
            if math.isfinite(value):
                sums.setdefault(step, []).append(value)
    steps = sorted(sums)[-INTERMEDIATE_STEPS:]
    return {s: math.fsum(sums[s]) / len(sums[s]) for s in steps}
