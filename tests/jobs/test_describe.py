"""A job's rows as the scheduler seam's plain values (jobs/models/job.py): what the
adapters are given instead of rows, read here once."""

from decimal import Decimal

import pytest

from jobs.models import JobArray
from jobs.models.annotations import PARAMS_FILE
from schedulers.seam import ImageSpec, JobKey, JobSpec, PartitionSpec, Resources
from tests import factories

pytestmark = pytest.mark.django_db


def test_a_job_is_described_with_its_image_partition_and_resources(owner, cluster):
    image = factories.image(
        "pt", "PyTorch", runtime="apptainer", location="/img/pt.sif", modules="cuda/12.4, x/1"
    )
    job = factories.job(
        owner,
        cluster,
        "python train.py",
        partition="gpu",
        image=image,
        gpus=2,
        gpu_type="a100",
        cpus=4,
        memory_gb=8,
        time_limit_minutes=30,
        nodes=2,
        tasks_per_node=2,
        launcher="torchrun",
        account="proj1",
        notebook_dir="",
        min_gpu_capability=Decimal("8.0"),
        params={"lr": 0.5},
    )
    assert job.describe() == JobSpec(
        id=job.pk,
        name=f"portal-{job.pk}-{job.uid}",
        comment=f"portal-job-{job.pk}-{job.uid}",
        kind="batch",
        command="python train.py",
        image=ImageSpec("apptainer", "/img/pt.sif", ("cuda/12.4", "x/1")),
        resources=Resources(
            nodes=2,
            tasks_per_node=2,
            cpus=4,
            memory_gb=8,
            gpus=2,
            gpu_type="a100",
            min_gpu_capability=Decimal("8.0"),
        ),
        partition=PartitionSpec("gpu", max_gpus_per_job=4, max_cpus_per_job=32),
        account="proj1",
        time_limit_minutes=30,
        launcher="torchrun",
        env={"PORTAL_PARAM_LR": "0.5"},
        files={PARAMS_FILE: '{"lr": 0.5}'},
    )


def test_the_cluster_default_account_charges_a_job_that_names_none(owner, cluster):
    cluster.default_account = "default-acct"
    cluster.save()
    assert factories.job(owner, cluster).describe().account == "default-acct"
    assert factories.job(owner, cluster).ref().account == "default-acct"
    assert factories.job(owner, cluster, account="mine").describe().account == "mine"


def test_a_named_gpu_type_is_described_by_the_model_the_admin_gave_it(owner, cluster):
    a100 = factories.gpu_type(cluster, "a100", "8.0", 40)
    job = factories.job(owner, cluster, partition="gpu", gpus=1, gpu_type="a100")
    assert job.describe().resources.gpu_model == ""  # none described yet
    a100.model = "A100-SXM4-40GB"
    a100.save()
    assert job.describe().resources.gpu_model == "A100-SXM4-40GB"


def test_an_arrays_members_carry_its_name_and_comment(owner, cluster):
    array = JobArray.objects.create(owner=owner, cluster=cluster, throttle=2)
    member = factories.job(owner, cluster, array=array, array_index=1)
    described = array.describe()
    assert (described.id, described.throttle) == (array.pk, 2)
    assert described.name == f"portal-a{array.pk}-{array.uid}"
    assert described.comment == f"portal-array-{array.pk}-{array.uid}"
    spec = member.describe()
    assert (spec.name, spec.comment, spec.array_index) == (described.name, described.comment, 1)


def test_a_submitted_job_is_referred_to_by_its_key_comment_and_what_it_holds(owner, cluster):
    job = factories.job(
        owner, cluster, state="running", scheduler_job_id="42", node="node2", cpus=2
    )
    ref = job.ref()
    assert ref.key == JobKey("42", job.scheduler_name) == job.scheduler_key
    assert ref.comment == f"portal-job-{job.pk}-{job.uid}"
    assert (ref.state, ref.node, ref.resources.cpus, ref.partition.name) == (
        "running",
        "node2",
        2,
        "cpu",
    )
    assert ref.submitted_at == job.created_at  # not submitted yet: when it was made
