"""What HAProxy hands the portal for an endpoint host: a request to an endpoint that is
not routed now (stopped after its idle time, starting, failed). With one of its keys, a
stopped endpoint is started and the request answered 503 with Retry-After (a client
that honours it, as OpenAI's, tries again); without one, 401 as HAProxy says it."""

from __future__ import annotations

import json

from django.http import HttpResponse
from django.utils import timezone

from endpoints import service
from endpoints.models import Endpoint, EndpointKey, digest_of

STARTING_RETRY = 30


def _answer(status: int, message: str, kind: str, retry: int | None = None) -> HttpResponse:
    body = json.dumps({"error": {"message": message, "type": kind}})
    response = HttpResponse(body, status=status, content_type="application/json")
    if retry is not None:
        response["Retry-After"] = str(retry)
    if status == 401:
        response["WWW-Authenticate"] = "Bearer"
    return response


def not_routed(request, public_id: str) -> HttpResponse:
    endpoint = Endpoint.objects.filter(public_id=public_id).first()
    header = request.META.get("HTTP_AUTHORIZATION", "")
    secret = header[7:].strip() if header.startswith("Bearer ") else ""
    key = (
        EndpointKey.objects.opening(endpoint).filter(digest=digest_of(secret[:200])).first()
        if endpoint is not None and secret
        else None
    )
    if key is None:
        return _answer(
            401,
            "This endpoint needs one of its API keys: Authorization: Bearer <key>.",
            "invalid_api_key",
        )
    assert endpoint is not None
    Endpoint.objects.filter(pk=endpoint.pk).update(last_request_at=timezone.now())
    if endpoint.state == Endpoint.State.FAILED:
        return _answer(503, f"The endpoint failed: {endpoint.message[:500]}", "endpoint_failed")
    started = service.wake(endpoint)
    words = "is starting" if started or endpoint.state != Endpoint.State.RUNNING else "restarts"
    return _answer(
        503,
        f"The endpoint {words} (its job is being scheduled on the cluster): try again in "
        f"{STARTING_RETRY} s.",
        "endpoint_starting",
        STARTING_RETRY,
    )
