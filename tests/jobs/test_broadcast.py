"""Publishing job changes on the channel layer: what a busy site needs of it."""

import asyncio
import uuid

from asgiref.sync import async_to_sync
from channels_redis.core import RedisChannelLayer
from django.conf import settings

from jobs import broadcast
from tests import factories


class RecordingLayer:
    def __init__(self):
        self.sent: list[tuple[str, int]] = []
        self.loops: list[asyncio.AbstractEventLoop] = []

    async def group_send(self, group, message):
        self.sent.append((group, message["job"]["id"]))
        self.loops.append(asyncio.get_running_loop())


def test_changes_published_from_sync_code_share_one_event_loop(owner, cluster, monkeypatch):
    # The Redis layer's connections belong to an event loop: a new loop per change (what
    # async_to_sync does outside one) opened new connections for every change the sync
    # published.
    first = factories.job(owner, cluster, partition=None)
    second = factories.job(owner, cluster, partition=None)
    layer = RecordingLayer()
    monkeypatch.setattr(broadcast, "get_channel_layer", lambda: layer)
    broadcast.publish_job(first)
    broadcast.publish_job(second)
    assert layer.sent == [
        (group, job.pk)
        for job in (first, second)
        for group in (
            broadcast.job_group(job.pk),
            broadcast.user_group(owner.pk),
            broadcast.STAFF_GROUP,
        )
    ]
    assert all(loop is layer.loops[0] for loop in layer.loops)


def configured_layer(**host) -> RedisChannelLayer:
    """A layer of its own, as settings configure it (the process's may hold pools of other
    event loops), with ``host`` options changed."""
    config = settings.CHANNEL_LAYERS["default"]["CONFIG"]
    return RedisChannelLayer(**{**config, "hosts": [{**config["hosts"][0], **host}]})


def test_the_layers_reads_outlast_its_blocking_receive():
    # A process's sockets wait in one BZPOPMIN that Redis holds brpop_timeout seconds; a
    # read timeout no longer than that fails the waiting socket whenever the empty answer
    # comes a moment late.
    layer = configured_layer()
    connection = layer.create_pool(0).make_connection()
    assert connection.socket_timeout is None or connection.socket_timeout > layer.brpop_timeout


def test_many_sockets_joining_and_leaving_at_once_are_not_refused():
    # 300 dashboards of one web process leaving together (a restart): each leave takes a
    # connection of the process's pool at the same moment. What is tested is the pool's
    # bound, not how fast 300 connects finish: on CI's two cores shared with the Slurm part
    # one of them once took longer than the 5 s connect timeout (TimeoutError, not refused).
    layer = configured_layer(socket_connect_timeout=60)
    groups = [f"test-burst-{uuid.uuid4().hex}" for _ in range(300)]

    async def burst():
        channel = await layer.new_channel()
        await asyncio.gather(*(layer.group_add(g, channel) for g in groups))
        await asyncio.gather(*(layer.group_discard(g, channel) for g in groups))
        await layer.close_pools()

    async_to_sync(burst)()
