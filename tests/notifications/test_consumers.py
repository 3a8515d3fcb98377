"""The notifications websocket: signed-in only, and each person hears only their own."""

import pytest
from channels.db import database_sync_to_async

from notifications import broadcast
from tests import factories
from tests.sockets import connect, run, session_cookie

pytestmark = pytest.mark.django_db(transaction=True)


def test_anonymous_socket_is_refused():
    _, connected, code = run(connect("/ws/notifications/"))
    assert not connected and code == 4401


def test_the_recipient_hears_a_new_notification_and_others_do_not(owner, outsider):
    owner_cookie, outsider_cookie = session_cookie(owner), session_cookie(outsider)

    async def listen():
        mine, connected, _ = await connect("/ws/notifications/", owner_cookie)
        theirs, also, _ = await connect("/ws/notifications/", outsider_cookie)
        assert connected and also
        made = await database_sync_to_async(factories.notification)(
            owner, text="Your job 7 failed.", url="/jobs/7/"
        )
        await database_sync_to_async(broadcast.publish)(made)
        message = await mine.receive_json_from(timeout=5)
        assert await theirs.receive_nothing(timeout=1)
        await mine.disconnect()
        await theirs.disconnect()
        return message

    message = run(listen())
    assert message["text"] == "Your job 7 failed." and message["url"] == "/jobs/7/"
    assert message["unread"] == 1 and message["recipient_id"] == owner.pk
