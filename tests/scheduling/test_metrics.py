"""Metrics on both real schedulers: a job logs with portal_metrics; the points reach the
portal over SFTP (tail) and over HTTP (upload with the job's token), each exactly once."""

import pytest

from jobs import tasks
from jobs.models import Job
from metrics.models import MetricFile, MetricPoint, MetricSeries
from tests import factories
from tests.devcluster.helpers import remote, run_until
from tracking.tail import tail_job

# Logs `n` steps of loss and acc; after the first half it flushes and pauses so
# that a read in the middle of the run sees part of the file.
TRAIN = """python3 - <<'EOF'
import time, portal_metrics as pm
n = {n}
for s in range(n):
    pm.log(step=s, loss=1.0 / (s + 1), acc=s / n)
    if s == n // 2:
        pm.flush(); time.sleep({pause})
pm.close()
print("logged", n)
EOF"""


def points(job):
    return {
        s.key: sorted(MetricPoint.objects.filter(series=s).values_list("seq", flat=True))
        for s in MetricSeries.objects.filter(job=job)
    }


@pytest.mark.django_db
def test_file_tail_delivers_every_point_exactly_once(scheduler_cluster, owner):
    scheduler_cluster.metrics_over_ssh = True
    scheduler_cluster.save()
    n = 3000
    job = factories.job(owner, scheduler_cluster, TRAIN.format(n=n, pause=4))
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert job.state == Job.State.PENDING, job.message
    # The token reached the job as a private file, not in the script or a command line.
    account = job.cluster_account
    token_file = f"{job.work_dir}/.portal_metrics_token"
    assert remote(account, ["stat", "-c", "%a", token_file]).strip() == "600"
    token = remote(account, ["cat", token_file]).strip()
    assert token.startswith("pm_") and token not in job.script
    assert "PORTAL_METRICS_URL=''" in job.script  # nodes cannot reach the portal here

    job = run_until(job, {"running", "completed"}, timeout=90)
    mid = 0
    for _ in range(40):  # read while it runs, as the periodic sync does
        mid += tail_job(job)
        if mid:
            break
        run_until(job, {"running", "completed"}, timeout=5)
    job = run_until(job, {"completed", "failed"}, timeout=90)
    assert job.state == "completed", job.message
    rest = tail_job(job, max_passes=50)
    assert 0 < mid < 2 * n and mid + rest == 2 * n, (mid, rest)
    assert points(job) == {"loss": list(range(n)), "acc": list(range(n))}

    # A worker that lost its offsets (crash before the commit) re-reads: nothing doubles.
    MetricFile.objects.filter(job=job).update(offset=0)
    assert tail_job(job, max_passes=50) == 0
    size = int(remote(account, ["stat", "-c", "%s", f"{job.work_dir}/metrics/rank-0.jsonl"]))
    assert MetricFile.objects.get(job=job, name="rank-0.jsonl").offset == size
    assert MetricSeries.objects.get(job=job, key="loss").points == n


@pytest.mark.django_db(transaction=True)
def test_http_upload_delivers_every_point_exactly_once(
    scheduler_cluster, owner, live_server, outbox_dues, settings
):
    settings.PORTAL_URL = live_server.url
    n = 2000
    job = factories.job(owner, scheduler_cluster, TRAIN.format(n=n, pause=1))
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert (
        f"PORTAL_METRICS_URL={live_server.url}/api/v1/jobs/{job.pk}/metrics/ingest/" in job.script
    )
    job = run_until(job, {"completed", "failed"}, timeout=90)
    assert job.state == "completed", job.message
    # Everything came over HTTP: no file was read (the final read was only queued).
    assert not MetricFile.objects.filter(job=job).exists()
    assert [(d.job_id, d.entry) for d in outbox_dues if d.consumer == "metrics"] == [
        (job.pk, "metrics")
    ]
    assert points(job) == {"loss": list(range(n)), "acc": list(range(n))}
    # The final read of the files finds nothing new.
    assert tail_job(job, max_passes=50) == 0
    assert MetricPoint.objects.filter(series__job=job).count() == 2 * n
