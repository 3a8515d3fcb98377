"""Websocket consumers: they only subscribe and unsubscribe. State changes reach
them through the channel layer (jobs.events.publish_job); each message is
checked against the connected user again before it is sent."""

from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from jobs.events import STAFF_GROUP, job_group, user_group
from jobs.models import Job


class JobUpdatesConsumer(AsyncJsonWebsocketConsumer):
    """``/ws/jobs/`` (all of the user's jobs; every job for staff) or ``/ws/jobs/<id>/``."""

    async def connect(self):
        user = self.scope["user"]
        if not user.is_authenticated:
            await self.close(code=4401)
            return
        job_id = self.scope["url_route"]["kwargs"].get("job_id")
        if job_id is not None:
            if not await self._can_see(job_id):
                await self.close(code=4404)
                return
            self.groups_joined = [job_group(job_id)]
        else:
            self.groups_joined = [STAFF_GROUP if user.is_staff else user_group(user.pk)]
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def job_update(self, event):
        job = event["job"]
        user = self.scope["user"]
        if user.is_staff or job.get("owner_id") == user.pk:
            await self.send_json({"type": "job", "job": job})

    @database_sync_to_async
    def _can_see(self, job_id: int) -> bool:
        return Job.objects.for_user(self.scope["user"]).filter(pk=job_id).exists()
