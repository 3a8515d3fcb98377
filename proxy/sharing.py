"""Sharing a running session with colleagues, and withdrawing it.

The owner shares their notebook or TensorBoard with named members of the job's project,
or with the project (every member who sees the job). TensorBoard only shows runs, so a
share of it changes nothing on the cluster. A notebook is a shell as its owner: it is
shared only with the owner's explicit acceptance of that (``acts_as_owner``), and the
recipients are told so. The owner, staff and the project's managers withdraw a share;
the proxy refuses the person's next request (proxy/routes.py pushes the openers on
every change, synchronously, and closes the session's open connections so a WebSocket
of theirs ends too; the owner's reconnect by themselves).

Who may open is decided in proxy/access.py; this module only records, audits and tells.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.urls import reverse

from identity import audit
from notifications.events import Event, session_shared
from notifications.models import Notification
from notifications.tasks import told
from projects.access import role_in, sees_every_job
from proxy.models import SessionLink, SessionShare

MAX_PEOPLE = 20  # named in one share
NAME = re.compile(r"^[\w.@+-]{1,150}\Z")


@dataclass
class Outcome:
    shared: list[str] = field(default_factory=list)  # whom, in words
    problems: list[str] = field(default_factory=list)


def may_share(user: Any, session: SessionLink) -> bool:
    """Only the owner shares: a share hands out their notebook or their runs."""
    return (
        bool(getattr(user, "is_active", False))
        and session.job.owner_id == user.pk
        and session.display_state != "closed"
    )


def may_unshare(user: Any, session: SessionLink) -> bool:
    """The owner, staff, and the managers of the job's project withdraw shares."""
    from projects.models import Role

    job = session.job
    return (
        job.owner_id == user.pk
        or sees_every_job(user)
        or role_in(user, job.project_id) == Role.MANAGER
    )


def _names(text: str) -> list[str]:
    return [name for name in re.split(r"[\s,;]+", text.strip()) if name]


def share(
    session: SessionLink, by: Any, people: str = "", project: bool = False, acts_as_owner=False
) -> Outcome:
    """Share ``session`` with the people named in ``people`` (user names, separated by
    spaces or commas) and/or its job's project. Each share is audited and each person
    named is told; what cannot be shared is said in ``problems`` and nothing of it kept."""
    from projects.models import Membership

    job = session.job
    outcome = Outcome()
    if job.session_acts_as_owner and not acts_as_owner:
        outcome.problems.append(
            f"A shared {job.session_noun} acts as you: whoever opens it runs code as your cluster "
            "user and reads your files. Tick the box that says so to share it."
        )
        return outcome
    if job.project_id is None:
        outcome.problems.append(
            "This job is charged to no project the portal knows: a session is shared "
            "within the project of its job."
        )
        return outcome
    project_name = job.project.name if job.project is not None else ""
    names = _names(people)
    if len(names) > MAX_PEOPLE:
        outcome.problems.append(f"Name at most {MAX_PEOPLE} people at a time.")
        return outcome
    members = {
        m.user.get_username(): m.user
        for m in Membership.objects.current()
        .filter(project_id=job.project_id, user__is_active=True)
        .select_related("user")
    }
    chosen = []
    for name in names:
        shown = name if NAME.match(name) else "that name"
        if name == job.owner.get_username():
            outcome.problems.append("You always open your own session.")
        elif name in members:
            chosen.append(members[name])
        elif NAME.match(name) and get_user_model().objects.filter(username=name).exists():
            outcome.problems.append(
                f"{shown} is not a member of the project {project_name}: a session is "
                "shared within its job's project."
            )
        else:
            outcome.problems.append(f"No one in the portal is called {shown}.")
    if project and job.private:
        outcome.problems.append(
            "This run is private: share it with named people, or make it visible to the "
            "project first."
        )
        project = False
    with transaction.atomic():
        for person in chosen:
            _, created = SessionShare.objects.get_or_create(
                session=session,
                kind=SessionShare.Kind.PERSON,
                user=person,
                defaults={"granted_by": by, "acts_as_owner": acts_as_owner},
            )
            if created:
                _record(audit.Action.SESSION_SHARE, by, session, person.get_username())
                url = reverse("session-open", args=[session.public_id])
                told(
                    Notification.tell(
                        person, Event.SESSION_SHARED, session_shared(job, by, acts_as_owner), url
                    )
                )
            outcome.shared.append(person.get_username())
        if project:
            _, created = SessionShare.objects.get_or_create(
                session=session,
                kind=SessionShare.Kind.PROJECT,
                defaults={"granted_by": by, "acts_as_owner": acts_as_owner},
            )
            if created:
                _record(audit.Action.SESSION_SHARE, by, session, f"project {project_name}")
            outcome.shared.append(f"the project {project_name}")
    if outcome.shared:
        transaction.on_commit(lambda: _push(session))
    return outcome


def unshare(session: SessionLink, by: Any, share_id: int) -> bool:
    """Withdraw one share; the proxy refuses its people's next request."""
    found = session.shares.filter(pk=share_id).select_related("user").first()
    if found is None:
        return False
    project = session.job.project
    if found.kind == SessionShare.Kind.PROJECT:
        whom = f"project {project.name if project is not None else '?'}"
    else:
        whom = found.user.get_username() if found.user is not None else "?"
    found.delete()
    _record(audit.Action.SESSION_UNSHARE, by, session, whom)
    transaction.on_commit(lambda: _push(session))
    return True


def _record(what: str, by: Any, session: SessionLink, whom: str) -> None:
    job = session.job
    audit.record(
        what,
        audit.Outcome.OK,
        user=by,
        account=job.cluster_account,
        cluster=job.cluster,
        target=f"job {job.pk} session {session.public_id} with {whom}",
    )


def _push(session: SessionLink) -> None:
    from proxy import routes

    routes.push(session)
