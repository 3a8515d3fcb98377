"""A requeued notebook (real Slurm, real JupyterLab on the dev node): its session follows the
new run and is never routed to the last run's port, where anyone could listen now."""

import subprocess

import pytest

from jobs import tasks
from jobs.models import Job
from proxy.models import SessionLink
from tests import factories, polling
from tests.devcluster.helpers import start_now_if_held_for_requeue, sync_until

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]


def session_until(job: Job, done, what: str, timeout: float = 120, seen=None) -> SessionLink:
    """Sync as beat would until ``done(job, its session)``; returns the session."""

    def session_done(job: Job) -> SessionLink | None:
        session = SessionLink.objects.get(job=job)
        if seen is not None:
            seen.append((job.attempt, session.state, session.port, session.is_open))
        return session if done(job, session) else None

    return sync_until(job, session_done, timeout, what)


def test_a_requeued_notebook_registers_anew_and_the_old_port_is_never_routed(devcluster, owner):
    job = factories.job(owner, devcluster, "", kind=Job.Kind.NOTEBOOK, time_limit_minutes=10)
    tasks.submit_job.apply(args=[job.pk])
    first = session_until(job, lambda j, s: s.state == "ready", "to have its session ready")
    old = (first.host, first.port, first.upstream_token())
    assert first.is_open and job.attempt == 0

    done = subprocess.run(
        ["scontrol", "requeue", job.scheduler_job_id], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    # Slurm holds a requeued job back for two minutes (BeginTime); the test needn't wait.
    polling.until(
        lambda: start_now_if_held_for_requeue(job.scheduler_job_id),
        30,
        "the requeued job to be held for its BeginTime",
    )
    seen: list = []
    second = session_until(
        job,
        lambda j, s: j.attempt == 1 and s.state == "ready",
        "to run again with its session ready",
        timeout=180,
        seen=seen,
    )
    assert (second.host, second.port, second.upstream_token()) != old
    assert second.upstream_token() != old[2]  # a new secret, made on the node by the new run
    assert second.is_open
    # Once Slurm reported the requeue, the session never pointed at the old port again.
    assert not [s for s in seen if s[0] == 1 and s[2] == old[1] and s[3]]
    assert "Requeued by the scheduler: attempt 2." in [e.message for e in job.events.all()]


def test_registration_of_a_job_slurm_reports_pending_is_refused(
    devcluster, owner, client, queued_syncs
):
    """The job's own registration call while Slurm has it pending (held here): the
    endpoint queues a sync of the job for a worker and refuses; the session stays
    unrouted, and the sync hears 'pending' from Slurm. Before: accepted while pending,
    with the caller's address as the host."""
    import json

    job = factories.job(owner, devcluster, "", kind=Job.Kind.NOTEBOOK)
    held = subprocess.run(
        [
            "runuser",
            "-u",
            "hpcuser",
            "--",
            "sbatch",
            "--parsable",
            "--hold",
            "-p",
            "cpu",
            "-J",
            job.scheduler_name,
            "--wrap",
            "sleep 60",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    try:
        account = devcluster.accounts.get(user=owner)
        Job.objects.filter(pk=job.pk).update(
            state="pending", scheduler_job_id=held, cluster_account=account
        )
        session = SessionLink.for_job(job)
        secret = session.issue_register_secret()
        response = client.post(
            f"/sessions/register/{session.public_id}/",
            json.dumps({"port": 8888, "token": "t" * 32}),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {secret}",
            REMOTE_ADDR="10.9.8.7",
        )
        assert response.status_code == 409 and response["Retry-After"]
        session.refresh_from_db()
        assert (session.state, session.host, session.port) == ("starting", "", None)
        assert queued_syncs == [(job.pk,)]
        tasks.sync_jobs(Job.objects.filter(pk=job.pk))  # what the worker does with it
        job.refresh_from_db()
        assert job.state == "pending" and job.pending_reason == "held by you"  # asked Slurm
    finally:
        subprocess.run(["scancel", held], capture_output=True)
