"""Celery tasks of experiments: thin, the controller does the work."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.db import close_old_connections

from jobs.experiments import controller
from jobs.experiments.models import Experiment, Trial
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


@shared_task(name="jobs.experiments.tasks.advance_experiment", **step_limits())
def advance_experiment(experiment_id: int) -> None:
    """One step of the experiment's controller, in one worker at a time (the lock outlives
    the step's time limit). Steps run on the experiments' own queue
    (settings.PORTAL_EXPERIMENT_QUEUE), never in the way of other users' submissions."""
    with single_flight(f"experiment-lock:{experiment_id}", lock_seconds()) as mine:
        if not mine:
            return
        try:
            controller.advance(experiment_id)
        finally:
            close_old_connections()


def step_on_job_finished(sender, job, **kwargs) -> None:
    """jobs.signals.job_finished's receiver (ExperimentsConfig.ready()): a trial's job
    ended, so its experiment steps now (stop, score, start the next trials) rather than at
    its next periodic step. A broker outage is logged, never raised into the job's sync."""
    if job.trial_id is None:
        return
    experiment_id = Trial.objects.filter(pk=job.trial_id).values_list("experiment_id", flat=True)
    for experiment in experiment_id[:1]:
        try:
            advance_experiment.delay(experiment)
        except Exception:  # noqa: BLE001 - a broker outage must not stop the sync
            log.exception("could not queue %s(%r)", advance_experiment.name, experiment)
