"""A new in-portal notification on the channel layer, to its recipient's open pages (the
unread count in the header, the list). Only consumers talk to sockets."""

from __future__ import annotations

import logging
import time

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from notifications.models import Notification

log = logging.getLogger(__name__)


def notifications_group(user_id: int) -> str:
    return f"notifications-{user_id}"


def publish_on_commit(notification: Notification) -> None:
    """Tell the recipient's pages once the notification is committed."""
    transaction.on_commit(lambda: publish(notification))


def publish(notification: Notification) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    message = {
        "type": "notification.new",
        "recipient_id": notification.recipient_id,
        "id": notification.pk,
        "event": notification.event,
        "text": notification.text,
        "url": notification.url,
        "unread": Notification.objects.filter(recipient_id=notification.recipient_id)
        .unread()
        .count(),
        "published_at": time.time(),  # (the fan-out lag, common/websockets.py)
    }
    try:
        async_to_sync(layer.group_send)(notifications_group(notification.recipient_id), message)
    except Exception:  # noqa: BLE001 - a layer outage is logged; the list shows it on load
        log.exception("could not publish notification %s", notification.pk)
