"""The registry's REST API, pages and `portal models` (registry/api.py, frontend/registry.py,
the client): registering a run's files, aliases and protected aliases by project role,
what a viewer, a stranger and staff see and may do. The files are read by this machine's
sh (HereConnection); the dev cluster's tests take the SSH path."""

from __future__ import annotations

import os

import pytest

from clusters import pool
from identity.audit.models import AuditEvent
from projects.models import Membership
from registry import tasks
from registry.models import ModelVersion, RegisteredModel
from tests import factories
from tests.registry.test_manifest import HereConnection

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def here(monkeypatch):
    monkeypatch.setattr(
        pool, "with_connection", lambda account, operation, retry=True: operation(HereConnection())
    )
    monkeypatch.setattr(tasks.read_manifest, "delay", lambda pk: tasks.read_manifest.apply((pk,)))


def api_of(user):
    """A REST client of ``user``'s that sends JSON bodies."""
    client = factories.api_client(user)
    client.default_format = "json"
    return client


def run_of(owner, cluster, tmp_path, **fields):
    if not owner.cluster_accounts.filter(cluster=cluster).exists():
        factories.account(cluster, owner, owner.username)
    job = factories.training_job(owner, cluster, state="completed")
    for key, value in {"work_dir": str(tmp_path / f"work-{job.pk}"), **fields}.items():
        setattr(job, key, value)
    job.save()
    os.makedirs(f"{job.work_dir}/model")
    with open(f"{job.work_dir}/model/weights.bin", "wb") as out:
        out.write(b"w" * 1000)
    return job


@pytest.fixture
def lab(cluster, owner):
    viewer, manager = factories.user("viewer"), factories.user("manager")
    project = factories.project(cluster, "lab", [viewer], role="viewer", coordinators=[manager])
    Membership.objects.create(
        project=project, user=owner, cluster_user="owner", granted_role="member"
    )
    return project, viewer, manager


def test_the_owner_registers_a_runs_folder_sets_an_alias_and_reads_the_manifest(
    owner, cluster, tmp_path, here
):
    job = run_of(owner, cluster, tmp_path)
    api = api_of(owner)
    answer = api.post("/api/v1/models/", {"job": job.pk, "path": "model", "name": "digits"})
    assert answer.status_code == 201, answer.content
    assert answer.json()["status"] == "READY" and answer.json()["files"] == 1
    model = RegisteredModel.objects.get()
    assert (
        api.put(f"/api/v1/models/{model.pk}/aliases/champion/", {"version": 1}).status_code == 200
    )
    listed = api.get("/api/v1/models/").json()["results"]
    assert [(m["name"], m["version_count"], m["aliases"]) for m in listed] == [
        ("digits", 1, [{"alias": "champion", "version": 1, "protected": False}])
    ]
    version = api.get(f"/api/v1/models/{model.pk}/versions/1/").json()
    assert version["path"] == f"{job.work_dir}/model" and version["aliases"] == ["champion"]
    assert version["manifest"][0]["path"] == "weights.bin"
    assert version["manifest"][0]["bytes"] == 1000
    assert api.delete(f"/api/v1/models/{model.pk}/aliases/champion/").status_code == 204
    assert not model.aliases.exists()
    assert AuditEvent.objects.filter(action="model_alias").count() == 2
    # Bad input: a clear 4xx, nothing made.
    for body, status in (
        ({"job": job.pk, "path": "/etc", "name": "x"}, 400),
        ({"job": job.pk, "path": "model", "name": "a/b"}, 400),
        ({"job": "one", "path": "model", "name": "x"}, 400),
        ({"job": 10**9, "path": "model", "name": "x"}, 404),
    ):
        answer = api.post("/api/v1/models/", body, format="json")
        assert answer.status_code == status, (body, answer.content)
    bad = api.put(f"/api/v1/models/{model.pk}/aliases/latest/", {"version": 1})
    assert bad.status_code == 400 and "alias" in bad.json()["error"]["message"]
    assert ModelVersion.objects.count() == 1


def test_project_roles_viewers_see_members_register_managers_protect(
    owner, outsider, staff, cluster, tmp_path, here, lab
):
    project, viewer, manager = lab
    job = run_of(owner, cluster, tmp_path, project=project)
    member = api_of(owner)
    made = member.post("/api/v1/models/", {"job": job.pk, "path": "model", "name": "lm"})
    assert made.status_code == 201, made.content
    model = RegisteredModel.objects.get()
    assert model.project == project
    assert member.put(f"/api/v1/models/{model.pk}/aliases/prod/", {"version": 1}).status_code == 200

    seen = api_of(viewer)
    assert [m["name"] for m in seen.get("/api/v1/models/").json()["results"]] == ["lm"]
    refused = seen.put(f"/api/v1/models/{model.pk}/aliases/prod/", {"version": 1})
    assert refused.status_code == 403 and "member" in refused.json()["error"]["message"]

    boss = api_of(manager)
    answer = boss.put(f"/api/v1/models/{model.pk}/aliases/prod/", {"protected": True})
    assert answer.status_code == 200 and answer.json()["aliases"][0]["protected"]
    moved = member.put(f"/api/v1/models/{model.pk}/aliases/prod/", {"version": 1})
    assert moved.status_code == 403 and "protected" in moved.json()["error"]["message"]
    assert member.delete(f"/api/v1/models/{model.pk}/aliases/prod/").status_code == 403
    assert (
        member.put(f"/api/v1/models/{model.pk}/aliases/prod/", {"protected": False}).status_code
        == 403
    )

    stranger = api_of(outsider)
    assert stranger.get("/api/v1/models/").json()["results"] == []
    assert stranger.get(f"/api/v1/models/{model.pk}/").status_code == 404
    assert stranger.put(f"/api/v1/models/{model.pk}/aliases/x/", {"version": 1}).status_code == 404
    # Registering into a job that is not yours: nothing to find.
    theirs = stranger.post("/api/v1/models/", {"job": job.pk, "path": "model", "name": "mine"})
    assert theirs.status_code == 404

    # Staff see a person's own model but never change it.
    personal = run_of(owner, cluster, tmp_path)
    member.post("/api/v1/models/", {"job": personal.pk, "path": "model", "name": "own"})
    own = RegisteredModel.objects.get(name="own")
    admin = factories.api_client(staff, scopes="read,submit,admin")
    admin.default_format = "json"
    assert admin.get(f"/api/v1/models/{own.pk}/").status_code == 200
    assert admin.put(f"/api/v1/models/{own.pk}/aliases/x/", {"version": 1}).status_code == 403


def test_the_pages_register_from_a_run_set_an_alias_and_show_the_manifest(
    owner, outsider, cluster, tmp_path, here, client
):
    job = run_of(owner, cluster, tmp_path)
    client.force_login(owner)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "data-register-form" in page and "None registered yet" in page
    answer = client.post(f"/jobs/{job.pk}/register/", {"path": "model", "name": "digits"})
    model = RegisteredModel.objects.get()
    assert answer.status_code == 302 and answer["Location"] == f"/models/{model.pk}/"
    client.post(f"/models/{model.pk}/aliases/", {"alias": "champion", "version": "1"})
    page = client.get(f"/models/{model.pk}/").content.decode()
    assert 'data-alias="champion"' in page and "1 file, 1000" in page
    page = client.get(f"/models/{model.pk}/versions/1/").content.decode()
    assert "weights.bin" in page and f"job {job.pk}" in page and "@champion" in page
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "digits version 1" in page
    assert "digits" in client.get("/models/").content.decode()
    # Another person: no model, no page, no registering into the run.
    client.force_login(outsider)
    assert "digits" not in client.get("/models/").content.decode()
    assert client.get(f"/models/{model.pk}/").status_code == 404
    assert client.get(f"/models/{model.pk}/versions/1/").status_code == 404
    assert (
        client.post(f"/models/{model.pk}/aliases/", {"alias": "x", "version": "1"}).status_code
        == 404
    )
    assert (
        client.post(f"/jobs/{job.pk}/register/", {"path": "model", "name": "x"}).status_code == 404
    )
    assert ModelVersion.objects.count() == 1 and model.aliases.count() == 1


def test_the_cli_registers_lists_aliases_and_shows(
    owner, cluster, tmp_path, here, live_server, monkeypatch, capsys
):
    from identity.tokens import ApiToken
    from portal_client import cli

    _, token = ApiToken.issue(owner, "cli")
    monkeypatch.setenv("PORTAL_URL", live_server.url)
    monkeypatch.setenv("PORTAL_TOKEN", token)
    monkeypatch.setenv("PORTAL_CONFIG", str(tmp_path / "absent.toml"))
    job = run_of(owner, cluster, tmp_path)

    def portal(*argv):
        code = cli.main(list(argv))
        return code, capsys.readouterr().out

    assert portal("models") == (0, "no models yet\n")
    code, out = portal("models", "register", str(job.pk), "model", "--name", "digits")
    assert (code, out) == (0, "digits version 1: READY\n")
    code, out = portal("models", "alias", "digits", "champion", "1")
    assert (code, out) == (0, "digits: @champion=v1\n")
    code, out = portal("models")
    assert code == 0 and "digits" in out and "@champion=v1" in out
    code, out = portal("models", "show", "digits", "--version", "1")
    assert code == 0 and "weights.bin" in out and "(1 files, 1000 bytes)" in out
    assert portal("models", "unalias", "digits", "champion") == (0, "alias champion removed\n")
    assert cli.main(["models", "show", "nothing"]) != 0
    assert "no models named 'nothing'" in capsys.readouterr().err
