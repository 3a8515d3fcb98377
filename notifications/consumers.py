"""``/ws/notifications/``: a signed-in person's new notifications, live (the header's
unread count and the list). It only subscribes to the person's own group; each message is
checked against the connected user again before it is sent."""

from __future__ import annotations

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from common.websockets import Counted
from notifications.broadcast import notifications_group


class NotificationsConsumer(Counted, AsyncJsonWebsocketConsumer):
    stream = "notifications"

    async def connect(self):
        user = self.scope["user"]
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        self.user_id = user.pk
        self.group = notifications_group(user.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        if group := getattr(self, "group", None):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def notification_new(self, event):
        if event.get("recipient_id") == getattr(self, "user_id", None):
            self.sending(event)
            await self.send_json(
                {key: value for key, value in event.items() if key not in ("type", "published_at")}
            )
