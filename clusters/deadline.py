"""When the work in hand must be done by: every SSH command and SFTP call of a task ends
by its deadline, so no cluster holds a worker past the task's time limit.

One context variable holds the deadline (``time.monotonic()`` seconds; None: no bound).
A Celery task gets one from its soft time limit (``jobs.task_helpers`` sets it before the
task runs, a margin short of the limit, and clears it after); ``within(seconds)`` narrows
it for one step (the provenance read gets a share of what is left). ``clusters.ssh``
caps each command's and each SFTP call's timeout by ``left()``: a command the deadline
cuts raises ``ssh.CommandTimedOut``, naming the bound.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token

_until: ContextVar[float | None] = ContextVar("cluster_deadline", default=None)


def left() -> float | None:
    """Seconds until the deadline (may be negative); None without one."""
    until = _until.get()
    return None if until is None else until - time.monotonic()


def cap(timeout: float) -> float:
    """``timeout`` shortened to what is left before the deadline (may be <= 0)."""
    remaining = left()
    return timeout if remaining is None else min(timeout, remaining)


def start(seconds: float | None) -> Token:
    """Set a deadline ``seconds`` from now (None: no bound), replacing any; the token
    restores the one before (``finish``)."""
    return _until.set(None if seconds is None else time.monotonic() + seconds)


def finish(token: Token) -> None:
    _until.reset(token)


@contextmanager
def within(seconds: float) -> Iterator[float]:
    """A deadline ``seconds`` from now for the block, never later than the one in force;
    yields the seconds the block has."""
    until = time.monotonic() + seconds
    outer = _until.get()
    if outer is not None:
        until = min(until, outer)
    token = _until.set(until)
    try:
        yield until - time.monotonic()
    finally:
        _until.reset(token)
