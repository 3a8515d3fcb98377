"""A run read from elsewhere becomes a job of the person importing it: kind "imported",
final, charged to nothing, on the portal's ``imported`` placeholder cluster (disabled, so
no page offers it and no worker ever reaches it), with its source named on an
ImportedRun. Its points go through the metric store's own ingest, so the per-job quotas
bound it like any job's uploads, and one transaction holds a run: a run that fails half
way leaves nothing, and its key (source and id) makes a second import of it a no-op."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction

from catalog.models import ContainerImage
from clusters.models import Cluster, Partition
from jobs.models import Job
from jobs.models.annotations import (
    MAX_PARAMS,
    BadAnnotation,
    clean_param_value,
    parse_param_value,
)
from metrics import ingest
from tracking.imports import find, mlflow_runs
from tracking.imports.source import Point, SourceRun, Unreadable
from tracking.models import ImportedRun

CHUNK = 5_000  # points stored at a time
MAX_MESSAGES = 100
PLACEHOLDER = "imported"


@dataclass
class Report:
    """What one import did: the jobs it made, the runs it had already, what it refused."""

    imported: list[int] = field(default_factory=list)
    already: int = 0
    refused: list[str] = field(default_factory=list)
    refused_count: int = 0
    points: int = 0
    skipped: list[str] = field(default_factory=list)
    skipped_count: int = 0

    def skip(self, why: str) -> None:
        self.skipped_count += 1
        if len(self.skipped) < MAX_MESSAGES:
            self.skipped.append(why[:500])

    def refuse(self, why: str) -> None:
        self.refused_count += 1
        if len(self.refused) < MAX_MESSAGES:
            self.refused.append(why[:500])

    def merge(self, other: Report) -> None:
        self.imported += other.imported
        self.already += other.already
        self.points += other.points
        self.refused_count += other.refused_count
        self.refused += other.refused[: MAX_MESSAGES - len(self.refused)]
        self.skipped_count += other.skipped_count
        self.skipped += other.skipped[: MAX_MESSAGES - len(self.skipped)]

    @property
    def runs(self) -> int:
        return len(self.imported) + self.already + self.refused_count

    def as_dict(self) -> dict:
        return {
            "imported": len(self.imported),
            "already": self.already,
            "refused": self.refused_count,
            "points": self.points,
            "jobs": self.imported[:MAX_MESSAGES],
            "messages": self.refused,
            "skipped": self.skipped_count,
            "skipped_entries": self.skipped,
        }

    def sentence(self) -> str:
        text = (
            f"{len(self.imported)} runs imported ({self.points:,} points), "
            f"{self.already} imported before, {self.refused_count} not imported."
        )
        if self.skipped_count:
            text += f" {self.skipped_count} links or special files outside any run left unread."
        return text


def placeholders() -> tuple[Cluster, Partition, ContainerImage]:
    """The disabled cluster, partition and image imported runs are placed on (a job has
    all three); made once."""
    cluster, _ = Cluster.objects.get_or_create(
        name=PLACEHOLDER,
        defaults={
            "description": "Runs imported from MLflow, W&B or TensorBoard: not a cluster.",
            # .invalid never resolves (RFC 2606): nothing can reach it by mistake.
            "ssh_host": "imported.invalid",
            "enabled": False,
        },
    )
    partition, _ = Partition.objects.get_or_create(cluster=cluster, name=PLACEHOLDER)
    image, _ = ContainerImage.objects.get_or_create(
        slug=PLACEHOLDER,
        defaults={
            "name": "Imported run",
            "description": "Runs imported from MLflow, W&B or TensorBoard.",
            "runtime": ContainerImage.Runtime.NONE,
            "enabled": False,
            "offers_notebook": False,
            "offers_batch": False,
        },
    )
    return cluster, partition, image


def import_path(owner, path: Path, progress: Callable[[Report], None] | None = None) -> Report:
    """Every run under ``path`` into ``owner``'s jobs (at most PORTAL_IMPORT_MAX_RUNS)."""
    return _import(owner, lambda: find.runs(path), progress)


def import_uri(owner, uri: str, progress: Callable[[Report], None] | None = None) -> Report:
    """Every run of an MLflow tracking server or ``sqlite:///`` store (an administrator's
    import: the portal opens the URI itself)."""
    return _import(owner, lambda: mlflow_runs.runs(uri, origin=uri[:1000]), progress)


def _import(owner, found_runs, progress) -> Report:
    report = Report()
    place = placeholders()  # once an import, not once a run
    most = settings.PORTAL_IMPORT_MAX_RUNS
    try:
        for found in found_runs():
            if report.runs >= most:
                report.refuse(f"More than {most:,} runs: the rest were not read.")
                break
            if isinstance(found, find.Skipped):
                report.skip(found)
            elif isinstance(found, Unreadable):
                report.refuse(str(found))
            else:
                import_run(owner, found, report, place)
            if progress is not None:
                progress(report)
    except Unreadable as exc:
        report.refuse(str(exc))
    return report


def import_run(
    owner,
    run: SourceRun,
    report: Report,
    place: tuple[Cluster, Partition, ContainerImage] | None = None,
) -> Job | None:
    """``run`` as a new job of ``owner``, or None when it was imported before or cannot
    be (said in ``report``); ``place`` the placeholders, when the caller has them."""
    if ImportedRun.objects.filter(owner=owner, key=run.key).exists():
        report.already += 1
        return None
    cluster, partition, image = place or placeholders()
    try:
        with transaction.atomic():
            job = Job.objects.create(
                owner=owner,
                kind=Job.Kind.IMPORTED,
                state=Job.State.COMPLETED,
                cluster=cluster,
                partition=partition,
                image=image,
                gpus=0,
                name=run.name[:100],
            )
            imported = ImportedRun.objects.create(
                job=job,
                owner=owner,
                key=run.key,
                source=run.source,
                origin=run.origin[:1000],
                source_run_id=run.run_id[:200],
            )
            stored = _store(job, run.points())
            _finish(job, imported, run)
    except IntegrityError:  # imported by another import meanwhile
        report.already += 1
        return None
    except Unreadable as exc:
        report.refuse(f"{_shown(run)}: {exc}")
        return None
    except ingest.QuotaExceeded as exc:
        report.refuse(f"{_shown(run)}: {exc} Nothing of it was imported.")
        return None
    report.imported.append(job.pk)
    report.points += stored
    return job


def _shown(run: SourceRun) -> str:
    return f"{run.name or run.run_id} ({run.origin[-200:]})"


def _store(job: Job, points: Iterator[Point]) -> int:
    """The points through ingest, CHUNK at a time; each series numbered in read order
    (its seq), so two points at one step are both kept, in order."""
    seqs: dict[tuple[str, bool], int] = {}
    chunk: list[ingest.Record] = []
    stored = 0
    for name, system, step, when, value in points:
        seq = seqs.get((name, system), 0)
        seqs[(name, system)] = seq + 1
        chunk.append(ingest.Record(seq, 0, 0, step, when, {name: value}, system))
        if len(chunk) >= CHUNK:
            stored += ingest.ingest(job, chunk).inserted
            chunk = []
    if chunk:
        stored += ingest.ingest(job, chunk).inserted
    return stored


def _when(seconds: float | None) -> dt.datetime | None:
    if seconds is None or not 0 < seconds < 2**33:
        return None
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


def _finish(job: Job, imported: ImportedRun, run: SourceRun) -> None:
    """What the run's reading learnt: its state, times, name and parameters."""
    job.state = run.state if run.state in Job.State.values else Job.State.COMPLETED
    job.started_at, job.ended_at = _when(run.started), _when(run.ended or run.started)
    job.name = (run.name or job.name)[:100]
    job.params = portal_params(run.params)
    job.message = f"Imported from {imported.get_source_display()}: {run.origin[-300:]}"
    job.save(update_fields=["state", "started_at", "ended_at", "name", "params", "message"])
    if job.started_at:  # listed where it ran, not where it was imported
        Job.objects.filter(pk=job.pk).update(created_at=job.started_at)
    imported.params, imported.tags = run.params, run.tags
    imported.save(update_fields=["params", "tags"])


_NOT_NAME = re.compile(r"[^A-Za-z0-9_]+")


def portal_params(source: Mapping[str, object]) -> dict:
    """The comparable part of a source's parameters as the job's: names made identifiers
    (``optimizer.lr`` -> ``optimizer_lr``), values read as numbers, true/false or one line
    of text; a value past the bounds, a name taken twice, or past MAX_PARAMS, left out
    (every parameter is still kept as given on ImportedRun.params)."""
    params: dict = {}
    upper: set[str] = set()
    for raw, value in source.items():
        name = _NOT_NAME.sub("_", str(raw)).strip("_")[:48]
        if not name:
            continue
        if name[0].isdigit():
            name = f"_{name}"[:48]
        if name.upper() in upper or len(params) >= MAX_PARAMS:
            continue
        given = value if isinstance(value, (bool, int, float)) else parse_param_value(str(value))
        try:
            params[name] = clean_param_value(name, given)  # a job's own bounds on a value
        except BadAnnotation:
            continue
        upper.add(name.upper())
    return params
