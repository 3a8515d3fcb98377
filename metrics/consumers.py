"""``/ws/jobs/<id>/metrics/``: a job's chart data, history first, then live points."""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from common.websockets import Counted
from jobs.consumers import RECHECK_SECONDS, can_see
from metrics.broadcast import metrics_group
from metrics.query import history


class MetricsConsumer(Counted, AsyncJsonWebsocketConsumer):
    """``/ws/jobs/<id>/metrics/?width=N``: the downsampled history, then new points
    in batches, at most one message per ``FLUSH_SECONDS``."""

    FLUSH_SECONDS = 1.0
    stream = "metrics"

    async def connect(self):
        user = self.scope["user"]
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        self.job_id = self.scope["url_route"]["kwargs"]["job_id"]
        if not await can_see(user, self.job_id):
            await self.close(code=4404)
            return
        self.pending: dict = {"series": {}, "points": {}, "reload": False}
        self.flusher: asyncio.Task[None] | None = None
        self.last_sent = 0.0
        self.checked_at = asyncio.get_running_loop().time()
        self.group = metrics_group(self.job_id)
        # Join before reading the history: a point stored in between arrives twice
        # at worst, and the page drops repeats by sequence number.
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.send_json({"type": "history", "series": await self._history()})

    async def disconnect(self, code):
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)
        flusher = getattr(self, "flusher", None)
        if flusher is not None:
            flusher.cancel()

    async def metrics_points(self, event):
        self.sending(event)  # (gathered: sent within FLUSH_SECONDS of now)
        update = event["update"]
        for s in update["series"]:
            self.pending["series"][s["id"]] = s
        for sid, rows in update["points"].items():
            self.pending["points"].setdefault(sid, []).extend(rows)
        self.pending["reload"] |= bool(update.get("reload"))
        if self.flusher is None:
            # The first points after a quiet second go out at once; then at most
            # one message per FLUSH_SECONDS.
            wait = self.last_sent + self.FLUSH_SECONDS - asyncio.get_running_loop().time()
            self.flusher = asyncio.create_task(self._flush_later(max(0.0, wait)))

    async def _flush_later(self, wait: float):
        await asyncio.sleep(wait)
        self.flusher = None
        now = asyncio.get_running_loop().time()
        self.last_sent = now
        # A colleague's chart (a project's member): asked again every RECHECK_SECONDS, so
        # one who left the project, or a run made private, stops streaming.
        if now - self.checked_at > RECHECK_SECONDS:
            self.checked_at = now
            if not await can_see(self.scope["user"], self.job_id):
                await self.close(code=4404)
                return
        batch, self.pending = self.pending, {"series": {}, "points": {}, "reload": False}
        await self.send_json(
            {
                "type": "points",
                "series": list(batch["series"].values()),
                "points": batch["points"],
                "reload": batch["reload"],
            }
        )

    @database_sync_to_async
    def _history(self) -> list[dict]:
        width = parse_qs(self.scope.get("query_string", b"").decode()).get("width", [""])[0]
        return history(self.job_id, width)
