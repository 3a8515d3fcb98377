"""Page views: short; logic lives on the models and in jobs.cluster."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import content_disposition_header, url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from frontend.forms import ClusterAccountForm
from jobs import audit, idle_policy, lifecycle, schedulers, usage
from jobs.access import sees_every_job
from jobs.cluster import files, pool, ssh
from jobs.launch import LaunchForm, launch_initial, partition_limits, tensorboard_initial
from jobs.models import ApiToken, Cluster, ClusterAccount, ContainerImage, Job, Tag
from jobs.models import annotations as tagging
from jobs.models.attempts import usage_of
from jobs.text import quoted
from portal.throttle import throttled
from proxy.access import may_open_others

PAGE_SIZE = 20
STATE_FILTERS = {"active": Job.ACTIVE_STATES, **{s: (s,) for s in Job.State.values}}


def get_job_for_user(request, pk: int) -> Job:
    """The job if the user may see it (owner or staff); 404 otherwise, never 403."""
    jobs = Job.objects.for_user(request.user).select_related(
        "image", "partition", "cluster", "owner"
    )
    return get_object_or_404(jobs, pk=pk)


def wants_json(request) -> bool:
    return "application/json" in request.headers.get("Accept", "")


@login_required
def dashboard(request):
    # The session link with each row (a notebook's "Open" button), not one query per row.
    jobs = Job.objects.for_user(request.user).select_related(
        "image", "partition", "cluster", "owner", "session"
    )
    state = request.GET.get("state", "")
    if state in STATE_FILTERS:
        jobs = jobs.filter(state__in=STATE_FILTERS[state])
    # An experiment's trials run as many jobs (20 configurations x 5 folds is 100): they
    # are on its page, and listed here only when asked for.
    trials = request.GET.get("trials") == "1"
    hidden_trials = 0
    if not trials:
        hidden_trials = jobs.filter(trial__isnull=False).count()
        jobs = jobs.filter(trial__isnull=True)
    page = Paginator(jobs, PAGE_SIZE).get_page(request.GET.get("page"))
    template = (
        "frontend/_job_table.html"
        if request.GET.get("fragment") == "table"
        else "frontend/dashboard.html"
    )
    return render(
        request,
        template,
        {
            "page": page,
            "state": state,
            "trials": trials,
            "hidden_trials": hidden_trials,
            "states": Job.State.choices,
            "show_owner": sees_every_job(request.user),
        },
    )


@login_required
def job_row(request, pk: int):
    job = get_job_for_user(request, pk)
    return render(
        request, "frontend/_job_row.html", {"job": job, "show_owner": sees_every_job(request.user)}
    )


def limits_with_capabilities() -> dict:
    """Each cluster's partition limits (jobs.launch.partition_limits) with what its
    scheduler can do (its adapter's capabilities): the page asks these, never the name."""
    limits = partition_limits()
    for cluster in limits.values():
        cluster["capabilities"] = schedulers.adapter(cluster["scheduler"]).capabilities()
    return limits


@login_required
def launch(request):
    if request.method == "POST":
        form = LaunchForm(request.POST, user=request.user)
        if form.is_valid():
            job = lifecycle.launch(form)
            messages.success(
                request, f"Job {job.pk} is queued; it will be submitted to {job.cluster.name} now."
            )
            if job.image.deprecated:
                messages.warning(request, job.image.deprecation_text)
            return redirect("job-detail", pk=job.pk)
    else:
        source = None
        if request.GET.get("from"):
            source = get_job_for_user(request, _int_or_404(request.GET["from"]))
        initial = launch_initial(request.user, source)
        if request.GET.get("tensorboard_for"):
            runs_of = get_job_for_user(request, _int_or_404(request.GET["tensorboard_for"]))
            initial.update(tensorboard_initial(runs_of))
        form = LaunchForm(initial=initial, user=request.user)
        if source is not None:
            form.source = source  # the page shows what the run was reproduced from
        if source is not None and not source.image.enabled:
            # Said where the image is chosen, instead of a silently empty choice.
            form.image_notice = (
                f"Job {source.pk} ran {source.image}, which the administrators have disabled: "
                "choose another image; everything else is as it was."
            )
    images = ContainerImage.objects.offered().prefetch_related("tags")
    return render(
        request,
        "frontend/launch.html",
        {
            "form": form,
            "images": images,
            "limits": limits_with_capabilities(),
            "tags": Tag.objects.filter(images__enabled=True).distinct(),
            "gpu_images": [i.slug for i in images if i.supports_gpu],
            "image_kinds": {i.slug: i.kinds for i in images},
        },
    )


@login_required
def job_detail(request, pk: int):
    job = get_job_for_user(request, pk)
    # ?fragment=live: the parts of the page that follow the job (portal.js refreshes them).
    template = (
        "frontend/_job_live.html"
        if request.GET.get("fragment") == "live"
        else "frontend/job_detail.html"
    )
    context = {
        "job": job,
        "events": job.events.all(),
        "usage": usage_of(job),
        "may_annotate": job.owner_id == request.user.pk,
        "may_open_session": job.owner_id == request.user.pk or may_open_others(request.user),
        "max_note_chars": tagging.MAX_NOTE_CHARS,
    }
    if job.state == Job.State.RUNNING and job.gpus:
        context["idle_gpus"] = usage.idle_gpu_jobs(Job.objects.filter(pk=job.pk)).get(job.pk)
        context["idle_warning"] = idle_policy.warning_of(job)
        context["may_keep_gpus"] = job.owner_id == request.user.pk
    if template == "frontend/job_detail.html":
        context["compare_runs"] = (
            Job.objects.filter(owner=job.owner, metric_series__isnull=False)
            .exclude(pk=job.pk)
            .distinct()
            .select_related("image")[:50]
        )
    return render(request, template, context)


@login_required
@require_POST
def job_annotate(request, pk: int):
    """Its owner adds or removes a tag, or saves the note (staff only see them)."""
    job = get_job_for_user(request, pk)
    if job.owner_id != request.user.pk:
        messages.error(request, "Only the job's owner changes its tags and note.")
        return redirect("job-detail", pk=job.pk)
    try:
        if "notes" in request.POST:
            job.set_notes(request.POST["notes"].replace("\r\n", "\n"))
            messages.success(request, "Note saved.")
        elif request.POST.get("add_tags", "").strip():
            job.change_tags(add=tagging.clean_tags(request.POST["add_tags"]))
        elif request.POST.get("remove_tag"):
            job.change_tags(remove=[request.POST["remove_tag"]])
    except tagging.BadAnnotation as exc:
        messages.error(request, str(exc))
    return redirect(f"{reverse('job-detail', args=[job.pk])}#annotations")


@login_required
def job_diff(request, pk: int):
    """The git diff kept at submit, as plain text to read (never run)."""
    job = get_job_for_user(request, pk)
    if not job.git_diff:
        raise Http404("No diff was kept for this job.")
    response = HttpResponse(job.git_diff, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'inline; filename="job-{job.pk}.diff"'
    return response


@login_required
@require_POST
def job_release(request, pk: int):
    job = get_job_for_user(request, pk)
    if lifecycle.release(job, by=request.user):
        messages.info(request, f"Releasing job {job.pk}.")
    else:
        messages.info(request, f"Job {job.pk} is not held.")
    return redirect("job-detail", pk=job.pk)


@login_required
@require_POST
def job_keep_gpus(request, pk: int):
    """The owner's one "Keep it" against the idle-GPU policy's cancellation."""
    job = get_job_for_user(request, pk)
    if until := idle_policy.keep(job, request.user):
        messages.info(
            request,
            f"Kept: job {job.pk} will be cancelled at {idle_policy.when(until)} "
            "if its GPUs stay idle.",
        )
    elif job.owner_id != request.user.pk:
        messages.error(request, "Only the job's owner can keep it.")
    else:
        messages.error(request, f"Job {job.pk} cannot be kept (not warned, or kept once already).")
    return redirect("job-detail", pk=job.pk)


@login_required
@require_POST
def job_cancel(request, pk: int):
    job = get_job_for_user(request, pk)
    if lifecycle.cancel(job, by=request.user):
        message = f"Cancelling job {job.pk}."
    else:
        message = f"Job {job.pk} has already ended ({job.get_state_display().lower()})."
    if wants_json(request):
        return JsonResponse({"message": message})
    messages.info(request, message)
    next_url = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(
        next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ) or not next_url.startswith("/"):
        next_url = "dashboard"
    return redirect(next_url)


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
        path, size = _on_work_dir(
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
    chunk = settings.PORTAL_DOWNLOAD_CHUNK_BYTES

    def chunks():
        sent = 0
        while sent < size:
            want = min(chunk, size - sent)
            data = pool.with_connection(
                account, lambda conn, at=sent, n=want: files.read_chunk(conn, path, at, n)
            )
            if not data:
                return  # shorter now than when the download began
            sent += len(data)
            yield data

    response = StreamingHttpResponse(chunks(), content_type="application/octet-stream")
    response["Content-Length"] = str(size)
    response["Content-Disposition"] = content_disposition_header(True, path.rsplit("/", 1)[-1])
    return response


@login_required
def account(request):
    form = ClusterAccountForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        cluster_account = form.save(commit=False)
        cluster_account.generate_key_pair()  # (only key-pair clusters are offered)
        cluster_account.save()
        audit.record(
            audit.Action.ACCOUNT_CREATE,
            audit.Outcome.OK,
            user=request.user,
            account=cluster_account,
            target=str(cluster_account),
            message="typed by the person; proven by installing its key",
        )
        messages.success(request, "Key pair created: install the public key below on the cluster.")
        return redirect("account")
    accounts = ClusterAccount.objects.filter(user=request.user).select_related("cluster")
    context = {
        "accounts": accounts,
        "form": form,
        # Certificate clusters the person has no account on: theirs comes from sign-in or
        # an administrator, and the page says so instead of offering a name to type.
        "certificate_clusters": Cluster.objects.filter(
            enabled=True,
            login_mode=Cluster.LoginMode.PER_USER,
            ssh_auth=Cluster.SshAuth.CERTIFICATE,
        ).exclude(accounts__user=request.user),
        "tokens": ApiToken.objects.filter(user=request.user),
        "token_max_days": settings.PORTAL_API_TOKEN_MAX_DAYS,
        # Shown once, straight after creation (kept in the session only until this render).
        "new_token": request.session.pop("new_api_token", None),
        "new_token_name": request.session.pop("new_api_token_name", None),
    }
    return render(request, "frontend/account.html", context)


@login_required
@require_POST
def token_create(request):
    name = request.POST.get("name", "").strip()[:100]
    days = request.POST.get("days", "")
    if not name or (days and not days.isdigit()):
        messages.error(request, "Give the token a name (and a number of days).")
        return redirect("account")
    try:
        row, token = ApiToken.issue(
            request.user, name, int(days) if days else None, request.POST.getlist("scopes")
        )
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect("account")
    audit.token_changed(audit.Action.TOKEN_CREATE, row, by=request.user)
    request.session["new_api_token"] = token
    request.session["new_api_token_name"] = row.name
    return redirect("account")


@login_required
@require_POST
def token_revoke(request, pk: int):
    token = get_object_or_404(ApiToken.objects.filter(user=request.user), pk=pk)
    if token.revoke():
        audit.token_changed(audit.Action.TOKEN_REVOKE, token, by=request.user)
    messages.info(request, "Token revoked.")
    return redirect("account")


@login_required
@require_POST
@throttled("cluster-pages", json=True)
def account_test(request, pk: int):
    cluster_account = get_object_or_404(ClusterAccount.objects.filter(user=request.user), pk=pk)
    try:
        with audit.action(
            audit.Action.ACCOUNT_TEST, user=request.user, account=cluster_account, target="whoami"
        ):
            who = pool.with_connection(
                cluster_account, lambda conn: conn.run(["whoami"])
            ).stdout.strip()
    except ssh.ClusterError as exc:
        return JsonResponse({"ok": False, "message": str(exc)})
    return JsonResponse(
        {"ok": True, "message": f"Connected to {cluster_account.cluster.name} as {who}."}
    )


def _int_or_404(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise Http404("no such job") from None
