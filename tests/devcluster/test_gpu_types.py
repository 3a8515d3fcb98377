"""GPUs chosen by memory on the real dev cluster, whose two nodes have different fake GPUs:
v100 (7.0, 32 GB) on node1, a100 (8.0, 80 GB) on node2, each a typed GRES and a node
feature. A request both types meet runs with an OR constraint of their features.
Discovery, a request only the A100 meets and an impossible one, on both schedulers:
tests/scheduling/test_gpu_types.py."""

import pytest

from jobs import tasks
from jobs.models import Job
from tests import factories
from tests.devcluster.helpers import run_until

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]


def run(owner, cluster, **fields) -> Job:
    job = factories.job(
        owner,
        cluster,
        'echo "on $SLURMD_NODENAME with GPUs $CUDA_VISIBLE_DEVICES"',
        save=False,
        partition="gpu",
        **fields,
    )
    job.full_clean()
    job.save()
    tasks.submit_job.apply(args=[job.pk])
    job = run_until(job, set(Job.FINAL_STATES), timeout=90)
    assert job.state == Job.State.COMPLETED, job.message
    return job


def test_a_request_both_types_meet_runs_on_either_with_an_or_constraint(devcluster, owner):
    job = run(owner, devcluster, gpus=1, min_gpu_memory_gb=20)
    assert job.gpu_type == "" and "#SBATCH --constraint=v100|a100" in job.script
    assert job.node in ("node1", "node2")
