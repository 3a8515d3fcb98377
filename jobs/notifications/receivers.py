"""What becomes a notification, queued as a task: a job's changes through the outbox
(jobs/outbox.py, durable), the rest from jobs/signals.py (NotificationsConfig.ready()). The
sync and the web request never wait on the database work or on SMTP. A broker outage is
logged, never raised into a signal's sender."""

from __future__ import annotations

import logging

from jobs import outbox
from jobs.models import Job
from jobs.notifications import tasks
from jobs.notifications.events import Event

log = logging.getLogger(__name__)


def _queue(task, *args) -> None:
    try:
        task.delay(*args)
    except Exception:  # noqa: BLE001 - a broker outage must not stop the sender
        log.exception("could not queue %s%r", task.name, args)


def queue_for_job_events(dues: list[outbox.Due]) -> None:
    """The outbox's ``notify`` consumer (jobs/models/events.py decides which change of a
    job is told: its end, a hold, a requeue, a start after a long wait). Raises when the
    broker cannot take them: the outbox tries again."""
    for due in dues:
        tasks.notify_job.apply_async((due.job_id, due.argument), {"outbox_event": due.event_id})


def session_ready(sender, job: Job, **kwargs) -> None:
    _queue(tasks.notify_job, job.pk, Event.SESSION_READY)


def gpus_idle(sender, job: Job, **kwargs) -> None:
    _queue(tasks.notify_job, job.pk, Event.GPU_IDLE)


def experiment_finished(sender, experiment, **kwargs) -> None:
    _queue(tasks.notify_experiment, experiment.pk)
