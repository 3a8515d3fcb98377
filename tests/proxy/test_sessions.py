"""Session registration, opening a link, and the data path: Debian's HAProxy in front of
stand-in notebooks, driven by the portal's control plane, with the live portal behind it."""

import json
import socket
import time
from urllib.parse import urlsplit

import httpx
import pytest
from django.test import Client
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from identity.audit.models import AuditEvent
from jobs.models import Job
from notifications.events import Event
from notifications.models import Notification
from proxy import access
from proxy.codes import cookie_name, issue_code
from proxy.models import SessionLink
from tests import factories
from tests.proxystack import TOKEN, handshake, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


def another_notebook(notebook_job, **fields) -> Job:
    """A notebook job of the same owner, on the same cluster, partition and image."""
    return factories.job(
        notebook_job.owner,
        notebook_job.cluster,
        "",
        partition=notebook_job.partition,
        image=notebook_job.image,
        kind=Job.Kind.NOTEBOOK,
        memory_gb=4,
        time_limit_minutes=60,
        **fields,
    )


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
    Job.objects.filter(pk=session.job_id).update(node="gpu07", node_vouched=True)
    secret = session.issue_register_secret()
    body = {"port": 8888, "token": "t" * 32, "host": "evil.example.org", "node": "169.254.169.254"}
    assert register(client, session, secret, body, REMOTE_ADDR="10.1.2.3").status_code == 204
    session.refresh_from_db()
    assert session.host == "gpu07"  # the node the scheduler reports, nothing the caller says


def test_a_node_read_through_the_owners_login_counts_only_from_its_own_address(client, session):
    """Before: the node the owner's login reported was believed, so a ``squeue`` function
    in their ~/.bashrc chose where the proxy connects. Now, unless the service account
    read it, the registration call must come from that node's address."""
    Job.objects.filter(pk=session.job_id).update(node="localhost", node_vouched=False)
    secret = session.issue_register_secret()
    body = {"port": 8888, "token": "t" * 32}
    refused = register(client, session, secret, body, REMOTE_ADDR="10.1.2.3")
    assert refused.status_code == 403 and "localhost" in refused.json()["error"]
    session.refresh_from_db()
    assert session.state == "starting" and session.host == ""
    assert "the call came from 10.1.2.3" in session.job.events.last().message
    assert register(client, session, secret, body, REMOTE_ADDR="127.0.0.1").status_code == 204
    session.refresh_from_db()
    assert (session.state, session.host) == ("ready", "localhost")


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
    # Requeued onto another node (as the service account read it).
    Job.objects.filter(pk=session.job_id).update(node="gpu09", node_vouched=True)
    session.refresh_from_db()
    assert not session.is_open  # never the old node:port, even before the reset
    assert SessionLink.restart_for(session.job)
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


def test_open_link_is_owner_only_and_explains_starting_and_closed(
    client, owner, outsider, session, echo, data_path
):
    client.force_login(outsider)
    assert client.get(f"/sessions/{session.public_id}/open/").status_code == 404
    client.force_login(owner)
    assert "is starting" in client.get(f"/sessions/{session.public_id}/open/").content.decode()
    session.mark_ready("127.0.0.1", echo, "t" * 32)
    # From the portal's page: to the session host first, for the browser's state.
    response = client.get(f"/sessions/{session.public_id}/open/?next=/lab/tree")
    assert response.status_code == 302
    assert response["Location"] == f"{session.origin}/_portal/start?next=%2Flab%2Ftree"
    # Back with it: a code for that state.
    response = client.get(f"/sessions/{session.public_id}/open/?next=/lab/tree&state=s1")
    assert response["Location"].startswith(f"{session.origin}/_portal/login?code=")
    assert response["Location"].endswith("&next=/lab/tree")
    session.close()
    assert client.get(f"/sessions/{session.public_id}/open/").status_code == 410


def test_open_link_refuses_an_offsite_next(client, owner, session, echo, data_path):
    session.mark_ready("127.0.0.1", echo, "t" * 32)
    client.force_login(owner)
    response = client.get(f"/sessions/{session.public_id}/open/?next=//evil.example.org/&state=s")
    assert response["Location"].endswith("&next=/lab")


def test_an_open_session_that_haproxy_cannot_route_waits_instead_of_looping(client, owner, session):
    """The database says open, but no HAProxy answers (restarting): the portal must not
    hand out a code that would only bring the browser back here."""
    session.mark_ready("127.0.0.1", 8888, "t" * 32)
    client.force_login(owner)
    response = client.get(f"/sessions/{session.public_id}/open/?state=s")
    assert response.status_code == 200 and "is starting" in response.content.decode()


def test_session_ids_carry_128_random_bits(notebook_job):
    ids = {
        SessionLink.objects.create(job=another_notebook(notebook_job)).public_id for _ in range(20)
    }
    assert len(ids) == 20 and all(len(i) == 32 and int(i, 16) >= 0 for i in ids)


# --- through HAProxy, routes pushed by the portal -----------------------------------
# The portal (pytest-django's live server) answers /_portal/login behind HAProxy; every
# route below is pushed by the control plane (proxy/routes.py), never added by hand.


def test_a_login_link_works_only_in_the_browser_that_asked_for_it(ready, data_path, owner, staff):
    """Before: the code alone was enough, so a user could send their own session's login
    link to someone else, whose browser then ran the sender's notebook pages."""
    _, login, _ = handshake(data_path, ready, owner)
    for cookie in (None, "portal_state=another-browsers-state"):
        response = data_path.get(ready.public_id, login, cookie=cookie)
        assert response.status_code == 403 and "has expired" in response.text
        assert cookie_name() not in response.headers.get("set-cookie", "")
    # A superuser holds every permission, proxy.open_others_sessions too: their own
    # handshake works.
    assert sign_in(data_path, ready, staff).startswith(cookie_name())


def test_another_user_gets_no_code(ready, data_path, outsider):
    _, _, where = handshake(data_path, ready, outsider)
    assert where == ""  # the portal answered 404: no redirect, no code


def test_staff_without_the_permission_see_the_job_but_cannot_open_its_session(
    ready, data_path, client, owner
):
    """Before: staff (is_staff) opened anyone's notebook, a shell as that person, and
    nothing recorded it. Now it takes proxy.open_others_sessions."""
    helper = factories.staff_user("helper", "helper-pass-123")
    client.force_login(helper)
    page = client.get(f"/jobs/{ready.job_id}/")
    assert page.status_code == 200  # staff still see the job, with no button to open it
    assert b"data-open-session" not in page.content and b"Only its owner opens it" in page.content
    assert client.get(f"/sessions/{ready.public_id}/status/").status_code == 200
    assert client.get(f"/sessions/{ready.public_id}/open/?state=s").status_code == 404
    _, _, where = handshake(data_path, ready, helper)
    assert where == ""  # the portal answered 404: no code
    # A code issued to them anyway (before the rule, or before the permission went) gets
    # no cookie on the session host, and without one HAProxy sends them to the portal.
    code = issue_code(ready.public_id, helper.pk, "st")
    response = data_path.get(
        ready.public_id, f"/_portal/login?code={code}", cookie="portal_state=st"
    )
    assert response.status_code == 403 and cookie_name() not in response.headers.get(
        "set-cookie", ""
    )
    assert data_path.get(ready.public_id, "/lab").status_code == 302
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.SESSION_OPEN_OTHER).exists()
    assert not Notification.objects.filter(event=Event.SESSION_OPENED_BY_OTHER).exists()


def test_the_permission_opens_someone_elses_session_recorded_and_told_to_the_owner(
    ready, data_path, owner
):
    sign_in(data_path, ready, owner)  # the owner's own open: no row, no notice
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.SESSION_OPEN_OTHER).exists()
    helper = factories.staff_user("helper", "helper-pass-123", "proxy.open_others_sessions")
    page = Client()
    page.force_login(helper)
    assert b"its owner is told" in page.get(f"/jobs/{ready.job_id}/").content
    cookie = sign_in(data_path, ready, helper)
    assert data_path.get(ready.public_id, cookie=cookie).status_code == 200  # the notebook
    (row,) = AuditEvent.objects.filter(action=AuditEvent.Action.SESSION_OPEN_OTHER)
    assert (row.user, row.outcome) == (helper, "ok")
    assert row.target == f"job {ready.job_id} session {ready.public_id} of owner"
    (notice,) = Notification.objects.filter(recipient=owner)
    assert notice.event == Event.SESSION_OPENED_BY_OTHER and notice.in_portal
    assert notice.text.startswith("helper opened your notebook")
    assert notice.url == f"/jobs/{ready.job_id}/"


def test_a_token_without_the_admin_scope_opens_only_its_owners_sessions(session, owner):
    helper = factories.staff_user("helper", "helper-pass-123", "proxy.open_others_sessions")
    assert access.may_open(helper, session) and access.may_open(owner, session)
    helper.api_scopes = frozenset({"read", "submit"})
    assert not access.may_open(helper, session)
    helper.api_scopes = frozenset({"read", "admin"})
    assert access.may_open(helper, session)
    helper.is_active = False
    assert not access.may_open(helper, session)


def test_an_open_session_is_routed_and_nothing_else_is(ready, data_path, echo):
    assert data_path.api.routes() == {ready.public_id: ("127.0.0.1", echo, TOKEN)}
    ready.close()
    assert data_path.api.routes() == {}


def test_the_owner_signs_in_on_the_sessions_host_and_reaches_the_notebook(ready, data_path, owner):
    cookie = sign_in(data_path, ready, owner)
    assert cookie.startswith(f"{cookie_name()}=")
    seen = data_path.get(ready.public_id, cookie=f"{cookie}; _xsrf=x1; sessionid=portal-secret")
    assert seen.status_code == 200
    body = seen.json()
    assert body["authorization"] == f"token {TOKEN}"  # added by HAProxy, never the browser's
    assert body["cookie"] == "_xsrf=x1"  # the portal's cookies stay behind


def second_session(notebook_job, echo) -> SessionLink:
    """Another open session of the owner's, on the same stand-in notebook."""
    other = SessionLink.for_job(another_notebook(notebook_job, state="running", node="127.0.0.1"))
    assert other.mark_ready("127.0.0.1", echo, "t" * 32)
    return other


def test_a_login_code_works_once_and_only_on_its_own_sessions_host(
    ready, data_path, owner, echo, notebook_job
):
    state = "the-browsers-state"
    code = issue_code(ready.public_id, owner.pk, state)
    other = second_session(notebook_job, echo)
    cookie = f"portal_state={state}"
    assert (
        data_path.get(other.public_id, f"/_portal/login?code={code}", cookie=cookie).status_code
        == 403
    )
    # A code is used up by any attempt to redeem it, the wrong host's too.
    response = data_path.get(ready.public_id, f"/_portal/login?code={code}", cookie=cookie)
    assert response.status_code == 403 and "has expired" in response.text
    assert cookie_name() not in response.headers.get("set-cookie", "")


def test_without_a_cookie_the_browser_goes_through_the_portal(ready, data_path, live_server, owner):
    state, login, where = handshake(data_path, ready, owner, "/lab?x=1")
    assert where.startswith(f"{ready.origin}/_portal/login?code=")
    assert where.endswith("&next=/lab%3Fx%3D1")


def test_a_cookie_for_one_session_does_not_open_another(
    ready, data_path, owner, notebook_job, echo
):
    other = second_session(notebook_job, echo)
    cookie = sign_in(data_path, ready, owner)
    assert data_path.get(other.public_id, cookie=cookie).status_code == 302  # its own code first


@pytest.mark.parametrize("end", ["revoke", "cancel", "job-ends", "requeue", "deactivated"])
def test_a_session_stops_being_routed_the_moment_it_closes(
    ready, data_path, owner, client, live_server, end
):
    cookie = sign_in(data_path, ready, owner)
    assert data_path.get(ready.public_id, cookie=cookie).status_code == 200
    with connect(  # a kernel's WebSocket, open while the session ends
        f"ws://{ready.public_id}.sessions.localhost:{data_path.port}/api/kernels/k/channels",
        sock=socket.create_connection(("127.0.0.1", data_path.port)),
        additional_headers={"Cookie": cookie},
    ) as kernel:
        kernel.send("ping")
        assert kernel.recv(timeout=5) == "ping"
        started = time.monotonic()
        job = ready.job
        if end == "revoke":
            client.force_login(owner)
            client.post(f"/sessions/{ready.public_id}/revoke/")
        elif end == "cancel":
            client.force_login(owner)
            client.post(f"/jobs/{job.pk}/cancel/")  # before Slurm has even been asked
        elif end == "job-ends":
            job.transition(Job.State.COMPLETED)
        elif end == "deactivated":  # an administrator disables the account
            owner.is_active = False
            owner.save()
        else:
            SessionLink.restart_for(job)
        with pytest.raises(ConnectionClosed):
            kernel.recv(timeout=2)
        assert time.monotonic() - started < 2
    assert data_path.api.routes() == {}
    response = data_path.get(ready.public_id, "/lab", cookie=cookie)
    assert response.status_code == 302  # to the portal, which says why
    if end == "deactivated":
        client.force_login(owner)  # a disabled account is no one: to the sign-in page
        assert client.get(f"/sessions/{ready.public_id}/open/").status_code == 302
        return
    client.force_login(owner)
    page = client.get(f"/sessions/{ready.public_id}/open/")
    assert page.status_code == (200 if end == "requeue" else 410)  # requeue: starting again


def test_a_node_name_that_stops_resolving_does_not_cut_an_open_session(ready, data_path, echo):
    """DNS trouble is not the end of a session: its route stays as it was."""
    from proxy import routes

    Job.objects.filter(pk=ready.job_id).update(node="no-such-node.invalid")
    SessionLink.objects.filter(pk=ready.pk).update(host="no-such-node.invalid")
    assert routes.reconcile() == {data_path.admin: (0, 0)}
    assert routes.push(ready) is False
    assert data_path.api.routes() == {ready.public_id: ("127.0.0.1", echo, TOKEN)}


def test_routes_missed_while_haproxy_was_down_come_back_by_reconcile(ready, data_path, echo):
    from proxy.tasks import reconcile_routes

    data_path.stop()
    data_path.start()  # HAProxy keeps routes in memory: a restart has none
    assert data_path.api.routes() == {}
    outcome = reconcile_routes()
    assert outcome == {data_path.admin: (1, 0)}
    assert data_path.api.routes() == {ready.public_id: ("127.0.0.1", echo, TOKEN)}
    data_path.stop()
    ready.close()  # HAProxy down: the close still succeeds, and is logged
    data_path.start()
    assert reconcile_routes() == {data_path.admin: (0, 0)}
    assert data_path.api.routes() == {}


def test_two_proxy_instances_serve_the_same_session(ready, data_path, owner, tmp_path, settings):
    from tests.proxystack import Proxy

    port = data_path.portal
    second = Proxy(tmp_path, settings, portal=port, portal_url=settings.PORTAL_URL, name="second")
    second.start()
    try:
        settings.PROXY_INSTANCES = [data_path.admin, second.admin]
        assert reconcile_routes_now() == {data_path.admin: (0, 0), second.admin: (1, 0)}
        cookie = sign_in(data_path, ready, owner)  # signed in through the first
        for instance in (data_path, second):
            assert instance.get(ready.public_id, cookie=cookie).status_code == 200
        ready.close()
        for instance in (data_path, second):
            assert instance.api.routes() == {}
            assert instance.get(ready.public_id, cookie=cookie).status_code == 302
    finally:
        second.stop()


def reconcile_routes_now():
    from proxy import routes

    return routes.reconcile()


def test_on_a_sessions_host_the_portal_answers_nothing_but_the_login(client, session):
    host = f"{session.public_id}.sessions.localhost:8443"
    for path in ("/", "/admin/", "/accounts/login/", f"/sessions/{session.public_id}/open/"):
        response = client.get(path, HTTP_HOST=host)
        assert response.status_code == 404 and not response.cookies


def test_over_https_the_cookie_is_host_only_secure_and_prefixed(client, settings, session, owner):
    settings.PROXY_SESSION_SCHEME = "https"
    host = f"{session.public_id}.sessions.localhost:8443"
    start = client.get("/_portal/start?next=/lab/tree", HTTP_HOST=host)
    state = start.cookies["__Host-portal_state"]
    assert state["secure"] and state["httponly"] and state["path"] == "/" and not state["domain"]
    code = issue_code(session.public_id, owner.pk, state.value)
    response = client.get(f"/_portal/login?code={code}&next=/lab/tree", HTTP_HOST=host)
    assert response.status_code == 302 and response["Location"] == "/lab/tree"
    cookie = response.cookies["__Host-portal_session"]
    assert cookie["secure"] and cookie["httponly"] and cookie["path"] == "/"
    assert not cookie["domain"] and cookie["samesite"] == "Lax"
    assert response["Cache-Control"] == "no-store"


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


def test_a_double_encoded_backslash_never_becomes_an_offsite_redirect(
    client, owner, ready, data_path
):
    """Before: /open/?next=/%255Cevil.com was put into the proxy's login link unencoded, the
    proxy decoded it to /\\evil.com and answered Location: /\\evil.com (= //evil.com)."""
    client.force_login(owner)
    response = client.get(f"/sessions/{ready.public_id}/open/?next=/%255Cevil.com&state=s")
    link = urlsplit(response["Location"])
    login = data_path.get(ready.public_id, f"{link.path}?{link.query}", cookie="portal_state=s")
    assert login.status_code == 302
    location = login.headers["location"]
    assert location == "/%5Cevil.com" and "\\" not in location


def test_the_portals_own_host_is_served_whole_by_the_same_haproxy(data_path, live_server):
    host = live_server.url.split("://", 1)[1]
    response = httpx.get(
        f"http://127.0.0.1:{data_path.port}/accounts/login/", headers={"Host": host}, timeout=10
    )
    assert response.status_code == 200 and "Sign in" in response.text


def test_a_session_outside_the_allowed_networks_is_never_routed(ready, data_path, echo, settings):
    """PORTAL_UPSTREAM_NETWORKS, through a real HAProxy: a route it excludes is taken away
    (reconcile) and never pushed; allowed again, it comes back."""
    from proxy import routes

    assert routes.push(ready) is True
    assert data_path.api.routes() == {ready.public_id: ("127.0.0.1", echo, TOKEN)}
    settings.PORTAL_UPSTREAM_NETWORKS = ["10.0.0.0/8", "fc00::/7"]
    assert routes.reconcile() == {data_path.admin: (0, 1)}
    assert data_path.api.routes() == {}
    assert routes.push(ready) is False
    assert data_path.api.routes() == {}
    assert data_path.get(ready.public_id, cookie=f"{cookie_name()}=x").status_code == 302
    assert any("outside the networks" in e.message for e in ready.job.events.all())
    settings.PORTAL_UPSTREAM_NETWORKS = ["127.0.0.0/8"]
    assert routes.push(ready) is True
    assert data_path.api.routes() == {ready.public_id: ("127.0.0.1", echo, TOKEN)}
