from functools import partial

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError
from django.test import override_settings

from catalog.models import ContainerImage, Tag
from clusters.models import Cluster, ClusterAccount, Partition
from common import crypto
from common.validators import host_key_fingerprint
from jobs.models import Job, JobEvent
from tests import factories

pytestmark = pytest.mark.django_db

SHELL_NASTIES = ["a;id", "$(id)", "`id`", "a b", "a|b", "a&&b", "a\nb", "a>b", "'quoted'", "a*"]


def errors_of(obj) -> dict:
    with pytest.raises(ValidationError) as exc:
        obj.full_clean()
    return exc.value.message_dict


# --- ContainerImage -------------------------------------------------------------


@pytest.mark.parametrize(
    "location",
    [
        "/shared/images/pytorch-2.5.sif",
        "docker://nvcr.io/nvidia/pytorch:24.10-py3",
        "oras://ghcr.io/org/image:1.0",
        "library://sylabs/default/alpine:3.19",
        "docker://ghcr.io/org/img@sha256:abcdef0123",
    ],
)
def test_image_accepts_absolute_paths_and_known_uri_schemes(location):
    ContainerImage(name="X", slug="x", runtime="apptainer", location=location).full_clean()


@pytest.mark.parametrize(
    "location",
    ["images/x.sif", "http://example.org/x.sif", "shub://x/y", "/a/../etc/passwd", "~/x.sif"]
    + ["/img/" + bad for bad in SHELL_NASTIES],
)
def test_image_rejects_relative_paths_unknown_schemes_and_shell_characters(location):
    errors = errors_of(ContainerImage(name="X", slug="x", runtime="apptainer", location=location))
    assert "location" in errors
    assert "absolute path" in errors["location"][0]


@pytest.mark.parametrize(
    "modules", ["cuda/12.4", "cuda/12.4\npython/3.11.7", "gcc+ompi/4.1, cudnn"]
)
def test_image_accepts_module_names(modules):
    ContainerImage(name="X", slug="x", runtime="none", modules=modules).full_clean()


@pytest.mark.parametrize("bad", ["cuda;id", "$(id)", "cuda/../x", "/abs", "-rf", "cuda/12.4|sh"])
def test_image_rejects_unsafe_module_names(bad):
    errors = errors_of(ContainerImage(name="X", slug="x", runtime="none", modules=bad))
    assert "module name" in errors["modules"][0]


def test_runtime_none_must_not_have_a_location():
    errors = errors_of(ContainerImage(name="X", slug="x", runtime="none", location="/x.sif"))
    assert "leave the location empty" in errors["location"][0]


def test_container_runtime_needs_a_location():
    errors = errors_of(ContainerImage(name="X", slug="x", runtime="singularity", location=""))
    assert "needs an image location" in errors["location"][0]


def test_podman_needs_a_docker_uri():
    errors = errors_of(ContainerImage(name="X", slug="x", runtime="podman", location="/x.sif"))
    assert "docker://" in errors["location"][0]


def test_image_must_offer_at_least_one_kind():
    image = ContainerImage(
        name="X", slug="x", runtime="none", offers_notebook=False, offers_batch=False
    )
    assert "offers_batch" in errors_of(image)


def test_offered_excludes_disabled_and_lists_deprecated_last():
    factories.image("a", "A", sort_order=5)
    factories.image("b", "B", enabled=False)
    factories.image("c", "C", deprecated=True, sort_order=1)
    factories.image("d", "D", sort_order=9)
    assert [i.slug for i in ContainerImage.objects.offered()] == ["a", "d", "c"]


def test_duplicate_makes_a_disabled_copy_with_tags_and_a_free_slug(image):
    image.tags.set([Tag.objects.create(name="gpu"), Tag.objects.create(name="pytorch")])
    first = image.duplicate()
    second = image.duplicate()
    assert (first.slug, second.slug) == ("pytorch-copy", "pytorch-copy-2")
    assert not first.enabled and image.enabled
    assert sorted(t.name for t in second.tags.all()) == ["gpu", "pytorch"]
    assert first.location == image.location and first.pk != image.pk


# --- Cluster and Partition ----------------------------------------------------------


unsaved_cluster = partial(factories.cluster, "c1", save=False)


def test_cluster_accepts_public_key_or_fingerprint():
    unsaved_cluster().full_clean()
    unsaved_cluster(host_key="SHA256:" + "A" * 43).full_clean()


@pytest.mark.parametrize("key", ["AAAA", "ssh-foo AAAA", "SHA256:short", "ssh-ed25519 not*base64"])
def test_cluster_rejects_a_malformed_host_key(key):
    assert "host_key" in errors_of(unsaved_cluster(host_key=key))


def test_host_key_fingerprint_matches_ssh_keygen():
    # ssh-keygen -lf on this key prints this fingerprint.
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOqmCr0ke0UTgwV9vPwNDnqf4mr8v07WgMJOuFbxZuBs"
    assert host_key_fingerprint(key) == unsaved_cluster(host_key=key).host_key_fingerprint
    assert host_key_fingerprint(key).startswith("SHA256:") and len(host_key_fingerprint(key)) == 50


@pytest.mark.parametrize("host", ["login;id", "a b", "$(id)", "-oProxyCommand=x"])
def test_cluster_rejects_unsafe_hosts(host):
    assert "ssh_host" in errors_of(unsaved_cluster(ssh_host=host))


@pytest.mark.parametrize("root", ["/home/{user}", "/scratch/{user}/work"])
def test_work_dir_roots_accept_absolute_templates(root):
    unsaved_cluster(home_root=root, scratch_root=root).full_clean()


def test_one_folder_for_everyone_only_on_a_service_account_cluster():
    unsaved_cluster(login_mode="service", home_root="/data", scratch_root="/data").full_clean()
    errors = errors_of(unsaved_cluster(home_root="/data", scratch_root="/scratch/shared"))
    assert set(errors) == {"home_root", "scratch_root"}
    assert "must contain {user}" in errors["home_root"][0]


def test_a_per_user_cluster_saved_without_user_in_a_root_gives_no_work_directory(cluster):
    cluster.scratch_root = "/scratch/shared"  # saved around clean(), e.g. before the rule
    with pytest.raises(ValidationError, match="has no {user}"):
        cluster.work_dir_root("scratch", "alice")


@pytest.mark.parametrize(
    "root", ["~/x", "home/{user}", "/x/{uid}", "/x/$USER", "/x/{user};id", "/x/../y"]
)
def test_work_dir_roots_reject_relative_unknown_placeholders_and_shell(root):
    assert "home_root" in errors_of(unsaved_cluster(home_root=root))


@pytest.mark.parametrize("account", ["proj;id", "a b", "$(id)", "-x"])
def test_default_account_is_a_slurm_name(account):
    assert "default_account" in errors_of(unsaved_cluster(default_account=account))


def test_work_dir_root_substitutes_the_cluster_user(cluster):
    assert cluster.work_dir_root("home", "alice") == "/home/alice"
    assert cluster.work_dir_root("scratch", "alice") == "/scratch/alice"


def test_partition_default_walltime_cannot_exceed_max(cluster):
    p = Partition(cluster=cluster, name="short", max_time_minutes=30, default_time_minutes=60)
    assert "longer than the maximum" in errors_of(p)["default_time_minutes"][0]


def test_partition_gpu_types_and_gpu_limit_go_together(cluster):
    assert "gpu_types" in errors_of(Partition(cluster=cluster, name="g", max_gpus_per_job=2))
    assert "max_gpus_per_job" in errors_of(Partition(cluster=cluster, name="g", gpu_types="a100"))
    assert "gpu_types" in errors_of(
        Partition(cluster=cluster, name="g", gpu_types="a100;id", max_gpus_per_job=1)
    )


def test_partition_limits_must_be_positive(cluster):
    errors = errors_of(Partition(cluster=cluster, name="z", max_cpus_per_job=0, max_memory_gb=0))
    assert {"max_cpus_per_job", "max_memory_gb"} <= set(errors)


def test_only_one_default_partition_per_cluster(cluster):
    with pytest.raises(IntegrityError):
        Partition.objects.create(cluster=cluster, name="other", is_default=True)


def test_default_partition(cluster):
    assert cluster.default_partition().name == "gpu"


# --- ClusterAccount and encryption -----------------------------------------------------


def test_private_key_is_encrypted_at_rest(cluster, owner):
    account = ClusterAccount(cluster=cluster, user=owner, username="alice")
    account.set_private_key("-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n")
    account.save()
    stored = ClusterAccount.objects.values_list("private_key_encrypted", flat=True).get()
    assert "secret" not in stored
    assert ClusterAccount.objects.get().private_key().endswith("secret\n")


def test_encryption_keys_rotate(cluster, owner):
    old, new = crypto.generate_key(), crypto.generate_key()
    with override_settings(PORTAL_ENCRYPTION_KEYS=[old]):
        token = crypto.encrypt("key material")
    with override_settings(PORTAL_ENCRYPTION_KEYS=[new, old]):
        assert crypto.decrypt(token) == "key material"
        rotated = crypto.rotate(token)
    with override_settings(PORTAL_ENCRYPTION_KEYS=[new]):
        assert crypto.decrypt(rotated) == "key material"
        with pytest.raises(Exception, match="cannot be decrypted"):
            crypto.decrypt(token)


def test_account_for_user_follows_the_cluster_login_mode(cluster, owner, outsider):
    service = factories.account(cluster, None, "svc")
    personal = factories.account(cluster, owner, "alice")
    assert ClusterAccount.for_user(cluster, owner) == personal
    assert ClusterAccount.for_user(cluster, outsider) is None
    cluster.login_mode = Cluster.LoginMode.SERVICE
    assert ClusterAccount.for_user(cluster, outsider) == service


def test_one_service_account_per_cluster(cluster):
    factories.account(cluster, None, "svc")
    with pytest.raises(IntegrityError):
        ClusterAccount.objects.create(cluster=cluster, user=None, username="svc2")


@pytest.mark.parametrize("name", ["Alice", "a;id", "a b", "$(id)", "-a"])
def test_cluster_username_is_a_posix_name(cluster, name):
    assert "username" in errors_of(ClusterAccount(cluster=cluster, username=name))


# --- Job -------------------------------------------------------------------------------


# Within the gpu partition's limits; each test changes one thing.
unsaved_job = partial(
    factories.job,
    command="python train.py",
    partition="gpu",
    gpus=1,
    gpu_type="v100",
    memory_gb=4,
    time_limit_minutes=60,
    save=False,
)


def test_job_within_limits_is_valid(owner, cluster, image):
    unsaved_job(owner, cluster, image=image).full_clean()


@pytest.mark.parametrize(
    "overrides, field, words",
    [
        ({"gpus": 5}, "gpus", "at most 4 GPU"),
        ({"gpu_type": "h100"}, "gpu_type", "offers GPU types: v100, a100"),
        ({"cpus": 33}, "cpus", "at most 32 CPUs"),
        ({"memory_gb": 129}, "memory_gb", "at most 128 GB"),
        ({"time_limit_minutes": 1441}, "time_limit_minutes", "at most 1440 minutes"),
        ({"command": "  "}, "command", "needs a command"),
        ({"account": "proj;id"}, "account", "letters, digits"),
    ],
)
def test_job_outside_partition_limits_gets_a_field_message(
    owner, cluster, image, overrides, field, words
):
    errors = errors_of(unsaved_job(owner, cluster, image=image, **overrides))
    assert words in " ".join(errors[field])


def test_job_on_cpu_partition_cannot_ask_for_gpus(owner, cluster, image):
    job = unsaved_job(
        owner, cluster, image=image, partition=cluster.partitions.get(name="cpu"), gpu_type=""
    )
    assert "has no GPUs" in errors_of(job)["gpus"][0]


def test_job_cannot_use_a_disabled_image_but_may_use_a_deprecated_one(owner, cluster, image):
    image.deprecated = True
    image.save()
    unsaved_job(owner, cluster, image=image).full_clean()  # still runs
    assert image.deprecation_text.endswith(
        "is deprecated: it still runs, but may be removed; prefer a newer image."
    )
    image.enabled = False
    image.save()
    assert "no longer offered" in errors_of(unsaved_job(owner, cluster, image=image))["image"][0]


def test_job_kind_must_be_offered_by_the_image(owner, cluster, image):
    image.offers_notebook = False
    image.save()
    errors = errors_of(unsaved_job(owner, cluster, image=image, kind=Job.Kind.NOTEBOOK))
    assert "does not offer notebook" in errors["kind"][0]


def test_job_partition_must_belong_to_the_cluster(owner, cluster, image):
    other = factories.cluster("other", ssh_host="h", host_key="SHA256:" + "B" * 43)
    job = unsaved_job(owner, cluster, image=image, gpus=0, gpu_type="")
    job.cluster = other
    errors = errors_of(job)
    assert "is not on cluster other" in errors["partition"][0]


def test_transition_writes_an_event_and_sets_timestamps(owner, cluster, image):
    job = unsaved_job(owner, cluster, image=image)
    job.save()
    assert job.transition(Job.State.PENDING, scheduler_job_id="42")
    assert job.transition(Job.State.RUNNING, node="gpu01")
    assert job.transition(Job.State.COMPLETED, exit_code=0)
    job.refresh_from_db()
    assert (job.state, job.scheduler_job_id, job.node, job.exit_code) == (
        "completed",
        "42",
        "gpu01",
        0,
    )
    assert job.started_at and job.ended_at
    assert [(e.from_state, e.to_state) for e in job.events.all()] == [
        ("queued", "pending"),
        ("pending", "running"),
        ("running", "completed"),
    ]


def test_transition_refuses_when_another_worker_moved_the_job_first(owner, cluster, image):
    job = unsaved_job(owner, cluster, image=image)
    job.save()
    stale = Job.objects.get(pk=job.pk)
    assert job.transition(Job.State.CANCELLED)
    # A stale copy still thinks the job is queued; the conditional update sees the truth.
    assert not stale.transition(Job.State.PENDING, expect=(Job.State.QUEUED,))
    assert Job.objects.get(pk=job.pk).state == "cancelled"
    assert JobEvent.objects.filter(job=job).count() == 1


def test_final_states_are_final_by_default(owner, cluster, image):
    job = unsaved_job(owner, cluster, image=image)
    job.save()
    job.transition(Job.State.FAILED, exit_code=3)
    assert not job.transition(Job.State.RUNNING)


def test_for_user_shows_own_jobs_and_everything_to_staff(owner, outsider, staff, cluster, image):
    mine = unsaved_job(owner, cluster, image=image)
    mine.save()
    assert list(Job.objects.for_user(owner)) == [mine]
    assert list(Job.objects.for_user(outsider)) == []
    assert list(Job.objects.for_user(staff)) == [mine]
    assert list(Job.objects.active()) == [mine]


@pytest.mark.parametrize(
    "layout, field, text",
    [
        ({"nodes": 3}, "nodes", "Partition gpu allows at most 2 node(s) per job."),
        ({"gpus": 3}, "gpus", "A node of partition gpu has at most 2 GPU(s). For 3 GPUs, ask"),
        ({"nodes": 2, "gpus": 3}, "gpus", "A node of partition gpu has at most 2 GPU(s)."),
        ({"nodes": 2, "tasks_per_node": 5, "cpus": 2}, "cpus", "5 tasks × 2 CPUs is 10"),
        (
            {"launcher": "torchrun", "gpus": 2, "tasks_per_node": 1},
            "tasks_per_node",
            "as many tasks per node as GPUs per node (2)",
        ),
        (
            {"launcher": "mpi", "gpus": 2, "tasks_per_node": 3},
            "tasks_per_node",
            "divide them evenly",
        ),
        ({"kind": "notebook", "nodes": 2, "command": ""}, "nodes", "one process on one node"),
    ],
)
def test_a_layout_the_partition_cannot_hold_is_refused_with_the_way_out(
    owner, cluster, layout, field, text
):
    Partition.objects.filter(cluster=cluster, name="gpu").update(
        max_nodes=2, max_gpus_per_node=2, max_cpus_per_job=8
    )
    fields = {"gpus": 1, "gpu_type": "", "cpus": 1, **layout}
    job = factories.job(owner, cluster, partition="gpu", save=False, **fields)
    assert text in errors_of(job)[field][0]


@pytest.mark.parametrize(
    "layout",
    [
        {"nodes": 2, "tasks_per_node": 2, "gpus": 2, "launcher": "mpi"},
        {"nodes": 2, "tasks_per_node": 1, "gpus": 2, "launcher": "mpi"},  # one rank, 2 GPUs
        {"nodes": 2, "tasks_per_node": 2, "gpus": 2, "launcher": "torchrun"},
        {"nodes": 2, "tasks_per_node": 4, "gpus": 0, "launcher": "none"},
    ],
)
def test_a_layout_that_fits_is_accepted(owner, cluster, layout):
    Partition.objects.filter(cluster=cluster, name="gpu").update(
        max_nodes=2, max_gpus_per_node=2, max_cpus_per_job=8
    )
    job = factories.job(owner, cluster, partition="gpu", save=False, cpus=1, **layout)
    job.full_clean()
    assert job.world_size == layout["nodes"] * layout["tasks_per_node"]
