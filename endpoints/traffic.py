"""What the running endpoints carry, and the idle stop. Every PORTAL_ENDPOINT_IDLE_INTERVAL
each HAProxy instance's ``show stat`` of the endpoints' servers is read (requests in
flight, seconds since the last one, requests and 5xx answers since the route was added,
average times) and merged; each endpoint records it (its page and /metrics show it).

Idle stop: a running endpoint with no request for its idle minutes is stopped (its job
cancelled, so its CPUs and GPUs go back), and the next request with one of its keys
starts it again (endpoints.views). A streamed answer still flowing is a request in
flight. When an instance cannot be read nothing is recorded or stopped: what it carried
is unknown."""

from __future__ import annotations

from datetime import datetime, timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from clusters.task_limits import single_flight
from endpoints import routes, service
from endpoints.models import Endpoint

MAX_ENDPOINTS = 5000


def last_active(endpoint: Endpoint, seen: routes.Activity | None, now: datetime) -> datetime | None:
    """When the endpoint was last in use: now while a request is in flight; else the
    latest of its last request (HAProxy's or the portal's record) and when it began to
    run. None: nothing says (it is not judged)."""
    if seen is not None and seen.in_flight:
        return now
    known = [t for t in (endpoint.last_request_at, endpoint.running_since) if t is not None]
    if seen is not None and seen.idle_seconds is not None:
        known.append(now - timedelta(seconds=seen.idle_seconds))
    return max(known) if known else None


def record(endpoint: Endpoint, seen: routes.Activity | None, now: datetime) -> None:
    if seen is None:
        return
    fields: dict = {
        "requests": seen.requests,
        "errors": seen.errors,
        "response_ms": seen.response_ms,
        "total_ms": seen.total_ms,
        "traffic_at": now,
    }
    if seen.idle_seconds is not None:
        last = now - timedelta(seconds=seen.idle_seconds)
        if endpoint.last_request_at is None or last > endpoint.last_request_at:
            fields["last_request_at"] = endpoint.last_request_at = last
    Endpoint.objects.filter(pk=endpoint.pk).update(**fields)


def reason(endpoint: Endpoint) -> str:
    minutes = endpoint.idle_minutes
    return (
        f"Stopped after {minutes} minute{'' if minutes == 1 else 's'} without a request; "
        "the next request with one of its keys starts it again."
    )


@shared_task(name="endpoints.traffic.watch")
def watch() -> list[int]:
    """One pass: traffic recorded, the endpoints idle for their minutes stopped (their ids)."""
    interval = settings.PORTAL_ENDPOINT_IDLE_INTERVAL
    with single_flight("endpoints-stop-idle", timeout=int(interval * 4) + 1) as mine:
        return judge(timezone.now()) if mine else []


def judge(now: datetime) -> list[int]:
    running = Endpoint.objects.filter(state=Endpoint.State.RUNNING, idle_minutes__gt=0)
    endpoints = list(running.select_related("job")[:MAX_ENDPOINTS])
    if not endpoints:
        return []
    traffic = routes.activity()
    if traffic is None:
        return []
    stopped = []
    for endpoint in endpoints:
        seen = traffic.get(endpoint.public_id)
        record(endpoint, seen, now)
        active = last_active(endpoint, seen, now)
        if active is None:
            continue
        if now - active >= timedelta(minutes=endpoint.idle_minutes):
            service.stop(endpoint, reason(endpoint))
            stopped.append(endpoint.pk)
    return stopped
