"""common/groupcommit.py: calls that arrive while one is being written are written together
by the thread at the front of the queue; each caller gets its own outcome."""

from __future__ import annotations

import threading

import pytest

from common.groupcommit import GroupCommit


def run_callers(together: GroupCommit, items: list, started: threading.Event) -> dict:
    """Submit ``items`` from one thread each, once the first write has begun; returns each
    item's outcome ("ok" or the exception's text)."""
    outcomes: dict = {}

    def call(item) -> None:
        try:
            together.submit(item)
            outcomes[item] = "ok"
        except Exception as exc:  # noqa: BLE001 - the outcome is what the test reads
            outcomes[item] = str(exc)

    first = threading.Thread(target=call, args=(items[0],))
    first.start()
    assert started.wait(10)
    rest = [threading.Thread(target=call, args=(item,)) for item in items[1:]]
    for thread in rest:
        thread.start()
    return {"first": first, "rest": rest, "outcomes": outcomes}


def wait_queued(together: GroupCommit, n: int) -> None:
    for _ in range(1000):
        if len(together._queue) >= n:
            return
        threading.Event().wait(0.01)
    raise AssertionError(f"{len(together._queue)} queued, not {n}")


class Writes:
    """A ``write`` that records each group and holds the first until ``release`` is set
    (then fails it if ``fail_first``), so the calls behind it queue meanwhile."""

    def __init__(self, fail_first: bool = False) -> None:
        self.groups: list[list[int]] = []
        self.started, self.release = threading.Event(), threading.Event()
        self.fail_first = fail_first

    def __call__(self, items: list[int]) -> None:
        self.groups.append(list(items))
        if len(self.groups) == 1:
            self.started.set()
            assert self.release.wait(10)
            if self.fail_first:
                raise RuntimeError("the database went away")

    def run(self, together: GroupCommit, n: int) -> dict:
        """``n`` callers, the first written alone while the others queue; their outcomes."""
        run = run_callers(together, list(range(n)), self.started)
        wait_queued(together, n)  # the first, being written, and the rest behind it
        self.release.set()
        for thread in [run["first"], *run["rest"]]:
            thread.join(10)
        return run["outcomes"]


def test_the_calls_queued_during_a_write_are_written_together_next():
    writes = Writes()
    together = GroupCommit(writes, most=64)
    assert writes.run(together, 6) == dict.fromkeys(range(6), "ok")
    groups = writes.groups
    assert groups[0] == [0] and sorted(groups[1]) == [1, 2, 3, 4, 5] and len(groups) == 2
    assert not together._queue


def test_a_group_holds_at_most_most_calls():
    writes = Writes()
    writes.run(GroupCommit(writes, most=2), 6)
    assert [len(g) for g in writes.groups] == [1, 2, 2, 1]
    assert sorted(i for g in writes.groups for i in g) == list(range(6))


def test_a_failed_write_fails_its_group_only():
    writes = Writes(fail_first=True)
    outcomes = writes.run(GroupCommit(writes, most=64), 3)
    assert outcomes == {0: "the database went away", 1: "ok", 2: "ok"}
    with pytest.raises(ValueError):
        GroupCommit(lambda items: (_ for _ in ()).throw(ValueError("bad")), most=4).submit(7)


def test_alone_a_call_is_written_at_once_on_its_own_thread():
    writers: list[str] = []
    together = GroupCommit(lambda items: writers.append(threading.current_thread().name), 8)
    together.submit(1)
    assert writers == [threading.current_thread().name]
