"""The audit log: one row per action the portal takes on a cluster on someone's behalf
(written by ``identity.audit``, the one place that records; read by staff in the admin)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

# Bounds of the text columns: a target names a job, a path or an image, never a user's
# whole text; a message is the start of what went wrong.
TARGET_MAX = 300
MESSAGE_MAX = 500
KEY_ID_MAX = 300


def bounded(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters (an ellipsis marks the cut)."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class AuditEventQuerySet(models.QuerySet):
    def older_than(self, days: int) -> AuditEventQuerySet:
        return self.filter(at__lt=timezone.now() - timedelta(days=days))


class AuditEvent(models.Model):
    class Action(models.TextChoices):
        SUBMIT = "submit", "submit a job"
        CANCEL = "cancel", "cancel a job"
        RELEASE = "release", "release a held job"
        TIME_LIMIT = "time_limit", "lower a pending job's time limit"
        FILE_READ = "file_read", "read a job's log"
        FILE_LIST = "file_list", "list a job's work directory"
        FILE_DOWNLOAD = "file_download", "download a file"
        FILE_MKDIR = "file_mkdir", "make a folder"
        FILE_UPLOAD = "file_upload", "upload a file"
        FILE_RENAME = "file_rename", "rename or move a file"
        TRANSFER_START = "transfer_start", "start a transfer"
        TRANSFER_CANCEL = "transfer_cancel", "cancel a transfer"
        REMOTE_ADD = "remote_add", "add a remote"
        REMOTE_DELETE = "remote_delete", "remove a remote"
        FILE_DELETE = "file_delete", "delete files"
        SESSION_REGISTER = "session_register", "session registration"
        CATALOG_CHECK = "catalog_check", "catalog check"
        GPU_DISCOVERY = "gpu_discovery", "GPU type discovery"
        ACCOUNT_TEST = "account_test", "test a cluster account"
        # What changes who acts as whom, or who can reach what (no cluster command).
        ACCOUNT_CREATE = "account_create", "cluster account made"
        ACCOUNT_MAP = "account_map", "cluster account changed"
        SESSION_OPEN = "session_open", "open one's own session"
        SESSION_OPEN_OTHER = "session_open_other", "open another person's session"
        SESSION_SHARE = "session_share", "share a session"
        SESSION_UNSHARE = "session_unshare", "withdraw a session's share"
        READ_LINK_CREATE = "read_link_create", "read link made"
        READ_LINK_OPEN = "read_link_open", "read link opened"
        READ_LINK_REVOKE = "read_link_revoke", "read link revoked"
        PROJECT_DEFAULTS = "project_defaults", "project defaults changed"
        SSH_KEY_ADD = "ssh_key_add", "SSH key added"
        SSH_KEY_REMOVE = "ssh_key_remove", "SSH key removed"
        SSH_CERTIFICATE = "ssh_certificate", "SSH certificate issued to a person"
        TOKEN_CREATE = "token_create", "API token created"
        TOKEN_REVOKE = "token_revoke", "API token revoked"
        WEBHOOK_CHANGE = "webhook_change", "webhook address changed"
        MODEL_REGISTER = "model_register", "register a model version"
        MODEL_ALIAS = "model_alias", "set or remove a model's alias"
        RETENTION = "retention", "delete a run's checkpoints by a retention plan"
        ENDPOINT_KEY_CREATE = "endpoint_key_create", "model endpoint key made"
        ENDPOINT_KEY_REVOKE = "endpoint_key_revoke", "model endpoint key revoked"

    class Outcome(models.TextChoices):
        OK = "ok"
        REFUSED = "refused"
        FAILED = "failed"

    at = models.DateTimeField(default=timezone.now, db_index=True)
    # Who: the portal user (kept as text too, so the row outlives the user) ...
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    username = models.CharField(max_length=150, blank=True)
    # ... and as whom on which cluster (names kept for the same reason).
    cluster = models.ForeignKey(
        "jobs.Cluster", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    cluster_name = models.CharField(max_length=100, blank=True)
    cluster_username = models.CharField(max_length=64, blank=True)
    action = models.CharField(max_length=20, choices=Action.choices)
    target = models.CharField(max_length=TARGET_MAX, blank=True)
    # The key id of the SSH certificate the action ran on ("" for a stored key).
    key_id = models.CharField("key id", max_length=KEY_ID_MAX, blank=True)
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    message = models.CharField(max_length=MESSAGE_MAX, blank=True)
    # The request (or task) it was done for (common/context.py): also in the log lines and
    # the certificate's key id. A database default, so an instance of the release before
    # it still writes rows during a rolling upgrade.
    request_id = models.CharField(max_length=64, blank=True, default="", db_default="")

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        app_label = "jobs"
        ordering = ["-at", "-pk"]
        indexes = [
            models.Index(fields=["username", "at"]),
            models.Index(fields=["cluster_username", "at"]),
            models.Index(fields=["cluster", "at"]),
            models.Index(fields=["action", "at"]),
            models.Index(fields=["outcome", "at"]),
            models.Index(fields=["request_id"]),
        ]

    def __str__(self) -> str:
        who = self.username or "-"
        return f"{self.at:%Y-%m-%d %H:%M:%S} {who} {self.action} {self.target} {self.outcome}"
