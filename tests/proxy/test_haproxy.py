"""The HAProxy data path (issue #14), with Debian's HAProxy and stand-in notebooks.

The portal pushes a route per session over HAProxy's admin socket; the cookie is checked
by HAProxy itself on every request; revoking a session closes its open WebSockets.
"""

import asyncio
import grp
import os
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from django.core.signals import request_started
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from proxy import haproxy
from proxy.codes import cookie_name, cookie_secret, make_cookie
from tests import polling
from tests.endpoints.test_proxy import ModelServer, read_stream, serve
from tests.livestack import free_port
from tests.proxystack import DOMAIN, HAPROXY

A, B = "a" * 32, "b" * 32


OWNER = 7  # the user id in cookie_for's cookies, the routes' one opener by default


def route(sid: str, port: int, token: str = "", openers=frozenset({OWNER})) -> haproxy.Route:
    return haproxy.Route(
        sid, "127.0.0.1", port, token or f"jupyter-token-{sid[0]}-0123456789", openers=openers
    )


def cookie_for(sid: str, uid: int = OWNER, **kwargs) -> str:
    return f"{cookie_name()}={make_cookie(sid, uid, **kwargs)}"


def test_each_session_host_reaches_its_own_notebook_with_its_token_added(proxy, upstreams):
    proxy.api.add(route(A, upstreams["A"]))
    proxy.api.add(route(B, upstreams["B"]))
    for sid, name in ((A, "A"), (B, "B")):
        seen = proxy.get(sid, cookie=f"{cookie_for(sid)}; _xsrf=abc; sessionid=portal").json()
        assert seen["port"] == upstreams[name]
        assert seen["authorization"] == f"token jupyter-token-{sid[0]}-0123456789"
        assert seen["cookie"] == "_xsrf=abc"  # the portal's cookies stay behind
    assert proxy.api.routes() == {
        A: ("127.0.0.1", upstreams["A"], "jupyter-token-a-0123456789"),
        B: ("127.0.0.1", upstreams["B"], "jupyter-token-b-0123456789"),
    }


def test_a_session_apps_server_sent_events_pass_at_once(proxy):
    """A centre's app that streams (Gradio's server-sent events, say) is not held back by
    HAProxy: each event reaches the browser as it is sent."""
    server = serve(ModelServer)
    try:
        proxy.api.add(route(A, server.server_port))
        headers = {"Host": f"{A}.{DOMAIN}:{proxy.port}", "Cookie": cookie_for(A)}
        read_stream(f"http://127.0.0.1:{proxy.port}/stream", headers)
    finally:
        server.shutdown()


def test_a_notebook_cannot_set_a_cookie_beyond_its_own_host(proxy, upstreams):
    proxy.api.add(route(A, upstreams["A"]))
    response = proxy.get(A, cookie=cookie_for(A))
    assert response.headers.get_list("set-cookie") == [
        "kept=1; Path=/; HttpOnly",
        "__dropped=; Max-Age=0; Path=/",
        "__dropped=; Max-Age=0; Path=/",
    ]
    assert "clear-site-data" not in response.headers  # nor wipe the whole site's cookies


def test_a_session_without_its_own_server_never_reaches_another_sessions_notebook(proxy, upstreams):
    """use-server falls back to load balancing for an unknown name; session servers have
    weight 0, so that finds nothing (found by a review: with the default weight, B's
    request reached A's notebook)."""
    proxy.api.add(route(A, upstreams["A"]))
    proxy.api.command(f"add map {proxy.api.map_path} {B} token-of-b-0123456789")  # no server
    proxy.api.command(f"add map {proxy.api.map_path} {B}/{OWNER} 1")
    response = proxy.get(B, cookie=cookie_for(B))
    assert response.status_code == 503, response.text


def test_a_session_can_be_routed_again_right_after_its_removal(proxy, upstreams):
    proxy.api.add(route(A, upstreams["A"]))
    for _ in range(3):
        assert proxy.get(A, cookie=cookie_for(A)).status_code == 200
        proxy.api.remove(A)
        proxy.api.add(route(A, upstreams["B"]))  # a requeued notebook, elsewhere
    assert proxy.get(A, cookie=cookie_for(A)).json()["port"] == upstreams["B"]


@pytest.mark.parametrize(
    "cookie",
    [
        None,
        cookie_for(B),  # another session's
        cookie_for(A, max_age=-1),  # expired
        cookie_for(A)[:-3] + "abc",  # tampered
        f"{cookie_name()}=garbage",
    ],
    ids=["none", "other-session", "expired", "tampered", "garbage"],
)
def test_without_a_valid_cookie_for_this_session_the_portal_decides(proxy, upstreams, cookie):
    proxy.api.add(route(A, upstreams["A"]))
    response = proxy.get(A, "/lab/tree?x=1", cookie=cookie)
    assert response.status_code == 302
    assert response.headers["location"] == "/_portal/start?next=%2Flab%2Ftree%3Fx%3D1"


def test_a_signed_cookie_of_someone_who_is_not_an_opener_goes_to_the_portal(proxy, upstreams):
    """Before sharing (#41) HAProxy checked the cookie's session and expiry but not whom it
    names: now each session has its openers, one map entry each."""
    proxy.api.add(route(A, upstreams["A"], openers=frozenset({OWNER, 8})))
    assert proxy.api.openers() == {A: {OWNER, 8}}
    for uid in (OWNER, 8):
        assert proxy.get(A, cookie=cookie_for(A, uid)).status_code == 200
    assert proxy.get(A, cookie=cookie_for(A, 9)).status_code == 302  # to the portal

    async def kernel(uid):
        return await connect(
            f"ws://{A}.{DOMAIN}:{proxy.port}/api/kernels/k/channels",
            host="127.0.0.1",
            port=proxy.port,
            additional_headers={"Cookie": cookie_for(A, uid)},
        )

    async def scenario():
        with pytest.raises(Exception, match="403"):
            await kernel(9)
        shared = await kernel(8)
        await shared.send("ping")
        assert await shared.recv() == "ping"
        started = time.monotonic()
        # The share is withdrawn: the entry goes, and the open WebSocket with it.
        await asyncio.to_thread(proxy.api.ensure, route(A, upstreams["A"]))
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(shared.recv(), 2)
        return time.monotonic() - started

    closed_after = asyncio.run(scenario())
    assert closed_after < 1
    assert proxy.get(A, cookie=cookie_for(A, 8)).status_code == 302
    assert proxy.get(A, cookie=cookie_for(A)).status_code == 200  # the owner's still works
    assert proxy.api.openers() == {A: {OWNER}}
    proxy.api.remove(A)
    assert proxy.api.openers() == {}  # no entry outlives its route


def test_reconcile_makes_the_openers_too(proxy, upstreams):
    proxy.api.add(route(A, upstreams["A"], openers=frozenset({OWNER, 8})))
    proxy.api.command(f"add map {proxy.api.map_path} {B}/9 1")  # a stray entry, no route
    assert proxy.api.reconcile([route(A, upstreams["A"], openers=frozenset({OWNER, 10}))]) == (
        0,
        0,
    )
    assert proxy.api.openers() == {A: {OWNER, 10}}


def test_no_route_sends_the_browser_to_the_portal_and_other_hosts_are_unknown(proxy):
    assert proxy.get(A, cookie=cookie_for(A)).status_code == 302  # starting, ended, revoked
    assert proxy.get("not-a-session", cookie=cookie_for(A)).status_code == 404
    response = httpx.get(
        f"http://127.0.0.1:{proxy.port}/", headers={"Host": f"{A}.evil.example"}, timeout=5
    )
    assert response.status_code == 404


def test_another_site_cannot_drive_a_session(proxy, upstreams):
    proxy.api.add(route(A, upstreams["A"]))
    ok = proxy.get(A, cookie=cookie_for(A), Origin=f"http://{A}.{DOMAIN}")
    assert ok.status_code == 200
    for origin in (f"http://{B}.{DOMAIN}", f"https://{A}.evil.example", "null"):
        assert proxy.get(A, cookie=cookie_for(A), Origin=origin).status_code == 403, origin


def test_revoking_closes_the_sessions_open_websockets_and_only_those(proxy, upstreams):
    proxy.api.add(route(A, upstreams["A"]))
    proxy.api.add(route(B, upstreams["B"]))

    async def scenario():
        async def open_ws(sid):
            return await connect(
                f"ws://{sid}.{DOMAIN}:{proxy.port}/api/kernels/k/channels",
                host="127.0.0.1",
                port=proxy.port,
                additional_headers={"Cookie": cookie_for(sid)},
            )

        ws_a, ws_b = await open_ws(A), await open_ws(B)
        for ws in (ws_a, ws_b):
            await ws.send("ping")
            assert await ws.recv() == "ping"
        started = time.monotonic()
        await asyncio.to_thread(proxy.api.remove, A)
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(ws_a.recv(), 2)
        closed_after = time.monotonic() - started
        await ws_b.send("still here")
        assert await ws_b.recv() == "still here"
        await ws_b.close()
        return closed_after

    closed_after = asyncio.run(scenario())
    assert closed_after < 2
    print(f"\nrevoked session's WebSocket closed {closed_after * 1000:.0f} ms after the revocation")
    assert proxy.get(A, cookie=cookie_for(A)).status_code == 302  # no new requests either
    assert proxy.get(B, cookie=cookie_for(B)).status_code == 200


def test_a_websocket_without_a_valid_cookie_is_refused(proxy, upstreams):
    proxy.api.add(route(A, upstreams["A"]))

    async def attempt(cookie):
        async with connect(
            f"ws://{A}.{DOMAIN}:{proxy.port}/api/kernels/k/channels",
            host="127.0.0.1",
            port=proxy.port,
            additional_headers={"Cookie": cookie},
        ):
            pass

    for cookie in (cookie_for(B), cookie_for(A, max_age=-1)):
        with pytest.raises(Exception, match="403"):
            asyncio.run(attempt(cookie))


def test_a_restarted_haproxy_gets_every_route_back_from_reconcile(proxy, upstreams):
    wanted = [route(A, upstreams["A"]), route(B, upstreams["B"])]
    assert proxy.api.reconcile(wanted) == (2, 0)
    assert proxy.api.reconcile(wanted) == (0, 0)
    proxy.stop()
    proxy.start()  # routes live in HAProxy's memory: gone after a restart
    assert proxy.api.routes() == {}
    assert proxy.api.reconcile(wanted) == (2, 0)
    assert proxy.get(B, cookie=cookie_for(B)).json()["port"] == upstreams["B"]
    assert proxy.api.reconcile(wanted[:1]) == (0, 1)  # B closed meanwhile
    assert proxy.get(B, cookie=cookie_for(B)).status_code == 302


def test_nothing_but_checked_values_reaches_the_admin_socket(proxy):
    for bad in (
        lambda: haproxy.Route("a" * 31 + ";", "127.0.0.1", 1, "t" * 20),
        lambda: haproxy.Route(A, "node1; del server x", 1, "t" * 20),
        lambda: haproxy.Route(A, "127.0.0.1", 70000, "t" * 20),
        lambda: haproxy.Route(A, "127.0.0.1", 8888, "token with spaces and\nnewline"),
        lambda: haproxy.Route(A, "127.0.0.1", 8888, "t" * 20, openers=frozenset({"7 x"})),
        lambda: proxy.api.remove("x\nshow info"),
        lambda: proxy.api.command("show info; show sess"),
    ):
        with pytest.raises(ValueError):
            bad()


def test_the_config_is_rendered_from_settings(settings, tmp_path):
    settings.PROXY_SESSION_DOMAIN = "sessions.hpc.example.org"
    settings.PORTAL_URL = "https://Portal.HPC.example.org"
    text = haproxy.render_config(
        bind=":443", tls_pem="/etc/portal/sessions.pem", portal_upstream="10.0.0.2:8000"
    )
    assert "bind :443 ssl crt /etc/portal/sessions.pem alpn http/1.1" in text
    assert r"^[0-9a-f]{32}\.sessions\.hpc\.example\.org$" in text
    assert "-m str portal.hpc.example.org" in text
    assert "server portal1 10.0.0.2:8000" in text
    assert "Strict-Transport-Security" not in text and "\n    user " not in text
    assert cookie_secret() in text and settings.SECRET_KEY not in text


def test_the_production_config_is_one_haproxy_accepts(settings, tmp_path):
    """Production: TLS for the portal and every session host, plain HTTP redirected, root
    dropped, the admin socket usable by the portal's group. `haproxy -c` checks it (with
    the dev certificate standing in for the wildcard one)."""
    from django.core.management import call_command

    from proxy.management.commands.run_proxy import combined_pem

    if not os.path.exists(HAPROXY):
        pytest.skip("haproxy is missing")
    settings.TLS_DIR = str(tmp_path / "tls")
    settings.PROXY_MAP_PATH = str(tmp_path / "tokens.map")
    (tmp_path / "tokens.map").touch()
    call_command("make_dev_certs", stdout=open(os.devnull, "w"))
    pem = combined_pem(tmp_path / "tls", tmp_path)
    out = tmp_path / "haproxy.cfg"
    call_command(
        "render_proxy_config",
        bind=f"127.0.0.1:{free_port()}",
        tls_pem=str(pem),
        portal="127.0.0.1:8000",
        admin_socket=f"unix:{tmp_path / 'admin.sock'}",
        run_as="nobody:nogroup",
        admin_group="daemon",  # standing in for the portal's group
        redirect_http=f"127.0.0.1:{free_port()}",
        output=str(out),
    )
    text = out.read_text()
    assert "user nobody\n    group nogroup" in text and "mode 660 group daemon" in text
    assert "redirect scheme https code 301 unless { ssl_fc }" in text
    assert "Strict-Transport-Security" in text
    check = subprocess.run([HAPROXY, "-c", "-f", str(out)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "WARNING" not in check.stdout + check.stderr, check.stdout + check.stderr
    if os.getuid() != 0:
        return
    # Started as root: the running HAProxy has its own group, never the portal's; the
    # portal's group owns only the admin socket.
    proc = subprocess.Popen([HAPROXY, "-W", "-db", "-f", str(out)])
    try:
        sock = tmp_path / "admin.sock"
        polling.until(sock.exists, 10, f"HAProxy's {sock}", interval=0.05)
        assert grp.getgrgid(sock.stat().st_gid).gr_name == "daemon"
        assert sock.stat().st_mode & 0o777 == 0o660
        workers = subprocess.run(
            ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True
        ).stdout.split()
        assert workers
        for pid in workers:
            status = Path(f"/proc/{pid}/status").read_text()
            gids = next(line for line in status.splitlines() if line.startswith("Groups:"))
            real = next(line for line in status.splitlines() if line.startswith("Gid:"))
            assert set(real.split()[1:]) == {str(grp.getgrnam("nogroup").gr_gid)}, real
            assert str(grp.getgrnam("daemon").gr_gid) not in gids.split()[1:], gids
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize(
    ("run_as", "admin_group", "why"),
    [("haproxy:portal", "portal", "its own group"), ("haproxy:portal", None, "--admin-group")],
)
def test_haproxy_may_not_run_with_the_portals_group(settings, run_as, admin_group, why):
    """Neither with the portal's group given twice, nor as before #30 (--run-as
    haproxy:portal alone), which rendered HAProxy in the portal's group."""
    from django.core.management import call_command
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match=why):
        call_command(
            "render_proxy_config",
            bind=":443",
            portal="127.0.0.1:8000",
            run_as=run_as,
            admin_group=admin_group,
        )


def test_a_stalled_notebook_holds_only_its_own_share_and_others_still_answer(
    proxy, upstreams, settings
):
    """Session A's notebook accepts connections and never answers; 40 browser requests
    wait on it. A holds at most PROXY_SESSION_MAXCONN connections to it (the rest wait in
    its queue) and session B answers as before."""
    import socket

    settings.PROXY_SESSION_MAXCONN = 8
    stalled = socket.socket()
    stalled.bind(("127.0.0.1", 0))
    stalled.listen(100)  # accepts (the kernel does), never reads or answers
    proxy.api.add(route(A, stalled.getsockname()[1]))
    proxy.api.add(route(B, upstreams["B"]))
    waiting = []
    try:
        for _ in range(40):
            client = socket.create_connection(("127.0.0.1", proxy.port))
            client.sendall(
                f"GET /api/status HTTP/1.1\r\nHost: {A}.{DOMAIN}\r\n"
                f"Cookie: {cookie_for(A)}\r\n\r\n".encode()
            )
            waiting.append(client)
        time.sleep(0.5)
        started = time.monotonic()
        assert proxy.get(B, cookie=cookie_for(B)).json()["port"] == upstreams["B"]
        assert time.monotonic() - started < 1
        stats = proxy.api.command(f"show stat {haproxy.BACKEND} 4 -1")  # servers of it
        header, *rows = stats.lstrip("# ").splitlines()
        columns = header.split(",")
        row = next(r.split(",") for r in rows if r.split(",")[1] == A)
        current, queued = (int(row[columns.index(c)]) for c in ("scur", "qcur"))
        assert current <= 8 and queued >= 30, (current, queued)
    finally:
        for client in waiting:
            client.close()
        stalled.close()


def test_several_portal_web_servers_are_balanced_and_health_checked(settings, tmp_path):
    settings.PORTAL_URL = "https://portal.hpc.example.org"
    settings.PROXY_MAP_PATH = str(tmp_path / "tokens.map")
    (tmp_path / "tokens.map").touch()
    text = haproxy.render_config(
        bind=f"127.0.0.1:{free_port()}",
        tls_pem=None,
        portal_upstream=["10.0.0.11:8000", "10.0.0.12:8000"],
        admin_socket=f"unix:{tmp_path / 'admin.sock'}",
    )
    portal = text[text.index("backend be_portal") :]
    assert "server portal1 10.0.0.11:8000" in portal and "server portal2 10.0.0.12:8000" in portal
    assert "uri /healthz ver HTTP/1.1 hdr Host portal.hpc.example.org" in portal
    assert "default-server check " in portal and "option redispatch" in portal
    config = tmp_path / "haproxy.cfg"
    config.write_text(text)
    if os.path.exists(HAPROXY):
        check = subprocess.run([HAPROXY, "-c", "-f", str(config)], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
    for bad in ([], ["10.0.0.11:8000\n    server evil 6.6.6.6:80"], ["10.0.0.11"]):
        with pytest.raises(ValueError):
            haproxy.render_config(bind=":80", tls_pem=None, portal_upstream=bad)


def test_static_files_come_from_haproxys_cache_and_pages_never(data_path):
    """Behind HAProxy a static file reaches a web process once; every later request for
    it is answered from HAProxy's cache. Pages always reach the portal (the live server,
    whose requests are counted here)."""
    reached: list[str] = []

    def note(sender, environ, **kwargs):
        reached.append(environ["PATH_INFO"])

    def get(path: str) -> httpx.Response:
        return httpx.get(
            f"http://127.0.0.1:{data_path.port}{path}",
            headers={"Host": f"localhost:{data_path.port}", "Accept-Encoding": "gzip"},
            timeout=10,
        )

    request_started.connect(note)
    try:
        static, page = "/static/frontend/upload.js", "/accounts/login/"
        first, again = get(static), get(static)
        assert first.status_code == again.status_code == 200 and first.content == again.content
        assert b"function" in first.content
        assert get(page).status_code == get(page).status_code == 200
    finally:
        request_started.disconnect(note)
    assert reached.count(static) == 1 and reached.count(page) == 2


def test_haproxy_refuses_a_declared_body_larger_than_any_the_portal_takes(data_path):
    """A second bound in front of the web processes' own (portal/body_limits.py): the
    largest body any address takes, by its Content-Length, refused by HAProxy itself."""
    from common import marks

    reached: list[str] = []

    def note(sender, environ, **kwargs):
        reached.append(environ["PATH_INFO"])

    request_started.connect(note)
    try:
        with socket.create_connection(("127.0.0.1", data_path.port), timeout=10) as sock:
            sock.sendall(
                f"POST /api/v1/imports/ HTTP/1.1\r\nHost: localhost:{data_path.port}\r\n"
                f"Content-Length: {marks.largest() + 1}\r\n\r\n".encode()
            )
            answer = sock.recv(4096)
    finally:
        request_started.disconnect(note)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert reached == []
