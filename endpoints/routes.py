"""An endpoint's route in HAProxy (its backend ``be_endpoints``), through the runtime
API the session routes use (proxy/haproxy.py): one dynamic server per running endpoint,
named by the endpoint's id; a map entry ``ep/<id>`` with the token the model server's
guard expects; and one entry ``ep/<id>/<sha256 of a key>`` per live key that opens it,
its value the key's requests a second. HAProxy hashes the key a request brings and
looks it up: deleting the entry refuses the key's next request.

Every value sent is checked first: ids are 32 hex digits, digests 64, rates whole
numbers, addresses IP literals (proxy.haproxy.Route checks them)."""

from __future__ import annotations

import csv
import io
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from django.conf import settings

from endpoints.models import Endpoint, EndpointKey
from proxy.haproxy import HAProxyError, Route, RuntimeAPI
from proxy.models import SessionLink
from proxy.routes import instances, resolve, upstream_allowed

BACKEND = "be_endpoints"
DIGEST = re.compile(r"[0-9a-f]{64}\Z")
ENDPOINT_ID = re.compile(r"[0-9a-f]{32}\Z")
GRANT = re.compile(r"ep/([0-9a-f]{32})/([0-9a-f]{64})\Z")
TOKEN = re.compile(r"ep/([0-9a-f]{32})\Z")
MAX_RATE = 100_000


@dataclass(frozen=True)
class EndpointRoute:
    eid: str
    address: str
    port: int
    token: str
    grants: Mapping[str, int] = field(default_factory=dict)  # key digest -> requests/s

    def __post_init__(self) -> None:
        Route(self.eid, self.address, self.port, self.token)  # the session route's checks
        for digest, rate in self.grants.items():
            if not DIGEST.match(digest):
                raise ValueError("a key digest is 64 hex digits")
            if not isinstance(rate, int) or not 1 <= rate <= MAX_RATE:
                raise ValueError("a key's rate is a whole number of requests a second")

    @property
    def target(self) -> tuple[str, int, str]:
        return (self.address, self.port, self.token)


@dataclass(frozen=True)
class Activity:
    """What one or more HAProxy instances saw of an endpoint's traffic since its route was
    added: requests in flight, seconds since the last one (None: none yet), requests
    forwarded (HTTP: one stream each), those answered 5xx, and HAProxy's average
    times over its last 1,024 requests: to the response's headers, and to its end."""

    in_flight: int
    idle_seconds: int | None
    requests: int = 0
    errors: int = 0
    response_ms: int = 0
    total_ms: int = 0

    def merged(self, other: Activity) -> Activity:
        idle = [s for s in (self.idle_seconds, other.idle_seconds) if s is not None]
        count = self.requests + other.requests

        def mean(a: int, b: int) -> int:
            return round((a * self.requests + b * other.requests) / count) if count else 0

        return Activity(
            self.in_flight + other.in_flight,
            min(idle) if idle else None,
            count,
            self.errors + other.errors,
            mean(self.response_ms, other.response_ms),
            mean(self.total_ms, other.total_ms),
        )


MAX_STAT_LINES = 20_000


def _count(row: dict, name: str) -> int:
    value = row.get(name) or "0"
    return int(value) if value.isdigit() and len(value) < 19 else 0


def parse_activity(answer: str) -> dict[str, Activity]:
    """``show stat`` CSV (its header line first, ``# pxname,svname,...``) of be_endpoints'
    servers: endpoint id -> Activity. Lines that are not an endpoint's are skipped."""
    lines = answer.splitlines()[:MAX_STAT_LINES]
    if not lines or not lines[0].startswith("# "):
        return {}
    reader = csv.DictReader(io.StringIO("\n".join([lines[0][2:], *lines[1:]])))
    found: dict[str, Activity] = {}
    for row in reader:
        eid = row.get("svname") or ""
        if row.get("pxname") != BACKEND or not ENDPOINT_ID.match(eid):
            continue
        last = row.get("lastsess") or "-1"
        if not last.lstrip("-").isdigit() or len(last) > 12:
            continue
        seen = Activity(
            _count(row, "scur"),
            int(last) if int(last) >= 0 else None,
            _count(row, "stot"),
            _count(row, "hrsp_5xx"),
            _count(row, "rtime"),
            _count(row, "ttime"),
        )
        found[eid] = found[eid].merged(seen) if eid in found else seen
    return found


class Runtime:
    """One HAProxy instance's endpoints."""

    def __init__(self, api: RuntimeAPI) -> None:
        self.api = api
        self.map = api.map_path

    def _map(self, verb: str, entry: str, value: str = "") -> None:
        self.api.command(f"{verb} map {self.map} {entry} {value}".rstrip())

    def add(self, route: EndpointRoute) -> None:
        """Route the endpoint to its server (replacing an older route)."""
        self.remove(route.eid)
        answer = self.api.command(
            f"add server {BACKEND}/{route.eid} {route.address}:{route.port}"
            f" weight 0 maxconn {settings.PROXY_SESSION_MAXCONN}"
            " pool-max-conn -1 pool-purge-delay 5s"
        )
        if "New server registered" not in answer:
            raise HAProxyError(f"add server {route.eid}: {answer}")
        self.api.command(f"enable server {BACKEND}/{route.eid}")
        self.set_grants(route.eid, route.grants, {})
        self._map("add", f"ep/{route.eid}", route.token)

    def set_grants(self, eid: str, wanted: Mapping[str, int], have: Mapping[str, int]) -> None:
        """Exactly the keys ``wanted`` open the endpoint, each at its rate."""
        for digest in sorted(set(have) - set(wanted)):
            self._map("del", f"ep/{eid}/{digest}")
        for digest, rate in sorted(wanted.items()):
            if digest not in have:
                self._map("add", f"ep/{eid}/{digest}", str(rate))
            elif have[digest] != rate:
                self._map("set", f"ep/{eid}/{digest}", str(rate))

    def remove(self, eid: str) -> None:
        """No new request reaches the endpoint's server; its connections are closed."""
        if not ENDPOINT_ID.match(eid):
            raise ValueError(f"not an endpoint id: {eid!r}")
        self._map("del", f"ep/{eid}")
        server = f"{BACKEND}/{eid}"
        if "No such server" in self.api.command(f"set server {server} state maint"):
            return
        self.api.command(f"shutdown sessions server {server}")
        deadline = time.monotonic() + 2
        while "still has connections" in (answer := self.api.command(f"del server {server}")):
            if time.monotonic() > deadline:
                raise HAProxyError(f"del server {eid}: {answer}")
            time.sleep(0.02)

    def drop_grants(self, eid: str) -> None:
        for digest in self.state()[1].get(eid, {}):
            self._map("del", f"ep/{eid}/{digest}")

    def state(self) -> tuple[dict[str, tuple[str, int, str]], dict[str, dict[str, int]]]:
        """(routes, grants) as HAProxy has them now."""
        tokens: dict[str, str] = {}
        grants: dict[str, dict[str, int]] = {}
        for line in self.api.command(f"show map {self.map}").splitlines():
            parts = line.split()
            if len(parts) != 3:
                continue
            if found := TOKEN.match(parts[1]):
                tokens[found[1]] = parts[2]
            elif (found := GRANT.match(parts[1])) and parts[2].isdigit():
                grants.setdefault(found[1], {})[found[2]] = int(parts[2])
        routes: dict[str, tuple[str, int, str]] = {}
        for line in self.api.command(f"show servers conn {BACKEND}").splitlines():
            parts = line.split()
            if len(parts) >= 4 and parts[0].startswith(f"{BACKEND}/") and parts[3].isdigit():
                eid = parts[0].split("/", 1)[1]
                if ENDPOINT_ID.match(eid):
                    routes[eid] = (parts[2], int(parts[3]), tokens.get(eid, ""))
        return routes, grants

    def activity(self) -> dict[str, Activity]:
        """Each routed endpoint's requests in flight and seconds since its last one (None:
        none since its route was added), from ``show stat`` of its backend's servers."""
        answer = self.api.command(f"show stat {BACKEND} 4 -1")
        return parse_activity(answer)

    def reconcile(self, wanted: list[EndpointRoute]) -> tuple[int, int]:
        """Route exactly ``wanted``, each with exactly its grants. (added, removed)"""
        have, grants = self.state()
        by_eid = {r.eid: r for r in wanted}
        removed = [eid for eid in have if eid not in by_eid]
        for eid in removed:
            self.remove(eid)
        for eid in grants.keys() - have.keys() - by_eid.keys():
            for digest in grants[eid]:
                self._map("del", f"ep/{eid}/{digest}")
        added = 0
        for route in wanted:
            if have.get(route.eid) != route.target:
                self.add(route)
                added += 1
            else:
                self.set_grants(route.eid, route.grants, grants.get(route.eid, {}))
        return added, len(removed)


# -- the portal's side: what HAProxy should route, pushed and reconciled ---------------------


def grants_of(endpoint: Endpoint) -> dict[str, int]:
    """The live keys that open ``endpoint``: digest -> rate."""
    return dict(EndpointKey.objects.opening(endpoint).values_list("digest", "rate"))


def route_of(endpoint: Endpoint) -> EndpointRoute | None:
    """The route a running endpoint should have (None: none). Its job's session says where
    the server listens; an address outside PORTAL_UPSTREAM_NETWORKS is never routed."""
    job = endpoint.job
    if job is None or endpoint.state not in ("starting", "running"):
        return None
    link = SessionLink.objects.select_related("job", "job__owner").filter(job=job).first()
    if link is None or not link.is_open:
        return None
    address = resolve(link.host)
    if address is None or not upstream_allowed(address) or link.port is None:
        return None
    try:
        return EndpointRoute(
            endpoint.public_id, address, link.port, link.upstream_token(), grants_of(endpoint)
        )
    except ValueError:
        return None


def _runtimes() -> list[Runtime]:
    return [Runtime(api) for api in instances()]


def push(endpoint_id: int) -> bool:
    """Every instance routes the endpoint as the database says now (or not at all); True
    when it is routed everywhere."""
    endpoint = Endpoint.objects.select_related("job").filter(pk=endpoint_id).first()
    route = route_of(endpoint) if endpoint is not None else None
    done = True
    for runtime in _runtimes():
        try:
            if route is not None:
                have, grants = runtime.state()
                if have.get(route.eid) != route.target:
                    runtime.add(route)
                else:
                    runtime.set_grants(route.eid, route.grants, grants.get(route.eid, {}))
            elif endpoint is not None:
                runtime.remove(endpoint.public_id)
                runtime.drop_grants(endpoint.public_id)
        except HAProxyError:
            done = False  # that instance is down: the reconcile catches up
    return done and route is not None


def push_keys(key: EndpointKey) -> None:
    """Every endpoint the key may open, its grants made right (a new key added, a revoked
    or expired one dropped) on every instance, before returning."""
    whose = Endpoint.objects.filter(owner_id=key.owner_id)  # a personal key: all of theirs
    if key.project_id is not None:
        whose = Endpoint.objects.filter(project_id=key.project_id)
    for endpoint_id in whose.values_list("pk", flat=True)[:1000]:
        push(endpoint_id)


def activity() -> dict[str, Activity] | None:
    """Every instance's view of the endpoints' traffic, merged (requests in flight added,
    the most recent request kept). None when an instance cannot be read: its traffic is
    unknown, so nothing may be judged idle from the others alone."""
    merged: dict[str, Activity] = {}
    for runtime in _runtimes():
        try:
            seen = runtime.activity()
        except HAProxyError:
            return None
        for eid, one in seen.items():
            merged[eid] = merged[eid].merged(one) if eid in merged else one
    return merged


def reconcile() -> dict[str, tuple[int, int] | str]:
    """Every instance routes exactly the running endpoints, each with its live keys (an
    expired key's entries go here, within the reconcile's interval)."""
    wanted = []
    for endpoint in Endpoint.objects.filter(state__in=("starting", "running")).select_related(
        "job"
    ):
        route = route_of(endpoint)
        if route is not None:
            wanted.append(route)
    outcome: dict[str, tuple[int, int] | str] = {}
    for runtime in _runtimes():
        try:
            outcome[runtime.api.address] = runtime.reconcile(wanted)
        except HAProxyError as exc:
            outcome[runtime.api.address] = str(exc)
    return outcome
