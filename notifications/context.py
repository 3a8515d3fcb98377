"""The unread count in every page's header (a template context processor)."""

from __future__ import annotations

from notifications.models import Notification


def unread_count(request) -> dict:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"notifications_unread": Notification.objects.filter(recipient=user).unread().count()}
