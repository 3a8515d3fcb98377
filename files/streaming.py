"""A file on a cluster as an HTTP response: streamed in bounded SFTP reads, one byte range
on request (``curl -C -`` resumes a broken download), an ETag for ``If-Range``. Used by
the file manager and a job's Files page alike."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpResponse, StreamingHttpResponse
from django.utils.http import content_disposition_header

from files import ranges
from jobs.cluster import files, pool


def ranged(
    request, size: int, mtime: float, read: Callable[[int, int], bytes], filename: str
) -> HttpResponse | StreamingHttpResponse:
    """The response for a file of ``size`` bytes; ``read(offset, n)`` returns up to ``n``
    bytes at ``offset`` (fewer or none when the file shrank meanwhile)."""
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
    chunk = settings.PORTAL_DOWNLOAD_CHUNK_BYTES

    def chunks():
        at = first
        while at <= last:
            data = read(at, min(chunk, last + 1 - at))
            if not data:
                return  # shorter now than when the download began
            at += len(data)
            yield data

    response = StreamingHttpResponse(
        chunks() if size else iter(()), status=status, content_type="application/octet-stream"
    )
    response["Content-Length"] = str(last + 1 - first if size else 0)
    response["Accept-Ranges"] = "bytes"
    response["ETag"] = tag
    if status == 206:
        response["Content-Range"] = f"bytes {first}-{last}/{size}"
    response["Content-Disposition"] = content_disposition_header(True, filename)
    return response


def from_cluster(request, account, path: str, size: int, mtime: float, filename: str):
    """``ranged`` for a regular file on a cluster, read as ``account`` in bounded SFTP
    reads (each on the pooled connection: a dropped one is reopened for the next read)."""
    return ranged(
        request,
        size,
        mtime,
        lambda at, n: pool.with_connection(
            account, lambda conn: files.read_chunk(conn, path, at, n)
        ),
        filename,
    )
