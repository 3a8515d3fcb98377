"""A file on a cluster as an HTTP response: streamed through OpenSSH (dd on the cluster,
clusters/bulk.py) or one SFTP session with reads in flight (files.remote.read_range),
one byte range on request (``curl -C -`` resumes a
broken download), an ETag for ``If-Range``. Used by the file manager and a job's Files
page alike."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator

from django.conf import settings
from django.http import HttpResponse, StreamingHttpResponse
from django.utils.http import content_disposition_header

from clusters import bulk, files, pool, ssh
from common.streams import for_server
from files import ranges, remote

log = logging.getLogger(__name__)


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


def _read_bulk(account, path: str, first: int, end: int, who: str, what: str):
    """The bytes through OpenSSH (clusters/bulk.py: scp's pace, little of the web
    worker's CPU), else (no master came up: before any byte) over SFTP as ``_read``."""
    pieces = bulk.read_range(
        account,
        path,
        first,
        end,
        settings.PORTAL_DOWNLOAD_CHUNK_BYTES,
        timeout=settings.SSH_COMMAND_TIMEOUT,
        requester=who,
        purpose=what,
    )
    try:
        head = next(pieces, None)
    except bulk.Unavailable as exc:
        log.warning("download of %s over SFTP: %s", path, exc)
        yield from _read(account, path, first, end)
        return
    if head is not None:
        yield head
        yield from pieces


def from_cluster(request, account, path: str, size: int, mtime: float, filename: str):
    """``ranged`` for a regular file on a cluster, read as ``account``: through OpenSSH
    where it can (the certificate names the person and the download), else over SFTP."""
    if bulk.enabled():
        who = request.user.get_username()
        what = f"file_download {account.cluster.name}"

        def read(first: int, end: int) -> Iterator[bytes]:
            return _read_bulk(account, path, first, end, who, what)

    else:

        def read(first: int, end: int) -> Iterator[bytes]:
            return _read(account, path, first, end)

    return ranged(request, size, mtime, read, filename)
