"""Site remotes (an administrator's: offered to everyone, never a secret) and a read-only
view of transfers."""

from django.contrib import admin

from files.models import Remote, Transfer


@admin.register(Remote)
class RemoteAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "cluster", "kind", "where")
    list_filter = ("kind", "cluster")
    search_fields = ("name",)
    fields = ("name", "cluster", "kind", "options")

    def get_queryset(self, request):
        # Only the site's remotes are edited here; people's own are theirs (and hold secrets).
        return super().get_queryset(request).filter(owner=None)


@admin.register(Transfer)
class TransferAdmin(admin.ModelAdmin):
    list_display = ("pk", "owner", "cluster", "direction", "remote_name", "state", "created_at")
    list_filter = ("state", "cluster")
    readonly_fields = [f.name for f in Transfer._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
