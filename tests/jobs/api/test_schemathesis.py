"""Property-based: schemathesis generates requests from the live OpenAPI schema (valid
and invalid ones) against a running portal, and no answer may be a server error."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from catalog.models import ContainerImage
from identity.token_auth import TokenRateThrottle
from identity.tokens import ApiToken
from jobs.models import Job
from metrics import ingest
from metrics.views import MetricIngestView
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)

# schemathesis's CLI, with a CPython 3.11 thread-safety bug worked around (see the module)
ST = [sys.executable, str(Path(__file__).with_name("st_serial_ast.py"))]

CONFIG = """
headers = {{ Authorization = "Bearer ${{ST_USER_TOKEN}}" }}

[generation]
max-examples = {examples}
database = "none"

[dictionaries.jobs]
values = {jobs}
[dictionaries.slugs]
values = ["python", "old", "missing"]
[dictionaries.clusters]
values = ["testcluster", "missing"]

[parameters]
"path.id" = {{ dictionary = "jobs", probability = 0.8 }}
"path.slug" = {{ dictionary = "slugs", probability = 0.7 }}
"path.name" = {{ dictionary = "clusters", probability = 0.7 }}

[[operations]]
include-path-regex = "/ingest/$"
headers = {{ Authorization = "Bearer ${{ST_JOB_TOKEN}}" }}
"""


@pytest.fixture
def portal(live_server, owner, outsider, catalog, monkeypatch, chunked_request_bodies, tmp_path):
    """A portal with a catalog, the owner's jobs and someone else's; Slurm is not here
    (submission and cancellation stop at the Celery boundary). The live server reads
    chunked request bodies, as gunicorn does (tests/liveserver.py)."""
    from django.conf import settings

    from jobs import tasks
    from tracking import tasks as tracking_tasks

    monkeypatch.setattr(tasks.submit_job, "delay", lambda *a: None)
    monkeypatch.setattr(tasks.cancel_job, "delay", lambda *a: None)
    monkeypatch.setattr(tracking_tasks.import_upload, "delay", lambda *a: None)
    monkeypatch.setattr(settings, "DATA_DIR", tmp_path)  # uploads of runs land here
    monkeypatch.setattr(TokenRateThrottle, "THROTTLE_RATES", {"api": "1000000/min"})
    cluster, image = catalog, ContainerImage.objects.get(slug="python")
    running = factories.training_job(owner, cluster, "running", image=image)
    ended = factories.training_job(owner, cluster, "completed", image=image)
    theirs = factories.training_job(outsider, cluster, "running", image=image)
    job_token = ingest.issue_token(running)
    reached = {"ingest": 0}
    real_post = MetricIngestView.post

    def counted_post(self, request, pk):
        reached["ingest"] += 1  # past the job-token check
        return real_post(self, request, pk)

    monkeypatch.setattr(MetricIngestView, "post", counted_post)
    _, user_token = ApiToken.issue(owner, "schemathesis")
    return {
        "url": live_server.url,
        "jobs": [running.pk, ended.pk, theirs.pk],
        "user_token": user_token,
        "job_token": job_token,
        "reached": reached,
    }


@pytest.mark.timeout(900)  # every operation through four phases, on two shared cores
def test_no_generated_request_gets_a_server_error(portal, tmp_path, capsys):
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG.format(examples=40, jobs=portal["jobs"]))
    result = subprocess.run(
        [
            *ST,
            "--config-file",
            str(config),
            "run",
            f"{portal['url']}/api/schema/",
            "--checks",
            "not_a_server_error",
            "--phases",
            "examples,coverage,fuzzing,stateful",
            "--workers",
            "2",
            "--request-timeout",
            "30",
            "--no-color",
        ],
        cwd=tmp_path,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "ST_USER_TOKEN": portal["user_token"],
            "ST_JOB_TOKEN": portal["job_token"],
        },
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = result.stdout + result.stderr
    print(report)  # shown on failure: the reproducing requests
    assert result.returncode == 0, report[-6000:]
    # It really exercised the API: every operation, with working credentials.
    assert "Tested: 62" in report and "Selected: 62/62" in report
    assert Job.objects.filter(owner__username="owner").count() > 2  # POST /jobs/ accepted
    assert portal["reached"]["ingest"] > 0  # the job token opened the ingest endpoint
    assert "Dictionary mismatch" not in report  # the ids it was given fit the schema
    served = capsys.readouterr().err  # the live server's own messages
    assert "Error [" not in served  # drf-spectacular understood every view it served


@pytest.mark.parametrize("chunks", [[], [b"notes=", b"chunked"]])
def test_a_chunked_request_leaves_the_keep_alive_connection_in_step(
    live_server, owner, catalog, chunked_request_bodies, chunks
):
    """What schemathesis once met: a PATCH whose body came chunked (empty, for `notes=[]`),
    then the next request on the same connection. Before, the live server left the chunks
    unread, took "0" for the next request line and answered it with a bare <!DOCTYPE HTML>
    page where the next status line belonged."""
    import http.client

    job = factories.training_job(owner, catalog, "running")
    _, token = ApiToken.issue(owner, "chunked")
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/x-www-form-urlencoded",
    }
    connection = http.client.HTTPConnection(live_server.url.split("//")[1], timeout=30)
    try:
        # An iterable body and no Content-Length: http.client sends it chunked.
        connection.request("PATCH", f"/api/v1/jobs/{job.pk}/", iter(chunks), headers)
        patched = connection.getresponse()
        answer = patched.read()
        assert patched.status == (200 if chunks else 400), answer
        connection.request("GET", f"/api/v1/jobs/{job.pk}/", headers=headers)
        again = connection.getresponse()
        assert again.status == 200, again.read()
        assert (json.loads(again.read())["notes"] == "chunked") == bool(chunks)
    finally:
        connection.close()
