"""Where each rank of a job runs and how fast it goes: the job page's rank panel and
straggler view, and the API's ``metrics/ranks``.

Progress is read from one metric that (nearly) every rank logs, the one most ranks have
(ties: the most points), in the job's latest attempt: a rank's last step, its steps per
second over its last ``WINDOW`` points, and how many steps it is behind the rank that is
furthest ahead. A rank is named the slowest when its rate is clearly below the fastest
one's (``STRAGGLER_RATIO``) or it has fallen behind by more than ``LAG_SECONDS`` of the
fastest rank's progress. Ranks that log at different rates than their peers (rank 0's
extra validation points) do not count: the steps, not the points, are compared.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass

from django.db import connection
from django.db.models import Max

from jobs.metrics.models import MetricPoint, MetricSeries

WINDOW = 20  # points per rank the rate is measured over
STRAGGLER_RATIO = 0.8  # slower than this share of the fastest rate: a straggler
LAG_SECONDS = 10.0  # or behind by this many seconds of the fastest rank's progress
MAX_RANKS = 1024  # ranks shown (a job's series are bounded by PORTAL_METRICS_MAX_SERIES)


@dataclass(frozen=True)
class RankProgress:
    rank: int
    node: str
    last_step: int | None
    steps_per_second: float | None
    lag_steps: int  # behind the rank furthest ahead
    last_time: float | None


@dataclass(frozen=True)
class Progress:
    key: str  # the metric progress was read from ('' when there is none)
    attempt: int
    ranks: list[RankProgress]
    slowest: int | None  # the straggler's rank, when one stands out

    def as_dict(self) -> dict:
        return {
            "key": self.key,
            "attempt": self.attempt,
            "ranks": [asdict(r) for r in self.ranks],
            "slowest": self.slowest,
            "nodes": sorted({r.node for r in self.ranks if r.node}),
        }


def rate(points: list[tuple[int, float]]) -> float | None:
    """Steps per second over (step, time) points, or None with too few to tell."""
    if len(points) < 2:
        return None
    steps = [s for s, _ in points]
    times = [t for _, t in points]
    span = max(times) - min(times)
    if span <= 0:
        return None
    return (max(steps) - min(steps)) / span


def find_straggler(ranks: list[RankProgress]) -> int | None:
    """The rank that stands out as slowest, or None (one rank, no rates, or all alike)."""
    rated = [r for r in ranks if r.steps_per_second is not None]
    if len(rated) < 2:
        return None
    fastest = max(r.steps_per_second for r in rated if r.steps_per_second is not None)
    if fastest <= 0:
        return None
    slowest = min(rated, key=lambda r: (r.steps_per_second, -r.lag_steps, r.rank))
    assert slowest.steps_per_second is not None
    slow_rate = slowest.steps_per_second < STRAGGLER_RATIO * fastest
    far_behind = slowest.lag_steps > LAG_SECONDS * fastest
    return slowest.rank if slow_rate or far_behind else None


def _recent_points(series_id: int) -> list[tuple[int, float]]:
    table = MetricPoint._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT step, time FROM {table} WHERE series_id = %s ORDER BY seq DESC LIMIT %s",  # noqa: S608
            [series_id, WINDOW],
        )
        return [(int(step), float(when)) for step, when in cursor.fetchall()]


def progress_key(series: list[MetricSeries]) -> str:
    """The metric most ranks log (ties: the one with the most points, a loss before
    other names, then by name)."""
    ranks_per_key = Counter(s.key for s in series)
    points_per_key: Counter[str] = Counter()
    for s in series:
        points_per_key[s.key] += s.points
    return min(
        ranks_per_key,
        key=lambda k: (-ranks_per_key[k], -points_per_key[k], "loss" not in k.lower(), k),
    )


def job_progress(job_id: int) -> Progress:
    """Each rank's node and progress in the job's latest attempt."""
    base = MetricSeries.objects.filter(job_id=job_id, system=False).exclude(key__startswith="sys/")
    attempt = base.aggregate(latest=Max("attempt"))["latest"]
    if attempt is None:
        return Progress("", 0, [], None)
    series = list(base.filter(attempt=attempt).filter(rank__lt=MAX_RANKS))
    key = progress_key(series)
    chosen = sorted((s for s in series if s.key == key), key=lambda s: s.rank)
    nodes = {s.rank: s.node for s in series if s.node}  # a rank's node, from any of its series
    measured = []
    for s in chosen:
        recent = _recent_points(s.pk)
        measured.append((s, rate(recent), max((t for _, t in recent), default=None)))
    ahead = max((s.last_step for s, _, _ in measured if s.last_step is not None), default=0)
    ranks = [
        RankProgress(
            rank=s.rank,
            node=nodes.get(s.rank, ""),
            last_step=s.last_step,
            steps_per_second=None if r is None else round(r, 3),
            lag_steps=ahead - s.last_step if s.last_step is not None else 0,
            last_time=last,
        )
        for s, r, last in measured
    ]
    return Progress(key, attempt, ranks, find_straggler(ranks))
