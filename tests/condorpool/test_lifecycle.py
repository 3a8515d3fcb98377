"""Job lifecycle on the real HTCondor pool: the tasks' code over real SSH to a real schedd."""

import pytest

from jobs import tasks
from jobs.models import Job
from jobs.slurm import files
from tests import factories
from tests.devcluster.helpers import remote, run_until

pytestmark = [pytest.mark.condorpool, pytest.mark.django_db]


def test_batch_job_runs_to_completed_and_its_output_is_readable(condorpool, owner):
    job = factories.job(owner, condorpool, "echo hello from $(hostname); echo oops >&2")
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert job.state == Job.State.PENDING, job.message
    assert job.scheduler_job_id.endswith(".0"), job.scheduler_job_id
    assert job.work_dir == f"/home/condoruser/.portal/jobs/{job.pk}-{job.uid}"
    job = run_until(job, {"completed", "failed"})
    assert (job.state, job.exit_code) == ("completed", 0), job.message
    assert job.node
    assert "hello from " in files.read_job_log(job, "stdout").text
    assert "oops" in files.read_job_log(job, "stderr").text
    # What was submitted is kept: the description and the script, readable only by the user.
    account = job.cluster_account
    description, _, script = job.script.partition(
        "\n#-- portal: end of job.sub; job.sh follows --\n"
    )
    assert remote(account, ["cat", f"{job.work_dir}/job.sub"]) == description + "\n"
    assert remote(account, ["cat", f"{job.work_dir}/job.sh"]) == script
    assert remote(account, ["stat", "-c", "%a", job.work_dir]).strip() == "700"


def test_command_exiting_3_ends_failed_with_exit_code_3(condorpool, owner):
    job = factories.submitted_job(owner, condorpool, "exit 3")
    job = run_until(job, {"completed", "failed"})
    assert (job.state, job.exit_code) == ("failed", 3)
