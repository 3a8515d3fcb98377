"""The bookkeeping of a process's OpenSSH masters (clusters/masters.py), with fake
clocks and fake masters: reuse, replacement (settings changed, certificate about to
expire, dead), idle closing, the cap, and never closing one in use."""

import pytest

from clusters import masters, ssh


class FakeMaster:
    def __init__(self, name: str, expires_at: float | None = None):
        self.name, self.expires_at = name, expires_at
        self.up, self.closed = True, False

    def alive(self) -> bool:
        return self.up and not self.closed

    def close(self) -> None:
        assert not self.closed, f"{self.name} closed twice"
        self.closed = True


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def world(settings):
    settings.PORTAL_BULK_SSH_IDLE = 120
    settings.PORTAL_BULK_SSH_MASTERS = 64
    clock, wall = Clock(), Clock()
    started: list[FakeMaster] = []

    def starter(expires_at: float | None = None):
        def start() -> FakeMaster:
            started.append(FakeMaster(f"m{len(started)}", expires_at))
            return started[-1]

        return start

    return masters.Registry(clock=clock, wall=wall), clock, wall, started, starter


def test_one_master_serves_the_same_key_again_and_others_get_their_own(world):
    registry, _, _, started, starter = world
    with registry.using((1, "alice", "file_upload into home"), "c", starter()) as first:
        pass
    with registry.using((1, "alice", "file_upload into home"), "c", starter()) as again:
        assert again is first
    with registry.using((1, "alice", "file_upload into scratch"), "c", starter()) as other:
        assert other is not first
    assert len(started) == 2 and not any(m.closed for m in started)


def test_a_master_is_replaced_before_its_certificate_expires(world):
    registry, _, wall, started, starter = world
    key = (1, "alice", "up")
    with registry.using(key, "c", starter(expires_at=wall.now + 300)):
        pass
    wall.now += 289  # 11 s left: still used
    with registry.using(key, "c", starter(expires_at=wall.now + 300)) as master:
        assert master is started[0]
    wall.now += 1  # 10 s left: a fresh certificate, the old master closed
    with registry.using(key, "c", starter(expires_at=wall.now + 300)) as master:
        assert master is started[1]
    assert started[0].closed and not started[1].closed


def test_a_master_in_use_is_closed_only_when_its_user_is_done(world):
    registry, _, wall, started, starter = world
    key = (1, "alice", "up")
    with registry.using(key, "c", starter(expires_at=wall.now + 300)) as busy:
        wall.now += 295  # expired meanwhile: another request gets a new one
        with registry.using(key, "c", starter(expires_at=wall.now + 300)) as fresh:
            assert fresh is not busy and not busy.closed
        assert not busy.closed  # still writing
    assert busy.closed and not fresh.closed


def test_changed_settings_or_a_dead_master_start_a_new_one(world):
    registry, _, _, started, starter = world
    key = (1, "alice", "up")
    with registry.using(key, "before", starter()):
        pass
    with registry.using(key, "after", starter()) as master:  # a new pinned key, say
        assert master is started[1] and started[0].closed
    started[1].up = False  # the cluster dropped it
    with registry.using(key, "after", starter()) as master:
        assert master is started[2] and started[1].closed


def test_a_master_that_lost_the_cluster_is_not_given_out_again(world):
    registry, _, _, started, starter = world
    key = (1, "alice", "up")
    with pytest.raises(ssh.ClusterUnreachable):
        with registry.using(key, "c", starter()):
            raise ssh.ClusterUnreachable("OpenSSH lost the cluster")
    assert started[0].closed
    with registry.using(key, "c", starter()) as master:
        assert master is started[1]
    with pytest.raises(ssh.CommandFailed):  # dd's own failure: the master is fine
        with registry.using(key, "c", starter()):
            raise ssh.CommandFailed("dd: No space left on device")
    assert not started[1].closed


def test_idle_masters_are_closed_after_the_setting_and_busy_ones_never(world, settings):
    registry, clock, _, started, starter = world
    with registry.using((1, "a", "up"), "c", starter()):
        pass
    clock.now += 60
    with registry.using((2, "b", "up"), "c", starter()):
        clock.now += 60  # the first is idle for 120 s now, the second busy
        registry.sweep()
        assert started[0].closed and not started[1].closed
        clock.now += 500
        registry.sweep()
        assert not started[1].closed
    registry.sweep()
    assert not started[1].closed  # just given back
    settings.PORTAL_BULK_SSH_IDLE = 5  # read when it sweeps
    clock.now += 5
    registry.sweep()
    assert started[1].closed and not registry.slots


def test_a_dead_idle_master_is_swept_at_once(world):
    registry, _, _, started, starter = world
    with registry.using((1, "a", "up"), "c", starter()):
        pass
    started[0].up = False
    registry.sweep()
    assert started[0].closed and not registry.slots


def test_at_the_cap_the_least_recently_used_idle_master_goes(world, settings):
    registry, clock, _, started, starter = world
    settings.PORTAL_BULK_SSH_MASTERS = 2
    for account in (1, 2):
        with registry.using((account, "a", "up"), "c", starter()):
            clock.now += 1
    with registry.using((1, "a", "up"), "c", starter()):  # account 1 used last now
        pass
    with registry.using((3, "a", "up"), "c", starter()):
        assert started[1].closed and not started[0].closed  # account 2's went
    assert len(registry.slots) == 2


def test_when_every_master_is_in_use_there_is_no_room(world, settings):
    registry, _, _, started, starter = world
    settings.PORTAL_BULK_SSH_MASTERS = 2
    with registry.using((1, "a", "up"), "c", starter()):
        with registry.using((2, "a", "up"), "c", starter()):
            with pytest.raises(masters.Full):
                with registry.using((3, "a", "up"), "c", starter()):
                    pass
    assert len(started) == 2 and not any(m.closed for m in started)


def test_a_master_that_fails_to_start_leaves_nothing_behind(world):
    registry, _, _, _, _ = world

    def refused():
        raise ssh.AuthenticationFailed("Permission denied (publickey)")

    with pytest.raises(ssh.AuthenticationFailed):
        with registry.using((1, "a", "up"), "c", refused):
            pass
    assert not registry.slots


def test_close_all_closes_idle_ones_now_and_busy_ones_when_given_back(world):
    registry, _, _, started, starter = world
    with registry.using((1, "a", "up"), "c", starter()):
        pass
    with registry.using((2, "a", "up"), "c", starter()):
        registry.close_all()
        assert started[0].closed and not started[1].closed
    assert started[1].closed and not registry.slots
