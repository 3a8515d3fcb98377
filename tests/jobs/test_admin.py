"""The admin is the curator's tool: a 50-image catalog must be easy to manage."""

import pytest
from django.urls import reverse

from catalog.models import ContainerImage, Tag
from clusters.models import Cluster
from jobs.models import Job
from tests import factories

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:jobs_containerimage_changelist")


@pytest.fixture
def catalog(db):
    gpu, cpu = Tag.objects.create(name="gpu"), Tag.objects.create(name="cpu")
    images = []
    for n in range(50):
        image = factories.image(
            f"image-{n:02d}",
            f"Image {n:02d}",
            version=f"1.{n}",
            runtime="apptainer",
            location=f"/shared/images/image-{n:02d}.sif",
            sort_order=n,
        )
        image.tags.add(gpu if n % 2 else cpu)
        images.append(image)
    return images


@pytest.fixture
def admin_client(client, staff):
    client.force_login(staff)
    return client


def test_changelist_shows_a_50_image_catalog_on_one_page(
    admin_client, catalog, django_assert_max_num_queries
):
    with django_assert_max_num_queries(12):  # tags are prefetched, not one query per row
        response = admin_client.get(CHANGELIST)
    assert response.status_code == 200
    body = response.content.decode()
    assert "Image 00" in body and "Image 49" in body
    assert "50 container images" in body


def test_changelist_filters_by_tag_and_searches(admin_client, catalog):
    gpu = Tag.objects.get(name="gpu")
    response = admin_client.get(CHANGELIST, {"tags__id__exact": gpu.pk})
    assert response.context["cl"].result_count == 25
    response = admin_client.get(CHANGELIST, {"q": "image-07"})
    assert [i.slug for i in response.context["cl"].result_list] == ["image-07"]


def test_changelist_filters_by_state_and_runtime(admin_client, catalog):
    ContainerImage.objects.filter(slug__in=["image-01", "image-02"]).update(deprecated=True)
    response = admin_client.get(
        CHANGELIST, {"deprecated__exact": "1", "runtime__exact": "apptainer"}
    )
    assert response.context["cl"].result_count == 2


def run_action(client, action, images):
    return client.post(
        CHANGELIST,
        {"action": action, "_selected_action": [i.pk for i in images]},
        follow=True,
    )


def test_deprecate_and_enable_actions(admin_client, catalog):
    chosen = catalog[:3]
    response = run_action(admin_client, "deprecate", chosen)
    assert "Deprecated 3 image(s)" in response.content.decode()
    assert ContainerImage.objects.filter(deprecated=True).count() == 3
    run_action(admin_client, "disable", chosen)
    assert ContainerImage.objects.filter(enabled=False).count() == 3
    run_action(admin_client, "enable", chosen)
    run_action(admin_client, "undeprecate", chosen)
    assert ContainerImage.objects.offered().count() == 50


def test_duplicate_action_creates_disabled_copies(admin_client, catalog):
    response = run_action(admin_client, "duplicate", catalog[:2])
    assert "Created 2 disabled copies" in response.content.decode()
    copies = ContainerImage.objects.filter(slug__endswith="-copy")
    assert sorted(c.slug for c in copies) == ["image-00-copy", "image-01-copy"]
    assert not any(c.enabled for c in copies)
    assert {t.name for t in copies.get(slug="image-01-copy").tags.all()} == {"gpu"}


def test_add_form_shows_clear_validation_messages(admin_client):
    response = admin_client.post(
        reverse("admin:jobs_containerimage_add"),
        {
            "name": "Bad",
            "slug": "bad",
            "runtime": "apptainer",
            "location": "/images/x.sif; rm -rf ~",
            "modules": "cuda/12.4\n$(reboot)",
            "offers_notebook": "on",
            "sort_order": 1,
        },
    )
    assert response.status_code == 200  # re-rendered with errors, nothing saved
    errors = response.context["adminform"].form.errors
    assert "absolute path" in errors["location"][0]
    assert "module name" in errors["modules"][0]
    assert not ContainerImage.objects.filter(slug="bad").exists()


def test_cluster_admin_shows_partitions_and_fingerprint(admin_client, cluster):
    response = admin_client.get(reverse("admin:jobs_cluster_change", args=[cluster.pk]))
    body = response.content.decode()
    assert cluster.host_key_fingerprint in body
    assert "v100,a100" in body
    response = admin_client.get(reverse("admin:jobs_cluster_changelist"))
    assert "login.example.org:22" in response.content.decode()


def test_a_service_account_cluster_is_marked_one_trust_domain(admin_client, cluster):
    Cluster.objects.filter(pk=cluster.pk).update(login_mode="service")
    listing = admin_client.get(reverse("admin:jobs_cluster_changelist")).content.decode()
    assert "ONE TRUST DOMAIN" in listing
    form = admin_client.get(reverse("admin:jobs_cluster_change", args=[cluster.pk]))
    assert "ONE TRUST DOMAIN" in form.content.decode()  # the field's help text


def test_cluster_admin_rejects_inconsistent_partition_limits(admin_client):
    data = {
        "name": "new",
        "ssh_host": "login.example.org",
        "ssh_port": 22,
        "host_key": "SHA256:" + "C" * 43,
        "login_mode": "per_user",
        "home_root": "/home/{user}",
        "enabled": "on",
        "partitions-TOTAL_FORMS": 1,
        "partitions-INITIAL_FORMS": 0,
        "partitions-0-name": "short",
        "partitions-0-max_gpus_per_job": 0,
        "partitions-0-max_cpus_per_job": 4,
        "partitions-0-max_memory_gb": 8,
        "partitions-0-default_time_minutes": 120,
        "partitions-0-max_time_minutes": 30,
    }
    response = admin_client.post(reverse("admin:jobs_cluster_add"), data)
    assert response.status_code == 200
    assert "longer than the maximum" in response.content.decode()
    assert not Cluster.objects.filter(name="new").exists()


def test_cluster_account_admin_never_shows_the_private_key(admin_client, cluster, owner):
    from clusters.models import ClusterAccount

    account = ClusterAccount(
        cluster=cluster, user=owner, username="alice", public_key="ssh-ed25519 AAAApub"
    )
    account.set_private_key("PRIVATE-KEY-MATERIAL")
    account.save()
    body = admin_client.get(
        reverse("admin:jobs_clusteraccount_change", args=[account.pk])
    ).content.decode()
    assert "ssh-ed25519 AAAApub" in body
    assert "PRIVATE-KEY-MATERIAL" not in body and account.private_key_encrypted not in body


def test_non_staff_cannot_use_the_admin(client, owner):
    client.force_login(owner)
    response = client.get(CHANGELIST)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_an_admin_makes_one_cluster_the_default(admin_client):
    first, second = factories.cluster("alpha"), factories.cluster("beta")
    changelist = reverse("admin:jobs_cluster_changelist")
    for chosen in (first, second):
        response = admin_client.post(
            changelist,
            {"action": "make_default", "_selected_action": [chosen.pk]},
            follow=True,
        )
        said = [str(m) for m in response.context["messages"]]
        assert f"{chosen.name} is the default cluster" in " ".join(said), said
        assert list(Cluster.objects.filter(is_default=True)) == [chosen]
    response = admin_client.post(
        changelist, {"action": "make_default", "_selected_action": [first.pk, second.pk]}
    )
    assert Cluster.objects.get(is_default=True) == second  # two at once: refused


def test_a_job_reads_part_by_part_with_every_field_once(admin_client, owner, cluster):
    """Job composes its parts (request, run, notes): the admin shows who and where first,
    then each part, and leaves out no field."""
    job = factories.job(owner, cluster)
    response = admin_client.get(reverse("admin:jobs_job_change", args=[job.pk]))
    assert response.status_code == 200
    sets = response.context["adminform"].fieldsets
    assert [title for title, _ in sets] == [None, "Request", "Run", "Notes and parameters"]
    shown = [name for _, options in sets for name in options["fields"]]
    assert shown[:3] == ["id", "uid", "owner"]
    assert sorted(shown) == sorted(f.name for f in Job._meta.fields)
    assert job.uid in response.content.decode()
