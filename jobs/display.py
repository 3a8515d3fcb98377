"""A job in words, for people: why it waits, its GPUs, its attempt, its layout.

Pages (the template filters of the same names in frontend/templatetags/portal.py), the
API (jobs/api/serializers.py) and pushed updates (jobs.broadcast.job_payload, under the
keys ``pending_text`` and ``attempts_text``) all say it the same way. The model keeps the
facts; the wording is here.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from django.utils import timezone

from clusters.models.gpus import wants
from common.choices import State
from schedulers.launchers import shape  # noqa: F401 - how a job is laid out, named here too

if TYPE_CHECKING:
    from jobs.models.job import Job


def when(moment: datetime) -> str:
    """A moment in a timeline line or a notice: local time, to the minute, with its zone."""
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M %Z")


def ordinal(n: int) -> str:
    """1 -> '1st', 2 -> '2nd', 11 -> '11th', 23 -> '23rd'."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def pending_text(job: Job) -> str:
    """Why a pending job waits, where it is in the queue and when the scheduler expects it
    to start, in words ('' unless pending)."""
    if job.state != State.PENDING:
        return ""
    parts = [job.pending_reason or "waiting for the scheduler"]
    if job.queue_position and not job.is_held:
        parts.append(
            "next in the queue"
            if job.queue_position == 1
            else f"{ordinal(job.queue_position)} in the queue"
        )
    if job.estimated_start and not job.is_held:
        at = timezone.localtime(job.estimated_start)
        day = "" if at.date() == timezone.localdate() else at.strftime("%Y-%m-%d ")
        parts.append(f"the scheduler expects it to start at {day}{at:%H:%M}")
    return "; ".join(parts)


def gpu_text(job: Job) -> str:
    """'2 × a100 (asked: compute capability ≥ 8.0)', '1 × v100 or a100', '2 × any'."""
    if not job.gpus:
        return "none"
    kind = job.gpu_type or " or ".join(job.gpu_constraint.split("|")) or "any"
    text = f"{job.gpus} × {kind}"
    if job.nodes > 1:
        text += f" per node ({job.total_gpus} in all)"
    asked = wants(job.min_gpu_capability, job.min_gpu_memory_gb)
    return f"{text} (asked: {asked})" if asked else text


def attempts_text(job: Job) -> str:
    """'attempt 2 of 5' for a chained run, '' otherwise."""
    if not job.resumable or job.max_attempts < 2:
        return ""
    text = f"attempt {min(job.attempt + 1, job.max_attempts)} of {job.max_attempts}"
    return f"ended on {text}" if job.is_final else text
