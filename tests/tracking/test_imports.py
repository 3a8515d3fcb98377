"""Importers (#46) on their real path: runs logged by MLflow's, W&B's and TensorBoard's own
clients (devtools/run_samples.py, in a subprocess as a person's script would), imported
into a person's jobs, every point checked against what was logged; a second import does
nothing; hostile folders give a clear refusal or a bounded result, never a hang."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from django.core.management import call_command

from devtools.run_samples import METRICS, params, value
from jobs.models import Job
from metrics.models import MetricPoint, MetricSeries
from tests import factories
from tracking.imports import archive, service
from tracking.imports.source import Unreadable
from tracking.models import ImportedRun

pytestmark = pytest.mark.django_db

STEPS = 40


def make_samples(out: Path, **counts: int) -> Path:
    args = [f"--{k}={v}" for k, v in counts.items()]
    subprocess.run(
        [sys.executable, "-m", "devtools.run_samples", str(out), f"--steps={STEPS}", *args],
        check=True,
        capture_output=True,
        timeout=600,
        env={**os.environ, "WANDB_SILENT": "true"},
    )
    return out


@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> Path:
    return make_samples(
        tmp_path_factory.mktemp("samples"), mlflow=4, sqlite=2, wandb=3, tensorboard=3
    )


def copy_of(samples: Path, tmp_path: Path) -> Path:
    target = tmp_path / "runs"
    shutil.copytree(samples, target, symlinks=True)
    return target


def points_of(job: Job, key: str) -> list[tuple[int, float]]:
    series = MetricSeries.objects.get(job=job, key=key, system=False)
    rows = MetricPoint.objects.filter(series=series).order_by("seq")
    return [(p.step, p.value) for p in rows]


def run_number(job: Job) -> int:
    return int(job.name.rsplit("-", 1)[1])


def test_every_kind_of_run_imports_point_by_point_and_once(samples, tmp_path):
    ann = factories.user("ann")
    report = service.import_path(ann, copy_of(samples, tmp_path))
    assert report.refused == [], report.refused
    assert len(report.imported) == 4 + 2 + 3 + 3
    logged = MetricPoint.objects.filter(series__system=False).count()
    assert logged == 12 * STEPS * len(METRICS)
    # W&B's system metrics (CPU, memory, disk) come as the jobs' system series.
    system = MetricSeries.objects.filter(system=True, job__imported__source="wandb")
    assert system.exists() and report.points == logged + sum(s.points for s in system)
    jobs = Job.objects.filter(owner=ann).select_related("imported")
    sources = sorted(j.imported.source for j in jobs)
    assert sources == ["mlflow"] * 6 + ["tensorboard"] * 3 + ["wandb"] * 3
    for job in jobs:
        assert job.kind == Job.Kind.IMPORTED and job.cluster.name == "imported"
        assert not job.cluster.enabled  # no page offers it, no worker reaches it
        n = run_number(job)
        for key in METRICS:
            expected = [(step, value(key, n, step)) for step in range(STEPS)]
            assert points_of(job, key) == expected, (job.name, key)
        if job.imported.source != "tensorboard":
            assert job.params == params(n), job.name  # lr, batch_size, optimizer as values
            wanted = Job.State.FAILED if n % 10 == 0 else Job.State.COMPLETED
            assert job.state == wanted, job.name
        assert job.started_at is not None and job.ended_at >= job.started_at
    mlflow_job = next(j for j in jobs if j.imported.source == "mlflow")
    assert mlflow_job.imported.tags["team"] == "vision"
    assert mlflow_job.imported.params["optimizer"] == "adam"
    wandb_job = next(j for j in jobs if j.imported.source == "wandb")
    assert wandb_job.imported.tags["wandb.project"] == "samples"
    assert "_wandb" not in wandb_job.imported.params

    counts = (Job.objects.count(), MetricPoint.objects.count(), ImportedRun.objects.count())
    again = service.import_path(ann, copy_of(samples, tmp_path / "again"))
    assert (len(again.imported), again.already, again.refused_count) == (0, 12, 0)
    assert (Job.objects.count(), MetricPoint.objects.count(), ImportedRun.objects.count()) == counts

    # The same runs are someone else's to import too: keys are per person.
    bob = factories.user("bob")
    assert len(service.import_path(bob, copy_of(samples, tmp_path / "bob")).imported) == 12


def test_imported_runs_compare_with_native_ones(samples, tmp_path):
    from metrics.compare.data import Options, compare  # noqa: PLC0415

    ann = factories.user("ann")
    service.import_path(ann, copy_of(samples, tmp_path) / "mlruns")
    cluster = factories.cluster("c1")
    factories.partition(cluster, "cpu")
    native = factories.compared_run(
        ann, cluster, params={"lr": 0.1}, curves={"loss": [2.0, 1.0, 0.5]}
    )
    ids = [*Job.objects.filter(owner=ann, kind=Job.Kind.IMPORTED).values_list("pk", flat=True)]
    data = compare(ann, Options(ids=(*ids, native.pk), group="param.lr")).as_dict()
    assert {run["id"] for run in data["runs"]} == {*ids, native.pk}
    by_name = {run["name"]: run for run in data["runs"]}
    for n in range(4):
        run = by_name[f"mlflow-{n}"]
        assert run["metrics"]["loss"]["last"] == value("loss", n, STEPS - 1)
        assert run["fields"]["param.lr"] == params(n)["lr"]
    # Grouped by learning rate, imported and native runs share a group (mean ± std).
    assert by_name["mlflow-0"]["group"] == by_name["mlflow-3"]["group"] == "0.1"
    assert next(r for r in data["runs"] if r["id"] == native.pk)["group"] == "0.1"
    assert "loss" in [chart.get("metric") for chart in data["charts"]]


def test_manage_command_reports_and_is_idempotent(samples, tmp_path, capsys):
    factories.user("ann")
    folder = copy_of(samples, tmp_path) / "mlruns"
    call_command("import_runs", str(folder), user="ann")
    assert "4 runs imported" in capsys.readouterr().out
    call_command("import_runs", str(folder), user="ann")
    assert "0 runs imported (0 points), 4 imported before" in capsys.readouterr().out


def test_sqlite_store_by_uri(samples, tmp_path):
    ann = factories.user("ann")
    db = copy_of(samples, tmp_path) / "mlflow.db"
    report = service.import_uri(ann, f"sqlite:///{db}")
    assert len(report.imported) == 2 and report.refused == []


# -- hostile folders --------------------------------------------------------------------------


def test_links_fifos_and_huge_files_are_named_not_read(samples, tmp_path, settings):
    ann = factories.user("ann")
    root = copy_of(samples, tmp_path)
    store = root / "mlruns"
    experiment = next(p for p in store.iterdir() if p.name not in ("0", ".trash"))
    runs = sorted(p for p in experiment.iterdir() if p.is_dir())
    # One run's metric file is a link to a secret; another holds a FIFO; a third a sparse
    # 10 GB file. None of them is read; the fourth run imports.
    secret = tmp_path / "secret"
    secret.write_text("1 2 3\n")
    loss = runs[0] / "metrics" / "loss"
    loss.unlink()
    loss.symlink_to(secret)
    os.mkfifo(runs[1] / "metrics" / "stall")
    with open(runs[2] / "metrics" / "huge", "wb") as f:
        f.truncate(10 * 1024**3)
    os.mkfifo(root / "tensorboard" / "run-0" / "events.out.tfevents.1.fifo")
    (root / "tensorboard" / "run-1" / "events.out.tfevents.2.link").symlink_to("/etc/passwd")

    report = service.import_path(ann, store)
    assert len(report.imported) == 1
    text = "\n".join(report.refused)
    assert "is a symbolic link; links are not followed" in text
    assert "is not a regular file" in text
    assert "10.7 GB, more than the" in text
    assert "secret" not in text.replace(str(tmp_path), "")  # what a link points at is not read

    tb = service.import_path(ann, root / "tensorboard")
    assert len(tb.imported) == 3  # the FIFO and the link are not events: left out, named
    assert tb.refused_count == 2


def test_tensorboard_cut_short_keeps_what_was_written_and_garbage_is_refused(samples, tmp_path):
    ann = factories.user("ann")
    root = copy_of(samples, tmp_path) / "tensorboard"
    (event,) = (root / "run-0").iterdir()
    data = event.read_bytes()
    event.write_bytes(data[: len(data) // 2])  # a run killed while writing
    (event2,) = (root / "run-1").iterdir()
    event2.write_bytes(os.urandom(4096))  # not an event file at all
    shutil.rmtree(root / "run-2")
    report = service.import_path(ann, root)
    assert len(report.imported) == 1
    job = Job.objects.get(pk=report.imported[0])
    loss = points_of(job, "loss")
    assert 0 < len(loss) < STEPS
    assert loss == [(s, value("loss", 0, s)) for s in range(len(loss))]
    assert "no TensorBoard event could be read" in report.refused[0]


def test_wandb_file_with_a_foreign_header_or_a_cut_is_bounded(samples, tmp_path):
    ann = factories.user("ann")
    root = copy_of(samples, tmp_path) / "wandb"
    files = sorted(root.glob("offline-run-*/run-*.wandb"))
    files[0].write_bytes(b"PK\x03\x04" + os.urandom(100))
    data = files[1].read_bytes()
    files[1].write_bytes(data[: len(data) // 2])
    report = service.import_path(ann, root)
    assert len(report.imported) == 2
    assert "is not a W&B run file" in report.refused[0]
    cut = Job.objects.get(imported__origin=str(files[1]))
    loss = points_of(cut, "loss")
    assert 0 < len(loss) < STEPS
    assert loss == [(s, value("loss", run_number(cut), s)) for s in range(len(loss))]


def test_a_run_with_too_many_series_is_refused_whole(tmp_path, settings):
    settings.PORTAL_METRICS_MAX_SERIES = 50
    script = (
        "import os, wandb\n"
        "os.environ['WANDB_SILENT'] = 'true'\n"
        f"run = wandb.init(mode='offline', project='many', dir={str(tmp_path)!r})\n"
        "run.log({f'm{i}': i for i in range(2000)}, step=0)\n"
        "run.finish()\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, timeout=300)
    ann = factories.user("ann")
    report = service.import_path(ann, tmp_path / "wandb")
    assert report.imported == [] and "at most 50 metric series" in report.refused[0]
    assert not Job.objects.filter(owner=ann).exists()  # nothing half imported
    assert not MetricSeries.objects.exists()


def test_too_many_files_end_the_scan(tmp_path, settings):
    settings.PORTAL_IMPORT_MAX_FILES = 100
    for n in range(150):
        (tmp_path / f"f{n}").write_text("x")
    report = service.import_path(factories.user("ann"), tmp_path)
    assert "holds more than 100 files and folders" in report.refused[0]


# -- archives ---------------------------------------------------------------------------------


def test_archives_unpack_inside_their_folder_only(tmp_path):
    bad = tmp_path / "bad.tar"
    with tarfile.open(bad, "w") as tar:
        info = tarfile.TarInfo("../escaped")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    into = tmp_path / "into"
    into.mkdir()
    with pytest.raises(Unreadable):
        archive.unpack(bad, into)
    assert not (tmp_path / "escaped").exists()

    zipped = tmp_path / "links.zip"
    with zipfile.ZipFile(zipped, "w") as z:
        link = zipfile.ZipInfo("link")
        link.external_attr = 0o120777 << 16
        z.writestr(link, "/etc/passwd")
        z.writestr("../../up.txt", "x")
        z.writestr("ok/file.txt", "fine")
    archive.unpack(zipped, into)
    assert (into / "ok" / "file.txt").read_text() == "fine"
    assert not (into / "link").exists()
    assert not (tmp_path / "up.txt").exists()


def test_an_archive_past_the_bounds_unpacks_nothing(tmp_path, settings):
    settings.PORTAL_IMPORT_MAX_FILE_BYTES = 10_000
    big = tmp_path / "big.zip"
    with zipfile.ZipFile(big, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("zeros", b"\0" * 1_000_000)  # a small archive that unpacks large
    into = tmp_path / "into"
    into.mkdir()
    with pytest.raises(Unreadable, match="more than the"):
        archive.unpack(big, into)
    assert list(into.iterdir()) == []
    garbage = tmp_path / "garbage.tar.gz"
    garbage.write_bytes(os.urandom(1000))
    with pytest.raises(Unreadable, match="not a tar or zip archive"):
        archive.unpack(garbage, into)


def test_a_crafted_event_declaring_a_huge_scalar_is_refused_without_allocating(tmp_path):
    """A 200-byte event file whose "scalar" declares 2^27 values. Before: make_ndarray made
    the whole declared array (512 MiB here; any size the file names) in the import worker."""
    import tracemalloc

    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2
    from tensorboard.compat.proto.types_pb2 import DT_FLOAT
    from tensorboard.summary.writer.record_writer import RecordWriter

    ann = factories.user("ann")
    run = tmp_path / "crafted" / "run"
    run.mkdir(parents=True)
    shape = tensor_shape_pb2.TensorShapeProto(
        dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=2**27)]
    )
    value = summary_pb2.Summary.Value(
        tag="loss",
        metadata=summary_pb2.SummaryMetadata(
            plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
        ),
        tensor=tensor_pb2.TensorProto(dtype=DT_FLOAT, tensor_shape=shape, float_val=[1.0]),
    )
    path = run / "events.out.tfevents.1.crafted"
    with path.open("wb") as fh:
        writer = RecordWriter(fh)
        writer.write(
            event_pb2.Event(wall_time=1.0, file_version="brain.Event:2").SerializeToString()
        )
        writer.write(
            event_pb2.Event(
                wall_time=2.0, step=1, summary=summary_pb2.Summary(value=[value])
            ).SerializeToString()
        )
    assert path.stat().st_size < 250
    tracemalloc.start()
    try:
        report = service.import_path(ann, tmp_path / "crafted")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024**2, peak
    assert report.imported == [] and "declares the shape [134217728]" in report.refused[0]
    assert not Job.objects.filter(owner=ann).exists()
