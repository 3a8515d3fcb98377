"""Driving jobs on the dev cluster as the portal's periodic tasks would."""

import subprocess
import time

from jobs import tasks
from jobs.cluster import pool
from jobs.models import Job
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


def submit_from_threads(job: Job, threads: int = 4) -> list[Exception]:
    """The submit task of ``job`` run by ``threads`` workers at once (a duplicated queue
    message); the errors they raised."""
    import threading

    from django.db import connection

    errors: list[Exception] = []

    def submit():
        try:
            tasks.submit_job.apply(args=[job.pk], throw=True)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()

    running = [threading.Thread(target=submit) for _ in range(threads)]
    for t in running:
        t.start()
    for t in running:
        t.join()
    return errors


def remote(account, argv):
    """The stdout of ``argv`` run over SSH as ``account``."""
    return pool.with_connection(account, lambda conn: conn.run(argv)).stdout


def squeue_field(scheduler_id: str, field: str) -> str:
    """One squeue field (``%r`` reason, ``%T`` state) of a job, as root sees it."""
    return subprocess.run(
        ["squeue", "-h", "-j", scheduler_id, "-o", field], capture_output=True, text=True
    ).stdout.strip()


def start_now_if_held_for_requeue(scheduler_id: str) -> bool:
    """Slurm holds a requeued job back for the credential lifetime (BeginTime, 120 s);
    a test need not wait: start it now. True if it was held."""
    if squeue_field(scheduler_id, "%r") != "BeginTime":
        return False
    # Not in the second of the requeue: slurmd revokes the killed run's credential with a
    # time in whole seconds and refuses ("Job N already killed, do not launch batch job",
    # exit 1) a launch whose credential is from the same second.
    time.sleep(2)
    subprocess.run(["scontrol", "update", f"JobId={scheduler_id}", "StartTime=now"], check=True)
    return True
