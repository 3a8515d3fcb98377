"""Celery's part: each task message carries when it was published (the oldest waiting
task's age, ops/queues.py) and the request id of what queued it, under which the task
runs (its log lines, audit rows and certificates: ops/context.py); a worker process that
ends takes its live gauges with it (prometheus_client's multiprocess mode)."""

from __future__ import annotations

import os
import time
from contextvars import Token

from celery import signals
from prometheus_client import multiprocess

from ops import context

PUBLISHED = "portal_published_at"
REQUEST = "portal_request_id"
_tokens: dict[str, Token] = {}  # task id -> the token that restores the id after it


@signals.before_task_publish.connect
def stamp(headers=None, **_kwargs) -> None:
    if isinstance(headers, dict):
        headers[PUBLISHED] = time.time()
        if current := context.current():
            headers[REQUEST] = current


@signals.task_prerun.connect
def task_starts(task_id=None, task=None, **_kwargs) -> None:
    """The task runs under the request id its message carries; run eagerly, under the
    caller's; else (a periodic task) under a new one."""
    carried = ""
    if task is not None:
        headers = getattr(task.request, "headers", None) or {}
        carried = context.well_formed(getattr(task.request, REQUEST, None) or headers.get(REQUEST))
    chosen = carried or context.current() or context.new_id()
    _tokens[str(task_id)] = context.request_id.set(chosen)


@signals.task_postrun.connect
def task_ends(task_id=None, **_kwargs) -> None:
    token = _tokens.pop(str(task_id), None)
    if token is not None:
        try:
            context.request_id.reset(token)
        except ValueError:  # (set in another context: an eager task inside a request)
            context.request_id.set("")


@signals.worker_process_shutdown.connect
def process_gone(pid=None, **_kwargs) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(pid or os.getpid())
