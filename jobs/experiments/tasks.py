"""Celery tasks of experiments: thin, the controller does the work."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.db import close_old_connections

from jobs.experiments import controller
from jobs.experiments.models import Experiment
from jobs.task_helpers import limits, single_flight

LOCK_SECONDS = 30


@shared_task
def advance_experiments() -> int:
    """Periodic (beat): one controller step for every running experiment."""
    ids = list(
        Experiment.objects.filter(state=Experiment.State.RUNNING).values_list("pk", flat=True)
    )
    for experiment_id in ids:
        advance_experiment.delay(experiment_id)
    return len(ids)


@shared_task(**limits())
def advance_experiment(experiment_id: int) -> None:
    """One step of the experiment's controller, in one worker at a time. A step takes about
    a second; the lock outlives a killed worker by at most LOCK_SECONDS (two steps that
    overlap after that are still safe: trials are created under a row lock, stops repeat
    harmlessly)."""
    timeout = max(LOCK_SECONDS, int(settings.PORTAL_EXPERIMENT_INTERVAL * 2))
    with single_flight(f"experiment-lock:{experiment_id}", timeout) as mine:
        if not mine:
            return
        try:
            controller.advance(experiment_id)
        finally:
            close_old_connections()
