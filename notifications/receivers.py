"""What becomes a notification, queued as a task: a job's changes and timeline notices
through the outbox (jobs/outbox.py, durable), an experiment's end from jobs/signals.py
(NotificationsConfig.ready(); swept again while untold). The
sync and the web request never wait on the database work or on SMTP. A broker outage is
logged, never raised into a signal's sender."""

from __future__ import annotations

import logging

from jobs import outbox
from notifications import tasks

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


def experiment_finished(sender, experiment, **kwargs) -> None:
    """At once; tasks.sweep_owed again if this is lost (the experiment's ``told_at``)."""
    _queue(tasks.notify_experiment, experiment.pk)
