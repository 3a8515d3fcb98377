"""The transfers' tasks: their own queue, one person's share of the workers, and a start
that failed (a cluster that does not answer, a login that hangs) tried again later each
time, never at every sweep. (Real rclone and sshd: tests/files/test_transfers.py.)"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from clusters import ssh
from files import tasks, transfers
from files.models import Transfer
from tests import factories

# transaction=True: the tasks close their database connection at the end, as in a worker.
pytestmark = pytest.mark.django_db(transaction=True)


def test_a_failed_start_waits_longer_each_time_before_the_sweep_starts_it_again(
    cluster, owner, monkeypatch
):
    """Before: a queued transfer whose start timed out was started again by every sweep
    (every PORTAL_TRANSFER_POLL_INTERVAL, 2 s), each start holding a worker for as long."""
    transfer = queued(owner, cluster)
    starts: list[int] = []

    def hangs(row):
        starts.append(row.pk)
        raise ssh.CommandTimedOut("a login that hangs", seconds=40)

    monkeypatch.setattr(transfers, "start", hangs)
    sent: list[int] = []
    monkeypatch.setattr(
        tasks.start_transfer, "apply_async", lambda args, **kw: sent.append(args[0])
    )
    tasks.start_transfer.apply(args=[transfer.pk])
    assert starts == [transfer.pk]
    for _ in range(5):  # sweeps while it waits: nothing sent
        tasks.watch_transfers()
    assert sent == []
    waits = [tasks.start_failed(transfer.pk) for _ in range(6)]
    assert waits == [120, 240, 480, 960, 1800, 1800]  # (the first was 60)
    tasks.cache.delete(tasks._wait_key(transfer.pk))
    tasks.watch_transfers()
    assert sent == [transfer.pk]  # its wait over: started again


def test_past_a_persons_share_a_transfer_task_waits_and_a_look_is_dropped(
    cluster, owner, settings, monkeypatch
):
    """One person's transfer tasks hold at most PORTAL_PERSON_TRANSFERS worker processes:
    with their place taken, a start is sent again later on the same queue (not run), a
    look at a running one is dropped (the next sweep looks)."""
    from common import places

    settings.PORTAL_PERSON_TRANSFERS = 1
    transfer = queued(owner, cluster)
    assert places.take(f"person-transfers:{owner.pk}", "held", most=1, ttl=60)
    ran: list[int] = []
    monkeypatch.setattr(transfers, "start", lambda row: ran.append(row.pk))
    monkeypatch.setattr(transfers, "poll", lambda row: ran.append(row.pk))
    again: list[tuple] = []
    monkeypatch.setattr(tasks.start_transfer, "apply_async", lambda *a, **kw: again.append((a, kw)))
    monkeypatch.setattr(tasks.poll_transfer, "apply_async", lambda *a, **kw: again.append((a, kw)))
    tasks.start_transfer(transfer.pk)  # as a worker runs it (not eagerly)
    tasks.poll_transfer(transfer.pk)
    assert ran == [] and len(again) == 1
    (args, kwargs), options = again[0]
    assert args == (transfer.pk,) and 1 <= options["countdown"] <= 3
    places.give_back(f"person-transfers:{owner.pk}", "held")
    tasks.start_transfer(transfer.pk)
    assert ran == [transfer.pk]


def test_a_persons_transfer_waits_while_their_other_task_holds_this_worker(
    cluster, owner, settings, monkeypatch
):
    """Every kind of one person's tasks together holds at most PORTAL_PERSON_WORKERS of
    one worker's processes: with their submission running on this worker (its place
    taken), their transfer's start is sent again later; another person's is not held."""
    from common import places

    settings.PORTAL_PERSON_WORKERS = 1
    transfer = queued(owner, cluster)
    other = queued(factories.user("other"), cluster)
    held = f"person-worker:-:{owner.pk}"  # (no worker name when called directly)
    assert places.take(held, "their-submission", most=1, ttl=60)
    ran: list[int] = []
    monkeypatch.setattr(transfers, "start", lambda row: ran.append(row.pk))
    again: list[tuple] = []
    monkeypatch.setattr(tasks.start_transfer, "apply_async", lambda *a, **kw: again.append((a, kw)))
    tasks.start_transfer(transfer.pk)
    tasks.start_transfer(other.pk)
    assert ran == [other.pk] and len(again) == 1
    assert places.take(f"person-transfers:{owner.pk}", "probe", most=1, ttl=60)  # given back
    places.give_back(f"person-transfers:{owner.pk}", "probe")
    places.give_back(held, "their-submission")
    tasks.start_transfer(transfer.pk)
    assert ran == [other.pk, transfer.pk]


def queued(owner, cluster) -> Transfer:
    """A transfer queued five minutes ago (past RESTART_AFTER)."""
    transfer = Transfer.objects.create(
        owner=owner, cluster=cluster, remote_name="r", direction="upload", root="home"
    )
    Transfer.objects.filter(pk=transfer.pk).update(
        created_at=timezone.now() - dt.timedelta(minutes=5)
    )
    return transfer
