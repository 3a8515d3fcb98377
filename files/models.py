"""An upload in progress onto a cluster (files/uploads.py): who, where, how long. How much
has arrived is never kept here: it is the partial file's size on the cluster."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models


def new_upload_id() -> str:
    return secrets.token_hex(16)


class Upload(models.Model):
    id = models.CharField(primary_key=True, max_length=32, default=new_upload_id, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    cluster = models.ForeignKey("jobs.Cluster", on_delete=models.CASCADE, related_name="+")
    root = models.CharField(max_length=80)
    folder = models.CharField(max_length=4096, blank=True)  # relative to the root
    name = models.CharField(max_length=255)
    length = models.BigIntegerField()
    overwrite = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    sha256 = models.CharField(max_length=64, blank=True)
    # Every byte arrived and its sha256 and rename are a task's (a file too large to hash
    # within a request, or a cluster that took too long): the client asks HEAD until
    # finished_at, or ``error``, says how it ended.
    completing_at = models.DateTimeField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True, db_default="")

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["user", "finished_at"])]

    def __str__(self) -> str:
        return f"upload {self.id[:8]}… of {self.name} ({self.length} bytes)"

    @property
    def rel(self) -> str:
        return f"{self.folder}/{self.name}" if self.folder else self.name

    @property
    def partial_name(self) -> str:
        """Where the bytes go until the last one: beside the target, never over it."""
        return f".{self.name[:200]}.portal-upload-{self.id[:12]}"


class Remote(models.Model):
    """Somewhere a transfer copies to or from (files/rclone.py's kinds): a person's own,
    with their secret kept encrypted, or one an administrator offers to everyone (no
    owner; never a secret: every transfer runs as its person, so whatever a remote's
    credentials are reach that person's processes and files)."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        help_text="Empty: offered to everyone with an account on the cluster.",
    )
    cluster = models.ForeignKey(
        "jobs.Cluster",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        help_text="Empty: offered on every cluster.",
    )
    name = models.SlugField(max_length=64)
    kind = models.CharField(max_length=16)
    options = models.JSONField(default=dict, blank=True)
    secret_encrypted = models.TextField(blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="one_remote_name_per_owner"),
            models.UniqueConstraint(
                fields=["name"], condition=models.Q(owner=None), name="one_site_remote_name"
            ),
        ]

    def __str__(self) -> str:
        return self.name if self.owner_id else f"{self.name} (site)"

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        from files import rclone

        try:
            self.options = rclone.checked_options(self.kind, dict(self.options or {}))
        except rclone.BadRemote as exc:
            raise ValidationError(str(exc)) from None
        if self.owner_id is None and self.secret_encrypted:
            raise ValidationError("A site remote has no secret: people add their own remotes.")

    def set_secret(self, secret: str) -> None:
        from common import crypto
        from files import rclone

        secret = rclone.checked_secret(secret)
        self.secret_encrypted = crypto.encrypt(secret) if secret else ""

    def config_text(self) -> str:
        from common import crypto
        from files import rclone

        secret = crypto.decrypt(self.secret_encrypted) if self.secret_encrypted else ""
        return rclone.config_text(self.kind, dict(self.options or {}), secret)

    @property
    def kind_label(self) -> str:
        from files import rclone

        kind = rclone.KINDS.get(self.kind)
        return kind.label if kind else self.kind

    @property
    def where(self) -> str:
        """Where it points, for lists (no secret in it)."""
        options = self.options or {}
        return str(options.get("url") or options.get("host") or options.get("endpoint") or "")


class Transfer(models.Model):
    """One copy between a person's folder on a cluster and a remote, run by rclone on the
    cluster as the person (files/transfers.py). Its progress is what rclone's log said at
    the last look; its end is rclone's exit status."""

    class Direction(models.TextChoices):
        TO_REMOTE = "to_remote", "cluster → remote"
        FROM_REMOTE = "from_remote", "remote → cluster"

    class State(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        DONE = "done", "done"
        FAILED = "failed", "failed"
        CANCELLED = "cancelled", "cancelled"

    ACTIVE = (State.QUEUED, State.RUNNING)

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    cluster = models.ForeignKey("jobs.Cluster", on_delete=models.CASCADE, related_name="+")
    remote = models.ForeignKey(
        Remote, on_delete=models.SET_NULL, null=True, blank=True, related_name="transfers"
    )
    remote_name = models.CharField(max_length=64)  # kept when the remote is removed
    direction = models.CharField(max_length=16, choices=Direction.choices)
    root = models.CharField(max_length=80)
    folder = models.CharField(max_length=4096, blank=True)  # relative to the root
    remote_path = models.CharField(max_length=4096, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    state_dir = models.CharField(max_length=4096, blank=True)
    pid = models.IntegerField(null=True, blank=True)
    host = models.CharField(max_length=253, blank=True)
    bytes = models.BigIntegerField(default=0)
    total_bytes = models.BigIntegerField(default=0)
    files_done = models.IntegerField(default=0)
    total_files = models.IntegerField(default=0)
    errors = models.IntegerField(default=0)
    speed = models.FloatField(default=0.0)
    eta = models.FloatField(null=True, blank=True)
    message = models.CharField(max_length=500, blank=True)
    exit_status = models.IntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    polled_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    told_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["state", "polled_at"])]

    def __str__(self) -> str:
        return f"transfer {self.pk} ({self.get_direction_display()}, {self.state})"

    @property
    def is_final(self) -> bool:
        return self.state not in self.ACTIVE

    @property
    def percent(self) -> int:
        if self.state == self.State.DONE:
            return 100
        if self.total_bytes <= 0:
            return 0
        return min(100, self.bytes * 100 // self.total_bytes)

    @property
    def cluster_rel(self) -> str:
        return self.folder or "."

    def status(self) -> dict:
        """What the page's progress bar reads (files/transfer_views.py)."""
        return {
            "state": self.state,
            "state_label": self.get_state_display(),
            "final": self.is_final,
            "bytes": self.bytes,
            "total_bytes": self.total_bytes,
            "files": self.files_done,
            "total_files": self.total_files,
            "errors": self.errors,
            "speed": self.speed,
            "eta": self.eta,
            "percent": self.percent,
            "message": self.message,
            "events": [
                {"at": e.at.isoformat(), "text": e.text} for e in self.events.order_by("at", "id")
            ],
        }

    def note(self, text: str) -> None:
        """One line of the transfer's timeline."""
        TransferEvent.objects.create(transfer=self, text=text[:500])


class TransferEvent(models.Model):
    transfer = models.ForeignKey(Transfer, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(auto_now_add=True)
    text = models.CharField(max_length=500)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.transfer_id} {self.at:%H:%M:%S} {self.text[:60]}"
