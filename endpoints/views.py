"""What HAProxy hands the portal for an endpoint host: a request to an endpoint that is
not routed now (stopped after its idle time, starting, failed). With one of its keys, a
stopped endpoint is started and the request held while it starts, up to
PORTAL_ENDPOINT_HOLD_SECONDS: routed by then, it is sent on to itself (307, method and
body kept, now carried by HAProxy to the model server); not yet, it is answered 503 with
Retry-After (a client that honours it, as OpenAI's, tries again). Without a key, 401 as
HAProxy says it. Holding takes one of the web process's threads: at most
PORTAL_ENDPOINT_HOLDS requests are held at once per process (and one caller's share of
threads is bounded by common.callers), the others are answered 503 at once."""

from __future__ import annotations

import json
import threading
import time

from django.conf import settings
from django.http import HttpResponse
from django.utils import timezone

from endpoints import routes, service
from endpoints.models import Endpoint, EndpointKey, digest_of

STARTING_RETRY = 30
POLL_SECONDS = 0.5
_holds = threading.BoundedSemaphore(max(settings.PORTAL_ENDPOINT_HOLDS, 1))


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
    if endpoint.state == Endpoint.State.RUNNING:
        # Running but not routed here (an instance restarted): route it now, else soon.
        if routes.push(endpoint.pk):
            return _again(request, public_id)
        return _answer(503, "The endpoint is being routed: try again.", "endpoint_starting", 2)
    started = service.wake(endpoint)
    if _held_until_running(endpoint.pk):
        return _again(request, public_id)
    words = "is starting" if started or endpoint.state == Endpoint.State.STARTING else "restarts"
    return _answer(
        503,
        f"The endpoint {words} (its job is being scheduled on the cluster): try again in "
        f"{STARTING_RETRY} s.",
        "endpoint_starting",
        STARTING_RETRY,
    )


def _held_until_running(endpoint_id: int) -> bool:
    """Wait (bounded) for the endpoint to be routed: True when it is."""
    seconds = settings.PORTAL_ENDPOINT_HOLD_SECONDS
    if seconds <= 0 or settings.PORTAL_ENDPOINT_HOLDS <= 0 or not _holds.acquire(blocking=False):
        return False
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            state = Endpoint.objects.filter(pk=endpoint_id).values_list("state", flat=True).first()
            if state == Endpoint.State.RUNNING:
                return True
            if state != Endpoint.State.STARTING:
                return False
            time.sleep(POLL_SECONDS)
        return False
    finally:
        _holds.release()


def _again(request, public_id: str) -> HttpResponse:
    """The same request sent again to the endpoint's address, now routed by HAProxy."""
    path = request.get_full_path().removeprefix(f"/_portal/endpoint/{public_id}")
    response = HttpResponse(status=307)
    response["Location"] = "/" + path.lstrip("/")  # never //host: the same host only
    response["Cache-Control"] = "no-store"
    return response
