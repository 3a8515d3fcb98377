"""A Slurm id reissued to another job of the same person (issue #40), on the dev cluster's
real Slurm and accounting: slurmctld killed right after job A started lost it, and after
its restart gave A's id to the owner's next job, B. The state is staged by hand: B is a
real portal job run to its end; A is a portal job of the same owner that the portal
believes running under B's id, with its own name. A must never show B's state, exit
code or runs; after the grace it fails as lost; B reaches its own true end.
"""

import time

import pytest
from django.test import override_settings
from django.utils import timezone

from clusters import pool
from jobs import tasks
from jobs.models import Job
from schedulers.slurm import operations
from tests import factories

# The file restarts slurmctld: it runs while no other Slurm test does (tests/conftest.py).
pytestmark = [pytest.mark.devcluster, pytest.mark.django_db, pytest.mark.alone]


def scheduled(*jobs: Job):
    """What the periodic sync passes: those of ``jobs`` still scheduled."""
    return Job.objects.filter(pk__in=[j.pk for j in jobs], state__in=tasks.SCHEDULED_STATES)


def still_running(lost: Job) -> None:
    lost.refresh_from_db()
    assert (lost.state, lost.exit_code, lost.node) == ("running", None, ""), lost.message


def accounting_of(*jobs: Job) -> dict:
    """What the sync's accounting read (sacct --json, then sacct -P for exit codes) finds of
    ``jobs``, by key, on their owner's connection."""
    account = jobs[0].cluster_account
    expected = {job.scheduler_key: job.ref().comment for job in jobs}
    return pool.with_connection(
        account, lambda conn: operations.accounting(conn, account.username, expected)
    )


@pytest.mark.parametrize("through_reader", [False, True], ids=["own-account", "reader"])
def test_a_job_whose_id_was_reissued_never_takes_the_other_jobs_outcome(
    devcluster, owner, through_reader
):
    devcluster.sync_reads_all_jobs = through_reader
    devcluster.save()
    taken = factories.submitted_job(owner, devcluster, "echo taken; exit 0")
    lost = factories.job(
        owner,
        devcluster,
        "sleep 600",
        cluster_account=taken.cluster_account,
        scheduler_job_id=taken.scheduler_job_id,
        state=Job.State.RUNNING,
        submitted_at=timezone.now(),
    )
    assert lost.scheduler_name != taken.scheduler_name
    # The controller's answer (squeue, ended jobs too): B runs and ends, A is never it.
    deadline = time.monotonic() + 90
    with override_settings(PORTAL_LOST_JOB_GRACE=600):
        while True:
            tasks.sync_jobs(scheduled(lost, taken))
            still_running(lost)
            taken.refresh_from_db()
            if taken.is_final:
                break
            assert time.monotonic() < deadline, f"job {taken.pk} is {taken.state}"
            time.sleep(0.5)
        tasks.sync_jobs(scheduled(lost, taken))
    still_running(lost)
    assert lost.scheduler_unseen_since is not None  # nothing under its name: unseen
    assert (taken.state, taken.exit_code) == ("completed", 0), taken.message

    # Accounting (sacct --json for the state, sacct -P for the exit code), once slurmdbd
    # has B's end: B's under its name, nothing under A's.
    deadline = time.monotonic() + 60
    while True:
        found = accounting_of(lost, taken)
        status = found.get(taken.scheduler_key)
        if status is not None and status.is_final:
            break
        assert time.monotonic() < deadline, f"accounting has no end of job {taken.pk}: {found}"
        time.sleep(0.5)
    assert lost.scheduler_key not in found
    assert (status.state, status.exit_code, status.signal) == ("completed", 0, 0)

    # Runs (sacct -D: every job that held the id): B's, never for A.
    tasks.record_attempts.apply(args=[[lost.pk, taken.pk]], throw=True)
    (run,) = taken.attempts.all()
    assert run.ended_at is not None and run.node in ("node1", "node2")
    assert not lost.attempts.exists()

    # After the grace, A fails as lost with a message that says why; B stays as it ended.
    with override_settings(PORTAL_LOST_JOB_GRACE=0):
        tasks.sync_jobs(scheduled(lost, taken))
    lost.refresh_from_db()
    assert (lost.state, lost.exit_code, lost.node) == ("failed", None, "")
    assert "no longer knows this job" in lost.message
    assert f"id {taken.scheduler_job_id} under its name {lost.scheduler_name}" in lost.message
    assert "given the id to another job" in lost.message
    taken.refresh_from_db()
    assert (taken.state, taken.exit_code) == ("completed", 0)
    assert "no longer knows" not in (taken.message or "")

    # An ended job with no run is asked again through its owner (and retried, until the
    # task gives up): still none.
    result = tasks.record_attempts.apply(args=[[lost.pk]])
    assert result.successful(), result.traceback
    assert not lost.attempts.exists()
    assert taken.attempts.count() == 1
