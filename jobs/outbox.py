"""Delivering what a job's change owes (``JobEvent.due``, decided in jobs/models/events.py)
to the task queue: once right after the change commits, again by a periodic sweep for
whatever that could not hand over (the broker was down) or whatever was handed over and
never done (the broker restarted empty, a worker died holding it).

Each consumer (notifications, the stderr tail, the final metrics tail, accounting's runs,
experiments) registers here in its app's ``ready()`` with a function that queues its
tasks; its task calls ``done()`` when the work has run. The work itself is idempotent
(a notification is recorded once per job and event, a tail read twice reads the same
lines), so the rare second delivery after a lease changes nothing a person sees.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from jobs.models.events import JobEvent

log = logging.getLogger(__name__)

# One sweep hands over at most this many events (the next sweep takes the rest).
SWEEP_BATCH = 500


@dataclass(frozen=True)
class Due:
    """One consequence to deliver: ``entry`` ('notify:job_failed', 'stderr', ...) of the
    event ``event_id`` of job ``job_id``; ``argument`` is what follows the colon."""

    event_id: int
    job_id: int
    entry: str

    @property
    def consumer(self) -> str:
        return self.entry.split(":", 1)[0]

    @property
    def argument(self) -> str:
        return self.entry.split(":", 1)[1] if ":" in self.entry else ""


# {consumer: a function that queues its tasks for these dues; raises when it cannot}.
CONSUMERS: dict[str, Callable[[list[Due]], None]] = {}


def register(consumer: str, send: Callable[[list[Due]], None]) -> None:
    CONSUMERS[consumer] = send


def send_on_commit(event: JobEvent) -> None:
    """Hand the event's dues to the queue once the current transaction commits (the sweep
    does it later if that fails)."""
    if event.due:
        transaction.on_commit(lambda: deliver([event.pk]))


def on_event_recorded(sender, event: JobEvent, **kwargs) -> None:
    """jobs.signals.event_recorded's receiver (JobsConfig.ready)."""
    send_on_commit(event)


def deliver(event_ids: Sequence[int] | None = None) -> int:
    """Hand the dues of these unsettled events (None: every one the sweep should take) to
    their consumers; how many events were handed over. An event is claimed first (its
    ``sent_at``), so two deliverers never both hand it over; when a consumer cannot queue
    (the broker is down) the claims of what was not handed over are given back."""
    now = timezone.now()
    lease = now - timedelta(seconds=settings.PORTAL_OUTBOX_LEASE)
    free = Q(sent_at__isnull=True) | Q(sent_at__lt=lease)
    rows = JobEvent.objects.filter(free, settled_at__isnull=True)
    if event_ids is not None:
        rows = rows.filter(pk__in=list(event_ids))
    candidates = list(rows.order_by("id").values_list("pk", "job_id", "due")[:SWEEP_BATCH])
    claimed: list[tuple[int, int, list[str]]] = []
    for pk, job_id, due in candidates:
        if JobEvent.objects.filter(free, pk=pk, settled_at__isnull=True).update(sent_at=now):
            claimed.append((pk, job_id, due))
    if not claimed:
        return 0
    by_consumer: dict[str, list[Due]] = defaultdict(list)
    for pk, job_id, due in claimed:
        for entry in due:
            owed = Due(pk, job_id, entry)
            by_consumer[owed.consumer].append(owed)
    unsent: set[int] = set()
    for consumer, dues in by_consumer.items():
        send = CONSUMERS.get(consumer)
        if send is None:
            log.error(
                "no consumer %r for %d events; left for an upgrade that has it", consumer, len(dues)
            )
            unsent.update(d.event_id for d in dues)
            continue
        try:
            send(dues)
        except Exception:  # noqa: BLE001 - the broker may be down: the sweep tries again
            log.warning(
                "could not queue %s for %d events; the sweep tries again",
                consumer,
                len(dues),
                exc_info=True,
            )
            unsent.update(d.event_id for d in dues)
    if unsent:
        # Given back at once (not after the lease): the next sweep hands them over again.
        # A consumer that did queue may queue again then; its work is idempotent.
        JobEvent.objects.filter(pk__in=unsent, sent_at=now).update(sent_at=None)
    return len(claimed) - len(unsent)


def done(event_id: int | None, entry: str) -> None:
    """``entry`` of the event has run: take it out of ``due`` (settling the event when
    nothing is left). None (a task queued by hand or by an older worker): nothing to do."""
    if event_id is None:
        return
    with transaction.atomic():
        event = JobEvent.objects.select_for_update().filter(pk=event_id).first()
        if event is None or entry not in event.due:
            return
        event.due = [e for e in event.due if e != entry]
        event.settled_at = None if event.due else timezone.now()
        event.save(update_fields=["due", "settled_at"])


def done_many(event_ids: Sequence[int], entry: str) -> None:
    for event_id in event_ids:
        done(event_id, entry)
