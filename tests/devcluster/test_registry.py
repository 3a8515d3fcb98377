"""The model registry on the real path (#62): an unchanged MLflow script trains the digits
model in a job on the dev cluster (scikit-learn in the cluster's PyTorch environment), logs
it, registers it and sets the alias ``champion``; the manifest is read over SSH as the
person; a second job loads ``models:/digits@champion`` where the files sit and predicts
the same."""

from __future__ import annotations

import json

import pytest

from clusters import pool
from registry import manifest, tasks
from registry.models import ModelVersion
from tests.devcluster.helpers import remote
from tests.devcluster.test_mlflow_jobs import completed, need_training_libraries

TRAIN = """torch-python - <<'EOF'
import json
import mlflow
from mlflow import MlflowClient
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

X, y = load_digits(return_X_y=True)
Xtr, Xte, ytr, yte = train_test_split(X, y, random_state=0)
mlflow.set_experiment("digits")
with mlflow.start_run() as run:
    model = LogisticRegression(max_iter=300).fit(Xtr, ytr)
    mlflow.log_metric("accuracy", model.score(Xte, yte))
    mlflow.sklearn.log_model(model, name="model", input_example=Xte[:2])
version = mlflow.register_model(f"runs:/{run.info.run_id}/model", "digits")
MlflowClient().set_registered_model_alias("digits", "champion", version.version)
json.dump(model.predict(Xte[:50]).tolist(), open("predicted.json", "w"))
EOF"""

LOAD = """torch-python - <<'EOF'
import json
import mlflow
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

X, y = load_digits(return_X_y=True)
_, Xte, _, _ = train_test_split(X, y, random_state=0)
model = mlflow.pyfunc.load_model("models:/digits@champion")
json.dump([int(v) for v in model.predict(Xte[:50])], open("predicted.json", "w"))
EOF"""


@pytest.fixture
def reachable(live_server, settings):
    """The jobs' node reaches this test's live server and has the libraries."""
    need_training_libraries()
    settings.PORTAL_URL = live_server.url


@pytest.fixture
def manifest_in_request(monkeypatch):
    """The manifest task run by the request that registers (this test has no worker):
    the task itself, over SSH to the dev cluster as the person."""
    monkeypatch.setattr(tasks.read_manifest, "delay", lambda pk: tasks.read_manifest.apply((pk,)))


@pytest.mark.django_db
def test_a_model_registered_by_an_unchanged_script_loads_by_its_alias_in_another_job(
    devcluster,
    owner,
    reachable,
    manifest_in_request,
):
    trained = completed(owner, devcluster, TRAIN)
    version = ModelVersion.objects.select_related("model", "logged_model").get()
    assert (version.model.name, version.version, version.status) == ("digits", 1, "READY")
    assert version.job == trained and version.registered_by == owner
    assert version.model.aliases.get().alias == "champion"
    # The files where MLflow's client wrote them, in the job's work directory: no copy.
    assert version.logged_model is not None
    assert version.path == version.logged_model.artifact_path()
    assert version.path.startswith(f"{trained.work_dir}/mlflow-artifacts/models/m-")
    names = [name for name, _, _ in version.manifest]
    assert {"MLmodel", "model.skops", "requirements.txt"} <= set(names), names
    assert version.metrics["accuracy"] > 0.9
    account = trained.cluster_account
    # The manifest is what the files are: sha256sum over SSH agrees, file by file.
    for name, _, digest in version.manifest:
        out = remote(account, ["sha256sum", "--", f"{version.path}/{name}"])
        assert out.split()[0] == digest, name
    again = pool.with_connection(account, lambda conn: manifest.read(conn, version.path))
    assert again.digest == version.manifest_sha256

    loaded = completed(owner, devcluster, LOAD)
    first = json.loads(remote(account, ["cat", f"{trained.work_dir}/predicted.json"]))
    second = json.loads(remote(account, ["cat", f"{loaded.work_dir}/predicted.json"]))
    assert second == first and len(first) == 50
    # Loaded where it sits: MLflow's client wrote its registered_model_meta there, and
    # the manifest (which leaves that file out) still matches.
    meta = remote(account, ["cat", f"{version.path}/registered_model_meta"])
    assert "model_name: digits" in meta
    after = pool.with_connection(account, lambda conn: manifest.read(conn, version.path))
    assert after.digest == version.manifest_sha256
