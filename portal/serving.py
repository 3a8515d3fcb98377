"""Which of Django's two handlers serves an HTTP request inside the ASGI server.

Most requests go to Django's WSGI handler on a pool of PORTAL_WEB_THREADS threads
(a2wsgi's WSGIMiddleware: one hand-off from the event loop to a thread and back). Django's
ASGI handler runs every synchronous view and middleware on one thread per process
(asgiref's thread_sensitive), with a hand-off for each sync/async boundary of the
middleware chain: under load the requests queued for that one thread while their
database round trips left the cores idle. Measured with bench/load_live.py (200 jobs
uploading 50 points a second, two web processes on two cores): 142 calls/s acknowledged
of 200, 9.3 ms of web CPU a call, through the ASGI handler; all 200, 5.9 ms, through
this one.

The views that stream (downloads, zips, tus uploads, exports: marked ``@streaming_view``),
tus bodies, and requests whose body comes chunked (the WSGI handler reads a body by its
Content-Length) or is larger than BUFFERED stay on the ASGI handler (portal/streamed_body.py,
which spools a large body to disk before its view runs): a transfer that lasts an hour
holds no thread of the pool. The rest have their whole body received on the event loop
before a thread takes them, as Django's ASGI handler does: a client that sends its body
slowly (or never) holds no thread either.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from a2wsgi import WSGIMiddleware
from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler

from common import callers
from common.marks import streams
from portal import body_limits, streamed_body

# The largest body received into memory before a thread takes the request: a form, a
# JSON document, a metrics batch of a few thousand records. A larger one goes to the ASGI
# handler, which spools it to disk past 2.5 MiB (FILE_UPLOAD_MAX_MEMORY_SIZE).
BUFFERED = 1024 * 1024


def on_event_loop(scope: dict) -> bool:
    """True for a request the ASGI handler should serve (see the module)."""
    headers = dict(scope.get("headers", ()))
    length = headers.get(b"content-length")
    if length is None and b"transfer-encoding" in headers:
        return True
    if length is not None and not (length.isdigit() and int(length) <= BUFFERED):
        return True
    if streamed_body.streamed(scope):
        return True
    return streams(scope.get("path", "/"))


class HttpRouter:
    """The ASGI app for ``http`` scopes: ``streaming`` (Django's ASGI handler) for what
    is ``on_event_loop``, Django's WSGI handler on ``threads`` threads for the rest."""

    def __init__(self, streaming: Callable, threads: int) -> None:
        self.streaming = streaming
        # The response goes to the event loop a piece at a time, at most 4 pieces ahead.
        wsgi: Any = WSGIHandler()  # a WSGI app (django-stubs types its answer more narrowly)
        self.threaded: Any = WSGIMiddleware(wsgi, workers=threads, send_queue_size=4)
        # No one caller fills the pool (common/callers.py).
        self.turns = callers.Turns(int(settings.PORTAL_WEB_CALLER_THREADS))

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        # The body's size is bounded before any of it is received (portal/body_limits.py).
        limit = await body_limits.limit_for(scope)
        length = body_limits.declared_length(scope)
        if length is not None and not 0 <= length <= limit:
            return await body_limits.refuse(send, limit)
        if on_event_loop(scope):
            if length is not None:
                return await self.streaming(scope, receive, send)
            counted, watched = body_limits.Counted(receive, limit), body_limits.Watched(send)
            await self.streaming(scope, counted, watched)
            if counted.over and not watched.started:
                await body_limits.refuse(send, limit)
            return None
        body = await _whole_body(receive)
        if body is None:
            return  # the client went before its body was whole: nothing to answer
        replayed = False

        async def then_receive() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        async with self.turns.turn(scope):
            await self.threaded(scope, then_receive, send)


async def _whole_body(receive: Callable) -> bytes | None:
    """The request's body (at most its Content-Length, checked by ``on_event_loop`` to be
    at most BUFFERED), or None if the client disconnected first."""
    pieces = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        pieces.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(pieces)
