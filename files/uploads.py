"""Resumable uploads onto a cluster with the tus protocol 1.0 (core, creation,
termination), written as the person's own cluster user (docs/explain/uploads.md): files
and folders checked over SFTP, the bytes piped into OpenSSH's client where it can carry
them (clusters/bulk.py), else written over SFTP too.

- ``POST .../uploads/`` creates the upload: the target's name and folder checked like
  any other, an existing target refused unless replacing it was confirmed, the person's
  unfinished uploads bounded in bytes; an empty private partial file is made beside the
  target.
- ``HEAD .../uploads/<id>/`` answers the offset: the partial file's size *on the
  cluster*, nothing the web host remembers, so whatever arrived before a cut counts.
- ``PATCH`` appends at that offset only (409 otherwise), in pieces as they are read from
  the request as it arrives (portal/streamed_body.py); one request carries at most
  ``PORTAL_UPLOAD_CHUNK_BYTES``. With the last byte the file's sha256 is computed
  on the cluster and the partial file renamed onto the target: within that request for
  a file of at most ``PORTAL_UPLOAD_HASH_INLINE_BYTES`` (the request's cluster deadline
  bounds it), otherwise, or when the cluster takes longer, by a task
  (``files.tasks.finish_upload``); HEAD then answers ``Upload-Finishing: yes`` until the
  ``Upload-Sha256`` (or ``Upload-Error``) is there. No web thread waits on a hash.
- ``DELETE`` removes the partial file.

Another person's upload is a 404; every step is audited as ``file_upload``.
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager

from celery import current_app
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.db import transaction
from django.db.models import Sum
from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.csrf import csrf_protect

from clusters import bulk, deadline, pool, ssh
from common import paths
from common.marks import accepts_body, streaming_view
from common.paths import BadPath
from files import remote
from files.models import Upload
from files.views import Failure, Place, _parts
from identity import audit

log = logging.getLogger(__name__)

VERSION = "1.0.0"
METADATA_MAX = 8192
HASH_TIMEOUT = 600.0
PIECE = 1024 * 1024
# OpenSSL's SHA-256 uses the CPU's SHA extensions: 1 GiB in 1.0 s here, against 3.8 s for
# coreutils' sha256sum, which stays the fallback where a cluster has no (recent) openssl.
HASH = 'openssl dgst -sha256 -r -- "$1" 2>/dev/null || sha256sum -- "$1"'


def _tus(response: HttpResponse) -> HttpResponse:
    response["Tus-Resumable"] = VERSION
    response["Cache-Control"] = "no-store"
    return response


def _error(message: str, status: int) -> HttpResponse:
    return _tus(JsonResponse({"error": message}, status=status))


def _metadata(header: str) -> dict[str, str]:
    """tus Upload-Metadata: 'key base64,key base64'; bounded, decoded as UTF-8."""
    if len(header) > METADATA_MAX:
        raise BadPath("Upload-Metadata is too long.")
    found = {}
    for pair in filter(None, (p.strip() for p in header.split(","))):
        key, _, value = pair.partition(" ")
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", key):
            raise BadPath("Upload-Metadata has a key that is not a name.")
        try:
            found[key] = base64.b64decode(value, validate=True).decode() if value else ""
        except (binascii.Error, UnicodeDecodeError):
            raise BadPath(f"Upload-Metadata's {key} is not base64 of UTF-8 text.") from None
    return found


def _version_refused(request) -> HttpResponse | None:
    if request.method != "OPTIONS" and request.headers.get("Tus-Resumable") != VERSION:
        response = _error(f"This server speaks tus {VERSION}.", 412)
        response["Tus-Version"] = VERSION
        return response
    return None


@streaming_view
@login_required
@csrf_protect
def collection(request, cluster: str, root: str):
    if request.method == "OPTIONS":
        response = HttpResponse(status=204)
        response["Tus-Version"] = VERSION
        response["Tus-Extension"] = "creation,termination"
        response["Tus-Max-Size"] = str(settings.PORTAL_UPLOAD_MAX_BYTES)
        return _tus(response)
    if request.method != "POST":
        return _error("Use POST to start an upload.", 405)
    refused = _version_refused(request)
    if refused:
        return refused
    place = Place(request, cluster, root)
    try:
        place.writable()
        length = int(request.headers.get("Upload-Length", ""))
        meta = _metadata(request.headers.get("Upload-Metadata", ""))
        name = paths.new_name(meta.get("filename", ""))
        folder = _parts(meta.get("path", ""))
    except ValueError:
        return _error("Send Upload-Length: the file's size in bytes.", 400)
    except (BadPath, Failure) as exc:
        return _error(str(exc), getattr(exc, "status", 400))
    if length < 0 or length > settings.PORTAL_UPLOAD_MAX_BYTES:
        return _error(
            f"A file may be at most {settings.PORTAL_UPLOAD_MAX_BYTES:,} bytes "
            "(PORTAL_UPLOAD_MAX_BYTES).",
            413,
        )
    unfinished = Upload.objects.filter(user=request.user, finished_at=None)
    pending = unfinished.aggregate(total=Sum("length"))["total"] or 0
    if pending + length > settings.PORTAL_UPLOAD_PERSON_BYTES:
        return _error(
            f"Your unfinished uploads would exceed {settings.PORTAL_UPLOAD_PERSON_BYTES:,} "
            "bytes (PORTAL_UPLOAD_PERSON_BYTES): finish or cancel some first.",
            413,
        )
    folder_rel = paths.joined(folder)
    make_folders = meta.get("folders") == "make"  # a folder uploaded whole
    if unfinished.filter(cluster=place.cluster, root=place.root.key, folder=folder_rel, name=name):
        return _error(f"{name} is already being uploaded there.", 409)
    upload = Upload(
        user=request.user,
        cluster=place.cluster,
        root=place.root.key,
        folder=folder_rel,
        name=name,
        length=length,
        overwrite=meta.get("overwrite") == "yes",
    )
    try:
        place.run(
            audit.Action.FILE_UPLOAD,
            f"{upload.rel} (start, {length:,} bytes)",
            lambda sftp, top: remote.create_partial(
                sftp,
                remote.make_folders(sftp, top, folder)
                if make_folders
                else remote.walk(sftp, top, folder, want_dir=True),
                upload.partial_name,
                name,
                upload.overwrite,
            ),
            repeatable=False,
            purpose=_purpose(place.root.key),
        )
    except Failure as exc:
        return _error(str(exc), exc.status)
    upload.save()
    response = HttpResponse(status=201)
    response["Location"] = reverse("files-upload", args=[cluster, root, upload.id])
    response["Upload-Offset"] = "0"
    if length == 0:
        complete(place, upload)
        if upload.sha256:
            response["Upload-Sha256"] = upload.sha256
    return _tus(response)


def _purpose(root_key: str) -> str:
    """What the certificate of an upload's SSH connection names: every request of every
    upload of a person into one root shares that connection (a folder of thousands of
    files is not thousands of logins); each request is still its own audit row."""
    return f"file_upload into {root_key}"


def _partial(sftp, top: str, upload: Upload) -> str:
    """The upload's partial file, its folder walked again each time (a folder swapped for
    a link since the upload began is refused, as anywhere in the file manager)."""
    return remote.walk(sftp, top, [*paths.parts_of(upload.folder), upload.partial_name])


def _digest(out: str) -> str:
    """The hex digest in what HASH printed: openssl's "<hex> *<path>", or sha256sum's
    "<hex>  <path>" ("\\<hex>  ..." when the name needed escaping)."""
    digest = out.lstrip("\\").split(maxsplit=1)[0] if out.strip() else ""
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise ssh.ClusterError(f"The cluster's SHA-256 of the upload is not one: {out[:200]!r}")
    return digest


def complete(place: Place, upload: Upload) -> None:
    """Every byte arrived: ``finish`` it now, within the request's cluster deadline, if it
    is small enough (PORTAL_UPLOAD_HASH_INLINE_BYTES); else, or past the deadline, hand it
    to a task the client polls (HEAD) and return at once."""
    if upload.length <= settings.PORTAL_UPLOAD_HASH_INLINE_BYTES:
        try:
            with deadline.within(float(settings.PORTAL_WEB_CLUSTER_SECONDS)):
                finish(place, upload)
            return
        except ssh.CommandTimedOut as exc:
            log.info("upload %s: finished by a task (%s)", upload.pk, exc)
    Upload.objects.filter(pk=upload.pk, finished_at=None).update(
        completing_at=timezone.now(), error=""
    )
    upload.completing_at = timezone.now()
    upload_id = upload.pk
    # By name: the task module imports this one.
    transaction.on_commit(lambda: current_app.send_task(FINISH_TASK, args=[upload_id]))


FINISH_TASK = "files.tasks.finish_upload"


def finish(place: Place, upload: Upload) -> None:
    """The last byte arrived: its sha256 on the cluster, then the rename onto the target."""

    def on(conn: ssh.Connection) -> str:
        with conn.sftp_session() as sftp:
            partial = _partial(sftp, place.root.path, upload)
        digest = _digest(conn.run(["sh", "-c", HASH, "sh", partial], timeout=HASH_TIMEOUT).stdout)
        target = f"{partial.rsplit('/', 1)[0]}/{upload.name}"
        with conn.sftp_session() as sftp:
            remote.finish_upload(sftp, partial, target, upload.overwrite)
        return digest

    with audit.action(
        audit.Action.FILE_UPLOAD,
        user=place.request.user,
        account=place.account,
        target=f"{place.root.key}:{paths.shown(upload.rel, 400)} (done)",
        purpose=_purpose(place.root.key),
    ) as entry:
        digest = pool.with_connection(place.account, on, retry=False)
        entry.note(f"sha256 {digest}")
    Upload.objects.filter(pk=upload.pk).update(finished_at=timezone.now(), sha256=digest)
    upload.sha256 = digest


def _pieces(request, length: int):
    """The request's body in pieces as they arrive (a streamed body, portal/streamed_body:
    each as received, without joining them), ending early where the client went."""
    read = getattr(getattr(request, "_stream", None), "read1", request.read)
    left = length
    while left > 0:
        piece = read(min(PIECE, left))
        if not piece:
            return
        left -= len(piece)
        yield piece


def _write(place: Place, upload: Upload, offset: int, length: int, pieces) -> int:
    """One request's bytes appended at ``offset``, as one audit row: the partial file
    walked to and its size checked over SFTP, then the bytes piped into OpenSSH's client
    (clusters/bulk.py: faster, and far less of the web worker's CPU) or, where
    OpenSSH cannot log in, written over SFTP. A refused host key is an error, never a
    reason to try the other way."""

    def checked(conn: ssh.Connection) -> str:
        with conn.sftp_session() as sftp:
            partial = _partial(sftp, place.root.path, upload)
            remote.check_offset(sftp, partial, offset)
            return partial

    def over_sftp(conn: ssh.Connection) -> int:
        with conn.sftp_session() as sftp:
            return remote.write_at(sftp, _partial(sftp, place.root.path, upload), offset, pieces)

    with place.audited(
        audit.Action.FILE_UPLOAD,
        f"{upload.rel} (bytes)",  # one target: the chunks share a connection
        purpose=_purpose(place.root.key),
        note=f"bytes {offset:,}+{length:,}",
    ):
        if bulk.enabled():
            partial = pool.with_connection(place.account, checked)
            try:
                return bulk.write_at(
                    place.account, partial, offset, pieces, timeout=settings.SSH_COMMAND_TIMEOUT
                )
            except bulk.Unavailable as exc:  # (before any byte was taken)
                log.warning("upload %s over SFTP: %s", upload.pk, exc)
        return pool.with_connection(place.account, over_sftp, retry=False)


class Busy(Exception):
    """Another request is writing the upload now."""


WRITING_SECONDS = 120  # a writer's claim on its upload, renewed while bytes arrive
HEAD_WAIT_SECONDS = 30.0  # the longest a HEAD waits for a writer to end


def _claim_key(upload: Upload) -> str:
    """The shared cache's key of the claim of the request writing ``upload``."""
    return f"upload-writing:{upload.pk}"


def _writer_gone(upload: Upload, seconds: float) -> bool:
    """No request writes the upload now, or none did within ``seconds``."""
    key, until, pause = _claim_key(upload), time.monotonic() + seconds, 0.05
    while cache.get(key) is not None:
        if time.monotonic() >= until:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.5)
    return True


@contextmanager
def _writing(upload: Upload) -> Iterator:
    """One request at a time writes an upload, across web processes (a claim in the
    shared cache): a second one, the same chunk sent again while the first still writes
    (a client that retried after a cut), is a 423 and retries once the first is over
    (tus-js-client does), rather than both writing at the same offset. The claim lapses
    WRITING_SECONDS after the last byte arrived, should its process die. Yields a wrapper
    for the body's pieces that keeps the claim alive as they arrive."""
    key, token = _claim_key(upload), secrets.token_hex(8)
    if not cache.add(key, token, timeout=WRITING_SECONDS):
        raise Busy(
            "Another request is writing this upload now: ask its offset (HEAD) and go on "
            "from there once it is over."
        )

    def kept_alive(pieces):
        renewed = time.monotonic()
        for piece in pieces:
            if time.monotonic() - renewed > WRITING_SECONDS / 4:
                cache.touch(key, WRITING_SECONDS)
                renewed = time.monotonic()
            yield piece

    try:
        yield kept_alive
    finally:
        if cache.get(key) == token:
            cache.delete(key)


@streaming_view
@accepts_body(lambda: int(settings.PORTAL_UPLOAD_CHUNK_BYTES))
@login_required
@csrf_protect
def item(request, cluster: str, root: str, upload_id: str):
    refused = _version_refused(request)
    if refused:
        return refused
    place = Place(request, cluster, root)
    upload = get_object_or_404(
        Upload, pk=upload_id, user=request.user, cluster=place.cluster, root=place.root.key
    )
    if request.method == "HEAD":
        # After a cut, the request that was cut may still be writing what reached it: the
        # offset is final only once it is over (else the client would send from an older
        # one, a 409 whose whole chunk the browser still sends).
        if not _writer_gone(upload, HEAD_WAIT_SECONDS):
            return _error("The upload is still being written: ask again.", 423)
        upload.refresh_from_db()
        if upload.finished_at or upload.completing_at:
            offset = upload.length
        else:
            try:
                offset = place.run(
                    audit.Action.FILE_LIST,
                    f"{upload.rel} (upload offset)",
                    lambda sftp, top: remote.partial_size(sftp, _partial(sftp, top, upload)),
                    purpose=_purpose(place.root.key),
                )
            except Failure as exc:
                return _error(str(exc), exc.status)
        response = HttpResponse(status=200)
        response["Upload-Offset"] = str(offset)
        response["Upload-Length"] = str(upload.length)
        if upload.sha256:
            response["Upload-Sha256"] = upload.sha256
        elif upload.error:
            response["Upload-Error"] = upload.error.encode("ascii", "replace").decode()[:500]
        elif upload.completing_at:
            response["Upload-Finishing"] = "yes"
        return _tus(response)
    if request.method == "DELETE":
        if upload.completing_at and not upload.finished_at and not upload.error:
            return _error("Every byte arrived: it is being checked and put in place.", 409)
        if not upload.finished_at:
            try:
                place.run(
                    audit.Action.FILE_UPLOAD,
                    f"{upload.rel} (cancelled)",
                    lambda sftp, top: sftp.remove(_partial(sftp, top, upload)),
                    repeatable=False,
                    purpose=_purpose(place.root.key),
                )
            except Failure as exc:
                if exc.status != 404:
                    return _error(str(exc), exc.status)
        upload.delete()
        return _tus(HttpResponse(status=204))
    if request.method != "PATCH":
        return _error("Use HEAD, PATCH or DELETE on an upload.", 405)
    response = _patch(request, place, upload)
    if response.status_code >= 400:
        # Refused before its body was read (or with the rest unread): the browser would
        # still send the whole chunk, up to PORTAL_UPLOAD_CHUNK_BYTES, for nothing; the
        # server closes the connection after the answer instead (uvicorn reads this).
        response["Connection"] = "close"
    return response


def _patch(request, place: Place, upload: Upload) -> HttpResponse:
    """A PATCH: the request's bytes appended at its offset (see the module's doc)."""
    if upload.finished_at or upload.completing_at:
        return _error("This upload is complete.", 409)
    if request.content_type != "application/offset+octet-stream":
        return _error("Send the bytes as application/offset+octet-stream.", 415)
    try:
        offset = int(request.headers.get("Upload-Offset", ""))
        length = int(request.headers.get("Content-Length", ""))
    except ValueError:
        return _error("Send Upload-Offset and Content-Length.", 400)
    if length > settings.PORTAL_UPLOAD_CHUNK_BYTES:
        return _error(
            f"One request may carry at most {settings.PORTAL_UPLOAD_CHUNK_BYTES:,} bytes "
            "(PORTAL_UPLOAD_CHUNK_BYTES): send the file in chunks.",
            413,
        )
    if offset < 0 or length < 0 or offset + length > upload.length:
        return _error(f"The file is {upload.length:,} bytes: that goes past its end.", 409)
    try:
        with _writing(upload) as kept_alive:
            size = _write(place, upload, offset, length, kept_alive(_pieces(request, length)))
            if size == upload.length:
                complete(place, upload)
    except Busy as exc:
        return _error(str(exc), 423)
    except Failure as exc:
        return _error(str(exc), exc.status)
    except remote.Conflict as exc:  # the target appeared meanwhile: the bytes are kept
        return _error(str(exc), 409)
    except (BadPath, ssh.ClusterError, OSError) as exc:
        return _error(f"Could not finish it on {place.cluster.name}: {exc}", 502)
    response = HttpResponse(status=204)
    response["Upload-Offset"] = str(size)
    if upload.sha256:
        response["Upload-Sha256"] = upload.sha256
    elif upload.completing_at:
        response["Upload-Finishing"] = "yes"  # (HEAD says when it is done)
    return _tus(response)
