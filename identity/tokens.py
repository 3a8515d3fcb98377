"""Personal API tokens: shown once, stored as a SHA-256 hash, expiring after at most
PORTAL_API_TOKEN_MAX_DAYS, each with scopes (read, submit, admin, metrics) that identity/token_auth.py
enforces."""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import cast

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.utils import timezone

from common import crypto

PREFIX = "pp_"


# read: every GET; submit: launching, cancelling, releasing (every other method);
# admin: a staff member's powers (every user's jobs and usage), for staff only;
# metrics: /metrics for a Prometheus server outside PORTAL_METRICS_NETWORKS, staff only.
READ, SUBMIT, ADMIN, METRICS = "read", "submit", "admin", "metrics"
SCOPES = (READ, SUBMIT, ADMIN, METRICS)
DEFAULT_SCOPES = (READ, SUBMIT)


def parse_scopes(value: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Scopes from "read,submit" or a list, in SCOPES order; unknown ones are an error."""
    items = value.replace(" ", ",").split(",") if isinstance(value, str) else list(value)
    wanted = {item.strip().lower() for item in items if item.strip()}
    unknown = wanted - set(SCOPES)
    if unknown:
        raise ValidationError(
            f"Unknown scope(s) {', '.join(sorted(unknown))}; use {', '.join(SCOPES)}."
        )
    return tuple(scope for scope in SCOPES if scope in wanted)


class ApiTokenQuerySet(models.QuerySet):
    def usable(self) -> ApiTokenQuerySet:
        now = timezone.now()
        oldest = now - timedelta(days=settings.PORTAL_API_TOKEN_MAX_DAYS)
        # A token from before the maximum lifetime (no expiry) ends when it would have.
        return self.filter(revoked_at__isnull=True).filter(
            models.Q(expires_at__isnull=True, created_at__gt=oldest) | models.Q(expires_at__gt=now)
        )

    def revoke_all(self, user) -> list[ApiToken]:
        """Revoke every live token of ``user`` at once (deactivated, or left the groups);
        returns the tokens this call revoked (for the audit log)."""
        now = timezone.now()
        with transaction.atomic():
            # Locked: a token revoked by a concurrent call is that call's, not listed twice.
            live = cast(
                "list[ApiToken]",
                list(self.select_for_update().filter(user=user, revoked_at__isnull=True)),
            )
            self.filter(pk__in=[token.pk for token in live]).update(revoked_at=now)
        for token in live:
            token.revoked_at = now
        return live


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
    scopes = models.CharField(
        max_length=40,
        default=",".join(DEFAULT_SCOPES),
        help_text="What the token may do, comma-separated: read, submit, admin and metrics "
        "(staff only).",
    )

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        app_label = "jobs"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.hint}…) of {self.user}"

    @classmethod
    def issue(
        cls,
        user,
        name: str,
        days: int | None = None,
        scopes: str | tuple[str, ...] | list[str] = DEFAULT_SCOPES,
    ) -> tuple[ApiToken, str]:
        """A new token; the plain text is returned once and never stored. It lives ``days``
        (at most, and by default, PORTAL_API_TOKEN_MAX_DAYS); ValidationError for scopes
        that are unknown, empty, or admin for someone who is not staff."""
        chosen = parse_scopes(scopes)
        if not chosen:
            raise ValidationError("A token needs at least one scope.")
        if ADMIN in chosen and not user.is_staff:
            raise ValidationError("Only staff may hold a token with the admin scope.")
        if METRICS in chosen and not user.is_staff:
            raise ValidationError("Only staff may hold a token with the metrics scope.")
        longest = settings.PORTAL_API_TOKEN_MAX_DAYS
        token = PREFIX + secrets.token_urlsafe(32)
        row = cls.objects.create(
            user=user,
            name=name[:100],
            hint=token[:10],
            token_hash=crypto.secret_hash(token),
            expires_at=timezone.now() + timedelta(days=min(days or longest, longest)),
            scopes=",".join(chosen),
        )
        return row, token

    @property
    def scope_set(self) -> frozenset[str]:
        return frozenset(parse_scopes(self.scopes))

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
        now = timezone.now()
        if self.revoked_at is not None:
            return False
        if self.expires_at is not None:
            return self.expires_at > now
        return self.created_at > now - timedelta(days=settings.PORTAL_API_TOKEN_MAX_DAYS)

    def revoke(self) -> bool:
        """Revoke the token; False if it was revoked already (by this or another call)."""
        now = timezone.now()
        if not ApiToken.objects.filter(pk=self.pk, revoked_at__isnull=True).update(revoked_at=now):
            return False
        self.revoked_at = now
        return True
