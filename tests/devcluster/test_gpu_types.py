"""GPUs chosen by capability and memory on the real dev cluster, whose two nodes have
different fake GPUs: v100 (7.0, 32 GB) on node1, a100 (8.0, 80 GB) on node2, each a typed
GRES and a node feature. Discovery reads them from sinfo; a request only one type meets
lands on its node; one both meet runs with an OR constraint; an impossible one is refused
before anything reaches Slurm."""

from decimal import Decimal

import pytest

from jobs import tasks
from jobs.cluster import pool
from jobs.launch import LaunchForm
from jobs.models import GpuType, Job
from jobs.models.gpus import record_discovery
from jobs.slurm import operations
from tests import factories
from tests.devcluster.helpers import run_until

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]


def test_discovery_describes_both_types_from_sinfo(devcluster, owner):
    GpuType.objects.filter(cluster=devcluster).delete()
    devcluster.partitions.filter(name="gpu").update(gpu_types="")
    account = devcluster.accounts.get(user=owner)
    nodes = pool.with_connection(account, operations.free_on_nodes)
    record_discovery(devcluster, nodes)
    assert {
        (t.name, str(t.compute_capability), t.memory_gb, t.feature)
        for t in GpuType.objects.filter(cluster=devcluster)
    } == {("v100", "7.0", 32, "v100"), ("a100", "8.0", 80, "a100")}
    assert sorted(devcluster.partitions.get(name="gpu").gpu_type_list) == ["a100", "v100"]


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


def test_a_request_only_the_a100_meets_lands_on_its_node(devcluster, owner):
    job = run(owner, devcluster, gpus=2, min_gpu_capability=Decimal("8.0"))
    assert job.gpu_type == "a100" and "#SBATCH --gres=gpu:a100:2" in job.script
    assert job.node == "node2"


def test_a_request_both_types_meet_runs_on_either_with_an_or_constraint(devcluster, owner):
    job = run(owner, devcluster, gpus=1, min_gpu_memory_gb=20)
    assert job.gpu_type == "" and "#SBATCH --constraint=v100|a100" in job.script
    assert job.node in ("node1", "node2")


def test_an_impossible_request_is_refused_before_submission(devcluster, owner):
    form = LaunchForm(
        data={
            "image": factories.image().slug,
            "kind": "batch",
            "cluster": devcluster.name,
            "partition": devcluster.partitions.get(name="gpu").pk,
            "gpus": 1,
            "min_gpu_memory_gb": 100,
            "cpus": 1,
            "memory_gb": 1,
            "time_limit_minutes": 5,
            "work_dir_kind": "home",
            "command": "true",
        },
        user=owner,
    )
    assert not form.is_valid()
    assert form.errors["min_gpu_memory_gb"] == [
        "No GPU on partition gpu has ≥ 100 GB. Closest: a100 (compute capability 8.0, 80 GB); "
        "v100 (compute capability 7.0, 32 GB)."
    ]
    assert not Job.objects.exists()
