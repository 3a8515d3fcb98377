"""What a job left on its cluster, read over SSH for the page: its log tail, and its
work directory browsed and downloaded over SFTP (every read audited)."""

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, JsonResponse
from django.shortcuts import render

from files import streaming
from frontend.views.common import get_job_for_user
from jobs import audit
from jobs.cluster import files, pool, ssh
from jobs.text import quoted
from portal.throttle import throttled


@login_required
@throttled("cluster-pages", json=True)
def job_logs(request, pk: int, stream: str):
    job = get_job_for_user(request, pk)
    if stream not in files.LOG_STREAMS:
        raise Http404("no such log")
    try:
        tail = audit.read_job_log(request.user, job, stream)
    except ssh.ClusterError as exc:
        return JsonResponse(
            {"error": f"Could not read the log from {job.cluster.name}: {exc}"}, status=502
        )
    return JsonResponse({"text": tail.text, "size": tail.size, "truncated": tail.truncated})


def _work_dir_failure(request, job, message: str, status: int):
    return render(request, "frontend/job_files.html", {"job": job, "error": message}, status=status)


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
    crumbs = [("/".join(parts[: i + 1]), part) for i, part in enumerate(parts)]
    return render(
        request,
        "frontend/job_files.html",
        {
            "job": job,
            "rel": "/".join(parts),
            "crumbs": crumbs,
            "entries": entries,
            "hidden": total - len(entries),
        },
    )


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
