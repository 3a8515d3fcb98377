"""MLflow's own tracking server and UI (the full `mlflow` package, deploy/mlflow-server.lock,
installed by `make mlflow-server` into var/mlflow-server) on both sides of #46:

- an ``mlruns`` folder the portal exports opens in it: the UI's page loads, and the
  calls its pages make (``/ajax-api/2.0/mlflow/...``) list the runs and give every point;
- runs logged to it by MLflow's client import from it (``manage.py import_runs URL``),
  every point as logged, once."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from devtools.run_samples import METRICS, params, value
from jobs.models import Job
from metrics.models import MetricPoint, MetricSeries
from tests import factories
from tests.livestack import free_port
from tests.polling import until
from tests.tracking.test_exports import logged_job
from tests.tracking.test_imports import points_of
from tracking import exports
from tracking.imports import service

pytestmark = pytest.mark.django_db

MLFLOW = Path(__file__).resolve().parents[2] / "var" / "mlflow-server" / "bin" / "mlflow"
STEPS = 30


@contextmanager
def mlflow_server(store: str, tmp_path: Path):
    assert MLFLOW.exists(), f"{MLFLOW} missing: `make mlflow-server` installs MLflow's server"
    port = free_port()
    log = open(tmp_path / "mlflow-server.log", "wb")
    server = subprocess.Popen(
        [
            str(MLFLOW),
            "server",
            "--backend-store-uri",
            store,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
            "--default-artifact-root",
            (tmp_path / "artifacts").as_uri(),
        ],
        env={**os.environ, "MLFLOW_ALLOW_FILE_STORE": "true"},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        until(
            lambda: server.poll() is None and get(f"{url}/health") == "OK",
            120,
            lambda: (
                f"MLflow's server to answer: {(tmp_path / 'mlflow-server.log').read_text()[-2000:]}"
            ),
            interval=0.5,
            ignoring=(urllib.error.URLError, ConnectionError),
        )
        yield url
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)
        log.close()


def get(url: str):
    with urllib.request.urlopen(url, timeout=30) as response:
        text = response.read().decode()
    return json.loads(text) if text.startswith("{") else text


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_an_exported_mlruns_folder_opens_in_mlflows_ui(owner, cluster, tmp_path):
    job = logged_job(owner, cluster, name="resnet-export")
    data = b"".join(exports.mlruns(owner).body)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        archive.extractall(tmp_path / "out", filter="data")
    (store,) = (tmp_path / "out").rglob("mlruns")
    with mlflow_server(store.as_uri(), tmp_path) as url:
        page = get(f"{url}/")
        assert "<title>MLflow</title>" in page or "mlflow" in page.lower()
        api = f"{url}/ajax-api/2.0/mlflow"
        experiments = post(f"{api}/experiments/search", {"max_results": 100})["experiments"]
        ids = [e["experiment_id"] for e in experiments]
        runs = post(f"{api}/runs/search", {"experiment_ids": ids})["runs"]
        (run,) = [r for r in runs if r["info"]["run_name"] == "resnet-export"]
        tags = {t["key"]: t["value"] for t in run["data"]["tags"]}
        assert tags["portal.job_id"] == str(job.pk)
        query = urllib.parse.urlencode({"run_id": run["info"]["run_id"], "metric_key": "loss"})
        history = get(f"{api}/metrics/get-history?{query}")["metrics"]
        series = MetricSeries.objects.get(job=job, key="loss", rank=0, attempt=0, system=False)
        stored = MetricPoint.objects.filter(series=series).order_by("seq")
        assert [(m["step"], m["value"]) for m in history] == [(p.step, p.value) for p in stored]


def test_runs_on_an_mlflow_tracking_server_import_once(tmp_path):
    with mlflow_server(f"sqlite:///{tmp_path / 'server.db'}", tmp_path) as url:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "devtools.run_samples",
                str(tmp_path / "logged"),
                "--mlflow=3",
                f"--steps={STEPS}",
                f"--server={url}",
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
        ann = factories.user("ann")
        first = service.import_uri(ann, url)
        again = service.import_uri(ann, url)
    assert (len(first.imported), first.refused) == (3, [])
    assert (len(again.imported), again.already) == (0, 3)
    for job in Job.objects.filter(owner=ann):
        n = int(job.name.rsplit("-", 1)[1])
        assert job.params == params(n) and job.imported.origin == url
        for key in METRICS:
            assert points_of(job, key) == [(s, value(key, n, s)) for s in range(STEPS)]


def test_a_dead_server_fails_the_import_in_seconds_with_its_reason():
    report = service.import_uri(factories.user("ann"), f"http://127.0.0.1:{free_port()}")
    assert report.imported == [] and "cannot be read as an MLflow store" in report.refused[0]
