"""The cache's serializer: JSON, never pickle.

Django's Redis cache unpickles whatever it reads, so anyone who can write to Redis could
run code in the portal. Values cached here are locks, counters, throttle histories and
one-time codes: JSON holds them all, and reading JSON runs nothing.
"""

from __future__ import annotations

import json


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
