"""Creating, cancelling and relaunching experiments: the one place the page and the API
call (like jobs/lifecycle.py for jobs)."""

from __future__ import annotations

import json

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from experiments import runs, spec
from experiments.models import Experiment, Trial
from experiments.tasks import advance_experiment
from jobs import lifecycle
from jobs.launch import as_request, trial_fields, validate_request
from jobs.models import Job


def create(user, source: str | dict) -> Experiment:
    """A new experiment from a spec (YAML/JSON text, or an already-read mapping); raises
    spec.SpecError with one message per wrong field (the launch's fields under
    'launch.<field>'). Its first trials start at once."""
    if isinstance(source, str):
        text, data = source, spec.load(source)
    else:
        spec.bounded(source)
        text, data = json.dumps(source, indent=2), source
    try:
        fields = spec.validate(data)
        errors: dict[str, str] = {}
    except spec.SpecError as exc:
        fields, errors = {}, dict(exc.errors)
    launch = data.get("launch") if isinstance(data.get("launch"), dict) else None
    job = None
    if launch is not None:
        if launch.get("kind", Job.Kind.BATCH) != Job.Kind.BATCH:
            errors["launch.kind"] = "Trials are batch jobs."
        checked = validate_request(user, {**launch, "kind": Job.Kind.BATCH})
        if checked.form is not None:
            job = checked.job
        for field, messages in checked.errors.items():
            errors[f"launch.{field}"] = " ".join(messages)
    if errors:
        raise spec.SpecError(errors)
    assert job is not None
    fields.pop("launch")
    with transaction.atomic():
        # One creation per user at a time: two at once cannot both fit the last budget.
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        errors = budget_errors(user, fields)
        if errors:
            raise spec.SpecError(errors)
        experiment = Experiment.objects.create(
            owner=user,
            cluster=job.cluster,
            spec_text=text,
            launch=trial_fields(job),
            parameter_names=list(fields["parameters"]),
            **fields,
        )
        transaction.on_commit(lambda: _step(experiment.pk))
    return experiment


def budget_errors(user, fields: dict) -> dict[str, str]:
    """What of a new experiment (spec.validate's fields) exceeds the user's budgets: trials
    per experiment, experiments running at once, and the jobs all their running
    experiments may run at once (settings.PORTAL_EXPERIMENT*_MAX_*)."""
    errors: dict[str, str] = {}
    most_trials = settings.PORTAL_EXPERIMENT_MAX_TRIALS
    if fields["max_trials"] > most_trials:
        errors["budget.max_trials"] = (
            f"At most {most_trials} trials per experiment on this portal: ask for fewer."
        )
    running = Experiment.objects.filter(owner=user, state=Experiment.State.RUNNING)
    most_running = settings.PORTAL_EXPERIMENTS_MAX_RUNNING
    count = running.count()
    if count >= most_running:
        errors["budget"] = (
            f"You have {count} experiments running, the most this portal allows at once: "
            "wait for one to end, or cancel one."
        )
    in_use = sum(running.values_list("max_concurrent", flat=True))
    most_jobs = settings.PORTAL_EXPERIMENTS_MAX_CONCURRENT
    if in_use + fields["max_concurrent"] > most_jobs:
        left = max(0, most_jobs - in_use)
        errors["budget.max_concurrent"] = (
            f"Your experiments may run at most {most_jobs} jobs at once in all"
            + (f"; those running take {in_use}" if in_use else "")
            + (f": ask for at most {left}." if left else ": wait for one to end.")
        )
    return errors


def cancel(experiment: Experiment) -> bool:
    """Cancel the experiment: no new trials; its running and waiting jobs are cancelled.
    False if it had ended."""
    if experiment.is_final:
        return False
    with transaction.atomic():
        updated = Experiment.objects.filter(
            pk=experiment.pk, state=Experiment.State.RUNNING, cancel_requested_at__isnull=True
        ).update(cancel_requested_at=_now())
        if updated:
            transaction.on_commit(lambda: _step(experiment.pk))
    return True


def trial_to_relaunch(experiment: Experiment, wanted) -> Trial | None:
    """Trial number ``wanted`` of the experiment, or its best when ``wanted`` is None."""
    trials = list(experiment.trials.all())
    if wanted is None:
        return experiment.best_of(trials)
    return next((t for t in trials if str(t.number) == str(wanted)), None)


class NotTheOwner(Exception):
    """Only the experiment's owner relaunches its configurations: anyone else (staff) would
    run the owner's command as themselves, on their own cluster account, in one click. They
    get the launch request to read and submit as their own (launch_request, the launch
    form from one of the trial's jobs)."""

    def __init__(self, experiment: Experiment):
        super().__init__(
            f"Experiment {experiment.pk} is {experiment.owner}'s: its configurations run again "
            "only as its owner. To run it yourself, read its command and launch it as your own "
            "job (the launch form, or POST /api/v1/jobs/ with the launch request given here)."
        )


def relaunch(trial: Trial, user) -> Job:
    """Run ``trial``'s configuration once more as an ordinary job (runs.again_command), as
    the experiment's owner; NotTheOwner for anyone else."""
    experiment = trial.experiment
    if experiment.owner_id != user.pk:
        raise NotTheOwner(experiment)
    job = Job(
        **{**experiment.launch, "command": runs.again_command(experiment, trial.params)},
        owner=user,
        kind=Job.Kind.BATCH,
        name=runs.again_name(trial),
        params=trial.params,
    )
    job.full_clean(exclude=["uid"])
    return lifecycle.launch_job(job)


def launch_request(trial: Trial) -> dict:
    """What relaunch would run, as a request for POST /api/v1/jobs/ (for someone who is
    not the owner to read and send as their own)."""
    experiment = trial.experiment
    job = Job(**experiment.launch, owner_id=experiment.owner_id, kind=Job.Kind.BATCH)
    return as_request(job) | {
        "kind": Job.Kind.BATCH,
        "command": runs.again_command(experiment, trial.params),
        "name": runs.again_name(trial),
    }


def copy_source(trial: Trial) -> Job | None:
    """A job of ``trial`` whose launch form (?from=) holds its configuration to run again
    (jobs.launch.launch_initial copies a trial's job as runs.again_command)."""
    return trial.jobs.order_by("fold", "pk").first()


def _now():
    from django.utils import timezone

    return timezone.now()


def _step(experiment_id: int) -> None:
    try:
        advance_experiment.delay(experiment_id)
    except Exception:  # noqa: BLE001 - beat steps it when the broker is back
        pass
