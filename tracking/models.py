"""MLflow's experiments and runs as the portal keeps them (protocol.py: the MLflow REST
API that makes them). An MLflow run logged from a job *is* that job's: its metrics are the
job's series (metrics), with the same quotas, summaries and live charts; the run keeps
what MLflow has and the portal's job does not (its id, name, status, times, and its
parameters and tags as MLflow's strings)."""

from __future__ import annotations

import math
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models, transaction

from tracking import protocol
from tracking.protocol import ApiError

if TYPE_CHECKING:
    from jobs.models import Job


class TrackedExperiment(models.Model):
    """An MLflow experiment: a name a person's runs are grouped under (``set_experiment``).
    Per person: two people's "Default" are two experiments."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tracked_experiments"
    )
    name = models.CharField(max_length=500)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="one_tracked_experiment_name")
        ]

    def __str__(self) -> str:
        return self.name


def new_run_id() -> str:
    return uuid.uuid4().hex


class TrackedRun(models.Model):
    """One MLflow run, logged into ``job`` (the job whose token made it). A job's first
    run logs under the metric names it uses; its n-th (n > 1) under ``r<n>/<name>``, so two
    runs of one script never mix their curves."""

    class Status(models.TextChoices):
        RUNNING = "RUNNING"
        SCHEDULED = "SCHEDULED"
        FINISHED = "FINISHED"
        FAILED = "FAILED"
        KILLED = "KILLED"

    run_id = models.CharField(max_length=32, unique=True, default=new_run_id, editable=False)
    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="tracked_runs")
    experiment = models.ForeignKey(TrackedExperiment, on_delete=models.CASCADE, related_name="runs")
    number = models.PositiveIntegerField(help_text="1 for the job's first run, then 2, ...")
    attempt = models.PositiveIntegerField(default=0, help_text="The job's attempt it ran in.")
    name = models.CharField(max_length=250, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    # MLflow's times: milliseconds since the epoch, as the client sent them.
    start_time = models.BigIntegerField(null=True, blank=True)
    end_time = models.BigIntegerField(null=True, blank=True)
    params = models.JSONField(default=dict, blank=True)
    tags = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "number"], name="one_tracked_run_number"),
        ]
        ordering = ["job", "number"]

    def __str__(self) -> str:
        return f"run {self.run_id} of job {self.job_id}"

    def metric_key(self, key: str) -> str:
        """The portal's series name for MLflow's ``key`` in this run."""
        return protocol.series_key(key if self.number == 1 else f"r{self.number}/{key}")

    def series(self):
        """The job's series this run logged (its first run's: those of no other run)."""
        from metrics.models import MetricSeries  # noqa: PLC0415

        mine = MetricSeries.objects.filter(
            job_id=self.job_id, rank=0, attempt=self.attempt, system=False
        )
        if self.number == 1:
            return mine.exclude(key__regex=r"^r[0-9]+/")
        return mine.filter(key__startswith=f"r{self.number}/")

    def mlflow_key(self, series_key: str) -> str:
        return series_key if self.number == 1 else series_key.removeprefix(f"r{self.number}/")

    def latest_metrics(self) -> list[dict]:
        """Each metric's last value, as MLflow's ``run.data.metrics`` lists them."""
        found = self.series().exclude(last_step=None).order_by("key")[: protocol.MAX_SEARCH_RESULTS]
        return [
            {
                "key": self.mlflow_key(s.key),
                "value": s.last_value,
                "timestamp": protocol.ms(s.updated_at),
                "step": s.last_step,
            }
            for s in found
        ]

    # -- what the tracking API asks of a run --------------------------------------------------

    @classmethod
    def start(
        cls,
        job: Job,
        experiment: TrackedExperiment,
        *,
        name: str,
        start_time: int,
        tags: dict,
        run_id: str = "",
    ) -> TrackedRun:
        """A new run of ``job`` (its n-th), within the bound on runs a job makes; ``run_id``
        MLflow's own when the run was made by MLflow's file store (file_tail.py)."""
        with transaction.atomic():
            # The job's row locked: two runs created at once do not take one number.
            type(job)._default_manager.select_for_update().filter(pk=job.pk).values("pk").first()
            number = cls.objects.filter(job=job).count() + 1
            if number > protocol.MAX_RUNS_PER_JOB:
                raise ApiError(
                    protocol.EXHAUSTED,
                    f"Job {job.pk} may log at most {protocol.MAX_RUNS_PER_JOB} MLflow runs.",
                )
            run = cls(job=job, experiment=experiment, number=number, start_time=start_time)
            if run_id:
                run.run_id = run_id
            run.name = name or tags.get("mlflow.runName", "") or f"job-{job.pk}-run-{number}"
            run.tags = {}
            run._merge_tags(tags)
            run.save()
        return run

    def log(self, metrics: list[protocol.Metric], params: dict, tags: dict, nbytes: int) -> None:
        """A batch: parameters (MLflow's rule: a parameter, once logged, keeps its value),
        tags, then metrics into the job's series. A batch past a bound stores nothing of
        its parameters and tags; metrics past the job's quota none of its metrics."""
        from metrics import ingest  # noqa: PLC0415 - the metric store, at call time

        if params or tags:
            with transaction.atomic():
                locked = type(self).objects.select_for_update().get(pk=self.pk)
                locked._merge_params(params)
                locked._merge_tags(tags)
                locked.save(update_fields=["params", "tags", "name"])
                self.params, self.tags, self.name = locked.params, locked.tags, locked.name
        records = [
            ingest.Record(
                seq=protocol.seq(m.timestamp, m.step),
                attempt=self.attempt,
                rank=0,
                step=m.step,
                time=m.timestamp / 1000,
                metrics={self.metric_key(m.key): m.value},
            )
            # The portal stores finite values only; a NaN loss is left out, not an error
            # that would stop the training script.
            for m in metrics
            if math.isfinite(m.value)
        ]
        if records:
            try:
                ingest.ingest_together(self.job, records, nbytes=nbytes)
            except ingest.QuotaExceeded as exc:
                raise ApiError(
                    protocol.EXHAUSTED, f"{exc} Nothing of this batch was stored."
                ) from None

    def _merge_params(self, params: dict) -> None:
        for key, value in params.items():
            if key in self.params and self.params[key] != value:
                raise ApiError(
                    protocol.INVALID,
                    f"Changing param values is not allowed. Param with key='{key}' was "
                    f"already logged with value='{self.params[key][:200]}' for run ID="
                    f"'{self.run_id}'. Attempted logging new value '{value[:200]}'.",
                )
        merged = {**self.params, **params}
        if len(merged) > protocol.MAX_PARAMS_PER_RUN:
            raise ApiError(
                protocol.EXHAUSTED, f"A run has at most {protocol.MAX_PARAMS_PER_RUN} parameters."
            )
        self.params = merged

    def _merge_tags(self, tags: dict) -> None:
        merged = {**self.tags, **tags}
        if len(merged) > protocol.MAX_TAGS_PER_RUN:
            raise ApiError(
                protocol.EXHAUSTED, f"A run has at most {protocol.MAX_TAGS_PER_RUN} tags."
            )
        self.tags = merged
        if tags.get("mlflow.runName"):
            self.name = tags["mlflow.runName"][:250]

    def update(self, *, status: str, end_time: int | None, name: str) -> None:
        if status:
            if status not in self.Status.values:
                raise ApiError(protocol.INVALID, f"'status' must be one of {self.Status.values}.")
            self.status = status
        if end_time is not None:
            self.end_time = end_time
        if name:
            self.name = name
            self.tags = {**self.tags, "mlflow.runName": name}
        self.save(update_fields=["status", "end_time", "name", "tags"])

    def artifact_uri(self) -> str:
        """Where the client itself writes ``log_artifact``'s files: the job's work
        directory on the cluster (the node sees it), never through the portal."""
        if not self.job.work_dir:
            return ""
        return f"file://{self.job.work_dir.rstrip('/')}/mlflow-artifacts/{self.run_id}"

    def info_json(self) -> dict:
        return {
            "run_id": self.run_id,
            "run_uuid": self.run_id,
            "run_name": self.name,
            "experiment_id": str(self.experiment_id),
            "user_id": self.tags.get("mlflow.user", ""),
            "status": self.status,
            "start_time": self.start_time,
            "end_time": self.end_time,
            "artifact_uri": self.artifact_uri(),
            "lifecycle_stage": "active",
        }

    def json(self) -> dict:
        return {
            "info": self.info_json(),
            "data": {
                "metrics": self.latest_metrics(),
                "params": protocol.listed(self.params),
                "tags": protocol.listed(self.tags),
            },
            "inputs": {},
        }


class ImportedRun(models.Model):
    """Where a job that never ran here came from (tracking/imports/): an MLflow,
    W&B or TensorBoard run brought in by its owner. ``key`` names the run in its source, so
    importing the same run again finds it and changes nothing."""

    class Source(models.TextChoices):
        MLFLOW = "mlflow", "MLflow"
        WANDB = "wandb", "Weights & Biases (offline run)"
        TENSORBOARD = "tensorboard", "TensorBoard event files"

    job = models.OneToOneField(
        "jobs.Job", on_delete=models.CASCADE, primary_key=True, related_name="imported"
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="imported_runs"
    )
    source = models.CharField(max_length=16, choices=Source.choices)
    # The run's identity in its source (a hash when long): unique per person.
    key = models.CharField(max_length=200)
    origin = models.CharField(
        max_length=1000, help_text="Where it was read: a path, a tracking server, a file."
    )
    source_run_id = models.CharField(max_length=200, blank=True)
    # What the source said as its strings (the job's params are the comparable subset).
    params = models.JSONField(default=dict, blank=True)
    tags = models.JSONField(default=dict, blank=True)
    imported_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "key"], name="one_import_per_run")]

    def __str__(self) -> str:
        return f"{self.get_source_display()} run {self.source_run_id or self.key}"


class RunImport(models.Model):
    """A person's upload of runs (an archive of ``mlruns``, ``mlflow.db``, W&B run folders,
    TensorBoard event files), imported by a worker (tracking/tasks.py); its report
    says what came in and why anything did not."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Importing"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="run_imports"
    )
    filename = models.CharField(max_length=255, blank=True)
    size = models.BigIntegerField(default=0)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    report = models.JSONField(default=dict, blank=True)
    message = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"import {self.pk} of {self.filename or 'an upload'}"

    @property
    def upload_path(self) -> Path:
        """Where its upload waits for a worker: PORTAL_DATA_DIR/imports (on a shared
        filesystem when workers run on other hosts than the web processes)."""
        folder = Path(settings.DATA_DIR) / "imports"
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        return folder / f"{self.pk}.upload"

    @property
    def is_final(self) -> bool:
        return self.state in (self.State.DONE, self.State.FAILED)

    def json(self) -> dict:
        return {
            "id": self.pk,
            "filename": self.filename,
            "size": self.size,
            "state": self.state,
            "is_final": self.is_final,
            "message": self.message,
            "report": self.report,
            "created_at": self.created_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
        }


def new_model_id() -> str:
    return f"m-{uuid.uuid4().hex}"


class LoggedModel(models.Model):
    """A model a run logged (MLflow 3's ``log_model``): its files are where the client wrote
    them, under the job's work directory on the cluster; the portal keeps its name, status
    and tags, and where the files are. A registered version (registry/) may point at one."""

    class Status(models.TextChoices):
        PENDING = "LOGGED_MODEL_PENDING"
        READY = "LOGGED_MODEL_READY"
        FAILED = "LOGGED_MODEL_UPLOAD_FAILED"

    model_id = models.CharField(max_length=34, unique=True, default=new_model_id, editable=False)
    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="logged_models")
    experiment = models.ForeignKey(
        TrackedExperiment, on_delete=models.CASCADE, related_name="logged_models"
    )
    run = models.ForeignKey(
        TrackedRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="logged_models"
    )
    name = models.CharField(max_length=250)
    model_type = models.CharField(max_length=100, blank=True)
    step = models.BigIntegerField(default=0, help_text="The run's step it was logged at.")
    status = models.CharField(max_length=32, choices=Status.choices, default=Status.PENDING)
    params = models.JSONField(default=dict, blank=True)
    tags = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.model_id})"

    def artifact_path(self) -> str:
        """The folder on the cluster the client writes the model's files into ('' while
        the job has no work directory)."""
        if not self.job.work_dir:
            return ""
        return f"{self.job.work_dir.rstrip('/')}/mlflow-artifacts/models/{self.model_id}/artifacts"

    def json(self) -> dict:
        run = self.run
        metrics = run.latest_metrics() if run else []
        return {
            "info": {
                "model_id": self.model_id,
                "experiment_id": str(self.experiment_id),
                "name": self.name,
                "creation_timestamp_ms": protocol.ms(self.created_at),
                "last_updated_timestamp_ms": protocol.ms(self.updated_at),
                "artifact_uri": self.artifact_path(),
                "status": self.status,
                "model_type": self.model_type,
                "source_run_id": run.run_id if run else "",
                "tags": protocol.listed(self.tags),
            },
            "data": {
                "params": protocol.listed(self.params),
                "metrics": [
                    {**m, "model_id": self.model_id, "run_id": run.run_id} for m in metrics if run
                ],
            },
        }
