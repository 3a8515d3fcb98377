"""DRF authentication and throttling for personal API tokens."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, throttling

from jobs.models import ApiToken


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer pp_…``; ``request.auth`` is the ApiToken row."""

    keyword = "bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode(errors="replace")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != self.keyword:
            return None
        token = token.strip()
        if not token:
            raise exceptions.AuthenticationFailed("The Authorization header has no token.")
        row = ApiToken.authenticate(token)
        if row is None:
            raise exceptions.AuthenticationFailed(
                "This token is not valid: it is unknown, revoked or expired."
            )
        return row.user, row

    def authenticate_header(self, request):
        return 'Bearer realm="api"'


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
        return {"type": "http", "scheme": "bearer", "description": "A personal API token (pp_…)."}
