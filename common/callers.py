"""No one caller fills a web process's thread pool: at most PORTAL_WEB_CALLER_THREADS of
one caller's requests are in the pool (running or queued for a thread) at once, per
process; the rest wait their turn on the event loop, where waiting holds no thread and
puts no one else's request behind them.

A caller is what the request says it is before any view runs: its API token (the
Authorization header), else its session cookie, else its client address. One person
with a browser session and a token is two callers, each bounded; what a person may do
with many is bounded again by the per-person cluster places (clusters/share.py)
and the rates (common/throttle.py). Static files are served without a turn (WhiteNoise
answers them from memory).

Measured by tests/devcluster/test_one_person_at_once.py: hpcuser2's 110 requests at once
(40 of them waiting on a hanging login) put demo's page 2.2 s behind them before, under
2 s after.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from django.conf import settings
from django.http import parse_cookie


def caller_of(scope: dict) -> str:
    """Who the request says it is: a hash of its token or session, else its address."""
    headers = dict(scope.get("headers", ()))
    credential = headers.get(b"authorization")
    if credential:
        return "token:" + hashlib.sha256(credential).hexdigest()[:24]
    cookie = headers.get(b"cookie")
    if cookie:
        session = parse_cookie(cookie.decode("latin-1")).get(settings.SESSION_COOKIE_NAME)
        if session:
            return "session:" + hashlib.sha256(session.encode()).hexdigest()[:24]
    client = scope.get("client") or ("-", 0)
    return f"address:{client[0]}"


def exempt(scope: dict) -> bool:
    return str(scope.get("path", "")).startswith("/" + settings.STATIC_URL.lstrip("/"))


class Turns:
    """One process's turns: a semaphore per caller with requests in flight (dropped when
    its last request ends, so the table holds only callers active now)."""

    def __init__(self, most: int) -> None:
        self.most = most
        self._gates: dict[str, tuple[asyncio.Semaphore, int]] = {}

    @asynccontextmanager
    async def turn(self, scope: dict) -> AsyncIterator[None]:
        if exempt(scope):
            yield
            return
        key = caller_of(scope)
        gate, users = self._gates.get(key) or (asyncio.Semaphore(self.most), 0)
        self._gates[key] = (gate, users + 1)
        try:
            async with gate:
                yield
        finally:
            gate, users = self._gates[key]
            if users <= 1:
                del self._gates[key]
            else:
                self._gates[key] = (gate, users - 1)
