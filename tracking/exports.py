"""Exports out of the portal (#46: leaving the portal never loses history): a job's series
as one TensorBoard event file, a comparison's runs as one CSV or as a .tar.gz of one
TensorBoard run folder per job, and a person's runs as an MLflow ``mlruns`` folder
(.tar.gz) that MLflow's client and UI open.

Each is a ``Download`` whose body is produced while it is sent: points are read a batch
of ``iter_points`` (metrics/query.py) at a time, never a whole job at once (a job may
hold millions). A file whose size a tar header needs before its bytes (an event file, an
MLflow metric file) is written to a temporary directory first, one file at a time, and
removed once sent; a single job's event file is sent as it grows. While such a file is
being written the body yields empty pieces now and then, so a long export hands its
thread back between batches (common.streams.for_server reads one piece per hop).

Names outside the portal (``series_name``): a series is its key for rank 0's first
attempt; other ranks and attempts say so in front (``rank1/loss``, ``attempt2/loss``: the
second attempt, as the job page counts them), system samples keep the sampler's ``sys/``
prefix (a system series without it gets it).

**TensorBoard**: every point is a scalar summary (TensorBoard's ``simple_value``, a 32-bit
float: what TensorBoard's own scalars hold) with its step and its wall time, written by
TensorBoard's own ``EventFileWriter``.

**mlruns** is MLflow's FileStore layout (mlflow/store/tracking/file_store.py): one
experiment per MLflow experiment the person's scripts logged into (TrackedExperiment,
under the id the portal's MLflow API gave it; its "Default" is MLflow's ``0``), and ``0``
("Default") for the jobs that logged without MLflow. A job's MLflow runs are exported
with their own ids, names, status, times, parameters and tags; a job without one is one
run whose id derives from the job's uid (the same id on every export), named after the
job. The job's series no MLflow run logged (other ranks, attempts, system samples) go into
its first run. Parameters are the job's (MLflow's strings: text as is, other values as
JSON) and the run's; tags MLflow's own plus ``portal.*`` (job id, uid, state, cluster,
image, command, the job's tags, its experiment); the job's note is MLflow's description.
Artifact locations are relative (``mlruns/<experiment>/<run>/artifacts``, empty), so
``mlflow ui`` started beside the folder finds them. MLflow 3 opens a file store only with
``MLFLOW_ALLOW_FILE_STORE=true`` (or after ``mlflow migrate-filestore``; the ids are
numbers, as its database wants).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import tarfile
import tempfile
import time
import uuid
import zlib
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

import yaml
from django.conf import settings
from django.db.models import Exists, OuterRef, Q
from django.utils.text import slugify

from common.text import spreadsheet_cell
from jobs.models import Job
from metrics.compare.data import Options, too_many_runs
from metrics.compare.query import select
from metrics.models import MetricSeries
from metrics.query import iter_points
from tracking.models import TrackedExperiment, TrackedRun

CHUNK = 256 * 1024  # bytes of a piece sent
BATCH = 20_000  # points between two flushes of a file being written (iter_points' batch)
JOBS_PAGE = 200  # a person's jobs read at a time (mlruns)
TMP_PREFIX = "portal-export-"

# -- what every export is ------------------------------------------------------------------


@dataclass(frozen=True)
class Download:
    body: Iterator[bytes]
    content_type: str
    filename: str


def _pieces(parts: Iterable[bytes | None]) -> Iterator[bytes]:
    """Bytes gathered into pieces of about CHUNK; ``None`` (a batch was written, nothing is
    ready to send) sends what is gathered, if only an empty piece."""
    gathered: list[bytes] = []
    size = 0
    for part in parts:
        if part is None:
            yield b"".join(gathered)
            gathered, size = [], 0
            continue
        if part:
            gathered.append(part)
            size += len(part)
        if size >= CHUNK:
            yield b"".join(gathered)
            gathered, size = [], 0
    if gathered:
        yield b"".join(gathered)


# -- names --------------------------------------------------------------------------------


def series_name(series: MetricSeries) -> str:
    """A series' name outside the portal (see the module)."""
    key = series.key
    if series.system and not key.startswith("sys/"):
        key = f"sys/{key}"
    if series.attempt:
        key = f"attempt{series.attempt + 1}/{key}"
    if series.rank:
        key = f"rank{series.rank}/{key}"
    return key


def unique_names(names: Iterable[str], *, files: bool = False) -> list[str]:
    """``names`` in order, a later repeat made distinct with ``_`` at its end. ``files``:
    names of files where ``/`` makes folders (MLflow's metric, parameter and tag files), so
    neither may a name be the folder of another nor lie in a folder that is another's file
    (``val`` and ``val/loss`` become ``val`` and ``val_/loss``)."""
    taken: set[str] = set()
    folders: set[str] = set()
    out = []
    for name in names:
        while True:
            if name in taken or (files and name in folders):
                name += "_"
                continue
            parts = name.split("/")
            clash = files and next(
                (i for i in range(1, len(parts)) if "/".join(parts[:i]) in taken), 0
            )
            if not clash:
                break
            parts[clash - 1] += "_"  # the folder that is another's file
            name = "/".join(parts)
        taken.add(name)
        parts = name.split("/")
        folders.update("/".join(parts[:i]) for i in range(1, len(parts)))
        out.append(name)
    return out


NOT_MLFLOW = re.compile(r"[^/\w.\- :]")  # MLflow's validate_param_and_metric_name


def mlflow_name(key: str) -> str:
    """``key`` as a name MLflow accepts for a metric, parameter or tag: its characters
    (another becomes ``_``) and a path that normalizes to itself (no empty, ``.`` or
    ``..`` part)."""
    parts = [p for p in NOT_MLFLOW.sub("_", key).split("/") if p]
    parts = ["_" * len(p) if p in (".", "..") else p for p in parts]
    return "/".join(parts) or "_"


def job_folder(job: Job) -> str:
    """``<id>-<slug of its name>``: a job's folder in an archive of several."""
    slug = slugify(job.name)[:60].strip("-")
    return f"{job.pk}-{slug}" if slug else str(job.pk)


# -- TensorBoard --------------------------------------------------------------------------


def _events(job: Job, logdir: str) -> Generator[str]:
    """Writes every series of ``job`` into one event file in ``logdir`` with TensorBoard's
    writer, yielding the file's path once made and again after each BATCH of points
    (flushed: the file then ends on a whole record). Closing it closes the writer."""
    from tensorboard.compat.proto.event_pb2 import Event  # noqa: PLC0415 - 0.15 s to import
    from tensorboard.compat.proto.summary_pb2 import Summary  # noqa: PLC0415
    from tensorboard.summary.writer.event_file_writer import (  # noqa: PLC0415
        EventFileWriter,
    )

    series = list(MetricSeries.objects.filter(job=job))
    tags = dict(zip([s.pk for s in series], unique_names(map(series_name, series)), strict=True))
    writer = EventFileWriter(logdir, max_queue_size=1000, flush_secs=3600)
    try:
        (path,) = (os.path.join(logdir, n) for n in os.listdir(logdir) if "tfevents" in n)
        yield path
        count = 0
        for sid, step, _seq, value, when in iter_points(list(tags), batch=BATCH):
            value_ = Summary.Value(tag=tags[sid], simple_value=value)
            writer.add_event(Event(wall_time=when, step=step, summary=Summary(value=[value_])))
            count += 1
            if count % BATCH == 0:
                writer.flush()
                yield path
    finally:
        writer.close()


def event_file_name(job: Job) -> str:
    """TensorBoard reads the files whose name holds ``tfevents``."""
    return f"events.out.tfevents.{int(job.created_at.timestamp()):010d}.portal-job-{job.pk}"


def tensorboard_events(job: Job) -> Iterator[bytes]:
    """One event file of every series of ``job``, sent as it is written (it grows in a
    temporary directory, removed at the end or when the download stops)."""
    with tempfile.TemporaryDirectory(prefix=TMP_PREFIX) as logdir:
        written = _events(job, logdir)
        try:
            with open(next(written), "rb") as events:
                for _ in written:
                    while piece := events.read(CHUNK):
                        yield piece
                while piece := events.read(CHUNK):  # the last batch, flushed on close
                    yield piece
        finally:
            written.close()


def job_tensorboard(job: Job) -> Download:
    return Download(tensorboard_events(job), "application/octet-stream", event_file_name(job))


# -- a comparison's runs --------------------------------------------------------------------


def comparison_jobs(user, options: Options) -> list[Job]:
    """The runs the comparison of ``options`` shows ``user`` (metrics/compare/data.py's
    selection: the query's runs, ``ids`` and a baseline run), by id; BadQuery past the
    comparison's limit (PORTAL_COMPARE_MAX_RUNS), as the comparison itself refuses."""
    limit = settings.PORTAL_COMPARE_MAX_RUNS
    if len(set(options.ids)) > limit:
        raise too_many_runs(limit)
    ids = options.ids
    if options.baseline.isdigit():
        ids = (*ids, int(options.baseline))
    jobs = list(select(user, options.q, ids).order_by("pk")[: limit + 1])
    if len(jobs) > limit:
        raise too_many_runs(limit)
    return jobs


CSV_HEADER = ["job", "name", "metric", "rank", "attempt", "step", "time", "value"]


def comparison_rows(jobs: list[Job]) -> Iterator[bytes]:
    """Every point of every series of ``jobs`` as CSV lines (query.export's per-job columns
    with the job's id and name in front)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for job in jobs:
        series = {s.pk: s for s in MetricSeries.objects.filter(job=job)}
        for sid, step, _seq, value, when in iter_points(list(series), batch=BATCH):
            s = series[sid]
            writer.writerow(
                [
                    job.pk,
                    spreadsheet_cell(job.name),
                    spreadsheet_cell(s.key),
                    s.rank,
                    s.attempt,
                    step,
                    when,
                    value,
                ]
            )
            if out.tell() >= CHUNK:
                yield out.getvalue().encode()
                out.seek(0)
                out.truncate()
    yield out.getvalue().encode()


def comparison_csv(jobs: list[Job]) -> Download:
    return Download(comparison_rows(jobs), "text/csv", "portal-compare.csv")


TENSORBOARD_ROOT = "portal-runs"


def tensorboard_archive(jobs: list[Job]) -> Iterator[bytes]:
    """``portal-runs/<job folder>/<event file>`` per job, as a .tar.gz (``tensorboard
    --logdir portal-runs`` shows one run per job)."""
    tar = TarGz()

    def parts() -> Iterator[bytes | None]:
        yield tar.directory(TENSORBOARD_ROOT)
        for job in jobs:
            folder = f"{TENSORBOARD_ROOT}/{job_folder(job)}"
            yield tar.directory(folder)
            with tempfile.TemporaryDirectory(prefix=TMP_PREFIX) as logdir:
                written = _events(job, logdir)
                try:
                    path = next(written)
                    for _ in written:
                        yield None
                finally:
                    written.close()
                yield from tar.file(f"{folder}/{event_file_name(job)}", path)
        yield tar.close()

    return _pieces(parts())


def comparison_tensorboard(jobs: list[Job]) -> Download:
    return Download(
        tensorboard_archive(jobs), "application/gzip", "portal-compare-tensorboard.tar.gz"
    )


# -- a person's runs as mlruns ------------------------------------------------------------------

DEFAULT_EXPERIMENT_ID = "0"
DEFAULT_EXPERIMENT = "Default"
# Run ids of jobs that logged without MLflow: uuid5(this, job uid), the same every export.
RUN_NAMESPACE = uuid.UUID("90372e86-d0a7-4d8c-9901-5c139feb4194")
# MLflow's RunStatus numbers (meta.yaml holds the number) and the portal's states as them.
STATUS_NUMBER = {"RUNNING": 1, "SCHEDULED": 2, "FINISHED": 3, "FAILED": 4, "KILLED": 5}
JOB_STATUS: dict[str, str] = {
    Job.State.QUEUED: "SCHEDULED",
    Job.State.PENDING: "SCHEDULED",
    Job.State.RUNNING: "RUNNING",
    Job.State.COMPLETING: "RUNNING",
    Job.State.COMPLETED: "FINISHED",
    Job.State.FAILED: "FAILED",
    Job.State.TIMEOUT: "FAILED",
    Job.State.SUBMIT_FAILED: "FAILED",
    Job.State.CANCELLED: "KILLED",
}
SOURCE_LOCAL = 4  # MLflow's SourceType.LOCAL, what its FileStore writes


def job_run_id(job: Job) -> str:
    return uuid.uuid5(RUN_NAMESPACE, job.uid).hex


def _ms(when: datetime | None) -> int | None:
    return None if when is None else int(when.timestamp() * 1000)


def _param_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


@dataclass
class MlflowRun:
    """One run of the export: what its meta.yaml, params/, tags/ and metrics/ hold."""

    run_id: str
    experiment_id: str
    name: str
    status: str
    start_time: int | None
    end_time: int | None
    user: str
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    metrics: list[tuple[int, str]] = field(default_factory=list)  # (series id, MLflow key)

    def meta(self) -> dict:
        return {
            "artifact_uri": f"mlruns/{self.experiment_id}/{self.run_id}/artifacts",
            "end_time": self.end_time,
            "entry_point_name": "",
            "experiment_id": self.experiment_id,
            "lifecycle_stage": "active",
            "run_id": self.run_id,
            "run_uuid": self.run_id,  # what MLflow before 2 reads
            "run_name": self.name,
            "source_name": "",
            "source_type": SOURCE_LOCAL,
            "source_version": "",
            "start_time": self.start_time,
            "status": STATUS_NUMBER[self.status],
            "tags": [],
            "user_id": self.user,
        }


def _job_tags(job: Job) -> dict[str, str]:
    tags = {
        "mlflow.user": job.owner.get_username(),
        "mlflow.source.type": "JOB",
        "mlflow.source.name": f"portal job {job.pk}",
        "portal.job_id": str(job.pk),
        "portal.job_uid": job.uid,
        "portal.job_name": job.name,
        "portal.kind": job.kind,
        "portal.state": job.state,
        "portal.cluster": job.cluster.name,
        "portal.image": job.image.slug,
        "portal.command": job.command,
        "portal.tags": " ".join(job.tags.order_by("name").values_list("name", flat=True)),
        "mlflow.note.content": job.notes,
    }
    if job.trial is not None:
        tags["portal.experiment_id"] = str(job.trial.experiment_id)
        tags["portal.trial_id"] = str(job.trial_id)
    return {k: v for k, v in tags.items() if v}


def job_runs(job: Job, experiment_ids: dict[int, str]) -> list[MlflowRun]:
    """``job`` as MLflow runs: its MLflow runs, or one run of its own (see the module).
    ``experiment_ids``: the export's id of each of the owner's TrackedExperiments."""
    series = list(MetricSeries.objects.filter(job=job))
    params = {k: _param_text(v) for k, v in sorted((job.params or {}).items())}
    base_tags = _job_tags(job)
    user = job.owner.get_username()
    tracked = list(TrackedRun.objects.filter(job=job).order_by("number"))
    if not tracked:
        name = job.name or f"job-{job.pk}"
        return [
            MlflowRun(
                job_run_id(job),
                DEFAULT_EXPERIMENT_ID,
                name,
                JOB_STATUS.get(job.state, "RUNNING"),
                _ms(job.started_at or job.created_at),
                _ms(job.ended_at),
                user,
                params,
                {**base_tags, "mlflow.runName": name},
                [(s.pk, series_name(s)) for s in series],
            )
        ]
    runs: list[MlflowRun] = []
    claimed: set[int] = set()
    for run in tracked:
        mine = set(run.series().values_list("pk", flat=True)) - claimed
        claimed |= mine
        runs.append(
            MlflowRun(
                run.run_id,
                experiment_ids.get(run.experiment_id, DEFAULT_EXPERIMENT_ID),
                run.name,
                run.status,
                run.start_time,
                run.end_time,
                run.tags.get("mlflow.user") or user,
                {**params, **run.params},
                {
                    **base_tags,
                    **run.tags,
                    "mlflow.runName": run.name,
                    "portal.job_id": str(job.pk),
                    "portal.run_number": str(run.number),
                },
                [(s.pk, run.mlflow_key(s.key)) for s in series if s.pk in mine],
            )
        )
    runs[0].metrics += [(s.pk, series_name(s)) for s in series if s.pk not in claimed]
    return runs


def _experiments(user) -> tuple[list[tuple[str, str, int | None]], dict[int, str]]:
    """The export's experiments as (id, name, creation time in ms), and the id of each of
    ``user``'s TrackedExperiments."""
    found = list(TrackedExperiment.objects.filter(owner=user).order_by("pk"))
    ids = {
        e.pk: DEFAULT_EXPERIMENT_ID if e.name == DEFAULT_EXPERIMENT else str(e.pk) for e in found
    }
    default = next((e for e in found if e.name == DEFAULT_EXPERIMENT), None)
    listed = [
        (
            DEFAULT_EXPERIMENT_ID,
            DEFAULT_EXPERIMENT,
            _ms(default.created_at if default else user.date_joined),
        )
    ]
    listed += [(ids[e.pk], e.name, _ms(e.created_at)) for e in found if e is not default]
    return listed, ids


def owned_jobs(user) -> Iterator[Job]:
    """``user``'s own jobs with metrics or MLflow runs, by id, JOBS_PAGE at a time."""
    has_data = Exists(MetricSeries.objects.filter(job=OuterRef("pk"))) | Exists(
        TrackedRun.objects.filter(job=OuterRef("pk"))
    )
    jobs = (
        Job.objects.filter(owner=user)
        .filter(Q(has_data))
        .select_related("owner", "cluster", "image", "trial")
        .order_by("pk")
    )
    last = 0
    while page := list(jobs.filter(pk__gt=last)[:JOBS_PAGE]):
        yield from page
        last = page[-1].pk


def _yaml(data: dict) -> bytes:
    return yaml.safe_dump(data, default_flow_style=False, allow_unicode=True).encode()


def _run_parts(tar: TarGz, run: MlflowRun, scratch: str) -> Iterator[bytes | None]:
    """One run's folder, its metric files written to ``scratch`` one at a time."""
    base = f"mlruns/{run.experiment_id}/{run.run_id}"
    for folder in ("", "/metrics", "/params", "/tags", "/artifacts"):
        yield tar.directory(base + folder)
    yield tar.data(f"{base}/meta.yaml", _yaml(run.meta()))
    for kind, values in (("params", run.params), ("tags", run.tags)):
        names = unique_names(map(mlflow_name, values), files=True)
        for name, value in zip(names, values.values(), strict=True):
            yield tar.data(f"{base}/{kind}/{name}", value.encode())
    names = unique_names((mlflow_name(key) for _, key in run.metrics), files=True)
    path = os.path.join(scratch, "metric")
    for (sid, _), name in zip(run.metrics, names, strict=True):
        with open(path, "w", encoding="utf-8") as out:
            lines = []
            for _sid, step, _seq, value, when in iter_points([sid], batch=BATCH):
                # MLflow's line: "<timestamp ms> <value> <step>"
                lines.append(f"{round(when * 1000)} {value!r} {step}\n")
                if len(lines) == BATCH:
                    out.write("".join(lines))
                    lines = []
                    yield None
            out.write("".join(lines))
        yield from tar.file(f"{base}/metrics/{name}", path)
        os.remove(path)


def mlruns_archive(user) -> Iterator[bytes]:
    """Every job ``user`` owns with metrics or MLflow runs, as ``mlruns/`` in a .tar.gz."""
    tar = TarGz()

    def parts() -> Iterator[bytes | None]:
        experiments, ids = _experiments(user)
        yield tar.directory("mlruns")
        yield tar.directory("mlruns/.trash")
        for experiment_id, name, created in experiments:
            yield tar.directory(f"mlruns/{experiment_id}")
            meta = {
                "artifact_location": f"mlruns/{experiment_id}",
                "creation_time": created,
                "experiment_id": experiment_id,
                "last_update_time": created,
                "lifecycle_stage": "active",
                "name": name,
            }
            yield tar.data(f"mlruns/{experiment_id}/meta.yaml", _yaml(meta))
        with tempfile.TemporaryDirectory(prefix=TMP_PREFIX) as scratch:
            for job in owned_jobs(user):
                for run in job_runs(job, ids):
                    yield from _run_parts(tar, run, scratch)
        yield tar.close()

    return _pieces(parts())


def mlruns(user) -> Download:
    return Download(mlruns_archive(user), "application/gzip", "portal-mlruns.tar.gz")


# -- .tar.gz, made as it is sent -------------------------------------------------------------


class TarGz:
    """A .tar.gz written as it is sent (tarfile's stream mode cannot be read from while a
    member is added): each call answers the compressed bytes ready so far, often none
    (gzip holds some back). Headers are tarfile's own (PAX: long names kept)."""

    def __init__(self, mtime: float | None = None) -> None:
        self._zip = zlib.compressobj(6, zlib.DEFLATED, 31)  # wbits 31: a gzip stream
        self._size = 0
        self.mtime = int(time.time() if mtime is None else mtime)

    def _put(self, data: bytes) -> bytes:
        self._size += len(data)
        return self._zip.compress(data)

    def _header(self, name: str, size: int, kind: bytes) -> bytes:
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.type = size, self.mtime, kind
        info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
        return self._put(info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape"))

    @staticmethod
    def _padding(size: int) -> bytes:
        return b"\0" * (-size % tarfile.BLOCKSIZE)

    def directory(self, name: str) -> bytes:
        return self._header(name, 0, tarfile.DIRTYPE)

    def data(self, name: str, payload: bytes) -> bytes:
        head = self._header(name, len(payload), tarfile.REGTYPE)
        return head + self._put(payload + self._padding(len(payload)))

    def file(self, name: str, path: str) -> Iterator[bytes]:
        """The file at ``path`` (not written meanwhile), read CHUNK at a time."""
        with open(path, "rb") as source:
            size = os.fstat(source.fileno()).st_size
            yield self._header(name, size, tarfile.REGTYPE)
            left = size
            while left:
                piece = source.read(min(CHUNK, left))
                if not piece:
                    raise OSError(f"{path} shrank while it was archived")
                left -= len(piece)
                yield self._put(piece)
        yield self._put(self._padding(size))

    def close(self) -> bytes:
        """The end: two zero blocks, the last record filled, gzip's trailer."""
        end = b"\0" * (2 * tarfile.BLOCKSIZE)
        end += b"\0" * (-(self._size + len(end)) % tarfile.RECORDSIZE)
        return self._put(end) + self._zip.flush()
