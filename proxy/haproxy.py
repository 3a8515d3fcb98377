"""HAProxy in the session data path: its configuration, rendered from the portal's
settings, and its runtime API, through which the portal keeps one dynamic server and
one token-map entry per open session (docs/explain/session-data-path.md).

Every value sent is checked first (a session id is 32 hex digits, an address an IP
literal, a token URL-safe): the runtime API separates commands with ';' and newlines,
so nothing else may reach it. Answers are bounded in size and time.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import time
from collections.abc import Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from string import Template
from urllib.parse import urlsplit

from django.conf import settings

from common import validators
from proxy.codes import cookie_name, cookie_secret, state_cookie_name
from proxy.models import SESSION_ID

BACKEND = "be_sessions"
MAX_ANSWER = 4 * 1024 * 1024
# A portal web server: host:port (a name, an IPv4 literal or a bracketed IPv6 one).
PORTAL_UPSTREAM = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}\Z")


from common import marks  # noqa: E402

TEMPLATE = Path(__file__).parent / "templates" / "proxy" / "haproxy.cfg"


def render_config(
    *,
    bind: str,
    tls_pem: str | None,
    portal_upstream: str | Sequence[str],
    admin_socket: str | None = None,
    run_as: tuple[str, str] | None = None,
    admin_group: str | None = None,
    redirect_bind: str | None = None,
) -> str:
    """HAProxy's configuration for this portal: ``bind`` (host:port) with TLS from
    ``tls_pem`` (certificate and key in one file; None: plain HTTP, for tests),
    handing the portal's own host (PORTAL_URL) and ``/_portal/`` on session hosts to
    the portal at ``portal_upstream`` (host:port of its web server, or a list of them:
    every web instance, balanced and health-checked on /healthz), with its runtime API on ``admin_socket``
    (default: the first of PROXY_INSTANCES). Production: ``run_as`` (user, group)
    drops root to HAProxy's own user and group, and ``admin_group`` (the portal's) may
    use the admin socket, the one thing the two share;
    ``redirect_bind`` (e.g. ":80") sends plain HTTP to HTTPS and adds HSTS."""
    admin = admin_socket or settings.PROXY_INSTANCES[0]
    upstreams = [portal_upstream] if isinstance(portal_upstream, str) else list(portal_upstream)
    if not upstreams:
        raise ValueError("at least one portal web server (host:port) is needed")
    for upstream in upstreams:
        if not PORTAL_UPSTREAM.match(upstream):
            raise ValueError(f"not a host:port for a portal web server: {upstream!r}")
    if run_as and not admin_group:
        raise ValueError(
            "HAProxy dropping root needs the portal's group for the admin socket "
            "(admin_group, --admin-group portal); HAProxy keeps its own (--run-as haproxy:haproxy)"
        )
    if run_as and admin_group and run_as[1] == admin_group:
        # HAProxy with the portal's group could read what the group may (its data folder).
        raise ValueError(
            f"HAProxy runs with its own group, not {admin_group!r}: the portal's group "
            "shares only the admin socket (run_as haproxy:haproxy, admin_group portal)"
        )
    extra_binds = ""
    if redirect_bind:
        extra_binds = (
            f"\n    bind {redirect_bind}\n    http-request redirect scheme https code 301"
            " unless { ssl_fc }"
        )
    return Template(TEMPLATE.read_text()).substitute(
        admin_socket=admin.removeprefix("unix:").removeprefix("tcp:"),
        socket_access=f"mode 660 group {admin_group}" if admin_group else "mode 600",
        run_as=f"\n    user {run_as[0]}\n    group {run_as[1]}" if run_as else "",
        extra_binds=extra_binds,
        hsts=(
            '\n    http-response set-header Strict-Transport-Security "max-age=31536000"'
            if tls_pem and redirect_bind  # HTTPS only (not the dev set-up: HSTS on
            else ""  # localhost would send the portal's plain-HTTP port to HTTPS too)
        ),
        portal_host=portal_host_name() or "-",
        maxconn=settings.PROXY_MAXCONN,
        connect_timeout=f"{settings.PROXY_CONNECT_TIMEOUT:g}",
        read_timeout=f"{settings.PROXY_READ_TIMEOUT:g}",
        bind=bind,
        tls=f"ssl crt {tls_pem} alpn http/1.1" if tls_pem else "",
        session_domain=settings.PROXY_SESSION_DOMAIN,
        domain_regex=re.escape(settings.PROXY_SESSION_DOMAIN.lower()),
        cookie_name=cookie_name(),
        portal_cookies="|".join(
            re.escape(name)
            for name in (
                settings.SESSION_COOKIE_NAME,
                settings.CSRF_COOKIE_NAME,
                state_cookie_name(),
            )
        ),
        cookie_secret=cookie_secret(),
        map_path=settings.PROXY_MAP_PATH,
        portal_url=settings.PORTAL_URL,
        portal_servers="\n".join(
            f"    server portal{n} {upstream}" for n, upstream in enumerate(upstreams, 1)
        ),
        portal_check_host=portal_host_name() or "localhost",
        body_max=marks.largest(),
        scheme=settings.PROXY_SESSION_SCHEME,
    )


def portal_host_name() -> str:
    """PORTAL_URL's host name, lower-case ('' if it has none)."""
    return (urlsplit(settings.PORTAL_URL).hostname or "").lower()


class HAProxyError(Exception):
    """HAProxy could not be reached, or refused a command."""


# A map entry saying who may use a session: "<session id>/<user id>" (its value is "1").
GRANT = re.compile(r"^([0-9a-f]{32})/([0-9]{1,12})\Z")


@dataclass(frozen=True)
class Route:
    sid: str
    address: str  # an IP literal
    port: int
    token: str
    # The people whose cookies HAProxy lets through (user ids; proxy/access.openers).
    openers: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        if not SESSION_ID.match(self.sid):
            raise ValueError(f"not a session id: {self.sid!r}")
        ipaddress.ip_address(self.address)  # ValueError for anything but an IP literal
        if "%" in self.address or " " in self.address:  # an IPv6 scope id may hold anything
            raise ValueError(f"not a plain IP address: {self.address!r}")
        if not 1 <= self.port <= 65535:
            raise ValueError(f"not a port: {self.port!r}")
        if not validators.SESSION_TOKEN.match(self.token):
            raise ValueError("the upstream token is not URL-safe")
        if not all(isinstance(uid, int) and 0 < uid < 10**12 for uid in self.openers):
            raise ValueError("openers are user ids")

    @property
    def target(self) -> tuple[str, int, str]:
        return (self.address, self.port, self.token)


class RuntimeAPI:
    """One HAProxy instance's admin socket: ``unix:/path`` (or a bare path) or
    ``tcp:host:port``."""

    def __init__(self, address: str, map_path: str, timeout: float = 2.0) -> None:
        self.address = address
        self.map_path = map_path
        self.timeout = timeout

    def command(self, line: str) -> str:
        if "\n" in line or ";" in line:
            raise ValueError("one runtime command at a time")
        target: tuple[str, int] | str
        if self.address.startswith("tcp:"):
            host, _, port = self.address[4:].rpartition(":")
            family, target = socket.AF_INET, (host, int(port))
        else:
            family, target = socket.AF_UNIX, self.address.removeprefix("unix:")
        try:
            with socket.socket(family, socket.SOCK_STREAM) as sock:
                sock.settimeout(self.timeout)
                sock.connect(target)
                sock.sendall(line.encode() + b"\n")
                answer = bytearray()
                while chunk := sock.recv(65536):
                    answer += chunk
                    if len(answer) > MAX_ANSWER:
                        raise HAProxyError(f"HAProxy's answer to {line.split()[0]!r} is too long")
        except OSError as exc:
            raise HAProxyError(f"HAProxy at {self.address}: {exc}") from None
        return answer.decode(errors="replace").strip()

    # -- routes -----------------------------------------------------------------------
    def add(self, route: Route, grants: Set[int] | None = None) -> None:
        """Route the session's host to its notebook (replacing an older route, whose
        openers are ``grants`` when known)."""
        self.remove(route.sid, grants)
        # weight 0: a session without a server must never be load-balanced onto another
        # session's server (use-server falls back to balancing when the name is unknown).
        # maxconn: one session's share of HAProxy's connections (more wait in its queue).
        # pool-*: dynamic servers start without an idle-connection pool in 2.6, so every
        # request would open a new connection to the notebook.
        answer = self.command(
            f"add server {BACKEND}/{route.sid} {route.address}:{route.port}"
            f" weight 0 maxconn {settings.PROXY_SESSION_MAXCONN}"
            " pool-max-conn -1 pool-purge-delay 5s"
        )
        if "New server registered" not in answer:
            raise HAProxyError(f"add server {route.sid}: {answer}")
        self.command(f"enable server {BACKEND}/{route.sid}")
        self._add_openers(route.sid, route.openers)
        self.command(f"add map {self.map_path} {route.sid} {route.token}")

    def ensure(self, route: Route) -> None:
        """Route the session as ``route`` says, leaving an identical route (and the
        connections on it) alone; its openers made ``route.openers``."""
        have, grants = self.state()
        if have.get(route.sid) != route.target:
            self.add(route, grants.get(route.sid, set()))
        else:
            self.set_openers(route.sid, route.openers, grants.get(route.sid, set()))

    def set_openers(self, sid: str, wanted: Set[int], have: Set[int]) -> None:
        """Let exactly ``wanted`` through to session ``sid``. When someone loses it, the
        session's open connections are closed too (a WebSocket outlives the check made
        when it opened); the owner's pages reconnect by themselves."""
        self._add_openers(sid, set(wanted) - set(have))
        gone = set(have) - set(wanted)
        self._drop_openers(sid, gone)
        if gone:
            self.command(f"shutdown sessions server {BACKEND}/{sid}")

    def _add_openers(self, sid: str, uids: Set[int]) -> None:
        for uid in sorted(uids):
            self.command(f"add map {self.map_path} {sid}/{uid} 1")

    def _drop_openers(self, sid: str, uids: Set[int]) -> None:
        for uid in sorted(uids):
            self.command(f"del map {self.map_path} {sid}/{uid}")

    def remove(self, sid: str, grants: Set[int] | None = None) -> None:
        """No new request reaches the session, and its open connections (WebSockets
        included) are closed."""
        if not SESSION_ID.match(sid):
            raise ValueError(f"not a session id: {sid!r}")
        self.command(f"del map {self.map_path} {sid}")
        self._drop_openers(sid, self.state()[1].get(sid, set()) if grants is None else grants)
        server = f"{BACKEND}/{sid}"
        if "No such server" in self.command(f"set server {server} state maint"):
            return
        self.command(f"shutdown sessions server {server}")
        # Just after the shutdown HAProxy may still see the connections attached.
        deadline = time.monotonic() + 2
        while "still has connections" in (answer := self.command(f"del server {server}")):
            if time.monotonic() > deadline:
                raise HAProxyError(f"del server {sid}: {answer}")
            time.sleep(0.02)

    def routes(self) -> dict[str, tuple[str, int, str]]:
        """The sessions HAProxy routes now: id -> (address, port, token)."""
        return self.state()[0]

    def openers(self) -> dict[str, set[int]]:
        """Who HAProxy lets through, per session id (user ids)."""
        return self.state()[1]

    def state(self) -> tuple[dict[str, tuple[str, int, str]], dict[str, set[int]]]:
        """(routes, openers) as HAProxy has them now."""
        tokens: dict[str, str] = {}
        grants: dict[str, set[int]] = {}
        for line in self.command(f"show map {self.map_path}").splitlines():
            parts = line.split()  # "<entry id> <session id> <token>" or "<…> <sid>/<uid> 1"
            if len(parts) != 3:
                continue
            if SESSION_ID.match(parts[1]):
                tokens[parts[1]] = parts[2]
            elif grant := GRANT.match(parts[1]):
                grants.setdefault(grant[1], set()).add(int(grant[2]))
        found: dict[str, tuple[str, int, str]] = {}
        for line in self.command(f"show servers conn {BACKEND}").splitlines():
            parts = line.split()
            if len(parts) >= 4 and parts[0].startswith(f"{BACKEND}/") and parts[3].isdigit():
                sid = parts[0].split("/", 1)[1]
                if SESSION_ID.match(sid):
                    found[sid] = (parts[2], int(parts[3]), tokens.get(sid, ""))
        return found, grants

    def reconcile(self, wanted: list[Route], keep: Set[str] = frozenset()) -> tuple[int, int]:
        """Make HAProxy route exactly ``wanted`` (after a restart it routes nothing),
        leaving the routes of ``keep`` as they are. Returns (added, removed)."""
        have, grants = self.state()
        wanted_by_sid = {r.sid: r for r in wanted}
        removed = [sid for sid in have if sid not in wanted_by_sid and sid not in keep]
        for sid in removed:
            self.remove(sid, grants.get(sid, set()))
        for sid in grants.keys() - have.keys() - wanted_by_sid.keys() - set(keep):
            self._drop_openers(sid, grants[sid])  # left behind with no route
        added = 0
        for route in wanted:
            if have.get(route.sid) != route.target:
                self.add(route, grants.get(route.sid, set()))
                added += 1
            else:
                self.set_openers(route.sid, route.openers, grants.get(route.sid, set()))
        return added, len(removed)
