"""A job: what was asked, where it stands on the scheduler, and its audit trail."""

from __future__ import annotations

import re
import secrets
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from jobs import outbox, signals
from jobs.access import sees_every_job
from jobs.hostlist import expand_hostlist
from jobs.models import choices, events
from jobs.models.annotations import JobAnnotations
from jobs.models.events import JobEvent
from jobs.models.request import JobRequest
from jobs.seam import REASON_MAX_LENGTH, Status
from jobs.text import error_tail


def new_job_uid() -> str:
    return secrets.token_hex(5)


def claim_submit(row, rows: models.QuerySet) -> bool:
    """Set ``submit_claimed_at`` on ``rows`` (``row`` alone, while submittable) unless a live
    claim holds it: one conditional UPDATE, so two workers cannot both pass. A claim older
    than the task time limit was made by a worker that is gone and is taken over."""
    now = timezone.now()
    stale = Job.submit_claim_stale_before()
    # Each claim is a try (``submit_tries``); a task that hands it back for a retry of its
    # own (release_submit_claim) takes the try back: what stays counts the tries no task
    # finished, which the recovery sweep gives up after (PORTAL_SUBMIT_MAX_TRIES).
    taken = rows.filter(Q(submit_claimed_at__isnull=True) | Q(submit_claimed_at__lt=stale)).update(
        submit_claimed_at=now, submit_tries=F("submit_tries") + 1
    )
    if taken:
        row.submit_claimed_at = now
        row.submit_tries += 1
    return bool(taken)


def release_submit_claim(row, rows: models.QuerySet) -> None:
    """Hand ``row``'s claim back (its task retries by itself), and the try with it."""
    rows.filter(submit_claimed_at=row.submit_claimed_at).update(
        submit_claimed_at=None, submit_tries=Greatest(F("submit_tries") - 1, Value(0))
    )
    row.submit_claimed_at = None
    row.submit_tries = max(0, row.submit_tries - 1)


def gave_up_message(tries: int) -> str:
    return (
        f"The portal took this job up for submission {tries} times and no try finished "
        "(each ran out of time or lost its worker), so it stopped trying. Submit it again; "
        "if it happens again, ask an administrator to look at the cluster and your "
        "account's login environment (~/.bashrc)."
    )


class JobQuerySet(models.QuerySet):
    def for_user(self, user) -> JobQuerySet:
        """Jobs a user may see (jobs/access.py): their own, or every job for staff."""
        return self if sees_every_job(user) else self.filter(owner=user)

    def active(self) -> JobQuerySet:
        return self.filter(state__in=Job.ACTIVE_STATES)


class Job(JobRequest, JobAnnotations):
    State = choices.State
    ACTIVE_STATES = choices.ACTIVE_STATES
    FINAL_STATES = choices.FINAL_STATES

    # Random part of the job's name on the cluster and of its work directory:
    # database ids repeat across installs and resets, these do not.
    uid = models.CharField(max_length=16, unique=True, default=new_job_uid, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="jobs"
    )
    cluster = models.ForeignKey("Cluster", on_delete=models.PROTECT, related_name="jobs")
    partition = models.ForeignKey("Partition", on_delete=models.PROTECT, related_name="jobs")
    image = models.ForeignKey("ContainerImage", on_delete=models.PROTECT, related_name="jobs")
    # What reproduces the run (jobs/cluster/provenance.py), read on the cluster at submit:
    # {"image": {...}, "git": {...}} or {"error": "..."}; shown as the page's Reproduce block.
    reproduce = models.JSONField(default=dict, blank=True, editable=False)
    git_diff = models.TextField(blank=True, editable=False)

    cluster_account = models.ForeignKey(
        "ClusterAccount",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="jobs",
        help_text="The cluster login the job was submitted with.",
    )
    state = models.CharField(
        max_length=16, choices=State.choices, default=State.QUEUED, db_index=True
    )
    scheduler_job_id = models.CharField(max_length=32, blank=True, db_index=True)
    pending_reason = models.CharField(max_length=REASON_MAX_LENGTH, blank=True)
    # While pending: the scheduler holds it until released (its adapter says so: Status.held).
    held = models.BooleanField(default=False)
    # While pending: place in the partition's queue (1 = next) and Slurm's estimated start.
    queue_position = models.PositiveIntegerField(null=True, blank=True)
    estimated_start = models.DateTimeField(null=True, blank=True)
    # The node, or Slurm's compressed list of a multi-node job's nodes ("node[001-064]").
    node = models.CharField(max_length=4000, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    message = models.TextField(blank=True, help_text="The scheduler's or the portal's explanation.")
    work_dir = models.CharField(max_length=500, blank=True)
    script = models.TextField(blank=True, help_text="The job script as submitted.")
    # A failed job's last lines of stderr (plain text, bounded), read once when it ends.
    stderr_tail = models.TextField(blank=True, editable=False)
    # The job's own metrics upload token (hash only): valid for this job while it is active.
    metrics_token_hash = models.CharField(max_length=64, blank=True, editable=False)

    # A member of a job array (jobs/models/arrays.py): the scheduler knows it as
    # "<array id>_<array_index>" under the array's name.
    array = models.ForeignKey(
        "JobArray", on_delete=models.PROTECT, null=True, blank=True, related_name="jobs"
    )
    array_index = models.PositiveIntegerField(null=True, blank=True)
    # A run of an experiment's trial (jobs/experiments/): one job per cross-validation fold.
    trial = models.ForeignKey(
        "experiments.Trial",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="jobs",
    )
    fold = models.PositiveSmallIntegerField(null=True, blank=True)
    # Why the portal cancelled it (an experiment's early stopping), kept as its final message.
    cancel_reason = models.CharField(max_length=500, blank=True)
    # The idle-GPU policy (jobs/idle_policy.py): when it warned, when it will (or, in a dry
    # run, would) cancel, and the owner's one "Keep it".
    idle_warned_at = models.DateTimeField(null=True, blank=True, editable=False)
    idle_cancel_at = models.DateTimeField(null=True, blank=True, editable=False)
    idle_kept_at = models.DateTimeField(null=True, blank=True, editable=False)
    idle_kept_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        editable=False,
        related_name="+",
    )

    # Slurm's restart count: a requeued job runs again as attempt 1, 2, ...
    attempt = models.PositiveIntegerField(default=0)
    # Bytes of metric records received (uploads and files), for the per-job quota.
    metrics_bytes = models.BigIntegerField(default=0, editable=False)
    # Since when the scheduler has not reported this job (under its name); None while it does.
    scheduler_unseen_since = models.DateTimeField(null=True, blank=True, editable=False)
    # Set by the worker that is submitting (closes the two-workers race).
    submit_claimed_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Submissions begun that no task finished (each claim counts; a task retrying by itself
    # hands its try back): recovery gives up at PORTAL_SUBMIT_MAX_TRIES (jobs/tasks.py).
    submit_tries = models.PositiveSmallIntegerField(default=0, editable=False)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["cluster", "state"]),
            models.Index(fields=["owner", "-created_at"]),
        ]

    def __str__(self) -> str:
        return f"job {self.pk} ({self.get_kind_display()}, {self.state})"

    @property
    def scheduler_name(self) -> str:
        """The job's name on its scheduler; submit looks jobs up by it, so it is unique per
        portal job (an array's members share the array's)."""
        if self.array is not None:
            return self.array.scheduler_name
        return f"portal-{self.pk}-{self.uid}"

    @property
    def submitted_script(self) -> str:
        """The script the scheduler runs for this job (an array member's is the array's)."""
        if self.array is not None and not self.script:
            return self.array.script
        return self.script

    @property
    def is_held(self) -> bool:
        """Pending and held (by the user, an administrator, or the scheduler after a failed
        launch): it waits until released."""
        return self.state == self.State.PENDING and self.held

    @property
    def is_active(self) -> bool:
        return self.state in self.ACTIVE_STATES

    @property
    def has_session(self) -> bool:
        """Opens through a session link (a notebook, TensorBoard)."""
        return self.kind in self.SESSION_KINDS

    @property
    def is_final(self) -> bool:
        return self.state in self.FINAL_STATES

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1 or self.launcher != self.Launcher.NONE

    def clean(self) -> None:
        """The request must fit the partition and the image (messages name the limit), and
        the parameters their bounds."""
        errors = {**self.request_errors(), **self.annotation_errors()}
        if errors:
            raise ValidationError(errors)

    def _job_of_folder(self, folder: re.Match) -> Job | None:
        """The owner's job whose work directory ``folder`` (validators.JOB_FOLDER) is in:
        the job itself, or for a job array's folder the member of the index that follows
        (any member for the whole array's)."""
        if not folder["array"]:
            return Job.objects.filter(
                owner_id=self.owner_id, pk=folder["id"], uid=folder["uid"]
            ).first()
        members = Job.objects.filter(
            owner_id=self.owner_id, array_id=folder["id"], array__uid=folder["uid"]
        ).order_by("array_index")
        index = self.notebook_dir[folder.end() :].split("/")[0]
        if re.fullmatch(r"[0-9]+", index):  # a member's folder (no index has 10 digits)
            return members.filter(array_index=int(index)).first() if len(index) < 10 else None
        return members.first()

    @property
    def node_list(self) -> list[str]:
        """The nodes the scheduler placed the job on, one name each."""
        return expand_hostlist(self.node)

    def transition(
        self, to: str, *, expect: tuple[str, ...] | None = None, message: str = "", **fields
    ) -> bool:
        """Move to state ``to`` and record a JobEvent, if the job is still in ``expect``.

        Returns False (and changes nothing) when another worker moved the job
        first. The conditional UPDATE closes the race between two workers (or a
        sync and a cancel) writing different states for the same job.
        """
        if expect is None:
            expect = tuple(s for s in self.State if s not in self.FINAL_STATES)
        now = timezone.now()
        values = {"state": to, "updated_at": now, **fields}
        if message:
            values["message"] = message
        if to in self.FINAL_STATES and "ended_at" not in values:
            values["ended_at"] = now
        if to == self.State.RUNNING and "started_at" not in values and not self.started_at:
            values["started_at"] = now
        with transaction.atomic():
            # Row lock (PostgreSQL) / immediate write lock (SQLite): two workers
            # cannot both see the old state and both write a new one.
            row = (
                Job.objects.select_for_update()
                .filter(pk=self.pk)
                .values_list("state", "attempt", "held")
                .first()
            )
            if row is None or row[0] not in expect:
                return False
            current, attempt_before, held_before = row
            Job.objects.filter(pk=self.pk).update(**values)
            for key, value in values.items():
                setattr(self, key, value)
            self._record_event(current, message, attempt_before, held_before)
        return True

    def _record_event(
        self, from_state: str, message: str, attempt_before: int, held_before: bool
    ) -> JobEvent:
        """The change's JobEvent, with what it owes (jobs/models/events.py), in the
        caller's transaction; pages hear of it and the outbox delivers it on commit."""
        due = events.due_after(self, from_state, attempt_before, held_before)
        event = JobEvent.record(self, from_state, message, due)
        signals.updated_on_commit(self)
        outbox.send_on_commit(event)
        return event

    def note(self, message: str, *, publish: bool = True) -> bool:
        """A line in the job's timeline without a change of state (something the portal
        refused for it), once: not again while the timeline says it already. ``publish``
        False: pages see it on their next update (for callers that hold the routes lock,
        which a publish would wait for: it pushes the job's route)."""
        if JobEvent.objects.filter(job=self, message=message).exists():
            return False
        JobEvent.record(self, self.state, message, due=[])
        if publish:
            signals.updated_on_commit(self)
        return True

    @property
    def ended_badly(self) -> bool:
        """Failed or timed out on the cluster: its stderr likely says why."""
        return self.state in (self.State.FAILED, self.State.TIMEOUT)

    def record_error_tail(self, stderr: str) -> None:
        """Keep the last lines of a failed job's stderr (as plain, bounded text)."""
        tail = error_tail(stderr)
        if tail != self.stderr_tail:
            Job.objects.filter(pk=self.pk).update(stderr_tail=tail)
            self.stderr_tail = tail
            signals.updated_on_commit(self)

    def update_details(self, **fields) -> bool:
        """Change fields that are not the state (pending reason, node); publish if any changed."""
        changed = {k: v for k, v in fields.items() if getattr(self, k) != v}
        if not changed:
            return False
        changed["updated_at"] = timezone.now()
        # Only while the state is what this copy saw: a concurrent transition wins.
        if not Job.objects.filter(pk=self.pk, state=self.state).update(**changed):
            return False
        for key, value in changed.items():
            setattr(self, key, value)
        signals.updated_on_commit(self)
        return True

    # -- submission ----------------------------------------------------------
    @staticmethod
    def submit_claim_stale_before():
        """Claims older than this were made by a worker that is gone: no submit task runs
        longer than PORTAL_TASK_TIME_LIMIT (Celery kills it)."""
        return timezone.now() - timedelta(seconds=settings.PORTAL_TASK_TIME_LIMIT + 10)

    def claim_submit(self) -> bool:
        """Take the right to submit this queued job; False if another worker holds it.

        A conditional UPDATE, so two workers running the same submit task cannot both
        pass. A claim older than the task time limit (its worker died) can be taken
        over; the remote submit step then adopts a job the dead worker already
        submitted instead of submitting again.
        """
        return claim_submit(self, Job.objects.filter(pk=self.pk, state=self.State.QUEUED))

    def release_submit_claim(self) -> None:
        release_submit_claim(self, Job.objects.filter(pk=self.pk))

    def give_up_submit(self) -> bool:
        """End this queued job submit_failed: too many tries took it up and never finished
        (the recovery sweep's last word). False if it had moved on meanwhile."""
        return self.transition(
            self.State.SUBMIT_FAILED,
            expect=(self.State.QUEUED,),
            message=gave_up_message(self.submit_tries),
        )

    def submit_timed_out(self, seconds: float, doing: str) -> bool:
        """End this queued job submit_failed because the cluster took longer than
        ``seconds`` at ``doing`` (a task's deadline or soft time limit)."""
        return self.transition(
            self.State.SUBMIT_FAILED,
            expect=(self.State.QUEUED,),
            message=f"The cluster took longer than {seconds:.0f} s to {doing}, so the "
            "portal stopped waiting. Submit it again; if it happens again, something "
            "on the cluster or in your account's login environment (~/.bashrc) is "
            "holding commands up.",
        )

    # -- scheduler status ----------------------------------------------------------
    def restarted_since(self, state: str, node: str, attempt: int) -> bool:
        """Whether the job runs anew compared with (state, node, attempt) seen before:
        requeued, back to pending after running, or on another node."""
        return (
            self.attempt != attempt
            or (
                state in (self.State.RUNNING, self.State.COMPLETING)
                and self.state == self.State.PENDING
            )
            or bool(node and self.node and node != self.node)
        )

    def mark_unseen(self, grace: float) -> bool:
        """The scheduler did not report this job. After ``grace`` seconds of that, the job
        has ended as far as anyone can tell: it fails with a message saying so."""
        now = timezone.now()
        if self.scheduler_unseen_since is None:
            Job.objects.filter(pk=self.pk, scheduler_unseen_since__isnull=True).update(
                scheduler_unseen_since=now
            )
            self.scheduler_unseen_since = now
            return False
        if (now - self.scheduler_unseen_since).total_seconds() < grace:
            return False
        return self.transition(
            self.State.FAILED,
            expect=(self.state,),
            message=f"The scheduler no longer knows this job (id {self.scheduler_job_id} "
            f"under the name {self.scheduler_name}): neither the controller nor accounting has "
            f"reported it for {int(grace // 60)} minutes. Its outcome is unknown; its files "
            "are still in its work directory.",
        )

    def apply_scheduler_status(self, status: Status) -> bool:
        """Record what the scheduler says (neutral values from its adapter, jobs/seam.py).
        True if anything changed."""
        if self.scheduler_unseen_since is not None:
            Job.objects.filter(pk=self.pk).update(scheduler_unseen_since=None)
            self.scheduler_unseen_since = None

        new_state = status.state
        pending = new_state == self.State.PENDING
        reason = status.reason[:REASON_MAX_LENGTH]
        node = status.node[:4000]
        attempt = self.attempt if status.attempt is None else status.attempt
        queue = {"queue_position": status.queue_position, "estimated_start": status.estimated_start}
        held = pending and status.held
        if new_state == self.state and attempt == self.attempt:
            held_before = self.held
            with transaction.atomic():
                changed = self.update_details(
                    pending_reason=reason, held=held, node=node, attempt=attempt, **queue
                )
                if changed and held and not held_before:
                    # A line in the timeline, and the owner is told (once per hold).
                    self._record_event(
                        self.state,
                        f"Held: {self.pending_reason or 'until released'}.",
                        attempt,
                        held_before,
                    )
            return changed
        # A new state, or a restart seen only afterwards (running again between two syncs):
        # either way a JobEvent, so the timeline shows every attempt.
        message = status.message
        fields = {
            "pending_reason": reason,
            "held": held,
            "node": node or (self.node if not pending else ""),
            "attempt": attempt,
            **queue,
        }
        if attempt != self.attempt and not message:
            message = f"Requeued by the scheduler: attempt {attempt + 1}."
            if self.resumable and self.max_attempts > 1:
                message = (
                    f"Requeued: attempt {attempt + 1} of {self.max_attempts} resumes from its "
                    "last checkpoint."
                )
        if new_state in self.FINAL_STATES:
            fields["exit_code"] = status.exit_code
            if new_state == self.State.FAILED and not message:
                if status.signal:
                    message = f"The job was killed by signal {status.signal}."
                elif status.exit_code is not None:
                    message = f"The job exited with status {status.exit_code}."
            elif new_state == self.State.TIMEOUT and not message:
                message = f"The job reached its time limit of {self.time_limit_minutes} minutes."
                if self.resumable and self.max_attempts > 1:
                    message += (
                        f" It was its last attempt ({self.max_attempts} of {self.max_attempts}); "
                        "its checkpoints are in its work directory."
                    )
            elif new_state == self.State.COMPLETED and not message and attempt:
                message = f"Completed on attempt {attempt + 1} (requeued {attempt} time(s))."
            elif new_state == self.State.CANCELLED and not message:
                message = self.cancel_reason or "Cancelled."
        if status.started and new_state in (
            self.State.RUNNING,
            self.State.COMPLETING,
            *self.FINAL_STATES,
        ):
            fields.setdefault("started_at", self.started_at or timezone.now())
        return self.transition(new_state, expect=(self.state,), message=message, **fields)

    @property
    def elapsed(self) -> timedelta | None:
        if not self.started_at:
            return None
        return (self.ended_at or timezone.now()) - self.started_at

    @property
    def remaining(self) -> timedelta | None:
        """Walltime left while running."""
        if self.state != self.State.RUNNING or not self.started_at:
            return None
        left = self.started_at + timedelta(minutes=self.time_limit_minutes) - timezone.now()
        return max(left, timedelta(0))

    # -- cancellation ------------------------------------------------------------
    def request_cancel(self, reason: str = "") -> bool:
        """Cancel now if the job never reached Slurm; otherwise mark the request.
        ``reason`` (why the portal stops it) becomes its final message.

        Returns True when a worker must still run scancel.
        """
        if self.state == self.State.QUEUED and self.transition(
            self.State.CANCELLED,
            expect=(self.State.QUEUED,),
            message=reason or "Cancelled before it reached the scheduler.",
        ):
            return False
        self.refresh_from_db()
        if self.is_final:
            return False
        self.cancel_requested_at = timezone.now()
        self.cancel_reason = reason[:500] or self.cancel_reason
        Job.objects.filter(pk=self.pk).update(
            cancel_requested_at=self.cancel_requested_at, cancel_reason=self.cancel_reason
        )
        # Pages show the request, and a notebook's link closes now, not when Slurm ends it.
        signals.updated_on_commit(self)
        return True
