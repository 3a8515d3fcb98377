"""Serving on the real path (#62): a job on the dev cluster saves the digits model with
MLflow; it is registered (its manifest read over SSH); through the whole stack's REST
API its owner serves it and makes a key; the Slurm job runs MLflow's own scoring server
behind the session guard, and HAProxy carries /invocations at the endpoint's stable
address with the key: the same predictions as the model made in its job. A revoked key
is refused within a second; after its idle minute the endpoint's Slurm job is gone, and
the next request with a key starts it again and is answered: held while the job starts,
then sent on (307) to the model server, or 503 with Retry-After when the hold is over."""

from __future__ import annotations

import json
import ssl
import time
from pathlib import Path

import httpx
import pytest

from endpoints.models import Endpoint
from identity.tokens import ApiToken
from jobs.models import Job
from registry import api as registry_api
from registry import tasks as registry_tasks
from tests import polling
from tests.devcluster.helpers import remote
from tests.devcluster.test_mlflow_jobs import completed, need_training_libraries
from tests.livestack import LiveStack

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]

SAVE = """torch-python - <<'EOF'
import json
import mlflow.sklearn
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

X, y = load_digits(return_X_y=True)
Xtr, Xte, ytr, yte = train_test_split(X, y, random_state=0)
model = LogisticRegression(max_iter=300).fit(Xtr, ytr)
mlflow.sklearn.save_model(model, "model")
json.dump(Xte[:50].tolist(), open("inputs.json", "w"))
json.dump(model.predict(Xte[:50]).tolist(), open("predicted.json", "w"))
EOF"""

# MLflow's scoring server from the dev cluster's PyTorch environment (its `mlflow models
# serve` starts `uvicorn` from PATH).
SERVE = (
    "env PATH=/opt/portal-devcluster/torch/bin:/usr/local/bin:/usr/bin:/bin "
    "mlflow models serve --env-manager local --host 127.0.0.1 --port {port} --model-uri"
)


@pytest.fixture
def stack(devcluster, tmp_path):
    need_training_libraries()
    env = {
        "PORTAL_SERVE_MLFLOW_COMMAND": SERVE,
        "PORTAL_ENDPOINT_IDLE_INTERVAL": "5",
        # held up to 90 s: the Slurm job and MLflow's server start within it here
        "PORTAL_ENDPOINT_HOLD_SECONDS": "90",
    }
    live = LiveStack(tmp_path, env=env).start()
    yield live
    live.stop()


def running(endpoint_id: int, timeout: float = 180) -> Endpoint:
    def ready():
        endpoint = Endpoint.objects.get(pk=endpoint_id)
        if endpoint.state == "failed":
            raise AssertionError(f"the endpoint failed: {endpoint.message}")
        return endpoint if endpoint.state == "running" else None

    return polling.until(ready, timeout, "the endpoint to run", interval=1)


@pytest.mark.timeout(600)
def test_a_served_version_answers_its_predictions_with_a_key_and_wakes_when_stopped(
    stack, devcluster, owner, monkeypatch, settings
):
    settings.PORTAL_URL = stack.url
    job = completed(owner, devcluster, SAVE)
    account = job.cluster_account
    monkeypatch.setattr(
        registry_tasks.read_manifest, "delay", lambda pk: registry_tasks.read_manifest.apply((pk,))
    )
    version = registry_api.register(owner, {"job": job.pk, "path": "model", "name": "digits"})
    version.refresh_from_db()
    assert version.status == "READY", version.status_message
    inputs = json.loads(remote(account, ["cat", f"{job.work_dir}/inputs.json"]))
    expected = json.loads(remote(account, ["cat", f"{job.work_dir}/predicted.json"]))

    _, token = ApiToken.issue(owner, "serve")
    api = httpx.Client(base_url=f"{stack.url}/api/v1", headers={"Authorization": f"Bearer {token}"})
    made = api.post(
        "/endpoints/",
        json={
            "model": version.model_id,
            "version": 1,
            "name": "digits",
            "memory_gb": 1,
            "idle_minutes": 1,
        },
    )
    assert made.status_code == 201, made.text
    endpoint_id, url = made.json()["id"], made.json()["url"]
    assert api.post(f"/endpoints/{endpoint_id}/start/").status_code == 202
    key = api.post("/endpoint-keys/", json={"name": "program", "rate": 20}).json()
    endpoint = running(endpoint_id)
    name = f"ep-{endpoint.public_id}.sessions.localhost"
    assert url == f"https://{name}:{stack.proxy_port}"
    # HAProxy's TLS, checked against the dev CA (connecting to 127.0.0.1 as that name).
    trusted = ssl.create_default_context(cafile=str(Path(settings.TLS_DIR) / "ca.pem"))

    proxy = httpx.Client(verify=trusted, timeout=120, follow_redirects=True)

    def invoke(secret: str) -> httpx.Response:
        return proxy.post(
            f"https://127.0.0.1:{stack.proxy_port}/invocations",
            headers={"Host": f"{name}:{stack.proxy_port}", "Authorization": f"Bearer {secret}"},
            json={"inputs": inputs},
            extensions={"sni_hostname": name},
        )

    answer = invoke(key["key"])
    assert answer.status_code == 200, answer.text
    assert answer.json()["predictions"] == expected and len(expected) == 50
    assert invoke("pe_" + "x" * 43).status_code == 401

    revoked = api.post(f"/endpoint-keys/{key['id']}/revoke/")
    assert revoked.status_code == 200 and revoked.json()["live"] is False
    started = time.monotonic()
    assert invoke(key["key"]).status_code == 401
    assert time.monotonic() - started < 1

    # A minute without a request: stopped by itself, its Slurm job ends; a request with a
    # key starts it again, held while it starts (the portal's bound), then answered.
    first_job = Job.objects.get(pk=endpoint.job_id)
    polling.until(
        lambda: Endpoint.objects.get(pk=endpoint_id).state == "stopped", 150, "the idle stop"
    )
    assert "1 minute without a request" in Endpoint.objects.get(pk=endpoint_id).message
    polling.until(lambda: Job.objects.get(pk=first_job.pk).is_final, 60, "the serving job to end")
    assert str(first_job.scheduler_job_id) not in remote(account, ["squeue", "-h", "-o", "%i"])
    other = api.post("/endpoint-keys/", json={"name": "second"}).json()
    waking = invoke(other["key"])
    assert waking.status_code == 200, waking.text
    assert waking.json()["predictions"] == expected
    assert [r.status_code for r in waking.history] == [307]
    endpoint = Endpoint.objects.get(pk=endpoint_id)
    assert endpoint.state == "running" and endpoint.job_id != first_job.pk
    assert api.post(f"/endpoints/{endpoint_id}/stop/").status_code == 200

