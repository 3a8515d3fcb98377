"""A job's work directory on its page: browsed and downloaded over SFTP as the job's
account, for whoever may see the job (projects/access.py through ``get_job_for_user``: its
owner, staff, its project's members). Links and FIFOs are shown for what they are and
never followed, names are shown escaped, the portal's secrets are never listed or
served, and every read is audited. A file downloads with HTTP ranges
(files/streaming.py), like the file manager's."""

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode

from clusters import files, pool, ssh
from common import paths
from common.marks import streaming_view
from common.text import quoted
from common.throttle import throttled
from files import streaming
from identity import audit
from jobs.shortcuts import get_job_for_user
from projects import roots


def _work_dir_failure(request, job, message: str, status: int):
    return render(request, "files/job_files.html", {"job": job, "error": message}, status=status)


class _WorkDirFailure(Exception):
    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def _on_work_dir(request, job, what: str, rel: str, operation, missing: str):
    """``operation(conn, work_dir)`` on the job's account, audited as ``what`` on ``rel``
    for the user who asked; what can go wrong becomes a _WorkDirFailure with the message
    and status the page shows."""
    if not job.work_dir or job.cluster_account is None:
        raise _WorkDirFailure("The job has no work directory yet.", 404)
    try:
        with audit.action(
            what,
            user=request.user,
            account=job.cluster_account,
            target=f"job {job.pk} {rel or '.'}",
        ):
            return pool.with_connection(
                job.cluster_account, lambda conn: operation(conn, job.work_dir)
            )
    except (files.BadPath, files.NotARegularFile) as exc:
        raise _WorkDirFailure(str(exc), 400) from None
    except FileNotFoundError:
        raise _WorkDirFailure(missing, 404) from None
    except (ssh.ClusterError, OSError) as exc:
        raise _WorkDirFailure(f"Could not reach it on {job.cluster.name}: {exc}", 502) from None


@login_required
@throttled("cluster-pages")
def job_files(request, pk: int):
    """A directory of the job's work directory: outputs, checkpoints, logs (over SFTP;
    links and FIFOs shown for what they are, never followed; the portal's secrets hidden)."""
    job = get_job_for_user(request, pk)
    rel = request.GET.get("path", "")
    try:
        parts = files.work_path_parts(rel)
        entries, total = _on_work_dir(
            request,
            job,
            audit.Action.FILE_LIST,
            rel,
            lambda conn, work_dir: files.list_work_dir(conn, work_dir, rel),
            "No such directory (any more).",
        )
    except files.BadPath as exc:
        return _work_dir_failure(request, job, str(exc), 400)
    except _WorkDirFailure as exc:
        return _work_dir_failure(request, job, str(exc), exc.status)
    here = "/".join(parts)
    crumbs = [("/".join(parts[: i + 1]), paths.shown(part)) for i, part in enumerate(parts)]
    rows = [
        {"entry": e, "shown": paths.shown(e.name), "rel": f"{here}/{e.name}" if here else e.name}
        for e in entries
    ]
    return render(
        request,
        "files/job_files.html",
        {
            "job": job,
            "rel": here,
            "crumbs": crumbs,
            "rows": rows,
            "hidden": total - len(entries),
            "manager": _in_file_manager(request.user, job, here),
            # A file or folder of one's own run, registered as a model from its page.
            "may_register": job.owner_id == request.user.pk,
        },
    )


def _in_file_manager(user, job, rel: str) -> str:
    """The file manager's address of this folder, for the job's owner when the work
    directory lies in one of their roots there ("" otherwise: a colleague sees a job's
    files here, through the project's rule, never through the file manager)."""
    if job.owner_id != user.pk or not job.work_dir:
        return ""
    try:
        account = roots.account_for(job.cluster, user)
    except roots.NoAccess:
        return ""
    for root in roots.roots_of(job.cluster, account):
        if root.read_only or not job.work_dir.startswith(f"{root.path}/"):
            continue
        inside = job.work_dir[len(root.path) + 1 :] + (f"/{rel}" if rel else "")
        base = reverse("files-browse", args=[job.cluster.name, root.key])
        return f"{base}?{urlencode({'path': inside})}"
    return ""


@streaming_view
@login_required
@throttled("cluster-pages")
def job_file_download(request, pk: int):
    """One regular file of the job's work directory, streamed in bounded SFTP reads."""
    job = get_job_for_user(request, pk)
    rel = request.GET.get("path", "")
    account = job.cluster_account
    try:
        path, size, mtime = _on_work_dir(
            request,
            job,
            audit.Action.FILE_DOWNLOAD,
            rel,
            lambda conn, work_dir: files.work_file_size(conn, work_dir, rel),
            "No such file (any more).",
        )
    except _WorkDirFailure as exc:
        return _work_dir_failure(request, job, str(exc), exc.status)
    if size > settings.PORTAL_DOWNLOAD_MAX_BYTES:
        return _work_dir_failure(
            request,
            job,
            f"{quoted(rel, 120)} is {size:,} bytes, more than the portal serves "
            f"({settings.PORTAL_DOWNLOAD_MAX_BYTES:,}); copy it with scp or rsync from "
            f"{job.cluster.ssh_host}:{path}",
            413,
        )
    return streaming.from_cluster(request, account, path, size, mtime, path.rsplit("/", 1)[-1])
