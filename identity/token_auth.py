"""DRF authentication, scopes and throttling for the API.

Two kinds of bearer token: the portal's personal tokens (``pp_…``, identity.tokens.ApiToken)
and, with OIDC sign-in on, JWT access tokens from the same provider (audience
PORTAL_OIDC_API_AUDIENCE, checked against its JWKS; never an id token) for a person who has
signed in before, with the browser's allowed-group, staff and acr/amr rules applied to the
token's own claims. With OIDC on, either kind works only while its person's confirmation
by the provider is current (identity/confirmation.py).
Either carries scopes; ``HasTokenScope`` lets GET/HEAD/OPTIONS through with ``read`` and
every other method with ``submit``; staff powers need ``admin`` (projects/access.py).
"""

from __future__ import annotations

import logging

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions

from common.throttle import WindowThrottle
from identity import confirmation, provider
from identity.tokens import ADMIN, PREFIX, READ, SUBMIT, ApiToken

log = logging.getLogger(__name__)


def bearer_token(request) -> str | None:
    header = authentication.get_authorization_header(request).decode(errors="replace")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = token.strip()
    if not token:
        raise exceptions.AuthenticationFailed("The Authorization header has no token.")
    return token


def with_scopes(user, scopes: frozenset[str]):
    """The request's user carries its token's scopes (projects/access.py reads them)."""
    user.api_scopes = scopes if user.is_staff else scopes - {ADMIN}
    return user


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer pp_…``; ``request.auth`` is the ApiToken row."""

    keyword = "bearer"

    def authenticate(self, request):
        token = bearer_token(request)
        if token is None:
            return None
        if not token.startswith(PREFIX) and provider.enabled():
            return None  # a provider's access token: ProviderTokenAuthentication's
        row = ApiToken.authenticate(token)
        if row is None:
            raise exceptions.AuthenticationFailed(
                "This token is not valid: it is unknown, revoked or expired."
            )
        require_confirmed(row.user)
        return with_scopes(row.user, row.scope_set), row

    def authenticate_header(self, request):
        return 'Bearer realm="api"'


def require_confirmed(user) -> None:
    stale = confirmation.stale(user)
    if stale is not None:
        raise exceptions.AuthenticationFailed(stale)


class HasTokenScope(permissions.BasePermission):
    """Reading needs the read scope, anything else the submit scope (a signed-in browser
    session holds every scope its user may have)."""

    message = "This token's scopes do not allow this request."

    def has_permission(self, request, view):
        scopes = getattr(request.auth, "scope_set", None)
        if scopes is None:
            return True
        needed = READ if request.method in permissions.SAFE_METHODS else SUBMIT
        if needed in scopes:
            return True
        self.message = f"This token lacks the {needed} scope this request needs."
        return False


class TokenRateThrottle(WindowThrottle):
    """One budget per token (or per signed-in browser user)."""

    scope = "api"

    def get_cache_key(self, request, view):
        if isinstance(request.auth, ApiToken):
            # The hash, not the row id: ids can come back (SQLite reuses a deleted max id).
            ident = f"token-{request.auth.token_hash[:24]}"
        elif request.user and request.user.is_authenticated:
            ident = f"user-{request.user.pk}"
        else:
            ident = self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """How the schema documents the token (drf-spectacular discovers it on import)."""

    target_class = "identity.token_auth.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A personal API token (pp_…) with scopes read (GET), submit "
            "(every other method) and admin (staff only: a staff member's powers).",
        }
