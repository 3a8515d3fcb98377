"""The job pages: the dashboard, the launch form, a job's page and what its owner does
there (annotate, release, keep its GPUs, cancel)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from catalog.models import ContainerImage, SessionApp, Tag
from clusters.models import Cluster
from common.throttle import throttled
from frontend.rows import Rows, with_csrf
from frontend.views.common import (
    get_job_for_user,
    get_job_to_act,
    get_job_to_relaunch,
    int_or_404,
    wants_json,
)
from frontend.views.ssh import ssh_context
from jobs import lifecycle, listing
from jobs.display import when
from jobs.launch import LaunchForm, calendar, launch_initial, partition_limits, tensorboard_initial
from jobs.models import Job
from jobs.models import annotations as tagging
from jobs.models.attempts import usage_of
from projects import access, links
from projects.access import sees_every_job
from proxy import access as session_access
from proxy import sharing
from proxy.access import may_open_others
from registry import service as registry
from registry.models import ModelVersion
from retention import service as retention
from schedulers import registry as schedulers
from usage import hours as usage
from usage import idle_policy, rightsize

PAGE_SIZE = 20
# What "Launch again with these resources" may set on the launch form.
RESIZABLE = ("gpus", "cpus", "memory_gb")
STATE_FILTERS = {"active": Job.ACTIVE_STATES, **{s: (s,) for s in Job.State.values}}


@login_required
def dashboard(request):
    # The session link with each row (a notebook's "Open" button), not one query per row.
    # Your own jobs (staff: everyone's), or a project's (its members' that are not private).
    projects = access.projects_of(request.user)
    project = next((p for p in projects if str(p.pk) == request.GET.get("project")), None)
    if project is not None:
        jobs = Job.objects.visible_to(request.user).filter(project=project)
    else:
        jobs = Job.objects.for_user(request.user)
    jobs = jobs.select_related(*Rows.RELATED).prefetch_related("app").defer(*Rows.UNREAD)
    state = request.GET.get("state", "")
    if state in STATE_FILTERS:
        jobs = jobs.filter(state__in=STATE_FILTERS[state])
    # An experiment's trials run as many jobs (20 configurations x 5 folds is 100): they
    # are on its page, and listed here only when asked for.
    trials = request.GET.get("trials") == "1"
    show_owner = sees_every_job(request.user) or project is not None

    def listed() -> dict:
        """The page's rows and counts (kept in jobs/listing.py's cache)."""
        hidden_trials = 0
        if trials:
            paginator = Paginator(jobs, PAGE_SIZE)
        else:
            # The rows listed and the trials' jobs left out, counted in one pass.
            # COUNT(state), never null: a column of the index (owner, state, trial), so
            # the counts are read from it alone (COUNT(id) would read every row).
            counted = jobs.aggregate(
                listed=Count("state", filter=Q(trial__isnull=True)),
                hidden=Count("state", filter=Q(trial__isnull=False)),
            )
            hidden_trials = counted["hidden"]
            paginator = Paginator(jobs.filter(trial__isnull=True), PAGE_SIZE)
            paginator.count = counted["listed"]  # (a cached property: not counted again)
        page = paginator.get_page(request.GET.get("page"))
        return {
            "count": paginator.count,
            "number": page.number,
            "hidden": hidden_trials,
            "rows": Rows(show_owner=show_owner).page(page.object_list),
        }

    shown = listing.cached(
        request.user,
        f"dashboard|{state}|{trials}|{project.pk if project else ''}|{request.GET.get('page')}",
        listed,
    )
    # The page of the cached count (its rows are the cached HTML).
    page = Paginator(range(shown["count"]), PAGE_SIZE).get_page(shown["number"])
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
            "rows": with_csrf(request, shown["rows"]),
            "state": state,
            "trials": trials,
            "hidden_trials": shown["hidden"],
            "states": Job.State.choices,
            "show_owner": show_owner,
            "projects": projects,
            "project": project,
        },
    )


@login_required
def job_row(request, pk: int):
    job = get_job_for_user(request, pk)
    show_owner = sees_every_job(request.user) or job.owner_id != request.user.pk
    return HttpResponse(with_csrf(request, Rows(show_owner=show_owner).row(job)))


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
            if clash := calendar.for_job(job, request.user):
                messages.warning(request, clash.text)
            if job.image.deprecated:
                messages.warning(request, job.image.deprecation_text)
            return redirect("job-detail", pk=job.pk)
    else:
        source = None
        if request.GET.get("from"):
            source = get_job_to_relaunch(request, int_or_404(request.GET["from"]))
        initial = launch_initial(request.user, source)
        if source is not None:
            # "Launch again with these resources" (a finished job's right-sizing advice).
            for name in RESIZABLE:
                raw = request.GET.get(name, "")
                if raw.isascii() and raw.isdigit() and len(raw) <= 4:
                    initial[name] = int(raw)
        if request.GET.get("tensorboard_for"):
            runs_of = get_job_to_relaunch(request, int_or_404(request.GET["tensorboard_for"]))
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
    apps = app_choices(form)
    return render(
        request,
        "frontend/launch.html",
        {
            "form": form,
            "images": images,
            "limits": limits_with_capabilities(),
            "tags": Tag.objects.filter(images__enabled=True).distinct(),
            "gpu_images": [i.slug for i in images if i.supports_gpu],
            # An app runs in its own image: the kind is offered whatever image is chosen.
            "image_kinds": {i.slug: i.kinds + (["app"] if apps else []) for i in images},
            "apps": apps,
        },
    )


def app_choices(form: LaunchForm) -> list[dict]:
    """The apps the catalog offers, each with its fields as the page shows them (the
    values sent back when the page comes back with an error)."""
    chosen = form.data.get("app") if form.is_bound else None
    # "Launch again" of an app's job: its app and values, as it ran.
    again = form.initial.get("app") if not form.is_bound else None
    again_values = form.initial.get("app_values") or {}
    offered = []
    for app in SessionApp.objects.offered():
        try:
            specs = app.field_specs()
        except ValueError:
            continue  # the admin's check refuses such fields; an app saved before is left out
        fields = []
        for spec in specs:
            shown = spec.as_dict()
            key = f"app_field_{spec.name}"
            if chosen == app.slug and key in form.data:
                shown["value"] = form.data.get(key)
            elif spec.type == "boolean" and chosen == app.slug:
                shown["value"] = ""
            elif again == app and spec.name in again_values:
                shown["value"] = again_values[spec.name]
            else:
                shown["value"] = "" if spec.default is None else spec.default
            fields.append(shown)
        offered.append({"app": app, "fields": fields})
    return offered


@login_required
@throttled("cluster-pages", json=True)
def launch_calendar(request):
    """The chosen cluster's maintenance reservations, for the launch page's script (read
    after the page shows, so the form never waits on a cluster)."""
    cluster = Cluster.objects.filter(enabled=True, name=request.GET.get("cluster", "")).first()
    if cluster is None:
        raise Http404("no such cluster")
    return JsonResponse({"maintenance": calendar.for_page(cluster, request.user)})


def session_context(user, job: Job) -> dict:
    """The session card's parts: whether this person opens it (owner, a share, the
    permission), and for its owner (and the project's managers) its shares and who else
    opened it."""
    session = getattr(job, "session", None)
    if session is None:
        return {}
    context: dict[str, object] = {"may_open_session": session_access.may_open(user, session)}
    if sharing.may_unshare(user, session):
        context["session_shares"] = list(session.shares.select_related("user"))
        context["may_unshare"] = True
        context["session_opens"] = session_access.opens_by_others(session)
    context["may_share"] = sharing.may_share(user, session)
    return context


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
        "may_act": access.may_act(request.user, job.owner_id),
        "may_relaunch": job.kind != Job.Kind.IMPORTED
        and access.may_relaunch(request.user, job.owner_id, job.project_id, job.private),
        "may_see_project": job.project_id is not None
        and access.may_see_project(request.user, job.project_id),
        "may_open_session": job.owner_id == request.user.pk or may_open_others(request.user),
        "max_note_chars": tagging.MAX_NOTE_CHARS,
    }
    if job.has_session:
        context.update(session_context(request.user, job))
    context.update(ssh_context(request.user, job))
    context.update(links.form_context(request.user, [job]))
    if job.is_final and template == "frontend/job_detail.html":
        context["fit"] = rightsize.fit_of(job)
    if job.state == Job.State.PENDING and context["may_act"] and waits_for_nodes(job):
        # Waiting behind a maintenance: how long a limit starts before it (one click).
        context["maintenance"] = calendar.for_job(job, request.user)
    if job.state == Job.State.RUNNING and job.gpus:
        context["idle_gpus"] = usage.idle_gpu_jobs(Job.objects.filter(pk=job.pk)).get(job.pk)
        context["idle_warning"] = idle_policy.warning_of(job)
        context["may_keep_gpus"] = job.owner_id == request.user.pk
    if template == "frontend/job_detail.html" and job.work_dir:
        context["registered"] = list(
            ModelVersion.objects.filter(job=job, model__in=registry.visible(request.user))
            .select_related("model")
            .prefetch_related("aliases")[:50]
        )
        context["may_register"] = job.owner_id == request.user.pk
        context["register_path"] = request.GET.get("register", "")[:4000]
    if template == "frontend/job_detail.html" and job.is_final and job.work_dir:
        context["retention"] = {
            "plan": job.retention_plans.first(),
            "policy": retention.policy_of(job),
            "may_plan": retention.may_plan(request.user, job),
        }
    if template == "frontend/job_detail.html":
        context["compare_runs"] = (
            Job.objects.visible_to(request.user)
            .filter(owner=job.owner, metric_series__isnull=False)
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
        if "private" in request.POST:
            job.set_private(request.POST["private"] == "on")
            messages.success(
                request,
                "Only you (and the portal's staff) see this job now."
                if job.private
                else "The members of its project see this job now.",
            )
        elif "notes" in request.POST:
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
@require_POST
def job_retention(request, pk: int):
    """Its owner asks for a dry run of the retention policy, or applies the one listed."""
    job = get_job_for_user(request, pk)
    try:
        if request.POST.get("action") == "apply":
            plan = job.retention_plans.filter(pk=request.POST.get("plan") or 0).first()
            if plan is None:
                raise retention.RetentionError("No such plan.")
            retention.apply(request.user, plan)
            messages.success(request, "Deleting the listed checkpoints: this page says when.")
        else:
            retention.ask(request.user, job)
            messages.success(request, "Listing the checkpoints: this page shows the dry run.")
    except retention.RetentionError as exc:
        messages.error(request, str(exc))
    return redirect(f"{reverse('job-detail', args=[job.pk])}#checkpoints")


@login_required
def job_diff(request, pk: int):
    """The git diff kept at submit, as plain text to read (never run)."""
    job = get_job_for_user(request, pk)
    if not job.git_diff:
        raise Http404("No diff was kept for this job.")
    response = HttpResponse(job.git_diff, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'inline; filename="job-{job.pk}.diff"'
    return response


def waits_for_nodes(job: Job) -> bool:
    """A job that waits for nodes a reservation may hold (Slurm's ReqNodeNotAvail, in the
    words the sync keeps: "the requested nodes are not available (maintenance?)")."""
    reason = job.pending_reason or ""
    return "not available" in reason or "maintenance" in reason or "ReqNodeNotAvail" in reason


@login_required
@require_POST
def job_shorten(request, pk: int):
    """Its owner lowers a pending job's time limit (to start before a maintenance)."""
    job = get_job_to_act(request, pk)
    raw = request.POST.get("minutes", "")
    minutes = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 7 else 0
    if lifecycle.lower_time_limit(job, minutes, by=request.user):
        messages.info(request, f"Lowering job {job.pk}'s time limit to {minutes} minutes.")
    else:
        messages.error(
            request,
            f"Job {job.pk}'s time limit was not changed: only a pending job's, and only lower "
            f"than its {job.time_limit_minutes} minutes.",
        )
    return redirect("job-detail", pk=job.pk)


@login_required
@require_POST
def job_release(request, pk: int):
    job = get_job_to_act(request, pk)
    if lifecycle.release(job, by=request.user):
        messages.info(request, f"Releasing job {job.pk}.")
    else:
        messages.info(request, f"Job {job.pk} is not held.")
    return redirect("job-detail", pk=job.pk)


@login_required
@require_POST
def job_keep_gpus(request, pk: int):
    """The owner's one "Keep it" against the idle-GPU policy's cancellation."""
    job = get_job_to_act(request, pk)
    if until := idle_policy.keep(job, request.user):
        messages.info(
            request,
            f"Kept: job {job.pk} will be cancelled at {when(until)} if its GPUs stay idle.",
        )
    elif job.owner_id != request.user.pk:
        messages.error(request, "Only the job's owner can keep it.")
    else:
        messages.error(request, f"Job {job.pk} cannot be kept (not warned, or kept once already).")
    return redirect("job-detail", pk=job.pk)


@login_required
@require_POST
def job_cancel(request, pk: int):
    job = get_job_to_act(request, pk)
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
