"""Uploads of runs (#46): the API, the Imports page and `portal import`, each through to the
import task and the report, against a real HTTP server for the CLI. A person sees and
imports into their own account only."""

from __future__ import annotations

import io
import re
import resource
import tarfile
from pathlib import Path

import pytest
from django.test import Client

from devtools.run_samples import value
from identity.tokens import ApiToken
from jobs.models import Job
from portal_client import cli
from tests import factories
from tests.tracking.test_imports import STEPS, make_samples, points_of
from tracking import tasks
from tracking.models import RunImport


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return make_samples(tmp_path_factory.mktemp("upload"), mlflow=2, tensorboard=2)


def tar_gz(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    return buffer.getvalue()


@pytest.mark.django_db
def test_api_upload_imports_and_reports_to_its_owner_only(folder, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    ann, bob = factories.user("ann"), factories.user("bob")
    client = factories.api_client(ann)
    body = tar_gz(folder)
    response = client.post(
        "/api/v1/imports/?filename=runs.tar.gz", data=body, content_type="application/gzip"
    )
    assert response.status_code == 202, response.content
    made = response.json()
    assert made["state"] == "queued" and made["size"] == len(body)
    tasks.import_upload(made["id"])
    done = client.get(f"/api/v1/imports/{made['id']}/").json()
    assert done["state"] == "done", done
    assert done["report"]["imported"] == 4 and done["report"]["refused"] == 0
    assert not RunImport.objects.get(pk=made["id"]).upload_path.exists()
    job = Job.objects.get(owner=ann, name="mlflow-1")
    assert points_of(job, "loss") == [(s, value("loss", 1, s)) for s in range(STEPS)]
    # Bob sees none of it.
    other = factories.api_client(bob)
    assert other.get(f"/api/v1/imports/{made['id']}/").status_code == 404
    assert other.get("/api/v1/imports/").json()["results"] == []
    assert other.get(f"/api/v1/jobs/{job.pk}/").status_code == 404
    # The same upload again: nothing new.
    again = client.post(
        "/api/v1/imports/?filename=runs.tar.gz", data=body, content_type="application/gzip"
    ).json()
    tasks.import_upload(again["id"])
    report = client.get(f"/api/v1/imports/{again['id']}/").json()["report"]
    assert (report["imported"], report["already"]) == (0, 4)


@pytest.mark.django_db
def test_uploads_past_the_bounds_are_refused_with_a_reason(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    settings.PORTAL_IMPORT_MAX_UPLOAD_BYTES = 2048
    client = factories.api_client(factories.user("ann"))
    big = client.post("/api/v1/imports/", data=b"x" * 4096, content_type="application/gzip")
    assert big.status_code == 413 and "at most" in big.json()["detail"]
    garbage = client.post("/api/v1/imports/", data=b"x" * 100, content_type="application/gzip")
    assert garbage.status_code == 202
    tasks.import_upload(garbage.json()["id"])
    failed = RunImport.objects.get(pk=garbage.json()["id"])
    assert failed.state == "failed" and "not a tar or zip archive" in failed.message
    for _ in range(3):
        RunImport.objects.create(owner=failed.owner)
    busy = client.post("/api/v1/imports/", data=b"x" * 100, content_type="application/gzip")
    assert busy.status_code == 400 and "waiting or running" in busy.json()["detail"]


@pytest.mark.django_db
def test_a_lost_import_is_sent_again_and_ends(folder, settings, tmp_path, monkeypatch):
    settings.DATA_DIR = tmp_path
    ann = factories.user("ann")
    client = factories.api_client(ann)
    made = client.post("/api/v1/imports/", data=tar_gz(folder), content_type="application/gzip")
    pk = made.json()["id"]
    RunImport.objects.filter(pk=pk).update(created_at="2020-01-01T00:00Z")  # its message lost
    sent = []
    monkeypatch.setattr(tasks.import_upload, "delay", sent.append)
    assert tasks.resend_imports() == 1 and sent == [pk]
    tasks.import_upload(pk)
    assert RunImport.objects.get(pk=pk).state == "done"


@pytest.mark.django_db
def test_page_upload_and_an_imported_jobs_page(client, folder, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    ann = factories.user("ann")
    client.force_login(ann)
    archive = io.BytesIO(tar_gz(folder))
    archive.name = "runs.tar.gz"
    response = client.post("/imports/", {"archive": archive})
    assert response.status_code == 302
    run_import = RunImport.objects.get(owner=ann)
    tasks.import_upload(run_import.pk)
    page = client.get("/imports/").content.decode()
    assert "4 runs imported" in page and "Compare them" in page
    job = Job.objects.filter(owner=ann, imported__source="tensorboard").first()
    assert job is not None and "tensorboard/run-" in job.name
    detail = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "Imported run" in detail and "TensorBoard event files" in detail
    assert "Launch again" not in detail


@pytest.mark.django_db(transaction=True)
def test_portal_import_sends_a_folder_and_waits(
    live_server, folder, settings, tmp_path, monkeypatch, capsys
):
    settings.DATA_DIR = tmp_path
    ann = factories.user("ann")
    _, token = ApiToken.issue(ann, "cli")
    monkeypatch.setenv("PORTAL_URL", live_server.url)
    monkeypatch.setenv("PORTAL_TOKEN", token)
    monkeypatch.setenv("PORTAL_CONFIG", str(tmp_path / "absent.toml"))
    # The worker's part runs where the broker would hand it over: after the commit.
    monkeypatch.setattr(tasks.import_upload, "delay", lambda pk: tasks.import_upload(pk))
    code = cli.main(["import", str(folder / "mlruns"), "--interval", "0.2"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "2 runs imported" in out and re.search(r"import \d+: [0-9.]+ MB sent", err)
    assert Job.objects.filter(owner=ann, kind="imported").count() == 2


@pytest.mark.django_db
def test_imported_runs_are_listed_and_every_page_renders_with_them(client, folder, tmp_path):
    from tracking.imports import service  # noqa: PLC0415

    ann = factories.user("ann")
    report = service.import_path(ann, folder)
    assert len(report.imported) == 4
    client.force_login(ann)
    ids = ",".join(map(str, report.imported))
    for url in ("/", "/usage/", f"/compare/?ids={ids}", "/imports/"):
        assert client.get(url).status_code == 200, url
    dashboard = client.get("/").content.decode()
    staff = Client()
    staff.force_login(factories.user("boss", superuser=True))
    for url in ("/", "/usage/", "/usage/efficiency/", "/usage/idle-policy/", "/admin/jobs/job/"):
        assert staff.get(url).status_code == 200, url
    assert all(f'href="/jobs/{pk}/"' in dashboard for pk in report.imported)
    api = factories.api_client(ann).get("/api/v1/jobs/").json()
    listed = {j["id"]: j for j in api["results"]}
    assert set(report.imported) <= set(listed)
    job = listed[report.imported[0]]
    assert job["kind"] == "imported" and job["is_final"] and not job["is_active"]
    # Nobody launches an imported run: the form does not offer it, the API refuses it.
    launch = client.get("/launch/").content.decode()
    assert 'value="batch"' in launch and 'value="imported"' not in launch
    made = factories.api_client(ann).post("/api/v1/jobs/", {"kind": "imported"}, format="json")
    assert made.status_code == 400 and "kind" in made.json()["error"]["fields"]


def test_an_uploads_name_never_names_a_folder_outside_its_own():
    assert tasks.folder_name("runs.tar.gz") == "runs"
    assert tasks.folder_name("..") == "upload"
    assert tasks.folder_name("../../etc/x.zip") == "etc_x"
    assert tasks.folder_name("my runs (old).tgz") == "my_runs_old"


def test_memory_limit_holds_inside_and_is_put_back():
    from tracking.imports import memory

    before = resource.getrlimit(resource.RLIMIT_AS)
    with memory.limited(16 * 2**20):
        small = bytearray(4 * 2**20)
        with pytest.raises(MemoryError):
            bytearray(256 * 2**20)
    assert resource.getrlimit(resource.RLIMIT_AS) == before
    assert len(bytearray(256 * 2**20)) == 256 * 2**20 and len(small) == 4 * 2**20


@pytest.mark.django_db
def test_an_import_past_its_memory_stops_with_a_message(folder, settings, tmp_path, monkeypatch):
    """A reader that allocates without bound (a crafted file) stops the import, not the
    worker: the runs read before it are kept and the report says why."""
    from tracking.imports import service

    settings.DATA_DIR = tmp_path
    settings.PORTAL_IMPORT_MEMORY_MB = 64
    real = service.import_path
    held = []

    def greedy(owner, path, progress):
        report = real(owner, path, progress)  # the runs go in
        held.append(bytearray(512 * 2**20))  # then a reader asks for far more
        return report

    monkeypatch.setattr(service, "import_path", greedy)
    ann = factories.user("ann")
    client = factories.api_client(ann)
    made = client.post(
        "/api/v1/imports/?filename=runs.tar.gz",
        data=tar_gz(folder),
        content_type="application/gzip",
    ).json()
    before = resource.getrlimit(resource.RLIMIT_AS)
    tasks.import_upload(made["id"])
    failed = RunImport.objects.get(pk=made["id"])
    assert failed.state == "failed" and "more than 64 MiB of memory" in failed.message
    assert not held and resource.getrlimit(resource.RLIMIT_AS) == before
    assert Job.objects.filter(owner=ann).count() == 4  # what was read before is kept
