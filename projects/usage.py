"""A project's spending as its page shows it: GPU-hours per member and month from the
scheduler's accounting (every job on the account, the portal's or not), against the
account's limits, and its fair-share in words. Read through the cluster's service
account, else through the viewer's own login (what a login prints is that person's word,
shown to them alone: ``login_for``), cached per login for PORTAL_PROJECT_USAGE_CACHE
seconds: a page never asks the scheduler more often than that."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from datetime import date

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from clusters import pool, quotas, ssh
from clusters.models import Cluster, ClusterAccount
from clusters.quotas import Quota
from projects.models import Project
from projects.sync import service_account
from schedulers import registry as schedulers
from schedulers.seam import AccountUsage, UsageLine

log = logging.getLogger(__name__)

# Months shown: this one and the two before.
MONTHS = 3


@dataclass
class MemberUsage:
    cluster_user: str
    person: str  # the portal user's name ('' when the portal does not know them)
    gpu_hours: dict[str, float] = field(default_factory=dict)  # {YYYY-MM: hours}
    jobs: int = 0
    cells: list[float] = field(default_factory=list)  # gpu_hours in the page's months

    @property
    def total(self) -> float:
        return sum(self.gpu_hours.values())


@dataclass
class ProjectUsage:
    months: list[str]
    members: list[MemberUsage]
    limit_gpu_hours: float | None  # GrpTRESMins' gres/gpu, in hours
    concurrent_gpus: int | None  # GrpTRES' gres/gpu
    fair_share: str
    since: str

    @property
    def total(self) -> float:
        return sum(m.total for m in self.members)


def first_month(today: date, months: int = MONTHS) -> date:
    year, month = today.year, today.month - (months - 1)
    while month < 1:
        year, month = year - 1, month + 12
    return date(year, month, 1)


def month_names(since: date, today: date) -> list[str]:
    names, year, month = [], since.year, since.month
    while (year, month) <= (today.year, today.month):
        names.append(f"{year:04d}-{month:02d}")
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return names


def fair_share_text(norm_shares: float | None, effective_usage: float | None) -> str:
    """sshare's figures in words: how the account's recent use compares with its share, and
    what that does to when its jobs start."""
    if norm_shares is None or effective_usage is None or norm_shares <= 0:
        return "The scheduler keeps no fair-share for this account."
    ratio = effective_usage / norm_shares
    if ratio >= 1.1:
        return (
            f"The group used {ratio:.1f}× its share of the cluster recently: its jobs start "
            "later than those of groups that used less, until the use decays."
        )
    if ratio <= 0.9:
        return (
            f"The group used {ratio:.1f}× its share of the cluster recently: its jobs start "
            "ahead of those of groups that used more."
        )
    return "The group used about its share of the cluster recently."


def summarise(project: Project, read: AccountUsage, since: date, today: date) -> ProjectUsage:
    people = dict(project.memberships.values_list("cluster_user", "user__username"))
    members: dict[str, MemberUsage] = {}
    for line in read.lines:
        member = members.setdefault(
            line.user, MemberUsage(cluster_user=line.user, person=people.get(line.user, ""))
        )
        member.gpu_hours[line.month] = member.gpu_hours.get(line.month, 0) + line.gpu_seconds / 3600
        member.jobs += line.jobs
    for cluster_user, person in people.items():
        members.setdefault(cluster_user, MemberUsage(cluster_user=cluster_user, person=person))
    months = month_names(since, today)
    for member in members.values():
        member.cells = [member.gpu_hours.get(month, 0.0) for month in months]
    minutes = read.limits.get("GrpTRESMins", {}).get("gres/gpu")
    return ProjectUsage(
        months=months,
        members=sorted(members.values(), key=lambda m: (-m.total, m.cluster_user)),
        limit_gpu_hours=None if minutes is None else minutes / 60,
        concurrent_gpus=read.limits.get("GrpTRES", {}).get("gres/gpu"),
        fair_share=fair_share_text(read.norm_shares, read.effective_usage),
        since=since.isoformat(),
    )


def to_cache(read: AccountUsage) -> dict:
    """The cache keeps JSON (never pickles): the reading as plain data."""
    return {
        "lines": [asdict(line) for line in read.lines],
        "limits": {k: dict(v) for k, v in read.limits.items()},
        "norm_shares": read.norm_shares,
        "effective_usage": read.effective_usage,
    }


def from_cache(data: dict) -> AccountUsage | None:
    try:
        return AccountUsage(
            lines=tuple(UsageLine(**line) for line in data["lines"]),
            limits=data["limits"],
            norm_shares=data["norm_shares"],
            effective_usage=data["effective_usage"],
        )
    except (KeyError, TypeError):
        return None  # written by another version: read again


class UsageUnavailable(Exception):
    pass


def login_for(cluster: Cluster, user) -> ClusterAccount:
    """Whose login reads a project's usage for ``user``: the service account, else the
    person's own (proven) one, so nobody is shown what another person's login printed."""
    login = service_account(cluster)
    if login is None:
        own = ClusterAccount.for_user(cluster, user)
        if own is not None and own.user_id is not None and not own.unproven_reason():
            login = own
    if login is None:
        raise UsageUnavailable(f"The portal has no login of yours on {cluster.name} to read it.")
    return login


def project_usage(project: Project, user) -> ProjectUsage | None:
    """The project's usage as ``user`` may be shown it (cached); None where its scheduler
    keeps no accounting. UsageUnavailable when the cluster could not be read."""
    today = timezone.localdate()
    since = first_month(today)
    login = login_for(project.cluster, user)
    key = f"project-usage:{project.pk}:{login.pk}:{since.isoformat()}"
    cached = cache.get(key)
    read = None if cached is None else from_cache(cached)
    if read is None:
        adapter = schedulers.for_cluster(project.cluster)
        try:
            read = pool.with_connection(
                login, lambda conn: adapter.account_usage(conn, project.name, since.isoformat())
            )
        except ssh.ClusterError as exc:
            raise UsageUnavailable(f"{project.cluster.name} did not answer: {exc}") from None
        if read is None:
            return None
        if settings.PORTAL_PROJECT_USAGE_CACHE:
            cache.set(key, to_cache(read), settings.PORTAL_PROJECT_USAGE_CACHE)
    return summarise(project, read, since, today)


def storage(project: Project, user) -> list[Quota]:
    """The storage use of the project's members (their cluster users' entries of the
    cluster's quota files; [] when it has none), cached like the usage. UsageUnavailable
    when the cluster could not be read."""
    cluster = project.cluster
    paths = [p for p in cluster.quota_files.split(":") if p]
    if not paths:
        return []
    login = login_for(cluster, user)
    key = f"project-storage:{cluster.pk}:{login.pk}"
    cached = cache.get(key)
    if cached is None:
        try:
            found = pool.with_connection(login, lambda conn: quotas.read(conn, paths))
        except ssh.ClusterError as exc:
            raise UsageUnavailable(f"{cluster.name} did not answer: {exc}") from None
        cached = [asdict(q) for q in found]
        if settings.PORTAL_PROJECT_USAGE_CACHE:
            cache.set(key, cached, settings.PORTAL_PROJECT_USAGE_CACHE)
    members = set(
        project.memberships.exclude(cluster_user="").values_list("cluster_user", flat=True)
    )
    return [Quota(**q) for q in cached if q.get("user") in members]
