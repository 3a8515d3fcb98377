"""The cache: Django's Redis cache with one connection pool per process, and JSON, never
pickle.

Django keeps a cache object per context (asgiref's Local), and the WSGI thread pool
(portal/serving.py) runs each request in a copy of the event loop's context: every
request built a new client, a new pool and a new TCP connection to Redis, with its
handshake. Under bench/load_live.py's ingest that was 13 % of the web threads' time, in
the throttle's one GET. Here the client (its pool is thread-safe and forgets its
connections in a forked child) is made once per process for a LOCATION and OPTIONS.

Django's Redis cache unpickles whatever it reads, so anyone who can write to Redis could
run code in the portal. Values cached here are locks, counters, throttle histories and
one-time codes: JSON holds them all, and reading JSON runs nothing.
"""

from __future__ import annotations

import json
import threading
from typing import Any, ClassVar

from django.core.cache.backends import redis
from django.utils.functional import cached_property


class RedisCache(redis.RedisCache):
    """Django's RedisCache, whose client (and connection pool) every instance of the same
    LOCATION and OPTIONS in a process shares."""

    _clients: ClassVar[dict[str, Any]] = {}
    _lock = threading.Lock()

    @cached_property
    def _cache(self) -> Any:
        django: Any = self  # the attributes Django's RedisCache sets (its stubs omit them)
        key = repr((django._servers, sorted(django._options.items())))
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                client = self._clients[key] = django._class(django._servers, **django._options)
            return client


class JSONSerializer:
    """Django's RedisSerializer interface: integers stay raw (for incr), the rest is JSON."""

    def __init__(self, protocol=None):  # Django passes no arguments; kept for its interface
        pass

    def dumps(self, obj):
        if type(obj) is int:
            return obj
        return json.dumps(obj, separators=(",", ":")).encode()

    def loads(self, data):
        try:
            return int(data)
        except ValueError:
            pass
        try:
            return json.loads(data)
        except (ValueError, RecursionError):  # not ours (a pickle, garbage): a miss, never code
            return None
