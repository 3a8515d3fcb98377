"""Celery's part: each task message carries when it was published (the oldest waiting
task's age, ops/queues.py) and the request id of what queued it, under which the task
runs (its log lines, audit rows and certificates: common/context.py); a worker process that
ends takes its live gauges with it (prometheus_client's multiprocess mode)."""

from __future__ import annotations

import contextlib
import inspect
import os
import time
from contextvars import Token
from typing import Any

from celery import signals
from prometheus_client import multiprocess

from common import context

PUBLISHED = "portal_published_at"
REQUEST = "portal_request_id"
_tokens: dict[str, Token] = {}  # task id -> the token that restores the id after it
_bindings: dict[str, Any] = {}  # task id -> its job's binding (common.context.bind)


@signals.before_task_publish.connect
def stamp(headers=None, **_kwargs) -> None:
    if isinstance(headers, dict):
        headers[PUBLISHED] = time.time()
        if current := context.current():
            headers[REQUEST] = current


@signals.task_prerun.connect
def task_starts(task_id=None, task=None, args=(), kwargs=None, **_kwargs) -> None:
    """The task runs under the request id its message carries; run eagerly, under the
    caller's; else (a periodic task) under a new one."""
    carried = ""
    if task is not None:
        headers = getattr(task.request, "headers", None) or {}
        carried = context.well_formed(getattr(task.request, REQUEST, None) or headers.get(REQUEST))
    chosen = carried or context.current() or context.new_id()
    _tokens[str(task_id)] = context.request_id.set(chosen)
    job = _job_of(task, args, kwargs)
    if job is not None:
        binding = context.bind(job=job)
        binding.__enter__()
        _bindings[str(task_id)] = binding


def _job_of(task, args, kwargs) -> object:
    """The job a task is for, where its first parameter is ``job_id`` (the job tasks')."""
    run = getattr(task, "run", None)
    try:
        first = next(iter(inspect.signature(run).parameters)) if run else None
    except (TypeError, ValueError, StopIteration):
        return None
    if first != "job_id":
        return None
    if kwargs and "job_id" in kwargs:
        return kwargs["job_id"]
    return args[0] if args else None


@signals.task_postrun.connect
def task_ends(task_id=None, **_kwargs) -> None:
    binding = _bindings.pop(str(task_id), None)
    if binding is not None:
        with contextlib.suppress(ValueError):
            binding.__exit__(None, None, None)
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
