"""The channel layer job changes are published on: what a busy site needs of it."""

import asyncio
import uuid

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer


def test_the_layers_reads_outlast_its_blocking_receive():
    # A process's sockets wait in one BZPOPMIN that Redis holds brpop_timeout seconds; a
    # read timeout no longer than that fails the waiting socket whenever the empty answer
    # comes a moment late.
    layer = get_channel_layer()
    connection = layer.create_pool(0).make_connection()
    assert connection.socket_timeout is None or connection.socket_timeout > layer.brpop_timeout


def test_many_sockets_joining_and_leaving_at_once_are_not_refused():
    # 300 dashboards of one web process leaving together (a restart): each leave takes a
    # connection of the process's pool at the same moment.
    layer = get_channel_layer()
    groups = [f"test-burst-{uuid.uuid4().hex}" for _ in range(300)]

    async def burst():
        channel = await layer.new_channel()
        await asyncio.gather(*(layer.group_add(g, channel) for g in groups))
        await asyncio.gather(*(layer.group_discard(g, channel) for g in groups))
        await layer.close_pools()

    async_to_sync(burst)()
