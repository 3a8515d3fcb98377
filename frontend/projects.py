"""The projects a person is in, and one project's page: members and roles, what the
account spent per member and month against its limits, its fair-share in words, and its
recent runs the person may see."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from common.throttle import throttled
from experiments.models import Experiment
from identity import audit
from jobs.models import Job
from projects import access, links, signals
from projects.models import Membership, Project, ReadLink, Role
from projects.usage import UsageUnavailable, project_usage, storage

RECENT_RUNS = 20
# What a manager may set as the role of the account's users (coordinators stay managers).
ROLE_CHOICES = [("", "The portal's default")] + [
    (role.value, role.label) for role in (Role.NONE, Role.VIEWER, Role.MEMBER)
]


@login_required
def project_list(request):
    return render(request, "projects/list.html", {"projects": access.projects_of(request.user)})


@login_required
@throttled("cluster-pages")
def project_detail(request, pk: int):
    project = get_object_or_404(Project.objects.select_related("cluster"), pk=pk)
    if not access.may_see_project(request.user, project.pk):
        raise Http404("no such project")
    members = list(
        Membership.objects.filter(project=project).select_related("user").order_by("user__username")
    )
    usage, usage_error, quotas, storage_error = None, "", [], ""
    try:
        usage = project_usage(project, request.user)
    except UsageUnavailable as exc:
        usage_error = str(exc)
    try:
        quotas = storage(project, request.user)
    except UsageUnavailable as exc:
        storage_error = str(exc)
    runs = (
        Job.objects.visible_to(request.user)
        .filter(project=project)
        .select_related("owner", "image", "partition", "cluster")[:RECENT_RUNS]
    )
    return render(
        request,
        "projects/detail.html",
        {
            "project": project,
            "role": access.role_in(request.user, project.pk) or "staff",
            "members": members,
            "usage": usage,
            "usage_error": usage_error,
            "quotas": quotas,
            "storage_error": storage_error,
            "reads_storage": bool(project.cluster.quota_files),
            "runs": runs,
            "may_manage": may_manage(request.user, project),
            "role_choices": ROLE_CHOICES,
        },
    )


def may_manage(user, project: Project) -> bool:
    """The project's managers (and staff) change its defaults."""
    return access.sees_every_job(user) or access.role_in(user, project.pk) == Role.MANAGER


@login_required
@require_POST
def project_defaults(request, pk: int):
    """A manager sets the role of the account's users (their colleagues' runs follow at
    once: pages ask roles per request, shared sessions' openers are pushed)."""
    project = get_object_or_404(Project.objects.select_related("cluster"), pk=pk)
    if not access.may_see_project(request.user, project.pk) or not may_manage(
        request.user, project
    ):
        raise Http404("no such project")
    role = request.POST.get("default_role", "")
    allowed = {value for value, _ in ROLE_CHOICES}
    if role not in allowed:
        messages.error(request, "Choose one of the roles offered.")
        return redirect("project-detail", pk=project.pk)
    if role != project.default_role:
        before = project.default_role or "portal default"
        Project.objects.filter(pk=project.pk).update(default_role=role)
        audit.record(
            audit.Action.PROJECT_DEFAULTS,
            audit.Outcome.OK,
            user=request.user,
            cluster=project.cluster,
            target=f"project {project.name}",
            message=f"members' role {before} -> {role or 'portal default'}",
        )
        signals.members_changed.send(sender=Project, cluster=project.cluster)
        messages.success(request, "Saved: the account's users have that role from now on.")
    return redirect("project-detail", pk=project.pk)


# --- read links for people outside a project (projects/links.py) ----------------------


def _ids(values: list[str]) -> list[int]:
    return [int(v) for v in values[: settings.PORTAL_COMPARE_MAX_RUNS + 1] if v.isdigit()]


@login_required
@require_POST
def link_new(request):
    """Make a read link to the runs named (``job``, once or more) or an experiment."""
    if not links.enabled():
        raise Http404("read links are off")
    experiment = None
    if request.POST.get("experiment", "").isdigit():
        experiment = get_object_or_404(
            Experiment.objects.visible_to(request.user), pk=int(request.POST["experiment"])
        )
    jobs = list(
        Job.objects.visible_to(request.user).filter(pk__in=_ids(request.POST.getlist("job")))
    )
    days = int(request.POST["days"]) if request.POST.get("days", "").isdigit() else 7
    try:
        link, token = links.make(request.user, jobs=jobs, experiment=experiment, days=days)
    except links.Refused as exc:
        messages.error(request, str(exc))
        return redirect("read-links")
    request.session["made_read_link"] = {"id": link.pk, "url": links.url_of(token)}
    return redirect("read-links")


@login_required
def link_list(request):
    if not links.enabled():
        raise Http404("read links are off")
    made = request.session.pop("made_read_link", None)
    mine = ReadLink.objects.live().filter(created_by=request.user).prefetch_related("readers__user")
    return render(request, "projects/links.html", {"links": mine, "made": made})


@login_required
@require_POST
def link_revoke(request, pk: int):
    if not links.revoke(request.user, pk):
        raise Http404("no such link")
    messages.success(request, "Link revoked: whoever opened it no longer reads those runs.")
    return redirect("read-links")


@login_required
def link_open(request, token: str):
    link = links.open_link(request.user, token)
    if link is None:
        return render(request, "projects/link_gone.html", status=404)
    return redirect(link.path)
