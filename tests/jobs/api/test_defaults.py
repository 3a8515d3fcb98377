"""One set of defaults for the launch form, the API and the CLI: the partition's, for the
chosen image (GPUs only where the image and the partition have them)."""

import pytest
from django.core.exceptions import ValidationError

from jobs.launch import launch_initial
from jobs.models import ContainerImage, Job, Partition
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(owner, catalog):
    factories.image("cpu-only", "CPU only", supports_gpu=False, sort_order=5)
    return factories.api_client(owner)


RESOURCES = ("gpus", "gpu_type", "cpus", "memory_gb", "time_limit")


def created(api, **payload) -> dict:
    response = api.post("/api/v1/jobs/", {"command": "echo hi", **payload}, format="json")
    assert response.status_code == 201, response.content
    return {k: response.json()[k] for k in RESOURCES}


def as_api(defaults: dict) -> dict:
    return {("time_limit" if k == "time_limit_minutes" else k): v for k, v in defaults.items()}


@pytest.mark.parametrize(
    ("container", "partition", "gpus"),
    [
        (None, "cpu", 0),  # `portal submit --partition cpu -- 'echo hi'`
        (None, "gpu", 1),
        ("python", "gpu", 1),  # a GPU-capable image gets the partition's default GPU
        ("cpu-only", "gpu", 0),  # never a GPU type without GPUs
        ("python", "cpu", 0),
    ],
)
def test_the_api_fills_in_the_partitions_defaults_for_the_image(api, container, partition, gpus):
    payload = {"partition": partition} | ({"container": container} if container else {})
    got = created(api, **payload)
    image = ContainerImage.objects.get(slug=container or "python")  # the catalog's first
    assert got == as_api(Partition.objects.get(name=partition).job_defaults(image))
    assert got["gpus"] == gpus and got["gpu_type"] == ""  # any type unless one is asked for
    assert got["cpus"] == 2 and got["memory_gb"] == 4  # modest: several fit a node


def test_the_form_starts_from_the_same_defaults(api, owner):
    initial = launch_initial(owner)
    image = ContainerImage.objects.get(slug=initial["image"])
    partition = Partition.objects.get(pk=initial["partition"])
    expected = partition.job_defaults(image)
    assert {k: initial[k] for k in expected} == expected
    assert (image.slug, initial["gpus"], initial["gpu_type"]) == ("python", 1, "")
    assert as_api(expected) == created(api, container="python")
    assert as_api(expected) == created(api)


def test_what_the_user_says_wins_and_gpu_fields_follow_each_other(api):
    assert created(api, partition="cpu", gpus=0)["gpu_type"] == ""
    assert created(api, partition="gpu", gpus=2)["gpu_type"] == ""  # any type
    assert created(api, partition="gpu", gpu_type="a100")["gpus"] == 1
    assert created(api, partition="gpu", gpus=0, gpu_type="a100")["gpu_type"] == ""
    got = created(api, partition="gpu", cpus=8, memory_gb=64, time_limit=5)
    assert (got["cpus"], got["memory_gb"], got["time_limit"]) == (8, 64, 5)


def test_the_form_accepts_a_gpu_type_left_selected_with_no_gpus(client, owner, catalog):
    """The page's GPU-type list keeps its first type for a CPU-only image: not a reason to refuse."""
    gpu = catalog.partitions.get(name="gpu")
    client.force_login(owner)
    response = client.post(
        "/launch/",
        {
            "image": "python",
            "kind": "batch",
            "cluster": "testcluster",
            "partition": gpu.pk,
            "gpu_type": "v100",
            "gpus": 0,
            "cpus": 2,
            "memory_gb": 4,
            "time_limit_minutes": 60,
            "work_dir_kind": "home",
            "command": "echo hi",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Job.objects.values_list("gpus", "gpu_type").get() == (0, "")


def test_an_admin_cannot_set_defaults_above_the_limits(cluster):
    p = cluster.partitions.get(name="cpu")
    p.default_cpus, p.default_memory_gb = 9, 17
    with pytest.raises(ValidationError) as raised:
        p.full_clean()
    assert set(raised.value.message_dict) == {"default_cpus", "default_memory_gb"}
