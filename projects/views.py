"""The projects a person is in, and one project's page: members and roles, what the
account spent per member and month against its limits, its fair-share in words, and its
recent runs the person may see."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, render

from jobs import access
from jobs.models import Job
from portal.throttle import throttled
from projects.models import Membership, Project
from projects.usage import UsageUnavailable, project_usage, storage

RECENT_RUNS = 20


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
        usage = project_usage(project)
    except UsageUnavailable as exc:
        usage_error = str(exc)
    try:
        quotas = storage(project)
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
        },
    )
