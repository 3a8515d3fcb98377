"""What the portal's tasks done for one person share: a bounded share of the workers per
person (PersonTask). The rest every task shares (one-worker locks, retry backoff, limits and
the deadline its cluster calls keep) is clusters/task_limits.py, named here too."""

from __future__ import annotations

import logging
import random
import secrets
from typing import Any

from django.conf import settings

from clusters.task_limits import (  # noqa: F401 - what every task shares, named here too
    BoundedTask,
    backoff,
    deadline_of,
    limits,
    single_flight,
    soft_limit,
)
from common import places
from jobs.models import Job, JobArray

log = logging.getLogger(__name__)


class PersonTask(BoundedTask):
    """A task done for one person (a submission, a cancel, one job's sync): at most
    PORTAL_PERSON_TASKS of one person's run at once across every worker (common/places.py),
    and at most PORTAL_PERSON_WORKERS of one worker's processes hold one person's tasks of
    any kind (submissions, transfers, imports), so one person's login environment, however
    slow (a ~/.bashrc that sleeps), holds a bounded share of the worker processes whatever
    the task limits; the others' tasks take the rest. Over the share, the task is sent
    again a little later (the same message's arguments, queue and limits; not counted as a
    retry) and this run ends at once. ``person_of(*args)`` names the person (None: nobody in particular)."""

    rows: Any = Job.objects  # whose first argument is the id of a row with an owner
    owner_field = "owner_id"  # the rows' column naming their person
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
        return self.rows.filter(pk=row_id).values_list(self.owner_field, flat=True).first()

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
