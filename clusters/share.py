"""One person's share of the web tier while requests wait on a cluster.

A page or API call that reaches a cluster (a log, a folder, a download's first read, an
account test) holds a web thread for as long as the cluster takes to answer, and a
person's login environment can make that as long as it likes (a ``~/.bashrc`` that
sleeps). Rates (common/throttle.py) bound how many such requests a person starts a minute,
not how many wait at once. So here:

- every view runs under a deadline for cluster work, PORTAL_WEB_CLUSTER_SECONDS
  (clusters.deadline: every SSH login, command and SFTP call it makes ends by then),
  but the transfers (views marked ``streaming``: downloads and upload chunks, bounded by
  each SFTP call's own timeout instead);
- the first time a request reaches for a cluster connection (clusters.pool.get calls
  :func:`claim`), it takes one of the person's PORTAL_PERSON_CLUSTER_REQUESTS places,
  counted in Redis across every web process; with none free the request is answered 429
  with Retry-After at once, having reached no cluster. The place is given back when the view
  returns, and expires on its own (a killed process keeps none).

Requests that never reach a cluster (pages from the database, the API's lists, metric
uploads) take no place and are never refused here.
"""

from __future__ import annotations

import secrets
from contextvars import ContextVar

from django.conf import settings
from django.http import HttpResponse, JsonResponse

from clusters import deadline
from common import marks, places

RETRY_AFTER = 2  # seconds


class Busy(Exception):
    """The person already has every place: answer 429, reach no cluster."""


class _Share:
    def __init__(self, request) -> None:
        self.request = request
        self.key = ""
        self.token = ""

    def claim(self) -> None:
        if self.token:
            return  # one place a request, however many connections it uses
        user = getattr(self.request, "user", None)
        if user is None or not user.is_authenticated:
            return
        key, token = f"cluster-share:{user.pk}", secrets.token_hex(8)
        if not acquire(key, token):
            raise Busy(
                f"You already have {settings.PORTAL_PERSON_CLUSTER_REQUESTS} requests waiting "
                "on a cluster; try again in a moment."
            )
        self.key, self.token = key, token

    def release(self) -> None:
        if self.token:
            release(self.key, self.token)
            self.key = self.token = ""


_current: ContextVar[_Share | None] = ContextVar("cluster_share", default=None)


def acquire(key: str, token: str) -> bool:
    ttl = float(settings.PORTAL_WEB_CLUSTER_SECONDS) + 5
    return places.take(key, token, most=settings.PORTAL_PERSON_CLUSTER_REQUESTS, ttl=ttl)


def release(key: str, token: str) -> None:
    places.give_back(key, token)


def claim() -> None:
    """Called before a request uses a cluster connection (clusters.pool.get): take the
    person's place for this request, or raise Busy. Nothing outside a web request."""
    share = _current.get()
    if share is not None:
        share.claim()


def refused(request, exc: Busy) -> HttpResponse:
    message = str(exc)
    response: HttpResponse
    if request.path.startswith("/api/") or "json" in request.headers.get("Accept", ""):
        response = JsonResponse({"error": message}, status=429)
    else:
        response = HttpResponse(message, status=429, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER)
    return response


class ClusterShareMiddleware:
    """The deadline and the person's place (see the module) around each request."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        # Set and reset in this one frame: under ASGI, process_view runs in another
        # context, whose tokens cannot be reset here.
        share = _Share(request)
        token = _current.set(share)
        streams = marks.streams(request.path_info, getattr(request, "urlconf", None))
        bound = None if streams else float(settings.PORTAL_WEB_CLUSTER_SECONDS)
        started = deadline.start(bound)
        try:
            return self.get_response(request)
        finally:
            deadline.finish(started)
            _current.reset(token)
            share.release()

    def process_exception(self, request, exception):
        if isinstance(exception, Busy):
            return refused(request, exception)
        return None
