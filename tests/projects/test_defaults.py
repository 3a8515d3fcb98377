"""A project's managers set the role of the account's users from its page; its members
who are not managers cannot; the change is audited and counts at the next request."""

import pytest
from django.test import Client

from identity.audit.models import AuditEvent
from projects.models import Project
from tests import factories

pytestmark = pytest.mark.django_db


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_manager_changes_the_members_role_and_a_member_cannot(cluster, owner):
    colleague, manager = factories.user("colleague"), factories.user("manager")
    vision = factories.project(cluster, "vision", [owner, colleague], coordinators=[manager])
    run = factories.job(owner, cluster, "train", state="completed", project=vision)
    reader = signed_in(colleague)
    assert reader.get(f"/jobs/{run.pk}/").status_code == 200  # a viewer
    assert b"data-project-defaults" not in reader.get(f"/projects/{vision.pk}/").content
    assert (
        reader.post(f"/projects/{vision.pk}/defaults/", {"default_role": "member"}).status_code
        == 404
    )
    boss = signed_in(manager)
    assert b"data-project-defaults" in boss.get(f"/projects/{vision.pk}/").content
    page = boss.post(f"/projects/{vision.pk}/defaults/", {"default_role": "manager"}, follow=True)
    assert b"Choose one of the roles offered." in page.content  # managers come from coordinators
    boss.post(f"/projects/{vision.pk}/defaults/", {"default_role": "none"})
    assert Project.objects.get(pk=vision.pk).default_role == "none"
    assert reader.get(f"/jobs/{run.pk}/").status_code == 404  # at once
    (row,) = AuditEvent.objects.filter(action="project_defaults")
    assert (row.username, row.target, row.message) == (
        "manager",
        "project vision",
        "members' role viewer -> none",
    )
