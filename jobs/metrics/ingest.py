"""From records (HTTP batches or lines of a metrics file) to stored points, exactly once.

Both ingest paths end in ``ingest(job, records)``. It locks the job row, drops
records whose (series, seq) is stored already, bulk-inserts the rest (ignoring
conflicts as a last guard) and, after commit, publishes only the new points.
"""

from __future__ import annotations

import json
import logging
import math
import re
import secrets
import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TypeGuard

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Sum

from jobs import crypto
from jobs.metrics.broadcast import publish_metrics
from jobs.metrics.models import MetricPoint, MetricSeries
from jobs.metrics.summary import Summary
from jobs.models import Job
from jobs.models import annotations as tagging

log = logging.getLogger(__name__)

KEY = re.compile(r"^[A-Za-z0-9_.:/@+-]{1,100}\Z")
MAX_RECORDS = 10_000  # per HTTP batch or per file read
MAX_METRICS_PER_RECORD = 100
MAX_ATTEMPT = 10_000
INSERT_BATCH = 2_000


# --- the per-job upload token ---------------------------------------------------------------


def issue_token(job: Job) -> str:
    """A new upload token for ``job`` (the old one stops working). Only its hash is kept."""
    token = "pm_" + secrets.token_urlsafe(32)
    job.metrics_token_hash = crypto.secret_hash(token)
    Job.objects.filter(pk=job.pk).update(metrics_token_hash=job.metrics_token_hash)
    return token


def token_matches(job: Job, token: str) -> bool:
    return crypto.secret_matches(job.metrics_token_hash, token)


# --- parsing --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Record:
    seq: int
    attempt: int
    rank: int
    step: int
    time: float
    metrics: dict[str, float]
    system: bool = False
    node: str = ""
    # Not a measurement: tags and parameters the job reports (pm.tag(), pm.params()).
    annotate: dict | None = None


class BadRecord(ValueError):
    pass


def _int(raw, name: str, low: int, high: int) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or not low <= raw <= high:
        raise BadRecord(f"'{name}' must be a whole number from {low} to {high}")
    return raw


NOT_HOSTNAME = re.compile(r"[^A-Za-z0-9._-]")


def _finite(value: object) -> TypeGuard[int | float]:
    """A JSON number a float can hold (10**400 is a valid JSON integer but not a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def parse_record(raw) -> Record:
    if not isinstance(raw, dict):
        raise BadRecord("a record is a JSON object")
    seq = _int(raw.get("seq"), "seq", 0, 2**62)
    attempt = _int(raw.get("attempt", 0), "attempt", 0, MAX_ATTEMPT)
    rank = _int(raw.get("rank", 0), "rank", 0, settings.PORTAL_METRICS_MAX_RANKS - 1)
    step = raw.get("step")
    step = seq if step is None else _int(step, "step", -(2**62), 2**62)
    when = raw.get("time")
    if not _finite(when):
        raise BadRecord("'time' must be a Unix time in seconds")
    if "annotate" in raw:
        return Record(seq, attempt, rank, step, float(when), {}, annotate=_annotation(raw))
    metrics = raw.get("metrics")
    if not isinstance(metrics, dict) or not metrics:
        raise BadRecord("'metrics' must be an object of name: number")
    if len(metrics) > MAX_METRICS_PER_RECORD:
        raise BadRecord(f"at most {MAX_METRICS_PER_RECORD} metrics per record")
    values = {}
    for key, value in metrics.items():
        if not KEY.match(key):
            raise BadRecord(
                f"metric name {key[:120]!r} is not allowed: use 1-100 letters, digits and _ . : / @ + -"
            )
        if not _finite(value):
            raise BadRecord(f"metric {key!r} must be a finite number")
        values[key] = float(value)
    node = NOT_HOSTNAME.sub("", str(raw.get("node") or ""))[:253]
    return Record(seq, attempt, rank, step, float(when), values, bool(raw.get("system")), node)


def _annotation(raw: dict) -> dict:
    """``{"annotate": {"tags": [...], "params": {...}}}``, within the bounds of tags and
    parameters (jobs/models/tagging.py)."""
    body = raw["annotate"]
    if not isinstance(body, dict) or not body or set(body) - {"tags", "params"}:
        raise BadRecord("'annotate' is an object with 'tags' and/or 'params'")
    try:
        return {
            "tags": tagging.clean_tags(body.get("tags", [])),
            "params": tagging.clean_params(body.get("params", {})),
        }
    except tagging.BadAnnotation as exc:
        raise BadRecord(str(exc)) from None


@dataclass
class Parsed:
    records: list[Record] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # "record N: why"


def parse_batch(items) -> Parsed:
    """An HTTP batch: a JSON array of records. Good records are kept, bad ones reported."""
    parsed = Parsed()
    if not isinstance(items, list):
        parsed.errors.append("the body must be a JSON array of records")
        return parsed
    if len(items) > MAX_RECORDS:
        parsed.errors.append(f"at most {MAX_RECORDS} records per request")
        return parsed
    for n, raw in enumerate(items):
        try:
            parsed.records.append(parse_record(raw))
        except BadRecord as exc:
            parsed.errors.append(f"record {n}: {exc}")
    return parsed


def parse_lines(data: bytes) -> tuple[Parsed, int]:
    """Complete lines of a metrics file. Returns what was parsed and how many bytes it
    used: a last line without its newline is left for the next read."""
    end = data.rfind(b"\n") + 1
    parsed = Parsed()
    for n, line in enumerate(data[:end].split(b"\n")):
        if not line.strip():
            continue
        try:
            parsed.records.append(parse_record(json.loads(line)))
        except RecursionError:  # nested deeper than the parser goes
            parsed.errors.append(f"line {n + 1}: nested too deeply")
        except (ValueError, BadRecord) as exc:  # a damaged line never blocks the rest
            parsed.errors.append(f"line {n + 1}: {exc}")
    return parsed, end


# --- quotas ---------------------------------------------------------------------------------


class QuotaExceeded(Exception):
    """Storing these records would take the job past one of its limits: nothing is stored."""


def _check_quota(job: Job, new_series: int, new_points: int, nbytes: int) -> None:
    """Per-job limits (settings): series, points and bytes received. Called with the job
    row locked, so two batches cannot both pass on the same remaining room."""
    limit = settings.PORTAL_METRICS_MAX_SERIES
    if new_series:
        have = MetricSeries.objects.filter(job=job).count()
        if have + new_series > limit:
            raise QuotaExceeded(
                f"Job {job.pk} may have at most {limit} metric series ({have} so far); "
                f"this batch would add {new_series}."
            )
    limit = settings.PORTAL_METRICS_MAX_POINTS
    have = MetricSeries.objects.filter(job=job).aggregate(n=Sum("points"))["n"] or 0
    if have + new_points > limit:
        raise QuotaExceeded(f"Job {job.pk} may store at most {limit} metric points.")
    limit = settings.PORTAL_METRICS_MAX_BYTES
    have = Job.objects.filter(pk=job.pk).values_list("metrics_bytes", flat=True).first() or 0
    if have + nbytes > limit:
        raise QuotaExceeded(f"Job {job.pk} may send at most {limit} bytes of metrics.")


# --- storing --------------------------------------------------------------------------------


@dataclass
class IngestResult:
    inserted: int = 0
    duplicates: int = 0
    new_points: dict[int, list[list]] = field(default_factory=dict)  # series id -> rows
    series: list[MetricSeries] = field(default_factory=list)  # series that got points


def _series_for(job: Job, records: list[Record], nbytes: int) -> dict[tuple, MetricSeries]:
    """The series the records go to, creating the missing ones within the job's quota."""
    wanted: dict[tuple[str, int, int], Record] = {}
    for r in records:
        for key in r.metrics:
            wanted.setdefault((key, r.rank, r.attempt), r)
    existing = {
        (s.key, s.rank, s.attempt): s
        for s in MetricSeries.objects.filter(job=job, key__in={k for k, _, _ in wanted})
    }
    missing = [
        MetricSeries(job=job, key=k, rank=rank, attempt=att, system=r.system, node=r.node)
        for (k, rank, att), r in wanted.items()
        if (k, rank, att) not in existing
    ]
    _check_quota(job, len(missing), sum(len(r.metrics) for r in records), nbytes)
    if missing:
        MetricSeries.objects.bulk_create(missing, ignore_conflicts=True)
        existing = {
            (s.key, s.rank, s.attempt): s
            for s in MetricSeries.objects.filter(job=job, key__in={k for k, _, _ in wanted})
        }
    return {k: existing[k] for k in wanted}


def ingest(job: Job, records: list[Record], nbytes: int = 0) -> IngestResult:
    """Store ``records`` (received as ``nbytes`` bytes) exactly once. Raises QuotaExceeded,
    storing nothing, when they would take the job past a limit."""
    result = IngestResult()
    _annotate(job, [r.annotate for r in records if r.annotate is not None])
    records = [r for r in records if r.annotate is None]
    if not records:
        return result
    with transaction.atomic():
        # Serialise ingestion per job (HTTP and the SSH tail may run at once).
        Job.objects.select_for_update().filter(pk=job.pk).values_list("pk").first()
        series = _series_for(job, records, nbytes)
        ids = {s.pk for s in series.values()}
        seqs = [r.seq for r in records]
        stored = set(
            MetricPoint.objects.filter(
                series_id__in=ids, seq__gte=min(seqs), seq__lte=max(seqs)
            ).values_list("series_id", "seq")
        )
        rows: list[tuple] = []
        new: dict[int, list[list]] = defaultdict(list)
        for r in records:
            for key, value in r.metrics.items():
                s = series[(key, r.rank, r.attempt)]
                if (s.pk, r.seq) in stored:
                    result.duplicates += 1
                    continue
                stored.add((s.pk, r.seq))  # a record repeated inside one batch
                rows.append((s.pk, r.seq, r.step, value, r.time))
                new[s.pk].append([r.step, value, r.time, r.seq])
        _insert(rows)
        if nbytes:
            Job.objects.filter(pk=job.pk).update(metrics_bytes=F("metrics_bytes") + nbytes)
        by_id = {s.pk: s for s in series.values()}
        changes = []
        for sid, points in new.items():
            last = max(points, key=lambda p: (p[0], p[3]))
            s = by_id[sid]
            summary = Summary.from_bytes(s.summary)  # exact: the job's row lock is held
            for step, value, when, _ in points:
                summary.add(step, value, when)
            s.summary = summary.to_bytes()
            changes.append(
                MetricSeries(
                    pk=sid,
                    points=F("points") + len(points),
                    last_step=last[0],
                    last_value=last[1],
                    summary=s.summary,
                )
            )
            s.points += len(points)
            result.series.append(s)
        # One UPDATE for every series of the batch (a record may carry 100 metrics).
        MetricSeries.objects.bulk_update(
            changes, ["points", "last_step", "last_value", "summary"], batch_size=500
        )
        result.inserted = len(rows)
        result.new_points = dict(new)
        if rows:
            transaction.on_commit(lambda: publish_points(job, result))
    return result


def _annotate(job: Job, notes: list[dict]) -> None:
    """Apply the job's reported tags and parameters in order (idempotent: a record read
    again over SSH after its upload changes nothing). One past a bound is skipped; the
    job's metrics still go in."""
    for note in notes:
        try:
            if note["tags"]:
                job.change_tags(add=note["tags"])
            if note["params"]:
                job.report_params(note["params"])
        except tagging.BadAnnotation as exc:
            log.warning("job %s: reported annotation refused: %s", job.pk, exc)


def _insert(rows: list[tuple]) -> None:
    """Multi-row INSERTs (the ORM's bulk_create builds model objects and is several
    times slower here); ON CONFLICT DO NOTHING is the last guard against a race."""
    if not rows:
        return
    table = MetricPoint._meta.db_table
    per = INSERT_BATCH
    if connection.vendor == "sqlite" and sqlite3.sqlite_version_info < (3, 32):
        per = 999 // 5  # older SQLite allows 999 parameters per statement
    with connection.cursor() as cursor:
        for i in range(0, len(rows), per):
            chunk = rows[i : i + per]
            values = ",".join(["(%s,%s,%s,%s,%s)"] * len(chunk))
            cursor.execute(
                f"INSERT INTO {table} (series_id, seq, step, value, time) VALUES {values} "  # noqa: S608
                "ON CONFLICT DO NOTHING",
                [v for row in chunk for v in row],
            )


def publish_points(job: Job, result: IngestResult) -> None:
    publish_metrics(
        job.pk,
        {
            "series": [s.as_dict() for s in result.series],
            "points": {str(k): v for k, v in result.new_points.items()},
        },
    )
