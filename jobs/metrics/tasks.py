"""Reading a job's metrics files over SSH, for clusters whose nodes cannot upload and
once more when every job ends (whatever the uploads missed)."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from jobs import outbox
from jobs.cluster import ssh
from jobs.metrics.tail import tail_job
from jobs.models import Job
from jobs.models.events import METRICS
from jobs.task_helpers import limits, single_flight

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


@shared_task(name="jobs.metrics.tasks.tail_running")
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
