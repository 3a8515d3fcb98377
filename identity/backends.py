"""Authentication backends for OIDC sign-in.

``LocalPasswordPolicy`` sits in front of the password backends: while OIDC is on, only
PORTAL_LOCAL_LOGIN_USERS (the emergency admins) may sign in with a password, on the
portal's page and the admin's alike. ``ProviderSessionBackend`` authenticates no
credentials; it is the backend an OIDC sign-in records in the session, so the session
survives whatever password backends the install lists.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied

LOCAL_OFF = "Sign in with your organisation's account; passwords are off on this portal."


def refuses_password(username: str | None) -> bool:
    """OIDC is on and ``username`` is not one of the emergency admins."""
    return bool(settings.PORTAL_OIDC_ISSUER) and username not in settings.PORTAL_LOCAL_LOGIN_USERS


class LocalPasswordPolicy:
    def authenticate(self, request, username=None, password=None, **kwargs):
        if password is not None and refuses_password(username):
            raise PermissionDenied(LOCAL_OFF)
        return None


class ProviderSessionBackend(ModelBackend):
    """Keeps a signed-in session (get_user, permissions); never checks a password."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        return None
