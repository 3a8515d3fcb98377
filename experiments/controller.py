"""The experiment's control loop, one step per call (a Celery task, one worker at a time
per experiment): read the trials' jobs and metrics, stop trials early, start new ones as
a job array, finish. Every step is safe to repeat and to interrupt: new trials, their
jobs and their array are created in one transaction (a worker killed before it commits
leaves nothing; after, the array is submitted by the recovery sweep if no one else
does), and the submit step adopts an array that already reached Slurm."""

from __future__ import annotations

import logging
import math
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Prefetch
from django.utils import timezone

from experiments import runs, scoring, search
from experiments.models import Experiment, Trial
from experiments.spec import grid
from jobs import lifecycle
from jobs.launch import LaunchForm, launch_initial
from jobs.launch.form import TRIAL_FIELDS, trial_fields
from jobs.models import Job, JobArray
from schedulers import registry as schedulers

log = logging.getLogger(__name__)

# Job fields an experiment's launch fixes for every trial: jobs.launch owns the list.
LAUNCH_FIELDS = TRIAL_FIELDS

OBSERVED_STATE = {
    Trial.State.WAITING: "running",
    Trial.State.RUNNING: "running",
    Trial.State.COMPLETED: "complete",
    Trial.State.STOPPED: "pruned",
    Trial.State.FAILED: "fail",
    Trial.State.CANCELLED: "fail",
}


def launch_fields(job: Job) -> dict:
    """What of a validated (unsaved) job every trial's jobs copy."""
    return trial_fields(job)


def observe(trial: Trial) -> search.Observed:
    return search.Observed(
        number=trial.number,
        params=trial.params,
        state=OBSERVED_STATE[Trial.State(trial.state)],
        value=trial.value,
        intermediate={int(k): v for k, v in trial.intermediate.items()},
        attrs=trial.optuna_attrs,
    )


def advance(experiment_id: int) -> None:
    experiment = (
        Experiment.objects.select_related("cluster", "owner").filter(pk=experiment_id).first()
    )
    if experiment is None or experiment.is_final:
        return
    trials = list(
        experiment.trials.prefetch_related(
            Prefetch("jobs", queryset=Job.objects.order_by("fold", "pk"))
        )
    )
    for trial in trials:
        if not trial.is_final:
            refresh(experiment, trial)
    if experiment.cancel_requested_at:
        _cancel_open(trials, experiment.message or "The experiment was cancelled.")
        if all(t.is_final for t in trials):
            _finish(experiment, trials, Experiment.State.CANCELLED)
        return
    if not experiment.owner.is_active:
        stop(experiment, trials, f"Stopped: {experiment.owner}'s account was deactivated.")
        return
    broken = first_trials_all_failed(trials)
    if broken:
        if all(t.is_final for t in trials):
            experiment.finish(Experiment.State.COMPLETED, broken)
        return  # no new trials for a launch that fails every time
    if experiment.stopping != Experiment.Stopping.NONE:
        stop_unpromising(experiment, trials)
    free = experiment.max_concurrent - slots_in_use(experiment)
    remaining = experiment.max_trials - len(trials)
    if free > 0 and remaining > 0:
        refused = launch_refusal(experiment)
        if refused:
            stop(experiment, trials, refused)
            return
        if start_trials(experiment, trials, free, remaining):
            return
    if (remaining <= 0 or _search_exhausted(experiment, trials)) and all(
        t.is_final for t in trials
    ):
        _finish(experiment, trials, Experiment.State.COMPLETED)


def launch_refusal(experiment: Experiment) -> str:
    """Why new trials may not start ('' if they may): the launch page's and the API's own
    rules (jobs.launch.LaunchForm: the image still offered, the cluster and partition
    enabled, the owner's account on it, the partition's current limits), asked again before
    every new batch, so that disabling any of these stops a running sweep too."""
    owner = experiment.owner
    job = Job(**experiment.launch, owner=owner, kind=Job.Kind.BATCH)
    form = LaunchForm(data=launch_initial(owner, job), user=owner)
    if form.is_valid():
        return ""
    why = " ".join(str(m) for messages in form.errors.values() for m in messages)
    return f"Stopped: the launch is no longer allowed, so no new trial may start. {why}"


def stop(experiment: Experiment, trials: list[Trial], reason: str) -> None:
    """Cancel the experiment for ``reason`` (kept as its message): its open jobs are
    cancelled with it and no trial starts; it ends once they have."""
    Experiment.objects.filter(
        pk=experiment.pk, state=Experiment.State.RUNNING, cancel_requested_at__isnull=True
    ).update(cancel_requested_at=timezone.now(), message=reason)
    experiment.refresh_from_db()
    log.info("experiment %s: %s", experiment.pk, reason)
    _cancel_open(trials, experiment.message)
    if all(t.is_final for t in trials):
        _finish(experiment, trials, Experiment.State.CANCELLED)


# After this many trials, all failed and none completed, the experiment starts no more.
FAIL_FAST_TRIALS = 3


def first_trials_all_failed(trials: list[Trial]) -> str:
    """Why no more trials should start ('' if they should): the first FAIL_FAST_TRIALS
    trials to end all failed and none completed — the launch itself is broken (a typo in
    the command, a metric never logged), and the budget would only repeat it."""
    ended = [t for t in trials if t.is_final and t.state != Trial.State.CANCELLED]
    if len(ended) < FAIL_FAST_TRIALS or any(t.state != Trial.State.FAILED for t in ended):
        return ""
    first = min(ended, key=lambda t: t.number)
    return (
        f"Stopped: the first {len(ended)} trials all failed, so every trial would. "
        f"Trial {first.number}: {first.message} Fix the launch and start a new experiment."
    )


def refresh(experiment: Experiment, trial: Trial) -> None:
    """The trial's state, curve and (once its jobs have ended) objective, from its jobs."""
    jobs = list(trial.jobs.all())
    state, message = trial.state_from_jobs(jobs)
    if state == Trial.State.WAITING and not any(job.started_at for job in jobs):
        if state != trial.state:
            Trial.objects.filter(pk=trial.pk).update(state=state)
            trial.state = state
        return  # nothing has run: no metrics to read
    per_job = [scoring.job_points(job.pk, experiment.metric) for job in jobs]
    curve = scoring.intermediate(per_job)
    fields: dict = {"intermediate": {str(k): v for k, v in curve.items()}}
    if curve:
        fields["last_step"] = last = max(curve)
        fields["last_value"] = curve[last]
    if state == Trial.State.COMPLETED:
        values = [
            scoring.reduce(p, experiment.reduce, experiment.last_n, experiment.maximize)
            for p in per_job
        ]
        missing = [job for job, value in zip(jobs, values, strict=True) if value is None]
        if missing:
            settle = timedelta(seconds=settings.PORTAL_EXPERIMENT_SETTLE)
            if any(j.ended_at and timezone.now() - j.ended_at < settle for j in missing):
                state = Trial.State.RUNNING  # its last metrics may still be on their way
            else:
                which = f"Fold {missing[0].fold}" if len(jobs) > 1 else "Its job"
                state = Trial.State.FAILED
                message = f"{which} completed without logging {experiment.metric}."
        else:
            mean, std = Trial.summarise([v for v in values if v is not None])
            fields.update(value=mean, value_std=std, fold_values=values)
    if state != Trial.State.COMPLETED:
        message = message or trial.message  # e.g. the stop reason while its folds end
    fields.update(state=state, message=message)
    if state in Trial.FINAL_STATES:
        fields["ended_at"] = max((j.ended_at for j in jobs if j.ended_at), default=timezone.now())
    changed = {k: v for k, v in fields.items() if getattr(trial, k) != v}
    if changed:
        Trial.objects.filter(pk=trial.pk).update(**changed)
        for key, value in changed.items():
            setattr(trial, key, value)


def stop_unpromising(experiment: Experiment, trials: list[Trial]) -> None:
    """Ask the experiment's pruner about each running trial (one study for them all);
    stop those it rejects."""
    running = [t for t in trials if t.state == Trial.State.RUNNING and not t.stop_requested]
    if not running:
        return
    verdicts = search.stop_verdicts(
        search.Settings.of(experiment), [observe(t) for t in trials], [t.number for t in running]
    )
    for trial in running:
        verdict = verdicts[trial.number]
        updates: dict = {}
        if verdict.attrs != trial.optuna_attrs:
            updates["optuna_attrs"] = verdict.attrs
        if verdict.stop:
            updates.update(stop_requested=True, message=verdict.reason)
        if updates:
            Trial.objects.filter(pk=trial.pk).update(**updates)
            for key, value in updates.items():
                setattr(trial, key, value)
        if verdict.stop:
            log.info("experiment %s: %s", experiment.pk, verdict.reason)
            _cancel_open([trial], verdict.reason)


def _cancel_open(trials: list[Trial], reason: str) -> None:
    """Cancel the trials' open jobs once: a job whose cancellation is already on its way is
    left to it (the recovery sweep queues a lost one again), not re-cancelled every step."""
    for trial in trials:
        for job in trial.jobs.all():
            if not job.is_final and job.cancel_requested_at is None:
                lifecycle.cancel(job, reason)


def slots_in_use(experiment: Experiment) -> int:
    """Jobs of the experiment that run or may start without waiting for another of its
    jobs: per array, its open jobs up to its throttle. Jobs behind an array's throttle hold
    no slot, so a small throttle on one array never starves the experiment: the slots its
    finished jobs free go to the next array."""
    open_by_array = dict(
        Job.objects.filter(trial__experiment=experiment, state__in=Job.ACTIVE_STATES)
        .values_list("array_id")
        .annotate(n=Count("pk"))
        .values_list("array_id", "n")
    )
    throttles = dict(
        JobArray.objects.filter(pk__in=[a for a in open_by_array if a]).values_list(
            "pk", "throttle"
        )
    )
    return sum(
        min(n, throttles.get(array_id) or n) if array_id else n
        for array_id, n in open_by_array.items()
    )


def batch_size(experiment: Experiment, free: int, remaining: int) -> int:
    """Configurations in the next array (throttled to the ``free`` slots). Bayesian: just
    enough to fill the free slots, so each batch learns from every result so far; grid and
    random gain nothing from waiting: all that remain, as far as the cluster's array size
    allows, throttled by the scheduler (where it cannot throttle, as HTCondor: the free
    slots' worth, like Bayesian)."""
    fit = max(1, (experiment.cluster.max_array_size - 1) // experiment.folds)
    throttled = schedulers.for_cluster(experiment.cluster).array_throttle
    if experiment.method == Experiment.Method.BAYESIAN or not throttled:
        wanted = math.ceil(free / experiment.folds)
    else:
        wanted = remaining
    return max(1, min(wanted, remaining, fit))


def start_trials(experiment: Experiment, trials: list[Trial], free: int, remaining: int) -> bool:
    """Create the next configurations' trials and jobs and one array for them, in one
    transaction; queue its submission. False when the search has nothing more to offer."""
    count = batch_size(experiment, free, remaining)
    with transaction.atomic():
        locked = Experiment.objects.select_for_update().get(pk=experiment.pk)
        if locked.is_final or locked.cancel_requested_at:
            return False
        if locked.trials.count() != len(trials):
            return True  # another step got here first; the next one sees its trials
        proposals = search.suggest(
            search.Settings.of(experiment), [observe(t) for t in trials], count
        )
        if not proposals:
            return False
        array = JobArray.objects.create(
            owner_id=experiment.owner_id, cluster_id=experiment.cluster_id, throttle=free
        )
        base = dict(experiment.launch)
        index = 0
        for offset, params in enumerate(proposals):
            number = len(trials) + offset
            trial = Trial.objects.create(experiment=experiment, number=number, params=params)
            command = runs.trial_command(base["command"], params, experiment.pass_arguments)
            for fold in range(experiment.folds):
                label = f"{experiment.name or f'experiment {experiment.pk}'} #{number}"
                if experiment.folds > 1:
                    label += f" fold {fold + 1}/{experiment.folds}"
                Job.objects.create(
                    **{**base, "command": command},
                    owner_id=experiment.owner_id,
                    kind=Job.Kind.BATCH,
                    name=label[:100],
                    trial=trial,
                    fold=fold,
                    params=params,  # what comparisons show and group by
                    array=array,
                    array_index=index,
                )
                index += 1
        transaction.on_commit(lambda: lifecycle.submit_array(array.pk))
    return True


def _search_exhausted(experiment: Experiment, trials: list[Trial]) -> bool:
    if experiment.method != Experiment.Method.GRID:
        return False
    return len(trials) >= len(grid(experiment.space))


def _finish(experiment: Experiment, trials: list[Trial], state: str) -> None:
    counts: dict[str, int] = {}
    for trial in trials:
        label = Trial.State(trial.state).label.lower()
        counts[label] = counts.get(label, 0) + 1
    summary = ", ".join(f"{n} {label}" for label, n in sorted(counts.items()))
    best = experiment.best_of(trials)
    message = f"{len(trials)} trials: {summary}."
    if state == Experiment.State.CANCELLED and experiment.message:
        message = f"{experiment.message} {message}"  # why it was stopped
    if best is not None:
        message += f" Best: trial {best.number}, {experiment.metric} = {best.value:.4g}."
    experiment.finish(state, message)
