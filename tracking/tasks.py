"""Runs read from the cluster and from uploads.

- A job's metrics files read over SSH (tail.py), for clusters whose nodes cannot upload,
  and once more when every job ends (whatever the uploads missed).
- The import of an uploaded archive of runs (RunImport): unpacked into a private
  temporary folder, imported as its owner's jobs (imports/service.py), the upload deleted
  and the report kept. Its own queue (PORTAL_IMPORT_QUEUE) and time limit: one person's
  large import never holds up another's submissions."""

from __future__ import annotations

import datetime as dt
import logging
import re
import tempfile
from pathlib import Path

from celery import shared_task
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from clusters import ssh
from jobs import outbox
from jobs.models import Job
from jobs.models.events import METRICS
from jobs.task_helpers import PersonTask, limits, single_flight
from tracking.imports import archive, memory, service
from tracking.imports.source import Unreadable
from tracking.models import RunImport
from tracking.tail import tail_job

log = logging.getLogger(__name__)


# Named as before the move: messages queued by an older worker still find it.
@shared_task(name="jobs.tasks.tail_metrics", bind=True, acks_late=True, max_retries=30, **limits())
def tail_metrics(self, job_id: int, final: bool = False, outbox_event: int | None = None) -> None:
    """Read new lines of a job's metrics files over SFTP (one reader per job at a time);
    ``final``: to their end, once the job has ended (the outbox's ``metrics`` consumer)."""
    with single_flight(f"metrics-tail:{job_id}", 300) as mine:
        if not mine:
            if final:
                # A read in progress may have started before the last lines were
                # written: the final read must still happen, after it.
                raise self.retry(countdown=5)
            return
        job = Job.objects.select_related("cluster_account__cluster").filter(pk=job_id).first()
        if job is not None:
            try:
                tail_job(job, max_passes=50 if final else 1)
            except ssh.ClusterError as exc:
                log.warning("metrics of job %s not read: %s", job_id, exc)
    outbox.done(outbox_event, METRICS)


def queue_final_tails(dues: list[outbox.Due]) -> None:
    """The outbox's ``metrics`` consumer: whatever the uploads missed is in the job's
    files, read to their end once it has ended."""
    for due in dues:
        tail_metrics.apply_async((due.job_id,), {"final": True, "outbox_event": due.event_id})


@shared_task(name="jobs.metrics.tasks.tail_running")  # (its name before it moved here)
def tail_running() -> int:
    """Periodic (beat): a read of each running job's metrics files on clusters whose nodes
    cannot upload (Cluster.metrics_over_ssh). Each expires by the next round."""
    ids = list(
        Job.objects.filter(
            state=Job.State.RUNNING,
            cluster__enabled=True,
            cluster__metrics_over_ssh=True,
            cluster_account__isnull=False,
        ).values_list("pk", flat=True)[:5000]
    )
    expires = max(2.0, settings.PORTAL_SYNC_INTERVAL * 2)
    for job_id in ids:
        tail_metrics.apply_async((job_id,), expires=expires)
    return len(ids)


def folder_name(filename: str) -> str:
    """The folder an upload unpacks into, named after it (what imported TensorBoard runs
    are named under): letters, digits, ``._-`` only, never ``.`` or ``..``."""
    stem = filename.removesuffix(".gz").removesuffix(".tgz").removesuffix(".tar")
    stem = stem.removesuffix(".zip")
    return re.sub(r"[^A-Za-z0-9._-]+", "_", stem).strip("._")[:100] or "upload"


class ImportTask(PersonTask):
    """At most PORTAL_PERSON_IMPORTS of one person's imports run at once: the imports'
    queue is shared, and one person's hundred uploads never hold all of its workers."""

    rows = RunImport.objects
    share = "imports"

    def most(self) -> int:
        return int(settings.PORTAL_PERSON_IMPORTS)


@shared_task(
    name="jobs.tracking.tasks.import_upload",
    base=ImportTask,
    time_limit=int(settings.PORTAL_IMPORT_TIME_LIMIT),
    soft_time_limit=int(settings.PORTAL_IMPORT_TIME_LIMIT) - 30,
)
def import_upload(import_id: int) -> None:
    """Import one upload. Claimed when queued, or when a worker that ran it is gone (its
    start older than the time limit): importing again is safe, each run goes in once."""
    now = timezone.now()
    lost = now - dt.timedelta(seconds=settings.PORTAL_IMPORT_TIME_LIMIT + 60)
    claimed = (
        RunImport.objects.filter(pk=import_id)
        .filter(
            Q(state=RunImport.State.QUEUED) | Q(state=RunImport.State.RUNNING, started_at__lt=lost)
        )
        .update(state=RunImport.State.RUNNING, started_at=now)
    )
    if not claimed:
        return
    run_import = RunImport.objects.get(pk=import_id)
    upload = run_import.upload_path
    state, message, report = RunImport.State.FAILED, "", service.Report()
    try:
        with tempfile.TemporaryDirectory(prefix="portal-upload-") as tmp:
            folder = Path(tmp) / folder_name(run_import.filename)
            folder.mkdir()
            archive.unpack(upload, folder)

            def progress(so_far: service.Report) -> None:
                if so_far.runs % 50 == 0:
                    RunImport.objects.filter(pk=import_id).update(report=so_far.as_dict())

            with memory.limited(settings.PORTAL_IMPORT_MEMORY_MB * 2**20):
                report = service.import_path(run_import.owner, folder, progress)
        state, message = RunImport.State.DONE, report.sentence()
    except Unreadable as exc:
        message = str(exc)
    except MemoryError:
        log.warning("import %s needed more than its memory limit", import_id)
        message = (
            f"The import needed more than {settings.PORTAL_IMPORT_MEMORY_MB} MiB of memory "
            "and was stopped: import fewer or smaller runs at once. Runs imported before it "
            "stopped are kept."
        )
    except Exception:
        log.exception("import %s failed", import_id)
        message = "The import failed on the portal's side; the administrators can see why."
        raise
    finally:
        upload.unlink(missing_ok=True)
        RunImport.objects.filter(pk=import_id).update(
            state=state, message=message, report=report.as_dict(), finished_at=timezone.now()
        )


# A queued import whose message was lost (a broker restarted empty) is sent again after this.
RESEND_AFTER = dt.timedelta(minutes=5)


@shared_task(name="jobs.tracking.tasks.resend_imports")
def resend_imports() -> int:
    """The beat's look at imports no worker has: queued for long, or running past the
    time limit (the worker died). Each is sent again; import_upload claims it once."""
    now = timezone.now()
    lost = now - dt.timedelta(seconds=settings.PORTAL_IMPORT_TIME_LIMIT + 60)
    stalled = RunImport.objects.filter(
        Q(state=RunImport.State.QUEUED, created_at__lt=now - RESEND_AFTER)
        | Q(state=RunImport.State.RUNNING, started_at__lt=lost)
    ).values_list("pk", flat=True)[:100]
    for pk in stalled:
        import_upload.delay(pk)
    return len(stalled)
