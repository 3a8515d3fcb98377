"""Cached listings (jobs/listing.py): the dashboard's rows and the jobs API's pages are
built again once anything they show changes, never shared between people, never cached
for staff, and at most PORTAL_LISTING_CACHE_SECONDS old whatever is missed."""

from __future__ import annotations

import re

import pytest
from django.core.cache import cache
from django.test import Client

from jobs import listing
from jobs.models import Job
from projects.models import Membership
from tests import factories, polling

# Real commits: tokens are renewed when a change commits, as in production.
pytestmark = pytest.mark.django_db(transaction=True)


def api_names(api) -> list[str]:
    response = api.get("/api/v1/jobs/")
    assert response.status_code == 200
    return [row["name"] for row in response.json()["results"]]


def dashboard(client) -> str:
    response = client.get("/")
    assert response.status_code == 200
    return response.content.decode()


def test_a_listing_is_served_from_the_cache_until_a_job_changes(owner, cluster):
    job = factories.job(owner, cluster, name="first")
    api = factories.api_client(owner)
    assert api_names(api) == ["first"]
    built = []
    real = Job.objects.visible_to

    def counted(user):
        built.append(user.pk)
        return real(user)

    Job.objects.visible_to = counted  # type: ignore[method-assign]
    try:
        assert api_names(api) == ["first"]
        assert built == []  # the second request read the cache
        job.update_details(name="renamed")  # sends the job's signal
        assert api_names(api) == ["renamed"]
        assert built == [owner.pk]
    finally:
        del Job.objects.visible_to


@pytest.mark.parametrize(
    "change",
    [
        lambda job: job.transition(Job.State.RUNNING, node="gpu7"),
        lambda job: job.change_tags(add=["tagged"]),
        lambda job: job.set_notes("noted"),
        lambda job: job.report_params({"lr": 0.1}),
        lambda job: factories.job(job.owner, job.cluster, name="another"),
        lambda job: Job.objects.get(pk=job.pk).delete(),
    ],
    ids=["state", "tags", "notes", "params", "new job", "deleted"],
)
def test_every_change_a_listing_shows_is_seen_at_once(owner, cluster, change):
    job = factories.job(owner, cluster, name="first", state=Job.State.PENDING)
    api = factories.api_client(owner)
    before = api.get("/api/v1/jobs/").json()
    change(job)
    after = api.get("/api/v1/jobs/").json()
    assert after != before


def test_a_renamed_image_is_seen_at_once(owner, cluster):
    job = factories.job(owner, cluster, name="first")
    client = Client()
    client.force_login(owner)
    assert "Host" in dashboard(client)
    job.image.name = "Renamed image"
    job.image.save()
    assert "Renamed image" in dashboard(client)


def test_people_never_share_an_entry(owner, outsider, cluster):
    """Two people of one project with one role: each their own entry (the project's
    private job is its owner's alone)."""
    project = factories.project(cluster, "team", members=[owner, outsider])
    factories.job(owner, cluster, name="shared", project=project)
    factories.job(owner, cluster, name="secret", project=project, private=True)
    theirs = factories.api_client(outsider)
    mine = factories.api_client(owner)
    assert api_names(theirs) == ["shared"]
    assert sorted(api_names(mine)) == ["secret", "shared"]
    assert api_names(theirs) == ["shared"]


def test_a_revoked_member_stops_seeing_the_projects_jobs_at_once(owner, outsider, cluster):
    project = factories.project(cluster, "team", members=[owner, outsider])
    factories.job(owner, cluster, name="shared", project=project)
    theirs = factories.api_client(outsider)
    assert api_names(theirs) == ["shared"]
    # Removed without any job changing: their projects are read on every request.
    Membership.objects.filter(user=outsider).delete()
    assert api_names(theirs) == []


def test_a_job_made_private_leaves_the_colleagues_listing(owner, outsider, cluster):
    project = factories.project(cluster, "team", members=[owner, outsider])
    job = factories.job(owner, cluster, name="shared", project=project)
    theirs = factories.api_client(outsider)
    assert api_names(theirs) == ["shared"]
    job.set_private(True)
    assert api_names(theirs) == []


def test_listings_are_not_cached_when_turned_off(owner, cluster, settings):
    settings.PORTAL_LISTING_CACHE_SECONDS = 0
    factories.job(owner, cluster, name="first")
    api = factories.api_client(owner)
    assert api_names(api) == ["first"]
    Job.objects.filter(name="first").update(name="quiet")
    assert api_names(api) == ["quiet"]


def test_staff_listings_are_never_cached(staff, owner, cluster):
    assert listing.scope(staff) is None
    factories.job(owner, cluster, name="first")
    api = factories.api_client(staff, scopes="read,submit,admin")
    assert api_names(api) == ["first"]
    Job.objects.filter(name="first").update(name="quiet")  # no signal at all
    assert api_names(api) == ["quiet"]


def test_a_missed_change_is_seen_within_the_ttl(owner, cluster, settings):
    settings.PORTAL_LISTING_CACHE_SECONDS = 1
    factories.job(owner, cluster, name="first")
    api = factories.api_client(owner)
    assert api_names(api) == ["first"]
    Job.objects.filter(name="first").update(name="quiet")  # no signal: a missed change
    assert api_names(api) == ["first"]  # (the entry, as documented)
    polling.until(lambda: api_names(api) == ["quiet"], 10, "the entry expired", interval=0.2)


def test_without_the_cache_listings_are_built_as_before(owner, cluster, monkeypatch):
    def down(*args, **kwargs):
        raise ConnectionError("redis is down")

    monkeypatch.setattr(cache, "get_many", down)
    factories.job(owner, cluster, name="first")
    api = factories.api_client(owner)
    assert api_names(api) == ["first"]
    Job.objects.filter(name="first").update(name="quiet")
    assert api_names(api) == ["quiet"]


def test_cached_rows_carry_each_requests_own_csrf_token(owner, cluster):
    """The rows are stored with a mark where the cancel form's token goes; each request
    puts its own there, and it cancels."""
    job = factories.job(owner, cluster, name="running", state=Job.State.RUNNING)
    first, second = Client(enforce_csrf_checks=True), Client(enforce_csrf_checks=True)
    first.force_login(owner)
    second.force_login(owner)
    dashboard(first)
    page = dashboard(second)  # from the cache
    assert "portal-csrf-field" not in page
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert token is not None
    response = second.post(f"/jobs/{job.pk}/cancel/", {"csrfmiddlewaretoken": token[1]})
    assert response.status_code in (200, 302)
    job.refresh_from_db()
    assert job.cancel_requested_at is not None or job.state == Job.State.CANCELLED


def test_hostile_names_cannot_place_the_csrf_field(owner, cluster):
    factories.job(owner, cluster, name="<portal-csrf-field>")
    client = Client()
    client.force_login(owner)
    dashboard(client)
    page = dashboard(client)
    assert "&lt;portal-csrf-field&gt;" in page
    assert "<portal-csrf-field>" not in page
