"""Per-series summaries: kept exactly at ingest (retries and requeues included) and equal
to what the rebuild command computes from the stored points."""

import random

import pytest
from django.core.management import call_command

from metrics import ingest
from metrics.models import MetricSeries
from metrics.summary import BUCKETS, Summary, means, rebuild, width_for

pytestmark = pytest.mark.django_db


def records(steps, key="loss"):
    rng = random.Random(7)
    return [ingest.Record(s, 0, 0, s, 1.7e9 + s, {key: rng.random()}) for s in steps]


def test_ingest_keeps_the_summary_equal_to_a_rebuild_from_the_points(job):
    batch = records(range(5000))
    for i in range(0, 5000, 700):  # several batches, each may widen the buckets
        ingest.ingest(job, batch[i : i + 700])
    ingest.ingest(job, batch[:1000])  # a retried upload: nothing counted twice
    series = MetricSeries.objects.get(job=job, key="loss")
    kept = Summary.from_bytes(series.summary)
    assert kept.count == 5000 and kept.width == width_for(4999) == 128
    built = Summary.from_bytes(rebuild(series.pk))
    assert built.width == kept.width and built.n == kept.n
    assert list(built.total) == pytest.approx(list(kept.total))
    assert (built.low, built.low_step, built.high, built.high_step) == (
        kept.low,
        kept.low_step,
        kept.high,
        kept.high_step,
    )
    values = [r.metrics["loss"] for r in batch]
    assert kept.low == min(values) and kept.low_step == values.index(min(values))
    ys, _ = means(kept, kept.width)
    assert ys[0] == pytest.approx(sum(values[:128]) / 128)


def test_the_command_builds_missing_summaries(job):
    ingest.ingest(job, records(range(300)))
    MetricSeries.objects.update(summary=None)
    call_command("build_metric_summaries", "--missing")
    assert Summary.from_bytes(MetricSeries.objects.get().summary).count == 300


def test_a_summary_is_fixed_size_and_merges_to_the_wider_width():
    a, b = Summary(), Summary()
    for s in range(10):
        a.add(s, 1.0, 100.0 + s)
    for s in range(1000):
        b.add(s, 3.0, 50.0 + s)
    b.add(-5, 0.5, 10.0)  # a step below 0 counts in the first bucket
    assert len(a.to_bytes()) == len(b.to_bytes())
    both = a.merge(b)
    assert both.width == 16 and both.count == 1011 and both.t0 == 10.0
    assert (both.low, both.low_step) == (0.5, -5)
    ys, ts = means(both, 16)
    assert ys[0] == pytest.approx((10 * 1.0 + 16 * 3.0 + 0.5) / 27)
    assert ys[BUCKETS - 1] is None  # 1000 steps fill 63 buckets of 16
    assert ts[1] is not None and ts[1] > 0


@pytest.mark.django_db(transaction=True)
def test_the_migration_summarises_series_stored_before_it(owner, cluster):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    from tests import factories

    job = factories.training_job(owner, cluster)
    executor = MigrationExecutor(connection)
    executor.migrate([("metrics", "0001_moved_from_jobs")])
    old = executor.loader.project_state([("metrics", "0001_moved_from_jobs")]).apps
    series = old.get_model("metrics", "MetricSeries").objects.create(job_id=job.pk, key="loss")
    old.get_model("metrics", "MetricPoint").objects.bulk_create(
        old.get_model("metrics", "MetricPoint")(
            series_id=series.pk, seq=s, step=s, value=float(s), time=1.0
        )
        for s in range(100)
    )
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    summary = Summary.from_bytes(MetricSeries.objects.get(pk=series.pk).summary)
    assert summary.count == 100 and summary.width == 2
    assert (summary.high, summary.high_step) == (99.0, 99)
