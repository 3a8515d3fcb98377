"""The Usage page: GPU-hours, CPU-hours and wall hours per month (own, or for staff per
user, Slurm account and cluster), CSV for an allocation request, and GPUs held idle."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from clusters.models import Cluster
from jobs.models import Job
from projects.access import sees_every_job
from usage import hours as usage
from usage import idle_policy


@login_required
def usage_page(request):
    rows, errors = usage.query(request.user, request.GET)
    if request.GET.get("format") == "csv":
        response = HttpResponse(usage.as_csv(rows), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="usage.csv"'
        return response
    everyone = sees_every_job(request.user)
    jobs = (
        Job.objects.for_user(request.user) if everyone else Job.objects.filter(owner=request.user)
    )
    idle = usage.idle_gpu_jobs(jobs)
    idle_jobs = list(
        Job.objects.filter(pk__in=idle).select_related("owner", "cluster").order_by("pk")
    )
    return render(
        request,
        "frontend/usage.html",
        {
            "rows": rows,
            "totals": usage.totals(rows),
            "everyone": everyone,
            "errors": [f"{name.capitalize()}: {why} Ignored." for name, why in errors.items()],
            "filters": {k: request.GET.get(k, "")[:20] for k in ("from", "to", "user", "cluster")},
            "query": request.GET.urlencode(),
            "clusters": Cluster.objects.filter(enabled=True).values_list("name", flat=True),
            "idle_jobs": [(job, idle[job.pk]) for job in idle_jobs],
            "idle_window": usage.Idle(0, 0, settings.PORTAL_GPU_IDLE_MINUTES).window_text,
            "idle_percent": f"{settings.PORTAL_GPU_IDLE_PERCENT:g}",
        },
    )


@login_required
def idle_policy_page(request):
    """Staff: the jobs the partitions' idle-GPU policies warned (and will cancel when) or,
    in a dry run, would cancel; 404 for others."""
    if not sees_every_job(request.user):
        raise Http404("staff only")
    return render(request, "frontend/idle_policy.html", {"jobs": list(idle_policy.listed())})


@login_required
def efficiency_page(request):
    """Staff: GPU-hours held and idle per user and partition (?days=, 1 to 90; 7)."""
    if not sees_every_job(request.user):
        raise Http404("staff only")
    try:
        days = min(max(int(request.GET.get("days", "7")), 1), 90)
    except ValueError:
        days = 7
    since = timezone.now() - timedelta(days=days)
    return render(
        request,
        "frontend/efficiency.html",
        {
            "rows": usage.efficiency(since),
            "days": days,
            "idle_percent": f"{settings.PORTAL_GPU_IDLE_PERCENT:g}",
        },
    )
