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


def verify_access_token(token: str) -> dict:
    """The claims of a provider-issued JWT access token meant for this portal; JoseError or
    ProviderError when it is not (signature, unknown key, iss, aud, exp/nbf with leeway)."""
    issuer = settings.PORTAL_OIDC_ISSUER
    try:
        decoded = jwt.decode(token, key_set(issuer), algorithms=ALGORITHMS)
    except InvalidKeyIdError:
        decoded = jwt.decode(token, key_set(issuer, unknown_kid=True), algorithms=ALGORITHMS)
    jwt.JWTClaimsRegistry(
        leeway=settings.PORTAL_OIDC_LEEWAY,
        iss={"essential": True, "value": issuer},
        aud={"essential": True, "value": settings.PORTAL_OIDC_API_AUDIENCE},
        sub={"essential": True},
        exp={"essential": True},
    ).validate(decoded.claims)
    return decoded.claims
