"""What users' jobs write into the scheduler's output is data, never structure (real Slurm).

Each test here puts hostile text where a job can: its own name or comment, from sbatch or
from inside a running job with ``scontrol update``, in the same cluster account as a
portal job or in another user's. Another user's forgery and a job renaming itself, on both
schedulers: tests/scheduling/test_hostile_output.py.
"""

import subprocess

import pytest

from jobs import tasks
from jobs.models import Job
from tests import factories, polling
from tests.devcluster.helpers import as_user, run_until

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]


@pytest.fixture
def hostile_jobs():
    """Slurm jobs submitted outside the portal; cancelled afterwards."""
    ids: list[tuple[str, str]] = []

    def submit(user: str, *options: str) -> str:
        job_id = as_user(user, "sbatch", "--parsable", "-p", "cpu", "-t", "5", *options)
        ids.append((user, job_id))
        return job_id

    yield submit
    for user, job_id in ids:
        subprocess.run(["runuser", "-u", user, "--", "scancel", job_id], capture_output=True)


def portal_job(owner, cluster, command: str) -> Job:
    job = factories.submitted_job(owner, cluster, command)
    assert job.state == Job.State.PENDING, job.message
    return job


def sync_until(job: Job, states: set[str], timeout: float = 60) -> Job:
    """run_until, each sync reading all the cluster's scheduled jobs (the hostile ones'
    accounts too), as the periodic sync does."""
    scheduled = Job.objects.filter(cluster=job.cluster, state__in=tasks.SCHEDULED_STATES)
    return run_until(job, states, timeout, jobs=scheduled)


def renamed_itself(job: Job, timeout: float = 60) -> None:
    """Wait until the job has run its ``scontrol update`` (before: the check could sync
    before the job started, see the name unchanged and fail at random)."""

    def renamed() -> bool:
        shown = subprocess.run(
            ["scontrol", "show", "job", job.scheduler_job_id],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
        return "JobName=n\n" in shown

    polling.until(renamed, timeout, f"job {job.scheduler_job_id} to rename itself")


def test_a_separator_or_newline_in_a_comment_does_not_stall_the_accounts_other_jobs(
    devcluster, owner, hostile_jobs
):
    """Before: parse_squeue raised on the odd line and the whole sync of the account
    stopped, so every other job stayed pending for as long as Slurm listed this one."""
    hostile_jobs("hpcuser", "--hold", "--comment=a\x1fb\nc", "-J", "x\ny\x1fz", "--wrap", "true")
    # And the same from inside a running job, as any portal job could do to itself.
    inside = portal_job(
        owner,
        devcluster,
        "scontrol update JobId=$SLURM_JOB_ID Comment=$'p\\x1fq\\nr' JobName=$'n\\nm'; sleep 60",
    )
    renamed_itself(inside)
    job = portal_job(owner, devcluster, "echo done")
    job = sync_until(job, {"completed", "failed"})
    assert (job.state, job.exit_code) == ("completed", 0)
    inside.refresh_from_db()
    assert inside.state in {"pending", "running"}  # renamed itself: no longer reported ...
    assert inside.scheduler_unseen_since is not None  # ... so its grace period runs
