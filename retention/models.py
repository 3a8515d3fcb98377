"""Retention policies (a person's, or a project's) and the plans made from them: a dry
run listing a run's checkpoints with their verdicts, applied later as the run's owner.
The latest plan of a job says what its checkpoints cost on disk (the run's page)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q

from retention.plan import Rule

MAX_PATTERNS = 20
PATTERN_CHARS = 100
DEFAULT_PATTERNS = [
    "checkpoint-*",
    "checkpoint_*",
    "*.ckpt",
    "*.pt",
    "*.pth",
    "*.safetensors",
    "*.keras",
]


def default_patterns() -> list[str]:
    return list(DEFAULT_PATTERNS)


class Policy(models.Model):
    class Mode(models.TextChoices):
        MIN = "min", "lower is better"
        MAX = "max", "higher is better"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="retention_policies",
        help_text="Set: the person's policy for their runs outside a project.",
    )
    project = models.ForeignKey(
        "projects.Project",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="retention_policies",
        help_text="Set: the policy of the project's runs (its managers set it).",
    )
    keep_best = models.PositiveSmallIntegerField(default=1)
    metric = models.CharField(max_length=100, blank=True)
    mode = models.CharField(max_length=3, choices=Mode.choices, default=Mode.MIN)
    keep_latest = models.PositiveSmallIntegerField(default=1)
    patterns = models.JSONField(
        default=default_patterns,
        help_text="Names (shell globs) of a run's checkpoints: files or folders.",
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "policies"
        constraints = [
            models.CheckConstraint(
                condition=Q(owner__isnull=True) ^ Q(project__isnull=True),
                name="retention_policy_of_one",
            ),
            models.UniqueConstraint(fields=["owner"], name="one_retention_policy_per_person"),
            models.UniqueConstraint(fields=["project"], name="one_retention_policy_per_project"),
        ]

    def __str__(self) -> str:
        whose = f"project {self.project_id}" if self.project_id else f"user {self.owner_id}"
        return f"retention of {whose}"

    @property
    def rule(self) -> Rule:
        return Rule(self.keep_best, self.metric, self.mode, self.keep_latest)

    def snapshot(self) -> dict[str, Any]:
        return {
            "policy": self.pk,
            "keep_best": self.keep_best,
            "metric": self.metric,
            "mode": self.mode,
            "keep_latest": self.keep_latest,
            "patterns": list(self.patterns),
        }


class Plan(models.Model):
    class State(models.TextChoices):
        LISTING = "listing"
        READY = "ready", "ready (a dry run)"
        APPLYING = "applying"
        APPLIED = "applied"
        FAILED = "failed"

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="retention_plans")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    rule = models.JSONField(help_text="The policy as it was when the plan was asked for.")
    state = models.CharField(max_length=10, choices=State.choices, default=State.LISTING)
    message = models.TextField(blank=True)
    items = models.JSONField(default=list, blank=True)
    bytes_on_disk = models.PositiveBigIntegerField(null=True, blank=True)
    bytes_to_free = models.PositiveBigIntegerField(null=True, blank=True)
    deleted = models.JSONField(default=list, blank=True)
    bytes_freed = models.PositiveBigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    applied_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["job", "-created_at"], name="retention_plan_job")]

    def __str__(self) -> str:
        return f"retention plan {self.pk} of job {self.job_id}"

    @property
    def to_delete(self) -> list[str]:
        return [i["path"] for i in self.items if not i["keep"]]

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.pk,
            "job": self.job_id,
            "state": self.state,
            "message": self.message,
            "rule": self.rule,
            "checkpoints": self.items,
            "bytes_on_disk": self.bytes_on_disk,
            "bytes_to_free": self.bytes_to_free,
            "deleted": self.deleted,
            "bytes_freed": self.bytes_freed,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "applied_at": self.applied_at.isoformat() if self.applied_at else None,
        }
