"""A response's pieces as the server that asked wants them (what every streaming view
returns through: downloads, zips, exports, metric streams)."""

from __future__ import annotations

from collections.abc import Iterator

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest


def for_server(request, pieces: Iterator[bytes]):
    """``pieces`` as the server that asked wants them. Under ASGI an async iterator, each
    piece read in the request's thread: given a plain iterator, Django's ASGI handler
    would read it whole into memory before sending its first byte."""
    if not isinstance(request, ASGIRequest):
        return pieces

    async def each():
        step = sync_to_async(lambda: next(pieces, None))
        try:
            while (piece := await step()) is not None:
                yield piece
        finally:
            close = getattr(pieces, "close", None)
            if close is not None:
                await sync_to_async(close)()

    return each()
