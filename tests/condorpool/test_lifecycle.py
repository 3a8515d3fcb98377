"""Job lifecycle on the real HTCondor pool, what only HTCondor does: matchmaking that keeps
a job idle, GPU memory in a submit description, a schedd outage. What both schedulers do
is tested once for each in tests/scheduling/ (test_lifecycle.py, test_gpu_types.py)."""

import time

import pytest

from clusters import files
from jobs import tasks
from jobs.models import Job
from tests import factories
from tests.conftest import as_pool_root
from tests.devcluster.helpers import run_until, sync_until

pytestmark = [pytest.mark.condorpool, pytest.mark.django_db]


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
