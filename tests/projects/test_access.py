"""One rule for a project's runs: its members see them as their role allows (not a
private one, never another project's), only the owner acts on them; everywhere the pages,
the API and the websockets ask projects/access.py."""

import pytest

from jobs.broadcast import publish_job
from jobs.models import Job
from projects import access
from projects.models import launch_refusal
from tests import factories
from tests.sockets import connect, run, session_cookie

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def team(cluster):
    owner = factories.user("owner", "owner-pass-123")
    colleague = factories.user("colleague", "colleague-pass-123")
    vision = factories.project(cluster, "vision", [owner, colleague], role="viewer")
    nlp = factories.project(cluster, "nlp", [owner], role="member")
    shown = factories.job(owner, cluster, "train", account="vision", state="running")
    private = factories.job(owner, cluster, "secret", account="vision", state="running")
    private.set_private(True)
    elsewhere = factories.job(owner, cluster, "nlp run", account="nlp", state="running")
    return owner, colleague, vision, nlp, shown, private, elsewhere


def test_a_job_is_charged_to_its_accounts_project(team):
    owner, colleague, vision, nlp, shown, private, elsewhere = team
    assert (shown.project, elsewhere.project) == (vision, nlp)


def test_a_viewer_sees_the_projects_shared_runs_only(team, client):
    owner, colleague, vision, nlp, shown, private, elsewhere = team
    assert set(Job.objects.visible_to(colleague)) == {shown}
    assert set(Job.objects.for_user(colleague)) == set()  # acts on none of them
    assert set(Job.objects.visible_to(owner)) == {shown, private, elsewhere}
    client.force_login(colleague)
    page = client.get(f"/jobs/{shown.pk}/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "data-cancel" not in text and "Launch again" not in text
    assert "Run by <strong data-owner>owner</strong>" in text
    assert f'<a href="/projects/{vision.pk}/">vision</a>' in text
    for job in (private, elsewhere):
        assert client.get(f"/jobs/{job.pk}/").status_code == 404
        assert client.get(f"/jobs/{job.pk}/metrics/").status_code == 404
    assert client.post(f"/jobs/{shown.pk}/cancel/").status_code == 403
    assert client.get(f"/launch/?from={shown.pk}").status_code == 403  # a viewer
    listed = client.get(f"/?project={vision.pk}").content.decode()
    assert f'data-job-id="{shown.pk}"' in listed
    assert f'data-job-id="{private.pk}"' not in listed
    assert f'data-job-id="{shown.pk}"' not in client.get("/").content.decode()  # own only


def test_the_api_lists_a_colleagues_run_and_refuses_to_cancel_it(team):
    owner, colleague, vision, nlp, shown, private, elsewhere = team
    api = factories.api_client(colleague)
    ids = [j["id"] for j in api.get("/api/v1/jobs/").json()["results"]]
    assert ids == [shown.pk]
    assert api.post(f"/api/v1/jobs/{shown.pk}/cancel/").status_code == 403
    assert api.get(f"/api/v1/jobs/{elsewhere.pk}/").status_code == 404
    assert api.post(f"/api/v1/jobs/{elsewhere.pk}/cancel/").status_code == 404
    shown.refresh_from_db()
    assert shown.cancel_requested_at is None


def test_a_member_may_relaunch_a_colleagues_run_and_launch_on_the_account(team, cluster):
    owner, colleague, vision, nlp, shown, private, elsewhere = team
    assert not access.may_relaunch(colleague, shown.owner_id, vision.pk, False)
    vision.default_role = "member"
    vision.save()
    access.forget_roles(colleague)
    assert access.may_relaunch(colleague, shown.owner_id, vision.pk, False)
    assert not access.may_relaunch(colleague, private.owner_id, vision.pk, True)
    assert launch_refusal(colleague, cluster.pk, "vision") == ""
    assert "not in the account nlp" in launch_refusal(colleague, cluster.pk, "nlp")
    vision.default_role = "viewer"
    vision.save()
    assert "viewer of project vision" in launch_refusal(colleague, cluster.pk, "vision")
    assert launch_refusal(colleague, cluster.pk, "not-read-yet") == ""  # Slurm decides


def test_websockets_follow_the_same_rule(team):
    owner, colleague, vision, nlp, shown, private, elsewhere = team
    cookie = session_cookie(colleague)

    async def opens(path):
        communicator, connected, code = await connect(path, cookie)
        if connected:
            await communicator.disconnect()
        return connected, code

    for job, allowed in ((shown, True), (private, False), (elsewhere, False)):
        for path in (f"/ws/jobs/{job.pk}/", f"/ws/jobs/{job.pk}/metrics/"):
            connected, code = run(opens(path))
            assert connected is allowed, path
            if not allowed:
                assert code == 4404


def test_a_colleagues_page_hears_the_run_live_until_it_is_made_private(team):
    owner, colleague, vision, nlp, shown, private, elsewhere = team
    from channels.db import database_sync_to_async

    async def follow():
        communicator, connected, _ = await connect(f"/ws/jobs/{shown.pk}/", session_cookie_of)
        assert connected
        first = await communicator.receive_json_from(timeout=5)  # the job as it is now
        assert first["job"]["id"] == shown.pk
        await database_sync_to_async(publish_job)(shown)
        live = await communicator.receive_json_from(timeout=5)
        assert live["job"]["project_id"] == vision.pk
        await database_sync_to_async(shown.set_private)(True)
        await database_sync_to_async(publish_job)(shown)
        closed = await communicator.receive_output(timeout=5)
        assert closed == {"type": "websocket.close", "code": 4404}

    session_cookie_of = session_cookie(colleague)
    run(follow())


def test_a_projects_experiments_are_seen_by_its_members_and_acted_on_by_their_owner(
    team, cluster, client
):
    owner, colleague, vision, nlp, shown, private, elsewhere = team
    seen = factories.experiment_record(owner, cluster, name="seen", account="vision")
    other = factories.experiment_record(owner, cluster, name="other")
    assert (seen.project, other.project) == (vision, None)
    client.force_login(colleague)
    assert client.get(f"/experiments/{seen.pk}/").status_code == 200
    assert client.get(f"/experiments/{other.pk}/").status_code == 404
    assert client.post(f"/experiments/{seen.pk}/cancel/").status_code == 403
    assert client.post(f"/experiments/{seen.pk}/relaunch/").status_code == 403  # a viewer
    api = factories.api_client(colleague)
    assert [e["id"] for e in api.get("/api/v1/experiments/").json()["results"]] == [seen.pk]
    assert api.post(f"/api/v1/experiments/{seen.pk}/cancel/").status_code == 403
    seen.refresh_from_db()
    assert seen.cancel_requested_at is None


def test_a_colleagues_dashboard_hears_the_projects_runs_not_a_private_one(team):
    owner, colleague, vision, nlp, shown, private, elsewhere = team
    from channels.db import database_sync_to_async

    async def listen():
        communicator, connected, _ = await connect("/ws/jobs/", session_cookie_of)
        assert connected
        for job in (private, elsewhere, shown):
            await database_sync_to_async(publish_job)(job)
        heard = await communicator.receive_json_from(timeout=5)
        assert heard["job"]["id"] == shown.pk  # the first it may see, and only it
        assert await communicator.receive_nothing(timeout=0.5)
        await communicator.disconnect()

    session_cookie_of = session_cookie(colleague)
    run(listen())
