"""The run: where a job stands on its scheduler, and the state machine that moves it.

JobRun is a part of Job: its state and what the scheduler last said (reason, queue place,
node, attempt, hold), its timestamps, the submit claim that keeps two workers from
submitting it twice, and the one way its state changes (transition(), each change a
JobEvent with what it owes: jobs/models/events.py). The adapters' neutral Status
(schedulers/seam.py) comes in through apply_scheduler_status().
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import models, transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from common import choices
from common.hostlist import expand_hostlist
from common.text import error_tail
from jobs import signals
from jobs.models import events
from jobs.models.events import JobEvent
from schedulers.seam import REASON_MAX_LENGTH, Status

log = logging.getLogger(__name__)


def claim_submit(row, rows: models.QuerySet) -> bool:
    """Set ``submit_claimed_at`` on ``rows`` (``row`` alone, while submittable) unless a live
    claim holds it: one conditional UPDATE, so two workers cannot both pass. A claim older
    than the task time limit was made by a worker that is gone and is taken over."""
    now = timezone.now()
    stale = JobRun.submit_claim_stale_before()
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


class JobRun(models.Model):
    """A part of Job: its run on the scheduler and the changes of its state."""

    State = choices.State
    ACTIVE_STATES = choices.ACTIVE_STATES
    FINAL_STATES = choices.FINAL_STATES

    state = models.CharField(
        max_length=16, choices=State.choices, default=State.QUEUED, db_index=True
    )
    scheduler_job_id = models.CharField(max_length=32, blank=True, db_index=True)
    pending_reason = models.CharField(max_length=REASON_MAX_LENGTH, blank=True)
    # While pending: the scheduler holds it until released (its adapter says so: Status.held).
    held = models.BooleanField(default=False)
    # While pending: place in the partition's queue (1 = next) and the scheduler's estimated
    # start.
    queue_position = models.PositiveIntegerField(null=True, blank=True)
    estimated_start = models.DateTimeField(null=True, blank=True)
    # The node, or the scheduler's compressed list of a multi-node job's nodes
    # ("node[001-064]").
    node = models.CharField(max_length=4000, blank=True)
    # ``node`` as the cluster's service account read it (ClusterAccount.reader_for): a read
    # the owner's login cannot forge. False when it came through the owner's own login,
    # whose environment can print any host: then only the session's registration call,
    # arriving from that node's address, may point the proxy there (proxy/views.py).
    node_vouched = models.BooleanField(default=False, db_default=False)
    exit_code = models.IntegerField(null=True, blank=True)
    message = models.TextField(blank=True, help_text="The scheduler's or the portal's explanation.")
    work_dir = models.CharField(max_length=500, blank=True)
    script = models.TextField(blank=True, help_text="The job script as submitted.")
    # A failed job's last lines of stderr (plain text, bounded), read once when it ends.
    stderr_tail = models.TextField(blank=True, editable=False)
    # Why the portal cancelled it (an experiment's early stopping), kept as its final message.
    cancel_reason = models.CharField(max_length=500, blank=True)
    # The scheduler's restart count: a requeued job runs again as attempt 1, 2, ...
    attempt = models.PositiveIntegerField(default=0)
    # Since when the scheduler has not reported this job (under its name); None while it does.
    scheduler_unseen_since = models.DateTimeField(null=True, blank=True, editable=False)
    # Set by the worker that is submitting (closes the two-workers race).
    submit_claimed_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Submissions begun that no task finished (each claim counts; a task retrying by itself
    # hands its try back): recovery gives up at PORTAL_SUBMIT_MAX_TRIES (jobs/tasks.py).
    submit_tries = models.PositiveSmallIntegerField(default=0, editable=False)
    # Set just before a try sends the submission to the cluster, never cleared: from then
    # on the job may exist there under its name even while the portal still has it queued
    # (a try that timed out after sbatch ran), so a cancel must reach the cluster too.
    submit_sent_at = models.DateTimeField(null=True, blank=True, editable=False)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    if TYPE_CHECKING:
        # What the run reads of the rest of the Job: its request's time limit and attempts
        # (jobs/models/request.py), its name on the scheduler and is_final (job.py).
        resumable: bool
        max_attempts: int
        time_limit_minutes: int
        array_id: int | None
        array: Any

        @property
        def scheduler_name(self) -> str: ...

        @property
        def is_final(self) -> bool: ...

    class Meta:
        abstract = True

    def _row(self) -> models.QuerySet:
        """This job's row, for the conditional UPDATEs below."""
        return type(self)._default_manager.filter(pk=self.pk)

    @property
    def node_list(self) -> list[str]:
        """The nodes the scheduler placed the job on, one name each."""
        return expand_hostlist(self.node)

    def transition(
        self,
        to: str,
        *,
        expect: tuple[str, ...] | None = None,
        where: Q | None = None,
        message: str = "",
        **fields,
    ) -> bool:
        """Move to state ``to`` and record a JobEvent, if the job is still in ``expect``
        (and its row matches ``where``).

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
            rows = self._row() if where is None else self._row().filter(where)
            row = rows.select_for_update().values_list("state", "attempt", "held").first()
            if row is None or row[0] not in expect:
                return False
            current, attempt_before, held_before = row
            self._row().update(**values)
            for key, value in values.items():
                setattr(self, key, value)
            self._record_event(current, message, attempt_before, held_before)
        log.info("job %s: %s -> %s", self.pk, current, to)
        return True

    def _record_event(
        self, from_state: str, message: str, attempt_before: int, held_before: bool
    ) -> JobEvent:
        """The change's JobEvent, with what it owes (jobs/models/events.py), in the
        caller's transaction; pages hear of it and the outbox delivers it on commit."""
        due = events.due_after(self, from_state, attempt_before, held_before)
        event = JobEvent.record(self, from_state, message, due)
        signals.updated_on_commit(self)
        signals.event_recorded.send(sender=JobEvent, event=event)
        return event

    def note(self, message: str, *, publish: bool = True, tell: str = "") -> bool:
        """A line in the job's timeline without a change of state (something the portal
        refused for it, a session ready, GPUs idle), once: not again while the timeline
        says it already. ``tell``: the notification event it owes its owner, delivered
        by the outbox like a change's (durable: a broker outage delays it, never loses
        it). ``publish`` False: pages see it on their next update (for callers that hold
        the routes lock, which a publish would wait for: it pushes the job's route)."""
        if JobEvent.objects.filter(job_id=self.pk, message=message).exists():
            return False
        due = [f"{events.NOTIFY}:{tell}"] if tell else []
        event = JobEvent.record(self, self.state, message, due=due)
        signals.event_recorded.send(sender=JobEvent, event=event)
        if publish:
            signals.updated_on_commit(self)
        return True

    def record_error_tail(self, stderr: str) -> None:
        """Keep the last lines of a failed job's stderr (as plain, bounded text)."""
        tail = error_tail(stderr)
        if tail != self.stderr_tail:
            self._row().update(stderr_tail=tail)
            self.stderr_tail = tail
            signals.updated_on_commit(self)

    def update_details(self, **fields) -> bool:
        """Change fields that are not the state (pending reason, node); publish if any changed."""
        changed = {k: v for k, v in fields.items() if getattr(self, k) != v}
        if not changed:
            return False
        changed["updated_at"] = timezone.now()
        # Only while the state is what this copy saw: a concurrent transition wins.
        if not self._row().filter(state=self.state).update(**changed):
            return False
        for key, value in changed.items():
            setattr(self, key, value)
        signals.updated_on_commit(self)
        return True

    # -- submission ----------------------------------------------------------
    def _nothing_sent(self) -> Q:
        """This job's row while no submission that carries it has been sent. A member's
        array row is locked for the caller's transaction first (JobArray.mark_submit_sent
        waits for it), and stays locked to its end."""
        if not self.array_id:
            return Q(submit_sent_at__isnull=True)
        arrays = self._meta.get_field("array").related_model._default_manager  # type: ignore[union-attr]
        sent = arrays.select_for_update().filter(pk=self.array_id, submit_sent_at__isnull=False)
        return Q(pk__in=[]) if sent.exists() else Q()

    @property
    def submission_sent(self) -> bool:
        """Whether a submission that carries this job (its own, or its array's) was sent:
        it may run on the cluster though the portal never learnt its id."""
        if self.array_id:
            return self.array.submit_sent_at is not None
        return self.submit_sent_at is not None

    def _refresh_sent(self) -> None:
        """Read the (never cleared) sent mark again, the array's for a member."""
        if self.array_id:
            self.array.refresh_from_db(fields=["submit_sent_at"])
        else:
            self.refresh_from_db(fields=["submit_sent_at"])

    def mark_submit_sent(self) -> bool:
        """Record that this try sends the submission now; False (send nothing) if the job
        is no longer queued. The row lock of request_cancel and this UPDATE order the two:
        a job is either cancelled before anything was sent, or its cancel knows that the
        cluster may have it."""
        now = timezone.now()
        if not self._row().filter(state=self.State.QUEUED).update(submit_sent_at=now):
            return False
        self.submit_sent_at = now
        return True

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
        return claim_submit(self, self._row().filter(state=self.State.QUEUED))

    def release_submit_claim(self) -> None:
        release_submit_claim(self, self._row())

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
        """The scheduler did not report this job: no record under its id and its name
        (schedulers/seam.py JobKey). After ``grace`` seconds of that, the job has ended as far as
        anyone can tell: it fails with a message saying so. A record of another job that
        holds its id now (a scheduler that lost its state reissues ids) is not its outcome."""
        now = timezone.now()
        if self.scheduler_unseen_since is None:
            self._row().filter(scheduler_unseen_since__isnull=True).update(
                scheduler_unseen_since=now
            )
            self.scheduler_unseen_since = now
            return False
        unseen = (now - self.scheduler_unseen_since).total_seconds()
        if unseen < grace:
            return False
        how_long = f"{int(unseen // 60)} minutes" if unseen >= 120 else f"{int(unseen)} seconds"
        return self.transition(
            self.State.FAILED,
            expect=(self.state,),
            message="The scheduler no longer knows this job: neither the controller nor "
            f"accounting has reported its id {self.scheduler_job_id} under its name "
            f"{self.scheduler_name} for {how_long}. (A scheduler that lost its state may "
            "have given the id to another job since; that job's record is not this one's.) "
            "Its outcome is unknown; its files are still in its work directory.",
        )

    def apply_scheduler_status(self, status: Status, *, vouched: bool = False) -> bool:
        """Record what the scheduler says (neutral values from its adapter, schedulers/seam.py).
        ``vouched``: read by the cluster's service account, not the owner's login (the
        node is then believed as it is: ``node_vouched``). True if anything changed."""
        if self.scheduler_unseen_since is not None:
            self._row().update(scheduler_unseen_since=None)
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
                    pending_reason=reason,
                    held=held,
                    node=node,
                    node_vouched=vouched and bool(node),
                    attempt=attempt,
                    **queue,
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
        fields: dict[str, Any] = {
            "pending_reason": reason,
            "held": held,
            "node": node or (self.node if not pending else ""),
            "node_vouched": (vouched if node else self.node_vouched and not pending),
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
        """Cancel now if the job never reached the scheduler; otherwise mark the request.
        ``reason`` (why the portal stops it) becomes its final message.

        Returns True when a worker must still cancel it on the scheduler.

        A queued job ends at once. If a submission carrying it was sent (a try that
        timed out after sbatch may have run), its event owes a withdrawal by name
        (events.WITHDRAW), and a try still in flight cancels what it submitted.
        """
        if self.state == self.State.QUEUED:
            with transaction.atomic():
                if self.transition(
                    self.State.CANCELLED,
                    expect=(self.State.QUEUED,),
                    where=self._nothing_sent(),
                    message=reason or "Cancelled before it reached the scheduler.",
                ):
                    return False
        if self.state == self.State.QUEUED:
            self._refresh_sent()
            if self.transition(
                self.State.CANCELLED,
                expect=(self.State.QUEUED,),
                message=reason
                or "Cancelled while it was being submitted; whatever the submission "
                "started on the cluster is cancelled too.",
            ):
                return False
        self.refresh_from_db()
        if self.is_final:
            return False
        self.cancel_requested_at = timezone.now()
        self.cancel_reason = reason[:500] or self.cancel_reason
        self._row().update(
            cancel_requested_at=self.cancel_requested_at, cancel_reason=self.cancel_reason
        )
        # Pages show the request, and a notebook's link closes now, not when the scheduler
        # ends it.
        signals.updated_on_commit(self)
        return True
