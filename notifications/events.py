"""What each event is, whether it is on by default, and what its message says: one
sentence of what happened and what to do, as plain bounded text (job names, messages and
stderr come from users and clusters: never markup, never unbounded)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db import models
from django.utils import timezone

from common.text import error_tail, plain_line

# The one sentence (a job's name and message inside it included) and the stderr tail.
TEXT_MAX = 400
DETAIL_LINES = 20
DETAIL_MAX = 2000


class Event(models.TextChoices):
    JOB_FAILED = "job_failed", "A job failed"
    JOB_TIMEOUT = "job_timeout", "A job reached its time limit"
    JOB_CANCELLED = "job_cancelled", "A job was cancelled by someone else or by a policy"
    JOB_COMPLETED = "job_completed", "A long job completed"
    JOB_STARTED = "job_started", "A job started after a long wait in the queue"
    SESSION_READY = "session_ready", "A notebook or desktop session is ready"
    EXPERIMENT_FINISHED = "experiment_finished", "An experiment finished"
    GPU_IDLE = "gpu_idle", "A job's GPUs are idle and the idle-GPU policy will cancel it"
    WALLTIME_ENDING = "walltime_ending", "A running job reaches its time limit within 15 minutes"
    JOB_HELD = "job_held", "A job is held by the scheduler"
    JOB_REQUEUED = "job_requeued", "A job was requeued"
    TRANSFER_DONE = "transfer_done", "A transfer finished"
    TRANSFER_FAILED = "transfer_failed", "A transfer failed"
    # Always told (portal and email), not a choice: the person's webhook was turned off.
    WEBHOOK_DISABLED = "webhook_disabled", "Your webhook was turned off after failures"
    # Always told (portal and email), not a choice: someone else opened the person's session.
    SESSION_OPENED_BY_OTHER = "session_opened_by_other", "Someone else opened your session"
    # Always told (portal and email), not a choice: a colleague shared a session with them.
    SESSION_SHARED = "session_shared", "A colleague shared a session with you"


class Channel(models.TextChoices):
    PORTAL = "portal", "In the portal"
    EMAIL = "email", "Email"
    WEBHOOK = "webhook", "Webhook"


# Events that are not a person's choice (the settings page does not list them).
NOT_CHOSEN = frozenset(
    {Event.WEBHOOK_DISABLED, Event.SESSION_OPENED_BY_OTHER, Event.SESSION_SHARED}
)


# The defaults: failures and ends of long work on, the rest off (both channels).
DEFAULT_ON = frozenset(
    {
        Event.JOB_FAILED,
        Event.JOB_TIMEOUT,
        Event.JOB_CANCELLED,
        Event.JOB_COMPLETED,
        Event.EXPERIMENT_FINISHED,
        Event.TRANSFER_DONE,
        Event.TRANSFER_FAILED,
    }
)


# On in the portal only by default (email if the person chooses it).
DEFAULT_IN_PORTAL = frozenset({Event.GPU_IDLE})


def default(event: str, channel: str) -> bool:
    # A webhook is opt-in: it does nothing until the person sets one up and picks events.
    if channel == Channel.WEBHOOK:
        return False
    return event in DEFAULT_ON or (event in DEFAULT_IN_PORTAL and channel == Channel.PORTAL)


def one_line(text: str, limit: int) -> str:
    """User or cluster text as one plain line of at most ``limit`` characters."""
    line = " ".join(plain_line(text.replace("\n", " ")).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def bounded_tail(stderr: str) -> str:
    return error_tail(stderr, max_lines=DETAIL_LINES, max_chars=DETAIL_MAX)


def duration(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min"
    return f"{hours // 24} days {hours % 24} h"


@dataclass(frozen=True)
class Message:
    """What a notification says: ``text`` one sentence, ``detail`` plain lines (stderr)."""

    text: str
    detail: str = ""


def job_label(job) -> str:
    name = one_line(job.name, 80) if job.name else ""
    return f"job {job.pk} ({name})" if name else f"job {job.pk}"


def for_job(event: str, job, *, cancelled_by: str = "") -> Message:
    """The message for a job's ``event``; ``cancelled_by``: who, for JOB_CANCELLED."""
    label = job_label(job)
    where = job.cluster.name
    if event == Event.JOB_FAILED:
        why = one_line(job.message, 200) if job.message else "it failed"
        return Message(
            one_line(
                f"Your {label} failed on {where}: {why} Read the end of its error output "
                "below, fix the cause and launch it again.",
                TEXT_MAX,
            ),
            bounded_tail(job.stderr_tail),
        )
    if event == Event.JOB_TIMEOUT:
        return Message(
            one_line(
                f"Your {label} on {where} reached its time limit of "
                f"{job.time_limit_minutes} minutes and was stopped; launch it again with more "
                "time or from its last checkpoint.",
                TEXT_MAX,
            ),
            bounded_tail(job.stderr_tail),
        )
    if event == Event.JOB_CANCELLED:
        by = cancelled_by or "someone else"
        reason = f" ({one_line(job.cancel_reason, 200)})" if job.cancel_reason else ""
        return Message(
            one_line(
                f"Your {label} on {where} was cancelled by {by}{reason}; launch it again if "
                "you still need it.",
                TEXT_MAX,
            )
        )
    if event == Event.JOB_COMPLETED:
        ran = duration(job.elapsed) if job.elapsed else "a while"
        return Message(
            one_line(
                f"Your {label} completed on {where} after running {ran}; its results are in "
                "its work directory.",
                TEXT_MAX,
            )
        )
    if event == Event.JOB_STARTED:
        waited = (
            duration(job.started_at - job.submitted_at)
            if job.started_at and job.submitted_at
            else "a while"
        )
        return Message(
            one_line(
                f"Your {label} started on {where} after waiting {waited} in the queue; "
                "follow it on its page.",
                TEXT_MAX,
            )
        )
    if event == Event.SESSION_READY:
        return Message(
            one_line(
                f"Your {job.get_kind_display().lower()} ({label}) on {where} is ready; "
                "open it from its page.",
                TEXT_MAX,
            )
        )
    if event == Event.GPU_IDLE:
        partition = job.partition
        at = job.idle_cancel_at
        until = timezone.localtime(at).strftime("%Y-%m-%d %H:%M %Z") if at else "soon"
        return Message(
            one_line(
                f"Your {label} on {where} has held its GPUs idle (at or below "
                f"{partition.idle_percent:g}% for {partition.idle_minutes:g} minutes); the "
                f"idle-GPU policy of partition {partition.name} will cancel it at {until} "
                "unless they are used; press Keep it on its page if you still need it.",
                TEXT_MAX,
            )
        )
    if event == Event.WALLTIME_ENDING:
        remaining = job.remaining
        left = duration(remaining) if remaining is not None else "minutes"
        at = (
            timezone.localtime(timezone.now() + remaining).strftime("%H:%M %Z")
            if remaining is not None
            else "soon"
        )
        then = (
            "it checkpoints and requeues itself"
            if job.resumable
            else "save your work now: the scheduler stops it then"
        )
        return Message(
            one_line(
                f"Your {label} on {where} reaches its time limit in {left} (at {at}); {then}.",
                TEXT_MAX,
            )
        )
    if event == Event.JOB_HELD:
        why = f" ({one_line(job.pending_reason, 160)})" if job.pending_reason else ""
        return Message(
            one_line(
                f"Your {label} on {where} is held by the scheduler{why} and will not start "
                "until it is released; release it from its page once the cause is fixed, or "
                "cancel it.",
                TEXT_MAX,
            )
        )
    if event == Event.JOB_REQUEUED:
        return Message(
            one_line(
                f"Your {label} on {where} was requeued (run {job.attempt + 1}) and will start "
                "again when the scheduler runs it; nothing to do unless it keeps happening.",
                TEXT_MAX,
            )
        )
    raise ValueError(f"not a job event: {event}")


def session_opened_by(job, opener) -> Message:
    """SESSION_OPENED_BY_OTHER: who opened the owner's session (a shell as the owner)."""
    who = one_line(opener.get_username(), 150)
    return Message(
        one_line(
            f"{who} opened your {job.get_kind_display().lower()} ({job_label(job)}) on "
            f"{job.cluster.name}, with a permission the portal's administrators grant; it is "
            "in the audit log. Ask them if you did not expect it, or revoke the session on "
            "its page.",
            TEXT_MAX,
        )
    )


def session_shared(job, by, acts_as_owner: bool) -> Message:
    """SESSION_SHARED: a colleague's session the person may now open."""
    who = one_line(by.get_username(), 150)
    kind = job.get_kind_display().lower()
    how = (
        " Whatever you do in it is done as them on the cluster."
        if acts_as_owner
        else " It shows their runs; nothing in it changes them."
    )
    return Message(
        one_line(
            f"{who} shared their {kind} ({job_label(job)}) on {job.cluster.name} with you; "
            f"open it from this notice while it runs.{how}",
            TEXT_MAX,
        )
    )


def for_experiment(experiment, best=None) -> Message:
    """EXPERIMENT_FINISHED: its end and its best trial (``best``: a Trial or None)."""
    name = one_line(experiment.name, 80) if experiment.name else ""
    label = f"experiment {experiment.pk} ({name})" if name else f"experiment {experiment.pk}"
    done = experiment.trials.count()
    if best is not None and best.value is not None:
        params = ", ".join(f"{k}={v}" for k, v in sorted(best.params.items()))
        outcome = (
            f"the best of its {done} trials is trial {best.number} with "
            f"{one_line(experiment.metric, 60)} = {best.value:.6g} ({one_line(params, 120)})"
        )
    else:
        outcome = f"none of its {done} trials has a score"
    state = experiment.get_state_display().lower()
    return Message(
        one_line(f"Your {label} has {state}: {outcome}; compare its trials on its page.", TEXT_MAX)
    )
