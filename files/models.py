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
