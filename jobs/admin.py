"""The Django admin of clusters, their accounts and jobs (the catalog's is catalog/admin.py)."""

from __future__ import annotations

from itertools import chain
from typing import TYPE_CHECKING, TypedDict

from django import forms
from django.contrib import admin, messages
from django.db import models
from django.db.models import Count

from clusters import ssh
from clusters.models import Cluster, ClusterAccount, GpuType, Partition
from identity import audit
from identity.models import Identity
from jobs.models import Job, JobEvent
from jobs.models.annotations import JobAnnotations
from jobs.models.request import JobRequest
from jobs.models.run import JobRun
from schedulers import registry as schedulers

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class _Partitions(TypedDict):
    _partitions: int


class PartitionInline(admin.TabularInline):
    model = Partition
    extra = 0
    fields = (
        "name",
        "is_default",
        "gpu_types",
        # default_gpus, max_gpus_per_job, default_cpus, max_cpus_per_job, ...
        *chain.from_iterable(zip(Partition.DEFAULT_FIELDS, Partition.LIMIT_FIELDS, strict=True)),
        *Partition.NODE_FIELDS,
        "gpu_type_as_constraint",
        "mem_per_gpu",
        "time_class",
        "idle_policy",
        "idle_percent",
        "idle_minutes",
        "idle_grace_minutes",
        "idle_keep_minutes",
    )


class GpuTypeInline(admin.TabularInline):
    """Each GPU type once: what "compute capability >= X, memory >= Y" requests match."""

    model = GpuType
    extra = 0
    fields = ("name", "model", "compute_capability", "memory_gb", "feature")


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "scheduler",
        "ssh_endpoint",
        "trust",
        "default_account",
        "partition_count",
        "enabled",
        "is_default",
    )
    list_filter = ("enabled", "scheduler", "login_mode", "ssh_auth")
    search_fields = ("name", "ssh_host", "description")
    readonly_fields = ("host_key_fingerprint",)
    inlines = [PartitionInline, GpuTypeInline]
    fieldsets = (
        (None, {"fields": ("name", "description", "scheduler", "enabled", "is_default")}),
        (
            "SSH",
            {
                "fields": (
                    "ssh_host",
                    "ssh_port",
                    "host_key",
                    "host_key_fingerprint",
                    "login_mode",
                    "ssh_auth",
                    "user_ssh_host",
                    "node_ssh",
                )
            },
        ),
        (
            "Slurm",
            {
                "fields": (
                    "default_account",
                    "home_root",
                    "scratch_root",
                    "node_scratch",
                    "quota_files",
                    "metrics_over_ssh",
                    "sync_reads_all_jobs",
                    "command_path",
                    "max_array_size",
                )
            },
        ),
        (
            "Files and transfers",
            {"fields": ("project_root", "rclone_command", "transfer_flags")},
        ),
        ("Sign-in with the identity provider (OIDC)", {"fields": ("user_map", "allowed_groups")}),
    )

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(_partitions=Count("partitions"))

    @admin.display(description="login", ordering="login_mode")
    def trust(self, cluster) -> str:
        if cluster.is_one_trust_domain:
            return "service account: ONE TRUST DOMAIN (users' jobs can reach each other's)"
        return "per-user accounts"

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if obj.is_one_trust_domain:
            self.message_user(
                request,
                f"{obj.name} runs every user's jobs as one service account: it is one trust "
                "domain, where any job can read, change or cancel every other user's jobs "
                "and files.",
                messages.WARNING,
            )

    actions = ("pin_presented_host_key", "discover_gpu_types", "make_default")

    @admin.action(description="Make it the default cluster", permissions=["change"])
    def make_default(self, request, queryset):
        if queryset.count() != 1:
            self.message_user(request, "Choose one cluster to be the default.", messages.ERROR)
            return
        cluster = queryset.get()
        cluster.mark_default()
        self.message_user(
            request,
            f"{cluster.name} is the default cluster: jobs that name no cluster go there.",
            messages.SUCCESS,
        )

    @admin.action(
        description="Discover GPU types from the nodes (sinfo, condor_status)",
        permissions=["change"],
    )
    def discover_gpu_types(self, request, queryset):
        for cluster in queryset:
            account = ClusterAccount.for_user(cluster, request.user) or (
                ClusterAccount.objects.filter(cluster=cluster, user__isnull=True).first()
            )
            if account is None:
                self.message_user(
                    request,
                    f"{cluster.name}: you have no account there and it has no service account.",
                    messages.ERROR,
                )
                continue
            scheduler = schedulers.for_cluster(cluster)
            with audit.action(
                audit.Action.GPU_DISCOVERY,
                user=request.user,
                account=account,
                target=scheduler.gpu_discovery_command,
            ) as entry:
                report = scheduler.discover_gpu_types(account, cluster)
                if report is None:
                    entry.failed("no answer")
            if report is None:
                self.message_user(
                    request,
                    f"{cluster.name}: {scheduler.gpu_discovery_command} did not answer.",
                    messages.ERROR,
                )
                continue
            for line in report:
                self.message_user(request, f"{cluster.name}: {line}", messages.INFO)

    @admin.action(
        description="Trust and pin the host key each server presents now", permissions=["change"]
    )
    def pin_presented_host_key(self, request, queryset):
        for cluster in queryset:
            try:
                key = ssh.fetch_host_key(cluster.ssh_host, cluster.ssh_port)
            except ssh.ClusterError as exc:
                self.message_user(request, f"{cluster.name}: {exc}", messages.ERROR)
                continue
            old = cluster.host_key_fingerprint if cluster.host_key else "none"
            cluster.host_key = key
            cluster.save(update_fields=["host_key"])
            self.message_user(
                request,
                f"{cluster.name}: pinned {key.split()[0]} {cluster.host_key_fingerprint} "
                f"(was {old}). Compare it with the fingerprint your cluster's administrators publish.",
                messages.WARNING,
            )

    @admin.display(description="SSH")
    def ssh_endpoint(self, obj: Cluster) -> str:
        return f"{obj.ssh_host}:{obj.ssh_port}"

    @admin.display(description="partitions", ordering="_partitions")
    def partition_count(self, obj: WithAnnotations[Cluster, _Partitions]) -> int:
        return obj._partitions

    @admin.display(description="host key fingerprint")
    def host_key_fingerprint(self, obj: Cluster) -> str:
        return obj.host_key_fingerprint if obj.host_key else "-"


class ClusterAccountAdminForm(forms.ModelForm):
    """An administrator vouches for the cluster user they save (``mapped_by`` admin); the
    person's provider groups must still allow the cluster (its allowed_groups)."""

    class Meta:
        model = ClusterAccount
        fields = ("cluster", "user", "username", "disabled_at")

    def clean(self):
        data = super().clean() or {}
        cluster, user = data.get("cluster"), data.get("user")
        if cluster is not None and user is not None:
            if not cluster.allows(Identity.groups_of(user)):
                raise forms.ValidationError(
                    f"{user} is in none of the groups that may use {cluster.name} "
                    f"({cluster.allowed_groups}), as of their last sign-in."
                )
        return data


@admin.register(ClusterAccount)
class ClusterAccountAdmin(admin.ModelAdmin):
    form = ClusterAccountAdminForm
    list_display = (
        "username",
        "cluster",
        "user",
        "mapped_by",
        "has_private_key",
        "created_at",
        "disabled_at",
    )
    list_filter = ("cluster", "mapped_by")
    search_fields = ("username", "user__username", "user__email")
    autocomplete_fields = ("user",)
    readonly_fields = ("public_key", "created_at", "mapped_by", "disabled_by")
    fields = (
        "cluster",
        "user",
        "username",
        "mapped_by",
        "public_key",
        "created_at",
        "disabled_at",
        "disabled_by",
    )
    actions = ("confirm_cluster_user", "generate_key_pair")

    def save_model(self, request, obj, form, change):
        # Saving here is an administrator vouching for the cluster user (and its state).
        obj.map_to(obj.username, ClusterAccount.MappedBy.ADMIN)
        if "disabled_at" in form.changed_data:
            obj.disabled_by = (
                ClusterAccount.DisabledBy.ADMIN
                if obj.disabled_at
                else ClusterAccount.DisabledBy.NONE
            )
        super().save_model(request, obj, form, change)
        audit.record(
            audit.Action.ACCOUNT_MAP if change else audit.Action.ACCOUNT_CREATE,
            audit.Outcome.OK,
            user=request.user,
            account=obj,
            target=f"{obj}",
            message="by an administrator: " + (", ".join(form.changed_data) or "saved"),
        )

    @admin.action(
        description="Confirm the cluster user (certificates may be signed for it)",
        permissions=["change"],
    )
    def confirm_cluster_user(self, request, queryset):
        for account in queryset.select_related("cluster", "user"):
            account.map_to(account.username, ClusterAccount.MappedBy.ADMIN)
            account.save(update_fields=["mapped_by", "mapping_seal"])
            audit.record(
                audit.Action.ACCOUNT_MAP,
                audit.Outcome.OK,
                user=request.user,
                account=account,
                target=f"{account}",
                message="cluster user confirmed by an administrator",
            )
        self.message_user(request, f"Confirmed {queryset.count()} cluster account(s).")

    @admin.action(
        description="Generate a new key pair (replaces the current key)", permissions=["change"]
    )
    def generate_key_pair(self, request, queryset):
        for account in queryset.select_related("cluster"):
            if account.cluster.uses_certificates:
                self.message_user(
                    request,
                    f"{account}: {account.cluster.name} uses certificates signed by the portal; "
                    "no key pair is made or kept for its accounts.",
                    messages.WARNING,
                )
                continue
            public = account.generate_key_pair()
            account.save()
            self.message_user(
                request,
                f"{account}: install this public key in ~{account.username}/.ssh/authorized_keys "
                f"on {account.cluster.name}: {public}",
                messages.SUCCESS,
            )

    @admin.display(boolean=True, description="private key")
    def has_private_key(self, obj: ClusterAccount) -> bool:
        return bool(obj.private_key_encrypted)


class JobEventInline(admin.TabularInline):
    model = JobEvent
    extra = 0
    can_delete = False
    readonly_fields = ("at", "from_state", "to_state", "message")

    def has_add_permission(self, request, obj=None):
        return False


def _job_fieldsets(parts: list[tuple[str, type[models.Model]]]) -> list:
    """Job's own fields (identity, relations, side features), then each part's."""
    in_parts = [[f.name for f in part._meta.fields] for _, part in parts]
    own = [f.name for f in Job._meta.fields if not any(f.name in names for names in in_parts)]
    return [(None, {"fields": own})] + [
        (title, {"fields": names}) for (title, _), names in zip(parts, in_parts, strict=True)
    ]


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "owner",
        "kind",
        "image",
        "cluster",
        "partition",
        "state",
        "scheduler_job_id",
        "node",
        "created_at",
    )
    list_filter = ("state", "kind", "cluster", "image")
    search_fields = ("id", "scheduler_job_id", "owner__username", "name", "node")
    date_hierarchy = "created_at"
    list_select_related = ("owner", "image", "cluster", "partition")
    inlines = [JobEventInline]
    # Jobs are created by users and changed by workers; the admin only reads them.
    readonly_fields = [f.name for f in Job._meta.fields]
    # Part by part (jobs/models/job.py composes them): who and where first, as before the
    # parts moved out of Job (their fields now come first in Django's order).
    fieldsets = _job_fieldsets(
        [("Request", JobRequest), ("Run", JobRun), ("Notes and parameters", JobAnnotations)]
    )

    def has_add_permission(self, request):
        return False
