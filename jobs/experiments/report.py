"""What the experiment page, its live updates, the API and the CSV export show: one place
that reads an experiment into plain data."""

from __future__ import annotations

import csv
import io

from django.urls import reverse

from jobs.experiments import search
from jobs.experiments.controller import observe
from jobs.experiments.models import Experiment, Trial
from jobs.models import Job
from jobs.usage import hours as usage

# Points per trial in the overlaid curves (the trial's curve is thinned evenly, last kept).
CURVE_POINTS = 200


def counts(trials: list[Trial]) -> dict[str, int]:
    out: dict[str, int] = {}
    for trial in trials:
        out[trial.state] = out.get(trial.state, 0) + 1
    return out


def summary(experiment: Experiment, trials: list[Trial] | None = None) -> dict:
    trials = list(experiment.trials.all()) if trials is None else trials
    top = experiment.best_of(trials)
    return {
        "id": experiment.pk,
        "name": experiment.name,
        "owner": experiment.owner.get_username(),
        "cluster": experiment.cluster.name,
        "state": experiment.state,
        "cancelling": bool(experiment.cancel_requested_at) and not experiment.is_final,
        "message": experiment.message,
        "method": experiment.method,
        "metric": experiment.metric,
        "goal": experiment.goal,
        "reduce": experiment.reduce,
        "max_trials": experiment.max_trials,
        "max_concurrent": experiment.max_concurrent,
        "folds": experiment.folds,
        "stopping": experiment.stopping,
        "trials_started": len(trials),
        "counts": counts(trials),
        "best": trial_row(top) if top else None,
        "created_at": experiment.created_at.isoformat(),
        "ended_at": experiment.ended_at.isoformat() if experiment.ended_at else None,
        "url": reverse("experiment-detail", args=[experiment.pk]),
    }


def trial_row(trial: Trial, jobs: list[Job] | None = None) -> dict:
    row = {
        "number": trial.number,
        "state": trial.state,
        "state_label": Trial.State(trial.state).label,
        "params": trial.params,
        "value": trial.value,
        "value_std": trial.value_std,
        "fold_values": trial.fold_values,
        "last_step": trial.last_step,
        "last_value": trial.last_value,
        "message": trial.message,
    }
    if jobs is not None:
        row["jobs"] = [
            {
                "id": j.pk,
                "fold": j.fold,
                "state": j.state,
                "scheduler_id": j.scheduler_job_id,
                "url": reverse("job-detail", args=[j.pk]),
            }
            for j in jobs
        ]
    return row


def detail(experiment: Experiment) -> dict:
    """Everything the page draws: the summary, a row per trial (with its jobs), the
    curves, and Optuna's parameter importances."""
    trials = list(experiment.trials.prefetch_related("jobs").order_by("number"))
    data = summary(experiment, trials)
    data["parameters"] = experiment.space  # JSON objects keep this order for the page
    data["spec"] = experiment.spec_text
    data["trials"] = [
        trial_row(t, sorted(t.jobs.all(), key=lambda j: (j.fold or 0, j.pk))) for t in trials
    ]
    data["curves"] = {str(t.number): curve(t) for t in trials if t.intermediate}
    data["importances"] = search.importances(
        search.Settings.of(experiment), [observe(t) for t in trials]
    )
    # What its jobs used, from accounting (every trial and fold, every attempt).
    data["usage"] = usage.of_jobs(Job.objects.filter(trial__experiment=experiment))
    return data


def curve(trial: Trial) -> list[list[float]]:
    points = sorted((int(k), v) for k, v in trial.intermediate.items())
    if len(points) > CURVE_POINTS:
        stride = len(points) / CURVE_POINTS
        picked = [points[int(i * stride)] for i in range(CURVE_POINTS - 1)]
        points = [*picked, points[-1]]
    return [[s, v] for s, v in points]


def as_csv(experiment: Experiment) -> str:
    """One row per trial: number, state, each parameter, objective, its spread, folds."""
    trials = list(experiment.trials.order_by("number"))
    names = list(experiment.space)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["trial", "state", *names, experiment.metric, "std", "fold_values", "message"])
    for trial in trials:
        writer.writerow(
            [
                trial.number,
                trial.state,
                *(_cell(trial.params.get(n)) for n in names),
                "" if trial.value is None else repr(trial.value),
                "" if trial.value_std is None else repr(trial.value_std),
                " ".join(repr(v) for v in trial.fold_values),
                _cell(trial.message),
            ]
        )
    return out.getvalue()


def _cell(value) -> str:
    """A CSV cell that a spreadsheet will not run as a formula."""
    text = "" if value is None else str(value)
    return (
        "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") and not _numeric(text) else text
    )


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
