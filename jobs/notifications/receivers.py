"""Receivers of jobs/signals.py (NotificationsConfig.ready()): each queues a task and
returns; the sync and the web request never wait on the database work or on SMTP. A broker
outage is logged, never raised into the sender."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from jobs.models import Job
from jobs.notifications import tasks
from jobs.notifications.events import Event

log = logging.getLogger(__name__)

ENDINGS: dict[str, str] = {
    Job.State.FAILED: Event.JOB_FAILED,
    Job.State.SUBMIT_FAILED: Event.JOB_FAILED,
    Job.State.TIMEOUT: Event.JOB_TIMEOUT,
    Job.State.CANCELLED: Event.JOB_CANCELLED,
    Job.State.COMPLETED: Event.JOB_COMPLETED,
}

# A job that started longer ago than this is not announced as started (a late sync).
STARTED_RECENTLY = timedelta(minutes=10)


def _queue(task, *args) -> None:
    try:
        task.delay(*args)
    except Exception:  # noqa: BLE001 - a broker outage must not stop the sender
        log.exception("could not queue %s%r", task.name, args)


def job_finished(sender, job: Job, **kwargs) -> None:
    # An experiment's trial is told as part of its experiment, never one by one.
    if job.trial_id is None and (event := ENDINGS.get(job.state)):
        _queue(tasks.notify_job, job.pk, event)


def job_updated(sender, job: Job, **kwargs) -> None:
    """Only a cheap look at the row in hand (each event is told once per job: the task's
    record() keeps the first): held by the scheduler, requeued, or started after a long
    wait, just now. An experiment's trials are told as part of their experiment."""
    if job.trial_id is not None:
        return
    if job.is_held:
        _queue(tasks.notify_job, job.pk, Event.JOB_HELD)
    if job.attempt > 0 and job.state in (Job.State.PENDING, Job.State.RUNNING):
        _queue(tasks.notify_job, job.pk, Event.JOB_REQUEUED)
    if job.state != Job.State.RUNNING or not (job.started_at and job.submitted_at):
        return
    waited = job.started_at - job.submitted_at
    if waited < timedelta(minutes=settings.PORTAL_NOTIFY_STARTED_AFTER_MINUTES):
        return
    if timezone.now() - job.started_at > STARTED_RECENTLY:
        return
    _queue(tasks.notify_job, job.pk, Event.JOB_STARTED)


def session_ready(sender, job: Job, **kwargs) -> None:
    _queue(tasks.notify_job, job.pk, Event.SESSION_READY)


def gpus_idle(sender, job: Job, **kwargs) -> None:
    _queue(tasks.notify_job, job.pk, Event.GPU_IDLE)


def experiment_finished(sender, experiment, **kwargs) -> None:
    _queue(tasks.notify_experiment, experiment.pk)
