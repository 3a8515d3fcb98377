"""A requeued notebook (real Slurm, real JupyterLab on the dev node): its session follows the
new run and is never routed to the last run's port, where anyone could listen now."""

import subprocess
import time

import pytest

from jobs import tasks
from jobs.models import ContainerImage, Job, Partition
from proxy.models import Session

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]


def sync_until(job: Job, done, timeout: float = 120, seen=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tasks.sync_jobs(Job.objects.filter(pk=job.pk))
        job.refresh_from_db()
        session = Session.objects.get(job=job)
        if seen is not None:
            seen.append((job.attempt, session.state, session.port, session.is_open))
        if done(job, session):
            return session
        time.sleep(0.5)
    raise AssertionError(f"job {job.pk}: {job.state} {job.message!r}; session {session.state}")


def test_a_requeued_notebook_registers_anew_and_the_old_port_is_never_routed(devcluster, owner):
    image = ContainerImage.objects.create(
        name="Python (host)", slug="py-host", runtime="none", offers_notebook=True
    )
    job = Job.objects.create(
        owner=owner,
        cluster=devcluster,
        image=image,
        partition=Partition.objects.get(cluster=devcluster, name="cpu"),
        kind=Job.Kind.NOTEBOOK,
        cpus=1,
        memory_gb=1,
        time_limit_minutes=10,
    )
    tasks.submit_job.apply(args=[job.pk])
    first = sync_until(job, lambda j, s: s.state == "ready")
    old = (first.host, first.port, first.upstream_token())
    assert first.is_open and job.attempt == 0

    done = subprocess.run(
        ["scontrol", "requeue", job.scheduler_job_id], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    # Slurm holds a requeued job back for two minutes (BeginTime); the test needn't wait.
    for _ in range(60):
        reason = subprocess.run(
            ["squeue", "-h", "-j", job.scheduler_job_id, "-o", "%r"], capture_output=True, text=True
        ).stdout.strip()
        if reason == "BeginTime":
            break
        time.sleep(0.5)
    subprocess.run(
        ["scontrol", "update", f"JobId={job.scheduler_job_id}", "StartTime=now"], check=True
    )
    seen: list = []
    second = sync_until(
        job, lambda j, s: j.attempt == 1 and s.state == "ready", timeout=180, seen=seen
    )
    assert (second.host, second.port, second.upstream_token()) != old
    assert second.upstream_token() != old[2]  # a new secret, made on the node by the new run
    assert second.is_open
    # Once Slurm reported the requeue, the session never pointed at the old port again.
    assert not [s for s in seen if s[0] == 1 and s[2] == old[1] and s[3]]
    assert "Requeued by the scheduler: attempt 2." in [e.message for e in job.events.all()]
