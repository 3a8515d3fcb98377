"""The transfers' tasks (files/transfers.py does the work): a start per transfer, and the
beat's look at every transfer that is not over (its progress while it runs; a start or an
end lost with a worker or a broker is found again here)."""

from __future__ import annotations

import logging
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

from celery import shared_task
from django.conf import settings
from django.core.cache import cache
from django.db import close_old_connections, transaction
from django.http import Http404
from django.utils import timezone

from clusters import ssh
from common.paths import BadPath
from files import remote, transfers, uploads
from files.models import Transfer, Upload
from files.views import Failure, Place
from jobs.task_helpers import PersonTask, backoff, person_limits, single_flight

log = logging.getLogger(__name__)

# A queued transfer whose start task was lost is started again after this long; one whose
# start failed (its cluster did not answer: a login that hangs, say) waits longer each time,
# up to START_BACKOFF_MAX, so no sweep starts it over and over.
RESTART_AFTER = timedelta(seconds=60)
START_BACKOFF_MAX = 30 * 60
BATCH = 500


class TransferTask(PersonTask):
    """At most PORTAL_PERSON_TRANSFERS of one person's transfer tasks at once, on their own
    queue (PORTAL_TRANSFER_QUEUE): one person's transfers never hold every worker."""

    rows: Any = Transfer.objects
    share = "transfers"

    def most(self) -> int:
        return int(settings.PORTAL_PERSON_TRANSFERS)


class TransferPollTask(TransferTask):
    """A look at a running transfer: over the share it is dropped (the next sweep looks)."""

    again_when_busy = False


def _wait_key(transfer_id: int) -> str:
    return f"transfer-start-wait:{transfer_id}"


def start_failed(transfer_id: int) -> float:
    """Note a failed start: the sweep leaves the transfer alone this many seconds (60, 120,
    240 … up to START_BACKOFF_MAX)."""
    tries_key = f"transfer-start-tries:{transfer_id}"
    tries = cache.get(tries_key) or 0
    cache.set(tries_key, tries + 1, timeout=START_BACKOFF_MAX * 4)
    wait = min(RESTART_AFTER.total_seconds() * 2**tries, START_BACKOFF_MAX)
    cache.set(_wait_key(transfer_id), 1, timeout=max(1, int(wait)))
    return wait


def start_soon(transfer: Transfer) -> None:
    """Queue a new transfer's start once its row is committed (lost: the sweep starts it)."""
    pk = transfer.pk
    transaction.on_commit(lambda: start_transfer.delay(pk))


@shared_task(name="files.tasks.start_transfer", **person_limits(TransferTask))
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
            # The cluster could not be reached: the sweep starts it again, later each time.
            wait = start_failed(transfer_id)
            log.info("transfer %s not started yet (again in %.0f s): %s", transfer_id, wait, exc)
        finally:
            close_old_connections()


@shared_task(name="files.tasks.poll_transfer", **person_limits(TransferPollTask))
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
    queued = list(
        Transfer.objects.filter(
            state=Transfer.State.QUEUED, created_at__lt=timezone.now() - RESTART_AFTER
        ).values_list("pk", flat=True)[:BATCH]
    )
    waiting = cache.get_many([_wait_key(pk) for pk in queued])
    lost = [pk for pk in queued if _wait_key(pk) not in waiting]
    for pk in lost:
        start_transfer.apply_async((pk,), expires=interval * 10)
    return len(running) + len(lost)


class UploadTask(TransferTask):
    """An upload's finish (its sha256 and rename on the cluster) within the person's share
    of transfer tasks; its id is the upload's (a string)."""

    rows: Any = Upload.objects

    def person_of(self, *args, **kwargs) -> int | None:
        upload_id = args[0] if args else kwargs.get("upload_id")
        if not isinstance(upload_id, str):
            return None
        return Upload.objects.filter(pk=upload_id).values_list("user_id", flat=True).first()


@shared_task(
    name="files.tasks.finish_upload",  # (uploads.FINISH_TASK)
    bind=True,
    acks_late=True,
    max_retries=5,
    **{
        **person_limits(UploadTask),
        "time_limit": uploads.HASH_TIMEOUT + 60,
        "soft_time_limit": uploads.HASH_TIMEOUT + 30,
    },
)
def finish_upload(self, upload_id: str) -> None:
    """Every byte of an upload arrived (files/uploads.complete): its sha256 on the cluster
    and the rename onto its target, as its person; what went wrong is kept for HEAD."""
    upload = (
        Upload.objects.select_related("user", "cluster").filter(pk=upload_id, finished_at=None)
    ).first()
    if upload is None:
        return
    try:
        place = Place(SimpleNamespace(user=upload.user), upload.cluster.name, upload.root)
        uploads.finish(place, upload)
    except ssh.ClusterError as exc:
        if exc.transient and self.request.retries < self.max_retries:
            raise self.retry(countdown=backoff(self.request.retries)) from None
        _upload_failed(upload, f"Could not finish it on {upload.cluster.name}: {exc}")
    except remote.Conflict as exc:  # the target appeared meanwhile: the bytes are kept
        _upload_failed(upload, str(exc))
    except (Failure, BadPath, Http404) as exc:
        _upload_failed(upload, str(exc))
    finally:
        close_old_connections()


def _upload_failed(upload: Upload, message: str) -> None:
    log.info("upload %s not finished: %s", upload.pk, message)
    Upload.objects.filter(pk=upload.pk, finished_at=None).update(error=message[:500])
