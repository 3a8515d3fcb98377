"""The comparison page: a shareable URL (``/compare/?q=&ids=&group=&baseline=&x=&band=``)
drawn from metrics/compare/data.py, the same data as ``GET /api/v1/compare/``."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from common.throttle import throttled
from jobs.models import Job
from metrics.compare.data import Options, compare
from metrics.compare.query import BadQuery
from projects import links


@login_required
@throttled("cluster-pages")
def compare_page(request):
    error, result = "", None
    try:
        options = Options.parse(request.GET)
        result = compare(request.user, options)
    except BadQuery as exc:
        error, options = str(exc), Options(q=request.GET.get("q", "")[:1000])
    shown = []
    if result and result.runs and links.enabled():  # the read-link form's runs
        shown = list(Job.objects.filter(pk__in=[run["id"] for run in result.runs]))
    return render(
        request,
        "frontend/compare.html",
        {
            **links.form_context(request.user, shown),
            "options": options,
            "error": error,
            "result": result,
            "data": result.as_dict() if result else None,
        },
        status=400 if error else 200,
    )
