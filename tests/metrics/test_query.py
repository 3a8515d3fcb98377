"""Reading series back: downsampling that keeps spikes, ranges, exports, access."""

import json
import random

import pytest
from django.test import Client

from jobs.metrics import ingest, query
from jobs.metrics.models import MetricSeries
from tests.metrics.conftest import make_job, records


def test_minmax_keeps_spikes_and_ends_and_is_deterministic():
    rng = random.Random(1)
    steps = list(range(100_000))
    values = [rng.random() for _ in steps]
    values[31_337] = 50.0
    values[77_777] = -50.0
    keep = query.minmax_indices(steps, values, 1000)
    assert keep == query.minmax_indices(steps, values, 1000)
    assert len(keep) <= 2 * 1000 + 2
    assert {0, 99_999, 31_337, 77_777} <= set(keep)
    assert keep == sorted(keep)


def test_short_series_are_not_downsampled():
    assert query.minmax_indices([1, 2, 3], [1.0, 2.0, 3.0], 10) == [0, 1, 2]


def test_uneven_steps_are_bucketed_by_step_not_by_index():
    steps = list(range(1000)) + list(range(100_000, 100_010))
    values = [0.0] * len(steps)
    values[-5] = 9.0
    keep = query.minmax_indices(steps, values, 100)
    assert len(steps) - 5 in keep


@pytest.mark.django_db
def test_read_series_downsamples_and_zooms_to_full_resolution(owner, cluster):
    job = make_job(owner, cluster)
    ingest.ingest(job, ingest.parse_batch(records(5000)).records)
    loss = MetricSeries.objects.get(job=job, key="loss")
    whole = query.read_series(loss, width=500)
    assert whole.downsampled and whole.total == 5000 and len(whole.steps) <= 1002
    zoomed = query.read_series(loss, width=500, lo=1000, hi=1499)
    assert not zoomed.downsampled and zoomed.steps == list(range(1000, 1500))


@pytest.mark.django_db
def test_metrics_json_and_exports_are_owner_only(owner, outsider, cluster):
    job = make_job(owner, cluster)
    ingest.ingest(job, ingest.parse_batch(records(30)).records)
    client = Client()
    client.force_login(owner)
    data = client.get(f"/jobs/{job.pk}/metrics/?width=100").json()
    assert sorted(s["key"] for s in data["series"]) == ["acc", "loss"]
    assert client.get(f"/jobs/{job.pk}/metrics/?lo=x").status_code == 400
    csv = b"".join(client.get(f"/jobs/{job.pk}/metrics/export/?format=csv").streaming_content)
    lines = csv.decode().splitlines()
    assert lines[0] == "metric,rank,attempt,step,seq,time,value" and len(lines) == 61
    jsonl = b"".join(client.get(f"/jobs/{job.pk}/metrics/export/?format=json").streaming_content)
    assert len([json.loads(x) for x in jsonl.splitlines()]) == 60
    assert client.get(f"/jobs/{job.pk}/metrics/export/?format=xml").status_code == 400
    client.force_login(outsider)
    assert client.get(f"/jobs/{job.pk}/metrics/").status_code == 404
    assert client.get(f"/jobs/{job.pk}/metrics/export/").status_code == 404
