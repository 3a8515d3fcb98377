"""The API's authentication by the identity provider's own access tokens (JWT, audience
PORTAL_OIDC_API_AUDIENCE, checked against its JWKS; never an id token), for a person who
has signed in before, with the browser's allowed-group, staff and acr/amr rules applied to
the token's own claims. The portal's personal tokens, scopes and throttling are
identity/token_auth.py; this class sits beside them in REST_FRAMEWORK's authentication classes."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import requests
from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from joserfc.errors import JoseError
from rest_framework import authentication, exceptions

from identity import mapping, provider
from identity.models import Identity
from identity.token_auth import bearer_token, require_confirmed, with_scopes
from identity.tokens import ADMIN, PREFIX, READ, SUBMIT

log = logging.getLogger(__name__)

# A provider access token's `scope` claim grants these portal scopes; none of them: read.
PROVIDER_SCOPES = {"portal:read": READ, "portal:submit": SUBMIT, "portal:admin": ADMIN}


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
        token = bearer_token(request)
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
        require_confirmed(user)
        granted = claims.get("scope", "")
        names = granted.split() if isinstance(granted, str) else []
        scopes = frozenset(PROVIDER_SCOPES[n] for n in names if n in PROVIDER_SCOPES) or {READ}
        auth = ProviderToken(str(claims["sub"]), frozenset(scopes), claims)
        return with_scopes(user, auth.scope_set), auth

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


class ProviderTokenScheme(OpenApiAuthenticationExtension):
    target_class = "identity.api_auth.ProviderTokenAuthentication"
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
