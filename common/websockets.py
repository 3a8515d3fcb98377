"""The websocket consumers' part in the metrics: how many are open (by what they follow)
and how long an event took from its publication (``published_at``, put on every message
by ``jobs.broadcast.send_to_groups``) to its sending."""

from __future__ import annotations

import time

from common import prometheus as metrics


class Counted:
    """Mixed into an AsyncWebsocketConsumer before it: counted from its acceptance to its
    disconnection (``stream``: a bounded name for what it follows)."""

    stream = "other"
    _counted = False

    async def accept(self, *args, **kwargs):
        await super().accept(*args, **kwargs)  # type: ignore[misc]
        if not self._counted:
            self._counted = True
            metrics.WEBSOCKET_CONNECTIONS.labels(self.stream).inc()

    async def websocket_disconnect(self, message):
        if self._counted:
            self._counted = False
            metrics.WEBSOCKET_CONNECTIONS.labels(self.stream).dec()
        await super().websocket_disconnect(message)  # type: ignore[misc]

    def sending(self, event: dict) -> None:
        """An event is being sent now: its lag since publication, where it says."""
        published = event.get("published_at")
        if isinstance(published, float):
            metrics.FANOUT_LAG_SECONDS.labels(self.stream).observe(
                max(0.0, time.time() - published)
            )
