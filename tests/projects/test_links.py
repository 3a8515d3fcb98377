"""Read links for people outside a project (projects/links.py): off by default; on, the
owner (or a manager, or staff) hands out a run, a comparison or an experiment for a few
days; whoever opens it reads exactly those runs, never acts on them, until it expires or
is revoked; every step is an audit row."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from experiments.models import Trial
from identity.audit.models import AuditEvent
from projects import access
from projects.models import Membership, ReadLink
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(cluster, owner):
    colleague = factories.user("colleague")
    manager = factories.user("manager")
    stranger = factories.user("stranger")
    vision = factories.project(cluster, "vision", [owner, colleague], coordinators=[manager])
    return vision, colleague, manager, stranger


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def run(owner, cluster, project, **fields):
    return factories.job(owner, cluster, "train", state="completed", project=project, **fields)


def make_link(user, **form) -> tuple[Client, str]:
    """POST /links/new/; returns the client and the new link's address (shown once)."""
    client = signed_in(user)
    page = client.post("/links/new/", form, follow=True)
    assert page.status_code == 200
    made = page.context.get("made")
    return client, made["url"] if made else page.content.decode()


def test_off_by_default_nothing_is_offered_and_nothing_opens(people, owner, cluster):
    vision, _, _, stranger = people
    job = run(owner, cluster, vision)
    client = signed_in(owner)
    assert b"data-read-link-form" not in client.get(f"/jobs/{job.pk}/").content
    assert client.get("/links/").status_code == 404
    assert client.post("/links/new/", {"job": job.pk}).status_code == 404
    assert signed_in(stranger).get("/links/anything/").status_code == 404
    assert access.linked(stranger) == access.NO_LINKS


def test_a_run_link_lets_a_stranger_read_that_run_only_until_it_is_revoked(
    people, owner, cluster, settings
):
    settings.PORTAL_READ_LINKS = True
    vision, _, _, stranger = people
    shown, other = run(owner, cluster, vision), run(owner, cluster, vision)
    assert b"data-read-link-form" in signed_in(owner).get(f"/jobs/{shown.pk}/").content
    _, url = make_link(owner, job=shown.pk, days=3)
    assert url.startswith("http") and "/links/" in url
    (link,) = ReadLink.objects.all()
    assert link.path == f"/jobs/{shown.pk}/" and list(link.jobs.all()) == [shown]
    assert timedelta(days=2.9) < link.expires_at - timezone.now() <= timedelta(days=3)
    token = url.rsplit("/links/", 1)[1].strip("/")
    assert link.token_hash != token and token not in str(AuditEvent.objects.values_list())

    reader = signed_in(stranger)
    assert reader.get(f"/jobs/{shown.pk}/").status_code == 404  # before opening it
    opened = reader.get(f"/links/{token}/")
    assert opened.status_code == 302 and opened["Location"] == f"/jobs/{shown.pk}/"
    page = reader.get(f"/jobs/{shown.pk}/")
    assert page.status_code == 200 and b"data-cancel" not in page.content
    assert reader.get(f"/jobs/{other.pk}/").status_code == 404  # that run only
    api = factories.api_client(stranger)
    assert api.get(f"/api/v1/jobs/{shown.pk}/").status_code == 200
    assert api.post(f"/api/v1/jobs/{shown.pk}/cancel/").status_code == 403  # read only
    assert access.may_see(stranger, owner.pk, vision.pk, False, job_id=shown.pk)
    assert not access.may_see(stranger, owner.pk, vision.pk, False, job_id=other.pk)

    listing = signed_in(owner).get("/links/").content.decode()
    assert "stranger" in listing  # who opened it
    assert signed_in(stranger).post(f"/links/{link.pk}/revoke/").status_code == 404  # not theirs
    assert signed_in(owner).post(f"/links/{link.pk}/revoke/").status_code == 302
    assert reader.get(f"/jobs/{shown.pk}/").status_code == 404
    assert reader.get(f"/links/{token}/").status_code == 404
    actions = list(
        AuditEvent.objects.filter(action__startswith="read_link")
        .order_by("at")
        .values_list("action", "username")
    )
    assert actions == [
        ("read_link_create", "owner"),
        ("read_link_open", "stranger"),
        ("read_link_revoke", "owner"),
    ]


def test_an_expired_link_opens_nothing(people, owner, cluster, settings):
    settings.PORTAL_READ_LINKS = True
    settings.PORTAL_READ_LINK_MAX_DAYS = 2
    vision, _, _, stranger = people
    job = run(owner, cluster, vision)
    _, url = make_link(owner, job=job.pk, days=30)  # capped at the setting
    token = url.rsplit("/links/", 1)[1].strip("/")
    link = ReadLink.objects.get()
    assert link.expires_at - timezone.now() <= timedelta(days=2)
    reader = signed_in(stranger)
    reader.get(f"/links/{token}/")
    assert reader.get(f"/jobs/{job.pk}/").status_code == 200
    ReadLink.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert reader.get(f"/jobs/{job.pk}/").status_code == 404
    assert b"does not open" in reader.get(f"/links/{token}/").content


def test_who_may_hand_runs_out(people, owner, cluster, settings):
    settings.PORTAL_READ_LINKS = True
    vision, colleague, manager, _ = people
    Membership.objects.filter(user=colleague).update(granted_role="member")
    job = run(owner, cluster, vision)
    hidden = run(owner, cluster, vision, private=True)
    # A member sees the run but does not hand it out; the project's manager does.
    assert b"data-read-link-form" not in signed_in(colleague).get(f"/jobs/{job.pk}/").content
    _, answer = make_link(colleague, job=job.pk)
    assert "is not yours to hand out" in answer and not ReadLink.objects.exists()
    _, url = make_link(manager, job=job.pk)
    assert "/links/" in url and ReadLink.objects.count() == 1
    # Never a private run but by its owner (the manager does not even see it).
    _, answer = make_link(manager, job=hidden.pk)
    assert "Choose the runs" in answer and ReadLink.objects.count() == 1
    _, url = make_link(owner, job=hidden.pk)
    assert ReadLink.objects.count() == 2


def test_a_comparison_and_an_experiment_link(people, owner, cluster, settings):
    settings.PORTAL_READ_LINKS = True
    vision, _, _, stranger = people
    a, b = run(owner, cluster, vision), run(owner, cluster, vision)
    _, url = make_link(owner, job=[a.pk, b.pk])
    link = ReadLink.objects.get()
    assert link.kind == "comparison" and link.path == f"/compare/?ids={a.pk}%2C{b.pk}"
    reader = signed_in(stranger)
    reader.get("/links/" + url.rsplit("/links/", 1)[1])
    page = reader.get(link.path)
    assert page.status_code == 200 and page.context["result"].runs
    assert {r["id"] for r in page.context["result"].runs} == {a.pk, b.pk}

    experiment = factories.experiment_record(owner, cluster, project=vision)
    trial = Trial.objects.create(experiment=experiment, number=0, params={})
    trial_job = run(owner, cluster, vision, trial=trial)
    _, url = make_link(owner, experiment=experiment.pk)
    reader.get("/links/" + url.rsplit("/links/", 1)[1])
    assert reader.get(f"/experiments/{experiment.pk}/").status_code == 200
    assert reader.get(f"/jobs/{trial_job.pk}/").status_code == 200  # its trials' runs
