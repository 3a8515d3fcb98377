"""Reading series back: full resolution for a step range, or downsampled to a chart's width.

Downsampling is per-bucket min/max over equal step intervals, computed by the
database (one GROUP BY over the (series, step) index, so a million points never
travel to Python): each bucket gives its lowest and highest value, drawn at the
bucket's first and last step in the direction the series is heading. It is
deterministic and a spike always survives, which averaging or every-n-th
sampling would hide. A bucket is at most one pixel wide, so where inside it a
point sat cannot be seen.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass

from django.db import connection
from django.db.models import Lookup

from metrics.models import MetricPoint, MetricSeries

DEFAULT_WIDTH = 1200
MAX_WIDTH = 4000
TABLE = MetricPoint._meta.db_table


@dataclass
class SeriesData:
    series: MetricSeries
    steps: list[int]
    values: list[float]
    times: list[float]
    seqs: list[int | None]  # None for a bucket's min/max (not one stored point)
    total: int  # points in the requested range before downsampling
    downsampled: bool
    max_seq: int | None = None  # newest point included (a page drops live repeats)

    def as_dict(self) -> dict:
        return {
            **self.series.as_dict(),
            "total": self.total,
            "downsampled": self.downsampled,
            "max_seq": self.max_seq,
            "step": self.steps,
            "value": self.values,
            "time": self.times,
            "seq": self.seqs,
        }


def _steps(lo: int | None, hi: int | None, column: str = "step") -> tuple[str, list]:
    """`` AND ...`` for a step range (empty for all steps) and its parameters."""
    sql, params = "", []
    if lo is not None:
        sql += f" AND {column} >= %s"
        params.append(lo)
    if hi is not None:
        sql += f" AND {column} <= %s"
        params.append(hi)
    return sql, params


def _query(sql: str, params: list) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def id_list(values) -> str:
    """Whole numbers (database ids, steps, counts: never text) as a SQL list: no parameter
    per series, so a job's 2,000 series stay within SQLite's parameter limit. Reads and
    ingest.py's writes build their lists and VALUES rows with it."""
    return ",".join(str(int(v)) for v in values)


class InIds(Lookup):
    """``column IN (1,2,3)`` with the ids written into the SQL by id_list(), a filter
    condition (``Q(InIds(F("pk"), ids))``): a thousand ids are one short string, where
    ``pk__in`` binds and resolves a parameter each (90 ms for a comparison of 1,000
    runs, whose ids appear in three queries)."""

    lookup_name = "in_ids"
    prepare_rhs = False

    def as_sql(self, compiler, connection):
        lhs, params = self.process_lhs(compiler, connection)
        return f"{lhs} IN ({id_list(self.rhs) or 'NULL'})", params


def _by_series(rows: list[tuple]) -> dict[int, list[tuple]]:
    """Rows ordered by series id (their first column) as {series id: the rest of each}."""
    return {pk: [r[1:] for r in group] for pk, group in itertools.groupby(rows, key=lambda r: r[0])}


def buckets_to_points(rows: list[tuple]) -> tuple[list, list, list]:
    """(bucket, min, max, first step, last step, first time, last time) rows, in bucket
    order, to points: one per flat bucket, else min and max at the bucket's ends, the
    higher one first when the series goes down there (so a trend draws no sawtooth)."""
    steps, values, times = [], [], []
    mids = [(r[1] + r[2]) / 2 for r in rows]
    for i, (_, low, high, s0, s1, t0, t1) in enumerate(rows):
        if low == high or s0 == s1:
            steps.append(s0)
            values.append(high if low != high else low)
            times.append(t0)
            continue
        falling = i + 1 < len(rows) and mids[i + 1] < mids[i]
        first, second = (high, low) if falling else (low, high)
        steps += [s0, s1]
        values += [first, second]
        times += [t0, t1]
    return steps, values, times


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
    return read_many([series], width=width, lo=lo, hi=hi, full=full)[0]


def read_many(
    series: list[MetricSeries],
    *,
    width: int = DEFAULT_WIDTH,
    lo: int | None = None,
    hi: int | None = None,
    full: bool = False,
) -> list[SeriesData]:
    """``read_series`` of each of ``series``, in order, in at most three queries whatever
    their number: each series' step range, the points of those drawn whole, the buckets of
    the others (each series its own bucket size, from a VALUES list joined to the points)."""
    if not series:
        return []
    width = max(1, min(width, MAX_WIDTH))
    steps_sql, steps_params = _steps(lo, hi)
    stats = _stats(series, lo, hi)
    whole = [pk for pk, (count, *_) in stats.items() if full or count <= 2 * width]
    bucketed = {  # series id -> (first step, steps per bucket: at most ``width`` buckets)
        pk: (first, (last - first) // width + 1)
        for pk, (_, first, last, _) in stats.items()
        if pk not in whole
    }
    points: dict[int, list[tuple]] = {}
    if whole:
        rows = _query(
            f"SELECT series_id, step, value, time, seq FROM {TABLE} "  # noqa: S608
            f"WHERE series_id IN ({id_list(whole)}){steps_sql} ORDER BY series_id, step, seq",
            steps_params,
        )
        points.update(_by_series(rows))
    if bucketed:
        sizes = ",".join(
            f"({id_list((pk, first, size))})" for pk, (first, size) in bucketed.items()
        )
        p_steps, p_params = _steps(lo, hi, "p.step")
        # Each point with its bucket, behind a fence the planner does not look through
        # (PostgreSQL's OFFSET 0): it then expects few buckets and hashes them, where it
        # sorted every point to group them (20.7 -> 12.5 ms for 40,000 points).
        fence = " OFFSET 0" if connection.vendor == "postgresql" else ""
        rows = _query(
            f"WITH b (sid, lo, size) AS (VALUES {sizes}) "  # noqa: S608
            "SELECT q.series_id, q.k, MIN(q.value), MAX(q.value), MIN(q.step), MAX(q.step), "
            "MIN(q.time), MAX(q.time), COUNT(*) FROM ("
            "SELECT p.series_id, (p.step - b.lo) / b.size AS k, p.value, p.step, p.time "
            f"FROM {TABLE} p JOIN b ON p.series_id = b.sid WHERE 1 = 1{p_steps}{fence}) q "
            "GROUP BY q.series_id, q.k ORDER BY q.series_id, q.k",
            p_params,
        )
        points.update(_by_series(rows))
    found = []
    for s in series:
        if s.pk not in stats:
            found.append(SeriesData(s, [], [], [], [], 0, False))
            continue
        max_seq = stats[s.pk][3]
        rows = points.get(s.pk, [])
        if s.pk in bucketed:
            steps, values, times = buckets_to_points([r[:7] for r in rows])
            seqs: list[int | None] = [None] * len(steps)
            total = sum(r[7] for r in rows)
            found.append(SeriesData(s, steps, values, times, seqs, total, True, max_seq))
        elif rows:
            steps, values, times, seqs = (list(c) for c in zip(*rows, strict=True))
            found.append(SeriesData(s, steps, values, times, seqs, len(rows), False, max_seq))
        else:  # its points are all outside the range
            found.append(SeriesData(s, [], [], [], [], 0, False, max_seq))
    return found


def _stats(
    series: list[MetricSeries], lo: int | None, hi: int | None
) -> dict[int, tuple[int, int, int, int]]:
    """{series id: (points, or as many as decide how to draw it; first step, last step,
    highest seq)} for the series with points in [lo, hi].

    Over the whole range no point is counted: the first and last steps and the highest
    seq are each one probe of an index, and the series' counter of stored points (kept
    by ingest.py under the job's lock) stands for the count, or the span of steps where
    that is larger (points written another way). Counting 20,000 points of two series took
    7 ms of PostgreSQL for each chart read; the draw counts them anyway (in its buckets,
    or as the rows it reads)."""
    if lo is None and hi is None:
        ids = ",".join(f"({id_list([s.pk])})" for s in series)
        # (a CTE names the VALUES' column: SQLite takes no "AS v (id)" on a subquery)
        rows = _query(
            f"WITH v (id) AS (VALUES {ids}) "  # noqa: S608
            f"SELECT v.id, (SELECT MIN(step) FROM {TABLE} WHERE series_id = v.id), "
            f"(SELECT MAX(step) FROM {TABLE} WHERE series_id = v.id), "
            f"(SELECT MAX(seq) FROM {TABLE} WHERE series_id = v.id) "
            "FROM v",
            [],
        )
        counted = {s.pk: s.points for s in series}
        return {
            pk: (max(counted[pk], last - first + 1), first, last, max_seq)
            for pk, first, last, max_seq in rows
            if first is not None
        }
    steps_sql, steps_params = _steps(lo, hi)
    return {
        row[0]: row[1:]
        for row in _query(
            f"SELECT series_id, COUNT(*), MIN(step), MAX(step), MAX(seq) FROM {TABLE} "  # noqa: S608
            f"WHERE series_id IN ({id_list(s.pk for s in series)}){steps_sql} GROUP BY series_id",
            steps_params,
        )
    }


def iter_points(series_ids: list[int], batch: int = 20_000):
    """Every point of the given series, in (series, step) order, for exports (streamed)."""
    table = TABLE
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


class BadQuery(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


MAX_STEP = 2**62


@dataclass(frozen=True)
class SeriesQuery:
    """Which series of a job, which step range, how wide (from a page's or the API's query)."""

    ids: tuple[int, ...] = ()
    lo: int | None = None
    hi: int | None = None
    width: int = DEFAULT_WIDTH
    full: bool = False

    @classmethod
    def parse(cls, params) -> SeriesQuery:
        """``?series=1,2&lo=&hi=&width=&full=1`` (a QueryDict or dict); BadQuery if malformed."""

        def whole(name: str, raw) -> int | None:
            if raw in (None, ""):
                return None
            try:
                value = int(raw)
            except ValueError:
                raise BadQuery(name, f"Must be a whole number, not {raw[:40]!r}.") from None
            if abs(value) > MAX_STEP:  # beyond the database's 64-bit integers
                raise BadQuery(name, f"Must be between {-MAX_STEP} and {MAX_STEP}.")
            return value

        ids = tuple(
            n
            for v in params.get("series", "").split(",")
            if v and (n := whole("series", v)) is not None
        )
        return cls(
            ids=ids,
            lo=whole("lo", params.get("lo")),
            hi=whole("hi", params.get("hi")),
            width=parse_width(params.get("width")),
            full=params.get("full") in ("1", "true"),
        )


def job_series(job_id: int, query: SeriesQuery) -> list[dict]:
    series = MetricSeries.objects.filter(job_id=job_id)
    if query.ids:
        series = series.filter(pk__in=query.ids)
    read = read_many(list(series), width=query.width, lo=query.lo, hi=query.hi, full=query.full)
    return [data.as_dict() for data in read]


def history(job_id: int, width=None) -> list[dict]:
    """Every series of a job, each downsampled to ``width`` buckets (what a chart first draws)."""
    return job_series(job_id, SeriesQuery(width=parse_width(width)))


def export(job, fmt: str):
    """Every point of a job as CSV or JSON lines: (iterator of text, content type, file name)."""
    series = {s.pk: s for s in MetricSeries.objects.filter(job=job)}
    points = iter_points(list(series))
    if fmt == "csv":
        header = ["metric,rank,attempt,step,seq,time,value\n"]
        rows = (
            f"{series[sid].key},{series[sid].rank},{series[sid].attempt},{step},{seq},{when},{value!r}\n"
            for sid, step, seq, value, when in points
        )
        return itertools.chain(header, rows), "text/csv", f"job-{job.pk}-metrics.csv"
    rows = (
        json.dumps(
            {
                "metric": series[sid].key,
                "rank": series[sid].rank,
                "attempt": series[sid].attempt,
                "step": step,
                "seq": seq,
                "time": when,
                "value": value,
            }
        )
        + "\n"
        for sid, step, seq, value, when in points
    )
    return rows, "application/x-ndjson", f"job-{job.pk}-metrics.jsonl"
