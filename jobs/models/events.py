"""A job's events: its timeline, and the outbox of what must follow each change.

A transition writes its JobEvent in the same transaction as the new state, with ``due``:
the consequences that must happen once because of it (a notification, reading the stderr
tail, the final metrics tail, accounting's runs, the experiment's next step). They are
decided here, from the job as it now is, and delivered by jobs.outbox from the row:
whatever happens to the broker or the worker after the commit, the row remembers.
Healthchecks keeps its state changes the same way (``Flip``, swept for alerts)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from common.choices import FINAL_STATES
from common.choices import State as JobState

# The consumers a change can owe something to (jobs.outbox delivers each; see its CONSUMERS).
NOTIFY = "notify"  # "notify:<notification event>", e.g. "notify:job_failed"
STDERR = "stderr"  # keep the end of a failed job's stderr
METRICS = "metrics"  # read the job's metrics files to their end
ATTEMPTS = "attempts"  # each run's resources, from accounting
EXPERIMENT = "experiment"  # step the trial's experiment now
WITHDRAW = "withdraw"  # cancel by name what a submission never heard back from started

# A job announced as started only when its start is this recent (a late first sync of a
# job that started long ago says nothing new).
STARTED_RECENTLY = timedelta(minutes=10)

ENDINGS: dict[str, str] = {
    JobState.FAILED: "job_failed",
    JobState.SUBMIT_FAILED: "job_failed",
    JobState.TIMEOUT: "job_timeout",
    JobState.CANCELLED: "job_cancelled",
    JobState.COMPLETED: "job_completed",
}


def due_after(job, from_state: str, attempt_before: int, held_before: bool) -> list[str]:
    """What must happen because ``job`` (its fields already as they are now) moved from
    ``from_state`` (its attempt ``attempt_before``, held ``held_before``). Pure: reads only
    the job in hand."""
    due: list[str] = []
    state = job.state
    submitted = bool(job.scheduler_job_id)
    ended = state in FINAL_STATES and from_state not in FINAL_STATES
    rerun = job.attempt != attempt_before
    told = job.trial_id is None  # a trial is told as part of its experiment
    if ended and told and state in ENDINGS:
        due.append(f"{NOTIFY}:{ENDINGS[state]}")
    if told and job.held and not held_before and state == JobState.PENDING:
        due.append(f"{NOTIFY}:job_held")
    if told and rerun and job.attempt > 0 and state in (JobState.PENDING, JobState.RUNNING):
        due.append(f"{NOTIFY}:job_requeued")
    if told and state == JobState.RUNNING and from_state != state and _waited_long(job):
        due.append(f"{NOTIFY}:job_started")
    if ended and submitted:
        due.append(METRICS)
        if state in (JobState.FAILED, JobState.TIMEOUT):
            due.append(STDERR)
    if submitted and (ended or rerun):
        due.append(ATTEMPTS)
    if ended and job.trial_id is not None:
        due.append(EXPERIMENT)
    if ended and not submitted and job.submission_sent:
        due.append(WITHDRAW)
    return due


def _waited_long(job) -> bool:
    if not (job.started_at and job.submitted_at):
        return False
    waited = job.started_at - job.submitted_at
    if waited < timedelta(minutes=settings.PORTAL_NOTIFY_STARTED_AFTER_MINUTES):
        return False
    return timezone.now() - job.started_at <= STARTED_RECENTLY


class JobEvent(models.Model):
    """One row per state change (and per note): the job's audit trail and timeline, and
    the outbox of what the change still owes (``due``, delivered by jobs.outbox)."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(default=timezone.now)
    from_state = models.CharField(max_length=16, blank=True)
    to_state = models.CharField(max_length=16, choices=JobState.choices)
    message = models.TextField(blank=True)
    # What this change still owes, by consumer (see due_after); each consumer's task takes
    # its entry out when it has run. Empty: nothing left.
    due = models.JSONField(default=list, blank=True)
    # When the outbox last handed ``due`` to the task queue (None: not yet, or that failed).
    # Handed again by the sweep after PORTAL_OUTBOX_LEASE: a message the broker lost
    # (restarted empty) or a worker that died with it.
    sent_at = models.DateTimeField(null=True, blank=True)
    # When ``due`` became empty (at creation when nothing was due).
    settled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["at", "id"]
        indexes = [
            # The sweep reads only what is unsettled: a handful of rows among millions.
            models.Index(
                fields=["id"], name="jobevent_unsettled", condition=Q(settled_at__isnull=True)
            )
        ]

    def __str__(self) -> str:
        return f"{self.job_id}: {self.from_state or '-'} → {self.to_state}"

    @classmethod
    def record(cls, job, from_state: str, message: str, due: list[str]) -> JobEvent:
        """Write the event (inside the caller's transaction), settled when nothing is due."""
        now = timezone.now()
        return cls.objects.create(
            job=job,
            at=now,
            from_state=from_state,
            to_state=job.state,
            message=message,
            due=due,
            settled_at=None if due else now,
        )
