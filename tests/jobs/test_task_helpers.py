"""The one-worker lock (jobs/task_helpers.single_flight) on the real Redis cache: a lease
renewed while its holder runs, freed soon after a holder that dies without releasing it."""

import multiprocessing
import os
import signal
import time

from django.core.cache import cache

from jobs.task_helpers import single_flight
from tests import polling


def redis_ttl(key: str) -> int:
    """The key's time to live in Redis (seconds; -2: no such key)."""
    client = cache._cache.get_client(key)  # type: ignore[attr-defined]
    return client.ttl(cache.make_and_validate_key(key))


def test_a_held_lock_is_renewed_lease_by_lease(settings):
    settings.PORTAL_LOCK_LEASE = 1
    key = "test-lease-renewed"
    cache.delete(key)
    with single_flight(key, 300) as mine:
        assert mine
        assert 0 < redis_ttl(key) <= 1  # a lease, not the 300 s the task may take
        deadline = time.monotonic() + 3.5  # three leases and more
        while time.monotonic() < deadline:
            with single_flight(key, 300) as other:
                assert not other, "the lock lapsed while its holder was still running"
            time.sleep(0.1)
    assert redis_ttl(key) == -2  # released at the end


def _hold_then_die(key: str, ready) -> None:
    with single_flight(key, 300) as mine:
        ready.send(mine)
        os.kill(os.getpid(), signal.SIGKILL)  # no finally runs, as under the OOM killer


def test_a_holder_killed_mid_task_frees_the_lock_within_a_lease(settings):
    settings.PORTAL_LOCK_LEASE = 1
    key = "test-lease-holder-killed"
    cache.delete(key)
    ours, theirs = multiprocessing.get_context("fork").Pipe()
    child = multiprocessing.get_context("fork").Process(target=_hold_then_die, args=(key, theirs))
    child.start()
    assert ours.recv() is True
    child.join(10)
    assert child.exitcode == -signal.SIGKILL
    assert cache.get(key) is not None  # left behind by the dead holder
    # Before leases, the lock stayed for the task's whole timeout (300 s here).
    assert redis_ttl(key) <= 1

    def taken() -> bool:
        with single_flight(key, 300) as mine:
            return mine

    polling.until(taken, 10, "the dead holder's lock to be freed", interval=0.1)
