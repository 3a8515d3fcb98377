"""MLflow on clusters whose nodes cannot reach the portal (Cluster.metrics_over_ssh): the
job's unchanged script logs into MLflow's own file store in its work directory
(``MLFLOW_TRACKING_URI=file://$PORTAL_WORK_DIR/mlruns``, schedulers/on_node/wrapper.sh), and the
SSH tail (metrics/tail.py) reads it as it reads the portal's own metrics files: each
run a TrackedRun of the job (MLflow's run id kept), each metric file from where the last
pass stopped (its offset a MetricFile, stored with the points), so the curves are live at
the tail's pace and nothing is stored twice.

Everything there is written by the job: entries are listed by SFTP's own attributes
(a link is never followed, only folders and regular files are looked at), a pass lists
at most MAX_ENTRIES of them and reads within the tail's byte budget, ``meta.yaml`` goes
through the bounded YAML loader, a parameter or tag file is read up to MAX_SMALL bytes,
and lines are parsed as numbers or skipped."""

from __future__ import annotations

import hashlib
import logging
import math
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field

from clusters import files, pool
from common.bounded_yaml import SpecError, load
from metrics import ingest
from metrics.models import MetricFile
from tracking import protocol
from tracking.models import TrackedExperiment, TrackedRun

log = logging.getLogger(__name__)

FOLDER = "mlruns"
RUN_ID = re.compile(r"^[0-9a-f]{32}\Z")
EXPERIMENT_ID = re.compile(r"^[0-9]{1,19}\Z")
MAX_ENTRIES = 2000  # folders and files one pass lists
MAX_DEPTH = 8  # a metric's name nests by '/'
MAX_SMALL = 64 * 1024  # meta.yaml, one parameter or tag (MLflow's own: 6,000 and 8,000)
# MLflow's RunStatus numbers in meta.yaml.
STATUS = {1: "RUNNING", 2: "SCHEDULED", 3: "FINISHED", 4: "FAILED", 5: "KILLED"}


@dataclass
class RunFiles:
    """One run folder as listed: its meta.yaml, metric files, and (when asked) its
    parameters and tags."""

    experiment: str
    experiment_name: str
    run_id: str
    meta: dict
    metrics: list[tuple[str, str, int]] = field(default_factory=list)  # (key, path, size)
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)


class _Budget:
    def __init__(self) -> None:
        self.left = MAX_ENTRIES

    def listing(self, sftp, path: str) -> list:
        """A folder's entries (their own attributes: a link is a link), counted."""
        if self.left <= 0:
            return []
        try:
            entries = sftp.listdir_attr(path)
        except OSError:
            return []
        entries = sorted(entries, key=lambda e: e.filename)[: self.left]
        self.left -= len(entries)
        return entries


def _is_dir(entry) -> bool:
    return stat.S_ISDIR(entry.st_mode or 0)


def _is_file(entry) -> bool:
    return stat.S_ISREG(entry.st_mode or 0)


def _small(sftp, path: str) -> str:
    try:
        with files.open_regular(sftp, path) as (handle, _size):
            return handle.read(MAX_SMALL).decode(errors="replace")
    except (OSError, files.NotARegularFile):
        return ""


def _meta(sftp, path: str) -> dict:
    text = _small(sftp, path)
    if not text:
        return {}
    try:
        return load(text)
    except SpecError as exc:
        log.warning("%s not read: %s", path, exc)
        return {}


def _files(budget: _Budget, sftp, folder: str, prefix: str = "", depth: int = 0) -> list:
    """(name under ``folder`` with '/', path, size) of its regular files, nested."""
    found = []
    for entry in budget.listing(sftp, folder):
        name = f"{prefix}{entry.filename}"
        if _is_file(entry):
            found.append((name, f"{folder}/{entry.filename}", entry.st_size or 0))
        elif _is_dir(entry) and depth < MAX_DEPTH:
            found += _files(budget, sftp, f"{folder}/{entry.filename}", f"{name}/", depth + 1)
    return found


def scan(conn, root: str, with_pairs: Callable[[str], bool]) -> list[RunFiles]:
    """The runs of the file store at ``root`` (an absent one has none)."""
    budget = _Budget()
    runs: list[RunFiles] = []
    with conn.sftp_session() as sftp:
        for experiment in budget.listing(sftp, root):
            if not (_is_dir(experiment) and EXPERIMENT_ID.match(experiment.filename)):
                continue
            folder = f"{root}/{experiment.filename}"
            named = _meta(sftp, f"{folder}/meta.yaml").get("name")
            for run in budget.listing(sftp, folder):
                if not (_is_dir(run) and RUN_ID.match(run.filename)):
                    continue
                where = f"{folder}/{run.filename}"
                meta = _meta(sftp, f"{where}/meta.yaml")
                if not meta or meta.get("lifecycle_stage") == "deleted":
                    continue
                found = RunFiles(
                    experiment.filename, str(named or "Default")[:500], run.filename, meta
                )
                found.metrics = _files(budget, sftp, f"{where}/metrics")
                if with_pairs(run.filename):
                    for kind in ("params", "tags"):
                        pairs = getattr(found, kind)
                        for key, path, _size in _files(budget, sftp, f"{where}/{kind}"):
                            if len(pairs) < protocol.MAX_PARAMS_PER_RUN:
                                pairs[key] = _small(sftp, path)
                runs.append(found)
    return runs


def parse_lines(data: bytes) -> tuple[list[tuple[int, float, int]], int]:
    """MLflow's metric file lines (``<ms> <value> <step>``; old ones ``<ms> <value>``):
    (timestamp, value, step) of each whole line that reads as numbers, and the bytes
    used (up to the last newline; a line still being written waits for the next pass). A
    NaN or infinite value, or a line that is not numbers, is left out."""
    end = data.rfind(b"\n") + 1
    points = []
    for line in data[:end].split(b"\n"):
        fields = line.split()
        if len(fields) not in (2, 3):
            continue
        try:
            when, number = int(fields[0]), float(fields[1])
            step = int(fields[2]) if len(fields) == 3 else 0
        except ValueError:
            continue
        if math.isfinite(number) and 0 <= when < 2**53 and abs(step) < 2**62:
            points.append((when, number, step))
    return points, end


def _file_name(run_id: str, key: str) -> str:
    """The MetricFile name of a run's metric file (100 characters at most)."""
    return "mlflow:" + hashlib.sha256(f"{run_id}/{key}".encode()).hexdigest()[:40]


def _run(job, found: RunFiles, known: dict[str, TrackedRun]) -> TrackedRun | None:
    run = known.get(found.run_id)
    if run is None:
        if TrackedRun.objects.filter(run_id=found.run_id).exists():
            log.warning("job %s: MLflow run %s is another job's; not read", job.pk, found.run_id)
            return None
        experiment, _ = TrackedExperiment.objects.get_or_create(
            owner=job.owner, name=found.experiment_name
        )
        start = found.meta.get("start_time")
        run = TrackedRun.start(
            job,
            experiment,
            name=str(found.meta.get("run_name") or "")[:250],
            start_time=start if isinstance(start, int) else 0,
            tags={},
            run_id=found.run_id,
        )
        known[run.run_id] = run
    status = STATUS.get(found.meta.get("status"), "")  # type: ignore[arg-type]
    end = found.meta.get("end_time")
    if status and (status != run.status or (isinstance(end, int) and end != run.end_time)):
        run.status = status
        run.end_time = end if isinstance(end, int) else run.end_time
        run.save(update_fields=["status", "end_time"])
    if found.params or found.tags:
        run.params = dict(
            list({**run.params, **found.params}.items())[: protocol.MAX_PARAMS_PER_RUN]
        )
        run.tags = dict(list({**run.tags, **found.tags}.items())[: protocol.MAX_TAGS_PER_RUN])
        run.save(update_fields=["params", "tags"])
    return run


def tail(job, budget: int, final: bool) -> tuple[int, int]:
    """One pass over the job's MLflow file store: (points stored, bytes read). Its
    parameters and tags are read for a run seen the first time and at the job's end."""
    if not job.work_dir or job.cluster_account is None:
        return 0, 0
    root = f"{job.work_dir}/{FOLDER}"
    known = {r.run_id: r for r in TrackedRun.objects.filter(job=job)}
    found = pool.with_connection(
        job.cluster_account, lambda conn: scan(conn, root, lambda rid: final or rid not in known)
    )
    offsets = dict(
        MetricFile.objects.filter(job=job, name__startswith="mlflow:").values_list("name", "offset")
    )
    inserted = used = 0
    for run_files in found:
        run = _run(job, run_files, known)
        if run is None:
            continue
        for key, path, size in run_files.metrics:
            name = _file_name(run.run_id, key)
            start = offsets.get(name, 0)
            if size <= start or used >= budget:
                continue
            try:
                data = pool.with_connection(
                    job.cluster_account,
                    lambda conn, p=path, s=start, b=budget - used: files.read_chunk(conn, p, s, b),
                )
            except files.NotARegularFile as exc:
                log.warning("job %s: %s", job.pk, exc)
                continue
            points, taken = parse_lines(data)
            used += len(data)
            series = run.metric_key(key)
            records = [
                ingest.Record(
                    protocol.seq(when, step), run.attempt, 0, step, when / 1000, {series: value}
                )
                for when, value, step in points
            ]
            try:
                inserted += ingest.store_read(job, name, start, records, taken, len(data))
            except ingest.QuotaExceeded as exc:
                log.warning("job %s: %s Its MLflow files are no longer read.", job.pk, exc)
                return inserted, used
    return inserted, used
