"""The file manager's pages: a person's folders on a cluster, over SFTP as their own
cluster user (projects/roots.py), every action audited (identity/audit). Views stay thin:
paths are checked by common/paths.py, SFTP work is files/remote.py, ranges files/ranges.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import quote, unquote, urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core import signing
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_POST

from clusters import files as job_files
from clusters import pool, ssh
from clusters.models import Cluster
from common import paths
from common.marks import streaming_view
from common.paths import BadPath
from common.throttle import throttled
from files import remote, streaming, zipstream
from identity import audit
from projects import roots
from registry.models import protecting

T = TypeVar("T")
PER_PAGE = 200
DELETE_CONFIRM_AGE = 600  # seconds a delete's confirmation stays valid


class Failure(Exception):
    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def unprotected(cluster_id: int, path: str) -> str:
    """``path``, unless it is, holds or lies in a registered model version's files (what
    a delete or a move must leave alone: registry/models.py)."""
    version = protecting(cluster_id, path)
    if version is not None:
        raise Failure(
            f"This holds the files of model {version.model.name} version {version.version}: "
            "they stay while the version is registered (delete the version first).",
            409,
        )
    return path


class Place:
    """One request's cluster, account and root, resolved for the signed-in person."""

    def __init__(self, request, cluster_name: str, root_key: str):
        self.request = request
        self.cluster = get_object_or_404(Cluster, name=cluster_name, enabled=True)
        try:
            self.account = roots.account_for(self.cluster, request.user)
            self.root = roots.root_named(self.cluster, self.account, root_key)
        except roots.NoAccess as exc:
            raise Http404(str(exc)) from None

    def writable(self) -> None:
        """A change in a read-only root (a project's folder for its viewers) is refused."""
        if self.root.read_only:
            raise Failure(
                "You are a viewer of this project: its folder is read-only for you here.", 403
            )

    def read_head(self, rel: str, max_bytes: int) -> tuple[bytes, int]:
        """Up to ``max_bytes`` from the start of the regular file ``rel``, and its size
        (audited as a read)."""
        parts = _parts(rel)
        return self.run(
            audit.Action.FILE_READ,
            rel,
            lambda sftp, top: remote.read_head(
                sftp, remote.walk(sftp, top, parts, want_dir=False), max_bytes
            ),
        )

    def url(self, name: str, **query: Any) -> str:
        base = reverse(name, args=[self.cluster.name, self.root.key])
        query = {k: v for k, v in query.items() if v not in ("", None)}
        return f"{base}?{urlencode(query)}" if query else base

    def run(
        self,
        what: str,
        rel: str,
        operation: Callable[[Any, str], T],
        *,
        repeatable=True,
        purpose: str = "",
        note: str = "",
    ) -> T:
        """``operation(sftp, root path)`` on the person's connection, audited as ``what``
        on ``rel`` (see ``audited``). A change (``repeatable=False``) is never run twice on
        a dropped connection."""

        def on(conn: ssh.Connection) -> T:
            with conn.sftp_session() as sftp:
                return operation(sftp, self.root.path)

        with self.audited(what, rel, purpose=purpose, note=note):
            return pool.with_connection(self.account, on, retry=repeatable)

    @contextmanager
    def audited(self, what: str, rel: str, *, purpose: str = "", note: str = "") -> Iterator[None]:
        """The block as one audit row ``what`` on ``rel``; what can go wrong becomes a
        Failure with the message and status to show. ``purpose``: see identity.audit.action
        (the connection it runs on). ``note``: the row's remark (an upload's byte range)."""
        try:
            with audit.action(
                what,
                user=self.request.user,
                account=self.account,
                target=f"{self.root.key}:{paths.shown(rel, 400) or '.'}",
                purpose=purpose,
            ) as entry:
                if note:
                    entry.note(note)
                yield
        except remote.Conflict as exc:
            raise Failure(str(exc), 409) from None
        except BadPath as exc:
            raise Failure(str(exc), 400) from None
        except job_files.NotARegularFile as exc:
            raise Failure(str(exc), 400) from None
        except FileNotFoundError:
            raise Failure("No such file or folder (any more).", 404) from None
        except PermissionError:
            raise Failure(f"{self.cluster.name} refused: permission denied.", 403) from None
        except (ssh.ClusterError, OSError) as exc:
            raise Failure(f"Could not do it on {self.cluster.name}: {exc}", 502) from None


def _failed(request, place: Place | None, exc: Failure):
    return render(
        request, "files/failed.html", {"place": place, "error": str(exc)}, status=exc.status
    )


def _posted(request, field: str, default: str = "") -> str:
    """A path a form sent: the page percent-encodes them (a name on the cluster may hold
    any byte but NUL and '/', control characters included, which never go into the
    page's HTML raw); typed text without '%' is itself."""
    return unquote(request.POST.get(field, default))


def _parts(rel: str) -> list[str]:
    try:
        return paths.parts_of(rel)
    except BadPath as exc:
        raise Failure(str(exc), 400) from None


@login_required
def index(request):
    """The clusters where the person has their own account, with their folders."""
    places = []
    for cluster in Cluster.objects.filter(enabled=True).order_by("name"):
        try:
            account = roots.account_for(cluster, request.user)
        except roots.NoAccess:
            continue
        places.append((cluster, roots.roots_of(cluster, account)))
    return render(request, "files/index.html", {"places": places})


@login_required
@throttled("cluster-pages")
def browse(request, cluster: str, root: str):
    place = Place(request, cluster, root)
    rel = request.GET.get("path", "")
    sort = request.GET.get("sort", "name")
    descending = request.GET.get("order") == "desc"
    try:
        parts = _parts(rel)
        entries = place.run(
            audit.Action.FILE_LIST,
            rel,
            lambda sftp, top: remote.listing(sftp, remote.walk(sftp, top, parts, want_dir=True)),
        )
    except Failure as exc:
        return _failed(request, place, exc)
    page = Paginator(remote.ordered(entries, sort, descending), PER_PAGE).get_page(
        request.GET.get("page")
    )
    here = paths.joined(parts)
    crumbs = [(paths.joined(parts[: i + 1]), paths.shown(p)) for i, p in enumerate(parts)]
    rows = [
        {
            "entry": entry,
            "shown": paths.shown(entry.name),
            "rel": f"{here}/{entry.name}" if here else entry.name,
        }
        for entry in page.object_list
    ]
    return render(
        request,
        "files/browse.html",
        {
            "place": place,
            "rel": here,
            "crumbs": crumbs,
            "rows": rows,
            "page": page,
            "total": len(entries),
            "sort": sort,
            "descending": descending,
            "upload_chunk": settings.PORTAL_UPLOAD_CHUNK_BYTES,
            # For the uploader's "replace it?" question (the server refuses anyway).
            "existing": [e.name for e in entries] if len(entries) <= 10_000 else [],
        },
    )


def _back(place: Place, rel: str):
    return redirect(place.url("files-browse", path=rel))


def _refused(request, place: Place, rel: str, exc: Failure | BadPath):
    """A change refused: the reason with its 4xx status, and the way back to the folder
    (whose form the browser's Back keeps as it was typed)."""
    status = exc.status if isinstance(exc, Failure) else 400
    try:
        back = place.url("files-browse", path=paths.joined(paths.parts_of(rel)))
    except BadPath:
        back = place.url("files-browse")
    return render(
        request,
        "files/failed.html",
        {"place": place, "error": str(exc), "back": back},
        status=status,
    )


@login_required
@require_POST
@throttled("cluster-pages")
def make_folder(request, cluster: str, root: str):
    place = Place(request, cluster, root)
    rel = _posted(request, "path")
    try:
        place.writable()
        parts = _parts(rel)
        name = paths.new_name(request.POST.get("name", ""))
        place.run(
            audit.Action.FILE_MKDIR,
            paths.joined([*parts, name]),
            lambda sftp, top: remote.make_folder(
                sftp, remote.walk(sftp, top, parts, want_dir=True), name
            ),
            repeatable=False,
        )
    except (Failure, BadPath) as exc:
        return _refused(request, place, rel, exc)
    messages.success(request, f"Made the folder {name}.")
    return _back(place, rel)


@login_required
@require_POST
@throttled("cluster-pages")
def rename(request, cluster: str, root: str):
    """Rename or move an entry within the root (``to``: the folder it goes to)."""
    place = Place(request, cluster, root)
    rel = _posted(request, "path")
    parts: list[str] = []
    try:
        place.writable()
        parts = _parts(rel)
        if not parts:
            raise BadPath("Choose what to rename.")
        to = _parts(_posted(request, "to", quote(paths.joined(parts[:-1]))))
        name = paths.new_name(request.POST.get("name", "") or parts[-1])

        def move(sftp, top: str) -> str:
            target_folder = remote.walk(sftp, top, to, want_dir=True)
            source = unprotected(place.cluster.pk, remote.walk(sftp, top, parts))
            return remote.rename(sftp, source, target_folder, name)

        place.run(
            audit.Action.FILE_RENAME,
            f"{paths.joined(parts)} -> {paths.joined([*to, name])}",
            move,
            repeatable=False,
        )
    except (Failure, BadPath) as exc:
        return _refused(request, place, paths.joined(parts[:-1]), exc)
    messages.success(request, f"Moved to {paths.shown(paths.joined([*to, name]))}.")
    return _back(place, paths.joined(to))


@login_required
@require_POST
@throttled("cluster-pages")
def delete(request, cluster: str, root: str):
    """Two steps: what would go (counted on the cluster), then, confirmed, its removal."""
    place = Place(request, cluster, root)
    rel = _posted(request, "path")
    signer = signing.TimestampSigner(salt="files-delete")
    target = f"{place.cluster.pk}:{place.root.key}:{rel}:{request.user.pk}"
    try:
        place.writable()
        parts = _parts(rel)
        if not parts:
            raise BadPath("Choose what to delete (not the whole folder).")
        parent_rel = paths.joined(parts[:-1])
        confirmed = request.POST.get("confirm", "")
        if not confirmed:
            found, _ = place.run(
                audit.Action.FILE_LIST,
                rel,
                lambda sftp, top: remote.survey(
                    sftp, unprotected(place.cluster.pk, remote.walk(sftp, top, parts))
                ),
            )
            return render(
                request,
                "files/confirm_delete.html",
                {
                    "place": place,
                    "rel": rel,
                    "shown": paths.shown(rel, 400),
                    "survey": found,
                    "token": signer.sign(target),
                    "parent": parent_rel,
                },
            )
        try:
            if signer.unsign(confirmed, max_age=DELETE_CONFIRM_AGE) != target:
                raise signing.BadSignature("another path")
        except signing.BadSignature:
            raise Failure(
                "That confirmation is not for this, or has expired: ask again.", 400
            ) from None
        removed = place.run(
            audit.Action.FILE_DELETE,
            rel,
            lambda sftp, top: remote.delete(
                sftp, unprotected(place.cluster.pk, remote.walk(sftp, top, parts))
            ),
            repeatable=False,
        )
    except (Failure, BadPath) as exc:
        return _refused(request, place, rel.rsplit("/", 1)[0] if "/" in rel else "", exc)
    messages.success(request, f"Deleted {paths.shown(rel)}: {removed.words()}.")
    return _back(place, parent_rel)


@login_required
@throttled("cluster-pages")
def view(request, cluster: str, root: str):
    """A text file (the first TEXT_MAX bytes) or an image (up to IMAGE_MAX) on a page."""
    place = Place(request, cluster, root)
    rel = request.GET.get("path", "")
    try:
        head, size = place.read_head(rel, remote.TEXT_MAX)
    except Failure as exc:
        return _failed(request, place, exc)
    kind = remote.image_type(head[:16])
    context: dict[str, Any] = {"place": place, "rel": rel, "shown": paths.shown(rel, 400)}
    context["size"] = size
    if kind:
        context["image"] = place.url("files-raw", path=rel)
    elif b"\x00" in head[:8192]:
        context["binary"] = True
    else:
        context["text"] = job_files.whole_utf8(head).decode(errors="replace")
        context["cut"] = size > len(head)
    context["download"] = place.url("files-download", path=rel)
    return render(request, "files/view.html", context)


@streaming_view
@login_required
@throttled("cluster-pages")
def raw_image(request, cluster: str, root: str):
    """An image's bytes for the view page: its type from its bytes, sandboxed."""
    place = Place(request, cluster, root)
    rel = request.GET.get("path", "")
    try:
        data, size = place.read_head(rel, remote.IMAGE_MAX)
    except Failure as exc:
        return HttpResponse(str(exc), status=exc.status, content_type="text/plain")
    kind = remote.image_type(data[:16])
    if not kind or size > len(data):
        return HttpResponse("Not an image the portal shows.", status=415, content_type="text/plain")
    response = HttpResponse(data, content_type=kind)
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    response["X-Content-Type-Options"] = "nosniff"
    return response


@streaming_view
@login_required
@throttled("cluster-pages")
def download(request, cluster: str, root: str):
    """A regular file, streamed in bounded SFTP reads; one byte range on request (a
    broken download resumes with ``curl -C -``)."""
    place = Place(request, cluster, root)
    rel = request.GET.get("path", "")
    try:
        parts = _parts(rel)
        path_size = place.run(
            audit.Action.FILE_DOWNLOAD,
            rel,
            lambda sftp, top: (
                (path := remote.walk(sftp, top, parts, want_dir=False)),
                *remote.regular_size(sftp, path),
            ),
        )
    except Failure as exc:
        return _failed(request, place, exc)
    path, size, mtime = path_size
    if size > settings.PORTAL_DOWNLOAD_MAX_BYTES:
        return _failed(
            request,
            place,
            Failure(
                f"It is {size:,} bytes, more than the portal serves "
                f"({settings.PORTAL_DOWNLOAD_MAX_BYTES:,}, PORTAL_DOWNLOAD_MAX_BYTES).",
                413,
            ),
        )
    return streaming.from_cluster(request, place.account, path, size, mtime, parts[-1])


@streaming_view
@login_required
@throttled("cluster-pages")
def download_zip(request, cluster: str, root: str):
    """A folder as a zip, streamed while it is read (files/zipstream.py)."""
    place = Place(request, cluster, root)
    rel = request.GET.get("path", "")
    try:
        parts = _parts(rel)
        entries = place.run(
            audit.Action.FILE_DOWNLOAD,
            f"{rel} (zip)",
            lambda sftp, top: zipstream.members(
                sftp,
                remote.walk(sftp, top, parts, want_dir=True),
                settings.PORTAL_DOWNLOAD_MAX_BYTES,
            ),
        )
    except Failure as exc:
        return _failed(request, place, exc)
    account = place.account
    body = zipstream.stream(
        entries,
        lambda path, at, n: pool.with_connection(
            account, lambda conn: job_files.read_chunk(conn, path, at, n)
        ),
        settings.PORTAL_DOWNLOAD_CHUNK_BYTES,
    )
    response = StreamingHttpResponse(
        streaming.for_server(request, body), content_type="application/zip"
    )
    name = (parts[-1] if parts else place.root.key) + ".zip"
    response["Content-Disposition"] = content_disposition_header(True, name)
    return response
