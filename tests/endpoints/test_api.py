"""Endpoints' REST API and the portal's answer for an endpoint not routed
(endpoints/api.py, service.py, views.py, middleware.py): who may serve and start, keys
shown once and bounded, a project's keys by its managers, revocation by the right
people, and a request that wakes a stopped endpoint only with one of its keys. The
serving itself runs on the dev cluster (tests/devcluster/test_endpoints.py)."""

from __future__ import annotations

import pytest

from endpoints import routes, service, tasks, views
from endpoints.models import Endpoint, EndpointKey, digest_of
from projects.models import Membership
from registry.models import ModelVersion, RegisteredModel
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def started(monkeypatch):
    sent = []
    monkeypatch.setattr(tasks.start_endpoint, "delay", lambda pk: sent.append(pk))
    return sent


def api_of(user):
    client = factories.api_client(user)
    client.default_format = "json"
    return client


def version_of(owner, cluster, project=None, status="READY") -> ModelVersion:
    job = factories.training_job(owner, cluster, state="completed")
    job.work_dir = "/home/alice/.portal/jobs/1"
    job.project = project
    job.save()
    model = RegisteredModel.objects.create(owner=owner, project=project, name="digits")
    return ModelVersion.add(
        model, cluster=cluster, path=f"{job.work_dir}/model", job=job, status=status
    )


def test_the_owner_serves_starts_and_makes_a_key_shown_once(owner, outsider, cluster, started):
    version = version_of(owner, cluster)
    api = api_of(owner)
    made = api.post("/api/v1/endpoints/", {"model": version.model_id, "version": 1, "name": "dg"})
    assert made.status_code == 201, made.content
    endpoint = made.json()
    assert endpoint["state"] == "stopped" and endpoint["url"].startswith("https://ep-")
    assert api.post(f"/api/v1/endpoints/{endpoint['id']}/start/").status_code == 202
    assert started == [endpoint["id"]]
    again = api.post(f"/api/v1/endpoints/{endpoint['id']}/start/")
    assert again.status_code == 409 and "starting" in again.json()["error"]["message"]
    key = api.post("/api/v1/endpoint-keys/", {"name": "prog", "rate": 5, "days": 30}).json()
    assert key["key"].startswith("pe_") and key["prefix"] == key["key"][:10]
    row = EndpointKey.objects.get()
    assert row.digest == digest_of(key["key"]) and key["key"] not in str(row.__dict__)
    listed = api.get("/api/v1/endpoint-keys/").json()["results"]
    assert listed[0]["prefix"] == key["prefix"] and "key" not in listed[0]
    for bad, said in (
        ({"name": ""}, "name"),
        ({"name": "x", "days": 0}, "days"),
        ({"name": "x", "days": 400}, "days"),
        ({"name": "x", "rate": 0}, "rate"),
        ({"name": "x", "rate": True}, "rate"),
        ({"name": "x", "endpoints": ["1"]}, "endpoints"),
    ):
        answer = api.post("/api/v1/endpoint-keys/", bad)
        assert answer.status_code == 400 and said in answer.json()["error"]["message"], bad
    # Another person sees nothing, starts nothing, revokes nothing.
    stranger = api_of(outsider)
    assert stranger.get("/api/v1/endpoints/").json()["results"] == []
    assert stranger.post(f"/api/v1/endpoints/{endpoint['id']}/start/").status_code == 404
    assert stranger.post(f"/api/v1/endpoint-keys/{row.pk}/revoke/").status_code == 404
    serve = stranger.post(
        "/api/v1/endpoints/", {"model": version.model_id, "version": 1, "name": "x"}
    )
    assert serve.status_code == 404
    # Bad requests to serve: a clear 4xx, nothing made.
    for body, code in (
        ({"model": version.model_id, "version": 1, "name": "Bad Name"}, 400),
        ({"model": version.model_id, "version": 1, "name": "dg"}, 409),
        ({"model": version.model_id, "version": 1, "name": "y", "cpus": 0}, 400),
        ({"model": version.model_id, "version": 1, "name": "y", "kind": "vllm"}, 400),
        ({"model": version.model_id, "version": 9, "name": "y"}, 404),
    ):
        assert api.post("/api/v1/endpoints/", body).status_code == code, body
    assert Endpoint.objects.count() == 1


def test_project_roles_viewers_see_members_serve_managers_make_project_keys(
    owner, cluster, started
):
    viewer, manager = factories.user("viewer"), factories.user("manager")
    project = factories.project(cluster, "lab", [viewer], role="viewer", coordinators=[manager])
    Membership.objects.create(
        project=project, user=owner, cluster_user="owner", granted_role="member"
    )
    version = version_of(owner, cluster, project=project)
    body = {"model": version.model_id, "version": 1, "name": "lab-digits"}
    refused = api_of(viewer).post("/api/v1/endpoints/", body)
    assert refused.status_code == 403 and "member" in refused.json()["error"]["message"]
    made = api_of(owner).post("/api/v1/endpoints/", body).json()
    assert made["project"] == "lab"
    assert [e["name"] for e in api_of(viewer).get("/api/v1/endpoints/").json()["results"]] == [
        "lab-digits"
    ]
    # Only the owner starts it (the job runs as them), not a manager.
    assert api_of(manager).post(f"/api/v1/endpoints/{made['id']}/start/").status_code == 403
    key = {"name": "lab", "project": project.pk}
    assert api_of(owner).post("/api/v1/endpoint-keys/", key).status_code == 403
    answer = api_of(manager).post("/api/v1/endpoint-keys/", key)
    assert answer.status_code == 201
    row = EndpointKey.objects.get()
    assert EndpointKey.objects.opening(Endpoint.objects.get()).get() == row
    # A member may not revoke the project's key; its manager may.
    assert api_of(owner).post(f"/api/v1/endpoint-keys/{row.pk}/revoke/").status_code == 403
    assert api_of(manager).post(f"/api/v1/endpoint-keys/{row.pk}/revoke/").json()["live"] is False
    assert not EndpointKey.objects.opening(Endpoint.objects.get()).exists()


def test_a_request_to_a_stopped_endpoint_wakes_it_only_with_one_of_its_keys(
    owner, outsider, cluster, started, client, settings
):
    settings.PORTAL_ENDPOINT_HOLD_SECONDS = 0  # answered at once (the hold: the next test)
    version = version_of(owner, cluster)
    made = (
        api_of(owner)
        .post("/api/v1/endpoints/", {"model": version.model_id, "version": 1, "name": "dg"})
        .json()
    )
    endpoint = Endpoint.objects.get(pk=made["id"])
    host = f"ep-{endpoint.public_id}.{settings.PROXY_SESSION_DOMAIN}"
    path = f"/_portal/endpoint/{endpoint.public_id}/invocations"
    _, mine = EndpointKey.issue(owner, "mine", days=1, rate=5)
    _, theirs = EndpointKey.issue(outsider, "theirs", days=1, rate=5)

    def call(secret=None, where=path):
        headers = {"HTTP_HOST": host}
        if secret:
            headers["HTTP_AUTHORIZATION"] = f"Bearer {secret}"
        return client.post(where, data="{}", content_type="application/json", **headers)

    for refused in (call(), call(theirs), call("pe_nothing")):
        assert refused.status_code == 401 and refused["WWW-Authenticate"] == "Bearer"
    assert started == [] and Endpoint.objects.get().state == "stopped"
    answer = call(mine)
    assert answer.status_code == 503 and answer["Retry-After"] == "30"
    assert answer.json()["error"]["type"] == "endpoint_starting"
    assert started == [endpoint.pk] and Endpoint.objects.get().state == "starting"
    assert call(mine).status_code == 503 and started == [endpoint.pk]  # started once
    Endpoint.objects.filter(pk=endpoint.pk).update(state="failed", message="files changed")
    failed = call(mine)
    assert failed.status_code == 503 and "files changed" in failed.json()["error"]["message"]
    # Nothing else of the portal answers on an endpoint host.
    assert call(mine, where="/api/v1/jobs/").status_code == 404
    assert call(mine, where="/admin/").status_code == 404


def test_a_waking_request_is_held_until_routed_then_sent_on_to_itself(
    owner, cluster, started, client, settings, monkeypatch
):
    """Held while the endpoint starts: routed in time, the same request is sent again (307
    keeps its method and body) to the same host only; not in time, 503 Retry-After."""
    settings.PORTAL_ENDPOINT_HOLD_SECONDS = 5
    version = version_of(owner, cluster)
    api_of(owner).post(
        "/api/v1/endpoints/", {"model": version.model_id, "version": 1, "name": "dg"}
    )
    endpoint = Endpoint.objects.get()
    _, key = EndpointKey.issue(owner, "mine", days=1, rate=5)
    host = f"ep-{endpoint.public_id}.{settings.PROXY_SESSION_DOMAIN}"

    def call(path: str):
        return client.post(
            f"/_portal/endpoint/{endpoint.public_id}{path}",
            data="{}",
            content_type="application/json",
            HTTP_HOST=host,
            HTTP_AUTHORIZATION=f"Bearer {key}",
        )

    waited = []

    def starts_while_held(seconds):  # the job starting while the request waits
        waited.append(seconds)
        if len(waited) == 3:
            Endpoint.objects.filter(pk=endpoint.pk).update(state="running")

    monkeypatch.setattr(views.time, "sleep", starts_while_held)
    answer = call("//elsewhere.example/v1/completions?stream=1")
    assert answer.status_code == 307 and started == [endpoint.pk] and len(waited) == 3
    assert answer["Location"] == "/elsewhere.example/v1/completions?stream=1"
    # Running but not routed here (an instance restarted): routed now and sent on.
    monkeypatch.setattr(views.routes, "push", lambda pk: True)
    assert call("/invocations")["Location"] == "/invocations"
    # Not routed within the hold: 503 and Retry-After, the endpoint still starting.
    Endpoint.objects.filter(pk=endpoint.pk).update(state="starting")
    clock = iter(range(0, 100, 2))
    monkeypatch.setattr(views.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(views.time, "sleep", lambda s: None)
    late = call("/invocations")
    assert late.status_code == 503 and late["Retry-After"] == "30"


def test_a_personal_key_reaches_the_proxy_for_the_owners_project_endpoints_too(
    owner, cluster, started, monkeypatch
):
    """A personal key opens every endpoint of its owner's, a project's included: making or
    revoking it is pushed to each of them at once (not left to the reconcile)."""
    project = factories.project(cluster, "lab", [owner], role="member")
    version = version_of(owner, cluster, project=project)
    endpoint = Endpoint.objects.create(name="lab", owner=owner, project=project, version=version)
    pushed: list[int] = []
    monkeypatch.setattr(routes, "push", lambda pk: pushed.append(pk) or True)
    key, _ = service.issue_key(owner, "mine", endpoint_ids=[endpoint.pk])
    assert pushed == [endpoint.pk]
    assert EndpointKey.objects.opening(endpoint).get() == key
    service.revoke_key(owner, key)
    assert pushed == [endpoint.pk, endpoint.pk]


def test_making_and_revoking_a_key_is_audited_without_its_secret(owner, cluster, started):
    from identity.audit.models import AuditEvent

    version = version_of(owner, cluster)
    endpoint = Endpoint.objects.create(name="dg", owner=owner, version=version)
    made = (
        api_of(owner)
        .post("/api/v1/endpoint-keys/", {"name": "prog", "endpoints": [endpoint.pk]})
        .json()
    )
    api_of(owner).post(f"/api/v1/endpoint-keys/{made['id']}/revoke/")
    api_of(owner).post(f"/api/v1/endpoint-keys/{made['id']}/revoke/")  # once is enough
    rows = list(AuditEvent.objects.filter(action__startswith="endpoint_key").order_by("pk"))
    assert [(r.action, r.username, r.outcome) for r in rows] == [
        ("endpoint_key_create", "owner", "ok"),
        ("endpoint_key_revoke", "owner", "ok"),
    ]
    assert f"({made['prefix']}…, 'prog') of owner, opens {endpoint.pk}" in rows[0].target
    assert all(made["key"] not in r.target + r.message for r in rows)
