"""A file on a cluster as an HTTP response: streamed through one SFTP session with reads
in flight (files.remote.read_range), one byte range on request (``curl -C -`` resumes a
broken download), an ETag for ``If-Range``. Used by the file manager and a job's Files
page alike."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpResponse, StreamingHttpResponse
from django.utils.http import content_disposition_header

from files import ranges, remote
from jobs.cluster import files, pool, ssh


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


def ranged(
    request,
    size: int,
    mtime: float,
    read: Callable[[int, int], Iterable[bytes]],
    filename: str,
) -> HttpResponse | StreamingHttpResponse:
    """The response for a file of ``size`` bytes; ``read(first, end)`` gives the bytes
    from ``first`` up to ``end`` (excluded) in pieces (fewer or none when the file shrank
    meanwhile)."""
    tag = ranges.etag(size, mtime)
    first, last, status = 0, size - 1, 200
    try:
        if ranges.still_valid(request.headers.get("If-Range"), tag):
            wanted = ranges.byte_range(request.headers.get("Range"), size)
            if wanted is not None:
                (first, last), status = wanted, 206
    except ranges.Unsatisfiable:
        refused = HttpResponse(status=416)
        refused["Content-Range"] = f"bytes */{size}"
        return refused
    pieces = iter(read(first, last + 1) if size else ())
    response = StreamingHttpResponse(
        for_server(request, pieces), status=status, content_type="application/octet-stream"
    )
    response["Content-Length"] = str(last + 1 - first if size else 0)
    response["Accept-Ranges"] = "bytes"
    response["ETag"] = tag
    if status == 206:
        response["Content-Range"] = f"bytes {first}-{last}/{size}"
    response["Content-Disposition"] = content_disposition_header(True, filename)
    return response


def _read(account, path: str, first: int, end: int) -> Iterator[bytes]:
    """The bytes of a regular file on a cluster, read as ``account`` through an SFTP
    session of the download's own on the pooled connection, in pieces of
    PORTAL_DOWNLOAD_CHUNK_BYTES; a dropped connection is reopened for the rest (once
    for each stretch that made progress)."""
    at, retried = first, False
    while at < end:
        try:
            conn = pool.get(account)
            with conn.sftp_session(own=True) as sftp, files.open_regular(sftp, path) as opened:
                for piece in remote.read_range(
                    sftp, opened[0], at, end, settings.PORTAL_DOWNLOAD_CHUNK_BYTES
                ):
                    at, retried = at + len(piece), False
                    yield piece
            return  # all of it, or the file is shorter now
        except FileNotFoundError:
            return  # removed meanwhile
        except ssh.ClusterUnreachable:
            if retried:
                raise
            retried = True
            pool.discard(account)


def from_cluster(request, account, path: str, size: int, mtime: float, filename: str):
    """``ranged`` for a regular file on a cluster, read as ``account``."""
    return ranged(
        request, size, mtime, lambda first, end: _read(account, path, first, end), filename
    )
