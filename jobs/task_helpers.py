"""What every Celery task of the portal shares: one-worker locks, retry backoff, limits."""

from __future__ import annotations

import random
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.core.cache import cache


@contextmanager
def single_flight(key: str, timeout: int) -> Iterator[bool]:
    """Yields True in the one worker holding ``key`` (a cache lock), False in the others.
    The holder releases only its own lock: one that expired under it (the holder ran past
    ``timeout``) and was taken by another worker stays that worker's."""
    token = secrets.token_hex(8)
    if not cache.add(key, token, timeout=timeout):
        yield False
        return
    try:
        yield True
    finally:
        if cache.get(key) == token:
            cache.delete(key)


def backoff(retries: int) -> float:
    """2, 4, 8 … seconds (capped), with jitter so retries do not arrive together."""
    return min(2 ** (retries + 1), settings.PORTAL_RETRY_BACKOFF_MAX) * random.uniform(0.8, 1.2)


def limits() -> dict:
    """Celery time limits for tasks that talk to clusters (read at import: Celery's own
    options are per task); a hung cluster can hold a worker this long at most."""
    hard = settings.PORTAL_TASK_TIME_LIMIT
    return {"time_limit": hard, "soft_time_limit": max(1.0, hard - 15)}
