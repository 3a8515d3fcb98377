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

from metrics.models import MetricPoint, MetricSeries

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
    """The rank that stands out: the slowest when it is clearly slower than the fastest,
    else the one furthest behind when that is far (a rank that stopped logging keeps the
    rate of its last points, but falls behind); None when no rank stands out."""
    rated = [r for r in ranks if r.steps_per_second is not None]
    if len(rated) < 2:
        return None
    fastest = max(r.steps_per_second or 0.0 for r in rated)
    if fastest <= 0:
        return None
    slowest = min(rated, key=lambda r: (r.steps_per_second or 0.0, -r.lag_steps, r.rank))
    if (slowest.steps_per_second or 0.0) < STRAGGLER_RATIO * fastest:
        return slowest.rank
    behind = max(ranks, key=lambda r: (r.lag_steps, -r.rank))
    return behind.rank if behind.lag_steps > LAG_SECONDS * fastest else None


def _recent_points(series_ids: list[int]) -> dict[int, list[tuple[int, float]]]:
    """The last WINDOW points of each series, in one query (a window function: SQLite
    3.25+ and PostgreSQL), over the (series, seq) primary key."""
    if not series_ids:
        return {}
    table = MetricPoint._meta.db_table
    marks = ",".join(["%s"] * len(series_ids))
    sql = (
        f"SELECT series_id, step, time FROM (SELECT series_id, step, time, ROW_NUMBER() "  # noqa: S608
        f"OVER (PARTITION BY series_id ORDER BY seq DESC) AS n FROM {table} "
        f"WHERE series_id IN ({marks})) AS recent WHERE n <= %s"
    )
    found: dict[int, list[tuple[int, float]]] = {sid: [] for sid in series_ids}
    with connection.cursor() as cursor:
        cursor.execute(sql, [*series_ids, WINDOW])
        for sid, step, when in cursor.fetchall():
            found[sid].append((int(step), float(when)))
    return found


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
    if not series:
        return Progress("", attempt, [], None)
    key = progress_key(series)
    chosen = sorted((s for s in series if s.key == key), key=lambda s: s.rank)
    nodes = {s.rank: s.node for s in series if s.node}  # a rank's node, from any of its series
    points = _recent_points([s.pk for s in chosen])
    measured = [
        (s, rate(points[s.pk]), max((t for _, t in points[s.pk]), default=None)) for s in chosen
    ]
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
