"""Admin actions declare the permission they need: a staff account that may only view
clusters, images and cluster accounts can neither see nor run the actions that re-pin a
host key, replace a key pair or change the catalog (issue #30)."""

import pytest
from django.urls import reverse

from catalog.models import ContainerImage
from clusters import ssh
from jobs.admin import ClusterAdmin
from tests import factories

pytestmark = pytest.mark.django_db

VIEW_ONLY = ("jobs.view_cluster", "jobs.view_containerimage", "jobs.view_clusteraccount")
NEW_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f"


@pytest.fixture
def fetched(monkeypatch):
    """Each host key the pin action would fetch (none must be, for a viewer)."""
    calls: list[tuple] = []

    def fetch(host, port):
        calls.append((host, port))
        return NEW_KEY

    monkeypatch.setattr(ssh, "fetch_host_key", fetch)
    return calls


def _post(client, model: str, action: str, pks):
    return client.post(
        reverse(f"admin:jobs_{model}_changelist"),
        {"action": action, "_selected_action": list(pks)},
        follow=True,
    )


@pytest.fixture
def viewer(client):
    factories.staff_user("viewer", "viewer-pass-123", *VIEW_ONLY)
    client.login(username="viewer", password="viewer-pass-123")
    return client


def test_a_viewer_cannot_pin_a_host_key(viewer, cluster, fetched):
    before = cluster.host_key
    response = viewer.get(reverse("admin:jobs_cluster_changelist"))
    assert response.status_code == 200  # the viewer sees the list ...
    assert "pin_presented_host_key" not in response.content.decode()  # ... not the action
    _post(viewer, "cluster", "pin_presented_host_key", [cluster.pk])
    _post(viewer, "cluster", "discover_gpu_types", [cluster.pk])
    cluster.refresh_from_db()
    assert cluster.host_key == before
    assert fetched == []


def test_a_viewer_cannot_replace_a_key_pair(viewer, cluster, owner):
    account = factories.account(cluster, owner, "alice")
    _post(viewer, "clusteraccount", "generate_key_pair", [account.pk])
    account.refresh_from_db()
    assert account.public_key == "" and account.private_key_encrypted == ""


def test_a_viewer_cannot_change_the_catalog(viewer):
    image = factories.image("python", "Python")
    for action in ("disable", "deprecate", "duplicate", "check_on_clusters"):
        _post(viewer, "containerimage", action, [image.pk])
    image.refresh_from_db()
    assert image.enabled and not image.deprecated
    assert ContainerImage.objects.count() == 1


def test_an_editor_still_can(client, cluster, fetched):
    factories.staff_user("editor", "editor-pass-123", "jobs.view_cluster", "jobs.change_cluster")
    client.login(username="editor", password="editor-pass-123")
    _post(client, "cluster", "pin_presented_host_key", [cluster.pk])
    cluster.refresh_from_db()
    assert cluster.host_key == NEW_KEY and len(fetched) == 1


def test_every_custom_action_declares_its_permission():
    from django.contrib import admin

    for model_admin in admin.site._registry.values():
        for name in model_admin.actions or ():
            func = getattr(model_admin, name) if isinstance(name, str) else name
            assert getattr(func, "allowed_permissions", None), (type(model_admin), name)
    assert list(ClusterAdmin.pin_presented_host_key.allowed_permissions) == ["change"]
