"""One set of defaults for the launch form, the API and the CLI: the partition's, for the
chosen image (GPUs only where the image and the partition have them)."""

import pytest
import yaml
from django.core.exceptions import ValidationError
from rest_framework.test import APIClient

from catalog.models import ContainerImage
from clusters.models import Cluster, Partition
from jobs.launch import launch_initial
from jobs.models import Job
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


@pytest.fixture
def first_by_name(catalog, owner):
    """A second cluster the owner can use, before testcluster by name (as `make demo`'s
    condorpool comes before devcluster)."""
    cluster = factories.cluster("acluster", scheduler="htcondor")
    factories.partition(cluster, "cpu", is_default=True)
    factories.account(cluster, owner, "alice")
    return cluster


def launched_to(api, **payload) -> str:
    response = api.post("/api/v1/jobs/", {"command": "echo hi", **payload}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["cluster"]


def test_a_request_without_a_cluster_goes_to_the_admins_default(api, first_by_name, catalog):
    assert launched_to(api) == "acluster"  # no default, no job yet: the first by name
    catalog.mark_default()
    assert launched_to(api) == "testcluster"
    # A partition alone is looked up on that cluster.
    assert launched_to(api, partition="gpu") == "testcluster"
    assert launched_to(api, cluster="acluster") == "acluster"  # named: as named
    assert launched_to(api) == "testcluster"  # the admin's default outranks the last used


def test_without_a_default_a_request_goes_to_the_users_last_cluster(api, first_by_name):
    assert launched_to(api, cluster="testcluster") == "testcluster"
    assert launched_to(api) == "testcluster"
    assert launched_to(api, cluster="acluster") == "acluster"
    assert launched_to(api) == "acluster"
    assert not Cluster.objects.filter(is_default=True).exists()


def test_the_schema_says_where_a_request_without_a_cluster_goes(api):
    schema = yaml.safe_load(APIClient().get("/api/schema/").content)
    text = str(schema["components"]["schemas"])
    assert "Omitted: the default cluster an administrator marked" in text
    assert "most recent job" in text and "README" not in text
