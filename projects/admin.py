from django.contrib import admin

from projects.models import Membership, Project


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    fields = ("user", "cluster_user", "coordinator", "is_default", "self_reported", "since")
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False  # the scheduler's associations decide (projects/sync.py)


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    """Projects come from the clusters' accounts; here only their wording and the role of
    their members."""

    list_display = ("name", "cluster", "default_role", "synced_at", "gone_at")
    list_filter = ("cluster", "default_role")
    search_fields = ("name", "description")
    fields = ("cluster", "name", "description", "default_role", "synced_at", "gone_at")
    readonly_fields = ("cluster", "name", "synced_at", "gone_at")
    inlines = [MembershipInline]

    def has_add_permission(self, request) -> bool:
        return False
