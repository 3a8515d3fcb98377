"""#46's "an exported mlruns folder opens in MLflow's UI": the folder the portal exports,
served by MLflow's own server (`make mlflow-server`), drawn by MLflow's own web UI in
Chromium: the experiment's run list names the run, and the run's page its metrics,
parameters and tags."""

from __future__ import annotations

import io
import tarfile

import pytest

from metrics import ingest
from tests import factories
from tests.tracking.test_mlflow_server import mlflow_server, post
from tracking import exports

pytestmark = pytest.mark.django_db


def test_an_exported_mlruns_folder_is_drawn_by_mlflows_own_ui(browser, owner, tmp_path):
    cluster = factories.cluster("c1")
    factories.partition(cluster, "cpu")
    job = factories.compared_run(
        owner, cluster, name="resnet-ui", params={"lr": 0.01}, tags=("baseline",)
    )
    ingest.ingest(
        job, [ingest.Record(s, 0, 0, s, 1.7e9 + s, {"val_loss": 1 / (s + 1)}) for s in range(20)]
    )
    data = b"".join(exports.mlruns(owner).body)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        archive.extractall(tmp_path / "out", filter="data")
    (store,) = (tmp_path / "out").rglob("mlruns")
    with mlflow_server(store.as_uri(), tmp_path) as url:
        api = f"{url}/ajax-api/2.0/mlflow"
        experiments = post(f"{api}/experiments/search", {"max_results": 10})["experiments"]
        ids = [e["experiment_id"] for e in experiments]
        (run,) = post(f"{api}/runs/search", {"experiment_ids": ids})["runs"]
        experiment, run_id = run["info"]["experiment_id"], run["info"]["run_id"]
        page = browser.new_page()
        try:
            # MLflow 3's "Model training" view of the experiment: its runs table.
            page.goto(f"{url}/#/experiments/{experiment}/runs", wait_until="load")
            page.get_by_text("resnet-ui").first.wait_for(timeout=60_000)
            assert "1 matching run" in page.inner_text("body")
            page.goto(f"{url}/#/experiments/{experiment}/runs/{run_id}", wait_until="load")
            page.get_by_text("val_loss").first.wait_for(timeout=60_000)
            body = page.inner_text("body")
            assert "lr" in body and "0.01" in body
            assert "portal.job_id" in body or "baseline" in body
        finally:
            page.close()
