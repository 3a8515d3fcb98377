"""A job: who asked and where it runs, composed with its parts: what was asked
(request.py), where it stands on the scheduler (run.py; its timeline is events.py) and
what people say of it (annotations.py). Its wording for people is jobs/display.py."""

from __future__ import annotations

import re
import secrets
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from catalog.models.apps import SessionApp
from common import crypto
from common.choices import COMMAND_SESSION_KINDS, State
from jobs import signals
from jobs.models.annotations import PARAMS_FILE, JobAnnotations, params_env, params_json
from jobs.models.request import JobRequest
from jobs.models.run import JobRun
from projects import access
from projects.access import sees_every_job
from schedulers.seam import (
    AppSpec,
    ImageSpec,
    JobKey,
    JobRef,
    JobSpec,
    Member,
    PartitionSpec,
    Resources,
    Staging,
)

if TYPE_CHECKING:
    from catalog.models.images import ContainerImage
    from clusters.models.clusters import Partition


def new_job_uid() -> str:
    return secrets.token_hex(5)


class JobQuerySet(models.QuerySet):
    def for_user(self, user) -> JobQuerySet:
        """Jobs a user may act on (projects/access.py): their own, or every job for staff."""
        return self if sees_every_job(user) else self.filter(owner=user)

    def visible_to(self, user) -> JobQuerySet:
        """Jobs a user may see (projects/access.py): for_user's, and their projects' that are
        not private as their role allows."""
        return self.filter(access.visible_jobs(user))

    def active(self) -> JobQuerySet:
        return self.filter(state__in=Job.ACTIVE_STATES)


class Job(JobRequest, JobRun, JobAnnotations):
    """A job: what was asked (JobRequest, request.py), its run on the scheduler and the
    changes of its state (JobRun, run.py), and what people say of it (JobAnnotations,
    annotations.py); composed here with who asked and where it runs, and the predicates
    pages and workers ask."""

    # Random part of the job's name on the cluster and of its work directory:
    # database ids repeat across installs and resets, these do not.
    uid = models.CharField(max_length=16, unique=True, default=new_job_uid, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="jobs"
    )
    cluster = models.ForeignKey("Cluster", on_delete=models.PROTECT, related_name="jobs")
    partition = models.ForeignKey("Partition", on_delete=models.PROTECT, related_name="jobs")
    image = models.ForeignKey("ContainerImage", on_delete=models.PROTECT, related_name="jobs")
    cluster_account = models.ForeignKey(
        "ClusterAccount",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="jobs",
        help_text="The cluster login the job was submitted with.",
    )
    # A member of a job array (jobs/models/arrays.py): the scheduler knows it as
    # "<array id>_<array_index>" under the array's name.
    array = models.ForeignKey(
        "JobArray", on_delete=models.PROTECT, null=True, blank=True, related_name="jobs"
    )
    array_index = models.PositiveIntegerField(null=True, blank=True)
    # A run of an experiment's trial (experiments/): one job per cross-validation fold.
    trial = models.ForeignKey(
        "experiments.Trial",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="jobs",
    )
    fold = models.PositiveSmallIntegerField(null=True, blank=True)
    # The project (the scheduler's account) it is charged to, when the portal knows it
    # (projects/): its members see it as their role allows, unless it is ``private``.
    project = models.ForeignKey(
        "projects.Project", on_delete=models.SET_NULL, null=True, blank=True, related_name="jobs"
    )
    private = models.BooleanField(
        default=False, help_text="Only its owner (and staff) see it, whatever the project says."
    )

    # -- kept here for side features, each read and written by its own module ------------
    # What reproduces the run (jobs/provenance.py), read on the cluster at submit:
    # {"image": {...}, "git": {...}} or {"error": "..."}; shown as the page's Reproduce block.
    reproduce = models.JSONField(default=dict, blank=True, editable=False)
    git_diff = models.TextField(blank=True, editable=False)
    # The job's own metrics upload token (hash only): valid for this job while it is active.
    metrics_token_hash = models.CharField(max_length=64, blank=True, editable=False)
    # Bytes of metric records received (uploads and files), for the per-job quota.
    metrics_bytes = models.BigIntegerField(default=0, editable=False)
    # The idle-GPU policy (usage/idle_policy.py): when it warned, when it will (or, in a dry
    # run, would) cancel, and the owner's one "Keep it".
    idle_warned_at = models.DateTimeField(null=True, blank=True, editable=False)
    idle_cancel_at = models.DateTimeField(null=True, blank=True, editable=False)
    idle_kept_at = models.DateTimeField(null=True, blank=True, editable=False)
    idle_kept_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        editable=False,
        related_name="+",
    )

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["cluster", "state"]),
            models.Index(fields=["owner", "-created_at"]),
            # A person's jobs counted from the index alone (the dashboard's and the API's
            # page counts, by state, trials apart): 10.8 -> 0.9 ms for 12,000 jobs.
            models.Index(fields=["owner", "state", "trial"], name="jobs_job_owner_state_trial"),
        ]

    def __str__(self) -> str:
        return f"job {self.pk} ({self.get_kind_display()}, {self.state})"

    @property
    def scheduler_name(self) -> str:
        """The job's name on its scheduler; submit looks jobs up by it, so it is unique per
        portal job (an array's members share the array's)."""
        if self.array is not None:
            return self.array.scheduler_name
        return f"portal-{self.pk}-{self.uid}"

    @property
    def scheduler_key(self) -> JobKey:
        """What the scheduler's records of this job are looked up by: its id and its name
        (an id may be reissued to another job; schedulers/seam.py)."""
        return JobKey(self.scheduler_job_id, self.scheduler_name)

    def describe(self) -> JobSpec:
        """The job as the scheduler seam's plain values: what its script is rendered from
        (the functions below)."""
        return job_spec(self)

    def as_member(self, metrics_url: str) -> Member:
        """The job as a member of its array's script: its description and what it alone is
        told (a trial's parameters, trial and fold; ``member`` below)."""
        return member(self, metrics_url)

    def issue_metrics_token(self) -> str:
        """A new upload token for this job's metrics (the old one stops working); only its
        hash is kept (metrics/auth.py checks it with ``metrics_token_matches``)."""
        token = "pm_" + secrets.token_urlsafe(32)
        self.metrics_token_hash = crypto.secret_hash(token)
        Job.objects.filter(pk=self.pk).update(metrics_token_hash=self.metrics_token_hash)
        return token

    def metrics_token_matches(self, token: str) -> bool:
        return crypto.secret_matches(self.metrics_token_hash, token)

    def ref(self) -> JobRef:
        """What a status or accounting read needs of the submitted job (schedulers/seam.py)."""
        return job_ref(self)

    @property
    def submitted_script(self) -> str:
        """The script the scheduler runs for this job (an array member's is the array's)."""
        if self.array is not None and not self.script:
            return self.array.script
        return self.script

    @property
    def is_held(self) -> bool:
        """Pending and held (by the user, an administrator, or the scheduler after a failed
        launch): it waits until released."""
        return self.state == self.State.PENDING and self.held

    @property
    def is_active(self) -> bool:
        return self.state in self.ACTIVE_STATES

    @property
    def has_session(self) -> bool:
        """Opens through a session link (a notebook, TensorBoard, VS Code)."""
        return self.kind in self.SESSION_KINDS

    @property
    def session_app_name(self) -> str:
        """What its session's "Open …" button names ('' for a batch job)."""
        from common.choices import SESSION_APP_NAMES

        if self.kind == self.Kind.APP:
            return self.app.name if self.app is not None else "app"
        return SESSION_APP_NAMES.get(self.kind, "")

    @property
    def session_app(self):
        """The SessionApp its session runs (None for a batch job), looked up once."""
        if not hasattr(self, "_session_app"):
            from catalog.models.apps import SessionApp

            self._session_app = SessionApp.for_job(self) if self.has_session else None
        return self._session_app

    @property
    def session_acts_as_owner(self) -> bool:
        """Whoever opens its session runs code as its owner (shared only when the owner
        accepts that): every app but those the catalog says only show (TensorBoard)."""
        app = self.session_app
        return app is None or not app.shareable_read_only

    @property
    def session_noun(self) -> str:
        """What a share's warning calls its session: "notebook", "VS Code session"."""
        return "notebook" if self.kind == self.Kind.NOTEBOOK else f"{self.session_app_name} session"

    @property
    def is_final(self) -> bool:
        return self.state in self.FINAL_STATES

    @property
    def ended_badly(self) -> bool:
        """Failed or timed out on the cluster: its stderr likely says why."""
        return self.state in (self.State.FAILED, self.State.TIMEOUT)

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1 or self.launcher != self.Launcher.NONE

    def save(self, *args, **kwargs) -> None:
        from projects.models import charge

        charge(self, self.account)
        super().save(*args, **kwargs)

    def set_private(self, private: bool) -> None:
        """Its owner hides it from their project's members (or shows it again); pages
        that show it to them hear of it at once (jobs/consumers.py checks each push)."""
        self.private = private
        Job.objects.filter(pk=self.pk).update(private=private)
        signals.updated_on_commit(self)

    def clean(self) -> None:
        """The request must fit the partition and the image (messages name the limit), and
        the parameters their bounds."""
        errors = {**self.request_errors(), **self.annotation_errors()}
        if errors:
            raise ValidationError(errors)

    def _job_of_folder(self, folder: re.Match) -> Job | None:
        """The owner's job whose work directory ``folder`` (validators.JOB_FOLDER) is in:
        the job itself, or for a job array's folder the member of the index that follows
        (any member for the whole array's)."""
        if not folder["array"]:
            return Job.objects.filter(
                owner_id=self.owner_id, pk=folder["id"], uid=folder["uid"]
            ).first()
        members = Job.objects.filter(
            owner_id=self.owner_id, array_id=folder["id"], array__uid=folder["uid"]
        ).order_by("array_index")
        index = self.notebook_dir[folder.end() :].split("/")[0]
        if re.fullmatch(r"[0-9]+", index):  # a member's folder (no index has 10 digits)
            return members.filter(array_index=int(index)).first() if len(index) < 10 else None
        return members.first()


# --- the job as the scheduler seam's plain values (schedulers/seam.py) ----------------------
# Built once here from the rows, so that an adapter never reads a row (nor the database) and
# its tests need none: ``job_spec`` is what a job's script is rendered from, ``member`` an
# array member's part of its array's script, ``job_ref`` what a status or accounting read
# needs of a submitted job. Reached as ``Job.describe()``, ``Job.as_member()``, ``Job.ref()``.


def comment(job: Job) -> str:
    """The portal's own id of the job (pk and uid), which the scheduler keeps with it
    (Slurm's --comment, seen in squeue and sacct); an array's members share the array's."""
    if job.array is not None:
        return job.array.comment
    return f"portal-job-{job.pk}-{job.uid}"


def image_spec(image: ContainerImage) -> ImageSpec:
    return ImageSpec(
        runtime=image.runtime, location=image.location, modules=tuple(image.module_list)
    )


def partition_spec(partition: Partition) -> PartitionSpec:
    return PartitionSpec(
        name=partition.name,
        gpu_type_as_constraint=partition.gpu_type_as_constraint,
        mem_per_gpu=partition.mem_per_gpu,
        time_class=partition.time_class,
        max_gpus_per_node=partition.max_gpus_per_node,
        max_gpus_per_job=partition.max_gpus_per_job,
        max_cpus_per_job=partition.max_cpus_per_job,
    )


def resources(job: Job, *, gpu_model: bool = True) -> Resources:
    """What ``job`` asks for; ``gpu_model``: with the model described for its GPU type (a
    query of its cluster's GPU types, only for a job that names one; none where they were
    prefetched, as for an array's members)."""
    model = ""
    if gpu_model and job.gpus and job.gpu_type:
        described = [t for t in job.cluster.gpu_types.all() if t.name == job.gpu_type]
        model = described[0].model if described else ""
    return Resources(
        nodes=job.nodes,
        tasks_per_node=job.tasks_per_node,
        cpus=job.cpus,
        memory_gb=job.memory_gb,
        gpus=job.gpus,
        gpu_type=job.gpu_type,
        gpu_constraint=job.gpu_constraint,
        gpu_model=model,
        min_gpu_capability=job.min_gpu_capability,
        min_gpu_memory_gb=job.min_gpu_memory_gb,
    )


def account(job: Job) -> str:
    """The account the job is charged to: its own, else its cluster's default ('')."""
    return job.account or job.cluster.default_account


def staging(job: Job) -> Staging | None:
    """What ``job`` copies to its nodes before the command and back after it (None: it
    stages nothing), where on the node its cluster says."""
    asked = job.staging or {}
    if not asked:
        return None
    return Staging(
        source=str(asked.get("in") or ""),
        source_root=str(asked.get("in_root") or ""),
        outputs=tuple(str(p) for p in asked.get("out") or ()),
        destination=str(asked.get("out_to") or ""),
        destination_root=str(asked.get("out_to_root") or ""),
        scratch=job.cluster.node_scratch,
    )


def job_spec(job: Job) -> JobSpec:
    """What ``job``'s script is rendered from (its image, partition, cluster and array
    read here, once)."""
    params = job.params or {}
    return JobSpec(
        id=job.pk,
        name=job.scheduler_name,
        comment=comment(job),
        kind=job.kind,
        command=job.command,
        image=image_spec(job.image),
        resources=resources(job),
        partition=partition_spec(job.partition),
        account=account(job),
        time_limit_minutes=job.time_limit_minutes,
        launcher=job.launcher,
        resumable=job.resumable,
        max_attempts=job.max_attempts,
        checkpoint_warning_seconds=job.checkpoint_warning_seconds,
        notebook_dir=job.notebook_dir,
        # Its parameters (as a trial's, experiments/runs.py): PORTAL_PARAM_<NAME> and
        # params.json in the work directory.
        env=params_env(params) if params else {},
        files={PARAMS_FILE: params_json(params)} if params else {},
        array_index=job.array_index,
        staging=staging(job),
        app=app_spec(job),
    )


def app_spec(job: Job) -> AppSpec | None:
    """A session started by its app's command (VS Code, an added app); None otherwise."""
    if job.kind not in COMMAND_SESSION_KINDS:
        return None
    app = SessionApp.for_job(job)
    return None if app is None else app.spec(job.app_values or {})


def member(job: Job, metrics_url: str) -> Member:
    """``job`` as a member of its array's script (its description and what it alone is
    told: a trial's parameters, trial and fold)."""
    trial = job.trial
    if trial is None:
        return Member(job=job_spec(job), command=job.command, metrics_url=metrics_url)
    experiment = trial.experiment
    env = {
        "PORTAL_EXPERIMENT_ID": str(experiment.pk),
        "PORTAL_TRIAL": str(trial.number),
        "FOLD": str(job.fold or 0),
        "NUM_FOLDS": str(experiment.folds),
    }
    env.update(params_env(trial.params))
    return Member(
        job=job_spec(job),
        command=job.command,
        env=env,
        files={PARAMS_FILE: params_json(trial.params)},
        metrics_url=metrics_url,
    )


def job_ref(job: Job) -> JobRef:
    """What a status or accounting read needs of the submitted ``job``."""
    return JobRef(
        key=job.scheduler_key,
        comment=comment(job),
        state=State(job.state),
        resources=resources(job, gpu_model=False),
        partition=partition_spec(job.partition),
        account=account(job),
        node=job.node,
        submitted_at=job.submitted_at or job.created_at,
    )
