"""Launching, cancelling and releasing a job: the one place the pages (frontend/) and the
API (jobs/api/) call. Each changes the database in one transaction and queues the worker's
task after it commits; if the broker is away the job says so, and the recovery sweep
(jobs.tasks.recover_jobs) queues the task again once it is back."""

from __future__ import annotations

import logging

from celery import Task
from django.db import transaction

from jobs import signals, tasks
from jobs.launch import LaunchForm
from jobs.models import Job

log = logging.getLogger(__name__)


def launch(form: LaunchForm) -> Job:
    """Save a valid launch form's job and queue its submission."""
    with transaction.atomic():
        job = form.save()
        transaction.on_commit(lambda: _submit(job))
    return job


def launch_job(job: Job) -> Job:
    """Save a validated job built by the portal (not a form) and queue its submission."""
    with transaction.atomic():
        job.save()
        transaction.on_commit(lambda: _submit(job))
    return job


def cancel(job: Job, reason: str = "", by=None) -> bool:
    """Cancel ``job``: at once if it never reached the scheduler, else by a worker's
    scancel. ``reason``: why the portal cancels it (its final message); ``by``: the person
    who asked (the audit log names them; None: the portal itself, recorded for the owner).
    False if it had already ended (nothing to do)."""
    if job.is_final:
        return False
    with transaction.atomic():
        if job.request_cancel(reason):
            transaction.on_commit(
                lambda: _queue(
                    job,
                    tasks.cancel_job,
                    "Waiting for the portal's task queue to cancel ({exc}).",
                    *_asker(by),
                )
            )
    return True


def release(job: Job, by=None) -> bool:
    """Release a held job (a worker runs the scheduler's release; ``by`` as for cancel).
    False if it is not held."""
    if not job.is_held:
        return False
    transaction.on_commit(
        lambda: _queue(
            job, tasks.release_job, "The portal could not queue the release ({exc}).", *_asker(by)
        )
    )
    return True


def lower_time_limit(job: Job, minutes: int, by=None) -> bool:
    """Lower a pending job's time limit to ``minutes`` (a worker runs the scheduler's
    update; ``by`` as for cancel). False if it is not pending or that is no lower."""
    if job.state != Job.State.PENDING or not 1 <= minutes < job.time_limit_minutes:
        return False
    transaction.on_commit(
        lambda: _queue(
            job,
            tasks.lower_time_limit,
            "The portal could not queue the change of time limit ({exc}).",
            minutes,
            *_asker(by),
        )
    )
    return True


def submit_array(array_id: int) -> None:
    """Queue the submission of a job array the portal built (an experiment's batch of
    trial runs). A broker outage is logged: the recovery sweep submits it once the broker
    is back."""
    try:
        tasks.submit_array.delay(array_id)
    except Exception:  # noqa: BLE001 - the recovery sweep submits it when the broker is back
        log.exception("could not queue the submission of job array %s", array_id)


def _submit(job: Job) -> None:
    signals.updated_on_commit(job)  # dashboards show the new job as queued at once
    _queue(
        job,
        tasks.submit_job,
        "Waiting for the portal's task queue ({exc}); it will be submitted when the queue is back.",
    )


def _asker(user) -> tuple[int, ...]:
    """The task's extra argument naming who asked (none when the portal acts by itself)."""
    return () if user is None else (user.pk,)


def _queue(job: Job, task: Task, if_away: str, *args) -> None:
    """Queue the task for ``job`` (with ``args``); if the broker is away, the job's message
    says so (``if_away``)."""
    try:
        task.delay(job.pk, *args)
    except Exception as exc:  # noqa: BLE001 - any broker failure
        job.update_details(message=if_away.format(exc=exc))
