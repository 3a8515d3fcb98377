"""The folders a person's file manager opens on a cluster, and whose login opens them.

Always the person's own cluster user (never a service account: a cluster whose jobs run
under one shared login has no file manager), through the same pooled, certificate- or
key-authenticated connections as their jobs. A root is an absolute folder the cluster
declares (``home_root``, ``scratch_root``, with ``{user}``); nothing a person types
names one."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.core.exceptions import ValidationError

from clusters.models import Cluster, ClusterAccount
from common.choices import WorkDir
from projects import access


class NoAccess(Exception):
    """Why this person has no file manager on that cluster (a sentence for them)."""


@dataclass(frozen=True)
class Root:
    key: str  # "home", "scratch" or "project-<name>"
    label: str
    path: str  # absolute, on the cluster
    # A project's folder for a viewer of the project: listed and read, never changed here.
    read_only: bool = False


PROJECT_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\Z")


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
    """Home, scratch, and the folders of the person's projects on this cluster (those where
    their role is viewer or more, per projects/access.py: a viewer's is read-only here)."""
    found = []
    for key, label in ((WorkDir.HOME, "Home"), (WorkDir.SCRATCH, "Scratch")):
        try:
            found.append(Root(str(key), label, cluster.work_dir_root(key, account.username)))
        except ValidationError:  # the cluster has none (scratch), or it is misconfigured
            continue
    if cluster.project_root and account.user is not None:
        from projects.models import Project, Role

        roles = access.roles(account.user)
        for project in Project.objects.current().filter(cluster=cluster, pk__in=list(roles)):
            if not PROJECT_NAME.match(project.name):  # the scheduler's name, checked again
                continue
            found.append(
                Root(
                    f"project-{project.name}",
                    f"Project {project.name}",
                    cluster.project_root.replace("{project}", project.name),
                    read_only=roles[project.pk] == Role.VIEWER,
                )
            )
    return found


def root_named(cluster: Cluster, account: ClusterAccount, key: str) -> Root:
    for root in roots_of(cluster, account):
        if root.key == key:
            return root
    raise NoAccess(f"{cluster.name} has no folder called {key!r} for you.")
