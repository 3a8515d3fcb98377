"""GPUs chosen by compute capability and memory: matching a partition's described types,
the --gres/--constraint it becomes, refusals naming the closest alternatives, discovery
from sinfo (captured from the dev cluster's two fake GPU types)."""

from decimal import Decimal
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from clusters import workdir
from clusters.models import GpuType, Partition
from clusters.models.gpus import NoGpuMatches, choose, record_discovery, seen_types
from schedulers.slurm import scripts, sinfo
from tests import factories

pytestmark = pytest.mark.django_db

SINFO = (
    Path(__file__).parents[1] / "schedulers" / "slurm" / "slurm_output" / "sinfo_two_gpu_types.json"
)


@pytest.fixture
def described(cluster):
    """testcluster's gpu partition offers v100 and a100; a third partition has an h100."""
    factories.gpu_type(cluster, "v100", "7.0", 32, feature="v100")
    factories.gpu_type(cluster, "a100", "8.0", 80, feature="a100")
    factories.gpu_type(cluster, "h100", "9.0", 80)
    factories.partition(cluster, "hopper", gpu_types="h100", max_gpus_per_job=4)
    return cluster


def gpu(cluster) -> Partition:
    return cluster.partitions.get(name="gpu")


def test_one_matching_type_becomes_the_gres_type(described):
    choice = choose(gpu(described), list(described.gpu_types.all()), Decimal("8.0"), None)
    assert (choice.types, choice.gres_type, choice.constraint) == (("a100",), "a100", "")


def test_several_matching_types_become_an_or_of_their_features(described):
    choice = choose(gpu(described), list(described.gpu_types.all()), None, 20)
    assert (choice.types, choice.gres_type, choice.constraint) == (
        ("v100", "a100"),
        "",
        "v100|a100",
    )


def test_types_as_features_partition_ors_the_type_names(described):
    Partition.objects.filter(name="gpu").update(gpu_type_as_constraint=True)
    GpuType.objects.update(feature="")
    choice = choose(gpu(described), list(described.gpu_types.all()), None, 20)
    assert choice.constraint == "v100|a100" and choice.gres_type == ""


def test_without_features_the_smallest_matching_type_is_asked_for(described):
    GpuType.objects.update(feature="")
    choice = choose(gpu(described), list(described.gpu_types.all()), Decimal("7.0"), None)
    assert choice.gres_type == "v100" and not choice.constraint


def test_no_match_names_the_closest_here_and_the_partition_that_has_one(described):
    with pytest.raises(NoGpuMatches) as raised:
        choose(gpu(described), list(described.gpu_types.all()), Decimal("9.0"), None)
    assert str(raised.value) == (
        "No GPU on partition gpu has compute capability ≥ 9.0. Closest: a100 (compute "
        "capability 8.0, 80 GB); v100 (compute capability 7.0, 32 GB). Partition hopper has h100."
    )


def job(cluster, save=False, **fields):
    values = {"partition": "gpu", "gpus": 2} | fields
    return factories.job(factories.user("owner"), cluster, save=save, **values)


def test_a_job_asking_by_capability_lands_on_the_matching_type(described):
    made = job(described, min_gpu_capability=Decimal("8.0"))
    made.full_clean()
    made.save()
    assert (made.gpu_type, made.gpu_constraint) == ("a100", "")
    assert "#SBATCH --gres=gpu:a100:2" in scripts.render(made.describe(), "/w")


def test_a_job_asking_by_memory_gets_any_of_the_types_with_a_constraint(described):
    made = job(described, min_gpu_memory_gb=20)
    made.full_clean()
    made.save()
    lines = scripts.render(made.describe(), "/w").splitlines()
    assert "#SBATCH --gres=gpu:2" in lines and "#SBATCH --constraint=v100|a100" in lines


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"min_gpu_memory_gb": 100}, "min_gpu_memory_gb", "No GPU on partition gpu has ≥ 100 GB"),
        (
            {"min_gpu_capability": Decimal("8.0"), "gpu_type": "v100"},
            "min_gpu_capability",
            "v100 has compute capability 7.0",
        ),
        (
            {"min_gpu_capability": Decimal("8.0"), "gpus": 0},
            "min_gpu_capability",
            "Choose a GPU count",
        ),
    ],
)
def test_impossible_gpu_requests_are_refused_before_submission(described, fields, field, words):
    with pytest.raises(ValidationError) as raised:
        job(described, **fields).full_clean()
    assert words in " ".join(raised.value.message_dict[field])


def test_a_hostile_constraint_is_never_rendered(described):
    made = job(described, save=True, gpu_constraint="a100|x;touch /tmp/p")
    with pytest.raises(workdir.ScriptError):
        scripts.render(made.describe(), "/w")


def test_memory_per_gpu_where_the_partition_wants_it(described):
    Partition.objects.filter(name="gpu").update(mem_per_gpu=True)
    lines = scripts.render(job(described, save=True, memory_gb=15).describe(), "/w").splitlines()
    assert "#SBATCH --mem-per-gpu=8G" in lines and not [
        x for x in lines if x.startswith("#SBATCH --mem=")
    ]
    cpu_only = scripts.render(job(described, save=True, gpus=0, memory_gb=15).describe(), "/w")
    assert "#SBATCH --mem=15G" in cpu_only


def test_discovery_from_sinfo_describes_known_cards_and_offers_them(cluster):
    nodes = sinfo.parse_sinfo_json(SINFO.read_text())
    seen = seen_types(nodes)
    assert {n: (sorted(s.nodes), sorted(s.features)) for n, s in seen.items()} == {
        "v100": (["node1"], ["v100"]),
        "a100": (["node2"], ["a100"]),
    }
    Partition.objects.filter(cluster=cluster, name="gpu").update(gpu_types="")
    report = record_discovery(cluster, nodes)
    assert {
        (t.name, str(t.compute_capability), t.memory_gb, t.feature) for t in GpuType.objects.all()
    } == {
        ("v100", "7.0", 32, "v100"),
        ("a100", "8.0", 80, "a100"),
    }
    assert gpu(cluster).gpu_type_list == ["a100", "v100"]
    assert any("check the memory of your cards" in line for line in report)
    # Run again, it changes nothing and says the types are described.
    assert all("already described" in line for line in record_discovery(cluster, nodes))
