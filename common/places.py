"""Places: at most N holders of one key at once, across every process, counted in Redis.

A place is a member of the key's sorted set, scored by when it lapses: a process killed
while holding one keeps it no longer than its ``ttl``. Used to bound one person's share of
the web threads (clusters/share.py) and of the worker processes
(jobs/task_helpers.PersonTask)."""

from __future__ import annotations

import logging
import time
from typing import Any, cast

from django.core.cache import cache
from django.core.cache.backends import redis

log = logging.getLogger(__name__)

_TAKE = """
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[4])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])) + 1)
return 1
"""


def _client(key: str):
    """The Redis client and the full key; (None, key) where the cache is not Redis."""
    backend = cast(Any, cache)
    if not isinstance(getattr(backend, "_cache", None), redis.RedisCacheClient):
        return None, key
    full = backend.make_and_validate_key(key)
    return backend._cache.get_client(full, write=True), full


def take(key: str, token: str, *, most: int, ttl: float) -> bool:
    """One of ``most`` places of ``key`` for ``token`` (for ``ttl`` seconds at most), or
    False when all are held. Always True on a cache that is not Redis (no shared count)."""
    client, full = _client(key)
    if client is None:
        return True
    return bool(client.eval(_TAKE, 1, full, time.time(), ttl, most, token))


def give_back(key: str, token: str) -> None:
    client, full = _client(key)
    if client is None:
        return
    try:
        client.zrem(full, token)
    except Exception:  # noqa: BLE001 - the place lapses by itself
        log.warning("could not give back a place of %s", key, exc_info=True)
