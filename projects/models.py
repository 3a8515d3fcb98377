"""A project is a scheduler's account, read from the cluster (projects/sync.py): its
members are the portal users whose cluster users the scheduler associates with it, and a
person's role in it says what they may do with their colleagues' runs (projects/access.py
asks; nothing else decides)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Role(models.TextChoices):
    """In order: each role may do what the one before it may."""

    NONE = "none", "None (an account for charging only: no one sees the others' runs)"
    VIEWER = "viewer", "Viewer (sees the project's runs, charts, logs and experiments)"
    MEMBER = "member", "Member (also launches on the account, relaunches a colleague's run)"
    MANAGER = "manager", "Manager (also shares, revokes and sets the project's defaults)"


RANK: dict[str, int] = {Role.NONE: 0, Role.VIEWER: 1, Role.MEMBER: 2, Role.MANAGER: 3}


def at_least(role: str, wanted: str) -> bool:
    return RANK.get(role, 0) >= RANK[Role(wanted)]


class ProjectQuerySet(models.QuerySet):
    def current(self) -> ProjectQuerySet:
        """Those the cluster still has."""
        return self.filter(gone_at__isnull=True)


class Project(models.Model):
    """One account of one cluster's scheduler (a Slurm account, an HTCondor accounting
    group). Made and kept by the sync, never typed: ``name`` is the scheduler's."""

    cluster = models.ForeignKey("jobs.Cluster", on_delete=models.CASCADE, related_name="projects")
    name = models.CharField(max_length=64)
    description = models.CharField(max_length=200, blank=True)
    default_role = models.CharField(
        max_length=8,
        choices=[("", "The portal's default (PORTAL_PROJECT_DEFAULT_ROLE)")]
        + [(r.value, r.label) for r in (Role.NONE, Role.VIEWER, Role.MEMBER)],
        blank=True,
        default="",
        help_text="The role of the account's associated users; the scheduler's coordinators "
        "are managers.",
    )
    synced_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The scheduler no longer has it: its members lose their roles, its jobs keep it.
    gone_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = ProjectQuerySet.as_manager()

    class Meta:
        ordering = ["cluster__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="one_project_per_account")
        ]

    def __str__(self) -> str:
        return f"{self.name}@{self.cluster.name}"

    @property
    def members_role(self) -> str:
        return self.default_role or settings.PORTAL_PROJECT_DEFAULT_ROLE


class MembershipQuerySet(models.QuerySet):
    def current(self) -> MembershipQuerySet:
        return self.filter(project__gone_at__isnull=True)


class Membership(models.Model):
    """A portal user in a project, because the scheduler associates their cluster user
    with the account (``coordinator``: the scheduler names them its coordinator)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    # Empty for a person only a provider group makes a member (projects/grants.py).
    cluster_user = models.CharField(max_length=32, blank=True)
    coordinator = models.BooleanField(default=False)
    # The role a provider group grants (at least); empty: none.
    granted_role = models.CharField(max_length=8, blank=True, default="")
    # The scheduler's default account of this cluster user (a job launched without one
    # is charged to it).
    is_default = models.BooleanField(default=False)
    # Read through the person's own login, not the cluster's service account
    # (projects/sync.py): their word about themselves, so it lets them charge the account
    # and nothing more (no role over the others' runs, never coordinator).
    self_reported = models.BooleanField(default=False, db_default=False)
    since = models.DateTimeField(default=timezone.now)

    objects = MembershipQuerySet.as_manager()

    class Meta:
        ordering = ["project", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="one_membership_per_person")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} ({self.role})"

    @property
    def role(self) -> str:
        """The highest of: manager for a coordinator, the project's role for the users the
        scheduler associates with it (as its service account read them: a self-reported
        association is for charging only), and the role a provider group grants."""
        candidates = [self.granted_role or Role.NONE]
        if self.coordinator and not self.self_reported:
            candidates.append(Role.MANAGER)
        if self.cluster_user and not self.self_reported:
            candidates.append(self.project.members_role)
        return max(candidates, key=lambda role: RANK.get(role, 0))


def charge(row, account: str) -> None:
    """Set a new Job's or Experiment's ``project`` from its account (the cluster's default
    account when it names none): its project's members see it from then on."""
    if row._state.adding and row.project_id is None and row.cluster_id is not None:
        named = account or row.cluster.default_account
        row.project = charged_to(row.cluster_id, row.owner_id, named)


def charged_to(cluster_id: int, owner_id: int, account: str) -> Project | None:
    """The project a job is charged to: its account's (``account``: the job's, else the
    cluster's default), else its owner's default account's on that cluster; None when the
    portal has not read that account (yet)."""
    current = Project.objects.current()
    if account:
        return current.filter(cluster_id=cluster_id, name=account).first()
    default = (
        Membership.objects.current()
        .filter(project__cluster_id=cluster_id, user_id=owner_id, is_default=True)
        .select_related("project")
        .first()
    )
    return default.project if default is not None else None


def launch_refusal(user, cluster_id: int, account: str) -> str:
    """Why ``user`` may not launch on ``account`` of the cluster ('' when they may): a
    known account they are not associated with, or one where they are a viewer."""
    if not account:
        return ""
    project = Project.objects.current().filter(cluster_id=cluster_id, name=account).first()
    if project is None:
        return ""  # not read from the scheduler (yet): the scheduler decides
    member = Membership.objects.filter(project=project, user_id=user.pk).first()
    if member is None:
        return (
            f"You are not in the account {account} on this cluster (the scheduler's "
            "associations, read at the last sync); choose one of yours or leave it empty."
        )
    if member.role == Role.VIEWER:
        return f"You are a viewer of project {account}: viewers do not launch on its account."
    return ""


class ReadLinkQuerySet(models.QuerySet):
    def live(self) -> ReadLinkQuerySet:
        return self.filter(revoked_at__isnull=True, expires_at__gt=timezone.now())


class ReadLink(models.Model):
    """A read-only link to runs for signed-in people outside their project
    (projects/links.py; PORTAL_READ_LINKS): a run, the runs of a comparison, or an
    experiment, as they were when it was made. Opening it makes the person a reader of
    exactly those until it expires or is revoked; only its token's hash is kept."""

    class Kind(models.TextChoices):
        RUN = "run", "a run"
        COMPARISON = "comparison", "a comparison"
        EXPERIMENT = "experiment", "an experiment"

    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    kind = models.CharField(max_length=12, choices=Kind.choices)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="read_links"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    jobs = models.ManyToManyField("jobs.Job", blank=True, related_name="+")
    experiment = models.ForeignKey(
        "experiments.Experiment", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    # Where opening it goes: built by the portal from the runs, never typed.
    path = models.CharField(max_length=2000)

    objects = ReadLinkQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"read link {self.pk} to {self.get_kind_display()} by {self.created_by}"


class ReadLinkReader(models.Model):
    """Someone who opened a read link: a reader of its runs while it lives."""

    link = models.ForeignKey(ReadLink, on_delete=models.CASCADE, related_name="readers")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    first_opened_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["link", "user"], name="one_reader_per_link")]

    def __str__(self) -> str:
        return f"{self.user} reads link {self.link_id}"
