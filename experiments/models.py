"""An experiment (a sweep) and its trials. The search itself is in search.py, scoring in
scoring.py, the control loop in controller.py: the models hold state and the rules that
read it."""

from __future__ import annotations

import math

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone

from experiments import runs
from jobs import signals
from jobs.models import Job
from jobs.models.job import new_job_uid
from projects import access
from projects.access import sees_every_job


class ExperimentQuerySet(models.QuerySet):
    def for_user(self, user) -> ExperimentQuerySet:
        """Experiments the person may act on (projects/access.py): theirs; staff every one."""
        return self if sees_every_job(user) else self.filter(owner=user)

    def visible_to(self, user) -> ExperimentQuerySet:
        """Experiments the person may see: for_user's and their projects'."""
        return self.filter(access.visible_experiments(user))


class Experiment(models.Model):
    class Method(models.TextChoices):
        GRID = "grid", "Grid: every combination"
        RANDOM = "random", "Random search"
        BAYESIAN = "bayesian", "Bayesian (Optuna's TPE)"

    class Goal(models.TextChoices):
        MINIMIZE = "minimize", "Minimise"
        MAXIMIZE = "maximize", "Maximise"

    class Reduce(models.TextChoices):
        LAST = "last", "The last value logged"
        BEST = "best", "The best value logged"
        MEAN_LAST = "mean_last", "The mean of the last N values"

    class Stopping(models.TextChoices):
        NONE = "none", "None"
        MEDIAN = "median", "Median rule (Optuna's MedianPruner)"
        ASHA = "asha", "Asynchronous successive halving (Optuna's SuccessiveHalvingPruner)"

    class State(models.TextChoices):
        RUNNING = "running", "Running"
        COMPLETED = "completed", "Completed"
        CANCELLED = "cancelled", "Cancelled"

    uid = models.CharField(max_length=16, unique=True, default=new_job_uid, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="experiments"
    )
    cluster = models.ForeignKey(
        "jobs.Cluster", on_delete=models.PROTECT, related_name="experiments"
    )
    name = models.CharField(max_length=100, blank=True)
    # The spec as it was given (YAML or JSON text): shown and exported as the record.
    spec_text = models.TextField(blank=True)
    # Job fields every trial's jobs start from (spec.LAUNCH_FIELDS, by id for relations).
    launch = models.JSONField()
    # {name: {"type": "float"|"int"|"choice", "low", "high", "log", "step", "values"}}
    parameters = models.JSONField()
    # Their order in the spec (PostgreSQL's jsonb keeps no key order): columns, grid order.
    parameter_names = models.JSONField(default=list, blank=True)
    method = models.CharField(max_length=16, choices=Method.choices, default=Method.BAYESIAN)
    metric = models.CharField(max_length=100)
    goal = models.CharField(max_length=16, choices=Goal.choices, default=Goal.MAXIMIZE)
    reduce = models.CharField(max_length=16, choices=Reduce.choices, default=Reduce.LAST)
    last_n = models.PositiveIntegerField(default=5)
    max_trials = models.PositiveIntegerField(default=20)
    max_concurrent = models.PositiveIntegerField(
        default=4, help_text="Jobs (trial folds) running or waiting at the scheduler at once."
    )
    stopping = models.CharField(max_length=16, choices=Stopping.choices, default=Stopping.NONE)
    stopping_min_trials = models.PositiveIntegerField(
        default=5, help_text="Early stopping starts once this many trials have finished."
    )
    stopping_warmup_steps = models.PositiveIntegerField(
        default=0, help_text="No trial is stopped before it has logged this step."
    )
    folds = models.PositiveSmallIntegerField(default=1, help_text="K of K-fold; 1: none.")
    pass_arguments = models.BooleanField(
        default=False, help_text="Append --name=value for each parameter to the command."
    )
    seed = models.PositiveIntegerField(default=0)
    state = models.CharField(
        max_length=16, choices=State.choices, default=State.RUNNING, db_index=True
    )
    message = models.TextField(blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    # The project its trials are charged to (their account's; projects/): its members see
    # it as they see those runs.
    project = models.ForeignKey(
        "projects.Project",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="experiments",
    )
    # When its end was told to its owner (notifications; recorded, or not wanted).
    # None on an ended experiment: still owed, so a sweep tells it after a broker outage.
    told_at = models.DateTimeField(null=True, blank=True)

    objects = ExperimentQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"experiment {self.pk} ({self.name or self.metric})"

    def save(self, *args, **kwargs) -> None:
        from projects.models import charge

        charge(self, (self.launch or {}).get("account") or "")
        super().save(*args, **kwargs)

    @property
    def is_final(self) -> bool:
        return self.state != self.State.RUNNING

    @property
    def space(self) -> dict[str, dict]:
        """The parameters in the spec's order."""
        names = [n for n in self.parameter_names if n in self.parameters]
        names += [n for n in self.parameters if n not in names]
        return {n: self.parameters[n] for n in names}

    @property
    def maximize(self) -> bool:
        return self.goal == self.Goal.MAXIMIZE

    def better(self, a: float, b: float) -> bool:
        return a > b if self.maximize else a < b

    def best_of(self, trials: list[Trial]) -> Trial | None:
        """The completed trial with the best objective."""
        scored = [(t.value, t) for t in trials if t.value is not None and t.state == "completed"]
        if not scored:
            return None
        pick = max if self.maximize else min
        return pick(scored, key=lambda pair: pair[0])[1]

    def finish(self, state: str, message: str = "") -> bool:
        """Record the end (once): False if it had ended already."""
        done = Experiment.objects.filter(pk=self.pk, state=self.State.RUNNING).update(
            state=state, message=message or self.message, ended_at=timezone.now()
        )
        if done:
            self.refresh_from_db()
            transaction.on_commit(
                lambda: signals.experiment_finished.send(sender=Experiment, experiment=self)
            )
        return bool(done)


class Trial(models.Model):
    """One configuration of the search space: ``folds`` jobs, scored by their mean."""

    class State(models.TextChoices):
        WAITING = "waiting", "Waiting"  # its jobs are queued or pending
        RUNNING = "running", "Running"
        COMPLETED = "completed", "Completed"
        STOPPED = "stopped", "Stopped early"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    FINAL_STATES = (State.COMPLETED, State.STOPPED, State.FAILED, State.CANCELLED)

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="trials")
    number = models.PositiveIntegerField()
    params = models.JSONField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.WAITING)
    value = models.FloatField(null=True, blank=True, help_text="The objective: mean over folds.")
    fold_values = models.JSONField(default=list, blank=True)
    value_std = models.FloatField(null=True, blank=True)
    # The latest objective value while it runs, and the step it was logged at.
    last_step = models.BigIntegerField(null=True, blank=True)
    last_value = models.FloatField(null=True, blank=True)
    # The objective by step while it runs (mean over the folds that logged the step; at
    # most the last INTERMEDIATE_STEPS steps): what early stopping compares and the page draws.
    intermediate = models.JSONField(default=dict, blank=True)
    message = models.TextField(blank=True)
    # Optuna's per-trial system attributes (e.g. the halving pruner's rungs), kept here
    # because the study is rebuilt from the database at each step of the controller.
    optuna_attrs = models.JSONField(default=dict, blank=True)
    stop_requested = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["experiment", "number"]
        constraints = [
            models.UniqueConstraint(fields=["experiment", "number"], name="trial_number_unique")
        ]

    def __str__(self) -> str:
        return f"trial {self.number} of experiment {self.experiment_id}"

    def again(self) -> dict:
        """What launches this configuration once more as an ordinary job: its command (told
        its parameters as in the trial, experiments/runs.py) and its name. Asked by the
        launch form's copy of a trial's job, which reaches this row by its foreign key."""
        return {
            "command": runs.again_command(self.experiment, self.params),
            "name": runs.again_name(self),
        }

    @property
    def is_final(self) -> bool:
        return self.state in self.FINAL_STATES

    def state_from_jobs(self, jobs: list[Job]) -> tuple[str, str]:
        """(state, message) that this trial's jobs add up to; scoring is separate."""
        if not jobs:
            return self.State.WAITING, ""
        states = [j.state for j in jobs]
        if any(s in Job.ACTIVE_STATES for s in states):
            running = any(s in (Job.State.RUNNING, Job.State.COMPLETING) for s in states)
            return (self.State.RUNNING if running else self.State.WAITING), ""
        bad = [j for j in jobs if j.state != Job.State.COMPLETED]
        if self.stop_requested and bad:  # stopped before every fold had completed
            return self.State.STOPPED, self.message
        if not bad:
            return self.State.COMPLETED, ""
        job = bad[0]
        which = f"fold {job.fold}" if len(jobs) > 1 and job.fold is not None else "its job"
        if all(j.state == Job.State.CANCELLED for j in bad):
            return self.State.CANCELLED, f"{which.capitalize()} was cancelled: {job.message}"
        return self.State.FAILED, f"{which.capitalize()} {job.get_state_display().lower()}: " + (
            job.message or ""
        )

    @staticmethod
    def summarise(values: list[float]) -> tuple[float, float | None]:
        """Mean and sample standard deviation (None for one value) of the folds' values."""
        mean = math.fsum(values) / len(values)
        if len(values) < 2:
            return mean, None
        var = math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)
        return mean, math.sqrt(var)
