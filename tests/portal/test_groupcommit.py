"""portal/groupcommit.py: calls that arrive while one is being written are written together
by the thread at the front of the queue; each caller gets its own outcome."""

from __future__ import annotations

import threading

import pytest

from portal.groupcommit import GroupCommit


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


def test_the_calls_queued_during_a_write_are_written_together_next():
    groups: list[list[int]] = []
    started, release = threading.Event(), threading.Event()

    def write(items: list[int]) -> None:
        groups.append(list(items))
        if len(groups) == 1:
            started.set()
            assert release.wait(10)

    together = GroupCommit(write, most=64)
    run = run_callers(together, list(range(6)), started)
    wait_queued(together, 6)  # the first, being written, and five behind it
    release.set()
    for thread in [run["first"], *run["rest"]]:
        thread.join(10)
    assert groups[0] == [0] and sorted(groups[1]) == [1, 2, 3, 4, 5] and len(groups) == 2
    assert run["outcomes"] == dict.fromkeys(range(6), "ok")
    assert not together._queue


def test_a_group_holds_at_most_most_calls():
    groups: list[list[int]] = []
    started, release = threading.Event(), threading.Event()

    def write(items: list[int]) -> None:
        groups.append(list(items))
        if len(groups) == 1:
            started.set()
            assert release.wait(10)

    together = GroupCommit(write, most=2)
    run = run_callers(together, list(range(6)), started)
    wait_queued(together, 6)
    release.set()
    for thread in [run["first"], *run["rest"]]:
        thread.join(10)
    assert [len(g) for g in groups] == [1, 2, 2, 1]
    assert sorted(i for g in groups for i in g) == list(range(6))


def test_a_failed_write_fails_its_group_only():
    groups: list[list[int]] = []
    started, release = threading.Event(), threading.Event()

    def write(items: list[int]) -> None:
        groups.append(list(items))
        if len(groups) == 1:
            started.set()
            assert release.wait(10)
            raise RuntimeError("the database went away")

    together = GroupCommit(write, most=64)
    run = run_callers(together, [0, 1, 2], started)
    wait_queued(together, 3)
    release.set()
    for thread in [run["first"], *run["rest"]]:
        thread.join(10)
    assert run["outcomes"] == {0: "the database went away", 1: "ok", 2: "ok"}
    with pytest.raises(ValueError):
        GroupCommit(lambda items: (_ for _ in ()).throw(ValueError("bad")), most=4).submit(7)


def test_alone_a_call_is_written_at_once_on_its_own_thread():
    writers: list[str] = []
    together = GroupCommit(lambda items: writers.append(threading.current_thread().name), 8)
    together.submit(1)
    assert writers == [threading.current_thread().name]
