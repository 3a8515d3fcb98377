"""Ingestion: exactly once whatever the retries, and the job-token upload endpoint."""

import json
import threading

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from metrics import ingest
from metrics.models import MetricFile, MetricPoint, MetricSeries
from metrics.summary import Summary
from tests import factories

pytestmark = pytest.mark.django_db


def stored(job):
    return sorted(MetricPoint.objects.filter(series__job=job).values_list("series__key", "seq"))


def test_ingest_twice_stores_each_point_once(job, django_capture_on_commit_callbacks):
    parsed = ingest.parse_batch(factories.metric_records(100))
    first = ingest.ingest(job, parsed.records)
    again = ingest.ingest(job, parsed.records)
    overlap = ingest.ingest(
        job, ingest.parse_batch(factories.metric_records(100, start=50)).records
    )
    assert (first.inserted, again.inserted, overlap.inserted) == (200, 0, 100)
    assert again.duplicates == 200 and overlap.duplicates == 100
    assert len(stored(job)) == 300
    assert {s.key: s.points for s in MetricSeries.objects.filter(job=job)} == {
        "loss": 150,
        "acc": 150,
    }


def test_a_batchs_queries_do_not_grow_with_its_metrics(job):
    def upload(keys, start):
        records = [
            {"seq": s, "step": s, "time": 1.7e9 + s, "metrics": {k: s / 10 for k in keys}}
            for s in range(start, start + 25)
        ]
        with CaptureQueriesContext(connection) as queries:
            result = ingest.ingest(job, ingest.parse_batch(records).records)
        assert result.inserted == 25 * len(keys)
        return len(queries)

    few, many = ["loss", "acc"], [f"m{n}" for n in range(40)]
    upload(few, 0), upload(many, 0)  # the series exist from here on
    assert upload(few, 25) == upload(many, 25)
    for series in MetricSeries.objects.filter(job=job):
        assert (series.points, series.last_step, series.last_value) == (50, 49, 4.9)
        assert Summary.from_bytes(series.summary).count == 50


def test_a_requeued_attempt_and_another_rank_are_separate_series(job):
    ingest.ingest(
        job,
        ingest.parse_batch(
            factories.metric_records(10)
            + factories.metric_records(10, attempt=1)
            + factories.metric_records(10, rank=1)
        ).records,
    )
    labels = sorted(s.label for s in MetricSeries.objects.filter(job=job, key="loss"))
    assert labels == ["loss", "loss (attempt 2)", "loss [rank 1]"]
    assert MetricPoint.objects.filter(series__job=job).count() == 60


def test_parse_lines_leaves_a_partial_last_line_for_the_next_read():
    lines = "\n".join(json.dumps(r) for r in factories.metric_records(3)).encode()
    parsed, used = ingest.parse_lines(lines + b"\n" + b'{"seq": 3, "att')
    assert [r.seq for r in parsed.records] == [0, 1, 2] and used == len(lines) + 1


def test_damaged_lines_are_reported_and_skipped():
    parsed, _ = ingest.parse_lines(
        b'{"seq": 0, "time": 1, "metrics": {"loss": 1}}\nnot json\n'
        b'{"seq": 1, "time": 1, "metrics": {"bad name!": 1}}\n'
    )
    assert [r.seq for r in parsed.records] == [0]
    assert len(parsed.errors) == 2 and "bad name!" in parsed.errors[1]


def test_node_names_keep_only_host_name_characters():
    record = ingest.parse_record({"seq": 1, "time": 1, "metrics": {"a": 1}, "node": "gpu\x0001;x"})
    assert record.node == "gpu01x"


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"seq": -1, "time": 1, "metrics": {"a": 1}}, "'seq'"),
        ({"seq": 1, "time": "x", "metrics": {"a": 1}}, "'time'"),
        ({"seq": 1, "time": 1, "metrics": {}}, "'metrics'"),
        ({"seq": 1, "time": 1, "metrics": {"a": "NaN"}}, "finite number"),
        ({"seq": 1, "time": 1, "metrics": {"a;rm -rf": 1}}, "not allowed"),
        ({"seq": True, "time": 1, "metrics": {"a": 1}}, "'seq'"),
        ({"seq": 1, "time": 10**400, "metrics": {"a": 1}}, "'time'"),  # found by schemathesis
        ({"seq": 1, "time": 1, "metrics": {"a": 10**400}}, "finite number"),
        ([1, 2], "JSON object"),
    ],
)
def test_bad_records_get_a_clear_message(record, message):
    with pytest.raises(ingest.BadRecord, match=message):
        ingest.parse_record(record)


# --- the upload endpoint ---------------------------------------------------------------------


def post(job_id, body, token=None):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return Client().post(
        f"/api/v1/jobs/{job_id}/metrics/ingest/", data, content_type="application/json", **headers
    )


def test_upload_with_the_jobs_token_stores_points(job):
    token = ingest.issue_token(job)
    response = post(job.pk, factories.metric_records(20), token)
    assert response.status_code == 200, response.content
    assert response.json() == {"inserted": 40, "duplicates": 0, "rejected": []}
    assert post(job.pk, factories.metric_records(20), token).json()["duplicates"] == 40
    assert len(stored(job)) == 40


def test_only_the_tokens_hash_is_stored(job):
    token = ingest.issue_token(job)
    job.refresh_from_db()
    assert token not in job.metrics_token_hash and len(job.metrics_token_hash) == 64


def test_a_token_for_job_a_cannot_write_to_job_b(job, owner, cluster):
    other = factories.training_job(owner, cluster)
    token_a = ingest.issue_token(job)
    ingest.issue_token(other)
    response = post(other.pk, factories.metric_records(5), token_a)
    assert (
        response.status_code == 403 and "not valid for job" in response.json()["error"]["message"]
    )
    assert stored(other) == []
    for unknown in (999999, 2**63, 10**30):  # the same answer, past the ids' range too
        assert post(unknown, factories.metric_records(5), token_a).status_code == 403


def test_the_token_stops_working_when_the_job_ends(job):
    token = ingest.issue_token(job)
    assert post(job.pk, factories.metric_records(5), token).status_code == 200
    job.transition("completed")
    response = post(job.pk, factories.metric_records(5, start=5), token)
    assert response.status_code == 410 and "ended" in response.json()["error"]["message"]
    assert len(stored(job)) == 10


def test_a_new_token_replaces_the_old_one(job):
    old = ingest.issue_token(job)
    new = ingest.issue_token(job)
    assert post(job.pk, factories.metric_records(1), old).status_code == 403
    assert post(job.pk, factories.metric_records(1), new).status_code == 200


@pytest.mark.parametrize(
    ("body", "status", "text"),
    [
        (b"not json", 400, "JSON array"),
        ({"records": []}, 400, "JSON array"),
        ([{"seq": "x"}], 400, "No valid records"),
        ([{}] * 10_001, 400, "at most"),
    ],
)
def test_bad_uploads_are_refused_with_a_message(job, body, status, text):
    token = ingest.issue_token(job)
    response = post(job.pk, body, token)
    assert response.status_code == status and text in json.dumps(response.json())


def test_body_size_follows_djangos_setting(job, settings):
    token = ingest.issue_token(job)
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 200
    too_big = post(job.pk, factories.metric_records(20), token)
    assert too_big.status_code == 413 and too_big.json()["error"]["code"] == "too_large"
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = None  # no bound
    assert post(job.pk, factories.metric_records(20), token).status_code == 200


def test_missing_token_is_401_and_get_is_405(job):
    assert post(job.pk, factories.metric_records(1)).status_code == 401
    token = ingest.issue_token(job)
    get = Client().get(
        f"/api/v1/jobs/{job.pk}/metrics/ingest/", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert get.status_code == 405


def test_good_records_are_kept_when_some_are_bad(job):
    token = ingest.issue_token(job)
    response = post(
        job.pk, factories.metric_records(2) + [{"seq": 9, "time": 1, "metrics": {"x": None}}], token
    )
    body = response.json()
    assert (
        response.status_code == 200 and body["inserted"] == 4 and "record 2" in body["rejected"][0]
    )


# --- quotas and throttling -------------------------------------------------------------------


def test_too_many_series_is_a_413_and_stores_nothing(job, settings):
    settings.PORTAL_METRICS_MAX_SERIES = 3
    token = ingest.issue_token(job)
    assert post(job.pk, factories.metric_records(5), token).status_code == 200  # loss, acc
    flood = [{"seq": 0, "time": 1, "metrics": {f"m{i}": 1 for i in range(50)}}]
    response = post(job.pk, flood, token)
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "quota_exceeded" and "at most 3 metric series" in error["message"]
    assert MetricSeries.objects.filter(job=job).count() == 2
    assert (
        post(job.pk, factories.metric_records(5, start=5), token).status_code == 200
    )  # the old ones go on


def test_points_and_bytes_have_per_job_limits(job, settings):
    token = ingest.issue_token(job)
    settings.PORTAL_METRICS_MAX_POINTS = 15
    assert post(job.pk, factories.metric_records(5), token).status_code == 200  # 10 points
    response = post(job.pk, factories.metric_records(5, start=5), token)
    assert response.status_code == 413 and "at most 15 metric points" in response.content.decode()
    settings.PORTAL_METRICS_MAX_POINTS = 10**9
    settings.PORTAL_METRICS_MAX_BYTES = 5000
    assert post(job.pk, factories.metric_records(5, start=5), token).status_code == 200
    response = post(job.pk, factories.metric_records(50, start=10), token)
    assert response.status_code == 413 and "5000 bytes" in response.content.decode()
    assert len(stored(job)) == 20


def test_ranks_are_bounded(settings):
    settings.PORTAL_METRICS_MAX_RANKS = 8
    assert ingest.parse_record({"seq": 0, "time": 1, "metrics": {"a": 1}, "rank": 7}).rank == 7
    with pytest.raises(ingest.BadRecord, match="'rank' must be a whole number from 0 to 7"):
        ingest.parse_record({"seq": 0, "time": 1, "metrics": {"a": 1}, "rank": 8})


def test_uploads_are_throttled_per_job_not_per_address(job, owner, cluster, settings):
    from metrics.views import JobIngestThrottle

    # The throttle's keys carry the job's random uid: no other test's counts are seen.
    JobIngestThrottle.THROTTLE_RATES = {**JobIngestThrottle.THROTTLE_RATES, "ingest": "3/min"}
    try:
        token = ingest.issue_token(job)
        codes = [
            post(job.pk, factories.metric_records(1, start=i), token).status_code for i in range(5)
        ]
        assert codes == [200, 200, 200, 429, 429]
        refused = post(job.pk, factories.metric_records(1, start=9), token)
        assert refused.json()["error"]["code"] == "throttled" and refused.has_header("Retry-After")
        other = factories.training_job(owner, cluster)  # another job, same address: its own budget
        assert (
            post(other.pk, factories.metric_records(1), ingest.issue_token(other)).status_code
            == 200
        )
    finally:
        JobIngestThrottle.THROTTLE_RATES = {
            **JobIngestThrottle.THROTTLE_RATES,
            "ingest": settings.PORTAL_METRICS_INGEST_RATE,
        }


@pytest.mark.parametrize("depth", [10_000, 200_000])
def test_json_nested_to_any_depth_is_a_400(job, depth):
    token = ingest.issue_token(job)
    response = Client().post(
        f"/api/v1/jobs/{job.pk}/metrics/ingest/",
        "[" * depth + "]" * depth,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 400, response.content[:200]
    parsed, _ = ingest.parse_lines(b"[" * depth + b"\n")
    assert parsed.errors and not parsed.records


def records(n: int, start: int = 0) -> list:
    return ingest.parse_batch(factories.metric_records(n, start=start)).records


def test_a_group_of_uploads_takes_the_statements_of_one(owner, cluster):
    """Uploads written together (ingest.ingest_together under load) are stored in one
    transaction of as many statements as one upload's; each gets its own answer, and a
    point two uploads of the group bring counts as stored for the first only."""
    a, b, c = (factories.training_job(owner, cluster) for _ in range(3))
    for job in (a, b, c):
        ingest.ingest(job, records(5))  # the series exist from here on
    with CaptureQueriesContext(connection) as one:
        ingest.store([ingest.Upload(a, records(5, start=5), 100)])
    group = [
        ingest.Upload(a, records(10, start=10), 100),
        ingest.Upload(b, records(10, start=5), 100),
        ingest.Upload(a, records(10, start=15), 100),  # half of it came in the first
        ingest.Upload(c, records(5, start=0), 100),  # stored already (a retry)
        ingest.Upload(c, records(5, start=5), 100),
    ]
    with CaptureQueriesContext(connection) as together:
        ingest.store(group)
    assert len(together) == len(one)
    answers = [(u.outcome().inserted, u.outcome().duplicates) for u in group]
    assert answers == [(20, 0), (20, 0), (10, 10), (0, 10), (10, 0)]
    assert (len(stored(a)), len(stored(b)), len(stored(c))) == (2 * 25, 2 * 15, 2 * 10)
    for series in MetricSeries.objects.filter(job=a):
        assert (series.points, series.last_step) == (25, 24)
        assert Summary.from_bytes(series.summary).count == 25
    a.refresh_from_db()
    assert a.metrics_bytes == 300  # what the uploads said they received (the first none)


def test_an_upload_past_its_quota_is_refused_alone_in_its_group(owner, cluster, settings):
    settings.PORTAL_METRICS_MAX_POINTS = 30
    a, b = factories.training_job(owner, cluster), factories.training_job(owner, cluster)
    ingest.ingest(b, records(10))  # 20 of its 30 points
    group = [
        ingest.Upload(a, records(10), 50),
        ingest.Upload(b, records(10, start=10), 50),  # 20 more: past the limit
        ingest.Upload(b, records(5, start=10), 50),  # 10 more: within it
        ingest.Upload(a, records(5, start=10), 50),  # 10 more for a: 30 in all, within
    ]
    ingest.store(group)
    with pytest.raises(ingest.QuotaExceeded, match="at most 30 metric points"):
        group[1].outcome()
    assert [group[n].outcome().inserted for n in (0, 2, 3)] == [20, 10, 10]
    assert len(stored(a)) == 30 and len(stored(b)) == 30
    b.refresh_from_db()
    assert b.metrics_bytes == 50  # the refused upload's bytes are not counted


@pytest.mark.django_db(transaction=True)
def test_uploads_from_many_threads_at_once_are_each_stored_once(owner, cluster):
    """Eight threads, each with its own job, upload at once through ingest_together (each
    thread its own database connection, as the web tier's pool): every point stored
    once, every answer right, whoever wrote the group."""
    jobs = [factories.training_job(owner, cluster) for _ in range(8)]
    start = threading.Barrier(len(jobs))
    answers: dict[int, list] = {}

    def upload(job) -> None:
        start.wait(10)
        try:
            answers[job.pk] = [
                ingest.ingest_together(job, records(20, start=10 * n)).inserted for n in range(4)
            ]
        finally:
            connection.close()

    threads = [threading.Thread(target=upload, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert answers == {job.pk: [40, 20, 20, 20] for job in jobs}
    for job in jobs:
        assert len(stored(job)) == 2 * 50
        assert sorted(MetricSeries.objects.filter(job=job).values_list("points", flat=True)) == [
            50,
            50,
        ]


def test_deleting_a_job_deletes_its_points_without_a_database_constraint(owner, cluster):
    """Points carry no foreign key in the database (its check of every point inserted
    cost ingest): Django's cascade removes them with their series and job."""
    job, other = factories.training_job(owner, cluster), factories.training_job(owner, cluster)
    ingest.ingest(job, records(10))
    ingest.ingest(other, records(10))
    job.delete()
    assert not MetricSeries.objects.filter(job_id=job.pk).exists()
    assert MetricPoint.objects.count() == len(stored(other)) == 20


def test_a_read_cut_short_waits_and_only_a_whole_pass_without_a_line_end_is_skipped(
    owner, cluster, settings
):
    """store_read (the SSH tail's, for its files and MLflow's): a read that ended inside a
    line (the pass's budget ran out there) moves no offset; a whole pass with no line end
    in it is one damaged line, skipped."""
    settings.PORTAL_METRICS_TAIL_BYTES = 4096
    job = factories.training_job(owner, cluster)
    assert ingest.store_read(job, "rank-0.jsonl", 100, [], 0, 50) == 0
    assert MetricFile.objects.get(job=job, name="rank-0.jsonl").offset == 100
    ingest.store_read(job, "rank-0.jsonl", 100, [], 0, 4096)
    assert MetricFile.objects.get(job=job, name="rank-0.jsonl").offset == 4196
