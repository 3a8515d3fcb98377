"""A series in 64 buckets over its steps: what comparisons of many runs read instead of points.

Comparing 1,000 runs with 5 metrics of 10,000 points each would read 50 million points
per page if it went to ``MetricPoint``. Each ``MetricSeries`` keeps instead a fixed-size
summary (``MetricSeries.summary``, 2.6 kB): ``BUCKETS`` equal step intervals of width
``2**k`` starting at step 0, each with the count, sum, min and max of its values and the
sum of its points' times, plus the series' first time and its lowest and highest value
with their steps. ``ingest()`` adds each new point under the job's row lock (exact: the
same point is never stored, so never counted, twice); when a step reaches past the last
bucket the width doubles and neighbouring buckets merge, so a summary never grows and
never needs the raw points again. ``manage.py build_metric_summaries`` (and the metrics
migration 0002) rebuild them from the stored points with one GROUP BY per series.

Because every width is a power of two, any two summaries can be brought to the wider
one's width exactly (merging 2, 4, ... buckets), which is how metrics/compare/data.py puts
runs of different lengths on one grid and averages groups. Steps below 0 count in the
first bucket.

Stored as little-endian float64s: a header of ``HEADER`` values, then the five arrays.
"""

from __future__ import annotations

import math
import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

BUCKETS = 64
HEADER = 6  # width, first time, low value, its step, high value, its step
SIZE = (HEADER + 5 * BUCKETS) * 8
INF = math.inf


def _zeros() -> array:
    return array("d", bytes(8 * BUCKETS))


@dataclass
class Summary:
    width: int = 1
    t0: float = INF
    low: float = INF
    low_step: int = 0
    high: float = -INF
    high_step: int = 0
    n: array = field(default_factory=_zeros)
    total: array = field(default_factory=_zeros)
    lo: array = field(default_factory=lambda: array("d", [INF] * BUCKETS))
    hi: array = field(default_factory=lambda: array("d", [-INF] * BUCKETS))
    t: array = field(default_factory=_zeros)
    raw: bytes = field(default=b"", compare=False, repr=False)  # as read, for mean_matrix()

    # -- storage ------------------------------------------------------------------------

    @classmethod
    def from_bytes(cls, raw: bytes | memoryview | None) -> Summary:
        if not raw or len(raw) != SIZE:
            return cls()
        raw = bytes(raw)
        a = array("d")
        a.frombytes(raw)
        if sys.byteorder != "little":
            a.byteswap()
        b = BUCKETS
        h = HEADER
        return cls(
            int(a[0]),
            a[1],
            a[2],
            int(a[3]),
            a[4],
            int(a[5]),
            a[h : h + b],
            a[h + b : h + 2 * b],
            a[h + 2 * b : h + 3 * b],
            a[h + 3 * b : h + 4 * b],
            a[h + 4 * b : h + 5 * b],
            raw,
        )

    def to_bytes(self) -> bytes:
        head = [self.width, self.t0, self.low, self.low_step, self.high, self.high_step]
        a = array("d", head) + self.n + self.total + self.lo + self.hi + self.t
        if sys.byteorder != "little":
            a.byteswap()
        return a.tobytes()

    @property
    def count(self) -> int:
        return int(sum(self.n))

    # -- building -------------------------------------------------------------------------

    def _grow(self, step: int) -> None:
        """Double the width (merging neighbours) until ``step`` falls in the last bucket."""
        half = BUCKETS // 2
        while step >= BUCKETS * self.width:
            for arr, merge, empty in (
                (self.n, float.__add__, 0.0),
                (self.total, float.__add__, 0.0),
                (self.t, float.__add__, 0.0),
                (self.lo, min, INF),
                (self.hi, max, -INF),
            ):
                merged = [merge(arr[2 * i], arr[2 * i + 1]) for i in range(half)]
                arr[:] = array("d", merged + [empty] * half)
            self.width *= 2

    def add(self, step: int, value: float, when: float) -> None:
        self.raw = b""  # no longer what was read
        if step >= BUCKETS * self.width:
            self._grow(step)
        b = step // self.width if step > 0 else 0
        self.n[b] += 1
        self.total[b] += value
        self.t[b] += when
        if value < self.lo[b]:
            self.lo[b] = value
        if value > self.hi[b]:
            self.hi[b] = value
        if when < self.t0:
            self.t0 = when
        if value < self.low:
            self.low, self.low_step = value, step
        if value > self.high:
            self.high, self.high_step = value, step

    def merge(self, other: Summary) -> Summary:
        """One summary of both (e.g. a requeued job's attempts), at the wider width."""
        width = max(self.width, other.width)
        a, b = self.at(width), other.at(width)
        out = Summary(width, min(self.t0, other.t0))
        out.low, out.low_step = min((self.low, self.low_step), (other.low, other.low_step))
        out.high, out.high_step = max((self.high, -self.high_step), (other.high, -other.high_step))
        out.high_step = -out.high_step
        for i in range(BUCKETS):
            out.n[i] = a[0][i] + b[0][i]
            out.total[i] = a[1][i] + b[1][i]
            out.lo[i] = min(a[2][i], b[2][i])
            out.hi[i] = max(a[3][i], b[3][i])
            out.t[i] = a[4][i] + b[4][i]
        return out

    def at(self, width: int) -> tuple[list[float], list[float], list[float], list[float], list]:
        """(n, sum, min, max, time sum) per bucket at ``width`` (a power-of-two multiple)."""
        if width <= self.width:
            return list(self.n), list(self.total), list(self.lo), list(self.hi), list(self.t)
        f = width // self.width
        out: tuple[list, list, list, list, list] = ([], [], [], [], [])
        for i in range(BUCKETS):
            lo, hi = i * f, min((i + 1) * f, BUCKETS)
            if lo >= BUCKETS:
                out[0].append(0.0)
                out[1].append(0.0)
                out[2].append(INF)
                out[3].append(-INF)
                out[4].append(0.0)
                continue
            out[0].append(sum(self.n[lo:hi]))
            out[1].append(sum(self.total[lo:hi]))
            out[2].append(min(self.lo[lo:hi]))
            out[3].append(max(self.hi[lo:hi]))
            out[4].append(sum(self.t[lo:hi]))
        return out


def width_for(max_step: int) -> int:
    """The width a summary has once it has seen ``max_step``."""
    width = 1
    while max_step >= BUCKETS * width:
        width *= 2
    return width


def rebuild(series_id: int) -> bytes:
    """The summary of one series from its stored points (command and migration): one
    GROUP BY at the width its highest step needs, and two reads for its extremes."""
    from django.db import connection  # noqa: PLC0415 (keeps the format above free of Django)

    table = "jobs_metricpoint"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT MAX(step), MIN(time) FROM {table} WHERE series_id = %s",  # noqa: S608
            [series_id],
        )
        max_step, t0 = cursor.fetchone()
        s = Summary()
        if max_step is None:
            return s.to_bytes()
        s.width = width_for(max_step)
        s.t0 = t0
        cursor.execute(
            f"SELECT CASE WHEN step > 0 THEN step / %s ELSE 0 END AS b, COUNT(*), SUM(value), "  # noqa: S608
            f"MIN(value), MAX(value), SUM(time) FROM {table} WHERE series_id = %s GROUP BY b",
            [s.width, series_id],
        )
        for b, n, total, lo, hi, t in cursor.fetchall():
            s.n[b], s.total[b], s.lo[b], s.hi[b], s.t[b] = n, total, lo, hi, t
        for order, attr in (("value, step", "low"), ("value DESC, step", "high")):
            cursor.execute(
                f"SELECT value, step FROM {table} WHERE series_id = %s "  # noqa: S608
                f"ORDER BY {order} LIMIT 1",
                [series_id],
            )
            value, step = cursor.fetchone()
            setattr(s, attr, value)
            setattr(s, f"{attr}_step", step)
    return s.to_bytes()


def means(s: Summary, width: int) -> tuple[list[float | None], list[float | None]]:
    """Each bucket's mean value and mean time (seconds after the series' first point) at
    ``width`` (a power-of-two multiple of the summary's), None where it has no points."""
    n: Sequence[float] = s.n
    total: Sequence[float] = s.total
    t: Sequence[float] = s.t
    t0 = s.t0
    f = max(1, width // s.width)
    if f > 1:
        used = -(-BUCKETS // f)
        n = [sum(n[i * f : (i + 1) * f]) for i in range(used)]
        total = [sum(total[i * f : (i + 1) * f]) for i in range(used)]
        t = [sum(t[i * f : (i + 1) * f]) for i in range(used)]
    ys: list[float | None] = [None] * BUCKETS
    ts: list[float | None] = [None] * BUCKETS
    for i, count in enumerate(n):
        if count:
            ys[i] = total[i] / count
            ts[i] = t[i] / count - t0
    return ys, ts


def mean_matrix(summaries: list[Summary], width: int) -> tuple[np.ndarray, np.ndarray]:
    """``means()`` of many summaries at once: (values, times), a row per summary and a
    column per bucket at ``width``, NaN where a bucket has no points. One array of all
    their bytes; summaries of one width are merged into wider buckets together."""
    raw = b"".join(s.raw or s.to_bytes() for s in summaries)
    every = np.frombuffer(raw, dtype="<f8").reshape(len(summaries), HEADER + 5 * BUCKETS)
    b = HEADER
    parts = [every[:, b : b + BUCKETS], every[:, b + BUCKETS : b + 2 * BUCKETS]]
    parts.append(every[:, b + 4 * BUCKETS : b + 5 * BUCKETS])
    n, total, t = (np.zeros((len(summaries), BUCKETS)) for _ in range(3))
    factors = np.maximum(1, width // every[:, 0].astype(np.int64))
    for f in np.unique(factors).tolist():
        rows = np.flatnonzero(factors == f)
        for out, part in zip((n, total, t), parts, strict=True):
            stack = part[rows]
            if f > BUCKETS:
                merged = stack.sum(axis=1, keepdims=True)
            else:
                merged = stack.reshape(len(rows), BUCKETS // f, f).sum(axis=2)
            out[rows, : merged.shape[1]] = merged
    with np.errstate(invalid="ignore", divide="ignore"):
        values = total / n  # 0 / 0: NaN, an empty bucket
        times = t / n - every[:, 1:2]
    return values, times
