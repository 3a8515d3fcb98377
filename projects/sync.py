"""Projects from the scheduler: each account of a cluster becomes a Project, and each
portal user whose *proven* cluster user the scheduler associates with it a Membership.
Joins and leaves follow at each sync; nothing here is typed by a person.

A cluster user counts only when the portal knows it is that person's (the cluster's user
map at sign-in, or an administrator: ``ClusterAccount.unproven_reason``): a name a person
typed would otherwise choose whose team's runs they see."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from jobs import schedulers
from jobs.cluster import pool
from jobs.models import Cluster, ClusterAccount
from jobs.seam import AccountRecord, AccountsRead
from projects import grants, signals
from projects.models import RANK, Membership, Project

log = logging.getLogger(__name__)

# Without a service account, the accounts are read through this many people's own logins
# (each sees at least their own associations), their union taken.
MAX_READERS = 20


@dataclass
class Outcome:
    projects: int = 0
    joined: int = 0
    left: int = 0
    gone: int = 0
    changed: int = 0  # memberships whose role, coordinator or default changed
    read: bool = False


def readers(cluster: Cluster) -> list[ClusterAccount]:
    """Whose login reads the accounts: the service account, else some people's own."""
    service = ClusterAccount.objects.filter(cluster=cluster, user__isnull=True).first()
    if service is not None:
        return [service]
    return list(
        ClusterAccount.objects.filter(cluster=cluster, user__isnull=False, disabled_at=None)
        .select_related("cluster", "user")
        .order_by("pk")[:MAX_READERS]
    )


def read_accounts(cluster: Cluster) -> AccountsRead | None:
    """The union of what the readers see (None: the scheduler has no accounts, or none of
    them could read)."""
    adapter = schedulers.for_cluster(cluster)
    seen: dict[str, AccountRecord] = {}
    defaults: dict[str, str] = {}
    answered = False
    for account in readers(cluster):
        try:
            read = pool.with_connection(account, adapter.accounts)
        except Exception:  # noqa: BLE001 - one login failing leaves the others
            log.warning("could not read the accounts of %s as %s", cluster, account, exc_info=True)
            continue
        if read is None:
            return None
        answered = True
        for record in read.accounts:
            before = seen.get(record.name)
            if before is not None:
                record = AccountRecord(
                    record.name,
                    before.users | record.users,
                    before.coordinators | record.coordinators,
                )
            seen[record.name] = record
        defaults.update(read.defaults)
    if not answered:
        return None
    return AccountsRead(accounts=tuple(seen.values()), defaults=defaults)


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


def apply(cluster: Cluster, read: AccountsRead) -> Outcome:
    """Make the cluster's projects and memberships what ``read`` says (one transaction)."""
    now = timezone.now()
    people = proven_people(cluster)
    outcome = Outcome(read=True)
    with transaction.atomic():
        projects: dict[str, Project] = {}
        for record in read.accounts:
            project, _ = Project.objects.update_or_create(
                cluster=cluster, name=record.name, defaults={"synced_at": now, "gone_at": None}
            )
            projects[record.name] = project
        outcome.projects = len(projects)
        outcome.gone = (
            Project.objects.filter(cluster=cluster, gone_at__isnull=True)
            .exclude(name__in=list(projects))
            .update(gone_at=now)
        )
        wanted: dict[tuple[int, int], dict] = {}
        for record in read.accounts:
            project = projects[record.name]
            for cluster_user in record.users:
                user_id = people.get(cluster_user)
                if user_id is None:
                    continue
                wanted[(project.pk, user_id)] = {
                    "cluster_user": cluster_user,
                    "coordinator": cluster_user in record.coordinators,
                    "is_default": read.defaults.get(cluster_user) == record.name,
                }
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
        current = {
            (m.project_id, m.user_id): m
            for m in Membership.objects.filter(project__cluster=cluster)
        }
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
    read = read_accounts(cluster)
    if read is None:
        return Outcome()
    return apply(cluster, read)
