"""Right-sizing a finished job from its own samples: utilisation per GPU (4 at 99 % is
99 %), GPUs used as the sum of their means, memory and CPU against what was asked, one line
of advice and the request that would have fit, on the page and in the launch form."""

import time

import pytest

from metrics.models import MetricPoint, MetricSeries
from tests import factories
from usage import rightsize

pytestmark = pytest.mark.django_db


def samples(job, key, values, node="node1"):
    series = MetricSeries.objects.create(
        job=job, key=key, rank=0, attempt=job.attempt, system=True, node=node
    )
    now = time.time()
    MetricPoint.objects.bulk_create(
        MetricPoint(series=series, seq=i, step=i, value=v, time=now - 60 * (len(values) - i))
        for i, v in enumerate(values)
    )


def finished(owner, cluster, **fields):
    values = dict(partition="gpu", state="completed", gpus=4, cpus=16, memory_gb=64)
    values.update(fields)
    return factories.job(owner, cluster, "python train.py", **values)


def test_four_busy_gpus_are_99_percent_and_nothing_to_change(owner, cluster):
    job = finished(owner, cluster, cpus=2, memory_gb=8)
    for gpu in range(4):
        samples(job, f"sys/gpu{gpu}_util_percent@node1", [98, 99, 100])
    samples(job, "sys/cpu_percent", [190, 200, 210])
    samples(job, "sys/memory_gb", [5, 6.5, 7])
    fit = rightsize.fit_of(job)
    assert fit.gpu_util_percent == pytest.approx(99)
    assert fit.gpus_used == pytest.approx(3.96)
    assert fit.cpu_percent == pytest.approx(100)
    assert fit.memory_peak_gb == pytest.approx(7)
    assert fit.suggestion() == {}
    assert fit.advice() == "It used what it asked for: nothing to change."


def test_an_oversized_request_gets_advice_and_a_smaller_one(owner, cluster, client):
    job = finished(owner, cluster, gpu_type="a100")
    for gpu, util in enumerate([90, 20, 5, 5]):
        samples(job, f"sys/gpu{gpu}_util_percent@node1", [util] * 3)
        samples(job, f"sys/gpu{gpu}_memory_mib@node1", [1024, 2048])
    samples(job, "sys/cpu_percent", [150] * 3)
    samples(job, "sys/memory_gb", [3, 9.5])
    fit = rightsize.fit_of(job)
    assert fit.gpus_used == pytest.approx(1.2)
    assert fit.suggestion() == {"gpus": 2, "cpus": 2, "memory_gb": 12}
    advice = fit.advice()
    assert advice.startswith("Asked 4 GPUs, used at most 1.2; asked 16 CPUs")
    assert advice.endswith("a smaller request starts sooner.")
    client.force_login(owner)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "Asked 4 GPUs, used at most 1.2" in page
    link = f"/launch/?from={job.pk}&amp;gpus=2&amp;cpus=2&amp;memory_gb=12"
    assert link in page
    form = client.get(f"/launch/?from={job.pk}&gpus=2&cpus=2&memory_gb=12").content.decode()
    assert 'name="gpus" value="2"' in form and 'name="memory_gb" value="12"' in form


def test_a_job_without_samples_says_nothing(owner, cluster, client):
    job = finished(owner, cluster)
    assert not rightsize.fit_of(job).measured
    client.force_login(owner)
    assert "data-fit" not in client.get(f"/jobs/{job.pk}/").content.decode()
