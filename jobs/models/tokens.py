"""Personal API tokens: shown once, stored as a SHA-256 hash, optionally expiring."""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from jobs import crypto

PREFIX = "pp_"


class ApiTokenQuerySet(models.QuerySet):
    def usable(self) -> ApiTokenQuerySet:
        now = timezone.now()
        return self.filter(revoked_at__isnull=True).filter(
            models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now)
        )


class ApiToken(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, help_text="What the token is for, e.g. 'laptop'.")
    hint = models.CharField(
        max_length=12, editable=False, help_text="First characters, to tell tokens apart."
    )
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        app_label = "jobs"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.hint}…) of {self.user}"

    @classmethod
    def issue(cls, user, name: str, days: int | None = None) -> tuple[ApiToken, str]:
        """A new token; the plain text is returned once and never stored."""
        token = PREFIX + secrets.token_urlsafe(32)
        expires = timezone.now() + timedelta(days=days) if days else None
        row = cls.objects.create(
            user=user,
            name=name[:100],
            hint=token[:10],
            token_hash=crypto.secret_hash(token),
            expires_at=expires,
        )
        return row, token

    @classmethod
    def authenticate(cls, token: str) -> ApiToken | None:
        if not token.startswith(PREFIX):
            return None
        row = (
            cls.objects.usable()
            .select_related("user")
            .filter(token_hash=crypto.secret_hash(token))
            .first()
        )
        if row is None or not row.user.is_active:
            return None
        now = timezone.now()
        if not row.last_used_at or now - row.last_used_at > timedelta(minutes=1):
            cls.objects.filter(pk=row.pk).update(last_used_at=now)
        return row

    @property
    def is_usable(self) -> bool:
        return self.revoked_at is None and (
            self.expires_at is None or self.expires_at > timezone.now()
        )

    def revoke(self) -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])
