"""How large a request body may be, by route, decided before a byte of it is received.

Django's ASGI handler receives a body whole before any middleware or view runs, spooled to a
temporary file past FILE_UPLOAD_MAX_MEMORY_SIZE: authentication comes after it. So the size
is decided here, at the ASGI entry (portal/serving.py):

- every route takes at most PORTAL_BODY_MAX_BYTES (by default DATA_UPLOAD_MAX_MEMORY_SIZE,
  what Django's ``request.body`` accepts anyway, and no more than fits in memory);
- a view that takes more says how much with :func:`accepts_body` (a tus chunk, an archive
  of runs), and gets it only for a request from someone signed in: a session of a signed-in
  person, or one of the portal's API tokens, checked here before the body is read;
- a Content-Length over the limit is answered 413 at once, unread; a body without one
  (chunked) is counted as it comes and cut at the limit, then answered 413.

HAProxy in front carries a limit of its own (deploy/haproxy), so a body is bounded twice.
"""

from __future__ import annotations

from collections.abc import Callable

from asgiref.sync import sync_to_async
from django.conf import settings
from django.urls import Resolver404, resolve

from common.marks import default_limit


def _route_limit(path: str) -> int | None:
    try:
        match = resolve(path)
    except Resolver404:
        return None
    limit = getattr(match.func, "body_limit", None)
    if limit is None:
        view_class = getattr(match.func, "view_class", None) or getattr(match.func, "cls", None)
        limit = getattr(view_class, "body_limit", None)
    return int(limit()) if limit is not None else None


def _headers(scope: dict) -> dict[bytes, bytes]:
    return {name.lower(): value for name, value in scope.get("headers", ())}


def _signed_in(headers: dict[bytes, bytes]) -> bool:
    """The request carries a session of a signed-in person or a live API token (one
    database read; only asked for a body larger than the default)."""
    from http.cookies import SimpleCookie
    from importlib import import_module

    from django.contrib.auth import SESSION_KEY
    from django.contrib.sessions.backends.base import SessionBase

    authorization = headers.get(b"authorization", b"").decode("latin-1")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        from identity.tokens import PREFIX, ApiToken

        token = token.strip()
        return token.startswith(PREFIX) and ApiToken.authenticate(token) is not None
    cookies: SimpleCookie = SimpleCookie()
    try:
        cookies.load(headers.get(b"cookie", b"").decode("latin-1"))
    except Exception:  # noqa: BLE001 - a malformed cookie header is no session
        return False
    morsel = cookies.get(settings.SESSION_COOKIE_NAME)
    if morsel is None or not morsel.value:
        return False
    store: SessionBase = import_module(settings.SESSION_ENGINE).SessionStore(morsel.value)
    return bool(store.load().get(SESSION_KEY))


async def limit_for(scope: dict) -> int:
    """The most bytes this request's body may have (the route is looked up, and who sends
    it asked, only for a body larger than the default: most requests need neither)."""
    base = default_limit()
    headers = _headers(scope)
    length = declared_length(scope)
    if length is None and b"transfer-encoding" not in headers:
        return base  # no body
    if length is not None and 0 <= length <= base:
        return base  # small enough for anyone
    route = _route_limit(scope.get("path", "/"))
    if route is None or route <= base:
        return base
    if await sync_to_async(_signed_in, thread_sensitive=False)(headers):
        return route
    return base


def declared_length(scope: dict) -> int | None:
    """The body's Content-Length (-1: a value that is no length), None without one."""
    value = _headers(scope).get(b"content-length")
    if value is None:
        return None
    return int(value) if value.isdigit() else -1


async def refuse(send: Callable, limit: int) -> None:
    """413, saying the limit; the connection closes (the rest of the body is not read)."""
    body = (
        f'{{"error": "The request body is larger than this address takes ({limit} bytes)."}}'
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class Counted:
    """``receive`` that counts the body's bytes and, past ``limit``, tells the app the
    client went (it stops reading), remembering that it was cut (``over``)."""

    def __init__(self, receive: Callable, limit: int) -> None:
        self._receive, self._limit = receive, limit
        self.received = 0
        self.over = False

    async def __call__(self) -> dict:
        if self.over:
            return {"type": "http.disconnect"}
        message = await self._receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self._limit:
                self.over = True
                return {"type": "http.disconnect"}
        return message


class Watched:
    """``send`` that remembers whether a response was started."""

    def __init__(self, send: Callable) -> None:
        self._send = send
        self.started = False

    async def __call__(self, message: dict) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)
