"""The audit log in the admin (registered by identity/admin.py): staff read it, filter it and
export it as CSV; nobody adds, changes or deletes a row (old rows go by retention,
``jobs.tasks.prune_audit_log``)."""

from __future__ import annotations

import csv

from django.contrib import admin
from django.http import HttpResponse
from django.utils import timezone

from common.text import spreadsheet_cell
from identity.audit.models import AuditEvent

CSV_FIELDS = (
    "at",
    "username",
    "cluster_name",
    "cluster_username",
    "action",
    "target",
    "key_id",
    "outcome",
    "message",
    "request_id",
)


class AuditEventAdmin(admin.ModelAdmin):
    list_display = (
        "at",
        "username",
        "cluster_name",
        "cluster_username",
        "action",
        "target",
        "outcome",
        "key_id",
        "message",
    )
    list_filter = ("action", "outcome", "cluster")
    date_hierarchy = "at"
    search_fields = ("username", "cluster_username", "key_id", "target", "=request_id")
    readonly_fields = [f.name for f in AuditEvent._meta.fields]
    list_select_related = ()
    actions = ("export_csv",)

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    @admin.action(description="Export selected rows as CSV", permissions=["view"])
    def export_csv(self, request, queryset):
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
        response["Content-Disposition"] = f'attachment; filename="audit-{stamp}.csv"'
        writer = csv.writer(response)
        writer.writerow(CSV_FIELDS)
        for row in queryset.order_by("at").values_list(*CSV_FIELDS).iterator():
            writer.writerow([spreadsheet_cell(v) for v in row])
        return response
