"""Celery tasks of experiments: thin, the controller does the work."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.db import close_old_connections

from jobs.experiments import controller
from jobs.experiments.models import Experiment
from jobs.task_helpers import limits, single_flight


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
    """One step of the experiment's controller, in one worker at a time."""
    timeout = int(settings.PORTAL_TASK_TIME_LIMIT) + 10
    with single_flight(f"experiment-lock:{experiment_id}", timeout) as mine:
        if not mine:
            return
        try:
            controller.advance(experiment_id)
        finally:
            close_old_connections()
