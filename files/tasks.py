"""The transfers' tasks (files/transfers.py does the work): a start per transfer, and the
beat's look at every transfer that is not over (its progress while it runs; a start or an
end lost with a worker or a broker is found again here)."""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db import close_old_connections, transaction
from django.utils import timezone

from files import transfers
from files.models import Transfer
from jobs.cluster import ssh
from jobs.task_helpers import limits, single_flight

log = logging.getLogger(__name__)

# A queued transfer whose start task was lost is started again after this long.
RESTART_AFTER = timedelta(seconds=60)
BATCH = 500


def start_soon(transfer: Transfer) -> None:
    """Queue a new transfer's start once its row is committed (lost: the sweep starts it)."""
    pk = transfer.pk
    transaction.on_commit(lambda: start_transfer.delay(pk))


@shared_task(name="files.tasks.start_transfer", **limits())
def start_transfer(transfer_id: int) -> None:
    with single_flight(f"transfer:{transfer_id}", 120) as mine:
        if not mine:
            return
        try:
            transfer = Transfer.objects.select_related("cluster", "owner", "remote").get(
                pk=transfer_id
            )
        except Transfer.DoesNotExist:
            return
        try:
            transfers.start(transfer)
        except ssh.ClusterError as exc:
            # The cluster could not be reached: the sweep starts it again later.
            log.info("transfer %s not started yet: %s", transfer_id, exc)
        finally:
            close_old_connections()


@shared_task(name="files.tasks.poll_transfer", **limits())
def poll_transfer(transfer_id: int) -> None:
    with single_flight(f"transfer:{transfer_id}", 60) as mine:
        if not mine:
            return
        transfer = (
            Transfer.objects.select_related("cluster", "owner").filter(pk=transfer_id).first()
        )
        if transfer is None:
            return
        try:
            transfers.poll(transfer)
        except ssh.ClusterError as exc:
            log.info("transfer %s not looked at: %s", transfer_id, exc)
        finally:
            close_old_connections()


@shared_task(name="files.tasks.watch_transfers")
def watch_transfers() -> int:
    """Periodic (beat, PORTAL_TRANSFER_POLL_INTERVAL): one look per running transfer, a
    start again for a queued one whose start was lost."""
    interval = settings.PORTAL_TRANSFER_POLL_INTERVAL
    running = list(
        Transfer.objects.filter(state=Transfer.State.RUNNING)
        .order_by("polled_at")
        .values_list("pk", flat=True)[:BATCH]
    )
    for pk in running:
        poll_transfer.apply_async((pk,), expires=interval * 2)
    lost = list(
        Transfer.objects.filter(
            state=Transfer.State.QUEUED, created_at__lt=timezone.now() - RESTART_AFTER
        ).values_list("pk", flat=True)[:BATCH]
    )
    for pk in lost:
        start_transfer.apply_async((pk,), expires=interval * 10)
    return len(running) + len(lost)
