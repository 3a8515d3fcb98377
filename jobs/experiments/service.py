"""Creating, cancelling and relaunching experiments: the one place the page and the API
call (like jobs/lifecycle.py for jobs)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.db import transaction

from jobs import lifecycle
from jobs.experiments import runs, spec
from jobs.experiments.controller import launch_fields
from jobs.experiments.models import Experiment, Trial
from jobs.models import Job


@dataclass
class _Request:
    """What the job API's serializer reads of a request: the user."""

    user: object


def create(user, source: str | dict) -> Experiment:
    """A new experiment from a spec (YAML/JSON text, or an already-read mapping); raises
    spec.SpecError with one message per wrong field (the launch's fields under
    'launch.<field>'). Its first trials start at once."""
    from jobs.api.serializers import JobCreateSerializer

    if isinstance(source, str):
        text, data = source, spec.load(source)
    else:
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
        incoming = JobCreateSerializer(
            data={**launch, "kind": Job.Kind.BATCH}, context={"request": _Request(user)}
        )
        if incoming.is_valid():
            job = incoming.validated_data["form"].instance
        else:
            for field, messages in incoming.errors.items():
                errors[f"launch.{field}"] = " ".join(str(m) for m in messages)
    if errors:
        raise spec.SpecError(errors)
    assert job is not None
    fields.pop("launch")
    with transaction.atomic():
        experiment = Experiment.objects.create(
            owner=user,
            cluster=job.cluster,
            spec_text=text,
            launch=launch_fields(job),
            parameter_names=list(fields["parameters"]),
            **fields,
        )
        transaction.on_commit(lambda: _step(experiment.pk))
    return experiment


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


def relaunch(trial: Trial, user) -> Job:
    """Run ``trial``'s configuration once more as an ordinary job (runs.again_command)."""
    experiment = trial.experiment
    job = Job(
        **{**experiment.launch, "command": runs.again_command(experiment, trial.params)},
        owner=user,
        kind=Job.Kind.BATCH,
        name=runs.again_name(trial),
    )
    job.full_clean(exclude=["uid"])
    return lifecycle.launch_job(job)


def _now():
    from django.utils import timezone

    return timezone.now()


def _step(experiment_id: int) -> None:
    from jobs.experiments.tasks import advance_experiment

    try:
        advance_experiment.delay(experiment_id)
    except Exception:  # noqa: BLE001 - beat steps it when the broker is back
        pass
