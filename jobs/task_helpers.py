"""What every Celery task of the portal shares: one-worker locks, retry backoff, limits,
and the deadline its cluster calls keep (jobs.cluster.deadline)."""

from __future__ import annotations

import logging
import math
import random
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery import Task
from django.conf import settings
from django.core.cache import cache, close_caches

from jobs.cluster import deadline
from jobs.models import Job, JobArray
from portal import places

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
    time limit, set around each run (jobs.cluster.ssh caps every timeout by what is left).
    Around ``__call__``, so it holds in a worker and for eager calls alike."""

    def __call__(self, *args, **kwargs):
        soft = soft_limit(self)
        token = deadline.start(deadline_of(float(soft)) if soft else None)
        try:
            return super().__call__(*args, **kwargs)
        finally:
            deadline.finish(token)


class PersonTask(BoundedTask):
    """A task done for one person (a submission, a cancel, one job's sync): at most
    PORTAL_PERSON_TASKS of one person's run at once across every worker (portal/places.py),
    and at most PORTAL_PERSON_WORKERS of one worker's processes hold one person's tasks of
    any kind (submissions, transfers, imports), so one person's login environment, however
    slow (a ~/.bashrc that sleeps), holds a bounded share of the worker processes whatever
    the task limits; the others' tasks take the rest. Over the share, the task is sent
    again a little later (the same message's arguments, queue and limits; not counted as a
    retry) and this run ends at once. ``person_of(*args)`` names the person (None: nobody in particular)."""

    rows: Any = Job.objects  # whose first argument is the id of a row with an owner
    share = "tasks"  # one count per person and share: a person's transfers wait for theirs
    # Over the share: sent again a little later, or (False) dropped, for a task a sweep
    # sends again anyway.
    again_when_busy = True

    def most(self) -> int:
        return int(settings.PORTAL_PERSON_TASKS)

    def person_of(self, *args, **kwargs) -> int | None:
        row_id = args[0] if args else next(iter(kwargs.values()), None)
        if not isinstance(row_id, int):
            return None
        return self.rows.filter(pk=row_id).values_list("owner_id", flat=True).first()

    def __call__(self, *args, **kwargs):
        # Run in the caller's own process (eager: tests, a task that applies another):
        # nothing to share, and sending it again would run it again at once.
        eager = getattr(self.request, "is_eager", False)
        person = None if eager else self.person_of(*args, **kwargs)
        if person is None:
            return super().__call__(*args, **kwargs)
        key, token = f"person-{self.share}:{person}", secrets.token_hex(8)
        # Every kind together, on this worker (whose processes may take every queue).
        node = f"person-worker:{getattr(self.request, 'hostname', None) or '-'}:{person}"
        hard = (getattr(self.request, "timelimit", None) or (None, None))[0]
        ttl = float(hard or self.time_limit or settings.PORTAL_TASK_TIME_LIMIT) + 30
        taken: list[str] = []
        for name, most in ((key, self.most()), (node, int(settings.PORTAL_PERSON_WORKERS))):
            if not places.take(name, token, most=most, ttl=ttl):
                for held in taken:
                    places.give_back(held, token)
                if self.again_when_busy:
                    self._again(args, kwargs)
                return None
            taken.append(name)
        try:
            return super().__call__(*args, **kwargs)
        finally:
            for held in taken:
                places.give_back(held, token)

    def _again(self, args: tuple, kwargs: dict) -> None:
        request = self.request
        options: dict = {"countdown": random.uniform(1.0, 3.0)}
        queue = (getattr(request, "delivery_info", None) or {}).get("routing_key")
        if queue:
            options["queue"] = queue
        hard, soft = getattr(request, "timelimit", None) or (None, None)
        if hard:
            options["time_limit"] = hard
        if soft:
            options["soft_time_limit"] = soft
        if getattr(request, "expires", None):
            options["expires"] = request.expires
        log.info("%s%s waits: its person's share of the workers is taken", self.name, args)
        self.apply_async(args, kwargs, **options)


class ArrayPersonTask(PersonTask):
    """PersonTask for a task that takes an array's id."""

    rows = JobArray.objects


def person_limits(base: type[PersonTask] = PersonTask) -> dict:
    """limits(), for a task done for one person (PersonTask, or ``base``)."""
    return {**limits(), "base": base}
