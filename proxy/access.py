"""Who may open and use a session link: decided here, and only here.

Seeing a link is seeing its job (projects/access.py: the owner, or staff): its state and its
revocation follow that rule (``session_for_user``). *Opening* it is a shell as its owner
(a notebook) or a view of their runs (TensorBoard), so seeing the job is not enough:
``may_open`` says yes to the owner; to someone the owner shared it with (``shared_with``:
a named member of the job's project, or every member who sees the job; proxy/sharing.py),
while they still are; and to a holder of the permission ``proxy.open_others_sessions``
(granted deliberately, as JupyterHub's ``access:servers``; a superuser holds every
permission) and, for a request made with an API token, the token's admin scope. Anyone
else gets a 404, never a 403. ``openers`` is the same rule as the set of people HAProxy
lets through. What follows only carries the answer:

- ``proxy.views.open_session`` (``session_to_open``) issues a one-time code
  (proxy/codes.py) to the user this module allowed, bound to the browser's state cookie on
  the session host; an open of someone else's session is recorded in the audit log and
  told to its owner in the portal (``opened``);
- ``proxy.views.session_login`` (on the session host) trades that code for the session
  cookie, asking ``may_open`` again (a permission withdrawn after the code was issued
  counts), so a cookie proves the check passed;
- HAProxy routes a link only while it is open (``SessionLink.is_open``: running job,
  active owner; proxy/routes.py) and checks the cookie's signature, session, expiry and
  the person it names against the session's openers (one map entry each, pushed when a
  share is made or withdrawn, a permission or a project's members change, and rebuilt by
  the reconcile): a share withdrawn fails the very next request, whatever cookie is held.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.urls import reverse

from identity import audit, confirmation
from notifications.events import Event, session_opened_by
from notifications.models import Notification
from notifications.tasks import told
from projects.access import role_in, sees_every_job
from proxy.models import SessionLink, SessionLinkQuerySet, SessionShare

OPEN_OTHERS = "proxy.open_others_sessions"


def sessions_for_user(user: Any) -> SessionLinkQuerySet:
    """The links of the jobs ``user`` may see: their owner's, or every one for staff."""
    sessions = SessionLink.objects.select_related("job", "job__owner")
    return sessions if sees_every_job(user) else sessions.filter(job__owner=user)


def session_for_user(request_or_user: Any, public_id: str) -> SessionLink:
    """The link ``public_id`` if the user (or the request's user) may see its job (its
    state, revoking it); Http404 otherwise. Opening it asks ``session_to_open``."""
    user = getattr(request_or_user, "user", request_or_user)
    return get_object_or_404(sessions_for_user(user), public_id=public_id)


def may_open_others(user: Any) -> bool:
    """Whether ``user`` may open other people's sessions: the permission of its own, and
    for a token the admin scope (a staff token without it acts as its owner alone)."""
    return (
        bool(getattr(user, "is_active", False))
        and user.has_perm(OPEN_OTHERS)
        and "admin" in getattr(user, "api_scopes", ("admin",))
    )


def _in_project(user_id: int, project_id: int | None) -> bool:
    from projects.models import Membership

    return (
        project_id is not None
        and Membership.objects.current().filter(project_id=project_id, user_id=user_id).exists()
    )


def _project_sees(user: Any, job: Any) -> bool:
    """A project share reaches the members who see the job (role viewer or above; never
    a private job's)."""
    return not job.private and bool(role_in(user, job.project_id))


def shared_with(user: Any, session: SessionLink) -> SessionShare | None:
    """The share that lets ``user`` open ``session`` now, if one does: a named person
    still in the job's project, a member who sees the job (the project's share), or an
    administrator who opened it and still holds the permission."""
    job = session.job
    for share in session.shares.all():
        if share.kind == SessionShare.Kind.PERSON and share.user_id == user.pk:
            if _in_project(user.pk, job.project_id):
                return share
        elif share.kind == SessionShare.Kind.PROJECT and _project_sees(user, job):
            return share
    return None


def may_open(user: Any, session: SessionLink) -> bool:
    """Whether ``user`` may open and use ``session``: its owner, someone it is shared
    with, or ``may_open_others``."""
    if user is None or not getattr(user, "is_authenticated", False):
        return False
    if not getattr(user, "is_active", False):
        return False
    return (
        session.job.owner_id == user.pk
        or may_open_others(user)
        or shared_with(user, session) is not None
    )


def openers(session: SessionLink) -> frozenset[int]:
    """The people HAProxy lets through to ``session`` (``may_open``'s rule, as user ids):
    its owner; those it is shared with, while the share holds; administrators who opened
    it with the permission, while they hold it; each only while the identity provider's
    confirmation of them is current (identity/confirmation.py: a logout or withdrawal
    there, or a confirmation that lapsed, takes them out at the next push or reconcile,
    whatever proxy cookie they hold)."""
    from projects.models import Membership, Role

    job = session.job
    found = {job.owner_id}
    members = {}
    if job.project_id is not None:
        members = {
            m.user_id: m
            for m in Membership.objects.current()
            .filter(project_id=job.project_id, user__is_active=True)
            .select_related("project")
        }
    for share in session.shares.select_related("user"):
        if share.kind == SessionShare.Kind.PROJECT:
            if not job.private:
                found.update(uid for uid, m in members.items() if m.role != Role.NONE)
        elif share.user is None or not share.user.is_active:
            continue
        elif share.kind == SessionShare.Kind.PERSON and share.user.pk in members:
            found.add(share.user.pk)
        elif share.kind == SessionShare.Kind.STAFF and may_open_others(share.user):
            found.add(share.user.pk)
    return frozenset(confirmation.current_ids(found))


def may_open_by_id(user_id: int, public_id: str) -> bool:
    """``may_open`` for a user and a link known by id (the code exchange on the session
    host, where no one is signed in: the code names the user)."""
    user = get_user_model().objects.filter(pk=user_id).first()
    session = SessionLink.objects.select_related("job").filter(public_id=public_id).first()
    return user is not None and session is not None and may_open(user, session)


def session_to_open(request_or_user: Any, public_id: str) -> SessionLink:
    """The link ``public_id`` if the user may open it; Http404 otherwise (staff who may
    see the job but lack the permission included)."""
    user = getattr(request_or_user, "user", request_or_user)
    session = (
        SessionLink.objects.select_related("job", "job__owner", "job__cluster")
        .filter(public_id=public_id)
        .first()
    )
    if session is None or not may_open(user, session):
        raise Http404("No such session.")
    return session


def will_open(user: Any, session: SessionLink) -> None:
    """Before ``user`` is handed ``session`` (and its route pushed): an administrator
    opening it by permission alone gets an opener entry of their own (a STAFF share),
    which HAProxy needs to let their cookie through and which lapses with the
    permission."""
    if session.job.owner_id == user.pk or shared_with(user, session) is not None:
        return
    if may_open_others(user):
        SessionShare.objects.get_or_create(
            session=session, kind=SessionShare.Kind.STAFF, user=user, defaults={"granted_by": user}
        )


def opened(user: Any, session: SessionLink) -> None:
    """``user`` is handed ``session`` (a one-time code was issued): one audit row, as the
    owner's cluster account (SESSION_OPEN for its owner; SESSION_OPEN_OTHER for anyone
    else, which the job's page lists for its owner) and, when someone opened it by
    permission rather than a share, a notice to the owner in the portal (and by email),
    whatever their settings."""
    job = session.job
    own = job.owner_id == user.pk
    share = None if own else shared_with(user, session)
    audit.record(
        audit.Action.SESSION_OPEN if own else audit.Action.SESSION_OPEN_OTHER,
        audit.Outcome.OK,
        user=user,
        account=job.cluster_account,
        cluster=job.cluster,
        target=f"job {job.pk} session {session.public_id}"
        + ("" if own else f" of {job.owner.get_username()}"),
        message=_how(own, share),
    )
    if own or share is not None:
        return
    message = session_opened_by(job, user)
    url = reverse("job-detail", args=[job.pk])
    told(Notification.tell(job.owner, Event.SESSION_OPENED_BY_OTHER, message, url))


def _how(own: bool, share: SessionShare | None) -> str:
    """How an open came to be allowed, for its audit row."""
    if own:
        return ""
    return f"shared with {share.get_kind_display()}" if share else "by permission"


def opens_by_others(session: SessionLink, limit: int = 20) -> list:
    """The latest opens of ``session`` by people other than its owner (audit rows), for
    its owner's page."""
    from identity.audit.models import AuditEvent

    return list(
        AuditEvent.objects.filter(
            action=AuditEvent.Action.SESSION_OPEN_OTHER,
            target__startswith=f"job {session.job_id} session {session.public_id} ",
        ).order_by("-at")[:limit]
    )
