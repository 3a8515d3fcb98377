from django.contrib import admin

from portal.identity.models import Identity


@admin.register(Identity)
class IdentityAdmin(admin.ModelAdmin):
    """Who signs in as whom. Deleting a row lets the (issuer, subject) be linked afresh at
    its next sign-in (to the portal user of the same name, if that user has no identity)."""

    list_display = ("user", "subject", "issuer", "last_sign_in", "created_at")
    search_fields = ("user__username", "subject")
    readonly_fields = ("issuer", "subject", "created_at", "last_sign_in")
    autocomplete_fields = ("user",)
