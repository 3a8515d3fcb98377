"""The metrics websocket: owner and staff only, history first, then ~1 s batches."""

import asyncio

import pytest
from channels.db import database_sync_to_async

from metrics import ingest
from metrics.consumers import MetricsConsumer
from tests import factories
from tests.sockets import connect, run, session_cookie

pytestmark = pytest.mark.django_db(transaction=True)


def path(job):
    return f"/ws/jobs/{job.pk}/metrics/?width=200"


def test_anonymous_outsider_and_foreign_origin_are_refused(job, outsider, owner):
    assert run(connect(path(job)))[2] == 4401
    _, connected, code = run(connect(path(job), session_cookie(outsider)))
    assert not connected and code == 4404
    _, connected, _ = run(connect(path(job), session_cookie(owner), origin=b"https://evil.example"))
    assert not connected


def test_history_is_downsampled_then_new_points_arrive_batched(job, owner, staff, monkeypatch):
    ingest.ingest(job, ingest.parse_batch(factories.metric_records(3000)).records)
    # When the consumer sends each batch, on its own loop's clock: the client's receive
    # times also hold the test process's scheduling (a busy machine delayed the first).
    sent_at: list[float] = []
    send_json = MetricsConsumer.send_json

    async def recording(self, content, close=False):
        if content.get("type") == "points":
            sent_at.append(asyncio.get_running_loop().time())
        await send_json(self, content, close)

    monkeypatch.setattr(MetricsConsumer, "send_json", recording)

    async def scenario(cookie):
        communicator, connected, _ = await connect(path(job), cookie)
        assert connected
        history = await communicator.receive_json_from(timeout=10)
        for start in (3000, 3010, 3020, 3030):  # four uploads in quick succession
            await database_sync_to_async(ingest.ingest)(
                job, ingest.parse_batch(factories.metric_records(10, start=start)).records
            )
        messages = []
        while sum(len(m["points"].get(str(loss_id(history)), [])) for m in messages) < 40:
            messages.append(await communicator.receive_json_from(timeout=5))
        assert await communicator.receive_nothing(timeout=0.3)
        await communicator.disconnect()
        return history, messages

    for cookie in (session_cookie(owner), session_cookie(staff)):
        sent_at.clear()
        job.metric_series.all().delete()
        ingest.ingest(job, ingest.parse_batch(factories.metric_records(3000)).records)
        history, messages = run(scenario(cookie))
        assert history["type"] == "history"
        loss = next(s for s in history["series"] if s["key"] == "loss")
        assert loss["downsampled"] and loss["total"] == 3000 and len(loss["step"]) <= 400
        assert {m["type"] for m in messages} == {"points"}
        seqs = [r[3] for m in messages for r in m["points"][str(loss["id"])]]
        assert seqs == list(range(3000, 3040))  # all of them, once, in order
        # The first upload goes out at once, the rest are batched: one message a second.
        assert len(messages) <= 2
        if len(messages) == 2:
            assert len(sent_at) == 2
            assert sent_at[1] - sent_at[0] >= MetricsConsumer.FLUSH_SECONDS * 0.95


def loss_id(history):
    return next(s["id"] for s in history["series"] if s["key"] == "loss")


def test_another_jobs_points_do_not_reach_this_socket(job, owner, cluster):
    other = factories.training_job(owner, cluster)
    cookie = session_cookie(owner)

    async def scenario():
        communicator, connected, _ = await connect(path(job), cookie)
        assert connected
        await communicator.receive_json_from(timeout=5)
        await database_sync_to_async(ingest.ingest)(
            other, ingest.parse_batch(factories.metric_records(5)).records
        )
        assert await communicator.receive_nothing(timeout=1.5)
        await communicator.disconnect()

    run(scenario())
