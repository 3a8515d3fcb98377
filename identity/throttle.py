"""Sign-in throttling: after PORTAL_SIGNIN_FAILURES failed sign-ins for one user name (or
five times that from one address) within PORTAL_SIGNIN_WINDOW seconds, further attempts
are refused until the window has passed, whatever the password.

``SignInThrottle`` is the first authentication backend (as django-axes does it): it raises
PermissionDenied for a locked name or address, which stops ``authenticate()`` for every
backend behind it (the admin's login, the portal's, LDAP if configured). Failures are
counted from Django's ``user_login_failed`` signal, so every backend's refusals count.
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.dispatch import receiver

LOCKED_MESSAGE = "Too many failed sign-ins; try again in {minutes} minutes."


def _keys(request, username: str | None) -> list[tuple[str, int]]:
    """(cache key, limit) for the user name and for the client address."""
    limit = settings.PORTAL_SIGNIN_FAILURES
    keys = []
    if username:
        digest = hashlib.sha256(username.strip().lower().encode()).hexdigest()[:32]
        keys.append((f"signin-fail:user:{digest}", limit))
    address = request.META.get("REMOTE_ADDR", "") if request is not None else ""
    if address:
        keys.append((f"signin-fail:addr:{address}", limit * 5))
    return keys


def is_locked(request, username: str | None) -> bool:
    return any((cache.get(key) or 0) >= limit for key, limit in _keys(request, username))


def locked_message() -> str:
    return LOCKED_MESSAGE.format(minutes=max(1, settings.PORTAL_SIGNIN_WINDOW // 60))


@receiver(user_login_failed)
def count_failure(sender, credentials, request=None, **kwargs) -> None:
    for key, _ in _keys(request, credentials.get("username")):
        # add() starts the window; incr() never extends it.
        if not cache.add(key, 1, timeout=settings.PORTAL_SIGNIN_WINDOW):
            try:
                cache.incr(key)
            except ValueError:  # expired between add() and incr()
                cache.add(key, 1, timeout=settings.PORTAL_SIGNIN_WINDOW)


class SignInThrottle:
    """Authentication backend that authenticates no one and refuses locked attempts. It has
    no get_user(), so Django never records it as the backend of a session."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if is_locked(request, username or kwargs.get("email")):
            raise PermissionDenied(locked_message())
        return None
