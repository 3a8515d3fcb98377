"""Who may open and use a session link: decided here, and only here.

``session_for_user`` is the one check. Every view that acts on a link for a signed-in
user (open, status, revoke) asks it; anyone else gets a 404, never a 403, as for jobs
(jobs/access.py: the job's owner, or staff). What follows only carries its answer:

- ``proxy.views.open_session`` issues a one-time code (proxy/codes.py) to the user this
  function allowed, bound to the browser's state cookie on the session host;
- ``proxy.views.session_login`` (on the session host) trades that code for the session
  cookie, so a cookie proves the check passed;
- HAProxy routes a link only while it is open (``SessionLink.is_open``: running job,
  active owner; proxy/routes.py) and checks the cookie's signature.
"""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404

from jobs.access import sees_every_job
from proxy.models import SessionLink, SessionLinkQuerySet


def sessions_for_user(user: Any) -> SessionLinkQuerySet:
    """The links of the jobs ``user`` may see: their owner's, or every one for staff."""
    sessions = SessionLink.objects.select_related("job", "job__owner")
    return sessions if sees_every_job(user) else sessions.filter(job__owner=user)


def session_for_user(request_or_user: Any, public_id: str) -> SessionLink:
    """The link ``public_id`` if the user (or the request's user) may open and use it;
    Http404 otherwise."""
    user = getattr(request_or_user, "user", request_or_user)
    return get_object_or_404(sessions_for_user(user), public_id=public_id)
