"""The portal as the data path's control plane: which sessions HAProxy routes, and where.

A session is routed exactly while it is open (``SessionLink.is_open``): its route is pushed
to every HAProxy instance when it opens, and taken away (its open WebSockets closed)
when it is revoked, its job is cancelled or leaves the node. Pushes follow every job
change (``jobs.signals.job_updated``) once the transaction commits; a periodic
reconcile (Celery beat) repairs whatever a push missed: an instance that was down or
restarted with no routes, a worker killed between commit and push. Pushes and
reconciles take one lock and read the database inside it, so a reconcile that started
before a revocation cannot put the revoked route back after the revocation's push.
"""

from __future__ import annotations

import ipaddress
import logging
import secrets
import socket
import time
from contextlib import contextmanager

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import Q

from common import prometheus as metrics
from proxy import access
from proxy.haproxy import HAProxyError, Route, RuntimeAPI
from proxy.models import SessionLink, SessionShare

log = logging.getLogger(__name__)

LOCK = "proxy-routes-lock"
LOCK_TTL = 30  # seconds; a holder killed mid-way frees it by then


def instances() -> list[RuntimeAPI]:
    """One runtime API per HAProxy instance behind the session domain."""
    return [RuntimeAPI(address, settings.PROXY_MAP_PATH) for address in settings.PROXY_INSTANCES]


@contextmanager
def _locked(wait: float):
    """The routes lock, waiting up to ``wait`` s; yields whether it was taken."""
    token = secrets.token_hex(8)
    deadline = time.monotonic() + wait
    taken = cache.add(LOCK, token, timeout=LOCK_TTL)
    while not taken and time.monotonic() < deadline:
        time.sleep(0.02)
        taken = cache.add(LOCK, token, timeout=LOCK_TTL)
    try:
        yield taken
    finally:
        if taken and cache.get(LOCK) == token:
            cache.delete(LOCK)


def resolve(host: str) -> str | None:
    """The node's address (HAProxy's dynamic servers take IP literals only)."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return None
    # IPv4 first: the address a node name usually means on a cluster network.
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    return str(infos[0][4][0]) if infos else None


def same_address(host: str, address: str) -> bool:
    """Whether ``address`` (a caller's IP literal) is where the proxy would connect for
    ``host``: the evidence a registration call brings about the node it runs on."""
    resolved = resolve(host)
    try:
        ips = [ipaddress.ip_address(a) for a in (resolved or "", address)]
    except ValueError:
        return False
    plain = [
        ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped else ip
        for ip in ips
    ]
    return plain[0] == plain[1]


class Unresolved(Exception):
    """An open session whose node name does not resolve right now (DNS trouble): its
    existing route, if any, is left as it is rather than cut."""


def upstream_allowed(address: str) -> bool:
    """Whether ``address`` (an IP literal) lies in PORTAL_UPSTREAM_NETWORKS: the only
    networks the proxy may connect to, whatever a scheduler or a job says."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:10.1.2.3 is 10.1.2.3
    return any(ip in ipaddress.ip_network(net) for net in settings.PORTAL_UPSTREAM_NETWORKS)


def route_of(session) -> Route | None:
    """The route an open session should have; None when it should have none. This is
    the one place every route passes (push and reconcile, every scheduler): an address
    outside PORTAL_UPSTREAM_NETWORKS is refused here, and the job's timeline says so."""
    if not session.is_open:
        return None
    address = resolve(session.host)
    if address is None:
        raise Unresolved(session.host)
    if not upstream_allowed(address):
        log.warning(
            "session %s: %s (%s) is outside PORTAL_UPSTREAM_NETWORKS: not routed",
            session.public_id,
            session.host,
            address,
        )
        session.job.note(
            f"Its session is not routed: its node {session.host} ({address}) is outside the "
            "networks the portal's proxy may connect to (PORTAL_UPSTREAM_NETWORKS).",
            publish=False,  # under the routes lock: a publish would push, and wait for it
        )
        return None
    try:
        return Route(
            session.public_id,
            address,
            session.port,
            session.upstream_token(),
            openers=access.openers(session),
        )
    except ValueError as exc:  # stored values HAProxy must not receive
        log.error("session %s: not routable: %s", session.public_id, exc)
        return None


def _fresh(session):
    return SessionLink.objects.select_related("job", "job__owner").filter(pk=session.pk).first()


def push(session) -> bool:
    """Make every instance route ``session`` as it is now in the database (or not at
    all). True when it is routed on every instance."""
    with _locked(wait=5) as taken:
        if not taken:
            log.warning("routes lock busy: pushing session %s without it", session.public_id)
        current = _fresh(session)
        try:
            route = route_of(current) if current is not None else None
        except Unresolved as exc:
            log.warning("session %s: node %s does not resolve", session.public_id, exc)
            metrics.ROUTE_REGISTRATIONS.labels("unresolved").inc()
            return False
        done = True
        for api in instances():
            try:
                if route is None:
                    api.remove(session.public_id)
                else:
                    api.ensure(route)
                    metrics.ROUTE_REGISTRATIONS.labels("ok").inc()
            except HAProxyError as exc:  # that instance is down: the reconcile catches up
                log.warning("route %s on %s: %s", session.public_id, api.address, exc)
                if route is not None:
                    metrics.ROUTE_REGISTRATIONS.labels("failed").inc()
                done = False
        return done and route is not None


def reconcile() -> dict[str, tuple[int, int] | str]:
    """Every instance routes exactly the open sessions: address -> (added, removed), or
    why it was not reconciled (another reconcile running, the instance unreachable)."""
    with _locked(wait=0) as taken:
        if not taken:
            return {"*": "another push or reconcile holds the lock"}
        wanted, keep = [], set()
        for session in SessionLink.objects.maybe_open():
            try:
                route = route_of(session)
            except Unresolved:
                keep.add(session.public_id)
                continue
            except Exception:  # noqa: BLE001 - one damaged session must not stop the rest
                log.exception("session %s: no route", session.public_id)
                continue
            if route is not None:
                wanted.append(route)
        outcome: dict[str, tuple[int, int] | str] = {}
        for api in instances():
            try:
                outcome[api.address] = api.reconcile(wanted, keep=keep)
            except HAProxyError as exc:
                log.warning("reconcile %s: %s", api.address, exc)
                outcome[api.address] = str(exc)
        return outcome


def opener_ids() -> set[int]:
    """Everyone HAProxy lets through to some open session now (their accounts at the
    provider are asked about first: identity/accounts.py)."""
    found: set[int] = set()
    for session in SessionLink.objects.maybe_open():
        if session.is_open:
            found.update(access.openers(session))
    return found


def on_user_saved(sender, instance, **kwargs) -> None:
    """A deactivated account's open sessions stop being routed at once (their cookies
    stay valid until they expire, but HAProxy no longer has a route for them)."""
    if instance.is_active or instance.pk is None:
        return
    user_id = instance.pk

    def after_commit() -> None:
        try:
            for session in SessionLink.objects.filter(
                job__owner_id=user_id, state=SessionLink.State.READY
            ):
                push(session)
        except Exception:  # noqa: BLE001 - the reconcile repairs what this misses
            log.exception("routes of deactivated user %s not removed", user_id)

    transaction.on_commit(after_commit)


def on_withdrawn(sender, user, **kwargs) -> None:
    """The identity provider no longer vouches for ``user``: every open session they may
    open (their own, those shared with them or their projects) is pushed again at once,
    without their opener entry (proxy/access.openers), so HAProxy refuses their next
    request whatever cookie they hold; the reconcile would within
    PROXY_RECONCILE_INTERVAL."""
    user_id = user.pk

    def after_commit() -> None:
        try:
            for session in (
                SessionLink.objects.maybe_open()
                .filter(
                    Q(job__owner_id=user_id)
                    | Q(shares__user_id=user_id)
                    | Q(
                        shares__kind=SessionShare.Kind.PROJECT,
                        job__project__memberships__user_id=user_id,
                    )
                )
                .distinct()
            ):
                push(session)
        except Exception:  # noqa: BLE001 - the reconcile repairs what this misses
            log.exception("openers of withdrawn user %s not pushed", user_id)

    transaction.on_commit(after_commit)


def on_members_changed(sender, cluster, **kwargs) -> None:
    """A sync changed a cluster's projects (joins, leaves, roles): the openers of its
    shared sessions follow at once, not at the next reconcile."""
    cluster_id = cluster.pk

    def after_commit() -> None:
        try:
            for session in (
                SessionLink.objects.maybe_open()
                .filter(job__cluster_id=cluster_id, shares__isnull=False)
                .distinct()
            ):
                push(session)
        except Exception:  # noqa: BLE001 - the reconcile repairs what this misses
            log.exception("openers of %s's shared sessions not pushed", cluster)

    transaction.on_commit(after_commit)


def on_job_changed(sender, job, **kwargs) -> None:
    """A job changed (state, node, cancel request, its session): push its session's route
    once the change is committed. Batch jobs cost nothing here."""
    if not job.has_session:
        return
    job_id = job.pk

    def after_commit() -> None:
        # A failing push must not stop the job's own update (its publishing, the sync
        # of other jobs): it is logged, and the next reconcile repairs the route.
        try:
            session = SessionLink.objects.filter(job_id=job_id).first()
            if session is not None:
                push(session)
        except Exception:  # noqa: BLE001
            log.exception("route of job %s not pushed", job_id)

    transaction.on_commit(after_commit)
