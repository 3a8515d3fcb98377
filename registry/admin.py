"""Registered models in the admin: to look at, not to edit (a version's files and manifest
are what the cluster said; a person changes names, aliases and tags through MLflow)."""

from django.contrib import admin

from registry.models import ModelAlias, ModelVersion, RegisteredModel


class VersionInline(admin.TabularInline):
    model = ModelVersion
    fields = ("version", "status", "path", "total_bytes", "registered_by", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None) -> bool:
        return False


class AliasInline(admin.TabularInline):
    model = ModelAlias
    fields = ("alias", "version", "protected", "set_by", "updated_at")
    readonly_fields = ("alias", "version", "set_by", "updated_at")
    extra = 0

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(RegisteredModel)
class RegisteredModelAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "project", "updated_at")
    search_fields = ("name", "owner__username", "project__name")
    readonly_fields = ("owner", "project", "name", "tags", "created_at", "updated_at")
    inlines = [AliasInline, VersionInline]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(ModelVersion)
class ModelVersionAdmin(admin.ModelAdmin):
    list_display = ("model", "version", "status", "cluster", "total_bytes", "registered_by")
    list_filter = ("status", "cluster")
    search_fields = ("model__name", "path", "registered_by__username")
    readonly_fields = [f.name for f in ModelVersion._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False
