"""Job lifecycle on the real HTCondor pool: the tasks' code over real SSH to a real schedd."""

import time
from decimal import Decimal

import pytest

from jobs import tasks
from jobs.cluster import files, pool, ssh
from jobs.models import ClusterAccount, Job
from tests import factories
from tests.conftest import as_pool_root
from tests.devcluster.helpers import remote, run_until, submit_from_threads, sync_until

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


def test_cancelling_a_running_job_ends_cancelled(condorpool, owner):
    job = factories.submitted_job(owner, condorpool, "sleep 300")
    job = run_until(job, {"running"})
    # The node: once the startd's claim reaches the collector.
    sync_until(job, lambda j: j.node, 10, "to have its node")
    assert job.node == "vm"  # the execute machine, as its startd reports the claim
    assert job.request_cancel()
    tasks.cancel_job.apply(args=[job.pk])
    job = run_until(job, {"cancelled"}, timeout=30)
    assert job.ended_at is not None


def test_an_unmatchable_job_says_so_and_cancelling_it_while_idle_works(condorpool, owner):
    """Two A100-class GPUs: the pool has one. HTCondor keeps it idle; the page says why."""
    job = factories.submitted_job(
        owner, condorpool, "true", partition="gpu", gpus=2, min_gpu_capability=8
    )
    sync_until(job, lambda j: "no machine" in j.pending_reason, 30, "to say no machine matches")
    assert job.state == "pending"
    assert job.pending_reason.startswith("no machine in the pool matches its requirements")
    assert job.request_cancel()
    tasks.cancel_job.apply(args=[job.pk])
    assert run_until(job, {"cancelled"}, timeout=30).state == "cancelled"


def test_a_held_job_shows_its_hold_reason_and_is_released(condorpool, owner):
    job = factories.submitted_job(owner, condorpool, "echo released")
    # Held with a reason of its owner's own, before it could start (or right after).
    remote(
        job.cluster_account,
        ["condor_hold", "-reason", "quota <b>exceeded</b>; free space", job.scheduler_job_id],
    )
    sync_until(job, lambda j: j.is_held, 20, lambda: f"to be held ({job.pending_reason})")
    # HTCondor's reason as text: one line, no markup interpreted anywhere it is shown.
    assert job.pending_reason == "held: quota <b>exceeded</b>; free space (by user condoruser)"
    tasks.release_job.apply(args=[job.pk])
    job = run_until(job, {"completed", "failed"}, timeout=60)
    assert (job.state, job.exit_code) == ("completed", 0)


def test_the_time_limit_ends_a_job_timeout(condorpool, owner):
    job = factories.submitted_job(owner, condorpool, "sleep 300", time_limit_minutes=1)
    assert "+PortalTimeLimit = 60" in job.script
    # The same expression on a shorter limit (a minute is the form's least): 5 seconds.
    remote(job.cluster_account, ["condor_qedit", job.scheduler_job_id, "PortalTimeLimit", "5"])
    job = run_until(job, {"timeout", "cancelled", "failed", "completed"}, timeout=90)
    assert job.state == "timeout", job.message


def test_gpu_job_with_a_minimum_capability_lands_on_a_matching_gpu(condorpool, owner):
    """7.5 or better: only the simulated A100 (8.0), never the V100 (7.0)."""
    job = factories.submitted_job(
        owner,
        condorpool,
        'echo "devices=$CUDA_VISIBLE_DEVICES"',
        partition="gpu",
        gpus=1,
        min_gpu_capability=Decimal("7.5"),
    )
    job = run_until(job, {"completed", "failed"})
    assert job.state == "completed", job.message
    assert "gpus_minimum_capability = 7.5" in job.script
    out = files.read_job_log(job, "stdout").text
    assert "devices=GPU-b1223334" in out  # condor_gpu_discovery's simulated A100


def test_gpu_memory_minimum_in_gb_becomes_htcondors_megabytes(condorpool, owner):
    job = factories.submitted_job(
        owner,
        condorpool,
        'echo "devices=$CUDA_VISIBLE_DEVICES"',
        partition="gpu",
        gpus=1,
        min_gpu_memory_gb=40,
    )
    job = run_until(job, {"completed", "failed"})
    assert "gpus_minimum_memory = 40960" in job.script
    assert "devices=GPU-b1223334" in files.read_job_log(job, "stdout").text


def test_an_impossible_gpu_request_is_refused_before_submission(condorpool, owner):
    client = factories.api_client(owner)
    image = factories.image()
    response = client.post(
        "/api/v1/jobs/",
        {
            "cluster": condorpool.name,
            "partition": "gpu",
            "image": image.slug,
            "command": "true",
            "gpus": 1,
            "min_gpu_capability": "9.0",
        },
        format="json",
    )
    assert response.status_code == 400, response.content
    text = response.content.decode()
    assert "a100" in text and "8.0" in text  # the closest type the pool has
    assert not Job.objects.filter(owner=owner).exists()


def slurm_like_names(account, name: str) -> list[str]:
    out = remote(
        account,
        [
            "bash",
            "-c",
            'condor_q -constraint "PortalName == \\"$1\\"" -af ClusterId; '
            'condor_history -constraint "PortalName == \\"$1\\"" -af ClusterId',
            "names",
            name,
        ],
    )
    return sorted(set(out.split()))


@pytest.mark.django_db(transaction=True)
def test_duplicated_submit_tasks_produce_one_htcondor_job(condorpool, owner):
    job = factories.job(owner, condorpool, "sleep 1")
    errors = submit_from_threads(job)
    assert not errors
    job.refresh_from_db()
    account = ClusterAccount.for_user(condorpool, owner)
    assert slurm_like_names(account, job.scheduler_name) == [job.scheduler_job_id.split(".")[0]]
    assert job.events.filter(to_state="pending").count() == 1


def test_redelivered_submit_after_a_lost_update_adopts_the_submitted_job(condorpool, owner):
    job = factories.submitted_job(owner, condorpool, "sleep 1")
    first = job.scheduler_job_id
    # The worker died after condor_submit, before its database write and before the id
    # file was written: the queue (or the history) still knows the job by its name.
    remote(job.cluster_account, ["rm", "-f", f"{job.work_dir}/.scheduler_id"])
    Job.objects.filter(pk=job.pk).update(
        state="queued", scheduler_job_id="", submit_claimed_at=None
    )
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert job.scheduler_job_id == first
    assert "Adopted" in job.events.last().message
    assert slurm_like_names(job.cluster_account, job.scheduler_name) == [first.split(".")[0]]


def test_one_sync_of_many_jobs_issues_a_constant_number_of_ssh_commands(condorpool, owner):
    jobs = [factories.submitted_job(owner, condorpool, "sleep 1") for _ in range(6)]

    def commands_for_one_sync(queryset) -> int:
        before = ssh.counters["commands"]
        tasks.sync_jobs(queryset)
        return ssh.counters["commands"] - before

    few = commands_for_one_sync(Job.objects.filter(pk__in=[j.pk for j in jobs[:2]]))
    many = commands_for_one_sync(Job.objects.filter(pk__in=[j.pk for j in jobs]))
    assert few <= 2 and many <= 2  # condor_q, then condor_history for those that left it
    for job in jobs:
        run_until(job, {"completed"})
    # Once they left the queue: still two commands, however many.
    Job.objects.filter(pk__in=[j.pk for j in jobs]).update(state="running")
    assert commands_for_one_sync(Job.objects.filter(pk__in=[j.pk for j in jobs])) == 2
    assert set(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("state", flat=True)) == {
        "completed"
    }


def test_a_schedd_outage_never_marks_running_jobs_ended(condorpool, owner):
    job = factories.submitted_job(owner, condorpool, "sleep 15")
    job = run_until(job, {"running"})
    as_pool_root("condor_off", "-fast", "-daemon", "schedd")
    try:
        time.sleep(2)
        for _ in range(3):
            assert tasks.sync_jobs(Job.objects.filter(pk=job.pk)) == 0
        job.refresh_from_db()
        assert job.state == "running"
    finally:
        as_pool_root("condor_on", "-daemon", "schedd")
    # The schedd reconnects to the running job (or runs it again): it still ends completed.
    job = run_until(job, {"completed", "failed", "cancelled"}, timeout=120)
    assert job.state == "completed", job.message


def test_gpu_types_are_discovered_from_condor_status(condorpool, owner):
    from jobs.htcondor import operations as condor
    from jobs.models.gpus import record_devices

    condorpool.gpu_types.all().delete()
    account = ClusterAccount.for_user(condorpool, owner)
    devices = pool.with_connection(account, condor.gpu_devices)
    record_devices(condorpool, devices)
    described = {
        t.name: (str(t.compute_capability), t.memory_gb) for t in condorpool.gpu_types.all()
    }
    assert described == {"v100": ("7.0", 23), "a100": ("8.0", 46)}
