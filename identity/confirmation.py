"""Is this person's word from the identity provider current? The one place that decides.

With OIDC sign-in on, a person may act in the portal (API tokens of either kind, a browser
session, cluster actions) only while the provider vouched for them within
PORTAL_OIDC_CONFIRM_MAX_AGE seconds: at a sign-in, or when a refresh token's answer still
lists them in the allowed groups (tasks.reconfirm_identities). Someone removed or disabled
at the provider thus loses access within that age, even if they never sign in again.

Always current: everyone while OIDC is off, and the emergency admins of
PORTAL_LOCAL_LOGIN_USERS who have no identity at the provider (they sign in with a password).
Anyone else without an identity (a local account from before OIDC was turned on) is not.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Max
from django.utils import timezone

from identity import signals
from identity.models import Identity


def _enabled() -> bool:
    return bool(settings.PORTAL_OIDC_ISSUER)


def confirmed_at(user) -> datetime | None:
    """When the provider last vouched for ``user`` (the newest of their identities)."""
    return Identity.objects.filter(user=user).aggregate(at=Max("confirmed_at"))["at"]


def is_current(user) -> bool:
    """True when ``user`` may act now as far as the provider's confirmation goes."""
    if not _enabled() or user is None or not getattr(user, "pk", None):
        return True
    at = confirmed_at(user)
    if at is None:
        # No identity at all: only the emergency admins sign in without the provider.
        local = user.get_username() in settings.PORTAL_LOCAL_LOGIN_USERS
        return local and not Identity.objects.filter(user=user).exists()
    return timezone.now() - at <= timedelta(seconds=settings.PORTAL_OIDC_CONFIRM_MAX_AGE)


def stale(user) -> str | None:
    """None when ``user``'s confirmation is current, else the message that says why not."""
    if is_current(user):
        return None
    hours = settings.PORTAL_OIDC_CONFIRM_MAX_AGE / 3600
    age = f"{hours:g} hours" if hours >= 1 else f"{settings.PORTAL_OIDC_CONFIRM_MAX_AGE} seconds"
    return (
        f"{user.get_username()}'s sign-in at the identity provider is older than {age} "
        "(or was ended there): sign in to the portal again."
    )


def stale_user_id(user_id: int | None) -> str | None:
    """``stale`` for a user id (a cluster account's owner, None for a service account);
    no query while OIDC is off."""
    if not _enabled() or user_id is None:
        return None
    user = get_user_model().objects.filter(pk=user_id).first()
    return stale(user) if user is not None else None


class Stale(Exception):
    """The person's confirmation is not current; the message says so."""


def require(user) -> None:
    """Stale (with the message) unless ``user``'s confirmation is current."""
    message = stale(user)
    if message is not None:
        raise Stale(message)


def confirm(identity_id: int, groups: list[str]) -> None:
    """The provider vouched for this identity just now, in these groups."""
    Identity.objects.filter(pk=identity_id).update(confirmed_at=timezone.now(), groups=groups)


def unconfirm(user) -> None:
    """The provider no longer vouches for ``user`` (a logout there, a withdrawal)."""
    Identity.objects.filter(user=user).update(confirmed_at=None)
    signals.withdrawn.send(sender=Identity, user=user)


def current_ids(user_ids) -> set[int]:
    """Those of ``user_ids`` whose confirmation is current (``is_current``, in two
    queries for any number of people)."""
    ids = set(user_ids)
    if not _enabled() or not ids:
        return ids
    newest = dict(
        Identity.objects.filter(user_id__in=ids)
        .values_list("user_id")
        .annotate(at=Max("confirmed_at"))
        .values_list("user_id", "at")
    )
    since = timezone.now() - timedelta(seconds=settings.PORTAL_OIDC_CONFIRM_MAX_AGE)
    current = {uid for uid, at in newest.items() if at is not None and at >= since}
    local = set(settings.PORTAL_LOCAL_LOGIN_USERS)
    if local:
        without = ids - set(newest)
        current |= set(
            get_user_model()
            .objects.filter(pk__in=without, username__in=local)
            .values_list("pk", flat=True)
        )
    return current


def due_for_refresh():
    """Identities with a refresh token whose confirmation is half its age or more."""
    half = timedelta(seconds=settings.PORTAL_OIDC_CONFIRM_MAX_AGE / 2)
    return (
        Identity.objects.exclude(refresh_token_encrypted="")
        .filter(user__is_active=True, confirmed_at__lt=timezone.now() - half)
        .select_related("user")
    )


def end_sessions(user) -> None:
    """Every browser session of ``user`` ends at its next request: Django keeps a hash of
    the password in each session and drops a session whose hash no longer matches, so a new
    unusable password ends them all without finding them. Only for people who sign in
    through the provider (their password is never used while OIDC is on)."""
    if Identity.objects.filter(user=user).exists():
        user.set_unusable_password()
        user.save(update_fields=["password"])
