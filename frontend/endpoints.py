"""Endpoint pages: the endpoints a person sees, one endpoint's address, state, traffic and
keys (started, stopped, keys made and revoked by the rules endpoints/service.py holds),
and "Serve" on a model version's page."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from endpoints import service
from endpoints.models import Endpoint, EndpointKey
from frontend import registry as registry_pages

NEW_KEY = "new_endpoint_key"


def _endpoint(request, pk: int) -> Endpoint:
    found = (
        service.visible(request.user)
        .select_related("owner", "project", "version__model", "version__cluster", "job")
        .filter(pk=pk)
        .first()
    )
    if found is None:
        raise Http404("No such endpoint.")
    return found


@login_required
def endpoints(request):
    rows = service.visible(request.user).select_related("owner", "project", "version__model")
    return render(request, "frontend/endpoints.html", {"rows": rows.order_by("name")[:500]})


@login_required
def endpoint_detail(request, pk: int):
    endpoint = _endpoint(request, pk)
    mine = service.may_manage(request.user, endpoint)
    keys = EndpointKey.objects.opening(endpoint).filter(
        Q(owner=request.user) | Q(project__isnull=False)
    )
    return render(
        request,
        "frontend/endpoint_detail.html",
        {
            "endpoint": endpoint,
            "may_manage": mine,
            "keys": list(keys.order_by("-created_at")[:100]) if mine else [],
            "new_key": request.session.pop(NEW_KEY, None) if mine else None,
            "streamed": endpoint.streamed(),
        },
    )


def _numbers(post) -> dict:
    """The form's fields, numbers as numbers (the service checks their bounds)."""
    body: dict = {}
    for name in service.FIELDS:
        value = post.get(name, "").strip()
        if not value:
            continue
        body[name] = int(value) if name in service.BOUNDS and value.isdigit() else value
    return body


@login_required
@require_POST
def endpoint_serve(request, pk: int, version: int):
    """ "Serve" on a version's page: the endpoint made and started."""
    model = registry_pages.visible_model(request, pk)
    found = next((v for v in model.versions.all() if v.version == version), None)
    if found is None:
        raise Http404("No such version.")
    try:
        endpoint = service.serve(
            request.user,
            found,
            request.POST.get("name", "").strip(),
            **service.checked_fields(_numbers(request.POST)),
        )
        service.request_start(request.user, endpoint)
    except service.EndpointError as exc:
        messages.error(request, str(exc))
        return redirect("model-version", pk=model.pk, version=version)
    messages.success(request, f"Endpoint {endpoint.name} is starting: its job is on its way.")
    return redirect("endpoint-detail", pk=endpoint.pk)


@login_required
@require_POST
def endpoint_action(request, pk: int):
    """Start or stop (its owner), make a key for it (shown once), revoke a key."""
    endpoint = _endpoint(request, pk)
    action = request.POST.get("action", "")
    try:
        if not service.may_manage(request.user, endpoint):
            raise service.EndpointError("Only the endpoint's owner changes it.", 403)
        if action == "start":
            service.request_start(request.user, endpoint)
            messages.success(request, "Starting: its job is on its way.")
        elif action == "stop":
            service.stop(endpoint, "Stopped by its owner.")
            messages.success(request, "Stopped: its job is cancelled.")
        elif action == "key":
            days, rate = request.POST.get("days", "90"), request.POST.get("rate", "10")
            if not (days.isdigit() and rate.isdigit()):
                raise service.EndpointError("days and rate are whole numbers.")
            made, secret = service.issue_key(
                request.user,
                request.POST.get("key_name", ""),
                days=int(days),
                rate=int(rate),
                endpoint_ids=[endpoint.pk],
            )
            request.session[NEW_KEY] = {"name": made.name, "secret": secret}
        elif action == "revoke":
            key_id = request.POST.get("key", "")
            key = EndpointKey.objects.filter(
                pk=int(key_id) if key_id.isdigit() else 0, owner=request.user
            ).first()
            if key is None:
                raise service.EndpointError("No such key of yours.", 404)
            service.revoke_key(request.user, key)
            messages.success(request, f"Key {key.prefix}… revoked: refused from now on.")
        else:
            raise service.EndpointError("Unknown action.")
    except service.EndpointError as exc:
        messages.error(request, str(exc))
    return redirect("endpoint-detail", pk=endpoint.pk)
