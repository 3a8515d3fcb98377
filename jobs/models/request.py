"""What was asked: a job's launch request (JobRequest, a part of Job) and its checks.

Its resources and layout, its command, where it runs; filled in by the launch page, the
API and experiments alike (jobs/launch/request.py), and checked here against the
partition, the image and the cluster (request_errors(), with the checks below: its layout
on its own, then against its partition; each message names the limit and the way out).
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import TYPE_CHECKING

from django.core.validators import MaxLengthValidator, MaxValueValidator, MinValueValidator
from django.db import models

from clusters.models.gpus import NoGpuMatches, choose, wants
from common import choices, validators
from common.choices import SESSION_KINDS, Launcher
from schedulers import registry as schedulers

if TYPE_CHECKING:
    from catalog.models.images import ContainerImage
    from clusters.models.clusters import Cluster, Partition

# Job.gpu_constraint's max_length: an OR of more types than fits is refused, not cut.
GPU_CONSTRAINT_MAX = 400
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
    # fields, checked (catalog/app_command.py).
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
    # "Any GPU with compute capability >= X and memory >= Y GB" (clusters/models/gpus.py): the
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
    gpu_constraint = models.CharField(max_length=GPU_CONSTRAINT_MAX, blank=True, editable=False)
    cpus = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(1)])
    memory_gb = models.PositiveIntegerField(default=4, validators=[MinValueValidator(1)])
    time_limit_minutes = models.PositiveIntegerField(default=60, validators=[MinValueValidator(1)])
    # Checkpoint and requeue (docs/use/long-runs.md): before its time limit the job is asked
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
    # Stage-in and stage-out around a batch command (docs/use/stage-in.md), as
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

        def _job_of_folder(self, folder: re.Match) -> JobRequest | None: ...

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
        from catalog import app_command
        from catalog.models.apps import BUILTIN_KINDS, SERVING, SessionApp

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
        if app is None or (app.builtin and app.builtin != SERVING):
            return {"app": "Choose the app to start."}
        if app.builtin != SERVING:  # (a serving app runs in the served version's image)
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
        errors.update(layout_errors(self))
        if partition is not None:
            errors.update(partition_errors(self, partition))
            if "gpus" not in errors and "gpu_type" not in errors:
                errors.update(gpu_requirement_errors(self, partition))
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


# --- what a job may ask for ------------------------------------------------------------


def layout_errors(job: JobRequest) -> dict[str, str]:
    """Nodes, tasks and launcher must make sense together (before any partition)."""
    errors: dict[str, str] = {}
    if job.kind in SESSION_KINDS and (
        job.nodes > 1 or job.tasks_per_node > 1 or job.launcher != Launcher.NONE
    ):
        errors["nodes"] = (
            f"A {job.get_kind_display().lower()} runs as one process on one node: "
            "choose 1 node, 1 task per node and no launcher."
        )
        return errors
    if job.launcher == Launcher.TORCHRUN and job.gpus and job.tasks_per_node != job.gpus:
        errors["tasks_per_node"] = (
            f"torchrun starts one process per task and each drives one GPU: ask for as many "
            f"tasks per node as GPUs per node ({job.gpus}), or for no GPUs."
        )
    elif (
        job.launcher == Launcher.MPI
        and job.gpus
        and job.tasks_per_node % job.gpus
        and job.gpus % job.tasks_per_node
    ):
        errors["tasks_per_node"] = (
            f"Each MPI rank is pinned to an equal share of its node's {job.gpus} GPUs: ask "
            f"for tasks per node that divide them evenly (one per GPU: {job.gpus}) or a "
            "multiple of them."
        )
    return errors


def partition_errors(job: JobRequest, partition: Partition) -> dict[str, str]:
    """The request must fit the partition; each message names the limit and the way out."""
    errors: dict[str, str] = {}
    name = partition.name
    if job.nodes > partition.max_nodes:
        errors["nodes"] = (
            f"Partition {name} allows at most {partition.max_nodes} node(s) per job."
            if partition.max_nodes > 1
            else f"Partition {name} runs single-node jobs only: choose 1 node."
        )
    per_node = partition.gpus_per_node_limit
    if job.gpus and not partition.max_gpus_per_job:
        errors["gpus"] = f"Partition {name} has no GPUs."
    elif job.gpus > per_node and per_node < partition.max_gpus_per_job:
        # (per_node > 0 here: a partition without GPUs took the branch above)
        more = -(-job.gpus * job.nodes // per_node)
        hint = (
            f" For {job.gpus * job.nodes} GPUs, ask for {per_node} per node on {more} nodes."
            if 1 < more <= partition.max_nodes and more * per_node <= partition.max_gpus_per_job
            else ""
        )
        errors["gpus"] = f"A node of partition {name} has at most {per_node} GPU(s).{hint}"
    elif job.total_gpus > partition.max_gpus_per_job:
        errors["gpus"] = (
            f"Partition {name} allows at most {partition.max_gpus_per_job} GPU(s) per job"
            + (
                f"; {job.nodes} nodes × {job.gpus} GPUs is {job.total_gpus}."
                if job.nodes > 1
                else "."
            )
        )
    elif job.gpu_type and job.gpu_type not in partition.gpu_type_list:
        offered = ", ".join(partition.gpu_type_list) or "none"
        errors["gpu_type"] = f"Partition {name} offers GPU types: {offered}."
    node_cpus = job.cpus * job.tasks_per_node
    if node_cpus > partition.max_cpus_per_job:
        errors["cpus"] = (
            f"Partition {name} allows at most {partition.max_cpus_per_job} CPUs per job."
            if job.tasks_per_node == 1
            else f"Partition {name} allows at most {partition.max_cpus_per_job} CPUs per "
            f"node; {job.tasks_per_node} tasks × {job.cpus} CPUs is {node_cpus}."
        )
    if job.memory_gb > partition.max_memory_gb:
        errors["memory_gb"] = (
            f"Partition {name} allows at most {partition.max_memory_gb} GB of memory per "
            f"{'node' if job.nodes > 1 else 'job'}."
        )
    if job.time_limit_minutes > partition.max_time_minutes:
        errors["time_limit_minutes"] = (
            f"Partition {name} allows at most {partition.max_time_minutes} minutes."
        )
    errors.update(scheduler_errors(job, partition.cluster))
    return errors


def scheduler_errors(job, cluster) -> dict[str, str]:
    """What the cluster's scheduler cannot run: its adapter's capabilities
    (docs/run/schedulers.md)."""
    scheduler = schedulers.for_cluster(cluster)
    errors: dict[str, str] = {}
    if (not scheduler.supports_multi_node and (job.nodes > 1 or job.tasks_per_node > 1)) or (
        not scheduler.supports_launchers and job.launcher != Launcher.NONE
    ):
        errors["nodes"] = (
            f"Cluster {cluster.name} runs {scheduler.name}: one process on one machine per "
            "job (multi-node jobs and launchers need a Slurm cluster)."
        )
    if job.resumable and not scheduler.supports_resumable:
        errors["resumable"] = (
            f"Cluster {cluster.name} runs {scheduler.name}: checkpoint and requeue need a "
            "Slurm cluster here."
        )
    return errors


def gpu_requirement_errors(job, partition) -> dict[str, str]:
    """A request by compute capability and memory: the matching GPU types of ``partition``
    become the job's gpu_type (one type) or gpu_constraint (one of several); refused with
    the closest alternatives when none matches."""
    capability, memory = job.min_gpu_capability, job.min_gpu_memory_gb
    job.gpu_constraint = ""
    if capability is None and memory is None:
        return {}
    field = "min_gpu_capability" if capability is not None else "min_gpu_memory_gb"
    if not job.gpus:
        return {field: "Choose a GPU count for these GPU requirements."}
    described = list(partition.cluster.gpu_types.all())
    if job.gpu_type:
        chosen = next((t for t in described if t.name == job.gpu_type), None)
        if chosen is None:
            return {field: f"GPU type {job.gpu_type} is not described: choose “any” type."}
        if not chosen.satisfies(capability, memory):
            return {
                field: f"{chosen.name} has {chosen.describe()}, not {wants(capability, memory)}."
            }
        return {}
    try:
        choice = choose(partition, described, capability, memory)
    except NoGpuMatches as exc:
        return {field: str(exc)}
    if len(choice.constraint) > GPU_CONSTRAINT_MAX:
        return {field: f"Too many GPU types match ({len(choice.types)}): ask for more."}
    job.gpu_type, job.gpu_constraint = choice.gres_type, choice.constraint
    return {}


# Job.gpu_constraint's max_length: an OR of more types than fits is refused, not cut.
