"""Projects from the scheduler: each account of a cluster becomes a Project, and each
portal user whose *proven* cluster user the scheduler associates with it a Membership.
Joins and leaves follow at each sync; nothing here is typed by a person.

A cluster user counts only when the portal knows it is that person's (the cluster's user
map at sign-in, or an administrator: ``ClusterAccount.unproven_reason``): a name a person
typed would otherwise choose whose team's runs they see.

Whose word counts: what comes back through a login is printed by that login's
environment (``~/.bashrc``, a shell function named ``sacctmgr``), so it can say anything.
The cluster's service account (a login of the centre's, ``ClusterAccount`` without a
user) is believed about everyone: its read makes every membership, role and coordinator.
Without one, the accounts are read through people's own logins, and each read is evidence
about its reader alone (``Evidence.speaks_for``): it may place that person in the accounts
it names, *self-reported* (``Membership.self_reported``: charging only, no role over
anyone's runs, never coordinator), and set that person's default; it never places,
promotes or removes anyone else, and a project goes only when nobody is left in it."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from clusters import pool
from clusters.models import Cluster, ClusterAccount
from projects import grants, signals
from projects.models import RANK, Membership, Project
from schedulers import registry as schedulers
from schedulers.seam import AccountRecord, AccountsRead

log = logging.getLogger(__name__)

# Without a service account, the accounts are read through at most this many people's own
# logins a sync, in turn (the next sync goes on after the last one read): each read places
# its reader alone, and those not read this time keep what their last read said.
MAX_READERS = 20


@dataclass
class Outcome:
    projects: int = 0
    joined: int = 0
    left: int = 0
    gone: int = 0
    changed: int = 0  # memberships whose role, coordinator or default changed
    read: bool = False


@dataclass(frozen=True)
class Evidence:
    """What a sync read, and about whom: ``speaks_for`` None, the service account's read
    of everyone; otherwise only these cluster users, each through their own login."""

    read: AccountsRead
    speaks_for: frozenset[str] | None = None


def service_account(cluster: Cluster) -> ClusterAccount | None:
    return (
        ClusterAccount.objects.filter(cluster=cluster, user__isnull=True)
        .select_related("cluster")
        .first()
    )


def _cursor_key(cluster: Cluster) -> str:
    return f"projects-readers:{cluster.pk}"


def personal_readers(cluster: Cluster) -> list[ClusterAccount]:
    """Up to MAX_READERS of the people whose cluster user is proven theirs, taking turns:
    this sync's start after the last one the previous sync read."""
    enabled = (
        ClusterAccount.objects.filter(cluster=cluster, user__isnull=False, disabled_at=None)
        .select_related("cluster", "user")
        .order_by("pk")
    )
    after = cache.get(_cursor_key(cluster)) or 0
    chosen: list[ClusterAccount] = []
    for part in (enabled.filter(pk__gt=after), enabled.filter(pk__lte=after)):
        for account in part.iterator():
            if len(chosen) == MAX_READERS:
                break
            if not account.unproven_reason():
                chosen.append(account)
    if chosen:
        cache.set(_cursor_key(cluster), chosen[-1].pk, timeout=None)
    return chosen


def own_part(read: AccountsRead, cluster_user: str) -> AccountsRead:
    """What ``read`` says of ``cluster_user`` alone: the accounts that name them, with
    them as the only user and no coordinator, and their own default."""
    accounts = tuple(
        AccountRecord(record.name, frozenset({cluster_user}))
        for record in read.accounts
        if cluster_user in record.users
    )
    default = read.defaults.get(cluster_user)
    return AccountsRead(accounts, {cluster_user: default} if default else {})


def read_accounts(cluster: Cluster) -> Evidence | None:
    """The service account's read, else each of this sync's readers' read of themselves
    (None: the scheduler has no accounts, or no login could read them)."""
    adapter = schedulers.for_cluster(cluster)
    service = service_account(cluster)
    if service is not None:
        read = pool.with_connection(service, adapter.accounts)
        return None if read is None else Evidence(read)
    seen: dict[str, set[str]] = {}
    defaults: dict[str, str] = {}
    speaks_for: set[str] = set()
    for account in personal_readers(cluster):
        try:
            read = pool.with_connection(account, adapter.accounts)
        except Exception:  # noqa: BLE001 - one login failing leaves the others
            log.warning("could not read the accounts of %s as %s", cluster, account, exc_info=True)
            continue
        if read is None:
            return None
        mine = own_part(read, account.username)
        speaks_for.add(account.username)
        for record in mine.accounts:
            seen.setdefault(record.name, set()).update(record.users)
        defaults.update(mine.defaults)
    if not speaks_for:
        return None
    accounts = tuple(AccountRecord(name, frozenset(users)) for name, users in seen.items())
    return Evidence(AccountsRead(accounts, defaults), frozenset(speaks_for))


def proven_people(cluster: Cluster) -> dict[str, int]:
    """{cluster user: portal user id} of the people whose cluster user is proven theirs."""
    people: dict[str, int] = {}
    accounts = ClusterAccount.objects.filter(
        cluster=cluster, user__isnull=False, disabled_at=None
    ).select_related("cluster")
    for account in accounts:
        if account.user_id is not None and not account.unproven_reason():
            people[account.username] = account.user_id
    return people


def people_in_groups(groups: set[str]) -> dict[str, set[int]]:
    """{group: the active people whose identity provider last put them in it}, for
    ``groups``, from one read of the people's claims (however many grants name them)."""
    from identity.models import Identity

    found: dict[str, set[int]] = {group: set() for group in groups}
    if not groups:
        return found
    for user_id, claimed in Identity.objects.filter(user__is_active=True).values_list(
        "user_id", "groups"
    ):
        if isinstance(claimed, list):
            for group in groups.intersection(g for g in claimed if isinstance(g, str)):
                found[group].add(user_id)
    return found


def apply(
    cluster: Cluster, read: AccountsRead, speaks_for: frozenset[str] | None = None
) -> Outcome:
    """Make the cluster's projects and memberships what ``read`` says (one transaction).
    ``speaks_for``: the cluster users the read is evidence about (None: everyone, the
    service account's read); anyone else's memberships stay as they were."""
    now = timezone.now()
    people = proven_people(cluster)
    self_reported = speaks_for is not None
    outcome = Outcome(read=True)
    with transaction.atomic():
        projects: dict[str, Project] = {}
        for record in read.accounts:
            project, _ = Project.objects.update_or_create(
                cluster=cluster, name=record.name, defaults={"synced_at": now, "gone_at": None}
            )
            projects[record.name] = project
        outcome.projects = len(projects)
        current = {
            (m.project_id, m.user_id): m
            for m in Membership.objects.filter(project__cluster=cluster)
        }
        wanted: dict[tuple[int, int], dict] = {}
        if speaks_for is not None:
            # Those this read does not speak for keep what their own last read said.
            for key, m in current.items():
                if m.cluster_user and m.cluster_user not in speaks_for:
                    if people.get(m.cluster_user) == m.user_id:
                        wanted[key] = {
                            "cluster_user": m.cluster_user,
                            "coordinator": m.coordinator,
                            "is_default": m.is_default,
                            "self_reported": m.self_reported,
                        }
        for record in read.accounts:
            project = projects[record.name]
            for cluster_user in record.users:
                user_id = people.get(cluster_user)
                if user_id is None or (speaks_for is not None and cluster_user not in speaks_for):
                    continue
                wanted[(project.pk, user_id)] = {
                    "cluster_user": cluster_user,
                    "coordinator": not self_reported and cluster_user in record.coordinators,
                    "is_default": read.defaults.get(cluster_user) == record.name,
                    "self_reported": self_reported,
                }
        # A project the scheduler no longer has: none in the service account's read; from
        # people's own reads, none of them names it and nobody kept is left in it.
        kept = {project_id for project_id, _ in wanted}
        outcome.gone = (
            Project.objects.filter(cluster=cluster, gone_at__isnull=True)
            .exclude(name__in=list(projects))
            .exclude(pk__in=kept)
            .update(gone_at=now)
        )
        mine = [g for g in grants.configured() if g.cluster == cluster.name]
        in_group = people_in_groups({g.group for g in mine})
        # "only": the scheduler's members of that project who are also in the group (a
        # group narrows a catch-all account to the people of one lab).
        for grant in (g for g in mine if g.role == grants.ONLY):
            narrowed = projects.get(grant.account)
            if narrowed is None:
                continue
            allowed = in_group[grant.group]
            for key in [k for k in wanted if k[0] == narrowed.pk and k[1] not in allowed]:
                del wanted[key]
        for grant in (g for g in mine if g.role != grants.ONLY):
            extended = projects.get(grant.account)
            if extended is None:
                continue
            for user_id in sorted(in_group[grant.group]):
                fields = wanted.setdefault(
                    (extended.pk, user_id),
                    {"cluster_user": "", "coordinator": False, "is_default": False},
                )
                fields["granted_role"] = max(
                    (fields.get("granted_role") or "", grant.role), key=lambda r: RANK.get(r, 0)
                )
        for fields in wanted.values():
            fields.setdefault("granted_role", "")
            fields.setdefault("self_reported", False)
        leaving = [m.pk for key, m in current.items() if key not in wanted]
        outcome.left = len(leaving)
        Membership.objects.filter(pk__in=leaving).delete()
        for (project_id, user_id), fields in wanted.items():
            member = current.get((project_id, user_id))
            if member is None:
                Membership.objects.create(project_id=project_id, user_id=user_id, **fields)
                outcome.joined += 1
            elif any(getattr(member, k) != v for k, v in fields.items()):
                Membership.objects.filter(pk=member.pk).update(**fields)
                outcome.changed += 1
    if outcome.joined or outcome.left or outcome.gone or outcome.changed:
        signals.members_changed.send(sender=Project, cluster=cluster)
    if outcome.joined or outcome.left or outcome.gone:
        log.info(
            "projects of %s: %d joined, %d left, %d accounts gone",
            cluster,
            outcome.joined,
            outcome.left,
            outcome.gone,
        )
    return outcome


def sync_cluster(cluster: Cluster) -> Outcome:
    evidence = read_accounts(cluster)
    if evidence is None:
        return Outcome()
    return apply(cluster, evidence.read, evidence.speaks_for)
