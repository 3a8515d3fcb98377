"""Debian's HAProxy with the portal's configuration, and stand-in notebooks, for tests.

``Proxy(tmp, settings, portal=...)`` renders the config from the (test) settings, points
the portal's control plane (settings.PROXY_INSTANCES) at this instance, and starts it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, urlsplit

import httpx

from proxy import haproxy
from proxy.codes import cookie_name
from tests import polling
from tests.livestack import free_port

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
ECHO = Path(__file__).parent / "proxy" / "echo_upstream.py"
DOMAIN = "sessions.localhost"


def need_haproxy() -> None:
    """Skip without HAProxy; fail where the dev setup must have it (root, CI)."""
    import pytest

    if not os.path.exists(HAPROXY):
        if os.environ.get("PORTAL_REQUIRE_DEVCLUSTER") == "1":
            pytest.fail("haproxy is missing: `make test` installs Debian's haproxy")
        pytest.skip("haproxy is missing")


def wait_listening(port: int) -> None:
    polling.until(
        lambda: httpx.get(f"http://127.0.0.1:{port}/", timeout=1),
        20,
        f"something to listen on {port}",
        interval=0.1,
        ignoring=(httpx.TransportError,),
    )


def start_echo(port: int) -> subprocess.Popen:
    """A stand-in notebook (tests/proxy/echo_upstream.py) on ``port``."""
    proc = subprocess.Popen([sys.executable, str(ECHO), str(port)])
    wait_listening(port)
    return proc


class Proxy:
    def __init__(
        self,
        tmp: Path,
        settings,
        portal: str | None = None,
        portal_url: str = "http://portal.localhost:8000",
        name: str = "proxy",
    ):
        self.dir = tmp / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.portal = portal or f"127.0.0.1:{free_port()}"
        self.admin = f"unix:{self.dir / 'admin.sock'}"
        settings.PORTAL_URL = portal_url
        settings.PROXY_SESSION_DOMAIN = DOMAIN
        settings.PROXY_SESSION_SCHEME = "http"
        settings.PROXY_SESSION_PUBLIC_PORT = str(self.port)
        settings.PROXY_MAP_PATH = str(tmp / "tokens.map")
        Path(settings.PROXY_MAP_PATH).touch()
        self.config = self.dir / "haproxy.cfg"
        self.config.write_text(
            haproxy.render_config(
                bind=f"127.0.0.1:{self.port}",
                tls_pem=None,
                portal_upstream=self.portal,
                admin_socket=self.admin,
            )
        )
        self.api = haproxy.RuntimeAPI(self.admin, settings.PROXY_MAP_PATH)
        self.proc: subprocess.Popen | None = None

    def start(self) -> Proxy:
        check = subprocess.run([HAPROXY, "-c", "-q", "-f", str(self.config)], capture_output=True)
        assert check.returncode == 0, check.stderr.decode()
        self.proc = subprocess.Popen([HAPROXY, "-W", "-db", "-f", str(self.config)])
        admin = self.dir / "admin.sock"
        polling.until(admin.exists, 10, f"HAProxy's {admin}", interval=0.05)
        wait_listening(self.port)
        return self

    def stop(self) -> None:
        if self.proc:
            self.proc.terminate()
            self.proc.wait(10)
            (self.dir / "admin.sock").unlink(missing_ok=True)

    def url(self, sid: str, path: str = "/") -> str:
        return f"http://{sid}.{DOMAIN}:{self.port}{path}"

    def get(self, sid: str, path: str = "/api/status", cookie: str | None = None, **headers):
        """A request to session ``sid``'s host (connecting to 127.0.0.1)."""
        if cookie is not None:
            headers["Cookie"] = cookie
        return httpx.get(
            f"http://127.0.0.1:{self.port}{path}",
            headers={"Host": f"{sid}.{DOMAIN}:{self.port}", **headers},
            follow_redirects=False,
            timeout=10,
        )


# --- a browser's way into a session, step by step (the live portal behind HAProxy) ---

TOKEN = "jupyter-token-" + "x" * 20


def portal_cookie(user) -> str:
    """The portal's session cookie of ``user`` signed in (for the live portal)."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


def handshake(data_path, session, user, path: str = "/lab") -> tuple[str, str, str]:
    """A browser's way in, step by step: HAProxy sends it to /_portal/start on the
    session host (a state cookie), that to the portal (signed in as ``user``), the
    portal back to /_portal/login with a code. Returns (state cookie, login path, where
    the portal sent it)."""
    sid = session.public_id
    first = data_path.get(sid, path)
    assert first.status_code == 302
    assert first.headers["location"] == f"/_portal/start?next={quote(path, safe='')}"
    start = data_path.get(sid, first.headers["location"])
    state = start.headers["set-cookie"].split(";")[0]
    assert state.startswith("portal_state=") and "HttpOnly" in start.headers["set-cookie"]
    signed_in = portal_cookie(user)
    portal = httpx.get(start.headers["location"], headers={"Cookie": signed_in}, timeout=10)
    if portal.status_code == 200 and "data-confirm-open" in portal.text:
        portal = confirm_open(start.headers["location"], portal, signed_in)
    where = portal.headers.get("location", "")
    login = urlsplit(where)
    return state, f"{login.path}?{login.query}", where


def confirm_open(url: str, page: httpx.Response, signed_in: str) -> httpx.Response:
    """Someone else's session: the portal asks first ("Open <owner>'s notebook?"); the
    form is sent (POST, with its CSRF token) and the portal's answer to the same open
    after it returned."""
    csrf = page.cookies.get("csrftoken") or ""
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    fields = dict(
        re.findall(r'<input type="hidden" name="(next|state)" value="([^"]*)"', page.text)
    )
    assert token is not None, page.text[:500]
    posted = httpx.post(
        url.split("?", 1)[0],
        data={"csrfmiddlewaretoken": token.group(1), **fields},
        headers={"Cookie": f"{signed_in}; csrftoken={csrf}", "Referer": url},
        timeout=10,
    )
    assert posted.status_code == 302, posted.text[:500]
    back = urlsplit(url)
    return httpx.get(
        f"{back.scheme}://{back.netloc}{posted.headers['location']}",
        headers={"Cookie": signed_in},
        timeout=10,
    )


def sign_in(data_path, session, user) -> str:
    """The whole handshake; returns the session cookie."""
    state, login, _ = handshake(data_path, session, user)
    response = data_path.get(session.public_id, login, cookie=state)
    assert response.status_code == 302 and response.headers["location"] == "/lab"
    cookies = response.headers.get_list("set-cookie")
    assert any(c.startswith('portal_state=""; ') for c in cookies)  # the state is used up
    return next(c for c in cookies if c.startswith(cookie_name())).split(";")[0]
