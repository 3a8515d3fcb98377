"""Job lifecycle on the real dev cluster: the tasks' code over real SSH to real Slurm. What
both schedulers do (submit, exit codes, cancel, hold, time limit, one job per submit, the
cost of a sync) is tested once for each in tests/scheduling/test_lifecycle.py."""

import re
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings

from clusters import files, pool, ssh
from clusters.models import ClusterAccount, Partition
from jobs import display, tasks
from jobs.models import Job
from tests import factories
from tests.devcluster.helpers import remote, run_until, sync_until

pytestmark = [pytest.mark.devcluster]

UP = Path(__file__).resolve().parents[2] / "deploy" / "devcluster" / "up.sh"


@pytest.mark.django_db
def test_log_tail_is_bounded(devcluster, owner):
    job = factories.job(
        owner, devcluster, "for i in $(seq 1 20000); do echo line-$i; done", partition="gpu"
    )
    tasks.submit_job.apply(args=[job.pk])
    job = run_until(job, {"completed"})
    tail = files.read_job_log(job, "stdout", max_bytes=4096)
    assert tail.truncated and len(tail.text) <= 4096 and tail.size > 100_000
    assert tail.text.rstrip().splitlines()[-2] == "line-20000"
    assert tail.text.splitlines()[0].startswith("line-")  # no partial first line


@pytest.mark.django_db
def test_user_command_runs_exactly_as_written(devcluster, owner):
    """Quotes, $(...), backslashes and newlines reach the job's bash untouched."""
    command = (
        "x='a b'; printf '<%s>\\n' \"$x\" $x; echo \"$(echo sub)\" 'lit$HOME' \\\necho second line"
    )
    job = factories.job(owner, devcluster, command, partition="gpu")
    tasks.submit_job.apply(args=[job.pk])
    job = run_until(job, {"completed"})
    expected = subprocess.run(["bash", "-c", command], capture_output=True, text=True).stdout
    got = files.read_job_log(job, "stdout").text
    assert expected in got, got


@pytest.mark.django_db
def test_gpu_job_sees_cuda_visible_devices(devcluster, owner):
    job = factories.job(
        owner,
        devcluster,
        'echo "GPUS=$CUDA_VISIBLE_DEVICES"',
        partition="gpu",
        gpus=2,
        gpu_type="v100",
    )
    tasks.submit_job.apply(args=[job.pk])
    # Both v100s: it may wait behind a GPU job of the other half (tests/conftest.py).
    job = run_until(job, {"completed"}, timeout=300)
    assert re.search(r"^GPUS=\d,\d$", files.read_job_log(job, "stdout").text, re.M)
    assert "#SBATCH --gres=gpu:v100:2" in job.script


@pytest.mark.django_db
@pytest.mark.alone  # it takes every GPU (tests/conftest.py)
def test_cancelling_a_pending_job_ends_cancelled(devcluster, owner):
    # Each takes every GPU of the cluster: two per node on both nodes.
    job = factories.job(owner, devcluster, "sleep 300", partition="gpu", gpus=2, nodes=2)
    blocker = factories.job(owner, devcluster, "sleep 300", partition="gpu", gpus=2, nodes=2)
    tasks.submit_job.apply(args=[blocker.pk])
    run_until(blocker, {"running"})
    tasks.submit_job.apply(args=[job.pk])
    # Until the scheduler has evaluated it (reason "Resources").
    sync_until(job, lambda j: j.pending_reason, 20, "to have a pending reason")
    assert job.state == "pending"
    # Which resource is short, from what sinfo says the node has free.
    assert job.pending_reason.startswith(
        "waiting for 2 nodes with what it asks on each; now 2 GPUs free on 0"
    ), job.pending_reason
    assert job.queue_position == 1  # next in the gpu partition's queue
    # The backfill scheduler's estimate (every 5 s on the dev cluster).
    sync_until(job, lambda j: j.estimated_start, 15, "to have an estimated start")
    # It starts when the blocker reaches its walltime, at the latest.
    blocker.refresh_from_db()
    limit = blocker.started_at + timedelta(minutes=blocker.time_limit_minutes, seconds=5)
    assert job.estimated_start and job.estimated_start <= limit, (job.estimated_start, limit)
    assert "next in the queue; the scheduler expects it to start at" in display.pending_text(job)
    assert job.request_cancel()
    tasks.cancel_job.apply(args=[job.pk])
    assert run_until(job, {"cancelled"}, timeout=30).state == "cancelled"
    blocker.request_cancel()
    tasks.cancel_job.apply(args=[blocker.pk])


@pytest.mark.django_db
def test_cancelling_a_queued_job_needs_no_scheduler(devcluster, owner):
    job = factories.job(owner, devcluster, partition="gpu")
    before = ssh.counters["commands"]
    assert job.request_cancel() is False
    job.refresh_from_db()
    assert job.state == "cancelled" and ssh.counters["commands"] == before
    tasks.submit_job.apply(args=[job.pk])  # a late submit task does nothing
    job.refresh_from_db()
    assert job.state == "cancelled" and not job.scheduler_job_id


@pytest.mark.django_db
def test_invalid_partition_ends_submit_failed_with_slurms_message(devcluster, owner):
    factories.partition(devcluster, "nope", max_time_minutes=60, default_time_minutes=10)
    job = factories.job(owner, devcluster, partition="nope")
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert job.state == "submit_failed"
    assert "invalid partition specified: nope" in job.message
    assert job.events.get().to_state == "submit_failed"


@pytest.mark.django_db
def test_over_limit_request_ends_submit_failed_with_slurms_message(devcluster, owner):
    # The portal's limits allow it (admin misconfiguration); Slurm refuses: its message is kept.
    Partition.objects.filter(cluster=devcluster, name="gpu").update(
        max_gpus_per_job=8, max_gpus_per_node=8
    )
    job = factories.job(owner, devcluster, partition="gpu", gpus=8, gpu_type="v100")
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert job.state == "submit_failed"
    assert "Requested node configuration is not available" in job.message


@pytest.mark.django_db
def test_changed_host_key_is_refused_and_nothing_is_submitted(devcluster, owner):
    devcluster.host_key = (
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOqmCr0ke0UTgwV9vPwNDnqf4mr8v07WgMJOuFbxZuBs"
    )
    devcluster.save()
    job = factories.job(owner, devcluster, partition="gpu")
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert job.state == "submit_failed"
    assert "Host key mismatch" in job.message and not job.scheduler_job_id


@pytest.mark.django_db
def test_connection_is_reused_across_operations(devcluster, owner):
    before = ssh.counters["connections"]
    account = ClusterAccount.for_user(devcluster, owner)
    for _ in range(5):
        remote(account, ["true"])
    assert ssh.counters["connections"] - before == 1


@pytest.mark.django_db
def test_a_dropped_connection_is_replaced_transparently(devcluster, owner):
    account = ClusterAccount.for_user(devcluster, owner)
    conn = pool.get(account)
    conn._transport.sock.close()  # the network drops the TCP connection under us
    assert remote(account, ["echo", "still here"]).strip() == "still here"


@pytest.mark.django_db
@pytest.mark.alone  # it restarts slurmctld (tests/conftest.py)
def test_slurmctld_outage_never_marks_running_jobs_ended(devcluster, owner):
    job = factories.job(owner, devcluster, "sleep 20", partition="gpu")
    tasks.submit_job.apply(args=[job.pk])
    job = run_until(job, {"running"})
    pidfile = Path(settings.DEVCLUSTER_DIR) / "run" / "slurmctld.pid"
    subprocess.run(["kill", pidfile.read_text().strip()], check=True)
    try:
        time.sleep(1)
        for _ in range(3):
            assert tasks.sync_jobs(Job.objects.filter(pk=job.pk)) == 0
        job.refresh_from_db()
        assert job.state == "running"
    finally:
        subprocess.run(["bash", str(UP)], check=True, capture_output=True, timeout=120)
    # Slurm kept the job through the restart; it finishes normally.
    assert run_until(job, {"completed", "failed"}, timeout=60).state == "completed"


@pytest.mark.django_db(transaction=True)
def test_state_changes_are_published_to_the_job_and_user_groups(devcluster, owner):
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    from jobs.broadcast import job_group, user_group

    layer = get_channel_layer()
    job = factories.job(owner, devcluster, partition="gpu")
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(job_group(job.pk), channel)
    user_channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(user_group(owner.pk), user_channel)
    tasks.submit_job.apply(args=[job.pk])
    message = async_to_sync(layer.receive)(channel)
    assert message["type"] == "job.update"
    assert message["job"]["id"] == job.pk and message["job"]["state"] == "pending"
    assert async_to_sync(layer.receive)(user_channel)["job"]["state"] == "pending"
