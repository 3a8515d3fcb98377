"""Metrics moved from the jobs app to their own (metrics): rows stored before the
move are read by the new models afterwards, and the content types follow."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("jobs", "0013_tensorboard_sessions"), ("metrics", None)]
AFTER = [("jobs", "0014_metrics_moved_to_their_app"), ("metrics", "0001_moved_from_jobs")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    nodes = [t for t in targets if t[1]] + [("contenttypes", "0002_remove_content_type_name")]
    return executor.loader.project_state(nodes).apps


@pytest.fixture
def back_to_latest():
    yield
    executor = MigrationExecutor(connection)  # also what later migrations of other apps undid
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_metric_rows_survive_the_move_to_their_own_app(back_to_latest):
    old = _migrate(BEFORE)
    User = old.get_model("auth", "User")
    owner = User.objects.create(username="mover")
    cluster = old.get_model("jobs", "Cluster").objects.create(
        name="c", ssh_host="localhost", host_key="SHA256:" + "A" * 43
    )
    partition = old.get_model("jobs", "Partition").objects.create(cluster=cluster, name="p")
    image = old.get_model("jobs", "ContainerImage").objects.create(name="i", slug="i")
    job = old.get_model("jobs", "Job").objects.create(
        owner=owner, cluster=cluster, partition=partition, image=image, uid="abc"
    )
    series = old.get_model("jobs", "MetricSeries").objects.create(job=job, key="loss")
    old.get_model("jobs", "MetricPoint").objects.create(
        series=series, seq=1, step=10, value=0.5, time=1.0
    )
    old.get_model("jobs", "MetricFile").objects.create(job=job, name="rank-0.jsonl", offset=7)
    ContentType = old.get_model("contenttypes", "ContentType")
    ContentType.objects.get_or_create(app_label="jobs", model="metricseries")

    new = _migrate(AFTER)
    point = new.get_model("metrics", "MetricPoint").objects.get()
    assert (point.series.key, point.series.job_id, point.step, point.value) == (
        "loss",
        job.pk,
        10,
        0.5,
    )
    assert new.get_model("metrics", "MetricFile").objects.get().offset == 7
    moved = new.get_model("contenttypes", "ContentType").objects.filter(model="metricseries")
    assert list(moved.values_list("app_label", flat=True)) == ["metrics"]
