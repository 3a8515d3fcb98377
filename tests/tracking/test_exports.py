"""Exports out of the portal (#46) on their real paths: the downloads read back by
TensorBoard's own event reader and by MLflow's own client (mlflow-skinny, the pinned
version), and only ever the runs the person may see (or owns, for mlruns)."""

from __future__ import annotations

import csv
import io
import os
import tarfile
import tempfile

import numpy as np
import pytest
import yaml
from django.urls import include, path, reverse
from rest_framework.test import APIClient

from metrics import ingest
from metrics.models import MetricPoint, MetricSeries
from tests import factories
from tracking import exports
from tracking.models import TrackedExperiment, TrackedRun

# The exports' URLs beside the portal's own (portal/urls.py includes them at its root too).
urlpatterns = [path("", include("tracking.export_urls")), path("", include("portal.urls"))]

pytestmark = [pytest.mark.django_db, pytest.mark.urls(__name__)]

T0 = 1_700_000_000.0


def record(step, metrics, *, rank=0, attempt=0, system=False, seq=None):
    """A point logged at a wall time with a fraction of a second in it."""
    when = T0 + step * 1.25 + rank * 0.001 + 0.123
    seq = step if seq is None else seq
    return ingest.Record(seq, attempt, rank, step, when, metrics, system, "node1" if system else "")


def logged_job(owner, cluster, name="resnet, lr=0.1", **fields):
    """A run with every kind of series: rank 0 (two keys, one a folder of the other's
    name in MLflow's files), rank 1, a second attempt, system samples (one with ``@``)."""
    job = factories.compared_run(owner, cluster, name=name, **fields)
    records = [record(s, {"loss": 1 / (s + 1) + 1e-9, "val": s / 7}) for s in range(30)]
    records += [record(s, {"val/loss": 0.3 - s / 1000}) for s in range(0, 30, 3)]
    records += [record(s, {"loss": 2 / (s + 2)}, rank=1) for s in range(25)]
    records += [record(s, {"loss": 0.5 / (s + 1)}, attempt=1, seq=100 + s) for s in range(10)]
    records += [
        record(s, {"sys/cpu_percent": 50.0 + s, "sys/gpu0_util_percent@node1": 90.5}, system=True)
        for s in range(5)
    ]
    ingest.ingest(job, records)
    return job


def stored(job) -> dict[str, list[tuple[int, float, float]]]:
    """Each series' (step, value, time), by its exported name, read from the database."""
    out = {}
    for series in MetricSeries.objects.filter(job=job):
        points = MetricPoint.objects.filter(series=series).order_by("step", "seq")
        out[exports.series_name(series)] = list(points.values_list("step", "value", "time"))
    return out


def body(response) -> bytes:
    assert response.status_code == 200, getattr(response, "content", b"")[:500]
    return b"".join(response.streaming_content)


def read_events(folder) -> dict[str, list[tuple[int, float, float]]]:
    """The scalars of the event files in ``folder``, as TensorBoard's own loader reads them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    events.Reload()
    return {
        tag: [(e.step, e.value, e.wall_time) for e in events.Scalars(tag)]
        for tag in events.Tags()["scalars"]
    }


def as_tensorboard(points) -> list[tuple[int, float, float]]:
    """TensorBoard's scalars are 32-bit floats: the values as it stores them."""
    return [(step, float(np.float32(value)), when) for step, value, when in points]


def extract(data: bytes, into) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        names = archive.getnames()
        archive.extractall(into, filter="data")
    return names


@pytest.fixture
def small_batches(monkeypatch):
    """Batches of 7 points: every export flushes and sends many times, as a big job does."""
    monkeypatch.setattr(exports, "BATCH", 7)


# -- TensorBoard -----------------------------------------------------------------------------


def test_a_jobs_event_file_reads_back_as_the_same_scalars(
    client, owner, cluster, tmp_path, small_batches
):
    job = logged_job(owner, cluster)
    client.force_login(owner)
    response = client.get(reverse("job-metrics-export-tensorboard", args=[job.pk]))
    filename = f"events.out.tfevents.{int(job.created_at.timestamp()):010d}.portal-job-{job.pk}"
    assert response["Content-Disposition"] == f'attachment; filename="{filename}"'
    (tmp_path / filename).write_bytes(body(response))
    scalars = read_events(tmp_path)
    expected = stored(job)
    assert set(scalars) == {
        "loss",
        "val",
        "val/loss",
        "rank1/loss",
        "attempt2/loss",
        "sys/cpu_percent",
        "sys/gpu0_util_percent@node1",
    }
    for tag, points in expected.items():
        assert scalars[tag] == as_tensorboard(points), tag
    assert len(scalars["loss"]) == 30 and scalars["loss"][3][2] == T0 + 3 * 1.25 + 0.123


def test_the_api_sends_the_same_file_and_hides_others_jobs(owner, outsider, cluster):
    job = logged_job(owner, cluster)
    url = f"/api/v1/jobs/{job.pk}/metrics/tensorboard/"
    mine = body(factories.api_client(owner, scopes="read").get(url, HTTP_ACCEPT="text/html"))
    assert mine[:100].count(b"brain.Event:2") == 1
    assert factories.api_client(outsider, scopes="read").get(url).status_code == 404
    assert APIClient().get(url).status_code in (401, 403)


def test_someone_elses_job_is_not_found_and_no_one_signed_in_goes_to_sign_in(
    client, owner, outsider, cluster
):
    job = logged_job(owner, cluster)
    url = reverse("job-metrics-export-tensorboard", args=[job.pk])
    assert client.get(url).status_code == 302
    client.force_login(outsider)
    assert client.get(url).status_code == 404


def test_a_stopped_download_leaves_no_temporary_file(
    client, owner, cluster, tmp_path, monkeypatch, small_batches
):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    job = logged_job(owner, cluster)
    client.force_login(owner)
    response = client.get(reverse("job-metrics-export-tensorboard", args=[job.pk]))
    pieces = iter(response.streaming_content)
    assert next(pieces)  # the file's first records, sent while the rest is written
    assert [p.name for p in tmp_path.iterdir()][0].startswith(exports.TMP_PREFIX)
    response.close()  # the client went away
    assert list(tmp_path.iterdir()) == []


# -- a comparison ----------------------------------------------------------------------------


@pytest.fixture
def compared(owner, outsider, cluster):
    """Two of the owner's runs tagged sweep, one not, and someone else's tagged sweep."""
    mine = [logged_job(owner, cluster, name=f"lr {lr}, sweep", tags=("sweep",)) for lr in (1, 2)]
    other = logged_job(owner, cluster, name="unrelated")
    theirs = logged_job(outsider, cluster, name="theirs", tags=("sweep",))
    return mine, other, theirs


def test_a_comparisons_csv_holds_every_point_of_exactly_its_visible_runs(client, owner, compared):
    mine, other, theirs = compared
    client.force_login(owner)
    query = {"q": "tag:sweep", "ids": f"{theirs.pk}"}
    response = client.get(reverse("compare-export-csv"), query)
    assert response["Content-Type"] == "text/csv"
    rows = list(csv.reader(io.StringIO(body(response).decode())))
    assert rows[0] == ["job", "name", "metric", "rank", "attempt", "step", "time", "value"]
    got = sorted(
        (int(j), name, key, int(rank), int(attempt), int(step), float(when), float(value))
        for j, name, key, rank, attempt, step, when, value in rows[1:]
    )
    expected = sorted(
        (job.pk, job.name, s.key, s.rank, s.attempt, step, when, value)
        for job in mine
        for s in MetricSeries.objects.filter(job=job)
        for step, value, when in MetricPoint.objects.filter(series=s).values_list(
            "step", "value", "time"
        )
    )
    assert got == expected  # values exactly (repr), names with commas quoted
    assert {r[0] for r in rows[1:]} == {str(j.pk) for j in mine}


def test_a_comparisons_csv_runs_no_formula_a_run_name_carries(client, owner, cluster):
    """Before: a run named ``=HYPERLINK(...)`` went into the comparison's CSV as it was,
    and a spreadsheet ran it as a formula. Text cells that start like a formula get a
    leading quote; numbers do not."""
    job = logged_job(owner, cluster, name='=HYPERLINK("http://evil.example","x")')
    client.force_login(owner)
    response = client.get(reverse("compare-export-csv"), {"ids": str(job.pk)})
    rows = list(csv.reader(io.StringIO(body(response).decode())))
    assert {r[1] for r in rows[1:]} == {"'" + job.name}
    assert all(float(r[-1]) == float(r[-1]) for r in rows[1:])  # values stay numbers


def test_a_comparisons_tensorboard_archive_has_a_run_folder_per_visible_job(
    client, owner, compared, tmp_path, small_batches
):
    mine, other, theirs = compared
    client.force_login(owner)
    query = {"q": "tag:sweep", "ids": f"{theirs.pk},{other.pk}"}
    response = client.get(reverse("compare-export-tensorboard"), query)
    assert response["Content-Type"] == "application/gzip"
    names = extract(body(response), tmp_path)
    folders = {n.split("/")[1] for n in names if n.count("/") == 1}
    chosen = [*mine, other]
    assert folders == {exports.job_folder(j) for j in chosen}
    assert exports.job_folder(mine[0]) == f"{mine[0].pk}-lr-1-sweep"
    for job in chosen:
        folder = tmp_path / exports.TENSORBOARD_ROOT / exports.job_folder(job)
        assert len(list(folder.iterdir())) == 1
        scalars = read_events(folder)
        assert scalars == {tag: as_tensorboard(p) for tag, p in stored(job).items()}


def test_a_bad_or_too_large_comparison_is_refused_as_the_comparison_is(
    client, owner, compared, settings
):
    client.force_login(owner)
    bad = client.get(reverse("compare-export-csv"), {"q": "param.lr<x"})
    assert bad.status_code == 400 and "wants a number" in bad.json()["error"]
    settings.PORTAL_COMPARE_MAX_RUNS = 2
    many = client.get(reverse("compare-export-tensorboard"), {"q": "lr"})
    assert many.status_code == 200  # exactly two runs: at the limit
    settings.PORTAL_COMPARE_MAX_RUNS = 1
    too_many = client.get(reverse("compare-export-tensorboard"), {"q": "lr"})
    assert too_many.status_code == 400 and "at most 1 can be compared" in too_many.json()["error"]
    api = factories.api_client(owner, scopes="read")
    refused = api.get("/api/v1/compare/csv/", {"q": "lr"})
    assert refused.status_code == 400 and "at most 1" in str(refused.json())


def test_the_api_exports_the_same_comparison(owner, compared):
    mine, _, theirs = compared
    api = factories.api_client(owner, scopes="read")
    query = {"q": "tag:sweep", "ids": str(theirs.pk)}
    rows = body(api.get("/api/v1/compare/csv/", query)).decode().splitlines()
    assert {int(r.split(",")[0]) for r in rows[1:]} == {j.pk for j in mine}
    archive = body(api.get("/api/v1/compare/tensorboard/", query))
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as opened:
        assert sum("tfevents" in n for n in opened.getnames()) == 2


# -- mlruns ------------------------------------------------------------------------------------


@pytest.fixture
def runs(owner, outsider, cluster):
    """The owner's: a job logged without MLflow (parameters, tags, a note), a job with two
    MLflow runs (one in "resnet", one in "Default": MLflow's experiment 0), a job with no
    metrics; someone else's job with metrics."""
    plain = logged_job(
        owner,
        cluster,
        name="plain run",
        params={"lr": 0.01, "optimizer": "adam", "deep": True},
        tags=("resnet", "seed=1"),
        notes="first try",
    )
    tracked = factories.compared_run(owner, cluster, name="mlflow job", params={"lr": 0.1})
    resnet = TrackedExperiment.objects.create(owner=owner, name="resnet")
    default = TrackedExperiment.objects.create(owner=owner, name="Default")
    first = TrackedRun.objects.create(
        job=tracked,
        experiment=resnet,
        number=1,
        name="baseline",
        status=TrackedRun.Status.FINISHED,
        start_time=1_700_000_000_000,
        end_time=1_700_000_100_000,
        params={"lr": "0.1", "model/depth": "50"},
        tags={"team": "vision", "mlflow.runName": "baseline", "mlflow.user": "alice"},
    )
    second = TrackedRun.objects.create(
        job=tracked, experiment=default, number=2, name="finetune", start_time=1_700_000_200_000
    )
    ingest.ingest(
        tracked,
        [record(s, {"loss": 1 / (s + 1), "r2/loss": 0.1 * s}) for s in range(12)]
        + [record(s, {"loss": 0.2 * s}, rank=1) for s in range(4)],
    )
    empty = factories.compared_run(owner, cluster, name="no metrics")
    theirs = logged_job(outsider, cluster, name="theirs")
    return {
        "plain": plain,
        "tracked": tracked,
        "first": first,
        "second": second,
        "resnet": resnet,
        "empty": empty,
        "theirs": theirs,
    }


@pytest.fixture
def mlflow_client(monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3's opt-in for mlruns

    def opened(folder):
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=f"file://{folder}/mlruns")

    return opened


def history(client, run_id: str, key: str) -> list[tuple[int, float, int]]:
    return [(m.timestamp, m.value, m.step) for m in client.get_metric_history(run_id, key)]


def as_mlflow(points) -> list[tuple[int, float, int]]:
    return [(round(when * 1000), value, step) for step, value, when in points]


def test_ones_runs_open_in_mlflows_client_as_they_were(
    client, owner, runs, tmp_path, mlflow_client, small_batches
):
    client.force_login(owner)
    response = client.get(reverse("runs-export-mlruns"))
    assert response["Content-Disposition"] == 'attachment; filename="portal-mlruns.tar.gz"'
    names = extract(body(response), tmp_path)
    mlflow = mlflow_client(tmp_path)

    experiments = {e.name: e.experiment_id for e in mlflow.search_experiments()}
    assert experiments == {"Default": "0", "resnet": str(runs["resnet"].pk)}
    found = {
        r.info.run_id: r
        for r in mlflow.search_runs(experiment_ids=list(experiments.values()), max_results=100)
    }
    plain, tracked = runs["plain"], runs["tracked"]
    first, second = runs["first"], runs["second"]
    assert set(found) == {exports.job_run_id(plain), first.run_id, second.run_id}

    # A job logged without MLflow: one run in "Default", named after the job.
    run = found[exports.job_run_id(plain)]
    assert run.info.experiment_id == "0" and run.info.run_name == "plain run"
    assert run.info.status == "FINISHED" and run.info.lifecycle_stage == "active"
    assert run.data.params == {"lr": "0.01", "optimizer": "adam", "deep": "true"}
    tags = run.data.tags
    assert tags["mlflow.runName"] == "plain run" and tags["mlflow.user"] == "owner"
    assert tags["portal.job_id"] == str(plain.pk) and tags["portal.job_uid"] == plain.uid
    assert tags["portal.tags"] == "resnet seed=1" and tags["mlflow.note.content"] == "first try"
    expected = stored(plain)
    keys = {exports.mlflow_name(k): k for k in expected}
    keys["val_/loss"] = keys.pop("val/loss")  # "val" is a file: its folder is renamed
    assert set(run.data.metrics) == set(keys)
    assert "sys/gpu0_util_percent_node1" in keys and "attempt2/loss" in keys
    for name, key in keys.items():
        assert history(mlflow, run.info.run_id, name) == as_mlflow(expected[key]), name
    assert run.data.metrics["loss"] == expected["loss"][-1][1]  # the latest, as MLflow shows

    # A job's MLflow runs: their own ids, experiments, names, params and tags.
    run = found[first.run_id]
    assert run.info.experiment_id == str(runs["resnet"].pk) and run.info.run_name == "baseline"
    assert run.info.start_time == 1_700_000_000_000 and run.info.end_time == 1_700_000_100_000
    assert run.info.user_id == "alice" and run.info.status == "FINISHED"
    assert run.data.params == {"lr": "0.1", "model/depth": "50"}
    assert run.data.tags["team"] == "vision" and run.data.tags["portal.job_id"] == str(tracked.pk)
    expected = stored(tracked)
    assert set(run.data.metrics) == {"loss", "rank1/loss"}  # rank 1 goes with the first run
    assert history(mlflow, first.run_id, "loss") == as_mlflow(expected["loss"])
    assert history(mlflow, first.run_id, "rank1/loss") == as_mlflow(expected["rank1/loss"])
    run = found[second.run_id]
    assert run.info.experiment_id == "0" and run.info.run_name == "finetune"
    assert run.info.status == "RUNNING" and set(run.data.metrics) == {"loss"}
    assert history(mlflow, second.run_id, "loss") == as_mlflow(expected["r2/loss"])

    # Only the owner's jobs with metrics.
    exported = {n.split("/")[2] for n in names if n.count("/") == 2 and "." not in n}
    assert exports.job_run_id(runs["empty"]) not in exported
    assert exports.job_run_id(runs["theirs"]) not in exported
    meta = yaml.safe_load((tmp_path / "mlruns" / "0" / "meta.yaml").read_text())
    assert meta["name"] == "Default" and meta["lifecycle_stage"] == "active"


def test_two_exports_give_the_same_ids_and_each_person_only_their_own(
    client, owner, outsider, runs, tmp_path, mlflow_client
):
    client.force_login(owner)
    once = tarfile.open(fileobj=io.BytesIO(body(client.get(reverse("runs-export-mlruns")))))
    twice = factories.api_client(owner, scopes="read").get("/api/v1/runs/mlruns/")
    again = tarfile.open(fileobj=io.BytesIO(body(twice)))
    assert once.getnames() == again.getnames()

    client.force_login(outsider)
    extract(body(client.get(reverse("runs-export-mlruns"))), tmp_path)
    mlflow = mlflow_client(tmp_path)
    assert [e.name for e in mlflow.search_experiments()] == ["Default"]
    (only,) = mlflow.search_runs(experiment_ids=["0"])
    assert only.info.run_id == exports.job_run_id(runs["theirs"])
    assert only.data.tags["portal.job_id"] == str(runs["theirs"].pk)


# -- names, archives, schema -------------------------------------------------------------------


def test_names_are_made_distinct_and_acceptable_to_mlflow():
    assert exports.unique_names(["val", "val/loss", "val/loss", "val_"], files=True) == [
        "val",
        "val_/loss",
        "val_/loss_",
        "val__",
    ]
    assert exports.unique_names(["a/b", "a"], files=True) == ["a/b", "a_"]
    assert exports.unique_names(["val", "val/loss", "val"]) == ["val", "val/loss", "val_"]
    assert exports.mlflow_name("sys/gpu0_util@node1") == "sys/gpu0_util_node1"
    assert exports.mlflow_name("a//b/") == "a/b" and exports.mlflow_name("./..") == "_/__"


def test_an_archive_made_as_it_is_sent_is_a_tar_gz_tarfile_reads(tmp_path):
    big = tmp_path / "big"
    big.write_bytes(os.urandom(exports.CHUNK * 2 + 5))
    tar = exports.TarGz(mtime=T0)
    long_name = "d/" + "x" * 150 + "/é.txt"
    data = tar.directory("d") + tar.data(long_name, b"hello")
    data += b"".join(tar.file("d/big", str(big))) + tar.close()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as opened:
        assert opened.getnames() == ["d", long_name, "d/big"]
        small, large = opened.extractfile(long_name), opened.extractfile("d/big")
        assert small is not None and small.read() == b"hello"
        assert large is not None and large.read() == big.read_bytes()
        assert opened.getmember("d").isdir() and opened.getmember("d/big").mtime == int(T0)


def test_the_api_exports_are_in_the_schema(capsys):
    schema = APIClient().get("/api/schema/")
    said = capsys.readouterr().err
    assert "export_views.py" not in said  # drf-spectacular understood them, no warning
    paths = yaml.safe_load(schema.content)["paths"]
    for url in ("jobs/{id}/metrics/tensorboard/", "compare/csv/", "compare/tensorboard/"):
        assert f"/api/v1/{url}" in paths
    assert {p["name"] for p in paths["/api/v1/compare/csv/"]["get"]["parameters"]} == {
        "q",
        "ids",
        "baseline",
    }
    assert "/api/v1/runs/mlruns/" in paths
