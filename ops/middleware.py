"""Outermost middleware: each HTTP request gets its request id (common/context.py), answered
in ``X-Request-ID``, and is timed for the metrics by its route's name (never its path),
method and status; for a streamed response, the time to its headers."""

from __future__ import annotations

import logging
import time

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.utils.functional import SimpleLazyObject, empty

from common import context
from common import prometheus as metrics

access = logging.getLogger("portal.requests")
QUIET_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def view_label(request) -> str:
    """The request's route name (``app:name`` as Django names it); ``unmatched`` when no
    route took it (a 404 for an unknown path: its path is not a label)."""
    match = getattr(request, "resolver_match", None)
    if match is None:
        return "unmatched"
    return (match.view_name or match._func_path or "unnamed")[:100]


class RequestMetricsMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self._async(request)
        started = time.perf_counter()
        token = context.request_id.set(_id_of(request))
        try:
            response = self.get_response(request)
            _observe(request, response, started)  # (its access line under the id)
        finally:
            context.request_id.reset(token)  # (a pool's thread serves the next request)
        return response

    async def _async(self, request):
        started = time.perf_counter()
        token = context.request_id.set(_id_of(request))
        try:
            response = await self.get_response(request)
            _observe(request, response, started)  # (its access line under the id)
        finally:
            context.request_id.reset(token)
        return response


def _id_of(request) -> str:
    """The id HAProxy gave the request (``X-Request-ID``, where well formed), else a new
    one; kept on the request for the response's header."""
    request.request_id = context.well_formed(request.headers.get("X-Request-ID")) or (
        context.new_id()
    )
    return request.request_id


def _observe(request, response, started: float) -> None:
    """The metrics' observation and the access log's line (the path without its query,
    which may hold secrets); called while the request's id is set."""
    seconds = time.perf_counter() - started
    response["X-Request-ID"] = request.request_id
    method = request.method if request.method in METHODS else "other"
    view = view_label(request)
    metrics.HTTP_REQUEST_SECONDS.labels(view, method, str(response.status_code)).observe(seconds)
    # Health checks (HAProxy asks every second) and scrapes answered well are DEBUG lines.
    quiet = request.path in QUIET_PATHS and response.status_code < 500
    level = logging.DEBUG if quiet else logging.INFO
    if access.isEnabledFor(level):
        user = _user_if_known(request)
        access.log(
            level,
            "%s %s %s %d %.1f ms user=%s",
            method,
            request.path[:300],
            view,
            response.status_code,
            seconds * 1000,
            user.pk if user is not None else "-",
        )


def _user_if_known(request):
    """The signed-in person where the request already looked them up (never a lookup of
    its own: /healthz and static files read no session)."""
    user = request.__dict__.get("user")
    if isinstance(user, SimpleLazyObject):
        user = None if user._wrapped is empty else user._wrapped
    return user if user is not None and getattr(user, "is_authenticated", False) else None
