"""An endpoint's route in HAProxy (its backend ``be_endpoints``), through the runtime
API the session routes use (proxy/haproxy.py): one dynamic server per running endpoint,
named by the endpoint's id; a map entry ``ep/<id>`` with the token the model server's
guard expects; and one entry ``ep/<id>/<sha256 of a key>`` per live key that opens it,
its value the key's requests a second. HAProxy hashes the key a request brings and
looks it up: deleting the entry refuses the key's next request.

Every value sent is checked first: ids are 32 hex digits, digests 64, rates whole
numbers, addresses IP literals (proxy.haproxy.Route checks them)."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from django.conf import settings

from proxy.haproxy import HAProxyError, Route, RuntimeAPI

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
