"""Celery tasks: thin. They take ids, reload rows, return quietly if the job has
moved on, and call model, scheduler (schedulers.registry) and ``clusters`` code."""

from __future__ import annotations

import logging
import random
from datetime import timedelta

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import close_old_connections, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from clusters import deadline, files, pool, ssh, workdir
from clusters.models import Cluster, ClusterAccount
from common import choices
from identity import audit
from jobs import outbox, provenance, sessions, sync
from jobs.models import Job, JobArray
from jobs.models.events import ATTEMPTS, STDERR, WITHDRAW
from jobs.sync import sync_jobs
from jobs.task_helpers import (
    ArrayPersonTask,
    backoff,
    limits,
    person_limits,
    single_flight,
    soft_limit,
)
from schedulers import registry as schedulers

log = logging.getLogger(__name__)

SCHEDULED_STATES = choices.SCHEDULED_STATES


@shared_task(
    name="jobs.tasks.submit_job", bind=True, acks_late=True, max_retries=None, **person_limits()
)
def submit_job(self, job_id: int) -> None:
    job = (
        Job.objects.select_related("cluster", "partition", "image", "owner")
        .filter(pk=job_id)
        .first()
    )
    if job is None or job.state != Job.State.QUEUED:
        return
    if job.array_id:  # submitted with its array, never alone
        submit_array.delay(job.array_id)
        return
    if not job.claim_submit():
        return  # another worker is submitting it
    try:
        _submit_claimed(self, job)
    except SoftTimeLimitExceeded:
        # Never left queued for the recovery sweep to start over and over.
        job.submit_timed_out(soft_limit(self) or 0, "take the job")
        log.warning("submit of job %s reached its soft time limit", job_id)


def _submit_claimed(task, job: Job) -> None:
    job_id = job.pk
    account = ClusterAccount.for_user(job.cluster, job.owner)
    if account is None:
        job.transition(
            Job.State.SUBMIT_FAILED,
            expect=(Job.State.QUEUED,),
            message=f"You have no account on cluster {job.cluster.name} yet; "
            "add one on your account page or ask an administrator.",
        )
        return
    try:
        work_dir = workdir.job_work_dir(job, account.username)
        secret, register_url = "", ""
        if job.has_session:
            secret, register_url = sessions.links().prepare(job)
        metrics_token = job.issue_metrics_token()
        metrics_url = metrics_upload_url(job)
        scheduler = schedulers.for_cluster(job.cluster)
        script = scheduler.render(
            job.describe(),
            work_dir,
            register_url,
            metrics_url,
            settings.PORTAL_SYSTEM_METRICS_INTERVAL,
        )
        with audit.action(
            audit.Action.SUBMIT, user=job.owner, account=account, target=f"job {job.pk}"
        ) as entry:
            # Part of the submission: read as its owner, on the connection it opens.
            reproduce, git_diff = read_provenance(job, account, work_dir)
            if not job.mark_submit_sent():
                entry.note("not sent: the job was cancelled meanwhile")
                return
            submission = pool.with_connection(
                account,
                lambda conn: scheduler.submit(
                    conn, work_dir, job.scheduler_name, script, secret, metrics_token
                ),
            )
            entry.note(f"scheduler id {submission.scheduler_id}")
    except ProvenanceTimedOut as exc:
        # Nothing was submitted: a login environment that holds commands up would hold
        # every retry as long, so the job ends here.
        job.submit_timed_out(exc.seconds, "read what reproduces the job (its image and git state)")
        return
    except (ssh.ClusterError, workdir.ScriptError, ValueError) as exc:
        _submit_failed(task, exc, job, f"job {job_id}", [job])
        return
    moved = job.transition(
        Job.State.PENDING,
        expect=(Job.State.QUEUED,),
        message="Adopted the job an earlier attempt submitted." if submission.adopted else "",
        scheduler_job_id=submission.scheduler_id,
        submitted_at=timezone.now(),
        work_dir=work_dir,
        script=script,
        cluster_account=account,
        reproduce=reproduce,
        git_diff=git_diff,
    )
    if not moved:
        # Cancelled while we were submitting: do not leave an orphan running.
        job.refresh_from_db()
        if job.state == Job.State.CANCELLED:
            # Its id first: whatever becomes of the scancel (an answer lost to a restarting
            # sshd or slurmctld), the portal says which scheduler job it was.
            Job.objects.filter(pk=job.pk).update(scheduler_job_id=submission.scheduler_id)
            try:
                _cancel_submitted(job, account, submission.scheduler_id, job.scheduler_name)
            except ssh.ClusterError as exc:
                log.warning("scancel of job %s, cancelled while submitted: %s", job.pk, exc)
                cancel_submitted.apply_async((job.pk,), countdown=backoff(0))


@shared_task(
    name="jobs.tasks.cancel_submitted",
    bind=True,
    acks_late=True,
    max_retries=10,
    **person_limits(),
)
def cancel_submitted(self, job_id: int) -> None:
    """scancel, again, what a submission started for a job cancelled while it was being
    submitted, when the first scancel failed (scancel of an ended job is a no-op)."""
    job = Job.objects.select_related("cluster", "owner").filter(pk=job_id).first()
    if job is None or job.state != Job.State.CANCELLED or not job.scheduler_job_id:
        return
    account = ClusterAccount.for_user(job.cluster, job.owner)
    if account is None:
        return
    try:
        _cancel_submitted(job, account, job.scheduler_job_id, job.scheduler_name)
    except ssh.ClusterError as exc:
        raise self.retry(exc=exc, countdown=backoff(self.request.retries)) from None


def _cancel_submitted(job: Job, account, scheduler_id: str, name: str) -> None:
    """scancel what a submission just started for ``job``, cancelled while it was being
    submitted (audited for its owner): no orphan is left running."""
    _cancel_for_owner(
        job,
        account,
        f"job {job.pk} ({scheduler_id}), cancelled while submitted",
        lambda conn: schedulers.for_cluster(job.cluster).cancel(conn, scheduler_id, name),
    )


def _cancel_for_owner(job: Job, account, target: str, operation) -> None:
    """Run a cancel on the cluster the portal does for ``job``'s owner, audited as theirs."""
    with audit.action(audit.Action.CANCEL, user=job.owner, account=account, target=target):
        pool.with_connection(account, operation)


def _submit_failed(task, exc: Exception, claimed, what: str, jobs: list[Job]) -> None:
    """A submission failed: a transient cluster error retries the task (the submit claim
    released); anything else, or too many retries, ends each queued job of ``jobs``
    submit_failed with the reason."""
    transient = isinstance(exc, ssh.ClusterError) and exc.transient
    if transient and task.request.retries < settings.PORTAL_SUBMIT_MAX_RETRIES:
        claimed.release_submit_claim()
        log.warning("submit of %s failed (%s); retrying", what, exc)
        raise task.retry(exc=exc, countdown=backoff(task.request.retries)) from None
    prefix = "The cluster could not be reached: " if transient else ""
    for job in jobs:
        job.transition(
            Job.State.SUBMIT_FAILED, expect=(Job.State.QUEUED,), message=f"{prefix}{exc}"
        )


class ProvenanceTimedOut(Exception):
    def __init__(self, seconds: float):
        super().__init__(f"the provenance read took longer than {seconds:.0f} s")
        self.seconds = seconds


# The provenance read has this share of the time left to the submit task (the submission
# itself the rest).
PROVENANCE_SHARE = 1 / 3


def provenance_budget() -> float:
    """Seconds the provenance read may take: a share of what is left of the task's
    deadline (clusters.deadline), or the SSH command timeout outside a task."""
    left = deadline.left()
    if left is None:
        return settings.SSH_COMMAND_TIMEOUT
    return max(1.0, left * PROVENANCE_SHARE)


def read_provenance(job: Job, account, work_dir: str) -> tuple[dict, str]:
    """What reproduces ``job`` (jobs/provenance.py) and its kept diff; a cluster
    that cannot say is recorded as such and the submission goes on. One try, cut at
    provenance_budget() (here and, with ``timeout``, on the cluster): a read that runs
    out of time raises ProvenanceTimedOut."""
    budget = provenance_budget()
    try:
        with deadline.within(budget):
            found = pool.with_connection(
                account,
                lambda conn: provenance.read(
                    conn, job, work_dir, max_diff=settings.PORTAL_GIT_DIFF_MAX_BYTES, timeout=budget
                ),
                retry=False,
            )
    except ssh.CommandTimedOut:
        raise ProvenanceTimedOut(budget) from None
    except ssh.ClusterError as exc:
        identity = provenance.image_identity(job.image)
        return {"image": identity, "error": f"not read on the cluster: {str(exc)[:300]}"}, ""
    return found.as_record() | {"read_at": timezone.now().isoformat()}, found.diff


def metrics_upload_url(job: Job) -> str:
    if job.cluster.metrics_over_ssh:
        return ""
    return settings.PORTAL_URL + reverse("metrics-upload", args=[job.pk])


@shared_task(
    name="jobs.tasks.submit_array",
    bind=True,
    acks_late=True,
    max_retries=None,
    **person_limits(ArrayPersonTask),
)
def submit_array(self, array_id: int) -> None:
    """Submit a job array (an experiment's batch of trial runs) with one sbatch: the same
    claim, adoption and retry rules as one job (submit_job); members cancelled before it
    reached the scheduler are scancelled right after."""
    array = JobArray.objects.select_related("cluster", "owner").filter(pk=array_id).first()
    if array is None or array.submitted_at is not None:
        return
    members = list(
        array.jobs.select_related("cluster", "partition", "image", "owner", "trial__experiment")
        .prefetch_related("cluster__gpu_types")  # their descriptions' GPU model: one query
        .order_by("array_index")
    )
    if not any(j.state == Job.State.QUEUED for j in members):
        return  # all cancelled before submission
    if not array.claim_submit():
        return
    try:
        _submit_array_claimed(self, array, members)
    except SoftTimeLimitExceeded:
        for job in members:
            job.submit_timed_out(soft_limit(self) or 0, "take the job array")
        log.warning("submit of job array %s reached its soft time limit", array_id)


def _submit_array_claimed(task, array: JobArray, members: list[Job]) -> None:
    array_id = array.pk
    account = ClusterAccount.for_user(array.cluster, array.owner)
    queued = (Job.State.QUEUED,)
    if account is None:
        for job in members:
            job.transition(
                Job.State.SUBMIT_FAILED,
                expect=queued,
                message=f"You have no account on cluster {array.cluster.name} yet; "
                "add one on your account page or ask an administrator.",
            )
        return

    try:
        work_dir = workdir.array_work_dir(array, account.username, members[0].work_dir_kind)
        tokens = [(job.array_index or 0, job.issue_metrics_token()) for job in members]
        scheduler = schedulers.for_cluster(array.cluster)
        script = scheduler.render_array(
            array.describe(),
            [job.as_member(metrics_upload_url(job)) for job in members],
            work_dir,
            settings.PORTAL_SYSTEM_METRICS_INTERVAL,
        )
        with audit.action(
            audit.Action.SUBMIT,
            user=array.owner,
            account=account,
            target=f"job array {array.pk} ({len(members)} jobs)",
        ) as entry:
            array.mark_submit_sent()
            submission = pool.with_connection(
                account,
                lambda conn: scheduler.submit_array(
                    conn, work_dir, array.scheduler_name, script, tokens
                ),
            )
            entry.note(f"scheduler id {submission.scheduler_id}")
    except (ssh.ClusterError, workdir.ScriptError, ValueError) as exc:
        _submit_failed(task, exc, array, f"job array {array_id}", members)
        return
    now = timezone.now()
    adopted = "Adopted the job array an earlier attempt submitted." if submission.adopted else ""
    cancelled_meanwhile: list[tuple[Job, str]] = []
    # The array and its members together or not at all: a worker killed between them left
    # the array submitted and its members queued for good (submit_array returns at once
    # for a submitted array). Not recorded, the next try adopts what Slurm has.
    with transaction.atomic():
        JobArray.objects.filter(pk=array.pk).update(
            scheduler_array_id=submission.scheduler_id,
            submitted_at=now,
            work_dir=work_dir,
            script=script,
        )
        for job in members:
            task_id = scheduler.member_id(submission.scheduler_id, job.array_index or 0)
            moved = job.transition(
                Job.State.PENDING,
                expect=queued,
                message=adopted,
                scheduler_job_id=task_id,
                submitted_at=now,
                work_dir=f"{work_dir}/{job.array_index}",
                cluster_account=account,
            )
            if not moved:
                job.refresh_from_db()
                if job.state == Job.State.CANCELLED:  # cancelled while we were submitting
                    Job.objects.filter(pk=job.pk).update(scheduler_job_id=task_id)
                    cancelled_meanwhile.append((job, task_id))
    for job, task_id in cancelled_meanwhile:  # (no transaction held while SSH talks)
        _cancel_submitted(job, account, task_id, array.scheduler_name)


@shared_task(name="jobs.tasks.sync_clusters")
def sync_clusters() -> None:
    """Periodic (beat): one sync per cluster with scheduled jobs, spread over the interval."""
    cluster_ids = (
        Job.objects.filter(state__in=SCHEDULED_STATES, cluster__enabled=True)
        .values_list("cluster_id", flat=True)
        .distinct()
    )
    spread = settings.PORTAL_SYNC_INTERVAL * settings.PORTAL_SYNC_JITTER
    for cluster_id in cluster_ids:
        sync_cluster.apply_async((cluster_id,), countdown=random.uniform(0, spread))


@shared_task(name="jobs.tasks.sync_cluster", **limits())
def sync_cluster(cluster_id: int) -> None:
    # One sync per cluster at a time, across all workers.
    timeout = max(60, int(settings.PORTAL_SYNC_INTERVAL * 4))
    with single_flight(f"sync-lock:{cluster_id}", timeout) as mine:
        if not mine:
            return
        try:
            cluster = Cluster.objects.filter(pk=cluster_id, enabled=True).first()
            if cluster is not None:
                sync_jobs(Job.objects.filter(cluster=cluster, state__in=SCHEDULED_STATES))
        finally:
            close_old_connections()


@shared_task(name="jobs.tasks.sync_job", **person_limits())
def sync_job(job_id: int) -> None:
    """One job's sync now rather than at the next periodic one (sync_soon)."""
    try:
        sync_jobs(Job.objects.filter(pk=job_id, state__in=SCHEDULED_STATES))
    finally:
        close_old_connections()


# A job's own sync is queued at most once in this many seconds, however often it asks.
SYNC_SOON_EVERY = 5


def sync_soon(job: Job) -> None:
    """Queue a sync of ``job`` (a session registering before the periodic sync has seen its
    job start). A broker outage is logged: the periodic sync sees it later."""
    if not cache.add(f"sync-soon:{job.pk}", 1, timeout=SYNC_SOON_EVERY):
        return
    try:
        sync_job.delay(job.pk)
    except Exception:  # noqa: BLE001 - the periodic sync sees it anyway
        log.warning("could not queue a sync of job %s", job.pk, exc_info=True)


@shared_task(
    name="jobs.tasks.record_attempts", bind=True, acks_late=True, max_retries=5, **limits()
)
def record_attempts(self, job_ids: list[int], outbox_events: list[int] | None = None) -> None:
    """sync.record_attempts(), then the outbox hears it ran (a worker killed midway leaves
    the events due: the sweep hands them over again after its lease)."""
    try:
        sync.record_attempts(job_ids, last_try=self.request.retries >= self.max_retries)
    except sync.TryAgain:
        raise self.retry(countdown=backoff(self.request.retries)) from None
    outbox.done_many(outbox_events or [], ATTEMPTS)


@shared_task(
    name="jobs.tasks.cancel_job", bind=True, acks_late=True, max_retries=None, **person_limits()
)
def cancel_job(self, job_id: int, requested_by: int | None = None) -> None:
    """Cancel a job on its cluster; the audit log names ``requested_by`` (a user id; None:
    the portal itself, recorded for the owner)."""
    job = (
        Job.objects.select_related("cluster_account__cluster", "array", "owner")
        .filter(pk=job_id)
        .first()
    )
    if job is None or job.is_final:
        return
    if job.state == Job.State.QUEUED:
        if job.request_cancel() and self.request.retries < settings.PORTAL_SUBMIT_MAX_RETRIES:
            # It is being submitted right now; the submit task cancels it when done,
            # or it reaches pending and we scancel it on the next try.
            raise self.retry(countdown=backoff(self.request.retries))
        return
    _act_on_job(
        self,
        job,
        audit.Action.CANCEL,
        "Cancelling",
        requested_by,
        lambda conn: schedulers.for_cluster(job.cluster).cancel(
            conn, job.scheduler_job_id, job.scheduler_name
        ),
    )


@shared_task(
    name="jobs.tasks.release_job", bind=True, acks_late=True, max_retries=None, **person_limits()
)
def release_job(self, job_id: int, requested_by: int | None = None) -> None:
    """Release a held job (after a failed launch, or held by its owner)."""
    job = Job.objects.select_related("cluster_account__cluster", "owner").filter(pk=job_id).first()
    if job is None or not job.is_held or job.cluster_account is None:
        return
    username = job.cluster_account.username
    _act_on_job(
        self,
        job,
        audit.Action.RELEASE,
        "Releasing",
        requested_by,
        lambda conn: schedulers.for_cluster(job.cluster).release(
            conn, username, job.scheduler_job_id, job.scheduler_name
        ),
    )


@shared_task(
    name="jobs.tasks.lower_time_limit",
    bind=True,
    acks_late=True,
    max_retries=None,
    **person_limits(),
)
def lower_time_limit(self, job_id: int, minutes: int, requested_by: int | None = None) -> None:
    """Lower a pending job's time limit (so it starts before a maintenance)."""
    job = Job.objects.select_related("cluster_account__cluster", "owner").filter(pk=job_id).first()
    if job is None or job.state != Job.State.PENDING or job.cluster_account is None:
        return
    if not 1 <= minutes < job.time_limit_minutes:
        return
    username = job.cluster_account.username
    done = _act_on_job(
        self,
        job,
        audit.Action.TIME_LIMIT,
        "Lowering the time limit",
        requested_by,
        lambda conn: schedulers.for_cluster(job.cluster).lower_time_limit(
            conn, username, job.scheduler_job_id, job.scheduler_name, minutes
        ),
    )
    if done:
        Job.objects.filter(pk=job.pk).update(time_limit_minutes=minutes)
        job.note(f"Time limit lowered to {minutes} minutes.")


def _act_on_job(task, job: Job, what: str, doing: str, requested_by: int | None, operation) -> bool:
    """Run a scheduler ``operation`` on the job's account, audited as ``what`` for the
    person who asked (``requested_by``; the owner when the portal acted by itself):
    transient errors retry the task, others are recorded on the job; then the outcome is
    synced at once rather than at the next periodic sync. True when it was done."""
    asker = None
    if requested_by is not None and requested_by != job.owner_id:
        asker = get_user_model().objects.filter(pk=requested_by).first()
    try:
        with audit.action(
            what,
            user=asker or job.owner,
            account=job.cluster_account,
            target=f"job {job.pk} ({job.scheduler_job_id})",
        ):
            pool.with_connection(job.cluster_account, operation)
    except SoftTimeLimitExceeded:
        seconds = soft_limit(task) or 0
        job.update_details(
            message=f"{doing} failed: the cluster took longer than {seconds:.0f} s to answer."
        )
        return False
    except ssh.ClusterError as exc:
        if exc.transient and task.request.retries < settings.PORTAL_SUBMIT_MAX_RETRIES:
            raise task.retry(exc=exc, countdown=backoff(task.request.retries)) from None
        job.update_details(message=f"{doing} failed: {exc}")
        return False
    sync_jobs(Job.objects.filter(pk=job.pk))
    return True


@shared_task(name="jobs.tasks.recover_jobs")
def recover_jobs() -> dict[str, int]:
    """Periodic (beat): find work whose queue message was lost — a worker killed while it
    held it, the broker restarted empty, a task that died on a database error — and queue
    it again. Safe to repeat: the submit is idempotent (a job that reached Slurm is
    adopted by its name) and scancel of an ended job is a no-op."""
    since = timezone.now() - timedelta(seconds=settings.PORTAL_RECOVER_AFTER)
    stale = Job.submit_claim_stale_before()
    lost = Job.objects.filter(state=Job.State.QUEUED, created_at__lt=since).filter(
        Q(submit_claimed_at__isnull=True) | Q(submit_claimed_at__lt=stale)
    )
    # Taken up PORTAL_SUBMIT_MAX_TRIES times and never finished (each try held a worker up
    # to the task's time limit): ended with a message, not queued once more. (An array's
    # members by the array's tries, while no live worker holds the array's claim.)
    tries = settings.PORTAL_SUBMIT_MAX_TRIES
    array_free = Q(array__submit_claimed_at__isnull=True) | Q(array__submit_claimed_at__lt=stale)
    spent = lost.filter(
        Q(array__isnull=True, submit_tries__gte=tries)
        | (Q(array__submit_tries__gte=tries) & array_free)
    ).select_related("array")[:500]
    given_up = 0
    for job in spent:
        if job.array is not None:
            job.submit_tries = job.array.submit_tries
        given_up += job.give_up_submit()
    lost_submits = list(lost.values_list("pk", flat=True)[:500])
    lost_cancels = list(
        Job.objects.filter(state__in=SCHEDULED_STATES, cancel_requested_at__lt=since)
        .exclude(scheduler_job_id="")
        .values_list("pk", flat=True)[:500]
    )
    arrays = dict(Job.objects.filter(pk__in=lost_submits).values_list("pk", "array_id"))
    for array_id in {a for a in arrays.values() if a}:
        submit_array.delay(array_id)
    for job_id in lost_submits:
        if not arrays.get(job_id):
            submit_job.delay(job_id)
    for job_id in lost_cancels:
        cancel_job.delay(job_id)
    if lost_submits or lost_cancels or given_up:
        log.warning(
            "recovered %d submissions and %d cancellations; gave up %d submissions",
            len(lost_submits),
            len(lost_cancels),
            given_up,
        )
    return {"submits": len(lost_submits), "cancels": len(lost_cancels), "given_up": given_up}


@shared_task(name="jobs.tasks.deliver_job_events")
def deliver_job_events() -> int:
    """Periodic (beat): hand over what jobs' changes still owe (jobs.outbox)."""
    return outbox.deliver()


def queue_error_tails(dues: list[outbox.Due]) -> None:
    """The outbox's ``stderr`` consumer."""
    for due in dues:
        read_error_tail.apply_async((due.job_id,), {"outbox_event": due.event_id})


def queue_attempts(dues: list[outbox.Due]) -> None:
    """The outbox's ``attempts`` consumer: one task for a sweep's worth of jobs."""
    for start in range(0, len(dues), 1000):
        part = dues[start : start + 1000]
        record_attempts.apply_async(
            (sorted({d.job_id for d in part}),), {"outbox_events": [d.event_id for d in part]}
        )


def queue_withdrawals(dues: list[outbox.Due]) -> None:
    """The outbox's ``withdraw`` consumer."""
    for due in dues:
        withdraw_job.apply_async((due.job_id,), {"outbox_event": due.event_id})


@shared_task(
    name="jobs.tasks.withdraw_job",
    bind=True,
    acks_late=True,
    max_retries=None,
    **person_limits(),
)
def withdraw_job(self, job_id: int, outbox_event: int | None = None) -> None:
    """Cancel on the cluster, by its unique name, what a submission may have started for a
    job that ended without the portal learning its id (cancelled, or failed, while a try
    that never heard back had sent it): no orphan runs on. An array member's name is the
    array's: withdrawn only once every member has ended so (otherwise the array's own
    submission is still under way and cancels its cancelled members by id)."""
    job = Job.objects.select_related("cluster", "owner", "array").filter(pk=job_id).first()
    if job is not None and _withdrawable(job):
        account = ClusterAccount.for_user(job.cluster, job.owner)
        if account is not None:
            try:
                _cancel_for_owner(
                    job,
                    account,
                    f"job {job.pk}, {job.scheduler_name} withdrawn after an unsure submit",
                    lambda conn: schedulers.for_cluster(job.cluster).cancel_named(
                        conn, account.username, job.scheduler_name
                    ),
                )
            except ssh.ClusterError as exc:
                if exc.transient and self.request.retries < settings.PORTAL_SUBMIT_MAX_RETRIES:
                    raise self.retry(countdown=backoff(self.request.retries)) from None
                job.note(
                    f"The portal could not withdraw {job.scheduler_name} from the cluster: {exc}"
                )
                log.warning("withdrawal of job %s failed: %s", job_id, exc)
    outbox.done(outbox_event, WITHDRAW)


def _withdrawable(job: Job) -> bool:
    if not job.is_final or job.scheduler_job_id or not job.submission_sent:
        return False
    if job.array is None:
        return True
    if job.array.submitted_at is not None:
        return False  # a recorded array cancels its members by id
    return not job.array.jobs.exclude(state__in=Job.FINAL_STATES).exists()


# Enough for a traceback's end; error_tail() keeps its last 20 lines.
ERROR_TAIL_BYTES = 8192


@shared_task(
    name="jobs.tasks.read_error_tail", bind=True, acks_late=True, max_retries=5, **person_limits()
)
def read_error_tail(self, job_id: int, outbox_event: int | None = None) -> None:
    """Keep the end of a failed job's stderr with the job: the cause is usually there
    ('module: command not found', a Python traceback)."""
    job = Job.objects.select_related("cluster_account__cluster").filter(pk=job_id).first()
    if job is not None and job.ended_badly:
        try:
            tail = files.read_job_log(job, "stderr", max_bytes=ERROR_TAIL_BYTES)
        except ssh.ClusterError as exc:
            if exc.transient and self.request.retries < self.max_retries:
                raise self.retry(countdown=backoff(self.request.retries)) from None
            log.warning("stderr of job %s not read: %s", job_id, exc)
        else:
            job.record_error_tail(tail.text)
    outbox.done(outbox_event, STDERR)


@shared_task(name="jobs.tasks.prune_audit_log")
def prune_audit_log() -> int:
    """Periodic (beat): delete audit rows older than PORTAL_AUDIT_RETENTION_DAYS, in batches."""
    return audit.prune(settings.PORTAL_AUDIT_RETENTION_DAYS)
