"""What the experiment page, its live updates, the API and the CSV export show: one place
that reads an experiment into plain data."""

from __future__ import annotations

import csv
import hashlib
import io
import json

from django.core.cache import cache
from django.db.models import Count, Prefetch
from django.urls import reverse

from common.text import spreadsheet_cell
from experiments import search
from experiments.controller import OBSERVED_STATE
from experiments.models import Experiment, Trial
from jobs.models import Job
from usage import hours as usage

# Points per trial in the overlaid curves (the trial's curve is thinned evenly, last kept).
CURVE_POINTS = 200


def counts(trials: list[Trial]) -> dict[str, int]:
    out: dict[str, int] = {}
    for trial in trials:
        out[trial.state] = out.get(trial.state, 0) + 1
    return out


def summaries(experiments: list[Experiment]) -> list[dict]:
    """The summaries of a page of experiments in three queries, however many experiments
    and trials: a count per state, each one's best (value, number) pair, those trials."""
    ids = [e.pk for e in experiments]
    tallies: dict[int, dict[str, int]] = {pk: {} for pk in ids}
    for exp_id, state, n in (
        Trial.objects.filter(experiment_id__in=ids)
        .order_by()
        .values_list("experiment_id", "state")
        .annotate(n=Count("id"))
    ):
        tallies[exp_id][state] = n
    sign = {e.pk: -1.0 if e.maximize else 1.0 for e in experiments}
    # Each experiment's best as best_of() picks it: the best value, then the first trial.
    best: dict[int, tuple[float, int, int]] = {}  # experiment: (signed value, number, id)
    for exp_id, value, number, pk in (
        Trial.objects.filter(
            experiment_id__in=ids, state=Trial.State.COMPLETED, value__isnull=False
        )
        .order_by()
        .values_list("experiment_id", "value", "number", "pk")
    ):
        if value is None:  # not so (value__isnull=False): for the type checker
            continue
        mine = (sign[exp_id] * value, number, pk)
        if exp_id not in best or mine < best[exp_id]:
            best[exp_id] = mine
    tops = Trial.objects.in_bulk([b[2] for b in best.values()]) if best else {}
    return [
        summary(e, tally=tallies[e.pk], top=tops.get(best[e.pk][2]) if e.pk in best else None)
        for e in experiments
    ]


def summary(
    experiment: Experiment,
    trials: list[Trial] | None = None,
    *,
    tally: dict[str, int] | None = None,
    top: Trial | None = None,
) -> dict:
    """The experiment's state and progress: from ``trials`` when the caller has read them
    all, from ``tally`` and ``top`` (summaries()), or else read as summaries() does."""
    if trials is not None:
        tally, top = counts(trials), experiment.best_of(trials)
    elif tally is None:
        return summaries([experiment])[0]
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
        "trials_started": sum(tally.values()),
        "counts": tally,
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
    trials = list(
        experiment.trials.defer("optuna_attrs")
        .prefetch_related(Prefetch("jobs", queryset=Job.objects.only(*JOB_FIELDS)))
        .order_by("number")
    )
    data = summary(experiment, trials)
    data["parameters"] = experiment.space  # JSON objects keep this order for the page
    data["spec"] = experiment.spec_text
    data["trials"] = [
        trial_row(t, sorted(t.jobs.all(), key=lambda j: (j.fold or 0, j.pk))) for t in trials
    ]
    data["curves"] = {str(t.number): curve(t) for t in trials if t.intermediate}
    data["importances"] = importances(experiment, trials)
    # What its jobs used, from accounting (every trial and fold, every attempt).
    data["usage"] = usage.of_jobs(Job.objects.filter(trial__experiment=experiment))
    return data


# What a trial's row shows of each of its jobs (the rest of a job's row is not read).
JOB_FIELDS = ("id", "trial_id", "fold", "state", "scheduler_job_id")
IMPORTANCES_SECONDS = 24 * 3600


def importances(experiment: Experiment, trials: list[Trial]) -> dict[str, float]:
    """Optuna's parameter importances over the completed trials, kept in the cache under
    what they are computed from (the space, the goal, each completed trial's parameters
    and value): a page polled every 3 s, or opened by several people, computes them once
    per newly completed trial."""
    settings = search.Settings.of(experiment)
    observed = [
        search.Observed(t.number, t.params, OBSERVED_STATE[Trial.State(t.state)], t.value)
        for t in trials
    ]
    scored = [(o.number, o.params, o.value) for o in observed if o.state == "complete"]
    basis = json.dumps([experiment.space, experiment.goal, scored], sort_keys=True, default=str)
    key = f"experiment-importances:{experiment.pk}:{hashlib.sha256(basis.encode()).hexdigest()}"
    found = cache.get(key)
    if found is None:
        found = search.importances(settings, observed)
        cache.set(key, found, IMPORTANCES_SECONDS)
    return found


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
                *(spreadsheet_cell(trial.params.get(n)) for n in names),
                "" if trial.value is None else repr(trial.value),
                "" if trial.value_std is None else repr(trial.value_std),
                " ".join(repr(v) for v in trial.fold_values),
                spreadsheet_cell(trial.message),
            ]
        )
    return out.getvalue()
