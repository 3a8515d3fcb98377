"""The jobs websocket: session-authenticated, origin-checked, owner or staff only."""

import pytest

from jobs.broadcast import publish_job
from tests import factories
from tests.sockets import connect, run, session_cookie

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def job(owner, cluster):
    return factories.job(
        owner,
        cluster,
        "true",
        partition=None,
        image=factories.image("h", "H"),
        memory_gb=4,
        time_limit_minutes=60,
    )


def test_anonymous_socket_is_refused(job):
    _, connected, code = run(connect(f"/ws/jobs/{job.pk}/"))
    assert not connected and code == 4401


def test_another_users_job_socket_is_refused(job, outsider):
    _, connected, code = run(connect(f"/ws/jobs/{job.pk}/", session_cookie(outsider)))
    assert not connected and code == 4404


def test_foreign_origin_is_refused(job, owner):
    _, connected, _ = run(
        connect(f"/ws/jobs/{job.pk}/", session_cookie(owner), origin=b"https://evil.example")
    )
    assert not connected


async def _receive_update(path, cookie, job):
    communicator, connected, _ = await connect(path, cookie)
    assert connected
    from channels.db import database_sync_to_async

    if path != "/ws/jobs/":  # a job's socket starts with the job as it is now
        snapshot = await communicator.receive_json_from(timeout=5)
        assert snapshot["job"]["id"] == job.pk and snapshot["job"]["state"] == "queued"
    await database_sync_to_async(publish_job)(job)
    message = await communicator.receive_json_from(timeout=5)
    await communicator.disconnect()
    return message


def test_owner_and_staff_receive_updates_but_outsiders_dashboards_do_not(
    job, owner, staff, outsider
):
    for cookie in (session_cookie(owner), session_cookie(staff)):
        assert run(_receive_update(f"/ws/jobs/{job.pk}/", cookie, job))["job"]["id"] == job.pk
        assert run(_receive_update("/ws/jobs/", cookie, job))["job"]["state"] == "queued"

    outsider_cookie = session_cookie(outsider)

    async def outsider_hears_nothing():
        communicator, connected, _ = await connect("/ws/jobs/", outsider_cookie)
        assert connected
        from channels.db import database_sync_to_async

        await database_sync_to_async(publish_job)(job)
        assert await communicator.receive_nothing(timeout=1)
        await communicator.disconnect()

    run(outsider_hears_nothing())
