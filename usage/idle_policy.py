"""The idle-GPU policy of a partition (set by admins, off by default): a running GPU job whose
GPUs all stayed at or below the partition's threshold for its idle minutes is warned (its
page's banner and a GPU_IDLE notification name when it will be cancelled); its owner's one
"Keep it" adds the partition's keep-it minutes; after the grace the portal cancels it with
the policy's reason (its final message, its timeline and the cancellation's notification).
Judged from the nvidia-smi samples the portal already keeps (usage.hours.idle_gpu_jobs): a
notebook whose kernel is busy but whose GPUs are idle is idle here. Dry run: nothing is told
or cancelled; the job only records when it would be cancelled, for the staff page."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clusters.models import Partition
from jobs import lifecycle
from jobs.display import when
from jobs.models import Job
from jobs.task_helpers import single_flight
from usage import hours as usage

# Jobs judged per partition and pass (the idle query is bounded the same way).
MAX_JOBS = 5000


@dataclass
class Pass:
    """What one evaluation did (job ids)."""

    warned: list[int] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)
    would_cancel: list[int] = field(default_factory=list)
    cleared: list[int] = field(default_factory=list)


def _minutes(value: float) -> str:
    return f"{value:g} minute{'' if value == 1 else 's'}"


def reason(partition: Partition) -> str:
    """The cancellation's reason: which policy and why (its final message)."""
    return (
        f"Cancelled by the idle-GPU policy of partition {partition}: its GPUs stayed at or "
        f"below {partition.idle_percent:g}% utilisation for {_minutes(partition.idle_minutes)} "
        "and through the grace period after the warning."
    )[:500]


def evaluate(now: datetime | None = None) -> Pass:
    """One pass over the running GPU jobs of every partition with a policy. Bounded: two
    queries per partition for the samples, one per warned job."""
    now = now or timezone.now()
    done = Pass()
    for partition in Partition.objects.exclude(idle_policy=Partition.IdlePolicy.OFF).select_related(
        "cluster"
    ):
        _evaluate(partition, now, done)
    return done


def _evaluate(partition: Partition, now: datetime, done: Pass) -> None:
    running = Job.objects.filter(
        partition=partition, state=Job.State.RUNNING, gpus__gt=0, cancel_requested_at=None
    )
    idle = usage.idle_gpu_jobs(
        running,
        now.timestamp(),
        minutes=partition.idle_minutes,
        percent=partition.idle_percent,
    )
    enforce = partition.idle_policy == Partition.IdlePolicy.ENFORCE
    # Busy again (or no longer judged): the warning is withdrawn; a used Keep it stays used.
    busy = running.filter(idle_cancel_at__isnull=False).exclude(pk__in=list(idle))
    done.cleared += list(busy.values_list("pk", flat=True)[:MAX_JOBS])
    busy.update(idle_warned_at=None, idle_cancel_at=None)
    for job in running.filter(pk__in=list(idle)[:MAX_JOBS]).select_related("owner", "cluster"):
        if job.idle_cancel_at is None or (enforce and job.idle_warned_at is None):
            _warn(job, partition, now, enforce)
            (done.warned if enforce else done.would_cancel).append(job.pk)
        elif not enforce:
            done.would_cancel.append(job.pk)
        elif job.idle_cancel_at <= now:
            lifecycle.cancel(job, reason=reason(partition))
            done.cancelled.append(job.pk)


def _warn(job: Job, partition: Partition, now: datetime, enforce: bool) -> None:
    job.idle_cancel_at = now + timedelta(minutes=partition.idle_grace_minutes)
    job.idle_warned_at = now if enforce else None
    with transaction.atomic():
        Job.objects.filter(pk=job.pk).update(
            idle_cancel_at=job.idle_cancel_at, idle_warned_at=job.idle_warned_at
        )
        if not enforce:
            return
        job.note(
            f"Idle-GPU policy of partition {partition}: its GPUs stayed at or below "
            f"{partition.idle_percent:g}% for {_minutes(partition.idle_minutes)}; it will "
            f"be cancelled at {when(job.idle_cancel_at)} unless they are used or its "
            "owner keeps it.",
            tell="gpu_idle",
        )


def keep(job: Job, user) -> datetime | None:
    """The owner's one "Keep it": the cancellation moves by the partition's keep-it minutes,
    recorded (who, when) in the job and its timeline; the new cancel time. None if not
    theirs to keep, not warned, or already kept."""
    if user is None or job.owner_id != user.pk:
        return None
    now = timezone.now()
    with transaction.atomic():
        row = Job.objects.select_for_update().select_related("partition").get(pk=job.pk)
        if row.idle_warned_at is None or row.idle_cancel_at is None or row.idle_kept_at:
            return None
        if row.is_final or row.cancel_requested_at:
            return None
        until = row.idle_cancel_at + timedelta(minutes=row.partition.idle_keep_minutes)
        row.idle_cancel_at = until
        row.idle_kept_at, row.idle_kept_by = now, user
        Job.objects.filter(pk=row.pk).update(
            idle_cancel_at=row.idle_cancel_at, idle_kept_at=now, idle_kept_by=user
        )
        row.note(
            f"Kept by {user.get_username()} against the idle-GPU policy: it will be "
            f"cancelled at {when(row.idle_cancel_at)} if its GPUs stay idle."
        )
    job.idle_cancel_at, job.idle_kept_at, job.idle_kept_by = until, now, user
    return until


def warning_of(job: Job) -> dict | None:
    """What the job page's banner shows: the cancel time and whether Keep it is still
    offered; None when the job is not warned (or its partition only dry-runs)."""
    if job.state != Job.State.RUNNING or job.idle_warned_at is None or job.idle_cancel_at is None:
        return None
    if job.cancel_requested_at or job.partition.idle_policy != Partition.IdlePolicy.ENFORCE:
        return None
    return {"cancel_at": job.idle_cancel_at, "may_keep": job.idle_kept_at is None}


def listed(limit: int = 500):
    """The staff page: running jobs the policies warned or (dry run) would cancel, soonest
    first."""
    return (
        Job.objects.filter(
            state=Job.State.RUNNING, idle_cancel_at__isnull=False, cancel_requested_at=None
        )
        .exclude(partition__idle_policy=Partition.IdlePolicy.OFF)
        .select_related("owner", "partition", "partition__cluster", "idle_kept_by")
        .order_by("idle_cancel_at")[:limit]
    )


@shared_task(name="jobs.idle_policy.enforce_idle_gpu_policy")
def enforce_idle_gpu_policy() -> dict[str, list[int]]:
    """Periodic (beat): one pass of the partitions' idle-GPU policies, in one worker at a
    time. (Here, not in jobs.tasks: it cancels through jobs.lifecycle, which imports
    jobs.tasks; the worker imports this module through CELERY_IMPORTS.)"""
    with single_flight("idle-gpu-policy", timeout=settings.PORTAL_IDLE_POLICY_INTERVAL * 4) as mine:
        if not mine:
            return {}
        done = evaluate()
    return {
        "warned": done.warned,
        "cancelled": done.cancelled,
        "would_cancel": done.would_cancel,
        "cleared": done.cleared,
    }
