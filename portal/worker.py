"""Kombu's Redis transport, mended so that a broker outage never ends a Celery worker.

When the worker loses Redis, Celery 5.7 collects the lost connection (which drops the
transport's ``client``) and then still uses channels of it: it closes the connection,
which gives back the messages the worker had reserved, and acknowledgements of tasks that
finish meanwhile arrive on the old channel. Each builds a Redis client from the dropped
``client`` and raises ``AttributeError: 'NoneType' object has no attribute 'hostname'``,
which is no connection error, so the worker stops with "Unrecoverable error" (on most
Redis restarts with tasks in flight: tests/devcluster/test_celery_worker.py). Here a
channel whose connection is gone says so with Redis's own ``ConnectionError``, one of the
transport's connection errors: the close and the acknowledgement are then ignored as
Celery ignores them after any connection loss, and the consumer reconnects. Messages it
had reserved come back after the visibility timeout or, when Redis came back empty, the
recovery sweep queues their jobs again. Selected by ``CELERY_BROKER_TRANSPORT`` (the
Sentinel variant with REDIS_SENTINELS).
"""

from __future__ import annotations

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError


class Channel(kombu_redis.Channel):
    def _connparams(self, asynchronous: bool = False) -> dict:
        if self.connection.client is None:  # collected after a connection loss
            raise RedisConnectionError("the broker connection of this channel was closed")
        return super()._connparams(asynchronous=asynchronous)  # type: ignore[misc]


class Transport(kombu_redis.Transport):
    Channel = Channel


class SentinelChannel(kombu_redis.SentinelChannel):
    """The same mend for the Sentinel transport (REDIS_SENTINELS, portal/redis_ha.py),
    where a failover is exactly such a lost connection."""

    def _connparams(self, asynchronous: bool = False) -> dict:
        if self.connection.client is None:
            raise RedisConnectionError("the broker connection of this channel was closed")
        return super()._connparams(asynchronous=asynchronous)  # type: ignore[misc]


class SentinelTransport(kombu_redis.SentinelTransport):
    Channel = SentinelChannel
