"""Endpoint pages (frontend/endpoints.py): "Serve" on a version's page makes and starts an
endpoint (bad input: a message, nothing made); its page shows a new key once, its owner
starts, stops and revokes; a project member sees it without its keys or buttons and
changes nothing; anyone else gets a 404. In Chromium: tests/e2e/test_endpoints.py."""

from __future__ import annotations

import pytest

from endpoints import routes
from endpoints.models import Endpoint, EndpointKey
from projects.models import Membership
from tests import factories
from tests.endpoints.test_api import version_of

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch, started):
    monkeypatch.setattr(routes, "push", lambda pk: False)


@pytest.fixture
def started(monkeypatch):
    from endpoints import tasks

    sent: list[int] = []
    monkeypatch.setattr(tasks.start_endpoint, "delay", lambda pk: sent.append(pk))
    return sent


def test_serve_from_the_version_page_then_keys_start_and_stop(owner, outsider, cluster, client):
    member = factories.user("member")
    project = factories.project(cluster, "lab", [member], role="member")
    Membership.objects.create(project=project, user=owner, cluster_user="owner")
    version = version_of(owner, cluster, project=project)
    model = version.model
    client.force_login(owner)
    page = client.get(f"/models/{model.pk}/versions/1/").content.decode()
    assert "data-serve-form" in page and "endpoints: none" in page
    serve = f"/models/{model.pk}/versions/1/serve/"
    for bad in ({"name": "Bad Name"}, {"name": "ok", "cpus": "0"}, {"name": "ok", "kind": "x"}):
        answer = client.post(serve, bad, follow=True)
        assert answer.redirect_chain[-1][0] == f"/models/{model.pk}/versions/1/"
        assert not Endpoint.objects.exists(), bad
    answer = client.post(serve, {"name": "dg", "memory_gb": "1", "idle_minutes": "5"})
    endpoint = Endpoint.objects.get()
    assert answer["Location"] == f"/endpoints/{endpoint.pk}/"
    assert (endpoint.state, endpoint.memory_gb, endpoint.idle_minutes) == ("starting", 1, 5)
    action = f"/endpoints/{endpoint.pk}/action/"
    client.post(action, {"action": "key", "key_name": "prog", "rate": "5", "days": "7"})
    page = client.get(f"/endpoints/{endpoint.pk}/").content.decode()
    key = EndpointKey.objects.get()
    assert "data-new-key" in page and f'data-key="{key.prefix}"' in page
    assert "data-new-key" not in client.get(f"/endpoints/{endpoint.pk}/").content.decode()
    assert list(key.endpoints.all()) == [endpoint] and not key.all_endpoints
    client.post(action, {"action": "stop"})
    assert Endpoint.objects.get().state == "stopped"
    client.post(action, {"action": "revoke", "key": str(key.pk)})
    assert not EndpointKey.objects.live().exists()
    assert "dg" in client.get(f"/models/{model.pk}/versions/1/").content.decode()

    client.force_login(member)  # sees it, changes nothing
    page = client.get(f"/endpoints/{endpoint.pk}/").content.decode()
    assert "dg" in page and "data-key-form" not in page and ">Start<" not in page
    client.post(action, {"action": "start"})
    assert Endpoint.objects.get().state == "stopped"
    client.force_login(outsider)
    assert client.get(f"/endpoints/{endpoint.pk}/").status_code == 404
    assert client.post(action, {"action": "start"}).status_code == 404
    assert "dg" not in client.get("/endpoints/").content.decode()


def test_a_language_models_job_script_writes_the_meter_and_starts_the_server_behind_it(
    owner, cluster, settings
):
    """The openai kind's serving job: the endpoint meter's module written into the job's
    lib/ (beside portal_metrics), started on the app's port with the centre's command
    after `--`, the server's port its own (@PORT@); the script is valid bash. The MLflow
    kind is started as it is."""
    import subprocess

    from endpoints import serving
    from schedulers import jobscript

    settings.PORTAL_SERVE_OPENAI_COMMAND = "transformers serve --port {port} --device cpu"
    version = version_of(owner, cluster)
    endpoint = Endpoint.objects.create(name="lm", owner=owner, version=version, kind="openai")
    endpoint.partition = version.job.partition.name
    job = serving.start(endpoint)
    script = jobscript.render(job.describe(), "/home/alice/.portal/jobs/9-abc", header=[])
    assert "cat > \"$PORTAL_WORK_DIR/lib/endpoint_meter.py\" <<'PORTAL_ENDPOINT_METER'" in script
    assert (
        'python3 -m endpoint_meter --port "$_portal_app_port" -- transformers serve --port '
        "@PORT@ --device cpu /home/alice/.portal/jobs/1/model &" in script
    )
    subprocess.run(["bash", "-n"], input=script.encode(), check=True)
    assert serving.serve_command("mlflow").startswith("mlflow models serve")
