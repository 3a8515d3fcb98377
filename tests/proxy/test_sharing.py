"""Sharing a running session (#41): the owner shares it with named members of the job's
project or with the project; HAProxy lets exactly its openers through (one map entry
each, pushed by the portal); withdrawing a share refuses the person's next request and
closes their WebSocket; every open by someone else is audited and shown to the owner.
Debian's HAProxy in front of the live portal and a stand-in notebook."""

import socket
import time

import pytest
from django.test import Client
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from identity.audit.models import AuditEvent
from jobs.models import Job
from notifications.events import Event
from notifications.models import Notification
from projects import sync
from projects.models import Membership
from proxy import access
from proxy.models import SessionShare
from tests import factories
from tests.proxy.test_sessions import another_notebook
from tests.proxystack import handshake, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def colleague():
    return factories.user("colleague", "colleague-pass-123")


@pytest.fixture
def vision(cluster, owner, colleague, ready):
    """The owner's notebook is charged to vision, where the colleague is a viewer."""
    project = factories.project(cluster, "vision", [owner, colleague], role="viewer")
    Job.objects.filter(pk=ready.job_id).update(project=project)
    ready.job.refresh_from_db()
    return project


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def share(owner, session, **form):
    return signed_in(owner).post(f"/sessions/{session.public_id}/share/", form, follow=True)


def kernel(data_path, session, cookie):
    return connect(
        f"ws://{session.public_id}.sessions.localhost:{data_path.port}/api/kernels/k/channels",
        sock=socket.create_connection(("127.0.0.1", data_path.port)),
        additional_headers={"Cookie": cookie},
    )


def test_a_named_colleague_opens_a_shared_notebook_until_the_share_is_withdrawn(
    ready, vision, data_path, owner, colleague
):
    _, _, where = handshake(data_path, ready, colleague)
    assert where == ""  # before: a viewer never opens a session (404, no code)

    page = share(owner, ready, people="colleague")  # a notebook: the warning not accepted
    assert b"A shared notebook acts as you" in page.content
    assert not SessionShare.objects.exists()
    page = share(owner, ready, people="colleague nobody", acts_as_owner="on")
    assert b"Shared with colleague." in page.content
    assert b"No one in the portal is called nobody." in page.content
    assert data_path.api.openers() == {ready.public_id: {owner.pk, colleague.pk}}
    (told,) = Notification.objects.filter(recipient=colleague)
    assert told.event == Event.SESSION_SHARED and told.url == f"/sessions/{ready.public_id}/open/"
    assert "done as them on the cluster" in told.text

    cookie = sign_in(data_path, ready, colleague)
    assert data_path.get(ready.public_id, cookie=cookie).status_code == 200
    (row,) = AuditEvent.objects.filter(action=AuditEvent.Action.SESSION_OPEN_OTHER)
    assert (row.user, row.message) == (colleague, "shared with a named person")
    # Shown to the owner on the job's page; no notice (the owner shared it).
    assert not Notification.objects.filter(recipient=owner).exists()
    mine = signed_in(owner).get(f"/jobs/{ready.job_id}/").content.decode()
    assert "Opened by others" in mine and "colleague at " in mine
    assert 'data-share="colleague"' in mine

    owners = sign_in(data_path, ready, owner)
    with kernel(data_path, ready, cookie) as theirs:
        theirs.send("ping")
        assert theirs.recv(timeout=5) == "ping"
        (made,) = SessionShare.objects.filter(kind="person")
        started = time.monotonic()
        signed_in(owner).post(f"/sessions/{ready.public_id}/shares/{made.pk}/withdraw/")
        refused = data_path.get(ready.public_id, cookie=cookie)
        refused_after = time.monotonic() - started
        with pytest.raises(ConnectionClosed):
            theirs.recv(timeout=2)
    assert refused.status_code == 302 and refused_after < 1, refused_after
    print(f"\nwithdrawn share refused {refused_after * 1000:.0f} ms after the click")
    assert data_path.get(ready.public_id, cookie=owners).status_code == 200
    _, _, where = handshake(data_path, ready, colleague)
    assert where == ""  # and the portal gives them no new code
    actions = list(
        AuditEvent.objects.filter(action__in=["session_share", "session_unshare"])
        .order_by("at")
        .values_list("action", "username")
    )
    assert actions == [("session_share", "owner"), ("session_unshare", "owner")]


def test_a_project_share_follows_the_projects_members_and_the_private_switch(
    ready, vision, data_path, owner, colleague, cluster
):
    page = share(owner, ready, project="on", acts_as_owner="on")
    assert b"Shared with the project vision." in page.content
    assert data_path.api.openers() == {ready.public_id: {owner.pk, colleague.pk}}
    cookie = sign_in(data_path, ready, colleague)
    assert data_path.get(ready.public_id, cookie=cookie).status_code == 200

    ready.job.set_private(True)  # the owner hides the run: the project's share lapses
    assert data_path.api.openers() == {ready.public_id: {owner.pk}}
    assert data_path.get(ready.public_id, cookie=cookie).status_code == 302
    ready.job.set_private(False)
    assert data_path.api.openers() == {ready.public_id: {owner.pk, colleague.pk}}

    # The colleague leaves the account: at that sync they stop opening it.
    factories.account(cluster, owner, "hpcowner")
    factories.account(cluster, colleague, "hpccolleague")
    Membership.objects.filter(user=owner).update(cluster_user="hpcowner")
    from tests.projects.test_sync import read

    sync.apply(cluster, read(vision=({"hpcowner"}, ())))
    assert not Membership.objects.filter(user=colleague).exists()
    assert data_path.api.openers() == {ready.public_id: {owner.pk}}
    assert data_path.get(ready.public_id, cookie=cookie).status_code == 302


def test_who_may_share_and_withdraw(ready, vision, owner, colleague, cluster, echo):
    factories.user("outsider-person")
    manager = factories.user("manager")
    Membership.objects.create(project=vision, user=manager, coordinator=True)
    page = share(owner, ready, people="outsider-person", acts_as_owner="on")
    assert b"is not a member of the project vision" in page.content
    page = share(owner, ready, people="owner", acts_as_owner="on")
    assert b"You always open your own session." in page.content
    page = share(owner, ready, people="<script>x", acts_as_owner="on")
    assert b"No one in the portal is called that name." in page.content  # never echoed
    assert not SessionShare.objects.exists()
    # Only the owner shares: a colleague or a manager who sees the job cannot.
    for person in (colleague, manager):
        answer = signed_in(person).post(
            f"/sessions/{ready.public_id}/share/", {"people": "manager", "acts_as_owner": "on"}
        )
        assert answer.status_code == 404
    share(owner, ready, people="colleague", acts_as_owner="on")
    (made,) = SessionShare.objects.all()
    withdraw = f"/sessions/{ready.public_id}/shares/{made.pk}/withdraw/"
    assert signed_in(colleague).post(withdraw).status_code == 404  # a viewer cannot
    assert signed_in(manager).post(withdraw).status_code == 302  # the project's manager can
    assert not SessionShare.objects.exists()
    # A private run is shared with named people only.
    ready.job.set_private(True)
    page = share(owner, ready, project="on", acts_as_owner="on")
    assert b"This run is private" in page.content
    # A session of a job charged to no project is not shared.
    lone = another_notebook(ready.job, state="running", node="127.0.0.1")
    from proxy.models import SessionLink

    other = SessionLink.for_job(lone)
    assert other.mark_ready("127.0.0.1", echo, "t" * 32)
    page = share(owner, other, people="colleague", acts_as_owner="on")
    assert b"charged to no project" in page.content


def test_an_administrators_open_lets_them_through_only_while_they_hold_the_permission(
    ready, data_path, owner
):
    helper = factories.staff_user("helper", "helper-pass-123", "proxy.open_others_sessions")
    cookie = sign_in(data_path, ready, helper)
    assert data_path.get(ready.public_id, cookie=cookie).status_code == 200
    assert data_path.api.openers() == {ready.public_id: {owner.pk, helper.pk}}
    helper.user_permissions.clear()
    helper = type(helper).objects.get(pk=helper.pk)  # (Django caches permissions)
    assert access.openers(ready) == frozenset({owner.pk})


def test_a_private_runs_session_shared_by_name_opens_for_that_person_only(
    ready, vision, data_path, owner, colleague
):
    """They cannot see the run (private), yet the share lets them open its session and
    follow its state while it starts; anyone else gets a 404."""
    ready.job.set_private(True)
    stranger = factories.user("someone-else")
    share(owner, ready, people="colleague", acts_as_owner="on")
    theirs = signed_in(colleague)
    assert theirs.get(f"/jobs/{ready.job_id}/").status_code == 404
    assert theirs.get(f"/sessions/{ready.public_id}/status/").json()["state"] == "ready"
    assert signed_in(stranger).get(f"/sessions/{ready.public_id}/status/").status_code == 404
    cookie = sign_in(data_path, ready, colleague)
    assert data_path.get(ready.public_id, cookie=cookie).status_code == 200


def test_a_withdrawal_at_the_provider_refuses_the_next_request_at_once(
    ready, vision, data_path, owner, colleague, settings
):
    """With OIDC on, HAProxy lets a person through only while the provider's confirmation
    of them is current. A back-channel logout or a withdrawal (confirmation.unconfirm)
    pushes their sessions without their opener entry: their next request to the owner's
    notebook shared with them, and to their own, is refused, whatever 12-hour proxy cookie
    they hold; a confirmation that lapses goes at the next reconcile. Before: the cookie
    and the opener entry ignored the provider until the cookie expired."""
    from identity import confirmation
    from proxy import routes

    issuer = "https://idp.example.org"
    settings.PORTAL_OIDC_ISSUER = issuer
    settings.PORTAL_OIDC_CLIENT_ID = "portal"
    for person in (owner, colleague):
        factories.identity(person, issuer, person.username)
    share(owner, ready, people="colleague", acts_as_owner="on")
    theirs = sign_in(data_path, ready, colleague)
    mine = sign_in(data_path, ready, owner)
    assert data_path.get(ready.public_id, cookie=theirs).status_code == 200

    started = time.monotonic()
    confirmation.unconfirm(colleague)  # what a back-channel logout does
    refused = data_path.get(ready.public_id, cookie=theirs)
    assert refused.status_code == 302 and time.monotonic() - started < 1
    assert data_path.get(ready.public_id, cookie=mine).status_code == 200
    assert data_path.api.openers() == {ready.public_id: {owner.pk}}

    # The owner's own confirmation lapses (PORTAL_OIDC_CONFIRM_MAX_AGE): the reconcile.
    factories.identity(owner, issuer, owner.username, confirmed_ago=10**6)
    routes.reconcile()
    assert data_path.get(ready.public_id, cookie=mine).status_code == 302
    assert data_path.api.openers() == {}


def test_another_site_cannot_make_a_browser_open_someone_elses_session(
    ready, vision, data_path, owner, colleague
):
    """A link or an image on another site sends the signed-in colleague's browser to the
    open URL: it gets the question ("Open owner's notebook?"), and nothing is recorded; a
    POST without the form's CSRF token is refused. The owner's own open needs no question.
    Before: the GET recorded the open (an audit row; for an administrator, an opener
    entry and a notice to the owner) and handed out a code."""
    share(owner, ready, people="colleague", acts_as_owner="on")
    browser = signed_in(colleague)
    url = f"/sessions/{ready.public_id}/open/"
    asked = browser.get(url, {"next": "/lab", "state": "s" * 43})
    assert asked.status_code == 200 and b"data-confirm-open" in asked.content
    assert b"runs on the cluster as owner" in asked.content
    assert not AuditEvent.objects.filter(action__startswith="session_open").exists()
    forged = Client(enforce_csrf_checks=True)
    forged.force_login(colleague)
    assert forged.post(url, {"next": "/lab"}).status_code == 403
    assert not AuditEvent.objects.filter(action__startswith="session_open").exists()
    confirmed = browser.post(url, {"next": "/lab", "state": "s" * 43})
    assert confirmed.status_code == 302 and confirmed["Location"].startswith(url + "?")
    handed = browser.get(confirmed["Location"])
    assert handed.status_code == 302 and "/_portal/login?code=" in handed["Location"]
    (row,) = AuditEvent.objects.filter(action=AuditEvent.Action.SESSION_OPEN_OTHER)
    assert row.user == colleague
    mine = signed_in(owner).get(url, {"state": "t" * 43})
    assert mine.status_code == 302 and "/_portal/login?code=" in mine["Location"]
