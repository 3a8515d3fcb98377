from django.contrib import admin

from retention.models import Plan, Policy


@admin.register(Policy)
class PolicyAdmin(admin.ModelAdmin):
    list_display = ("__str__", "keep_best", "metric", "mode", "keep_latest", "updated_at")
    raw_id_fields = ("owner", "project", "updated_by")


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    """Read only: a plan is asked for and applied by its run's owner, never here."""

    list_display = ("pk", "job", "state", "bytes_on_disk", "bytes_freed", "created_at")
    list_filter = ("state",)
    readonly_fields = [f.name for f in Plan._meta.fields]
    raw_id_fields = ("job", "requested_by")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
