"""The Imports page: a person uploads an archive of their MLflow, W&B or TensorBoard runs
(tracking/uploads.py) and follows what came in."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render

from common.marks import accepts_body
from tracking import uploads
from tracking.import_views import archive_limit
from tracking.models import RunImport


@accepts_body(archive_limit)
@login_required
def imports_page(request):
    if request.method == "POST":
        upload = request.FILES.get("archive")
        if upload is None:
            messages.error(request, "Choose an archive (.tar.gz, .tar or .zip) of your runs.")
        else:
            try:
                run_import = uploads.accept(request.user, upload, upload.name or "", upload.size)
            except uploads.Refused as exc:
                messages.error(request, str(exc))
            else:
                messages.success(
                    request,
                    f"{run_import.filename} is queued for import; this page shows how it went.",
                )
        return redirect("imports")
    return render(
        request,
        "frontend/imports.html",
        {"imports": RunImport.objects.filter(owner=request.user)[:50]},
    )
