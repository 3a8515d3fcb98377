"""GPU types on both real schedulers. The dev cluster's two nodes have fake GPUs of two
kinds, v100 (7.0) on node1 and a100 (8.0) on node2, two each; the pool's one machine one of
each (condor_gpu_discovery -simulate). The admin's action discovers them (sinfo,
condor_status); a request only the A100 meets lands on it; an impossible one is refused
before anything reaches the scheduler. How Slurm meets a request both types meet:
tests/devcluster/test_gpu_types.py; HTCondor's GPU memory: tests/condorpool/."""

from decimal import Decimal

import pytest
from django.urls import reverse

from clusters import files
from clusters.models import GpuType
from jobs import tasks
from jobs.launch import LaunchForm
from jobs.models import Job
from tests import factories
from tests.devcluster.helpers import run_until

pytestmark = [pytest.mark.django_db]

# The types as discovery describes them (name, compute capability, memory in GB, node
# feature): Slurm's cards are known by name (their memory a well-known card's), each a
# node feature too; HTCondor's devices report their capability and memory.
DISCOVERED = {
    "slurm": {("v100", "7.0", 32, "v100"), ("a100", "8.0", 80, "a100")},
    "htcondor": {("v100", "7.0", 23, ""), ("a100", "8.0", 46, "")},
}


def test_the_admins_action_discovers_both_gpu_types(scheduler_cluster, admin_client):
    GpuType.objects.filter(cluster=scheduler_cluster).delete()
    scheduler_cluster.partitions.filter(name="gpu").update(gpu_types="")
    response = admin_client.post(
        reverse("admin:jobs_cluster_changelist"),
        {"action": "discover_gpu_types", "_selected_action": [scheduler_cluster.pk]},
        follow=True,
    )
    said = [str(m) for m in response.context["messages"]]
    assert said and all(m.startswith(f"{scheduler_cluster.name}: ") for m in said), said
    assert {
        (t.name, str(t.compute_capability), t.memory_gb, t.feature)
        for t in GpuType.objects.filter(cluster=scheduler_cluster)
    } == DISCOVERED[scheduler_cluster.scheduler]
    assert sorted(scheduler_cluster.partitions.get(name="gpu").gpu_type_list) == ["a100", "v100"]


# What asks for the A100 in the script; where the job says it ran (Slurm: on node2, the
# A100's node; HTCondor: with the simulated A100's device id).
ON_THE_A100 = {
    "slurm": ("#SBATCH --gres=gpu:a100:1", "on node2 "),
    "htcondor": ("gpus_minimum_capability = 7.5", "devices=GPU-b1223334"),
}


def test_a_request_only_the_a100_meets_lands_on_it(scheduler_cluster, owner):
    """7.5 or better: only the A100 (8.0), never the V100 (7.0)."""
    line, where = ON_THE_A100[scheduler_cluster.scheduler]
    job = factories.job(
        owner,
        scheduler_cluster,
        'echo "on ${SLURMD_NODENAME:-$(hostname)} devices=$CUDA_VISIBLE_DEVICES"',
        save=False,
        partition="gpu",
        gpus=1,
        min_gpu_capability=Decimal("7.5"),
    )
    job.full_clean()  # as the launch form and the API do
    job.save()
    tasks.submit_job.apply(args=[job.pk])
    job = run_until(job, set(Job.FINAL_STATES), timeout=90)
    assert job.state == Job.State.COMPLETED, job.message
    assert job.gpu_type == "a100"
    assert line in job.script.splitlines()
    out = files.read_job_log(job, "stdout").text
    assert where in out, out


# The closest types an impossible request is told of, as the cluster describes them.
CLOSEST = {
    "slurm": "a100 (compute capability 8.0, 80 GB); v100 (compute capability 7.0, 32 GB)",
    "htcondor": "a100 (compute capability 8.0, 46 GB); v100 (compute capability 7.0, 23 GB)",
}


def test_an_impossible_gpu_request_is_refused_before_submission(scheduler_cluster, owner):
    image = factories.image()
    # Through the launch form: more GPU memory than any card has.
    form = LaunchForm(
        data={
            "image": image.slug,
            "kind": "batch",
            "cluster": scheduler_cluster.name,
            "partition": scheduler_cluster.partitions.get(name="gpu").pk,
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
        f"No GPU on partition gpu has ≥ 100 GB. Closest: {CLOSEST[scheduler_cluster.scheduler]}."
    ]
    # Through the API: a newer compute capability than any card has.
    response = factories.api_client(owner).post(
        "/api/v1/jobs/",
        {
            "cluster": scheduler_cluster.name,
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
    assert "a100" in text and "8.0" in text  # the closest type the cluster has
    assert not Job.objects.exists()
