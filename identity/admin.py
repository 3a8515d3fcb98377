from django.contrib import admin

from identity.audit.admin import AuditEventAdmin
from identity.audit.models import AuditEvent
from identity.models import Identity

admin.site.register(AuditEvent, AuditEventAdmin)


@admin.register(Identity)
class IdentityAdmin(admin.ModelAdmin):
    """Who signs in as whom. Adding a row links a person at the provider (issuer, subject:
    the ``iss`` and ``sub`` of their id token) to an existing portal user: the only way,
    besides the person proving that user's local password once, since a sign-in never links
    by name. Once made, a row's issuer and subject stay; deleting it unlinks."""

    list_display = ("user", "subject", "issuer", "last_sign_in", "confirmed_at", "created_at")
    search_fields = ("user__username", "subject")
    autocomplete_fields = ("user",)
    _always_read_only = ("created_at", "last_sign_in", "confirmed_at", "groups")

    def get_readonly_fields(self, request, obj=None):
        if obj is None:  # adding: the admin's link names the issuer and subject
            return self._always_read_only
        return ("issuer", "subject", *self._always_read_only)
