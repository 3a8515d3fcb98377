"""Django's ASGI handler, with the body of an upload chunk streamed to the view as it
arrives instead of read whole first.

Django's ASGIHandler reads every request body into a spooled temporary file (to disk past
FILE_UPLOAD_MAX_MEMORY_SIZE) before the view runs: a tus chunk of 256 MiB is received
whole, then written to the cluster, the two never at once. For the bodies named in
STREAMED_TYPES the view's ``request.read()`` takes the bytes as the server receives them,
so receiving from the browser and sending to the cluster overlap. At most ``HELD`` bytes
wait between the two: when the view is slower, the server stops reading the socket (TCP
flow control), and the web process's memory stays flat whatever the chunk size.

Everything else about the request is Django's: middleware, sessions, CSRF and the view see
an ordinary ASGIRequest. Only a view that reads its body with ``request.read()`` may be
given such a body (``request.body``, ``request.POST`` would read it whole; the one view
that takes these types, files.uploads.item, reads it in pieces).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque

from django.core.handlers.asgi import ASGIHandler

# Bodies that go to the view as they arrive: tus's PATCH (files.uploads).
STREAMED_TYPES = frozenset({b"application/offset+octet-stream"})
HELD = 4 * 1024 * 1024  # bytes received but not yet read by the view, at most


def streamed(scope) -> bool:
    """The request's body goes to the view as it arrives (by its Content-Type)."""
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            return value.split(b";", 1)[0].strip().lower() in STREAMED_TYPES
    return False


class BodyStream:
    """A request body between the event loop, which ``fill``s it from ASGI messages, and
    the view's thread, which ``read``s it (blocking until bytes come or the body ends)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, held: int = HELD):
        self._loop, self._held_max = loop, held
        self._pieces: deque[bytes] = deque()
        self._held = 0
        self._ended = False
        self._aborted = False
        self._closed = False
        self._full = False  # the filler waits for the view to read
        self._ready = threading.Condition()
        self._room = asyncio.Event()
        self._room.set()
        self.drained = asyncio.Event()  # the view read to the end (or it was closed)
        self.disconnect: dict | None = None  # the client's disconnect, if it came first

    # -- the event loop's side ------------------------------------------------------
    async def fill(self, receive) -> None:
        """Receive the body's messages into the stream until it ends or the client goes."""
        try:
            while True:
                await self._room.wait()
                message = await receive()
                if message["type"] == "http.disconnect":
                    self.disconnect = message
                    self._end(aborted=True)
                    return
                piece = message.get("body", b"")
                more = message.get("more_body", False)
                with self._ready:
                    if piece and not self._closed:  # (closed: the rest is dropped)
                        self._pieces.append(piece)
                        self._held += len(piece)
                        if self._held >= self._held_max:
                            self._full = True
                            self._room.clear()
                    self._ended = not more
                    self._ready.notify_all()
                if not more:
                    return
        except BaseException:
            self._end(aborted=True)
            raise

    def _end(self, *, aborted: bool) -> None:
        with self._ready:
            self._ended, self._aborted = True, aborted
            self._ready.notify_all()

    # -- the view's side (a file object, as HttpRequest.read expects) -----------------
    @property
    def aborted(self) -> bool:
        return self._aborted

    def read(self, size: int = -1) -> bytes:
        """At most ``size`` bytes (all that is left for -1), fewer only at the end, or
        where the client went before sending them all (``aborted`` then says so): a tus
        chunk cut short keeps what arrived, and the client resumes from there."""
        out: list[bytes] = []
        want = size if size is not None and size >= 0 else None
        got = 0
        with self._ready:
            while want is None or got < want:
                while not self._pieces and not self._ended:
                    self._ready.wait()
                if not self._pieces:
                    self._loop.call_soon_threadsafe(self.drained.set)
                    break
                piece = self._pieces.popleft()
                if want is not None and got + len(piece) > want:
                    piece, rest = piece[: want - got], piece[want - got :]
                    self._pieces.appendleft(rest)
                out.append(piece)
                got += len(piece)
                self._held -= len(piece)
                if self._full and self._held < self._held_max:
                    self._full = False
                    self._loop.call_soon_threadsafe(self._room.set)
        return b"".join(out)

    def read1(self, size: int = -1) -> bytes:
        """As io.BufferedReader.read1: what has arrived, at most ``size`` bytes, waiting
        only while nothing has; b"" at the end. The received pieces are handed on as they
        are (no copy where one fits): an upload's bytes go through the web process with
        the fewest copies."""
        with self._ready:
            while not self._pieces and not self._ended:
                self._ready.wait()
            if not self._pieces:
                self._loop.call_soon_threadsafe(self.drained.set)
                return b""
            piece = self._pieces.popleft()
            if 0 <= size < len(piece):
                piece, rest = piece[:size], piece[size:]
                self._pieces.appendleft(rest)
            self._held -= len(piece)
            if self._full and self._held < self._held_max:
                self._full = False
                self._loop.call_soon_threadsafe(self._room.set)
            return piece

    def close(self) -> None:
        with self._ready:
            self._closed = True
            self._pieces.clear()
            self._held = 0
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._room.set)  # a filler still waiting drains
            self._loop.call_soon_threadsafe(self.drained.set)


class StreamedBodyHandler(ASGIHandler):
    """ASGIHandler, streaming the bodies ``streamed`` names (see the module's docstring),
    and handing a streamed response's pieces to the server in up to 1 MiB (Django's 64 KiB
    sliced a download's every MiB into 16 copies and 16 sends)."""

    chunk_size = 1024 * 1024

    async def handle(self, scope, receive, send):
        if not streamed(scope):
            return await super().handle(scope, receive, send)
        stream = BodyStream(asyncio.get_running_loop())
        filling = asyncio.create_task(stream.fill(receive))

        async def after_body():
            """What Django's disconnect listener receives: a message after the body."""
            try:
                await filling
            except asyncio.CancelledError:
                raise
            except Exception:  # the server's receive failed: as a disconnect
                return {"type": "http.disconnect"}
            if stream.disconnect:
                # The client went mid-body: Django would then stop waiting for the view.
                # Not before the view has what arrived (it keeps it; tus resumes there).
                await stream.drained.wait()
                return stream.disconnect
            return await receive()

        after_body.stream = stream  # type: ignore[attr-defined]  # (read_body's)
        try:
            return await super().handle(scope, after_body, send)
        finally:
            if not filling.done():
                filling.cancel()

    async def read_body(self, receive):
        stream = getattr(receive, "stream", None)
        if stream is not None:
            return stream
        return await super().read_body(receive)
