"""The portal as the data path's control plane: which sessions HAProxy routes, and where.

A session is routed exactly while it is open (``Session.is_open``): its route is pushed
to every HAProxy instance when it opens, and taken away (its open WebSockets closed)
when it is revoked, its job is cancelled or leaves the node. Pushes follow every job
change (``jobs.events.job_changed``) once the transaction commits; a periodic
reconcile (Celery beat) repairs whatever a push missed: an instance that was down or
restarted with no routes, a worker killed between commit and push.
"""

from __future__ import annotations

import logging
import socket

from django.conf import settings
from django.db import transaction

from proxy.haproxy import HAProxyError, Route, RuntimeAPI

log = logging.getLogger(__name__)


def instances() -> list[RuntimeAPI]:
    """One runtime API per HAProxy instance behind the session domain."""
    return [RuntimeAPI(address, settings.PROXY_MAP_PATH) for address in settings.PROXY_INSTANCES]


def resolve(host: str) -> str | None:
    """The node's address (HAProxy's dynamic servers take IP literals only)."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return None
    # IPv4 first: the address a node name usually means on a cluster network.
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    return str(infos[0][4][0]) if infos else None


def route_of(session) -> Route | None:
    """The route an open session should have; None when it should have none."""
    if not session.is_open:
        return None
    address = resolve(session.host)
    if address is None:
        log.warning("session %s: node %r does not resolve", session.public_id, session.host)
        return None
    try:
        return Route(session.public_id, address, session.port, session.upstream_token())
    except ValueError as exc:  # stored values HAProxy must not receive
        log.error("session %s: not routable: %s", session.public_id, exc)
        return None


def _each_instance(action, what: str) -> None:
    for api in instances():
        try:
            action(api)
        except HAProxyError as exc:  # that instance is down: the reconcile catches up
            log.warning("%s on %s: %s", what, api.address, exc)


def push(session) -> None:
    """Make every instance route ``session`` as it is now (or not at all)."""
    route = route_of(session)
    if route is None:
        _each_instance(lambda api: api.remove(session.public_id), f"unroute {session.public_id}")
    else:
        _each_instance(lambda api: api.ensure(route), f"route {session.public_id}")


def open_routes() -> list[Route]:
    from proxy.models import Session

    sessions = Session.objects.filter(
        state=Session.State.READY, job__state="running", job__cancel_requested_at=None
    ).select_related("job")
    return [route for route in map(route_of, sessions) if route is not None]


def reconcile() -> dict[str, tuple[int, int] | str]:
    """Every instance routes exactly the open sessions: address -> (added, removed), or
    the error that kept it from being reconciled."""
    wanted = open_routes()
    outcome: dict[str, tuple[int, int] | str] = {}
    for api in instances():
        try:
            outcome[api.address] = api.reconcile(wanted)
        except HAProxyError as exc:
            log.warning("reconcile %s: %s", api.address, exc)
            outcome[api.address] = str(exc)
    return outcome


def on_job_changed(sender, job, **kwargs) -> None:
    """A job changed (state, node, cancel request, its session): push its session's route
    once the change is committed. Batch jobs cost nothing here."""
    if not job.has_session:
        return
    job_id = job.pk

    def after_commit() -> None:
        from proxy.models import Session

        session = Session.objects.select_related("job").filter(job_id=job_id).first()
        if session is not None:
            push(session)

    transaction.on_commit(after_commit)
