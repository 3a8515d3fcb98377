"""Reading series back: downsampling that keeps spikes, ranges, exports, access."""

import json
import random

import pytest
from django.test import Client

from metrics import ingest, query
from metrics.models import MetricSeries
from tests import factories

pytestmark = pytest.mark.django_db


def noisy(job, n, spikes=()):
    rng = random.Random(1)
    batch = []
    for s in range(n):
        value = 50.0 if s in spikes else -50.0 if -s in spikes else rng.random()
        batch.append(ingest.Record(s, 0, 0, s, 1.7e9 + s, {"loss": value}))
    ingest.ingest(job, batch)
    return MetricSeries.objects.get(job=job, key="loss")


def test_downsampling_keeps_spikes_and_ends_and_is_deterministic(owner, cluster):
    loss = noisy(factories.training_job(owner, cluster), 50_000, spikes=(31_337, -44_444))
    first = query.read_series(loss, width=1000)
    assert first.downsampled and first.total == 50_000
    assert query.read_series(loss, width=1000).as_dict() == first.as_dict()
    assert len(first.steps) <= 2 * 1000
    assert first.steps == sorted(first.steps)
    assert 50.0 in first.values and -50.0 in first.values
    assert first.steps[0] == 0 and first.steps[-1] == 49_999
    assert first.max_seq == 49_999


def test_a_trend_is_drawn_without_a_sawtooth():
    rows = [(b, 10 - b - 0.5, 10 - b, b * 10, b * 10 + 9, 0.0, 1.0) for b in range(5)]
    _, values, _ = query.buckets_to_points(rows)
    assert values[:4] == [10, 9.5, 9, 8.5]  # falling: the high end first in every bucket


def test_short_series_and_zoomed_ranges_come_at_full_resolution(owner, cluster):
    job = factories.training_job(owner, cluster)
    ingest.ingest(job, ingest.parse_batch(factories.metric_records(5000)).records)
    loss = MetricSeries.objects.get(job=job, key="loss")
    zoomed = query.read_series(loss, width=500, lo=1000, hi=1499)
    assert not zoomed.downsampled and zoomed.steps == list(range(1000, 1500))
    assert zoomed.seqs == list(range(1000, 1500))
    assert query.read_series(loss, width=500, full=True).steps == list(range(5000))


def test_uneven_steps_are_bucketed_by_step(owner, cluster):
    job = factories.training_job(owner, cluster)
    batch = [ingest.Record(s, 0, 0, s, 0.0, {"loss": 0.0}) for s in range(1000)]
    batch += [
        ingest.Record(1000 + i, 0, 0, 100_000 + i, 0.0, {"loss": 9.0 if i == 5 else 0.0})
        for i in range(10)
    ]
    ingest.ingest(job, batch)
    data = query.read_series(MetricSeries.objects.get(job=job), width=100)
    assert data.downsampled and 9.0 in data.values and max(data.steps) == 100_009


def test_one_chart_read_of_many_series_takes_the_same_queries_as_of_one(
    owner, cluster, django_assert_max_num_queries
):
    """Long series bucketed each at its own size, short ones whole, a zoomed range on all,
    an empty one: in at most three queries whatever the number of series (the job page's
    first read and every websocket history)."""
    job = factories.training_job(owner, cluster)
    long = {f"long{i}": 3000 * (i + 1) for i in range(3)}
    batch = [
        ingest.Record(
            s, 0, 0, s * 2, 1.7e9 + s, {k: float(s % 7) for k, n in long.items() if s < n}
        )
        for s in range(max(long.values()))
    ]
    batch += [
        ingest.Record(s, 0, 1, s, 0.0, {f"short{i}": float(i) for i in range(12)})
        for s in range(40)
    ]
    ingest.ingest(job, batch)
    series = list(MetricSeries.objects.filter(job=job).order_by("key", "attempt"))
    MetricSeries.objects.create(job=job, key="empty")  # a series whose points are not in yet
    series.append(MetricSeries.objects.get(job=job, key="empty"))
    with django_assert_max_num_queries(3):
        read = query.read_many(series, width=500)
    by_key = {d.series.key: d for d in read}
    assert [d.series.key for d in read] == [s.key for s in series]  # in the order asked
    for key, n in long.items():
        data = by_key[key]
        assert data.downsampled and data.total == n and len(data.steps) <= 2 * 500
        assert data.steps[0] == 0 and data.steps[-1] == 2 * (n - 1) and data.max_seq == n - 1
        assert {0.0, 6.0} <= set(data.values) <= {float(v) for v in range(7)}  # the extremes
    assert by_key["short3"].steps == list(range(40)) and set(by_key["short3"].values) == {3.0}
    assert not by_key["short3"].downsampled and by_key["short3"].seqs == list(range(40))
    assert by_key["empty"].total == 0 and by_key["empty"].steps == []
    zoomed = {d.series.key: d for d in query.read_many(series, width=500, lo=100, hi=199)}
    assert zoomed["long0"].steps == list(range(100, 200, 2)) and not zoomed["long0"].downsampled
    assert zoomed["short0"].steps == [] and zoomed["short0"].total == 0  # none in the range


def test_a_whole_series_is_drawn_without_counting_its_points_and_still_says_how_many(
    owner, cluster, django_assert_max_num_queries
):
    """Over the whole range the series' counter of stored points (or its span of steps,
    where larger) decides whether it is drawn whole or in buckets; the totals are the points
    drawn. Points written past the counter (as the factories write GPU samples) are drawn,
    and 5,000 points logged at one step are bucketed, not read whole."""
    job = factories.training_job(owner, cluster)
    gpu = factories.gpu_samples(job, [float(i % 100) for i in range(3000)], end=1.7e9)
    assert MetricSeries.objects.get(pk=gpu.pk).points == 0
    same = [ingest.Record(s, 0, 0, 7, 0.0, {"loss": float(s)}) for s in range(5000)]
    ingest.ingest(job, same)
    series = list(MetricSeries.objects.filter(job=job).order_by("key"))
    with django_assert_max_num_queries(3):
        loss, samples = query.read_many(series, width=500)
    assert samples.downsampled and samples.total == 3000 and samples.steps[-1] == 2999
    assert {0.0, 99.0} <= set(samples.values)
    assert loss.downsampled and loss.total == 5000 and loss.steps == [7]
    assert loss.values == [4999.0] and loss.max_seq == 4999


def test_metrics_json_and_exports_are_owner_only(owner, outsider, cluster):
    job = factories.training_job(owner, cluster)
    ingest.ingest(job, ingest.parse_batch(factories.metric_records(30)).records)
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


@pytest.mark.django_db(transaction=True)
def test_an_export_under_asgi_streams_a_piece_at_a_time(owner, cluster):
    """Django's ASGI handler reads a plain iterator whole into memory before its first
    byte (5 million points would be held at once): the export hands it an async one."""
    from asgiref.sync import async_to_sync  # noqa: PLC0415
    from django.test import AsyncClient  # noqa: PLC0415

    job = factories.training_job(owner, cluster)
    ingest.ingest(job, ingest.parse_batch(factories.metric_records(30)).records)
    client = AsyncClient()
    client.force_login(owner)

    async def download():
        response = await client.get(f"/jobs/{job.pk}/metrics/export/?format=csv")
        assert response.is_async  # an async iterator: no list of every line first
        return b"".join([piece async for piece in response.streaming_content])

    assert len(async_to_sync(download)().decode().splitlines()) == 61
