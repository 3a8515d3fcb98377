"""Websocket consumers: they only subscribe and unsubscribe. State changes reach
them through the channel layer (jobs.broadcast.publish_job); each message is
checked against the connected user again before it is sent."""

from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from jobs.access import may_see, sees_every_job
from jobs.broadcast import STAFF_GROUP, job_group, job_payload, user_group
from jobs.models import Job


@database_sync_to_async
def can_see(user, job_id: int) -> bool:
    """Owner or staff: the same rule as the pages (Job.objects.for_user)."""
    return Job.objects.for_user(user).filter(pk=job_id).exists()


class JobUpdatesConsumer(AsyncJsonWebsocketConsumer):
    """``/ws/jobs/`` (all of the user's jobs; every job for staff) or ``/ws/jobs/<id>/``."""

    async def connect(self):
        user = self.scope["user"]
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        job_id = self.scope["url_route"]["kwargs"].get("job_id")
        if job_id is not None:
            if not await can_see(user, job_id):
                await self.close(code=4404)
                return
            self.groups_joined = [job_group(job_id)]
        else:
            self.groups_joined = [STAFF_GROUP if sees_every_job(user) else user_group(user.pk)]
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()
        if job_id is not None:
            # The state now: changes published between the page's render and this
            # connection would otherwise be missed until the next one.
            await self.send_json({"type": "job", "job": await self._payload(job_id)})

    async def disconnect(self, code):
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def job_update(self, event):
        job = event["job"]
        user = self.scope["user"]
        if may_see(user, job.get("owner_id")):
            await self.send_json({"type": "job", "job": job})

    @database_sync_to_async
    def _payload(self, job_id: int) -> dict:
        return job_payload(Job.objects.get(pk=job_id))
