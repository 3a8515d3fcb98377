"""Group commit: calls that arrive while one is being written are written together.

Each calling thread queues its item and waits. The thread whose item is at the front of
the queue writes it together with the items queued behind it (at most ``most``) in one
``write`` (one transaction), then wakes the others: those whose item went in return, and
the next at the front writes the next group. Nothing waits for a timer: alone, a call is
written at once, as before; under load a group holds whatever queued during the write
before it, so the statements and commits per call fall as the load rises.

The writer is always one of the calling threads, on its own database connection, so a
caller inside a transaction (a test) sees its own write. A ``write`` that raises fails
every call of its group with the same exception; a failure that concerns one item is the
``write``'s to record on that item (the metric ingest marks a refused upload).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(eq=False)
class _Entry(Generic[T]):
    item: T
    done: bool = False
    error: BaseException | None = None


class GroupCommit(Generic[T]):
    def __init__(self, write: Callable[[list[T]], None], most: int) -> None:
        self._write = write
        self._most = most
        self._queue: deque[_Entry[T]] = deque()
        self._changed = threading.Condition()

    def submit(self, item: T) -> None:
        """Write ``item`` (with others, or alone); return once it is written, or raise what
        the write of its group raised."""
        entry = _Entry(item)
        with self._changed:
            self._queue.append(entry)
            while not entry.done and self._queue[0] is not entry:
                self._changed.wait()
            if not entry.done:  # at the front: this thread writes the next group
                group = [self._queue[n] for n in range(min(self._most, len(self._queue)))]
        if not entry.done:
            error: BaseException | None = None
            try:
                self._write([e.item for e in group])
            except BaseException as exc:  # noqa: BLE001 - handed to every caller of the group
                error = exc
            with self._changed:
                for e in group:  # the group is the queue's front: only its writer removes it
                    self._queue.popleft()
                    e.done, e.error = True, error
                self._changed.notify_all()
        if entry.error is not None:
            raise entry.error
