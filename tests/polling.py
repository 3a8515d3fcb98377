"""Waiting in tests: one helper, with deadlines that scale with the machine.

A test that waits for something (a job to end, a port to listen, a mail to arrive) polls
with until(). Its timeout is multiplied by PORTAL_TEST_TIMEOUT_SCALE (default 1): a
slower or busier machine (two shared cores, a loaded CI runner) sets it to 2 or 3 instead
of every test guessing its own margin."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

SCALE_VARIABLE = "PORTAL_TEST_TIMEOUT_SCALE"


def scale() -> float:
    """The factor every test deadline is multiplied by (PORTAL_TEST_TIMEOUT_SCALE)."""
    raw = os.environ.get(SCALE_VARIABLE, "").strip()
    if not raw:
        return 1.0
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{SCALE_VARIABLE}={raw!r} is not a number") from None
    if not value > 0:
        raise ValueError(f"{SCALE_VARIABLE}={raw!r} must be more than 0")
    return value


def scaled(seconds: float) -> float:
    """``seconds`` as a deadline on this machine (for bounds that are not polls)."""
    return seconds * scale()


def until(
    predicate: Callable[[], T],
    timeout: float,
    what: str | Callable[[], str],
    interval: float = 0.5,
    ignoring: tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``predicate`` every ``interval`` seconds until it returns something truthy,
    and return that. After ``timeout`` seconds (times the scale) raise AssertionError
    naming ``what`` (a text, or a function giving it then, for the state at the end)
    and the predicate's last value.

    Exceptions of the types in ``ignoring`` count as a falsy value (the last one is named
    at the end); any other propagates at once. The predicate is always called at least
    once, and once more at the deadline."""
    limit = scaled(timeout)
    deadline = time.monotonic() + limit
    while True:
        try:
            last: object = predicate()
        except ignoring as exc:
            last = exc
        else:
            if last:
                return last  # type: ignore[return-value]
        left = deadline - time.monotonic()
        if left <= 0:
            described = what() if callable(what) else what
            raise AssertionError(
                f"timed out after {limit:g}s waiting for {described} (last: {last!r})"
            )
        time.sleep(min(interval, left))
