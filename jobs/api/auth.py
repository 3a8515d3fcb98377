"""DRF authentication, scopes and throttling for the API.

Two kinds of bearer token: the portal's personal tokens (``pp_…``, jobs.models.ApiToken)
and, with OIDC sign-in on, JWT access tokens from the same provider (audience
PORTAL_OIDC_API_AUDIENCE, checked against its JWKS; never an id token) for a person who has
signed in before, with the browser's allowed-group, staff and acr/amr rules applied to the
token's own claims. With OIDC on, either kind works only while its person's confirmation
by the provider is current (portal/identity/confirmation.py).
Either carries scopes; ``HasTokenScope`` lets GET/HEAD/OPTIONS through with ``read`` and
every other method with ``submit``; staff powers need ``admin`` (jobs/access.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import requests
from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from joserfc.errors import JoseError
from rest_framework import authentication, exceptions, permissions, throttling

from jobs.models import ApiToken
from jobs.models.tokens import ADMIN, PREFIX, READ, SUBMIT
from portal.identity import confirmation, mapping, provider
from portal.identity.models import Identity

log = logging.getLogger(__name__)

# A provider access token's `scope` claim grants these portal scopes; none of them: read.
PROVIDER_SCOPES = {"portal:read": READ, "portal:submit": SUBMIT, "portal:admin": ADMIN}


def _bearer(request) -> str | None:
    header = authentication.get_authorization_header(request).decode(errors="replace")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = token.strip()
    if not token:
        raise exceptions.AuthenticationFailed("The Authorization header has no token.")
    return token


def _with_scopes(user, scopes: frozenset[str]):
    """The request's user carries its token's scopes (jobs/access.py reads them)."""
    user.api_scopes = scopes if user.is_staff else scopes - {ADMIN}
    return user


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer pp_…``; ``request.auth`` is the ApiToken row."""

    keyword = "bearer"

    def authenticate(self, request):
        token = _bearer(request)
        if token is None:
            return None
        if not token.startswith(PREFIX) and provider.enabled():
            return None  # a provider's access token: ProviderTokenAuthentication's
        row = ApiToken.authenticate(token)
        if row is None:
            raise exceptions.AuthenticationFailed(
                "This token is not valid: it is unknown, revoked or expired."
            )
        _require_confirmed(row.user)
        return _with_scopes(row.user, row.scope_set), row

    def authenticate_header(self, request):
        return 'Bearer realm="api"'


def _require_confirmed(user) -> None:
    stale = confirmation.stale(user)
    if stale is not None:
        raise exceptions.AuthenticationFailed(stale)


@dataclass(frozen=True)
class ProviderToken:
    """``request.auth`` for a provider's JWT access token."""

    subject: str
    scope_set: frozenset[str]
    claims: dict


class ProviderTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer <JWT>`` from the OIDC provider (PORTAL_OIDC_ISSUER), for an
    active portal user who has signed in with that provider before."""

    def authenticate(self, request):
        if not provider.enabled():
            return None
        token = _bearer(request)
        if token is None or token.startswith(PREFIX):
            return None
        try:
            claims = provider.verify_access_token(token)
        except (JoseError, ValueError) as exc:
            log.info("provider access token refused: %s", exc)
            raise exceptions.AuthenticationFailed(
                "This access token is not valid here (signature, issuer, audience or expiry)."
            ) from None
        except (provider.ProviderError, requests.RequestException) as exc:
            log.warning("provider keys unavailable: %s", exc)
            raise exceptions.AuthenticationFailed(
                "The identity provider's keys cannot be fetched; try again later."
            ) from None
        identity = (
            Identity.objects.select_related("user")
            .filter(issuer=claims["iss"], subject=claims["sub"], user__is_active=True)
            .first()
        )
        if identity is None:
            raise exceptions.AuthenticationFailed(
                "No active portal user for this token; sign in to the portal once first."
            )
        user = _as_token_says(identity.user, claims)
        _require_confirmed(user)
        granted = claims.get("scope", "")
        names = granted.split() if isinstance(granted, str) else []
        scopes = frozenset(PROVIDER_SCOPES[n] for n in names if n in PROVIDER_SCOPES) or {READ}
        auth = ProviderToken(str(claims["sub"]), frozenset(scopes), claims)
        return _with_scopes(user, auth.scope_set), auth

    def authenticate_header(self, request):
        return 'Bearer realm="api"'


def _as_token_says(user, claims: dict):
    """The browser's rules on the token's own claims: how strongly the person signed in
    (acr/amr), one of the allowed groups, and staff or superuser only if the token's groups
    say so (for this request: the row is not changed)."""
    try:
        mapping.check_authentication(
            claims, settings.PORTAL_OIDC_REQUIRE_ACR, settings.PORTAL_OIDC_REQUIRE_AMR
        )
    except mapping.Refused as exc:
        raise exceptions.AuthenticationFailed(str(exc)) from None
    groups = mapping.groups(claims.get(settings.PORTAL_OIDC_GROUPS_CLAIM))
    if not mapping.in_any(groups, settings.PORTAL_OIDC_ALLOWED_GROUPS):
        raise exceptions.AuthenticationFailed(
            "This access token does not list a group that may use this portal."
        )
    superuser, staff = mapping.flags(
        groups, settings.PORTAL_OIDC_STAFF_GROUPS, settings.PORTAL_OIDC_SUPERUSER_GROUPS
    )
    user.is_superuser = user.is_superuser and superuser
    user.is_staff = user.is_staff and staff
    return user


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


class TokenRateThrottle(throttling.SimpleRateThrottle):
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

    target_class = "jobs.api.auth.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A personal API token (pp_…) with scopes read (GET), submit "
            "(every other method) and admin (staff only: a staff member's powers).",
        }


class ProviderTokenScheme(OpenApiAuthenticationExtension):
    target_class = "jobs.api.auth.ProviderTokenAuthentication"
    name = "providerJwt"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "JWT",
            "description": "With OIDC sign-in on: an access token (JWT) from the portal's "
            "identity provider whose audience is the portal, for someone who has signed in "
            "once. Its scope claim grants portal:read, portal:submit, portal:admin "
            "(none of them: read only).",
        }
