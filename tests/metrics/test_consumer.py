"""The metrics websocket: owner and staff only, history first, then ~1 s batches."""

import time

import pytest
from channels.db import database_sync_to_async

from jobs.consumers import MetricsConsumer
from jobs.metrics import ingest
from tests.jobs.test_consumers import connect, run, session_cookie
from tests.metrics.conftest import records

pytestmark = pytest.mark.django_db(transaction=True)


def path(job):
    return f"/ws/jobs/{job.pk}/metrics/?width=200"


def test_anonymous_outsider_and_foreign_origin_are_refused(job, outsider, owner):
    assert run(connect(path(job)))[2] == 4401
    _, connected, code = run(connect(path(job), session_cookie(outsider)))
    assert not connected and code == 4404
    _, connected, _ = run(connect(path(job), session_cookie(owner), origin=b"https://evil.example"))
    assert not connected


def test_history_is_downsampled_then_new_points_arrive_batched(job, owner, staff):
    ingest.ingest(job, ingest.parse_batch(records(3000)).records)

    async def scenario(cookie):
        communicator, connected, _ = await connect(path(job), cookie)
        assert connected
        history = await communicator.receive_json_from(timeout=10)
        sent = time.monotonic()
        for start in (3000, 3010, 3020):  # three uploads in quick succession…
            await database_sync_to_async(ingest.ingest)(
                job, ingest.parse_batch(records(10, start=start)).records
            )
        update = await communicator.receive_json_from(timeout=5)  # …arrive as one batch
        waited = time.monotonic() - sent
        assert await communicator.receive_nothing(timeout=0.3)
        await communicator.disconnect()
        return history, update, waited

    for cookie in (session_cookie(owner), session_cookie(staff)):
        job.metric_series.all().delete()
        ingest.ingest(job, ingest.parse_batch(records(3000)).records)
        history, update, waited = run(scenario(cookie))
        assert history["type"] == "history"
        loss = next(s for s in history["series"] if s["key"] == "loss")
        assert loss["downsampled"] and loss["total"] == 3000 and len(loss["step"]) <= 402
        assert update["type"] == "points"
        rows = update["points"][str(loss["id"])]
        assert [r[3] for r in rows] == list(range(3000, 3030))
        assert waited >= MetricsConsumer.FLUSH_SECONDS * 0.8


def test_another_jobs_points_do_not_reach_this_socket(job, owner, cluster):
    from tests.metrics.conftest import make_job

    other = make_job(owner, cluster)
    cookie = session_cookie(owner)

    async def scenario():
        communicator, connected, _ = await connect(path(job), cookie)
        assert connected
        await communicator.receive_json_from(timeout=5)
        await database_sync_to_async(ingest.ingest)(other, ingest.parse_batch(records(5)).records)
        assert await communicator.receive_nothing(timeout=1.5)
        await communicator.disconnect()

    run(scenario())
