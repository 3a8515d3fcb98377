"""What every Celery task of the portal shares: one-worker locks, retry backoff, limits,
and the deadline its cluster calls keep (clusters.deadline)."""

from __future__ import annotations

import logging
import math
import random
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from celery import Task
from django.conf import settings
from django.core.cache import cache, close_caches

from clusters import deadline

log = logging.getLogger(__name__)


@contextmanager
def single_flight(key: str, timeout: int) -> Iterator[bool]:
    """Yields True in the one worker holding ``key`` (a cache lock), False in the others.
    The holder releases only its own lock: one that expired under it (the holder ran past
    ``timeout``) and was taken by another worker stays that worker's.

    The lock is a lease of PORTAL_LOCK_LEASE seconds that a thread of the holder renews
    while it runs (for ``timeout`` seconds at most): a holder that dies without releasing
    it (SIGKILL, the OOM killer, a lost host) holds it up one lease, not ``timeout``."""
    token = secrets.token_hex(8)
    started = time.monotonic()
    lease = max(1, min(timeout, math.ceil(settings.PORTAL_LOCK_LEASE)))
    if not cache.add(key, token, timeout=lease):
        yield False
        return
    stop = threading.Event()
    renewer = threading.Thread(
        target=_renew, args=(key, token, lease, started + timeout, stop), daemon=True
    )
    renewer.start()
    try:
        yield True
    finally:
        stop.set()
        renewer.join()
        if cache.get(key) == token:
            cache.delete(key)


def _renew(key: str, token: str, lease: int, until: float, stop: threading.Event) -> None:
    """Extends the holder's lease every third of it, up to ``until`` (monotonic)."""
    try:
        while not stop.wait(lease / 3):
            left = until - time.monotonic()
            # get-then-touch: a lock that expired in between and was taken by another
            # worker gets one lease more, which delays it and breaks nothing.
            if left <= 0 or cache.get(key) != token:
                return
            cache.touch(key, max(1, math.ceil(min(lease, left))))
    except Exception:  # noqa: BLE001 - Redis away: the lease runs out, as for a dead holder
        log.warning("lock %s: lease not renewed", key, exc_info=True)
    finally:
        close_caches()


def backoff(retries: int) -> float:
    """2, 4, 8 … seconds (capped), with jitter so retries do not arrive together."""
    return min(2 ** (retries + 1), settings.PORTAL_RETRY_BACKOFF_MAX) * random.uniform(0.8, 1.2)


def limits() -> dict:
    """Celery time limits for tasks that talk to clusters (read at import: Celery's own
    options are per task); a hung cluster can hold a worker this long at most, and each
    SSH command ends before the soft limit (BoundedTask)."""
    hard = settings.PORTAL_TASK_TIME_LIMIT
    return {"time_limit": hard, "soft_time_limit": max(1.0, hard - 15), "base": BoundedTask}


def soft_limit(task) -> float | None:
    """The soft time limit ``task`` runs under now (a message's own, else the task's)."""
    request = getattr(task, "request", None)
    limits = getattr(request, "timelimit", None) or (None, None)
    return limits[1] or getattr(task, "soft_time_limit", None)


def deadline_of(soft: float) -> float:
    """Seconds a task with soft limit ``soft`` gives its cluster calls: a tenth short of
    it (at least a second), so a command cut at its deadline still leaves the task time
    to record why."""
    return max(0.5, soft - max(1.0, soft * 0.1))


class BoundedTask(Task):
    """A task whose SSH commands and SFTP calls end by its deadline: deadline_of() its soft
    time limit, set around each run (clusters.ssh caps every timeout by what is left).
    Around ``__call__``, so it holds in a worker and for eager calls alike."""

    def __call__(self, *args, **kwargs):
        soft = soft_limit(self)
        token = deadline.start(deadline_of(float(soft)) if soft else None)
        try:
            return super().__call__(*args, **kwargs)
        finally:
            deadline.finish(token)
