"""Reading a job's metrics files over SSH, for clusters whose nodes cannot upload and
once more when every job ends (whatever the uploads missed)."""

from __future__ import annotations

import logging

from celery import shared_task

from jobs.cluster import ssh
from jobs.metrics.tail import tail_job
from jobs.models import Job
from jobs.task_helpers import limits, single_flight

log = logging.getLogger(__name__)


# Named as before the move: messages queued by an older worker still find it.
@shared_task(name="jobs.tasks.tail_metrics", bind=True, acks_late=True, max_retries=30, **limits())
def tail_metrics(self, job_id: int, final: bool = False) -> None:
    """Read new lines of a job's metrics files over SFTP (one reader per job at a time)."""
    with single_flight(f"metrics-tail:{job_id}", 300) as mine:
        if not mine:
            if final:
                # A read in progress may have started before the last lines were
                # written: the final read must still happen, after it.
                raise self.retry(countdown=5)
            return
        job = Job.objects.select_related("cluster_account__cluster").filter(pk=job_id).first()
        if job is None:
            return
        try:
            tail_job(job, max_passes=50 if final else 1)
        except ssh.ClusterError as exc:
            log.warning("metrics of job %s not read: %s", job_id, exc)
