"""One-time, short-lived codes that hand a signed-in portal user to the proxy."""

from __future__ import annotations

import re
import secrets

from django.conf import settings
from django.core import signing
from django.core.cache import cache

COOKIE_NAME = "portal_session"
_SALT = "proxy.session-cookie"


def issue_code(public_id: str, user_id: int) -> str:
    code = secrets.token_urlsafe(32)
    cache.set(
        f"session-code:{code}", {"session": public_id, "user": user_id}, settings.SESSION_CODE_TTL
    )
    return code


def redeem_code(code: str, public_id: str) -> int | None:
    """The user id, once: a code is deleted on first use and only valid for its session."""
    key = f"session-code:{code}"
    value = cache.get(key)
    if not value or not cache.delete(key):  # only one of two racing redeemers deletes it
        return None
    return value["user"] if value["session"] == public_id else None


def make_cookie(public_id: str, user_id: int) -> str:
    return signing.dumps({"s": public_id, "u": user_id}, salt=_SALT, compress=True)


def read_cookie(value: str, public_id: str) -> int | None:
    """The user id in a valid, unexpired cookie for this session; None otherwise."""
    try:
        data = signing.loads(value, salt=_SALT, max_age=settings.SESSION_COOKIE_MAX_AGE)
    except signing.BadSignature:
        return None
    return data.get("u") if data.get("s") == public_id else None


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
