"""The container catalog an administrator curates, and checks that a cluster can run it."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models, transaction
from django.utils import timezone

from clusters.models.clusters import Cluster
from common import choices, validators
from common.choices import Kind
from common.validators import split_list


class Tag(models.Model):
    name = models.SlugField(max_length=40, unique=True)

    class Meta:
        app_label = "jobs"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ContainerImageQuerySet(models.QuerySet):
    def offered(self) -> ContainerImageQuerySet:
        """Images a user may choose for a new job: the enabled ones, deprecated ones last
        (they still run, marked as deprecated, so old experiments can be repeated)."""
        return self.filter(enabled=True).order_by(
            "deprecated", *(ContainerImage._meta.ordering or ())
        )


class ContainerImage(models.Model):
    Runtime = choices.Runtime

    name = models.CharField(max_length=100)
    slug = models.SlugField(max_length=100, unique=True)
    version = models.CharField(max_length=50, blank=True)
    description = models.TextField(blank=True)
    tags = models.ManyToManyField(Tag, blank=True, related_name="images")
    runtime = models.CharField(max_length=16, choices=Runtime.choices, default=Runtime.APPTAINER)
    location = models.CharField(
        max_length=500,
        blank=True,
        validators=[validators.image_location],
        help_text="Absolute .sif path or a docker://, oras:// or library:// URI. "
        "Empty for runtime 'none'.",
    )
    modules = models.TextField(
        blank=True,
        validators=[validators.EachItem(validators.module_name)],
        help_text="Environment modules loaded before the container starts, one per line "
        "(e.g. cuda/12.4).",
    )
    default_command = models.TextField(
        blank=True,
        help_text="Batch jobs: the command the launch form starts with (the user may edit it).",
    )
    # How its batch command starts unless the user says otherwise (a data-parallel demo
    # suggests its launcher and layout the way default_command suggests a command).
    default_launcher = models.CharField(
        max_length=16,
        choices=choices.Launcher.choices,
        default=choices.Launcher.NONE,
        help_text="Batch jobs: the launcher the form starts with.",
    )
    default_nodes = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(1)])
    default_tasks_per_node = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1)]
    )
    supports_gpu = models.BooleanField(default=True)
    offers_notebook = models.BooleanField("notebook sessions", default=True)
    offers_batch = models.BooleanField("batch jobs", default=True)
    offers_tensorboard = models.BooleanField(
        "TensorBoard sessions",
        default=False,
        help_text="The image has TensorBoard (the `tensorboard` command on its PATH).",
    )
    offers_vscode = models.BooleanField(
        "VS Code sessions",
        default=False,
        db_default=False,
        help_text="The image has code-server (the `code-server` command on its PATH).",
    )
    enabled = models.BooleanField(default=True)
    deprecated = models.BooleanField(
        default=False,
        help_text="Still offered (an old experiment can be launched again), but marked as "
        "deprecated, listed last and warned about, with the note below. To stop new jobs, "
        "disable the image.",
    )
    deprecation_note = models.CharField(
        max_length=200,
        blank=True,
        help_text="Shown with a deprecated image: why, and what to use instead.",
    )
    sort_order = models.IntegerField(default=100, help_text="Lower numbers are listed first.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ContainerImageQuerySet.as_manager()

    class Meta:
        app_label = "jobs"
        ordering = ["sort_order", "name", "version"]

    def __str__(self) -> str:
        return f"{self.name} {self.version}".strip()

    @property
    def module_list(self) -> list[str]:
        return split_list(self.modules)

    @property
    def deprecation_text(self) -> str:
        """What a user is told about a deprecated image ('' when it is not)."""
        if not self.deprecated:
            return ""
        return f"{self} is deprecated: " + (
            self.deprecation_note or "it still runs, but may be removed; prefer a newer image."
        )

    @property
    def kinds(self) -> list[str]:
        return [
            k
            for k, on in (
                (Kind.NOTEBOOK, self.offers_notebook),
                (Kind.BATCH, self.offers_batch),
                (Kind.TENSORBOARD, self.offers_tensorboard),
                (Kind.VSCODE, self.offers_vscode),
            )
            if on
        ]

    def clean(self) -> None:
        errors = {}
        if self.runtime == self.Runtime.NONE:
            if self.location:
                errors["location"] = "Runtime 'none' runs on the host: leave the location empty."
        elif not self.location:
            errors["location"] = f"Runtime '{self.runtime}' needs an image location."
        elif self.runtime == self.Runtime.PODMAN and not self.location.startswith("docker://"):
            errors["location"] = "Podman runs OCI images: use a docker:// URI."
        if not self.kinds:
            errors["offers_batch"] = (
                "Offer at least one kind of session (notebook, batch, TensorBoard or VS Code)."
            )
        if errors:
            raise ValidationError(errors)

    @transaction.atomic
    def duplicate(self) -> ContainerImage:
        """A disabled copy with a free slug, for preparing the next version."""
        tags = list(self.tags.all())
        base = f"{self.slug}-copy"
        slug, n = base, 1
        while ContainerImage.objects.filter(slug=slug).exists():
            n += 1
            slug = f"{base}-{n}"
        copy = ContainerImage.objects.get(pk=self.pk)
        copy.pk = None
        copy.slug = slug
        copy.name = f"{self.name} (copy)"[:100]
        copy.enabled = False
        copy.save()
        copy.tags.set(tags)
        return copy


# ---------------------------------------------------------------------------
# Cluster accounts
# ---------------------------------------------------------------------------


class ImageCheck(models.Model):
    """The last check, on one cluster's login node, that what an image needs is there:
    its runtime command, its .sif file, its environment modules."""

    image = models.ForeignKey(ContainerImage, on_delete=models.CASCADE, related_name="checks")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="image_checks")
    checked_at = models.DateTimeField()
    checked_as = models.CharField(max_length=32, blank=True, help_text="The cluster user.")
    ok = models.BooleanField()
    report = models.TextField(help_text="One finding per line.")

    class Meta:
        app_label = "jobs"
        ordering = ["cluster__name"]
        constraints = [
            models.UniqueConstraint(fields=["image", "cluster"], name="one_check_per_cluster")
        ]

    def __str__(self) -> str:
        return f"{self.image} on {self.cluster}: {'ok' if self.ok else 'problems'}"

    @property
    def problems(self) -> list[str]:
        return [line[2:] for line in self.report.splitlines() if line.startswith("✘ ")]

    @classmethod
    def record(cls, images, cluster: Cluster, account, findings) -> list[ImageCheck]:
        """Record each image's check lines (catalog.checks.run) as checked by
        ``account`` (None: not checked) now."""
        now = timezone.now()
        checks: list[ImageCheck] = []
        for image, lines in zip(images, findings, strict=True):
            lines = lines or ["✔ nothing to check (the host's own environment)"]
            check, _ = cls.objects.update_or_create(
                image=image,
                cluster=cluster,
                defaults={
                    "checked_at": now,
                    "checked_as": account.username if account else "",
                    "ok": not any(line.startswith("✘") for line in lines),
                    "report": "\n".join(lines),
                },
            )
            checks.append(check)
        return checks
