"""The folders a person's file manager opens on a cluster, and whose login opens them.

Always the person's own cluster user (never a service account: a cluster whose jobs run
under one shared login has no file manager), through the same pooled, certificate- or
key-authenticated connections as their jobs. A root is an absolute folder the cluster
declares (``home_root``, ``scratch_root``, with ``{user}``); nothing a person types
names one."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ValidationError

from jobs.models import Cluster, ClusterAccount
from jobs.models.choices import WorkDir


class NoAccess(Exception):
    """Why this person has no file manager on that cluster (a sentence for them)."""


@dataclass(frozen=True)
class Root:
    key: str  # "home" or "scratch"
    label: str
    path: str  # absolute, on the cluster


def account_for(cluster: Cluster, user) -> ClusterAccount:
    if cluster.login_mode == Cluster.LoginMode.SERVICE:
        raise NoAccess(
            f"Jobs on {cluster.name} run under one service account; the file manager works "
            "only as your own cluster user."
        )
    account = ClusterAccount.for_user(cluster, user)
    if account is None or account.user_id != user.pk:
        raise NoAccess(f"You have no account on {cluster.name}.")
    return account


def roots_of(cluster: Cluster, account: ClusterAccount) -> list[Root]:
    found = []
    for key, label in ((WorkDir.HOME, "Home"), (WorkDir.SCRATCH, "Scratch")):
        try:
            found.append(Root(str(key), label, cluster.work_dir_root(key, account.username)))
        except ValidationError:  # the cluster has none (scratch), or it is misconfigured
            continue
    return found


def root_named(cluster: Cluster, account: ClusterAccount, key: str) -> Root:
    for root in roots_of(cluster, account):
        if root.key == key:
            return root
    raise NoAccess(f"{cluster.name} has no folder called {key!r} for you.")
