"""The identity provider as the portal sees it, all through Authlib / joserfc.

- ``client()``: Authlib's Django OAuth 2 app for the settings of the moment (discovery from
  ``<issuer>/.well-known/openid-configuration``, PKCE S256, state and nonce kept in the
  session). Authlib checks the id token's signature against the provider's JWKS (fetched
  again when a token names an unknown key), its nonce, exp/iat with the leeway, and the
  iss/aud options ``id_token_options()`` gives it.
- ``verify_access_token()``: a JWT access token sent to the API, checked against the same
  JWKS (cached; refetched for an unknown key at most every JWKS_REFETCH seconds).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import requests
from authlib.integrations.django_client import (  # type: ignore[import-untyped]
    DjangoIntegration,
    DjangoOAuth2App,
)
from django.conf import settings
from joserfc import jwt
from joserfc.errors import InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet

# Asymmetric algorithms only: never "none", never HS* (the JWKS is public).
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"]
HTTP_TIMEOUT = 10.0
JWKS_TTL = 3600.0  # keys are fetched again after this long anyway
JWKS_REFETCH = 30.0  # an unknown key id refetches at most this often (a flood stays bounded)


def enabled() -> bool:
    return bool(settings.PORTAL_OIDC_ISSUER)


def discovery_url(issuer: str) -> str:
    return issuer.rstrip("/") + "/.well-known/openid-configuration"


class ProviderError(Exception):
    """The provider's metadata or keys could not be used."""


class PortalOIDCApp(DjangoOAuth2App):
    """Authlib's app with the provider's metadata checked: its issuer must be the configured
    one, and id tokens are accepted with asymmetric algorithms only."""

    def load_server_metadata(self):
        loaded = "_loaded_at" in self.server_metadata
        metadata = super().load_server_metadata()
        if not loaded:
            if metadata.get("issuer", "").rstrip("/") != settings.PORTAL_OIDC_ISSUER:
                self.server_metadata.clear()
                raise ProviderError("the provider's discovery document names another issuer")
            offered = metadata.get("id_token_signing_alg_values_supported") or ["RS256"]
            metadata["id_token_signing_alg_values_supported"] = [
                alg for alg in offered if alg in ALGORITHMS
            ] or ["RS256"]
        return metadata


_clients: dict[tuple, PortalOIDCApp] = {}
_lock = threading.Lock()


def client() -> PortalOIDCApp:
    """The Authlib app for the current settings (tests override them: one app per set)."""
    key = (
        settings.PORTAL_OIDC_ISSUER,
        settings.PORTAL_OIDC_CLIENT_ID,
        settings.PORTAL_OIDC_CLIENT_SECRET,
        settings.PORTAL_OIDC_SCOPES,
    )
    with _lock:
        if key not in _clients:
            _clients[key] = PortalOIDCApp(
                DjangoIntegration("portal"),
                "portal",
                client_id=settings.PORTAL_OIDC_CLIENT_ID,
                client_secret=settings.PORTAL_OIDC_CLIENT_SECRET,
                server_metadata_url=discovery_url(settings.PORTAL_OIDC_ISSUER),
                client_kwargs={
                    "scope": settings.PORTAL_OIDC_SCOPES,
                    "code_challenge_method": "S256",
                    "default_timeout": HTTP_TIMEOUT,
                },
            )
        return _clients[key]


def id_token_options() -> dict:
    """Authlib's claims options for id tokens: the configured issuer, this client as an
    audience (Authlib on its own checks neither against our settings)."""
    return {
        "iss": {"essential": True, "value": settings.PORTAL_OIDC_ISSUER},
        "aud": {"essential": True, "value": settings.PORTAL_OIDC_CLIENT_ID},
        "sub": {"essential": True},
        "exp": {"essential": True},
    }


# --- Access tokens for the API -----------------------------------------------------------


@dataclass
class _Keys:
    keys: KeySet | None = None
    fetched_at: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)


_keys: dict[str, _Keys] = {}


def _fetch_key_set(issuer: str) -> KeySet:
    try:
        metadata = requests.get(discovery_url(issuer), timeout=HTTP_TIMEOUT)
        metadata.raise_for_status()
        jwks_uri = metadata.json()["jwks_uri"]
        jwks = requests.get(jwks_uri, timeout=HTTP_TIMEOUT)
        jwks.raise_for_status()
        return KeySet.import_key_set(jwks.json())
    except (requests.RequestException, ValueError, KeyError, TypeError, JoseError) as exc:
        raise ProviderError(f"the provider's keys could not be fetched: {exc}") from None


def key_set(issuer: str, *, unknown_kid: bool = False) -> KeySet:
    """The provider's keys: cached for JWKS_TTL, refetched for an unknown key id when the
    last fetch is older than JWKS_REFETCH (so made-up key ids cannot flood the provider)."""
    entry = _keys.setdefault(issuer, _Keys())
    with entry.lock:
        age = time.monotonic() - entry.fetched_at
        stale = entry.keys is None or age > JWKS_TTL or (unknown_kid and age > JWKS_REFETCH)
        if stale:
            entry.keys = _fetch_key_set(issuer)
            entry.fetched_at = time.monotonic()
        assert entry.keys is not None
        return entry.keys


def forget_keys() -> None:
    """Tests: start from no cached keys."""
    _keys.clear()
    _clients.clear()


# RFC 9068 access tokens say so in their header; other providers send "JWT" or nothing.
ACCESS_TOKEN_TYPES = {"at+jwt", "application/at+jwt"}


def _decode(token: str):
    issuer = settings.PORTAL_OIDC_ISSUER
    try:
        return jwt.decode(token, key_set(issuer), algorithms=ALGORITHMS)
    except InvalidKeyIdError:
        return jwt.decode(token, key_set(issuer, unknown_kid=True), algorithms=ALGORITHMS)


def verify_access_token(token: str) -> dict:
    """The claims of a provider-issued JWT access token meant for this portal; JoseError,
    ValueError or ProviderError when it is not (signature, unknown key, iss, aud, exp/nbf
    with leeway; an id token: a ``nonce`` claim, or a ``typ`` header other than at+jwt)."""
    issuer = settings.PORTAL_OIDC_ISSUER
    audience = settings.PORTAL_OIDC_API_AUDIENCE
    if not audience or audience == settings.PORTAL_OIDC_CLIENT_ID:
        raise ValueError("no API audience is set apart from the client id")
    decoded = _decode(token)
    typ = decoded.header.get("typ")
    if typ is not None and str(typ).lower() not in ACCESS_TOKEN_TYPES:
        raise ValueError(f"a token of type {typ!r} is not an access token")
    if "nonce" in decoded.claims:
        raise ValueError("an id token (it has a nonce) is not an access token")
    jwt.JWTClaimsRegistry(
        leeway=settings.PORTAL_OIDC_LEEWAY,
        iss={"essential": True, "value": issuer},
        aud={"essential": True, "value": audience},
        sub={"essential": True},
        exp={"essential": True},
    ).validate(decoded.claims)
    return decoded.claims


# --- Back-channel logout (OpenID Connect Back-Channel Logout 1.0) -------------------------

LOGOUT_EVENT = "http://schemas.openid.net/event/backchannel-logout"
LOGOUT_TOKEN_MAX_AGE = 300  # seconds: an older logout token (iat) is refused


def verify_logout_token(token: str) -> dict:
    """The claims of a logout token the provider POSTed to /oidc/backchannel-logout/;
    JoseError, ValueError or ProviderError when it is not one: signed with the provider's
    keys, its issuer, this client as audience, a recent iat (exp too when present), the
    back-channel logout event, a sub or sid, a jti, and no nonce (so no id token passes)."""
    decoded = _decode(token)
    claims = decoded.claims
    jwt.JWTClaimsRegistry(
        leeway=settings.PORTAL_OIDC_LEEWAY,
        iss={"essential": True, "value": settings.PORTAL_OIDC_ISSUER},
        aud={"essential": True, "value": settings.PORTAL_OIDC_CLIENT_ID},
        iat={"essential": True},
        jti={"essential": True},
    ).validate(claims)
    now = time.time()
    iat = claims["iat"]
    if not isinstance(iat, int | float) or not (
        now - LOGOUT_TOKEN_MAX_AGE - settings.PORTAL_OIDC_LEEWAY
        <= iat
        <= now + settings.PORTAL_OIDC_LEEWAY
    ):
        raise ValueError("the logout token's iat is not recent")
    events = claims.get("events")
    if not isinstance(events, dict) or not isinstance(events.get(LOGOUT_EVENT), dict):
        raise ValueError("the token carries no back-channel logout event")
    if "nonce" in claims:
        raise ValueError("a logout token has no nonce")
    if not isinstance(claims.get("sub"), str) and not isinstance(claims.get("sid"), str):
        raise ValueError("the logout token names neither sub nor sid")
    return claims


# --- Refresh tokens --------------------------------------------------------------------


class RefreshRefused(Exception):
    """The provider refused the refresh token (revoked, expired, its person disabled)."""


def refresh_userinfo(refresh_token: str) -> tuple[dict, str | None]:
    """Ask the provider again about the person behind ``refresh_token``: the refresh grant
    at its token endpoint, then its userinfo endpoint with the new access token (what the
    provider says now, groups included). (userinfo claims, the rotated refresh token or
    None). RefreshRefused when the provider refuses; ProviderError or
    requests.RequestException when it cannot be asked (every call within HTTP_TIMEOUT)."""
    metadata = client().load_server_metadata()
    token_endpoint, userinfo_endpoint = (
        metadata.get("token_endpoint"),
        metadata.get("userinfo_endpoint"),
    )
    if not token_endpoint or not userinfo_endpoint:
        raise ProviderError("the provider names no token or userinfo endpoint")
    answer = requests.post(
        token_endpoint,
        data={"grant_type": "refresh_token", "refresh_token": refresh_token},
        auth=(settings.PORTAL_OIDC_CLIENT_ID, settings.PORTAL_OIDC_CLIENT_SECRET),
        timeout=HTTP_TIMEOUT,
    )
    if answer.status_code in (400, 401, 403):
        raise RefreshRefused(f"the provider refused the refresh token ({answer.status_code})")
    answer.raise_for_status()
    tokens = answer.json()
    access = tokens.get("access_token") if isinstance(tokens, dict) else None
    if not isinstance(access, str):
        raise ProviderError("the refresh answer has no access token")
    info = requests.get(
        userinfo_endpoint, headers={"Authorization": f"Bearer {access}"}, timeout=HTTP_TIMEOUT
    )
    if info.status_code in (401, 403):
        raise RefreshRefused(f"the provider's userinfo refused the new token ({info.status_code})")
    info.raise_for_status()
    claims = info.json()
    if not isinstance(claims, dict):
        raise ProviderError("the userinfo answer is not an object")
    rotated = tokens.get("refresh_token")
    return claims, rotated if isinstance(rotated, str) else None
