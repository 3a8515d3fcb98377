"""Session registration, opening a link, and the proxy app in front of a real upstream."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.test import override_settings

from jobs.models import Job
from proxy.app import ProxyApp
from proxy.codes import COOKIE_NAME, issue_code, make_cookie
from proxy.models import Session

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def notebook_job(running_notebook):
    return running_notebook


@pytest.fixture
def session(notebook_job):
    return Session.for_job(notebook_job)


def register(client, session, secret, body, **extra):
    return client.post(
        f"/sessions/register/{session.public_id}/",
        json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
        **extra,
    )


def test_registration_needs_the_jobs_secret(client, session):
    secret = session.issue_register_secret()
    assert register(client, session, "wrong", {"port": 8888, "token": "t" * 32}).status_code == 403
    assert register(client, session, secret, {"port": 8888, "token": "t" * 32}).status_code == 204
    session.refresh_from_db()
    assert (session.state, session.port, session.upstream_token()) == ("ready", 8888, "t" * 32)
    # Once per run: a second registration (even with the right secret) cannot move it.
    assert register(client, session, secret, {"port": 9999, "token": "u" * 32}).status_code == 409
    session.refresh_from_db()
    assert session.port == 8888


def test_registration_cannot_choose_the_host(client, session):
    Job.objects.filter(pk=session.job_id).update(node="gpu07")
    secret = session.issue_register_secret()
    body = {"port": 8888, "token": "t" * 32, "host": "evil.example.org", "node": "169.254.169.254"}
    assert register(client, session, secret, body, REMOTE_ADDR="10.1.2.3").status_code == 204
    session.refresh_from_db()
    assert session.host == "gpu07"  # the node the scheduler reports, nothing the caller says


@pytest.mark.parametrize("state, node", [("running", ""), ("pending", ""), ("queued", "")])
def test_registration_before_the_scheduler_reports_a_node_is_refused(client, session, state, node):
    """Before: accepted while pending, with the caller's address as the host (the owner
    chose where the proxy connects)."""
    Job.objects.filter(pk=session.job_id).update(state=state, node=node)
    secret = session.issue_register_secret()
    response = register(client, session, secret, {"port": 8888, "token": "t" * 32})
    assert response.status_code == 409 and response["Retry-After"] == "2"
    session.refresh_from_db()
    assert session.state == "starting" and session.host == ""


def test_a_requeue_resets_the_session_and_the_old_route_is_never_open(client, session):
    secret = session.issue_register_secret()
    register(client, session, secret, {"port": 8888, "token": "t" * 32})
    session.refresh_from_db()
    assert session.is_open
    Job.objects.filter(pk=session.job_id).update(node="gpu09")  # requeued onto another node
    session.refresh_from_db()
    assert not session.is_open  # never the old node:port, even before the reset
    assert Session.restart_for(session.job)
    session.refresh_from_db()
    assert (session.state, session.host, session.port, session.upstream_token()) == (
        "starting",
        "",
        None,
        "",
    )
    # The new run registers with the same job secret, on the new node and port.
    assert register(client, session, secret, {"port": 9999, "token": "u" * 32}).status_code == 204
    session.refresh_from_db()
    assert (session.host, session.port, session.is_open) == ("gpu09", 9999, True)


@pytest.mark.parametrize(
    "body",
    [
        {"port": 80, "token": "t" * 32},
        {"port": "x"},
        {"token": "t" * 32},
        {"port": 8888, "token": "bad token; rm"},
    ],
)
def test_registration_rejects_bad_payloads(client, session, body):
    secret = session.issue_register_secret()
    assert register(client, session, secret, body).status_code == 400


def test_registration_for_an_ended_job_is_refused(client, session):
    secret = session.issue_register_secret()
    Job.objects.filter(pk=session.job_id).update(state="cancelled")
    assert register(client, session, secret, {"port": 8888, "token": "t" * 32}).status_code == 409


def test_open_link_is_owner_only_and_explains_starting_and_closed(client, owner, outsider, session):
    client.force_login(outsider)
    assert client.get(f"/sessions/{session.public_id}/open/").status_code == 404
    client.force_login(owner)
    assert "is starting" in client.get(f"/sessions/{session.public_id}/open/").content.decode()
    session.mark_ready("127.0.0.1", 8888, "t" * 32)
    response = client.get(f"/sessions/{session.public_id}/open/?next=/lab/tree")
    assert response.status_code == 302
    assert response["Location"].startswith(f"{session.origin}/_portal/login?code=")
    assert response["Location"].endswith("&next=/lab/tree")
    session.close()
    assert client.get(f"/sessions/{session.public_id}/open/").status_code == 410


def test_open_link_refuses_an_offsite_next(client, owner, session):
    session.mark_ready("127.0.0.1", 8888, "t" * 32)
    client.force_login(owner)
    response = client.get(f"/sessions/{session.public_id}/open/?next=//evil.example.org/")
    assert response["Location"].endswith("&next=/lab")


def test_session_ids_carry_128_random_bits(notebook_job):
    ids = {
        Session.objects.create(
            job=Job.objects.create(
                owner=notebook_job.owner,
                cluster=notebook_job.cluster,
                partition=notebook_job.partition,
                image=notebook_job.image,
                kind="notebook",
            )
        ).public_id
        for _ in range(20)
    }
    assert len(ids) == 20 and all(len(i) == 32 and int(i, 16) >= 0 for i in ids)


# --- the proxy app ---------------------------------------------------------------


class Upstream(BaseHTTPRequestHandler):
    """Stands in for Jupyter: echoes what it received."""

    def do_GET(self):  # noqa: N802
        body = json.dumps(
            {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def upstream():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


@pytest.fixture
def ready(session, upstream):
    session.mark_ready("127.0.0.1", upstream, "jupyter-token-" + "x" * 20)
    return session


def proxy_get(session_id: str, path: str, cookies=None, headers=None, host=None) -> httpx.Response:
    async def go():
        transport = httpx.ASGITransport(app=ProxyApp())
        async with httpx.AsyncClient(transport=transport, base_url="https://proxy") as client:
            return await client.get(
                path,
                headers={
                    "host": host or f"{session_id}.sessions.localhost:8443",
                    **(headers or {}),
                },
                cookies=cookies,
            )

    return async_to_sync(go)()


@override_settings(SESSION_PUBLIC_PORT="8443", PORTAL_URL="http://portal.test")
def test_without_a_cookie_the_browser_goes_through_the_portal(ready):
    response = proxy_get(ready.public_id, "/lab?x=1")
    assert response.status_code == 302
    assert (
        response.headers["location"]
        == f"http://portal.test/sessions/{ready.public_id}/open/?next=/lab%3Fx%3D1"
    )


@override_settings(SESSION_PUBLIC_PORT="8443")
def test_code_becomes_a_host_only_secure_cookie_once(ready, owner):
    code = issue_code(ready.public_id, owner.pk)
    response = proxy_get(ready.public_id, f"/_portal/login?code={code}&next=/lab")
    assert response.status_code == 302 and response.headers["location"] == "/lab"
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE_NAME}=") and "HttpOnly" in cookie and "Secure" in cookie
    assert "Domain" not in cookie
    assert (
        proxy_get(ready.public_id, f"/_portal/login?code={code}&next=/lab").status_code == 403
    )  # used


@override_settings(SESSION_PUBLIC_PORT="8443")
def test_owner_reaches_the_upstream_with_the_token_added_and_cookies_stripped(ready, owner):
    cookies = {
        COOKIE_NAME: make_cookie(ready.public_id, owner.pk),
        "sessionid": "portal-secret",
        "_xsrf": "x1",
    }
    response = proxy_get(
        ready.public_id,
        "/api/status",
        cookies=cookies,
        headers={"origin": f"https://{ready.public_id}.sessions.localhost:8443"},
    )
    assert response.status_code == 200
    seen = response.json()["headers"]
    assert seen["authorization"] == "token jupyter-token-" + "x" * 20
    assert "portal-secret" not in seen.get("cookie", "") and COOKIE_NAME not in seen.get(
        "cookie", ""
    )
    assert "_xsrf=x1" in seen["cookie"]
    assert seen["origin"].startswith("http://127.0.0.1:")


@override_settings(SESSION_PUBLIC_PORT="8443")
def test_another_user_is_refused(ready, outsider):
    response = proxy_get(
        ready.public_id, "/lab", cookies={COOKIE_NAME: make_cookie(ready.public_id, outsider.pk)}
    )
    assert response.status_code == 403 and "another user" in response.text


@override_settings(SESSION_PUBLIC_PORT="8443")
def test_staff_may_help(ready, staff):
    assert (
        proxy_get(
            ready.public_id, "/lab", cookies={COOKIE_NAME: make_cookie(ready.public_id, staff.pk)}
        ).status_code
        == 200
    )


@override_settings(SESSION_PUBLIC_PORT="8443")
def test_a_cookie_for_one_session_does_not_open_another(ready, owner, notebook_job):
    other = Session.objects.create(
        job=Job.objects.create(
            owner=owner,
            cluster=notebook_job.cluster,
            partition=notebook_job.partition,
            image=notebook_job.image,
            kind="notebook",
            state="running",
        )
    )
    other.mark_ready("127.0.0.1", ready.port, "t" * 32)
    response = proxy_get(
        other.public_id, "/lab", cookies={COOKIE_NAME: make_cookie(ready.public_id, owner.pk)}
    )
    assert response.status_code == 302  # back to the portal for that session's own code


@override_settings(SESSION_PUBLIC_PORT="8443")
def test_guessed_ids_and_forged_hosts_are_refused(ready, owner):
    cookie = {COOKIE_NAME: make_cookie(ready.public_id, owner.pk)}
    assert proxy_get("0" * 32, "/lab", cookies=cookie).status_code == 404
    assert (
        proxy_get(ready.public_id, "/lab", cookies=cookie, host="evil.example.org").status_code
        == 404
    )
    assert (
        proxy_get(
            ready.public_id, "/lab", cookies=cookie, host=f"{ready.public_id}.evil.example"
        ).status_code
        == 404
    )


@override_settings(SESSION_PUBLIC_PORT="8443")
def test_cross_origin_requests_are_refused(ready, owner):
    response = proxy_get(
        ready.public_id,
        "/api/contents",
        cookies={COOKIE_NAME: make_cookie(ready.public_id, owner.pk)},
        headers={"origin": "https://evil.example.org"},
    )
    assert response.status_code == 403


@override_settings(SESSION_PUBLIC_PORT="8443")
def test_ended_or_revoked_sessions_show_a_closed_page(ready, owner):
    cookie = {COOKIE_NAME: make_cookie(ready.public_id, owner.pk)}
    ready.close()
    response = proxy_get(ready.public_id, "/lab", cookies=cookie)
    assert response.status_code == 410 and "This session has ended" in response.text


def test_guessed_ids_do_not_grow_the_route_cache_without_bound(monkeypatch):
    import proxy.app

    monkeypatch.setattr(proxy.app, "ROUTE_CACHE_MAX", 50)
    app = ProxyApp()

    async def guess_many():
        for n in range(200):
            await app.route(f"{n:032x}")

    async_to_sync(guess_many)()
    assert len(app._routes) <= 50


@pytest.mark.parametrize(
    "value, safe",
    [
        ("/lab/tree/a%20b.ipynb?x=1", True),
        ("/%5Cevil.com", True),  # an encoded backslash stays a path on the session's origin
        ("//evil.com", False),
        ("/\\evil.com", False),  # browsers read "/\" as "//"
        ("/\tevil.com", False),
        ("https://evil.com/", False),
        ("", False),
    ],
)
def test_next_paths_are_paths_on_the_same_origin(value, safe):
    from proxy.codes import safe_path

    assert safe_path(value) == (value if safe else "/lab")


@override_settings(SESSION_PUBLIC_PORT="8443")
def test_a_double_encoded_backslash_never_becomes_an_offsite_redirect(client, owner, ready):
    """Before: /open/?next=/%255Cevil.com was put into the proxy's login link unencoded, the
    proxy decoded it to /\\evil.com and answered Location: /\\evil.com (= //evil.com)."""
    from urllib.parse import urlsplit

    client.force_login(owner)
    response = client.get(f"/sessions/{ready.public_id}/open/?next=/%255Cevil.com")
    link = urlsplit(response["Location"])
    login = proxy_get(ready.public_id, f"{link.path}?{link.query}")
    assert login.status_code == 302
    location = login.headers["location"]
    assert location == "/%5Cevil.com" and "\\" not in location
