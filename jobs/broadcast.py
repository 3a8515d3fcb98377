"""Broadcasting job changes on the channel layer, to pages: the receiver of
``jobs.signals.job_updated`` (the one signal every change of a job sends, on commit; other
apps such as the proxy's routes listen to it themselves). Only consumers talk to sockets,
and they check access again. Metric points have their own: metrics/broadcast.py."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Coroutine
from typing import Any

from channels.layers import get_channel_layer

from jobs import display, sessions

log = logging.getLogger(__name__)


# Staff dashboards see every job.
STAFF_GROUP = "jobs-staff"


def job_group(job_id: int) -> str:
    return f"job-{job_id}"


def user_group(user_id: int) -> str:
    return f"user-{user_id}"


def project_group(project_id: int) -> str:
    """A project's members' dashboards (each message checked against its reader)."""
    return f"project-{project_id}"


def session_payload(job) -> dict:
    """The job's session link for pages and the API (jobs.sessions: the proxy's)."""
    return sessions.links().payload(job)


def job_payload(job) -> dict:
    return {
        **session_payload(job),
        "id": job.pk,
        "owner_id": job.owner_id,
        # What projects/access.py decides by (consumers check each push against its reader).
        "project_id": job.project_id,
        "private": job.private,
        "trial_id": job.trial_id,  # the dashboard lists trials' jobs only when asked
        "kind": job.kind,
        "state": job.state,
        "state_label": job.get_state_display(),
        "is_active": job.is_active,
        "is_final": job.is_final,
        "has_session": job.has_session,
        "pending_reason": job.pending_reason,
        "pending_text": display.pending_text(job),
        "scheduler_job_id": job.scheduler_job_id,
        "node": job.node,
        "node_list": job.node_list,
        "work_dir": job.work_dir,
        "exit_code": job.exit_code,
        "message": job.message,
        "stderr_tail": job.stderr_tail,
        "time_limit_minutes": job.time_limit_minutes,
        "attempt": job.attempt,
        "attempts_text": display.attempts_text(job),
        # Runs known from accounting: the job page shows them (and refreshes when it grows).
        "runs_recorded": job.attempts.count() if job.pk else 0,
        "cancel_requested": bool(job.cancel_requested_at),
        "started_at": job.started_at.isoformat() if job.started_at else None,
        "ended_at": job.ended_at.isoformat() if job.ended_at else None,
        "updated_at": job.updated_at.isoformat() if job.updated_at else None,
    }


class _LayerLoop:
    """The process's own event loop, in a daemon thread, that sync code sends on the channel
    layer through. ``async_to_sync`` outside an event loop starts a new loop for each call,
    and the Redis layer's connections belong to a loop: every change the sync published
    opened (and handshook) new Redis connections. On this loop they are opened once. A
    forked child (a Celery pool process) starts its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0

    def run(self, coroutine: Coroutine[Any, Any, None], timeout: float = 30) -> None:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                self._loop, self._pid = asyncio.new_event_loop(), os.getpid()
                threading.Thread(
                    target=self._loop.run_forever, name="channel-layer", daemon=True
                ).start()
            loop = self._loop
        future = asyncio.run_coroutine_threadsafe(coroutine, loop)
        try:
            future.result(timeout)
        finally:
            future.cancel()  # timed out: not left running


_layer_loop = _LayerLoop()


def send_to_groups(groups: list[str], message: dict) -> None:
    """Send ``message`` to each of ``groups`` on the channel layer, from sync code, in one
    trip to the process's layer loop. Raises what the layer raises (callers log it)."""
    layer = get_channel_layer()
    if layer is None:
        return
    message = {**message, "published_at": time.time()}  # (the fan-out lag, common/websockets.py)

    async def send() -> None:
        for group in groups:
            await layer.group_send(group, message)

    _layer_loop.run(send())


def publish_job(job) -> None:
    """Send the job's current state to its group and its owner's group.

    A channel-layer outage must not undo or block a state change that is
    already committed: it is logged, and pages catch up on their next load.
    """
    if get_channel_layer() is None:
        return
    message = {"type": "job.update", "job": job_payload(job)}
    try:
        groups = [job_group(job.pk), user_group(job.owner_id), STAFF_GROUP]
        if job.project_id is not None:
            groups.append(project_group(job.project_id))
        send_to_groups(groups, message)
    except Exception:  # noqa: BLE001 - any layer failure is logged, never raised
        log.exception("could not publish job %s on the channel layer", job.pk)


def on_job_updated(sender, job, **kwargs) -> None:
    """jobs.signals.job_updated's receiver (connected in JobsConfig.ready())."""
    publish_job(job)
