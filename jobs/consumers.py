"""Websocket consumers: they only subscribe and unsubscribe. State changes reach
them through the channel layer (jobs.broadcast.publish_job); each message is
checked against the connected user again before it is sent."""

from __future__ import annotations

import asyncio

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from common.websockets import Counted
from jobs.broadcast import STAFF_GROUP, job_group, job_payload, project_group, user_group
from jobs.models import Job
from projects import access
from projects.access import may_act, sees_every_job


@database_sync_to_async
def can_see(user, job_id: int) -> bool:
    """The same rule as the pages (Job.objects.visible_to), asked of the database now (a
    role changed by the last sync counts)."""
    access.forget_roles(user)
    return Job.objects.visible_to(user).filter(pk=job_id).exists()


@database_sync_to_async
def project_ids(user) -> list[int]:
    access.forget_roles(user)
    return sorted(access.roles(user))


@database_sync_to_async
def may_see_payload(user, job: dict) -> bool:
    return access.may_see(
        user,
        job.get("owner_id"),
        job.get("project_id"),
        bool(job.get("private")),
        job_id=job.get("id"),
    )


# A colleague's page (a project's member, not the owner) asks the database again at most
# this often, so a person who left the project stops hearing of its jobs within a sync.
RECHECK_SECONDS = 30.0


class JobUpdatesConsumer(Counted, AsyncJsonWebsocketConsumer):
    """``/ws/jobs/`` (the user's jobs and their projects' they may see; every job for
    staff) or ``/ws/jobs/<id>/``."""

    stream = "jobs"

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
        elif sees_every_job(user):
            self.groups_joined = [STAFF_GROUP]
        else:
            # Their own jobs, and their projects' (each message checked in job_update).
            self.groups_joined = [user_group(user.pk)] + [
                project_group(project_id) for project_id in await project_ids(user)
            ]
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
        if may_act(user, job.get("owner_id")):
            self.sending(event)
            await self.send_json({"type": "job", "job": job})
            return
        # A colleague's job (the job's own socket): its privacy and the person's role now.
        now = asyncio.get_running_loop().time()
        if now - getattr(self, "roles_checked", 0.0) > RECHECK_SECONDS:
            access.forget_roles(user)
            self.roles_checked = now
        if await may_see_payload(user, job):
            self.sending(event)
            await self.send_json({"type": "job", "job": job})
        elif self.scope["url_route"]["kwargs"].get("job_id") is not None:
            await self.close(code=4404)  # no longer theirs to see: the page says so

    @database_sync_to_async
    def _payload(self, job_id: int) -> dict:
        return job_payload(Job.objects.get(pk=job_id))
