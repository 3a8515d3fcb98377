"""Celery tasks of experiments: thin, the controller does the work."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.db import close_old_connections

from experiments import controller
from experiments.models import Experiment
from jobs import outbox
from jobs.models import Job
from jobs.models.events import EXPERIMENT
from jobs.task_helpers import single_flight

log = logging.getLogger(__name__)

# The step lock outlives the longest a step may run (the task's hard time limit) by this
# much: two steps of one experiment never overlap, and a worker killed mid-step holds the
# experiment back for at most PORTAL_EXPERIMENT_STEP_TIME_LIMIT + LOCK_MARGIN seconds.
LOCK_MARGIN = 15


def step_limits() -> dict:
    """Celery's time limits for a step (read at import, like jobs.task_helpers.limits)."""
    hard = settings.PORTAL_EXPERIMENT_STEP_TIME_LIMIT
    return {"time_limit": hard, "soft_time_limit": max(1.0, hard - 5)}


def lock_seconds() -> int:
    return int(settings.PORTAL_EXPERIMENT_STEP_TIME_LIMIT + LOCK_MARGIN)


@shared_task(name="jobs.experiments.tasks.advance_experiments")
def advance_experiments() -> int:
    """Periodic (beat): one controller step for every running experiment. Each expires
    by the next round, which queues a fresh one: a backlog never grows."""
    ids = list(
        Experiment.objects.filter(state=Experiment.State.RUNNING).values_list("pk", flat=True)
    )
    for experiment_id in ids:
        advance_experiment.apply_async(
            (experiment_id,), expires=max(2.0, settings.PORTAL_EXPERIMENT_INTERVAL * 2)
        )
    return len(ids)


@shared_task(
    name="jobs.experiments.tasks.advance_experiment", bind=True, max_retries=None, **step_limits()
)
def advance_experiment(self, experiment_id: int, outbox_events: list[int] | None = None) -> None:
    """One step of the experiment's controller, in one worker at a time (the lock outlives
    the step's time limit). Steps run on the experiments' own queue
    (settings.PORTAL_EXPERIMENT_QUEUE), never in the way of other users' submissions.
    ``outbox_events``: the trials' JobEvents that owed this step (their jobs ended); a step
    already under way may have read the trials before they ended, so this one waits for
    it rather than being skipped."""
    with single_flight(f"experiment-lock:{experiment_id}", lock_seconds()) as mine:
        if not mine:
            if outbox_events:
                raise self.retry(countdown=2)
            return
        try:
            controller.advance(experiment_id)
        finally:
            close_old_connections()
    outbox.done_many(outbox_events or [], EXPERIMENT)


def queue_steps(dues: list[outbox.Due]) -> None:
    """The outbox's ``experiment`` consumer: a trial's job ended, so its experiment steps
    now (stop, score, start the next trials) rather than at its next periodic step."""
    by_job: dict[int, list[int]] = {}
    for due in dues:
        by_job.setdefault(due.job_id, []).append(due.event_id)
    experiments: dict[int, list[int]] = {}
    rows = Job.objects.filter(pk__in=list(by_job), trial__isnull=False).values_list(
        "pk", "trial__experiment_id"
    )
    for job_id, experiment_id in rows:
        experiments.setdefault(experiment_id, []).extend(by_job.pop(job_id, []))
    for experiment_id, event_ids in experiments.items():
        advance_experiment.apply_async((experiment_id,), {"outbox_events": event_ids})
    for event_ids in by_job.values():  # a trial deleted since: nothing left to step
        outbox.done_many(event_ids, EXPERIMENT)
