"""Metrics on the real HTCondor pool: a job logs with portal_metrics; the points reach the
portal over SFTP (tail) and over HTTP (upload with the job's token), each exactly once."""

import pytest

from jobs import tasks
from jobs.metrics.models import MetricFile, MetricPoint
from jobs.metrics.tail import tail_job
from tests import factories
from tests.devcluster.helpers import run_until
from tests.devcluster.test_metrics import TRAIN, points

pytestmark = [pytest.mark.condorpool]


@pytest.mark.django_db
def test_file_tail_delivers_every_point_exactly_once(condorpool, owner):
    condorpool.metrics_over_ssh = True
    condorpool.save()
    n = 500
    job = factories.submitted_job(owner, condorpool, TRAIN.format(n=n, pause=0))
    assert "PORTAL_METRICS_URL=''" in job.script
    job = run_until(job, {"completed", "failed"}, timeout=90)
    assert job.state == "completed", job.message
    assert tail_job(job, max_passes=50) == 2 * n
    assert points(job) == {"loss": list(range(n)), "acc": list(range(n))}
    MetricFile.objects.filter(job=job).update(offset=0)  # a worker that lost its offsets
    assert tail_job(job, max_passes=50) == 0


@pytest.mark.django_db(transaction=True)
def test_http_upload_delivers_every_point_exactly_once(condorpool, owner, live_server, settings):
    settings.PORTAL_URL = live_server.url
    n = 500
    job = factories.job(owner, condorpool, TRAIN.format(n=n, pause=1))
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    job = run_until(job, {"completed", "failed"}, timeout=90)
    assert job.state == "completed", job.message
    assert not MetricFile.objects.filter(job=job).exists()  # nothing read from files
    assert points(job) == {"loss": list(range(n)), "acc": list(range(n))}
    assert tail_job(job, max_passes=50) == 0
    assert MetricPoint.objects.filter(series__job=job).count() == 2 * n
