"""The session proxy: an ASGI application in front of notebooks on compute nodes.

Every session has its own origin, ``https://<id>.<SESSION_DOMAIN>/``. A request
passes only with a signed cookie for that session and user (the owner or
staff), which the proxy sets after redeeming a one-time code issued by the
portal. Bodies stream in both directions (nothing is held whole), WebSockets
are relayed, and the Jupyter token is added towards the upstream, so the user
never sees it. Routes come from the database, cached for two seconds per
process, so several proxy processes can run side by side.
"""

from __future__ import annotations

import asyncio
import html
import logging
import re
import time
from dataclasses import dataclass
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, quote

import httpx
from channels.db import database_sync_to_async
from django.conf import settings
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from proxy.codes import COOKIE_NAME, make_cookie, read_cookie, redeem_code, safe_path
from proxy.models import session_origin

log = logging.getLogger(__name__)

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
}
# Never forwarded to a notebook: the proxy's own cookie and, defensively, the portal's.
STRIPPED_COOKIES = {COOKIE_NAME, "sessionid", "csrftoken"}
ROUTE_TTL = 2.0
ROUTE_CACHE_MAX = 10_000
_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class Route:
    public_id: str
    state: str  # "ready", "starting" or "closed"
    host: str
    port: int | None
    token: str
    owner_id: int


async def _db(fn, *args):
    """A database call in a pool thread that gives its connection back afterwards (as a
    request does): pool threads would otherwise keep one connection each, open until the
    process ends and broken after a database restart."""
    return await database_sync_to_async(fn, thread_sensitive=False)(*args)


def _load_route(public_id: str) -> Route | None:
    from proxy.models import Session

    session = Session.objects.select_related("job").filter(public_id=public_id).first()
    if session is None:
        return None
    state = "ready" if session.is_open else session.display_state
    return Route(
        public_id=public_id,
        state=state,
        host=session.host,
        port=session.port,
        token=session.upstream_token() if state == "ready" else "",
        owner_id=session.job.owner_id,
    )


def _is_staff(user_id: int) -> bool:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.filter(pk=user_id, is_staff=True, is_active=True).exists()


def _page(title: str, text: str, link: str | None = None, retry: int = 0) -> bytes:
    more = f'<p><a href="{html.escape(link)}">Back to the portal</a></p>' if link else ""
    refresh = f"<meta http-equiv=refresh content={retry}>" if retry else ""
    return (
        f"<!doctype html><html lang=en><meta charset=utf-8><meta name=viewport content='width=device-width'>{refresh}"
        f"<title>{html.escape(title)}</title><body style='font-family:system-ui;max-width:36rem;margin:3rem auto'>"
        f"<h1>{html.escape(title)}</h1><p>{html.escape(text)}</p>{more}</body></html>"
    ).encode()


class ProxyApp:
    def __init__(self) -> None:
        self._routes: dict[str, tuple[float, Route | None]] = {}
        self._staff: dict[int, tuple[float, bool]] = {}
        self._client: httpx.AsyncClient | None = None

    # -- ASGI entry ---------------------------------------------------------------
    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket":
            await self._websocket(scope, receive, send)

    async def _lifespan(self, receive, send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._client is not None:
                    await self._client.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(
                    settings.PROXY_READ_TIMEOUT, connect=settings.PROXY_CONNECT_TIMEOUT
                ),
                limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
                follow_redirects=False,
            )
        return self._client

    # -- routing and access ----------------------------------------------------------
    @staticmethod
    def session_id(scope) -> str | None:
        host = _header(scope, b"host").split(":")[0].lower()
        suffix = "." + settings.SESSION_DOMAIN.lower()
        if not host.endswith(suffix):
            return None
        label = host[: -len(suffix)]
        return label if _ID.match(label) else None

    async def route(self, public_id: str) -> Route | None:
        now = time.monotonic()
        cached = self._routes.get(public_id)
        if cached and cached[0] > now:
            return cached[1]
        route = await _db(_load_route, public_id)
        if len(self._routes) >= ROUTE_CACHE_MAX:  # guessed ids must not grow memory without bound
            self._routes = {k: v for k, v in self._routes.items() if v[0] > now}
            if len(self._routes) >= ROUTE_CACHE_MAX:
                self._routes.clear()
        self._routes[public_id] = (now + ROUTE_TTL, route)
        return route

    async def allowed(self, route: Route, user_id: int) -> bool:
        if user_id == route.owner_id:
            return True
        now = time.monotonic()
        cached = self._staff.get(user_id)
        if not cached or cached[0] <= now:
            cached = (now + 10, await _db(_is_staff, user_id))
            self._staff[user_id] = cached
        return cached[1]

    async def check(
        self, scope, public_id: str | None
    ) -> tuple[Route | None, tuple[int, bytes, str | None] | None]:
        """The route, or (status, page, redirect) explaining why the request cannot pass."""
        portal = settings.PORTAL_URL
        if public_id is None:
            return None, (
                404,
                _page("No such session", "This address is not a session link."),
                None,
            )
        route = await self.route(public_id)
        if route is None:
            return None, (404, _page("No such session", "This session link does not exist."), None)
        user_id = read_cookie(_cookies(scope).get(COOKIE_NAME, ""), public_id)
        next_path = scope["path"] + (
            ("?" + scope["query_string"].decode()) if scope["query_string"] else ""
        )
        open_url = f"{portal}/sessions/{public_id}/open/?next={quote(next_path)}"
        if user_id is None:  # not signed in here: go through the portal
            return None, (302, b"", open_url)
        if not await self.allowed(route, user_id):
            return None, (
                403,
                _page("Not your session", "This session belongs to another user.", portal),
                None,
            )
        if route.state == "closed":
            return None, (
                410,
                _page(
                    "This session has ended",
                    "The notebook is no longer running, or its link was revoked.",
                    portal,
                ),
                None,
            )
        if route.state != "ready":
            return None, (302, b"", open_url)  # the portal shows a page that waits for it
        return route, None

    # -- HTTP -------------------------------------------------------------------------
    async def _http(self, scope, receive, send) -> None:
        public_id = self.session_id(scope)
        if public_id and scope["path"] == "/_portal/login":
            await self._login(scope, send, public_id)
            return
        route, refusal = await self.check(scope, public_id)
        if refusal:
            await _respond(send, *refusal)
            return
        upstream = f"http://{route.host}:{route.port}"
        url = upstream + quote(scope["path"], safe="/%:@!$&'()*+,;=-._~")
        if scope["query_string"]:
            url += "?" + scope["query_string"].decode("latin-1")
        headers = self.upstream_headers(scope, route, upstream)
        if headers is None:
            await _respond(send, 403, _page("Refused", "Cross-origin request refused."), None)
            return
        has_body = any(
            k.lower() in (b"content-length", b"transfer-encoding") for k, _ in scope["headers"]
        )
        request = self.client.build_request(
            scope["method"], url, headers=headers, content=_body(receive) if has_body else None
        )
        try:
            response = await self.client.send(request, stream=True)
        except httpx.TimeoutException:
            log.warning("session %s: upstream %s timed out", public_id, url)
            await _respond(
                send,
                504,
                _page("The notebook is not answering", "It took too long to respond."),
                None,
            )
            return
        except httpx.HTTPError as exc:
            log.warning("session %s: upstream %s failed: %r", public_id, url, exc)
            await _respond(
                send,
                502,
                _page(
                    "The notebook is not reachable",
                    "It may still be starting; this page tries again by itself.",
                    retry=3,
                ),
                None,
            )
            return
        try:
            out_headers = []
            for name, value in response.headers.raw:
                lname = name.lower()
                if lname.decode() in HOP_BY_HOP:
                    continue
                if lname == b"location" and value.startswith(upstream.encode()):
                    value = session_origin(public_id).encode() + value[len(upstream) :]
                out_headers.append((lname, value))
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": out_headers,
                }
            )
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()

    def upstream_headers(
        self, scope, route: Route, upstream: str
    ) -> list[tuple[bytes, bytes]] | None:
        """Headers for the notebook: the token added, our cookies removed, Origin rewritten."""
        headers = []
        for name, value in scope["headers"]:
            lname = name.lower()
            if lname.decode() in HOP_BY_HOP or lname in (b"cookie", b"authorization"):
                continue
            if lname == b"origin":
                if value.decode() != session_origin(route.public_id):
                    return None  # another site is driving this session
                value = upstream.encode()
            headers.append((lname, value))
        cookies = {k: v for k, v in _cookies(scope).items() if k not in STRIPPED_COOKIES}
        if cookies:
            headers.append((b"cookie", "; ".join(f"{k}={v}" for k, v in cookies.items()).encode()))
        headers.append((b"authorization", f"token {route.token}".encode()))
        client = scope.get("client") or ("", 0)
        headers.append((b"x-forwarded-for", client[0].encode()))
        headers.append((b"x-forwarded-proto", settings.SESSION_SCHEME.encode()))
        return headers

    async def _login(self, scope, send, public_id: str) -> None:
        query = parse_qs(scope["query_string"].decode())
        code = (query.get("code") or [""])[0]
        next_path = safe_path((query.get("next") or ["/lab"])[0])
        user_id = await _db(redeem_code, code, public_id)
        if user_id is None:
            await _respond(
                send,
                403,
                _page(
                    "Link expired", "Open the session again from the portal.", settings.PORTAL_URL
                ),
                None,
            )
            return
        secure = "; Secure" if settings.SESSION_SCHEME == "https" else ""
        cookie = (
            f"{COOKIE_NAME}={make_cookie(public_id, user_id)}; Path=/; HttpOnly; SameSite=Lax"
            f"; Max-Age={settings.SESSION_COOKIE_MAX_AGE}{secure}"
        )
        await send(
            {
                "type": "http.response.start",
                "status": 302,
                "headers": [
                    (b"location", next_path.encode()),
                    (b"set-cookie", cookie.encode()),
                    (b"cache-control", b"no-store"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})

    # -- WebSocket ------------------------------------------------------------------------
    async def _websocket(self, scope, receive, send) -> None:
        await receive()  # websocket.connect
        public_id = self.session_id(scope)
        route, refusal = await self.check(scope, public_id)
        if refusal:
            await send({"type": "websocket.close", "code": 4403})
            return
        upstream = f"http://{route.host}:{route.port}"
        headers = self.upstream_headers(scope, route, upstream)
        if headers is None:
            await send({"type": "websocket.close", "code": 4403})
            return
        skip = {
            b"sec-websocket-key",
            b"sec-websocket-version",
            b"sec-websocket-extensions",
            b"sec-websocket-protocol",
            b"content-length",
        }
        extra = [(k.decode(), v.decode()) for k, v in headers if k not in skip]
        url = f"ws://{route.host}:{route.port}{quote(scope['path'])}"
        if scope["query_string"]:
            url += "?" + scope["query_string"].decode("latin-1")
        try:
            upstream_ws = await ws_connect(
                url,
                additional_headers=extra,
                subprotocols=scope.get("subprotocols") or None,
                max_size=None,
                open_timeout=settings.PROXY_CONNECT_TIMEOUT,
                compression=None,
            )
        except (TimeoutError, OSError, InvalidHandshake, InvalidStatus) as exc:
            log.info("websocket to %s refused: %s", url, exc)
            await send({"type": "websocket.close", "code": 1011})
            return
        await send({"type": "websocket.accept", "subprotocol": upstream_ws.subprotocol})

        async def from_browser():
            while True:
                message = await receive()
                if message["type"] == "websocket.disconnect":
                    return
                data = message.get("bytes")
                await upstream_ws.send(data if data is not None else message.get("text", ""))

        async def to_browser():
            try:
                async for data in upstream_ws:
                    key = "bytes" if isinstance(data, bytes) else "text"
                    await send({"type": "websocket.send", key: data})
            except ConnectionClosed:
                pass
            await send({"type": "websocket.close", "code": 1000})

        tasks = [asyncio.create_task(from_browser()), asyncio.create_task(to_browser())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await upstream_ws.close()


def _header(scope, name: bytes) -> str:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return value.decode("latin-1")
    return ""


def _cookies(scope) -> dict[str, str]:
    jar = SimpleCookie()
    try:
        jar.load(_header(scope, b"cookie"))
    except Exception:  # noqa: BLE001 - a malformed Cookie header counts as no cookies
        return {}
    return {k: m.value for k, m in jar.items()}


async def _body(receive):
    """The request body as it arrives, chunk by chunk (never held whole)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        chunk = message.get("body", b"")
        if chunk:
            yield chunk
        if not message.get("more_body", False):
            return


async def _respond(send, status: int, body: bytes, location: str | None) -> None:
    headers = [(b"content-type", b"text/html; charset=utf-8"), (b"cache-control", b"no-store")]
    if location:
        headers.append((b"location", location.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
