"""Driving jobs on the dev cluster as the portal's periodic tasks would."""

import time

from jobs import tasks
from jobs.models import Job
from jobs.slurm import operations
from tests import factories


def run_until(job: Job, states: set[str], timeout: float = 60) -> Job:
    """Drive the periodic sync (as beat would) until the job reaches one of ``states``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tasks.sync_jobs(Job.objects.filter(pk=job.pk))
        job.refresh_from_db()
        if job.state in states:
            return job
        time.sleep(0.5)
    raise AssertionError(
        f"job {job.pk} is {job.state} ({job.message}) after {timeout}s, wanted {states}"
    )


def run_job(owner, cluster, command: str) -> Job:
    """factories.submitted_job(), synced until it ends; it must end completed."""
    job = run_until(factories.submitted_job(owner, cluster, command), set(Job.FINAL_STATES))
    assert job.state == "completed", job.message
    return job


def remote(account, argv):
    """The stdout of ``argv`` run over SSH as ``account``."""
    return operations.on_account(account, lambda conn: conn.run(argv)).stdout
