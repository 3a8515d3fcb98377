"""The MLflow-compatible tracking API (#46) on its real path: an unchanged script using
MLflow's own client (mlflow-skinny, the version pyproject.toml pins) logs into a job
through Django's live server with the job's token, as a job on the cluster does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request

import pytest

from jobs.models import Job
from metrics import ingest
from metrics.models import MetricPoint, MetricSeries
from tests import factories
from tracking.models import TrackedExperiment, TrackedRun

pytestmark = pytest.mark.django_db(transaction=True)

SCRIPT = textwrap.dedent(
    """
    import math
    import mlflow

    mlflow.set_experiment("resnet")
    with mlflow.start_run(run_name="baseline") as run:
        mlflow.log_params({"lr": 0.1, "optimizer": "sgd", "model/depth": 50})
        mlflow.set_tag("team", "vision")
        for step in range(50):
            mlflow.log_metric("loss", 1 / (step + 1), step=step)
        mlflow.log_metrics({"acc": 0.9, "val/loss": 0.25, "diverged": math.nan}, step=49)
        print("RUN", run.info.run_id, run.info.artifact_uri)
    client = mlflow.MlflowClient()  # reading back, as callbacks and notebooks do
    history = client.get_metric_history(run.info.run_id, "loss")
    print("HISTORY", len(history), history[-1].step, history[-1].value)
    print("LATEST", client.get_run(run.info.run_id).data.metrics)
    """
)


def run_script(url: str, job, token: str, script: str = SCRIPT) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": f"{url}/api/v1/jobs/{job.pk}/metrics/mlflow",
        "MLFLOW_TRACKING_TOKEN": token,
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
    }
    return subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )


def call(url: str, job, token: str, endpoint: str, body: dict | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{url}/api/v1/jobs/{job.pk}/metrics/mlflow/api/2.0/mlflow/{endpoint}",
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"}
        | ({"Authorization": f"Bearer {token}"} if token else {}),
        method="GET" if body is None else "POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def points(job, key: str) -> list[tuple[int, float]]:
    series = MetricSeries.objects.get(job=job, key=key)
    return list(
        MetricPoint.objects.filter(series=series).order_by("step").values_list("step", "value")
    )


def test_an_unchanged_mlflow_script_logs_into_its_job(live_server, owner, cluster):
    job = factories.training_job(owner, cluster)
    job.work_dir = "/home/alice/portal-jobs/j1"
    job.save(update_fields=["work_dir"])
    done = run_script(live_server.url, job, ingest.issue_token(job))
    assert done.returncode == 0, done.stderr[-3000:]
    run = TrackedRun.objects.get(job=job)
    printed = [line for line in done.stdout.splitlines() if line.startswith("RUN ")]
    _, run_id, artifacts = printed[0].split()
    assert run.run_id == run_id and run.number == 1
    # log_artifact writes into the job's work directory on the cluster, by the client.
    assert artifacts == f"file:///home/alice/portal-jobs/j1/mlflow-artifacts/{run_id}"
    assert run.name == "baseline" and run.status == "FINISHED" and run.end_time
    assert run.experiment.name == "resnet" and run.experiment.owner == owner
    assert run.params == {"lr": "0.1", "optimizer": "sgd", "model/depth": "50"}
    assert run.tags["team"] == "vision" and run.tags["mlflow.runName"] == "baseline"
    assert points(job, "loss") == [(s, 1 / (s + 1)) for s in range(50)]
    assert points(job, "acc") == [(49, 0.9)] and points(job, "val/loss") == [(49, 0.25)]
    assert not MetricSeries.objects.filter(job=job, key="diverged").exists()  # NaN: left out
    assert "HISTORY 50 49 0.02\n" in done.stdout
    assert "LATEST {'acc': 0.9, 'loss': 0.02, 'val/loss': 0.25}" in done.stdout
    series = MetricSeries.objects.get(job=job, key="loss")
    assert series.points == 50 and series.rank == 0 and series.attempt == 0
    # The link MLflow prints ("View run at <tracking URI>/#/experiments/...") opens the job.
    assert f"{live_server.url}/api/v1/jobs/{job.pk}/metrics/mlflow/#/experiments/" in done.stdout
    request = urllib.request.Request(f"{live_server.url}/api/v1/jobs/{job.pk}/metrics/mlflow/")
    opener = urllib.request.build_opener(NoRedirect)
    with pytest.raises(urllib.error.HTTPError) as moved:
        opener.open(request, timeout=30)
    assert moved.value.code == 302 and moved.value.headers["Location"] == f"/jobs/{job.pk}/"


def test_a_second_run_of_a_job_logs_apart_and_a_retry_is_stored_once(live_server, owner, cluster):
    job = factories.training_job(owner, cluster)
    token = ingest.issue_token(job)
    assert run_script(live_server.url, job, token).returncode == 0
    status, created = call(live_server.url, job, token, "runs/create", {"experiment_id": "0"})
    assert status == 200
    second = created["run"]["info"]["run_id"]
    batch = {
        "run_id": second,
        "metrics": [{"key": "loss", "value": 0.5, "timestamp": 1_700_000_000_000, "step": 1}],
    }
    for _ in range(3):  # a client retrying a batch whose answer it lost
        assert call(live_server.url, job, token, "runs/log-batch", batch)[0] == 200
    assert points(job, "r2/loss") == [(1, 0.5)]
    # The first run's history a page at a time, as the client follows the pages.
    run_id = TrackedRun.objects.get(job=job, number=1).run_id
    seen, after = [], ""
    while True:
        query = f"metrics/get-history?run_id={run_id}&metric_key=loss&max_results=20"
        status, page = call(live_server.url, job, token, query + (after and f"&page_token={after}"))
        assert status == 200
        seen += [m["step"] for m in page["metrics"]]
        after = page.get("next_page_token", "")
        if not after:
            break
    assert seen == list(range(50))
    assert len(points(job, "loss")) == 50  # the first run's curve is untouched
    assert TrackedExperiment.objects.filter(owner=owner, name="Default").count() == 1


def test_a_token_reaches_only_its_own_job_and_runs(live_server, owner, outsider, cluster):
    mine, theirs = factories.training_job(owner, cluster), factories.training_job(outsider, cluster)
    my_token, their_token = ingest.issue_token(mine), ingest.issue_token(theirs)
    status, created = call(live_server.url, mine, my_token, "runs/create", {})
    run_id = created["run"]["info"]["run_id"]
    # Their token on my job's path, no token, and my run through their job: refused.
    assert call(live_server.url, mine, their_token, "runs/get?run_id=" + run_id)[0] == 403
    status, answer = call(live_server.url, mine, "", "runs/get?run_id=" + run_id)
    assert status == 401 and "MLFLOW_TRACKING_TOKEN" in answer["message"]
    status, answer = call(live_server.url, theirs, their_token, "runs/get?run_id=" + run_id)
    assert status == 404 and answer["error_code"] == "RESOURCE_DOES_NOT_EXIST"
    # Experiments are per person: their "resnet" is not mine.
    call(live_server.url, theirs, their_token, "experiments/create", {"name": "resnet"})
    status, answer = call(
        live_server.url, mine, my_token, "experiments/get-by-name?experiment_name=resnet"
    )
    assert status == 404


def test_bad_input_gets_mlflows_errors_and_changes_nothing(live_server, owner, cluster, settings):
    job = factories.training_job(owner, cluster)
    token = ingest.issue_token(job)
    run_id = call(live_server.url, job, token, "runs/create", {})[1]["run"]["info"]["run_id"]

    def batch(**fields):
        return call(live_server.url, job, token, "runs/log-batch", {"run_id": run_id, **fields})

    status, answer = batch(params=[{"key": "lr", "value": "0.1"}])
    assert status == 200
    status, answer = batch(params=[{"key": "lr", "value": "0.2"}])  # MLflow's rule
    assert status == 400 and "Changing param values is not allowed" in answer["message"]
    many = [{"key": "m", "value": 1, "timestamp": 1, "step": s} for s in range(1001)]
    status, answer = batch(metrics=many)
    assert status == 400 and "at most 1000 metrics" in answer["message"]
    status, answer = batch(metrics=[{"key": "m", "value": "high", "timestamp": 1}])
    assert status == 400 and answer["error_code"] == "INVALID_PARAMETER_VALUE"
    status, answer = batch(tags=[{"key": "note", "value": "x\x00y"}])
    assert status == 400 and "NUL" in answer["message"]
    status, answer = call(live_server.url, job, token, "traces/start", {"name": "m"})
    assert status == 404 and answer["error_code"] == "ENDPOINT_NOT_FOUND"
    assert "runs/log-batch" in answer["message"]
    assert "POST model-versions/create" in answer["message"]  # the registry's, listed too
    status, answer = call(live_server.url, job, token, "model-versions/create", {"name": "m"})
    assert status == 404 and answer["error_code"] == "RESOURCE_DOES_NOT_EXIST"
    assert answer["message"] == "Registered Model with name=m not found"
    settings.PORTAL_METRICS_MAX_POINTS = 10
    status, answer = batch(metrics=many[:20])
    assert status == 400 and answer["error_code"] == "RESOURCE_EXHAUSTED"
    assert not MetricSeries.objects.filter(job=job, key="m").exists()
    run = TrackedRun.objects.get(run_id=run_id)
    assert run.params == {"lr": "0.1"} and "note" not in run.tags
    # Once the job has ended its token logs nothing more.
    job.transition(Job.State.COMPLETED)
    status, answer = batch(params=[{"key": "late", "value": "1"}])
    assert status == 400 and answer == {
        "error_code": "INVALID_STATE",
        "message": f"Job {job.pk} has ended.",
    }
