"""Usage on the real dev cluster with real accounting: a finished 2-GPU job's GPU-hours on
its page and on the Usage page (and CSV) are sacct's; a notebook holding a GPU it does not
use (the fake nvidia-smi reports 0 %) is flagged to its owner from the samples the session's
metrics client takes beside JupyterLab."""

import re
import subprocess

import pytest
from django.test import override_settings
from django.utils import timezone

from jobs import tasks
from jobs.models import Job
from tests import factories, polling
from tests.devcluster.helpers import run_until
from tracking.tail import tail_job
from usage import hours as usage

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]


@pytest.fixture(autouse=True)
def queued_attempt_reads(monkeypatch):
    """No Celery worker here: the test reads accounting itself."""
    monkeypatch.setattr(tasks.record_attempts, "delay", lambda *a, **k: None)


def test_gpu_hours_of_a_finished_two_gpu_job_are_saccts(devcluster, owner, client):
    job = factories.job(owner, devcluster, "sleep 4", partition="gpu", gpus=2, gpu_type="v100")
    tasks.submit_job.apply(args=[job.pk])
    # Both v100s: it may wait behind a GPU job of the other half (tests/conftest.py).
    job = run_until(job, {"completed"}, timeout=300)
    tasks.record_attempts.apply(args=[[job.pk]])
    out = subprocess.run(
        ["sacct", "-n", "-P", "-D", "-X", "-j", job.scheduler_job_id, "-o", "ElapsedRaw,AllocTRES"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")[0]
    elapsed, tres = out.split("|")
    gpus = int(re.search(r"gres/gpu=(\d+)", tres).group(1))
    expected = gpus * int(elapsed) / 3600
    assert gpus == 2 and int(elapsed) >= 4
    runs = list(job.attempts.all())
    assert [(r.gpus, r.elapsed_seconds) for r in runs] == [(2, int(elapsed))]

    client.force_login(owner)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert f"<td data-gpu-hours>{expected:.3f}</td>" in page
    month = timezone.now().strftime("%Y-%m")
    csv = client.get(f"/usage/?from={month}&to={month}&format=csv").content.decode()
    row = [line for line in csv.splitlines() if line.startswith(f"{month},owner,")]
    assert row and row[0].split(",")[3:6] == ["devcluster", "1", f"{expected:.3f}"]
    assert f"<td data-gpu-hours>{expected:.3f}</td>" in client.get("/usage/").content.decode()
    print(f"2-GPU job: sacct {elapsed} s x {gpus} GPUs = {expected:.3f} GPU-h; CSV {row[0]}")


@override_settings(PORTAL_SYSTEM_METRICS_INTERVAL=2, PORTAL_GPU_IDLE_MINUTES=0.3)
def test_a_notebook_holding_an_idle_gpu_is_flagged_to_its_owner(devcluster, owner, client):
    devcluster.metrics_over_ssh = True
    devcluster.save()
    job = factories.job(
        owner, devcluster, "", kind=Job.Kind.NOTEBOOK, partition="gpu", gpus=1, time_limit_minutes=5
    )
    tasks.submit_job.apply(args=[job.pk])
    job = run_until(job, {"running"}, timeout=90)

    def flagged() -> bool:
        if job.pk in usage.idle_gpu_jobs(Job.objects.filter(pk=job.pk)):
            return True
        tail_job(job, max_passes=5)
        return False

    polling.until(flagged, 120, "the job to be flagged as holding idle GPUs", interval=2)
    keys = set(job.metric_series.values_list("key", flat=True))
    assert any(re.fullmatch(r"sys/gpu\d_util_percent@node[12]", k) for k in keys), keys
    client.force_login(owner)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "This job's 1 GPU has been idle for the last 18 seconds (at most 0% utilisation)" in page
    assert f'href="/jobs/{job.pk}/"' in client.get("/usage/").content.decode()
    assert job.request_cancel()
    tasks.cancel_job.apply(args=[job.pk])
