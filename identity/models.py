"""Who a portal user is at the identity provider: (issuer, subject), never the user name,
so a person renamed at the provider stays the same portal user."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Identity(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="identities"
    )
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)
    last_sign_in = models.DateTimeField(null=True, blank=True)
    # When the provider last vouched for the person (a sign-in, or a refresh token's
    # answer): past PORTAL_OIDC_CONFIRM_MAX_AGE their tokens, sessions and cluster actions
    # stop until it vouches again (identity/confirmation.py).
    confirmed_at = models.DateTimeField(null=True, blank=True)
    # The provider groups at that moment (cluster allowed_groups are checked against them).
    groups = models.JSONField(default=list, blank=True)
    # The provider's refresh token (encrypted with common.crypto), to confirm again unattended.
    refresh_token_encrypted = models.TextField(blank=True, editable=False)
    # The provider's user name claim at the last sign-in (PORTAL_OIDC_USERNAME_CLAIM), which
    # may differ from the portal user's name: what the provider's account API is asked
    # about (identity/accounts.py), and when it last answered for this identity.
    provider_username = models.CharField(max_length=255, blank=True, db_default="")
    account_checked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "identities"
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="one_user_per_subject")
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer} ({self.user})"

    @classmethod
    def groups_of(cls, user) -> frozenset[str] | None:
        """The person's provider groups as of their last sign-in (none for a person who
        never signed in through it); None with OIDC sign-in off, where no group rule
        applies. What a cluster's allowed_groups is checked against outside a sign-in."""
        if not settings.PORTAL_OIDC_ISSUER:
            return None
        groups: set[str] = set()
        for value in cls.objects.filter(user=user).values_list("groups", flat=True):
            if isinstance(value, list):
                groups.update(g for g in value if isinstance(g, str))
        return frozenset(groups)


# Models of this app kept under the app label ``jobs`` (their tables keep their names):
# registered when the app's models load.
from identity.audit.models import AuditEvent  # noqa: E402
from identity.tokens import ApiToken  # noqa: E402

__all__ = ["ApiToken", "AuditEvent", "Identity"]
