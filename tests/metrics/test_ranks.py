"""Per-rank progress: which node each rank ran on, its steps per second, how far it is
behind, and which rank is named the straggler."""

import pytest
from django.test import Client

from metrics import ingest, ranks
from tests import factories

pytestmark = pytest.mark.django_db


def log_steps(job, rank, node, steps, seconds_per_step, *, attempt=0, key="loss", start=0.0):
    """``steps`` points of ``key`` for ``rank`` on ``node``, one every ``seconds_per_step``."""
    ingest.ingest(
        job,
        [
            ingest.Record(
                s, attempt, rank, s, 1.7e9 + start + s * seconds_per_step, {key: 1.0}, False, node
            )
            for s in range(steps)
        ],
    )


def test_each_rank_shows_its_node_rate_and_lag_and_the_slow_one_is_named(job):
    for rank, node in enumerate(["node1", "node1", "node2", "node2"]):
        slow = rank == 3
        log_steps(job, rank, node, 50 if slow else 200, 0.4 if slow else 0.1)
    progress = ranks.job_progress(job.pk)
    assert progress.key == "loss"
    by_rank = {r.rank: r for r in progress.ranks}
    assert [by_rank[r].node for r in range(4)] == ["node1", "node1", "node2", "node2"]
    assert by_rank[0].steps_per_second == pytest.approx(10, rel=0.01)
    assert by_rank[3].steps_per_second == pytest.approx(2.5, rel=0.01)
    assert by_rank[3].lag_steps == 150 and by_rank[0].lag_steps == 0
    assert progress.slowest == 3


def test_ranks_in_step_name_no_straggler(job):
    for rank in range(4):
        log_steps(job, rank, f"node{rank // 2 + 1}", 100, 0.1 + rank * 0.001)
    assert ranks.job_progress(job.pk).slowest is None


def test_a_rank_that_stopped_logging_is_named_by_its_lag(job):
    """Its last points came at the usual rate, but it is far behind: hung, not slow."""
    log_steps(job, 0, "node1", 500, 0.1)
    log_steps(job, 1, "node2", 100, 0.1)
    progress = ranks.job_progress(job.pk)
    assert progress.slowest == 1 and progress.ranks[1].lag_steps == 400


def test_progress_reads_the_metric_every_rank_logs_in_the_latest_attempt(job):
    log_steps(job, 0, "node1", 100, 0.1, key="val_accuracy")  # rank 0 only
    for rank in range(2):
        log_steps(job, rank, "node1", 30, 0.1, key="loss")
        log_steps(job, rank, "node2", 20, 0.1, key="loss", attempt=1)
    progress = ranks.job_progress(job.pk)
    assert progress.key == "loss" and progress.attempt == 1
    assert [r.last_step for r in progress.ranks] == [19, 19]
    assert {r.node for r in progress.ranks} == {"node2"}


def test_with_every_metric_logged_alike_progress_reads_the_loss(job):
    for rank in range(2):
        for key in ("allreduce_ms", "loss", "samples_per_s"):
            log_steps(job, rank, "node1", 10, 0.1, key=key)
    assert ranks.job_progress(job.pk).key == "loss"


def test_a_job_without_metrics_has_no_ranks(job):
    assert ranks.job_progress(job.pk).as_dict() == {
        "key": "",
        "attempt": 0,
        "ranks": [],
        "slowest": None,
        "nodes": [],
    }


def test_the_rank_panel_is_its_owners_only(owner, cluster, job):
    log_steps(job, 0, "node1", 10, 0.1)
    mine = Client()
    mine.force_login(owner)
    answer = mine.get(f"/jobs/{job.pk}/metrics/ranks/").json()
    assert answer["ranks"][0]["node"] == "node1" and answer["nodes"] == ["node1"]
    outsider = Client()
    outsider.force_login(factories.user("mallory"))
    assert outsider.get(f"/jobs/{job.pk}/metrics/ranks/").status_code == 404
    api = factories.api_client(owner)
    assert api.get(f"/api/v1/jobs/{job.pk}/metrics/ranks/").json()["ranks"][0]["rank"] == 0
    assert (
        factories.api_client(factories.user("eve"))
        .get(f"/api/v1/jobs/{job.pk}/metrics/ranks/")
        .status_code
        == 404
    )
