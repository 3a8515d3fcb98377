"""Request budgets for what the API's throttling (identity.token_auth.TokenRateThrottle) does not
cover: the pages that reach a cluster over SSH (logs, files, downloads, experiment data,
opening a session, testing an account), one budget per signed-in user, and the session
registration call a job makes, one budget per session. Counted in the portal's cache
(Redis, keys under PORTAL_CACHE_PREFIX) as DRF counts the API's; over budget is a 429
with Retry-After, before anything reaches a cluster."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from functools import wraps
from typing import Any, cast

from django.conf import settings
from django.core.cache.backends import redis
from django.http import HttpRequest, HttpResponse, JsonResponse
from rest_framework import throttling

# scope -> the setting that holds its rate ("120/min"), read at call time.
RATES = {
    "cluster-pages": "PORTAL_PAGE_CLUSTER_RATE",
    "session-register": "PORTAL_SESSION_REGISTER_RATE",
}


class WindowThrottle(throttling.SimpleRateThrottle):
    """DRF's throttle (its rates, keys and interface), counted in a window that opens at a
    caller's first request: at most the rate's number of requests until the window ends,
    in one round trip to Redis (SET NX EX, INCR and TTL in a pipeline) whatever the rate.

    DRF's own keeps each caller's request times as one list that every request reads,
    trims and writes back whole: 60 to 600 timestamps for a job that uploads metrics every
    second, two round trips, and a tenth of an upload's Python time under
    bench/load_live.py's ingest (py-spy). A cache that is not Redis counts DRF's way."""

    # Not DRF's "throttle_...": a key of DRF's (a list of times) left from before an
    # upgrade would make INCR fail until it expired.
    cache_format = "throttle-window_%(scope)s_%(ident)s"
    ttl = 0
    num_requests: int  # set by SimpleRateThrottle.__init__ from the rate (its stubs omit them)
    duration: int

    def allow_request(self, request, view) -> bool:
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        if not self._on_redis:
            return super().allow_request(request, view)
        backend = cast(Any, self.cache)
        key = backend.make_and_validate_key(self.key)
        pipe = backend._cache.get_client(key, write=True).pipeline(transaction=False)
        pipe.set(key, 0, ex=max(1, int(self.duration)), nx=True)
        pipe.incr(key)
        pipe.ttl(key)
        _, count, self.ttl = pipe.execute()
        return int(count) <= self.num_requests

    def wait(self) -> float | None:
        return float(max(1, self.ttl)) if self._on_redis else super().wait()

    @property
    def _on_redis(self) -> bool:
        # Django's Redis cache (common.cache's included), seen through the default cache's
        # proxy: its client. The local-memory cache's ``_cache`` is a dict.
        return isinstance(getattr(self.cache, "_cache", None), redis.RedisCacheClient)


class Budget(WindowThrottle):
    """The window's count, for one scope and one caller (``ident``)."""

    def __init__(self, scope: str, ident: str):
        self.scope = scope
        self.ident = ident
        super().__init__()

    def get_rate(self) -> str:
        return getattr(settings, RATES[self.scope or ""])

    def get_cache_key(self, request, view) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.ident}


def by_user(request: HttpRequest, *args, **kwargs) -> str:
    return f"user-{request.user.pk}"


def too_many(wait: float, *, json: bool) -> HttpResponse:
    seconds = max(1, math.ceil(wait))
    message = f"Too many requests; try again in {seconds} s."
    response: HttpResponse = (
        JsonResponse({"error": message}, status=429)
        if json
        else HttpResponse(message, status=429, content_type="text/plain; charset=utf-8")
    )
    response["Retry-After"] = str(seconds)
    return response


def over_budget(request: HttpRequest, scope: str, ident: str, *, json: bool) -> HttpResponse | None:
    """Spend one request of ``ident``'s budget in ``scope``: None, or the 429 to answer."""
    budget = Budget(scope, ident)
    if budget.allow_request(cast(Any, request), cast(Any, None)):  # no DRF view here
        return None
    return too_many(budget.wait() or 1, json=json)


def throttled(scope: str, *, ident: Callable[..., str] = by_user, json: bool = False):
    """A view decorator: ``ident(request, *args, **kwargs)`` names whose budget a request
    spends (the signed-in user by default: put it under login_required). ``json``: the
    429 is a JSON {"error": ...} (for views that answer JSON)."""

    def decorate(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            refused = over_budget(request, scope, ident(request, *args, **kwargs), json=json)
            return refused or view(request, *args, **kwargs)

        return wrapper

    return decorate


def digest(value: str) -> str:
    """A short fixed-length cache key part for any text a caller chose (a URL part)."""
    return hashlib.sha256(value.encode(errors="replace")).hexdigest()[:32]
