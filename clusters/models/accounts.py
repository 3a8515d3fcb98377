"""Cluster accounts: how a portal user (or the cluster's service account) logs in to a
cluster, and how the portal knows the cluster user is that person's."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from clusters.models.clusters import Cluster
from common import crypto, validators


class ClusterAccount(models.Model):
    """How a portal user (or, with user=None, the cluster's service account) logs in.

    ``mapped_by`` says how the portal knows the cluster user is this person's: a name a
    person typed proves nothing, so a certificate is signed only for an account the
    cluster's user_map made at sign-in or an administrator made or confirmed
    (``signable()``); a typed name on a key-pair cluster is proven by its owner installing
    the public key, and works only with that key."""

    class MappedBy(models.TextChoices):
        TYPED = "", "typed by the person (not proven)"
        USER_MAP = "user_map", "the cluster's user map, at sign-in"
        ADMIN = "admin", "an administrator"

    class DisabledBy(models.TextChoices):
        NONE = "", "—"
        SIGN_IN = "sign_in", "sign-in (the person's groups no longer allow the cluster)"
        ADMIN = "admin", "an administrator"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="accounts")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="cluster_accounts",
        help_text="Empty for the cluster's service account.",
    )
    username = models.CharField(max_length=32, validators=[validators.posix_username])
    public_key = models.TextField(blank=True)
    private_key_encrypted = models.TextField(blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    # Set when the person lost the right to use the cluster (OIDC groups): no new job runs
    # under it, and its jobs keep their history (Job.cluster_account would be nulled).
    disabled_at = models.DateTimeField(null=True, blank=True)
    # Who disabled it: a sign-in re-enables only what a sign-in disabled, never an admin's.
    disabled_by = models.CharField(
        max_length=8, choices=DisabledBy.choices, blank=True, default=DisabledBy.NONE
    )
    mapped_by = models.CharField(
        "cluster user from",
        max_length=8,
        choices=MappedBy.choices,
        blank=True,
        default=MappedBy.TYPED,
        help_text="How the portal knows this cluster user is this person's. Certificates "
        "are signed only for accounts made by the cluster's user map or by an administrator "
        "(saving the account here records it as an administrator's).",
    )
    # A MAC over (cluster, user, username, mapped_by) written with them (``map_to``): the
    # signer checks it, so a cluster user written straight into the database signs nothing.
    mapping_seal = models.CharField(max_length=64, blank=True, editable=False)

    class Meta:
        app_label = "jobs"
        ordering = ["cluster__name", "username"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "user"], name="one_account_per_user"),
            # Never two people as one cluster user: their jobs could reach each other's.
            models.UniqueConstraint(
                fields=["cluster", "username"],
                condition=Q(user__isnull=False),
                name="one_person_per_cluster_user",
                violation_error_message="Another portal user already has this cluster user "
                "on this cluster.",
            ),
            models.UniqueConstraint(
                fields=["cluster"], condition=Q(user__isnull=True), name="one_service_account"
            ),
        ]

    def __str__(self) -> str:
        who = self.user.get_username() if self.user is not None else "service account"
        return f"{self.username}@{self.cluster.name} ({who})"

    # -- who this cluster user is proven to be -----------------------------------------
    def _mapping_text(self) -> str:
        return f"{self.cluster_id}\0{self.user_id or 0}\0{self.username}\0{self.mapped_by}"

    def map_to(self, username: str, by: str) -> None:
        """Name the cluster user, recording who vouched for it (``MappedBy``): the only
        way the portal sets a mapping it will sign certificates for. Not saved."""
        self.username, self.mapped_by = username, by
        self.mapping_seal = crypto.seal("cluster-account", self._mapping_text())

    def unproven_reason(self) -> str:
        """Why no certificate may be signed for this account ("" when one may): its cluster
        user must come from the cluster's user map or an administrator, as recorded by
        ``map_to`` (a name typed by the person, or written around the portal, never)."""
        if self.mapped_by not in (self.MappedBy.USER_MAP, self.MappedBy.ADMIN):
            return (
                f"The cluster user {self.username} on {self.cluster.name} was typed, not "
                "proven: on a cluster that trusts the portal's certificates a person's "
                "cluster user comes from their sign-in (the cluster's user map) or from an "
                "administrator. Ask the portal's administrators to confirm it."
            )
        if not crypto.seal_matches(self.mapping_seal, "cluster-account", self._mapping_text()):
            return (
                f"The cluster account {self.username}@{self.cluster.name} was changed outside "
                "the portal; no certificate is signed for it until an administrator saves it "
                "again."
            )
        return ""

    def _refuse_key_in_certificate_mode(self) -> None:
        if self.cluster.uses_certificates:
            raise ValidationError(
                f"{self.cluster.name} uses certificates signed by the portal: its accounts "
                "have no key pair."
            )

    def set_private_key(self, openssh_private_key: str) -> None:
        self._refuse_key_in_certificate_mode()
        self.private_key_encrypted = crypto.encrypt(openssh_private_key)

    def generate_key_pair(self) -> str:
        """Make a new Ed25519 key pair; keep the private key encrypted, return the public key line."""
        who = self.user.get_username() if self.user is not None else "service"
        private, self.public_key = crypto.new_ssh_key_pair(f"hpc-portal:{who}@{self.cluster.name}")
        self.set_private_key(private)
        return self.public_key

    @classmethod
    def reader_for(cls, cluster: Cluster) -> ClusterAccount | None:
        """The account a sync reads every user's jobs through, when the cluster has one."""
        if not cluster.sync_reads_all_jobs:
            return None
        return cls.objects.filter(cluster=cluster, user__isnull=True).first()

    def private_key(self) -> str:
        if not self.private_key_encrypted:
            raise ValidationError(f"Cluster account {self} has no private key yet.")
        return crypto.decrypt(self.private_key_encrypted)

    @classmethod
    def for_user(cls, cluster: Cluster, user) -> ClusterAccount | None:
        """The account a portal user's jobs run under on ``cluster`` (none once disabled)."""
        if cluster.login_mode == Cluster.LoginMode.SERVICE:
            return cls.objects.filter(cluster=cluster, user__isnull=True).first()
        return cls.objects.filter(cluster=cluster, user=user, disabled_at__isnull=True).first()
