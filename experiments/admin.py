"""Experiments in the admin: to look at, not to edit (the controller owns their state)."""

from django.contrib import admin

from experiments.models import Experiment, Trial


class TrialInline(admin.TabularInline):
    model = Trial
    fields = ("number", "state", "params", "value", "value_std", "message")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Experiment)
class ExperimentAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "owner", "cluster", "state", "method", "metric", "created_at")
    list_filter = ("state", "method", "cluster")
    search_fields = ("name", "owner__username", "metric")
    readonly_fields = [f.name for f in Experiment._meta.fields]
    inlines = [TrialInline]

    def has_add_permission(self, request) -> bool:
        return False
