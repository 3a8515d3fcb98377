"""Who may open and use a session link: decided here, and only here.

Seeing a link is seeing its job (jobs/access.py: the owner, or staff): its state and its
revocation follow that rule (``session_for_user``). *Opening* it is a shell as its owner,
so staff alone is not enough: ``may_open`` says yes to the owner, and to someone else only
with the permission ``proxy.open_others_sessions`` (granted deliberately, as JupyterHub's
``access:servers``; a superuser holds every permission) and, for a request made with an
API token, the token's admin scope. Anyone else gets a 404, never a 403. What follows
only carries the answer:

- ``proxy.views.open_session`` (``session_to_open``) issues a one-time code
  (proxy/codes.py) to the user this module allowed, bound to the browser's state cookie on
  the session host; an open of someone else's session is recorded in the audit log and
  told to its owner in the portal (``opened``);
- ``proxy.views.session_login`` (on the session host) trades that code for the session
  cookie, asking ``may_open`` again (a permission withdrawn after the code was issued
  counts), so a cookie proves the check passed;
- HAProxy routes a link only while it is open (``SessionLink.is_open``: running job,
  active owner; proxy/routes.py) and checks the cookie's signature, session and expiry,
  not who it names: a cookie already minted lasts until it expires (PROXY_COOKIE_MAX_AGE)
  or the session ends, whatever happens to its holder's permission meanwhile.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.urls import reverse

from jobs import audit
from jobs.access import sees_every_job
from jobs.notifications.events import Event, session_opened_by
from jobs.notifications.models import Notification
from jobs.notifications.tasks import told
from proxy.models import SessionLink, SessionLinkQuerySet

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


def may_open(user: Any, session: SessionLink) -> bool:
    """Whether ``user`` may open and use ``session``: its owner, or ``may_open_others``."""
    if user is None or not getattr(user, "is_authenticated", False):
        return False
    return session.job.owner_id == user.pk or may_open_others(user)


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


def opened(user: Any, session: SessionLink) -> None:
    """``user`` is handed ``session`` (a one-time code was issued): when it is someone
    else's, one audit row (SESSION_OPEN_OTHER, as the owner's cluster account) and a
    notice to the owner in the portal (and by email), whatever their settings."""
    job = session.job
    if job.owner_id == user.pk:
        return
    audit.record(
        audit.Action.SESSION_OPEN_OTHER,
        audit.Outcome.OK,
        user=user,
        account=job.cluster_account,
        cluster=job.cluster,
        target=f"job {job.pk} session {session.public_id} of {job.owner.get_username()}",
    )
    message = session_opened_by(job, user)
    url = reverse("job-detail", args=[job.pk])
    told(Notification.tell(job.owner, Event.SESSION_OPENED_BY_OTHER, message, url))
