"""MLflow's Model Registry on the tracking URI a job is given (#62), on its real path:
MLflow's own client (mlflow-skinny, as pinned) in a script, the live server, the job's
token. The manifest's script runs on this machine in place of the cluster's login node
(its SSH path: tests/devcluster/test_registry.py)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import urllib.parse
from datetime import timedelta

import pytest
from django.utils import timezone

from clusters import pool
from files.views import Failure, unprotected
from metrics import ingest
from registry import service, tasks
from registry.models import ModelVersion, RegisteredModel
from tests import factories
from tests.registry.test_manifest import HereConnection
from tracking.models import LoggedModel

pytestmark = pytest.mark.django_db(transaction=True)

REGISTER = textwrap.dedent(
    """
    import json, os
    import mlflow
    from mlflow import MlflowClient

    mlflow.set_experiment("digits")
    with mlflow.start_run() as run:
        os.makedirs("model", exist_ok=True)
        with open("model/MLmodel", "w") as out:
            out.write("artifact_path: model\\nflavors: {}\\n")
        with open("model/weights.bin", "wb") as out:
            out.write(bytes(range(256)) * 40)
        mlflow.log_artifacts("model", artifact_path="model")
        mlflow.log_metric("accuracy", 0.95, step=3)
    version = mlflow.register_model(f"runs:/{run.info.run_id}/model", "digits")
    client = MlflowClient()
    client.set_registered_model_alias("digits", "champion", version.version)
    client.update_model_version("digits", version.version, description="first")
    client.set_model_version_tag("digits", version.version, "data", "sklearn-digits")
    by_alias = client.get_model_version_by_alias("digits", "champion")
    where = mlflow.artifacts.download_artifacts("models:/digits@champion")
    found = client.search_registered_models(filter_string="name LIKE 'dig%'")
    print("ANSWER", json.dumps({
        "version": version.version, "status": by_alias.status, "aliases": list(by_alias.aliases),
        "where": where, "run_id": run.info.run_id, "found": [m.name for m in found],
        "tags": by_alias.tags, "description": by_alias.description,
    }))
    """
)


def run_script(url: str, job, token: str, script: str, cwd) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": f"{url}/api/v1/jobs/{job.pk}/metrics/mlflow",
        "MLFLOW_TRACKING_TOKEN": token,
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
    }
    return subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
    )


def answer_of(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("ANSWER "))
    return json.loads(line.removeprefix("ANSWER "))


@pytest.fixture
def here(monkeypatch):
    """The manifest read in the request that registers (no worker here), by this
    machine's sh in place of the cluster's login node."""
    monkeypatch.setattr(
        pool, "with_connection", lambda account, operation, retry=True: operation(HereConnection())
    )
    monkeypatch.setattr(tasks.read_manifest, "delay", lambda pk: tasks.read_manifest.apply((pk,)))


@pytest.fixture
def job(owner, cluster, tmp_path):
    factories.account(cluster, owner, "alice")
    job = factories.training_job(owner, cluster)
    job.work_dir = str(tmp_path / "work")
    job.save(update_fields=["work_dir"])
    os.makedirs(job.work_dir)
    return job


def test_an_unchanged_script_registers_sets_an_alias_and_loads_in_place(
    live_server, job, here, tmp_path
):
    done = run_script(live_server.url, job, ingest.issue_token(job), REGISTER, job.work_dir)
    answer = answer_of(done)
    version = ModelVersion.objects.get(model__name="digits")
    files = f"{job.work_dir}/mlflow-artifacts/{answer['run_id']}/model"
    # Registered where the files are, checked, nothing copied.
    assert version.path == files and version.job == job and version.cluster == job.cluster
    assert version.status == "READY" and answer["status"] == "READY"
    weights = bytes(range(256)) * 40
    assert [(n, s) for n, s, _ in version.manifest] == [("MLmodel", 33), ("weights.bin", 10240)]
    assert version.total_bytes == 33 + 10240 and len(version.manifest_sha256) == 64
    assert version.manifest[1][2] == hashlib.sha256(weights).hexdigest()
    assert version.run.run_id == answer["run_id"] and version.metrics == {"accuracy": 0.95}
    assert version.registered_by == job.owner and version.model.owner == job.owner
    assert version.model.project is None
    # models:/digits@champion is the folder itself.
    assert answer["where"] == files and answer["aliases"] == ["champion"]
    assert answer["found"] == ["digits"] and answer["description"] == "first"
    assert answer["tags"] == {"data": "sklearn-digits"}
    # MLflow's client wrote its registered_model_meta there; the manifest leaves it out.
    assert os.path.exists(f"{files}/registered_model_meta")
    # The file manager refuses to delete or move the files, or a folder holding them.
    for path in (files, f"{files}/weights.bin", job.work_dir):
        with pytest.raises(Failure, match="model digits version 1"):
            unprotected(job.cluster_id, path)
    assert unprotected(job.cluster_id, f"{job.work_dir}/other") == f"{job.work_dir}/other"


LOGGED_MODEL = textwrap.dedent(
    """
    import json
    import mlflow
    from mlflow import MlflowClient

    mlflow.set_experiment("llm")
    client = MlflowClient()
    with mlflow.start_run() as run:
        model = mlflow.initialize_logged_model(name="tiny", model_type="llm")
        mlflow.log_metric("loss", 0.5, step=7, model_id=model.model_id)
        path = model.artifact_location
    import os
    os.makedirs(path, exist_ok=True)
    open(os.path.join(path, "config.json"), "w").write("{}")
    mlflow.finalize_logged_model(model.model_id, "READY")
    version = mlflow.register_model(f"models:/{model.model_id}", "tiny-llm")
    print("ANSWER", json.dumps({"version": version.version, "model_id": model.model_id,
        "path": path, "source": version.source}))
    """
)


def test_a_logged_model_registers_from_its_own_folder(live_server, job, here):
    answer = answer_of(
        run_script(live_server.url, job, ingest.issue_token(job), LOGGED_MODEL, job.work_dir)
    )
    logged = LoggedModel.objects.get(model_id=answer["model_id"])
    assert logged.status == LoggedModel.Status.READY and logged.model_type == "llm"
    version = ModelVersion.objects.get(model__name="tiny-llm")
    assert version.logged_model == logged and version.path == answer["path"]
    assert answer["path"].startswith(f"{job.work_dir}/mlflow-artifacts/models/m-")
    assert [n for n, _, _ in version.manifest] == ["config.json"]


def test_another_persons_job_sees_none_of_it(live_server, job, here, cluster, tmp_path):
    answer_of(run_script(live_server.url, job, ingest.issue_token(job), REGISTER, job.work_dir))
    other = factories.user("other", "other-pass-123")
    factories.account(cluster, other, "bob")
    theirs = factories.training_job(other, cluster)
    peek = textwrap.dedent(
        """
        import json
        from mlflow import MlflowClient
        from mlflow.exceptions import MlflowException
        client = MlflowClient()
        found = [m.name for m in client.search_registered_models()]
        try:
            client.get_model_version_by_alias("digits", "champion")
            got = "yes"
        except MlflowException as exc:
            got = exc.error_code
        print("ANSWER", json.dumps({"found": found, "got": got}))
        """
    )
    seen = answer_of(
        run_script(live_server.url, theirs, ingest.issue_token(theirs), peek, tmp_path)
    )
    assert seen == {"found": [], "got": "RESOURCE_DOES_NOT_EXIST"}
    assert RegisteredModel.objects.filter(owner=other).count() == 0


def test_a_version_whose_manifest_task_was_lost_is_read_again(job, monkeypatch):
    """A broker restarted empty loses the queued read: the beat's sweep sends it again,
    and the version reaches READY."""
    model = service.create_model(job.owner, None, "lost")
    files = f"{job.work_dir}/ckpt"
    os.makedirs(files)
    with open(f"{files}/weights", "wb") as out:
        out.write(b"w" * 10)
    monkeypatch.setattr(tasks.read_manifest, "delay", lambda pk: None)  # the message lost
    version = service.register(job.owner, model, service.files_of(job, files), source=files)
    assert tasks.resend_pending() == 0  # not yet: it may still be on its way
    ModelVersion.objects.filter(pk=version.pk).update(
        updated_at=timezone.now() - timedelta(minutes=3)
    )
    sent: list[int] = []
    monkeypatch.setattr(tasks.read_manifest, "delay", sent.append)
    assert tasks.resend_pending() == 1 and sent == [version.pk]
    monkeypatch.setattr(
        pool, "with_connection", lambda account, operation, retry=True: operation(HereConnection())
    )
    tasks.read_manifest.apply((version.pk,))
    version.refresh_from_db()
    assert version.status == "READY" and version.manifest == [
        ["weights", 10, hashlib.sha256(b"w" * 10).hexdigest()]
    ]
    assert tasks.resend_pending() == 0


def test_hostile_names_sources_and_filters_get_mlflows_errors_and_change_nothing(
    live_server, job, here
):
    from tests.tracking.test_mlflow_api import call

    token = ingest.issue_token(job)

    def ask(endpoint: str, body: dict) -> tuple[int, str, str]:
        status, answer = call(live_server.url, job, token, endpoint, body)
        return status, answer.get("error_code", ""), answer.get("message", "")

    for name in ("a/b", "line\nbreak", " padded", "x" * 257, ""):
        status, code, _ = ask("registered-models/create", {"name": name})
        assert (status, code) == (400, "INVALID_PARAMETER_VALUE"), name
    assert ask("registered-models/create", {"name": "digits"})[0] == 200
    assert ask("registered-models/create", {"name": "digits"})[1] == "RESOURCE_ALREADY_EXISTS"
    outside = {"name": "digits", "source": "/etc"}
    status, code, message = ask("model-versions/create", outside)
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE") and "work directories" in message
    climbing = {"name": "digits", "source": f"{job.work_dir}/../../etc"}
    assert ask("model-versions/create", climbing)[1] == "INVALID_PARAMETER_VALUE"
    nul = {"name": "digits", "source": f"{job.work_dir}/a\x00b"}
    assert ask("model-versions/create", nul)[0] == 400
    assert ask("model-versions/create", {"name": "digits", "source": "runs:/" + "f" * 32})[1] == (
        "RESOURCE_DOES_NOT_EXIST"
    )
    for version in ("1e9", "-1", "9" * 30, "1; DROP"):
        body = {"name": "digits", "alias": "champion", "version": version}
        assert ask("registered-models/alias", body)[0] in (400, 404), version
    for alias in ("latest", "v12", "a b", "x" * 256):
        body = {"name": "digits", "alias": alias, "version": "1"}
        assert ask("registered-models/alias", body)[0] in (400, 404), alias
    for hostile in ("name = 'x' OR 1=1", "name LIKE '%' ; --", "tags.`k` = 'v' OR x"):
        query = urllib.parse.urlencode({"filter": hostile})
        status, answer = call(live_server.url, job, token, f"registered-models/search?{query}")
        assert answer["error_code"] == "INVALID_PARAMETER_VALUE", hostile
    assert ModelVersion.objects.count() == 0
    assert list(RegisteredModel.objects.values_list("name", flat=True)) == ["digits"]
