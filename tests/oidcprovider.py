"""A small OpenID Connect provider for tests: a thread serving discovery, a JWKS, an
authorization endpoint that signs everyone in at once, a token endpoint (client secret and
PKCE checked) and an end-session endpoint, over real HTTP with real keys (joserfc).

A test changes what it answers through attributes: ``claims`` (the person), ``tweak``
(claims changed after the standard ones are set: another aud, an old exp), ``signing_key``
(a key the JWKS may not publish), ``published`` (the JWKS), ``replay`` (an id token to send
whatever the request).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from joserfc import jws, jwt
from joserfc.jwk import ECKey, RSAKey

CLIENT_ID = "hpc-portal"
CLIENT_SECRET = "test-secret-" + "x" * 20


def rsa_key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig"})


def ec_key(kid: str) -> ECKey:
    return ECKey.generate_key("P-256", parameters={"kid": kid, "use": "sig"})


def sign(claims: dict, key, alg: str | None = None, typ: str | None = "JWT") -> str:
    alg = alg or ("ES256" if isinstance(key, ECKey) else "RS256")
    if typ is None:  # joserfc's jwt.encode always adds one
        return jws.serialize_compact({"alg": alg, "kid": key.kid}, json.dumps(claims), key)
    return jwt.encode({"alg": alg, "kid": key.kid, "typ": typ}, claims, key)


class Provider:
    def __init__(self) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.reset()

    def reset(self) -> None:
        self.signing_key = rsa_key("key-1")
        self.published: list[RSAKey | ECKey] = [self.signing_key, ec_key("key-ec")]
        self.claims: dict = {
            "sub": "subject-123",
            "preferred_username": "ada",
            "given_name": "Ada",
            "family_name": "Lovelace",
            "email": "ada@example.org",
            "email_verified": True,
            "groups": ["hpc-users"],
        }
        self.tweak: dict = {}
        self.replay: str | None = None
        self.codes: dict[str, dict] = {}
        self.issued: list[str] = []  # id tokens, in order
        self.jwks_fetches = 0
        self.authorize_requests: list[dict] = []
        # Refresh tokens it accepts (a code exchange gives one) and the opaque access
        # tokens its userinfo endpoint answers for (with ``claims`` as they are then).
        self.refresh_tokens: set[str] = set()
        self.opaque_tokens: set[str] = set()
        self.refreshes = 0

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- what a test calls -------------------------------------------------------------

    def authorize(self, url: str) -> tuple[str, str]:
        """Answer the portal's redirect to the authorization endpoint as a signed-in person
        would: (code, state) for the callback."""
        query = {k: v[0] for k, v in parse_qs(urlparse(url).query).items()}
        assert url.startswith(self.issuer + "/authorize?"), url
        assert query["client_id"] == CLIENT_ID and query["response_type"] == "code"
        assert query["code_challenge_method"] == "S256" and query["code_challenge"]
        self.authorize_requests.append(query)
        code = secrets.token_urlsafe(16)
        self.codes[code] = query
        return code, query["state"]

    def access_token(self, typ: str | None = "at+jwt", **claims) -> str:
        """A JWT access token for the API (header typ ``typ``), signed with ``signing_key``."""
        now = int(time.time())
        body = {
            "iss": self.issuer,
            "sub": self.claims["sub"],
            "aud": CLIENT_ID,
            "iat": now,
            "exp": now + 300,
            "scope": "openid portal:read portal:submit",
        }
        body.update(claims)
        return sign({k: v for k, v in body.items() if v is not None}, self.signing_key, typ=typ)

    def logout_token(self, **claims) -> str:
        """A back-channel logout token for the portal, signed with ``signing_key``."""
        now = int(time.time())
        body = {
            "iss": self.issuer,
            "aud": CLIENT_ID,
            "sub": self.claims["sub"],
            "iat": now,
            "jti": secrets.token_urlsafe(12),
            "events": {"http://schemas.openid.net/event/backchannel-logout": {}},
        }
        body.update(claims)
        return sign({k: v for k, v in body.items() if v is not None}, self.signing_key)

    def _opaque(self) -> str:
        token = secrets.token_urlsafe(24)
        self.opaque_tokens.add(token)
        return token

    # --- the endpoints -----------------------------------------------------------------

    def _id_token(self, request: dict) -> str:
        if self.replay is not None:
            return self.replay
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "aud": CLIENT_ID,
            "iat": now,
            "exp": now + 300,
            "nonce": request.get("nonce"),
            **self.claims,
        }
        claims.update(self.tweak)
        token = sign({k: v for k, v in claims.items() if v is not None}, self.signing_key)
        self.issued.append(token)
        return token

    def _token(self, form: dict, authorization: str) -> tuple[int, dict]:
        if authorization.startswith("Basic "):
            client_id, _, secret = base64.b64decode(authorization[6:]).decode().partition(":")
        else:
            client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        if client_id != CLIENT_ID or secret != CLIENT_SECRET:
            return 401, {"error": "invalid_client"}
        if form.get("grant_type") == "refresh_token":
            self.refreshes += 1
            if form.get("refresh_token") not in self.refresh_tokens:
                return 400, {"error": "invalid_grant"}
            return 200, {"access_token": self._opaque(), "token_type": "Bearer", "expires_in": 300}
        request = self.codes.pop(form.get("code", ""), None)
        if request is None or form.get("redirect_uri") != request["redirect_uri"]:
            return 400, {"error": "invalid_grant"}
        verifier = form.get("code_verifier", "")
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
        if challenge.rstrip(b"=").decode() != request["code_challenge"]:
            return 400, {"error": "invalid_grant", "error_description": "PKCE"}
        refresh = "rt-" + secrets.token_urlsafe(16)
        self.refresh_tokens.add(refresh)
        return 200, {
            "access_token": self._opaque(),
            "token_type": "Bearer",
            "expires_in": 300,
            "id_token": self._id_token(request),
            "refresh_token": refresh,
        }

    def _handler(self):
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                path = urlparse(self.path).path
                if path == "/.well-known/openid-configuration":
                    base = provider.issuer
                    self._send(
                        200,
                        {
                            "issuer": base,
                            "authorization_endpoint": base + "/authorize",
                            "token_endpoint": base + "/token",
                            "jwks_uri": base + "/jwks",
                            "end_session_endpoint": base + "/logout",
                            "userinfo_endpoint": base + "/userinfo",
                            "response_types_supported": ["code"],
                            "subject_types_supported": ["public"],
                            "id_token_signing_alg_values_supported": ["RS256", "ES256"],
                            "code_challenge_methods_supported": ["S256"],
                        },
                    )
                elif path == "/userinfo":
                    bearer = self.headers.get("Authorization", "").removeprefix("Bearer ")
                    if bearer in provider.opaque_tokens:
                        self._send(200, dict(provider.claims))
                    else:
                        self._send(401, {"error": "invalid_token"})
                elif path == "/jwks":
                    provider.jwks_fetches += 1
                    keys = [k.as_dict(private=False) for k in provider.published]
                    self._send(200, {"keys": keys})
                else:
                    self._send(404, {"error": "not_found"})

            def do_POST(self) -> None:
                if urlparse(self.path).path != "/token":
                    self._send(404, {"error": "not_found"})
                    return
                length = int(self.headers.get("Content-Length", "0"))
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                status, body = provider._token(form, self.headers.get("Authorization", ""))
                self._send(status, body)

        return Handler


@contextmanager
def portal_uses(provider: Provider, settings, **more) -> Iterator[Provider]:
    """OIDC on in this test's settings, pointed at ``provider`` (reset, its keys forgotten
    by the portal before and after); ``more``: further PORTAL_OIDC_* settings."""
    from identity import provider as portal_provider

    provider.reset()
    portal_provider.forget_keys()
    settings.PORTAL_OIDC_ISSUER = provider.issuer
    settings.PORTAL_OIDC_CLIENT_ID = CLIENT_ID
    settings.PORTAL_OIDC_CLIENT_SECRET = CLIENT_SECRET
    for name, value in more.items():
        setattr(settings, name, value)
    try:
        yield provider
    finally:
        portal_provider.forget_keys()


def sign_in(provider: Provider):
    """A browser (Django's test client) signed in through ``provider`` as its claims say:
    /oidc/login/, the provider's answer, /oidc/callback/."""
    from django.test import Client

    client = Client()
    start = client.get("/oidc/login/")
    code, state = provider.authorize(start["Location"])
    assert client.get("/oidc/callback/", {"code": code, "state": state}).status_code == 302
    assert "_auth_user_id" in client.session
    return client
