"""Reading series back: full resolution for a step range, or downsampled to a chart's width.

Downsampling is per-bucket min/max over equal step intervals (the M4 idea without
the duplicates): each bucket keeps its lowest and highest point in the order they
occurred, plus the series' first and last point. It is deterministic and a spike
always survives, which averaging or every-n-th sampling would hide.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from django.db import connection

from jobs.metrics.models import MetricPoint, MetricSeries

DEFAULT_WIDTH = 1200
MAX_WIDTH = 4000


def minmax_indices(steps: list[int], values: list[float], buckets: int) -> list[int]:
    """Indices to keep from a series sorted by step: at most 2 per bucket, plus the ends."""
    n = len(steps)
    if n <= 2 * buckets:
        return list(range(n))
    lo, hi = steps[0], steps[-1]
    span = hi - lo
    keep = {0, n - 1}
    if span <= 0:
        edges = [n * b // buckets for b in range(buckets + 1)]
    else:
        edges = [bisect_left(steps, lo + span * b / buckets) for b in range(buckets)] + [n]
    for a, b in zip(edges, edges[1:], strict=False):
        if b <= a:
            continue
        chunk = values[a:b]
        low, high = min(chunk), max(chunk)
        keep.add(a + chunk.index(low))
        keep.add(a + chunk.index(high))
    return sorted(keep)


@dataclass
class SeriesData:
    series: MetricSeries
    steps: list[int]
    values: list[float]
    times: list[float]
    seqs: list[int]
    total: int  # points in the requested range before downsampling
    downsampled: bool

    def as_dict(self) -> dict:
        return {
            **self.series.as_dict(),
            "total": self.total,
            "downsampled": self.downsampled,
            "step": self.steps,
            "value": self.values,
            "time": self.times,
            "seq": self.seqs,
        }


def _fetch(series_id: int, lo: int | None, hi: int | None) -> list[tuple]:
    table = MetricPoint._meta.db_table
    sql = f"SELECT step, value, time, seq FROM {table} WHERE series_id = %s"  # noqa: S608
    params: list = [series_id]
    if lo is not None:
        sql += " AND step >= %s"
        params.append(lo)
    if hi is not None:
        sql += " AND step <= %s"
        params.append(hi)
    sql += " ORDER BY step, seq"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def read_series(
    series: MetricSeries,
    *,
    width: int = DEFAULT_WIDTH,
    lo: int | None = None,
    hi: int | None = None,
    full: bool = False,
) -> SeriesData:
    """Points of one series in [lo, hi] (all by default), downsampled to ``width`` buckets
    unless ``full`` or there are few enough to draw them all."""
    rows = _fetch(series.pk, lo, hi)
    if not rows:
        return SeriesData(series, [], [], [], [], 0, False)
    steps, values, times, seqs = (list(c) for c in zip(*rows, strict=True))
    total = len(steps)
    if full or total <= 2 * width:
        return SeriesData(series, steps, values, times, seqs, total, False)
    keep = minmax_indices(steps, values, max(1, min(width, MAX_WIDTH)))
    return SeriesData(
        series,
        [steps[i] for i in keep],
        [values[i] for i in keep],
        [times[i] for i in keep],
        [seqs[i] for i in keep],
        total,
        True,
    )


def iter_points(series_ids: list[int], batch: int = 20_000):
    """Every point of the given series, in (series, step) order, for exports (streamed)."""
    table = MetricPoint._meta.db_table
    for sid in series_ids:
        last = None
        while True:
            sql = f"SELECT step, seq, value, time FROM {table} WHERE series_id = %s"  # noqa: S608
            params: list = [sid]
            if last is not None:
                sql += " AND (step > %s OR (step = %s AND seq > %s))"
                params += [last[0], last[0], last[1]]
            sql += " ORDER BY step, seq LIMIT %s"
            params.append(batch)
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                rows = cursor.fetchall()
            if not rows:
                break
            for step, seq, value, when in rows:
                yield sid, step, seq, value, when
            last = rows[-1][:2]
            if len(rows) < batch:
                break


def parse_width(raw, default: int = DEFAULT_WIDTH) -> int:
    try:
        return max(50, min(MAX_WIDTH, int(raw)))
    except (TypeError, ValueError):
        return default


def history(job_id: int, width=None) -> list[dict]:
    """Every series of a job, each downsampled to ``width`` buckets (what a chart first draws)."""
    width = parse_width(width)
    return [
        read_series(s, width=width).as_dict() for s in MetricSeries.objects.filter(job_id=job_id)
    ]
