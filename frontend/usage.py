"""The Usage page: GPU-hours, CPU-hours and wall hours per month (own, or for staff per
user, Slurm account and cluster), CSV for an allocation request, and GPUs held idle."""

from __future__ import annotations

import re
from datetime import date

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render

from jobs import usage
from jobs.access import sees_every_job
from jobs.models import Cluster, Job

MONTH = re.compile(r"(\d{4})-(\d{2})\Z")


def _month(raw: str | None, errors: list[str], name: str) -> date | None:
    """'2026-11' -> 1 November 2026; anything else is said and ignored."""
    if not raw:
        return None
    match = MONTH.match(raw.strip())
    if match and 1 <= int(match[2]) <= 12 and 2000 <= int(match[1]) <= 2999:
        return date(int(match[1]), int(match[2]), 1)
    errors.append(f"{name}: {raw[:20]!r} is not a month like 2026-11; ignored.")
    return None


def _next_month(day: date) -> date:
    return date(day.year + day.month // 12, day.month % 12 + 1, 1)


@login_required
def usage_page(request):
    errors: list[str] = []
    everyone = sees_every_job(request.user)
    since = _month(request.GET.get("from"), errors, "From")
    until = _month(request.GET.get("to"), errors, "To")
    runs = usage.attempts_for(request.user, everyone)
    who = (request.GET.get("user") or "").strip()[:150] if everyone else ""
    cluster = (request.GET.get("cluster") or "").strip()[:64]
    if who:
        runs = runs.filter(job__owner__username=who)
    if cluster:
        runs = runs.filter(job__cluster__name=cluster)
    rows = usage.monthly(runs, since, _next_month(until) if until else None)
    if request.GET.get("format") == "csv":
        response = HttpResponse(usage.as_csv(rows), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="usage.csv"'
        return response
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
            "errors": errors,
            "filters": {k: request.GET.get(k, "")[:20] for k in ("from", "to", "user", "cluster")},
            "query": request.GET.urlencode(),
            "clusters": Cluster.objects.filter(enabled=True).values_list("name", flat=True),
            "idle_jobs": [(job, idle[job.pk]) for job in idle_jobs],
            "idle_window": usage.Idle(0, 0, settings.PORTAL_GPU_IDLE_MINUTES).window_text,
            "idle_percent": f"{settings.PORTAL_GPU_IDLE_PERCENT:g}",
        },
    )
