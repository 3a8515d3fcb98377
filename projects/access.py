"""Who may see and act on a job, written once.

*Acting* (cancel, hold, release, keep, edit, open its session): its owner, or staff.
*Seeing* (its page, charts, logs, files, comparisons, the API, websockets): also the
members of its project (projects/) whose role is viewer or above, unless its owner marked
it private. A role is what the latest sync of the scheduler's accounts says: a person who
left the account stops seeing at that sync.

Pages, the API, websockets and session links all ask through these functions (or
``Job.objects.for_user`` / ``visible_to``, which are built on them).

An API request made with a token (identity/api_auth.py) carries the token's scopes on the
user as ``api_scopes``: a staff member's token without the admin scope acts as its owner
alone."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Q

# Where roles() and linked() keep their answers on the user object (one request, one
# lookup each).
_ROLES = "_project_roles"
_PROJECTS = "_role_projects"
_LINKED = "_read_links"
NO_LINKS: tuple[frozenset[int], frozenset[int]] = (frozenset(), frozenset())


def sees_every_job(user: Any) -> bool:
    return bool(user.is_staff) and "admin" in getattr(user, "api_scopes", ("admin",))


def roles(user: Any) -> dict[int, str]:
    """{project id: role} of the person's projects on the clusters (none left out)."""
    cached = getattr(user, _ROLES, None)
    if cached is not None:
        return cached
    from projects.models import Membership, Role

    found: dict[int, str] = {}
    projects = []
    if getattr(user, "pk", None) is not None:
        for member in (
            Membership.objects.current()
            .filter(user_id=user.pk)
            .select_related("project__cluster")
            .order_by()  # (the model's ordering joins the people; projects_of() sorts)
        ):
            if member.role != Role.NONE:
                found[member.project_id] = member.role
                projects.append(member.project)
    try:
        setattr(user, _PROJECTS, projects)
        setattr(user, _ROLES, found)
    except AttributeError:  # (an object that takes no attributes: asked again next time)
        pass
    return found


def forget_roles(user: Any) -> None:
    """After a sync changed them, in a long-lived consumer: ask again."""
    for name in (_ROLES, _PROJECTS):
        if hasattr(user, name):
            delattr(user, name)
    forget_links(user)


def linked(user: Any) -> tuple[frozenset[int], frozenset[int]]:
    """(job ids, experiment ids) the person reads through read links they opened that
    still live (projects/links.py); nothing, and no query, while PORTAL_READ_LINKS is off."""
    if not settings.PORTAL_READ_LINKS or getattr(user, "pk", None) is None:
        return NO_LINKS
    cached = getattr(user, _LINKED, None)
    if cached is not None:
        return cached
    from projects.models import ReadLink

    live = ReadLink.objects.live().filter(readers__user_id=user.pk)
    # A link's runs, and its experiment's trials' runs (those started since included).
    jobs = frozenset(
        j
        for field in ("jobs", "experiment__trials__jobs")
        for j in live.values_list(field, flat=True)
        if j is not None
    )
    experiments = frozenset(
        e for e in live.values_list("experiment_id", flat=True) if e is not None
    )
    found = (jobs, experiments)
    try:
        setattr(user, _LINKED, found)
    except AttributeError:
        pass
    return found


def forget_links(user: Any) -> None:
    if hasattr(user, _LINKED):
        delattr(user, _LINKED)


def projects_of(user: Any) -> list:
    """The projects whose jobs the person sees (their role above none), by name (read
    with their roles: no query of its own)."""
    roles(user)
    found = getattr(user, _PROJECTS, None)
    if found is None:  # (an object that takes no attributes)
        from projects.models import Project

        found = list(Project.objects.filter(pk__in=list(roles(user))).select_related("cluster"))
    return sorted(found, key=lambda p: (p.name, p.cluster.name))


def may_see_project(user: Any, project_id: int) -> bool:
    """A project's page (its members, their use, its runs): staff and its members with a
    role (a charging-only account shows no one the others' use)."""
    return sees_every_job(user) or project_id in roles(user)


def role_in(user: Any, project_id: int | None) -> str:
    """The person's role in a project ('' when none)."""
    if project_id is None:
        return ""
    return roles(user).get(project_id, "")


def _theirs_or_their_projects(user: Any, **shared: Any) -> Q:
    """Rows the person owns, or of their projects (``shared``: what else such a row must
    be); every row for staff."""
    if sees_every_job(user):
        return Q()
    seen = sorted(roles(user))
    mine = Q(owner_id=user.pk)
    return mine | Q(project_id__in=seen, **shared) if seen else mine


def visible_jobs(user: Any) -> Q:
    """The filter of jobs the person may see (a private one only by its owner), and those
    read links hand them (read only)."""
    seen = _theirs_or_their_projects(user, private=False)
    jobs = linked(user)[0]
    return seen | Q(pk__in=sorted(jobs)) if jobs else seen


def visible_experiments(user: Any) -> Q:
    """The filter of experiments the person may see: theirs, and their projects' (staff:
    every one), and those read links hand them. Acting on one (cancel) is its owner's and
    staff's."""
    seen = _theirs_or_their_projects(user)
    experiments = linked(user)[1]
    return seen | Q(pk__in=sorted(experiments)) if experiments else seen


def may_see(
    user: Any,
    owner_id: int | None,
    project_id: int | None = None,
    private: bool = False,
    job_id: int | None = None,
) -> bool:
    """A job (or its payload's fields) seen by ``user``: visible_jobs' rule on one job."""
    if may_act(user, owner_id):
        return True
    if not private and bool(role_in(user, project_id)):
        return True
    return job_id is not None and job_id in linked(user)[0]


def may_act(user: Any, owner_id: int | None) -> bool:
    return sees_every_job(user) or (owner_id is not None and owner_id == user.pk)


def may_enter(user: Any, owner_id: int | None) -> bool:
    """SSH into a job's allocation: its owner alone, never staff nor a project's members (a
    certificate is a shell as the owner's cluster user; nobody else may be them)."""
    return owner_id is not None and getattr(user, "pk", None) == owner_id


def may_relaunch(user: Any, owner_id: int | None, project_id: int | None, private: bool) -> bool:
    """Launch again as themselves: its owner, staff, or a member (or manager) of its
    project who may see it."""
    from projects.models import Role, at_least

    if may_act(user, owner_id):
        return True
    role = role_in(user, project_id)
    return not private and bool(role) and at_least(role, Role.MEMBER)
