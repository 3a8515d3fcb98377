"""What was asked: a job's launch request (JobRequest, a part of Job) and its checks.

Its resources and layout, its command, where it runs; filled in by the launch page, the
API and experiments alike (jobs/launch/request.py), and checked here against the
partition, the image and the cluster (request_errors(), with jobs/models/limits.py).
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import TYPE_CHECKING

from django.core.validators import MaxLengthValidator, MaxValueValidator, MinValueValidator
from django.db import models

from jobs import validators
from jobs.models import choices, limits

if TYPE_CHECKING:
    from jobs.models.catalog import ContainerImage
    from jobs.models.clusters import Cluster, Partition
    from jobs.models.job import Job

# A chained run's attempts (each at most the walltime): the bound of max_attempts.
MAX_ATTEMPTS = 50


class JobRequest(models.Model):
    """A part of Job: what its owner asked for, and whether that fits (request_errors)."""

    Kind = choices.Kind
    Launcher = choices.Launcher
    WorkDir = choices.WorkDir
    SESSION_KINDS = choices.SESSION_KINDS

    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.NOTEBOOK)
    # An app session (kind "app"): the app a centre added, and the person's values of its
    # fields, checked (jobs/cluster/app_command.py).
    app = models.ForeignKey(
        "jobs.SessionApp", on_delete=models.PROTECT, null=True, blank=True, related_name="jobs"
    )
    app_values = models.JSONField(null=True, blank=True)
    name = models.CharField(max_length=100, blank=True)
    command = models.TextField(
        blank=True,
        # Bounded like every user document: a job script is read whole by sbatch and
        # slurmctld, and shown on pages; nobody types 100,000 characters.
        validators=[MaxLengthValidator(100_000)],
        help_text="Batch jobs: run by the job's shell as written.",
    )
    keep_diff = models.BooleanField(
        "keep the git diff",
        default=False,
        help_text="Keep the uncommitted changes (git diff) of the folder's checkout beside the "
        "job, to see what it ran.",
    )
    gpus = models.PositiveSmallIntegerField(
        default=0, help_text="GPUs on each node (the job has nodes × this many)."
    )
    nodes = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(1)])
    tasks_per_node = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1)],
        help_text="Processes (ranks) on each node: one per GPU for data-parallel training.",
    )
    launcher = models.CharField(
        max_length=16,
        choices=choices.Launcher.choices,
        default=choices.Launcher.NONE,
        help_text="How a batch command starts on its nodes (see Distributed training).",
    )
    gpu_type = models.CharField(max_length=64, blank=True, validators=[validators.slurm_name])
    # "Any GPU with compute capability >= X and memory >= Y GB" (jobs/models/gpus.py): the
    # matching types become gpu_type (one) or gpu_constraint ("a100|h100", several).
    min_gpu_capability = models.DecimalField(
        "minimum compute capability",
        max_digits=4,
        decimal_places=1,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal("1.0")), MaxValueValidator(Decimal("99.9"))],
    )
    min_gpu_memory_gb = models.PositiveIntegerField(
        "minimum GPU memory (GB)",
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(10_000)],
    )
    gpu_constraint = models.CharField(
        max_length=limits.GPU_CONSTRAINT_MAX, blank=True, editable=False
    )
    cpus = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(1)])
    memory_gb = models.PositiveIntegerField(default=4, validators=[MinValueValidator(1)])
    time_limit_minutes = models.PositiveIntegerField(default=60, validators=[MinValueValidator(1)])
    # Checkpoint and requeue (README, "Long runs"): before its time limit the job is asked
    # to checkpoint, then requeues itself, up to max_attempts runs of the time limit each.
    resumable = models.BooleanField(
        default=False,
        help_text="Checkpoints when warned before the time limit and runs again from there.",
    )
    max_attempts = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_ATTEMPTS)],
        help_text="Resumable jobs: runs of at most the walltime each, one after another.",
    )
    checkpoint_warning_seconds = models.PositiveIntegerField(
        default=120,
        validators=[MinValueValidator(30), MaxValueValidator(3600)],
        help_text="How long before the time limit a resumable job is asked to checkpoint.",
    )
    account = models.CharField(max_length=64, blank=True, validators=[validators.slurm_name])
    work_dir_kind = models.CharField(
        max_length=16,
        choices=WorkDir.choices,
        default=WorkDir.HOME,
        db_column="workdir_kind",  # the column's name before the rename: no schema change
    )
    notebook_dir = models.CharField(
        "notebook folder",
        max_length=255,
        blank=True,
        validators=[validators.relative_folder],
        help_text="Where a notebook opens, or the folder TensorBoard reads its runs from, "
        "inside the home (or scratch) directory, e.g. projects/mnist (made if missing); "
        "empty: the directory itself.",
    )
    # Stage-in and stage-out around a batch command (README, "Stage-in"), as
    # jobs/launch/staging.py checked them against the person's folders: {"in": a folder,
    # "in_root": the root it is in, "out": [paths or globs], "out_to": a folder,
    # "out_to_root": its root}; {}: none. Read through stage_in, stage_out, stage_out_to.
    staging = models.JSONField(default=dict, blank=True, editable=False)

    if TYPE_CHECKING:
        # What the checks read of the rest of the Job (its relations, jobs/models/job.py).
        owner_id: int
        cluster: Cluster
        cluster_id: int | None
        partition: Partition
        partition_id: int | None
        image: ContainerImage
        image_id: int | None
        array_id: int | None

        def _job_of_folder(self, folder: re.Match) -> Job | None: ...

    class Meta:
        abstract = True

    @property
    def world_size(self) -> int:
        """Processes of a distributed job (nodes × tasks per node)."""
        return self.nodes * self.tasks_per_node

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus

    @property
    def stage_in(self) -> str:
        """The folder copied to node-local scratch before the command ("": none)."""
        return str((self.staging or {}).get("in") or "")

    @property
    def stage_out(self) -> list[str]:
        """The outputs copied back after the command (paths or globs)."""
        return [str(p) for p in (self.staging or {}).get("out") or []]

    @property
    def stage_out_to(self) -> str:
        """Where the outputs go ("": the job's work directory)."""
        return str((self.staging or {}).get("out_to") or "")

    def _app_errors(self, image) -> dict[str, str]:
        """An app session's app and values; a shipped app turned off in the admin."""
        from jobs.cluster import app_command
        from jobs.models.apps import BUILTIN_KINDS, SessionApp

        if self.kind in BUILTIN_KINDS:
            self.app, self.app_values = None, None
            shipped = SessionApp.shipped(self.kind)
            if self._state.adding and not shipped.enabled:
                return {"kind": f"{shipped.name} sessions are turned off on this portal."}
            return {}
        if self.kind != self.Kind.APP:
            self.app, self.app_values = None, None
            return {}
        app = self.app if self.app_id else None
        if app is None or app.builtin:
            return {"app": "Choose the app to start."}
        if self._state.adding and not app.enabled:
            return {"app": f"{app} is no longer offered."}
        if image is None or image.pk != app.image_id:
            return {"image": f"{app} runs in its own image, {app.image}."}
        try:
            self.app_values = app_command.clean_values(app.field_specs(), self.app_values)
        except app_command.AppError as exc:
            return {"app_values": str(exc)}
        return {}

    def request_errors(self) -> dict[str, str]:
        """What of the request does not fit the partition, the image or the cluster, by
        field (each message names the limit); Job.clean() raises them. Tidies what was
        typed first (line ends, the notebook folder's slashes)."""
        errors: dict[str, str] = {}
        # A browser sends a textarea's lines ending in CRLF (the HTML form encoding); sbatch
        # refuses a script with "DOS line breaks", and bash would keep the CRs as data.
        self.command = self.command.replace("\r\n", "\n").replace("\r", "\n")
        # 'projects/mnist/' and '/projects/mnist' both mean the folder; batch jobs have none.
        self.notebook_dir = (
            self.notebook_dir.strip().strip("/") if self.kind in self.SESSION_KINDS else ""
        )
        partition = self.partition if self.partition_id else None
        image = self.image if self.image_id else None
        if partition and self.cluster_id and partition.cluster_id != self.cluster_id:
            errors["partition"] = (
                f"Partition {partition.name} is not on cluster {self.cluster.name}."
            )
        if image is not None:
            if self._state.adding and not image.enabled:
                errors["image"] = f"{image} is no longer offered for new jobs."
            if self.kind != self.Kind.APP and self.kind not in image.kinds:
                errors["kind"] = f"{image} does not offer {self.get_kind_display().lower()}s."
            if self.gpus and not image.supports_gpu:
                errors["gpus"] = f"{image} does not support GPUs."
        if self.kind == self.Kind.TENSORBOARD and self.gpus:
            errors["gpus"] = "TensorBoard needs no GPU: choose 0 GPUs."
        errors.update(self._app_errors(image))
        job_folder = validators.JOB_FOLDER.match(self.notebook_dir)
        if job_folder:
            if self.kind != self.Kind.TENSORBOARD:
                errors["notebook_dir"] = "Only TensorBoard sessions may read a job's own directory."
            else:
                runs_of = self._job_of_folder(job_folder)
                if runs_of is None:
                    errors["notebook_dir"] = "That is not the directory of one of your jobs."
                elif (runs_of.cluster_id, runs_of.work_dir_kind) != (
                    self.cluster_id,
                    self.work_dir_kind,
                ):
                    errors["notebook_dir"] = (
                        f"Job {runs_of.pk} ran in the {runs_of.get_work_dir_kind_display().lower()}"
                        f" directory on {runs_of.cluster.name}: choose those for its runs."
                    )
        if self.kind == self.Kind.BATCH and not self.command.strip():
            errors["command"] = "A batch job needs a command to run."
        if self.staging and self.kind != self.Kind.BATCH:
            errors["kind"] = "Only batch jobs stage data in and out: choose a batch job."
        errors.update(limits.layout_errors(self))
        if partition is not None:
            errors.update(limits.partition_errors(self, partition))
            if "gpus" not in errors and "gpu_type" not in errors:
                errors.update(limits.gpu_requirement_errors(self, partition))
        errors.update(self._resumable_errors())
        if self.gpu_type and not self.gpus:
            errors.setdefault("gpu_type", "Choose a GPU count, or no GPU type.")
        if (
            self.work_dir_kind == self.WorkDir.SCRATCH
            and self.cluster_id
            and not self.cluster.scratch_root
        ):
            errors["work_dir_kind"] = f"Cluster {self.cluster.name} has no scratch directory."
        return errors

    def _resumable_errors(self) -> dict[str, str]:
        if not self.resumable:
            if self.max_attempts != 1:
                return {"max_attempts": "Only a resumable job runs several attempts."}
            return {}
        if self.kind != self.Kind.BATCH:
            return {"resumable": "Only batch jobs checkpoint and requeue themselves."}
        if self.array_id is not None:
            return {"resumable": "Members of a job array do not requeue themselves."}
        # Slurm may send the warning up to a minute early: a third of the walltime at most.
        if self.checkpoint_warning_seconds * 3 > self.time_limit_minutes * 60:
            return {
                "checkpoint_warning_seconds": f"A warning {self.checkpoint_warning_seconds} s "
                f"before the end leaves too little of a {self.time_limit_minutes}-minute "
                "walltime: at most a third of it."
            }
        return {}
