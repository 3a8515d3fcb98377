"""Registry pages: the models a person sees, a model's versions and aliases (set,
protected, removed by the roles service.py says), a version's files, run and metrics;
registering a run's files from its page."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count, Prefetch
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from endpoints import service as endpoint_service
from endpoints.models import Endpoint
from frontend.views.common import get_job_for_user
from metrics.models import MetricSeries
from registry import api, service
from registry.models import ModelAlias, ModelVersion, RegisteredModel


def visible_model(request, pk: int) -> RegisteredModel:
    found = (
        service.visible(request.user)
        .select_related("owner", "project")
        .prefetch_related(
            Prefetch("aliases", ModelAlias.objects.select_related("version", "set_by")),
            Prefetch(
                "versions",
                ModelVersion.objects.select_related("cluster", "job", "run", "registered_by"),
            ),
        )
        .filter(pk=pk)
        .first()
    )
    if found is None:
        raise Http404("No such model.")
    return found


@login_required
def models(request):
    rows = (
        service.visible(request.user)
        .select_related("owner", "project")
        .prefetch_related(Prefetch("aliases", ModelAlias.objects.select_related("version")))
        .annotate(version_count=Count("versions"))
        .order_by("name")[:500]
    )
    return render(request, "frontend/models.html", {"rows": rows})


@login_required
def model_detail(request, pk: int):
    model = visible_model(request, pk)
    return render(
        request,
        "frontend/model_detail.html",
        {
            "model": model,
            "versions": list(model.versions.all()[:200]),
            "may_change": service.may_change(request.user, model),
            "may_protect": service.may_set_protected(request.user, model),
        },
    )


@login_required
def version_detail(request, pk: int, version: int):
    model = visible_model(request, pk)
    found = next((v for v in model.versions.all() if v.version == version), None)
    if found is None:
        raise Http404("No such version.")
    curves = []
    if found.job_id is not None:
        curves = list(
            MetricSeries.objects.filter(job_id=found.job_id, system=False, rank=0)
            .order_by("key")
            .values("key", "points", "last_step", "last_value")[:50]
        )
    return render(
        request,
        "frontend/model_version.html",
        {
            "model": model,
            "version": found,
            "aliases": [a for a in model.aliases.all() if a.version_id == found.pk],
            "curves": curves,
            "manifest": found.manifest[:1000],
            "endpoints": list(
                endpoint_service.visible(request.user).filter(version=found).order_by("name")[:50]
            ),
            "may_serve": service.may_change(request.user, model) and found.status == "READY",
            "kinds": Endpoint.Kind.choices,
        },
    )


@login_required
@require_POST
def model_alias(request, pk: int):
    """Set, protect, unprotect or remove an alias (the form on the model's page)."""
    model = visible_model(request, pk)
    alias = request.POST.get("alias", "").strip()
    action = request.POST.get("action", "set")
    try:
        if not service.may_change(request.user, model):
            raise service.RegistryError(
                service.PERMISSION, "Changing an alias takes a member's role in the project."
            )
        if action == "remove":
            service.delete_alias(request.user, model, alias)
            messages.success(request, f"Alias {alias} removed.")
        elif action in ("protect", "unprotect"):
            service.protect_alias(request.user, model, alias, action == "protect")
            messages.success(request, f"Alias {alias} {action}ed.")
        else:
            service.check_alias(alias)
            version = service.version_of(model, request.POST.get("version", ""))
            service.set_alias(request.user, model, alias, version)
            messages.success(request, f"{model.name}@{alias} is version {version.version}.")
    except service.RegistryError as exc:
        messages.error(request, exc.message)
    return redirect("model-detail", pk=model.pk)


@login_required
@require_POST
def job_register(request, pk: int):
    """Register a file or folder of one's own run (its page, or a checkpoint's row)."""
    job = get_job_for_user(request, pk)
    body = {
        "job": job.pk,
        "path": request.POST.get("path", "").strip(),
        "name": request.POST.get("name", "").strip(),
        "description": request.POST.get("description", ""),
    }
    try:
        if job.owner_id != request.user.pk:
            raise service.RegistryError(
                service.PERMISSION, "Only the run's owner registers its files."
            )
        version = api.register(request.user, body)
    except service.RegistryError as exc:
        messages.error(request, exc.message)
        return redirect(f"{reverse('job-detail', args=[job.pk])}#register")
    messages.success(
        request,
        f"Registered as {version.model.name} version {version.version}: its files' "
        "manifest is being read on the cluster.",
    )
    return redirect("model-detail", pk=version.model_id)
