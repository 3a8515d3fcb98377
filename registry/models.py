"""Registered models, their versions and aliases, by reference: a version points at files
where a run left them on the cluster (a folder of a job's work directory), never a copy.
A sha256 manifest read on the cluster as the person (manifest.py) says what the files
were when registered; while a version exists its files are protected (``protected``).

Names are per namespace: a person's own models, or a project's (a job of a project
registers into the project). MLflow's words are kept: a version's ``status`` is
PENDING_REGISTRATION until its manifest is read, then READY or FAILED_REGISTRATION."""

from __future__ import annotations

import posixpath
from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.db.models import Q

MAX_NAME_CHARS = 256
MAX_DESCRIPTION_CHARS = 5000
MAX_TAGS = 100
MAX_VERSIONS_PER_MODEL = 10_000
MAX_MODELS_PER_NAMESPACE = 1000
MAX_ALIASES_PER_MODEL = 100


class Described(models.Model):
    """What a person writes on a model or a version through MLflow: a description, tags."""

    description = models.TextField(blank=True, max_length=MAX_DESCRIPTION_CHARS)
    tags = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class RegisteredModel(Described):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="registered_models"
    )
    project = models.ForeignKey(
        "projects.Project",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="registered_models",
        help_text="Set: the project's model (its members see it); empty: the owner's own.",
    )
    name = models.CharField(max_length=MAX_NAME_CHARS)

    class Meta(Described.Meta):
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "name"],
                condition=Q(project=None),
                name="one_personal_model_name",
            ),
            models.UniqueConstraint(
                fields=["project", "name"],
                condition=Q(project__isnull=False),
                name="one_project_model_name",
            ),
        ]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @classmethod
    def namespace(cls, owner_id: int, project_id: int | None) -> models.QuerySet:
        """The models one name resolves among: a project's, or a person's own."""
        if project_id is not None:
            return cls.objects.filter(project_id=project_id)
        return cls.objects.filter(owner_id=owner_id, project=None)

    def next_version(self) -> int:
        last = self.versions.aggregate(models.Max("version"))["version__max"]
        return (last or 0) + 1


class ModelVersion(Described):
    class Status(models.TextChoices):
        PENDING = "PENDING_REGISTRATION"
        READY = "READY"
        FAILED = "FAILED_REGISTRATION"

    model = models.ForeignKey(RegisteredModel, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    # Where the files are: a folder (or one file) on the cluster, an absolute path inside
    # the work directory of ``job``. ``source`` is what the registering call said.
    cluster = models.ForeignKey("jobs.Cluster", on_delete=models.PROTECT, related_name="+")
    path = models.CharField(max_length=4096)
    source = models.CharField(max_length=4096, blank=True)
    job = models.ForeignKey(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    run = models.ForeignKey(
        "tracking.TrackedRun",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="model_versions",
    )
    logged_model = models.ForeignKey(
        "tracking.LoggedModel",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="versions",
    )
    step = models.BigIntegerField(null=True, blank=True)
    metrics = models.JSONField(
        default=dict, blank=True, help_text="The run's last values when it was registered."
    )
    registered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=24, choices=Status.choices, default=Status.PENDING)
    status_message = models.CharField(max_length=500, blank=True)
    # [[relative path, size, sha256], ...] sorted by path; its own digest for comparing.
    manifest = models.JSONField(default=list, blank=True)
    manifest_sha256 = models.CharField(max_length=64, blank=True)
    total_bytes = models.BigIntegerField(default=0)

    class Meta(Described.Meta):
        constraints = [
            models.UniqueConstraint(fields=["model", "version"], name="one_model_version")
        ]
        ordering = ["model", "-version"]

    def __str__(self) -> str:
        return f"{self.model.name} v{self.version}"

    @classmethod
    def add(cls, model: RegisteredModel, **fields: Any) -> ModelVersion:
        """The model's next version (numbers never reused, as MLflow's)."""
        with transaction.atomic():
            locked = RegisteredModel.objects.select_for_update().get(pk=model.pk)
            number = locked.next_version()
            if number > MAX_VERSIONS_PER_MODEL:
                raise ValueError(f"A model has at most {MAX_VERSIONS_PER_MODEL} versions.")
            version = cls.objects.create(model=locked, version=number, **fields)
            locked.save(update_fields=["updated_at"])
        return version

    def set_manifest(self, entries: list[tuple[str, int, str]], digest: str) -> None:
        self.manifest = [list(e) for e in entries]
        self.manifest_sha256 = digest
        self.total_bytes = sum(size for _, size, _ in entries)
        self.status, self.status_message = self.Status.READY, ""
        self.save(
            update_fields=[
                "manifest",
                "manifest_sha256",
                "total_bytes",
                "status",
                "status_message",
                "updated_at",
            ]
        )

    def failed(self, message: str) -> None:
        self.status, self.status_message = self.Status.FAILED, message[:500]
        self.save(update_fields=["status", "status_message", "updated_at"])


class ModelAlias(models.Model):
    """A name for one version (``champion``, ``staging``): ``models:/name@alias``. A
    protected alias is moved by the project's managers only."""

    model = models.ForeignKey(RegisteredModel, on_delete=models.CASCADE, related_name="aliases")
    alias = models.CharField(max_length=MAX_NAME_CHARS)
    version = models.ForeignKey(ModelVersion, on_delete=models.CASCADE, related_name="aliases")
    protected = models.BooleanField(default=False)
    set_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["model", "alias"], name="one_alias_per_model")
        ]
        ordering = ["alias"]

    def __str__(self) -> str:
        return f"{self.model.name}@{self.alias}"


def ancestors(path: str) -> list[str]:
    """``/a/b/c`` -> ``['/a/b/c', '/a/b', '/a', '/']`` (normalised, pure)."""
    path = posixpath.normpath(path)
    found = [path]
    while path not in ("/", ""):
        path = posixpath.dirname(path)
        found.append(path)
    return found


def protecting(cluster_id: int, path: str) -> ModelVersion | None:
    """A version whose files ``path`` is, holds, or lies in on the cluster (None: none):
    what a delete, a move or retention must leave alone."""
    path = posixpath.normpath(path)
    inside = path.rstrip("/") + "/"
    return (
        ModelVersion.objects.filter(cluster_id=cluster_id)
        .exclude(status=ModelVersion.Status.FAILED)
        .filter(Q(path__in=ancestors(path)) | Q(path__startswith=inside))
        .select_related("model")
        .order_by("pk")
        .first()
    )
