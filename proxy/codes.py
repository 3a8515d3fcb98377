"""One-time, short-lived codes that hand a signed-in portal user to the proxy."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import time

from django.conf import settings
from django.core.cache import cache


def cookie_name() -> str:
    """The session cookie's name: with the ``__Host-`` prefix on HTTPS, so browsers
    accept it only if it is Secure, for Path=/ and bound to the session's own host."""
    return "__Host-portal_session" if settings.PROXY_SESSION_SCHEME == "https" else "portal_session"


# The browser's half of the handshake: a random value the session host sets before it
# sends the browser to the portal; the code the portal issues is bound to it, so a
# login link works only in the browser that asked for it (not in one it is sent to).
STATE_NAME = "portal_state"


def state_cookie_name() -> str:
    return f"__Host-{STATE_NAME}" if settings.PROXY_SESSION_SCHEME == "https" else STATE_NAME


def new_state() -> str:
    return secrets.token_urlsafe(24)


def _state_hash(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


def issue_code(public_id: str, user_id: int, state: str) -> str:
    code = secrets.token_urlsafe(32)
    cache.set(
        f"session-code:{code}",
        {"session": public_id, "user": user_id, "state": _state_hash(state)},
        settings.PROXY_CODE_TTL,
    )
    return code


def redeem_code(code: str, public_id: str, state: str) -> int | None:
    """The user id, once: a code is deleted on first use and only valid for its session
    and in the browser that holds its state."""
    key = f"session-code:{code}"
    value = cache.get(key)
    if not value or not cache.delete(key):  # only one of two racing redeemers deletes it
        return None
    if value["session"] != public_id or not state:
        return None
    return value["user"] if hmac.compare_digest(value["state"], _state_hash(state)) else None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


_JWT_HEADER = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())


def cookie_secret() -> str:
    """The key of the session cookie (HS256), derived from SECRET_KEY: nothing more to
    keep secret, and a new SECRET_KEY signs everyone out of their sessions too. The
    proxy's configuration carries it to verify the cookie (proxy/haproxy.py)."""
    return hmac.new(
        settings.SECRET_KEY.encode(), b"portal-session-cookie", hashlib.sha256
    ).hexdigest()


def _sign(signing_input: str) -> str:
    return _b64(hmac.new(cookie_secret().encode(), signing_input.encode(), hashlib.sha256).digest())


def make_cookie(public_id: str, user_id: int, max_age: int | None = None) -> str:
    """The session cookie: a JWT (HS256) bound to the session, the user and an expiry,
    which the proxy verifies by itself on every request (no portal call)."""
    expires = int(time.time()) + (settings.PROXY_COOKIE_MAX_AGE if max_age is None else max_age)
    payload = {"sid": public_id, "uid": user_id, "exp": expires}
    body = f"{_JWT_HEADER}.{_b64(json.dumps(payload, separators=(',', ':')).encode())}"
    return f"{body}.{_sign(body)}"


_UNSAFE_PATH = re.compile(r"[\\\x00-\x20\x7f]")


def safe_path(value: str, default: str = "/lab") -> str:
    """``value`` if it is a path on the same origin, else ``default``. The one check for
    every "next" that becomes a Location: it must start with a single "/", and holds no
    backslash, control character or space (browsers read "/\\evil.com" as "//evil.com")."""
    if (
        not value
        or not value.startswith("/")
        or value.startswith("//")
        or _UNSAFE_PATH.search(value)
        or len(value) > 2000
    ):
        return default
    return value
