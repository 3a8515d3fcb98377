"""Read-only links with an expiry, for signed-in people outside a project.

Inside a project a link needs nothing: a run's, a comparison's or an experiment's address
opens for every member who sees it (projects/access.py). For someone outside it, a centre may
turn on read links (``PORTAL_READ_LINKS``, off by default): the owner of the runs (or a
manager of their project, or staff) makes one for a run, the runs of a comparison, or an
experiment; whoever opens it while signed in becomes a *reader* of exactly those runs
(pages, charts, logs, comparison; never an action, never a session) until it expires
(at most ``PORTAL_READ_LINK_MAX_DAYS``) or its maker revokes it. Making, opening and
revoking are audit rows. Only the token's hash is kept.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Protocol
from urllib.parse import urlencode

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from common import crypto
from identity import audit
from projects import access
from projects.models import ReadLink, ReadLinkReader, Role


class Run(Protocol):
    """What a link reads of a run (jobs.models.Job: that floor is above this one)."""

    @property
    def pk(self) -> Any: ...

    @property
    def owner_id(self) -> int: ...

    @property
    def project_id(self) -> int | None: ...

    @property
    def private(self) -> bool: ...


class Refused(Exception):
    """Why this link cannot be made (a sentence for the person)."""


def enabled() -> bool:
    return bool(settings.PORTAL_READ_LINKS)


def _may_hand_out(user: Any, owner_id: int, project_id: int | None, private: bool) -> bool:
    """Runs the person may hand to outsiders: their own, any for staff, and the runs a
    project they manage may see."""
    if access.may_act(user, owner_id):
        return True
    return not private and access.role_in(user, project_id) == Role.MANAGER


def refusal(user: Any, jobs: Sequence[Run] = (), experiment: Any = None) -> str:
    """Why ``user`` may not hand these runs (or this experiment) out ("" when they may)."""
    if experiment is not None:
        if not _may_hand_out(user, experiment.owner_id, experiment.project_id, False):
            return "Only its owner, its project's managers and staff hand it out."
        return ""
    if not jobs:
        return "Choose the runs to link to."
    for job in jobs:
        if not _may_hand_out(user, job.owner_id, job.project_id, job.private):
            return (
                f"Run {job.pk} is not yours to hand out: its owner, its project's "
                "managers and staff do (never a private run but its owner)."
            )
    return ""


def make(
    user: Any,
    *,
    jobs: Sequence[Run] = (),
    experiment: Any = None,
    days: int = 7,
) -> tuple[ReadLink, str]:
    """A new link to ``jobs`` (one: a run; several: their comparison) or ``experiment``;
    returns it and its token (shown once)."""
    if not enabled():
        raise Refused("Read links for people outside a project are off on this portal.")
    days = max(1, min(int(days), settings.PORTAL_READ_LINK_MAX_DAYS))
    limit = settings.PORTAL_COMPARE_MAX_RUNS
    if experiment is None and len(jobs) > limit:
        raise Refused(f"A link holds at most {limit} runs (PORTAL_COMPARE_MAX_RUNS).")
    why = refusal(user, jobs, experiment)
    if why:
        raise Refused(why)
    if experiment is not None:
        kind, path = ReadLink.Kind.EXPERIMENT, reverse("experiment-detail", args=[experiment.pk])
    elif len(jobs) == 1:
        kind, path = ReadLink.Kind.RUN, reverse("job-detail", args=[jobs[0].pk])
    else:
        ids = ",".join(str(job.pk) for job in sorted(jobs, key=lambda j: j.pk))
        kind, path = ReadLink.Kind.COMPARISON, f"{reverse('compare')}?{urlencode({'ids': ids})}"
    token = secrets.token_urlsafe(24)
    with transaction.atomic():
        link = ReadLink.objects.create(
            token_hash=crypto.secret_hash(token),
            kind=kind,
            created_by=user,
            expires_at=timezone.now() + timedelta(days=days),
            experiment=experiment,
            path=path,
        )
        if jobs and experiment is None:
            link.jobs.set([job.pk for job in jobs])
        _record(audit.Action.READ_LINK_CREATE, user, link, f"for {days} days")
    return link, token


def url_of(token: str) -> str:
    return settings.PORTAL_URL + reverse("read-link", args=[token])


def open_link(user: Any, token: str) -> ReadLink | None:
    """The live link of ``token``, its opener made a reader of it (an audit row each
    open); None when there is none (expired, revoked, never was, or links are off)."""
    if not enabled() or not token or len(token) > 100:
        return None
    link = ReadLink.objects.live().filter(token_hash=crypto.secret_hash(token)).first()
    if link is None:
        return None
    ReadLinkReader.objects.get_or_create(link=link, user=user)
    access.forget_links(user)
    _record(audit.Action.READ_LINK_OPEN, user, link)
    return link


def revoke(user: Any, link_id: int) -> bool:
    """Its maker (or staff) ends it: its readers lose its runs at once."""
    links = ReadLink.objects.live().filter(pk=link_id)
    if not access.sees_every_job(user):
        links = links.filter(created_by=user)
    link = links.first()
    if link is None:
        return False
    ReadLink.objects.filter(pk=link.pk).update(revoked_at=timezone.now())
    _record(audit.Action.READ_LINK_REVOKE, user, link)
    return True


def _record(what: str, user: Any, link: ReadLink, message: str = "") -> None:
    audit.record(
        what,
        audit.Outcome.OK,
        user=user,
        target=f"read link {link.pk} to {link.get_kind_display()} {link.path} "
        f"of {link.created_by.get_username()}",
        message=message,
    )


def form_context(user: Any, jobs: Sequence[Run] = (), experiment: Any = None) -> dict:
    """The page's "Read-only link" form, when this person may hand these out (else {})."""
    if not enabled() or refusal(user, jobs, experiment):
        return {}
    choices = sorted(
        {1, 7, settings.PORTAL_READ_LINK_MAX_DAYS}
        & set(range(1, settings.PORTAL_READ_LINK_MAX_DAYS + 1))
    )
    return {
        "read_link": {
            "jobs": [j.pk for j in jobs] if experiment is None else [],
            "experiment": experiment.pk if experiment is not None else None,
            "days": choices,
        }
    }
