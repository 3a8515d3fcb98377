"""Notifications in the admin: to look at (who was told what, and whether it was emailed),
not to edit; the emails sent per person show the rate limit at work."""

from django.contrib import admin

from notifications.models import Notification, SentEmail, Webhook


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("id", "recipient", "event", "created_at", "read", "email", "emailed_at")
    list_filter = ("event", "email", "read")
    search_fields = ("recipient__username", "text")
    readonly_fields = [f.name for f in Notification._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(SentEmail)
class SentEmailAdmin(admin.ModelAdmin):
    list_display = ("id", "recipient", "sent_at", "notifications")
    readonly_fields = [f.name for f in SentEmail._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    """Who has a webhook, whether it is on, and why it was turned off (the secret stays
    out of sight: it is encrypted and shown to its owner once)."""

    list_display = ("id", "user", "url", "enabled", "failures", "last_error", "disabled_at")
    list_filter = ("enabled",)
    search_fields = ("user__username", "url")
    exclude = ("secret_encrypted",)
    readonly_fields = ("user", "url", "failures", "last_error", "disabled_at", "updated_at")

    def has_add_permission(self, request) -> bool:
        return False
