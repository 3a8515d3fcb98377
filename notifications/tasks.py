"""Notification tasks: record what happened for the person (as they chose), then send
their pending emails in one message, within the per-person rate limit; past it, whatever
gathers is sent as one digest when the window ends. Thin: ids in, rows reloaded."""

from __future__ import annotations

import logging
import smtplib
from datetime import datetime, timedelta

from celery import shared_task
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from common import prometheus as metrics
from experiments.models import Experiment
from identity.audit.models import AuditEvent
from jobs import outbox
from jobs.display import when
from jobs.models import Job
from jobs.models.events import NOTIFY
from jobs.task_helpers import single_flight
from notifications import broadcast, mail, webhook
from notifications.events import TEXT_MAX, Event, for_experiment, for_job, one_line
from notifications.models import Notification, SentEmail, Webhook

log = logging.getLogger(__name__)

# A failed job's stderr tail is read by its own task after the sync (jobs.tasks
# read_error_tail): the notification waits this long for it, then goes without.
TAIL_WAIT = timedelta(seconds=12)


def cancelled_by(job: Job) -> str:
    """Who cancelled ``job`` when it was not its owner ('' when it was)."""
    if job.cancel_reason and job.idle_warned_at is not None:
        return "a policy (the portal's idle-GPU policy)"
    if job.cancel_reason:
        return "the portal"
    if job.cancel_requested_at is None:
        return "the scheduler or an administrator"
    asker = (
        AuditEvent.objects.filter(
            action=AuditEvent.Action.CANCEL, target__startswith=f"job {job.pk} ("
        )
        .exclude(user=job.owner)
        .exclude(user=None)
        .values_list("username", flat=True)
        .first()
    )
    return asker or ""


@shared_task(name="jobs.notifications.tasks.notify_job", bind=True, max_retries=10)
def notify_job(self, job_id: int, event: str, outbox_event: int | None = None) -> None:
    """Tell the job's owner ``event`` (as they chose); ``outbox_event``: the JobEvent that
    owed it, told it is done once the notification is recorded (or not owed after all)."""
    _notify_job(self, job_id, event)
    outbox.done(outbox_event, f"{NOTIFY}:{event}")


def _notify_job(task, job_id: int, event: str) -> None:
    job = Job.objects.select_related("owner", "cluster", "partition").filter(pk=job_id).first()
    if job is None:
        return
    if event in (Event.JOB_FAILED, Event.JOB_TIMEOUT) and not job.stderr_tail:
        ended = job.ended_at or timezone.now()
        if timezone.now() - ended < TAIL_WAIT and task.request.retries < task.max_retries:
            raise task.retry(countdown=2)
    who = ""
    if event == Event.JOB_CANCELLED:
        who = cancelled_by(job)
        if not who:
            return  # the owner cancelled it: nothing to tell them
    if event == Event.JOB_COMPLETED:
        long_job = timedelta(minutes=settings.PORTAL_NOTIFY_LONG_JOB_MINUTES)
        if not job.elapsed or job.elapsed < long_job:
            return
    message = for_job(event, job, cancelled_by=who)
    url = reverse("job-detail", args=[job.pk])
    told(Notification.record(job.owner, event, message, url, job=job))


# The page's own warning comes 15 minutes before a running job's time limit; so does this.
WALLTIME_WARNING = timedelta(minutes=15)
WALLTIME_SCAN_MAX = 5000


@shared_task(name="jobs.notifications.tasks.warn_walltime_ending")
def warn_walltime_ending() -> int:
    """Periodic (beat): a running job that reaches its time limit within WALLTIME_WARNING
    gets a line in its timeline, which owes its owner a notification (once per run: the
    line names the time; delivered by the outbox, so a broker outage delays it only).
    Returns how many were warned."""
    now = timezone.now()
    running = (
        Job.objects.filter(state=Job.State.RUNNING, trial__isnull=True, started_at__isnull=False)
        .only("pk", "started_at", "time_limit_minutes")
        .order_by("started_at")[:WALLTIME_SCAN_MAX]
    )
    ending: dict[int, datetime] = {}
    for job in running:
        if job.started_at is None:  # (filtered out above)
            continue
        ends = job.started_at + timedelta(minutes=job.time_limit_minutes)
        if now < ends <= now + WALLTIME_WARNING:
            ending[job.pk] = ends
    warned = 0
    for job in Job.objects.filter(pk__in=list(ending), state=Job.State.RUNNING):
        line = f"Reaches its time limit at {when(ending[job.pk])}."
        warned += job.note(line, tell=Event.WALLTIME_ENDING)
    return warned


@shared_task(name="jobs.notifications.tasks.notify_experiment")
def notify_experiment(experiment_id: int) -> None:
    """Tell the owner that their experiment ended (once: its ``told_at``)."""
    experiment = Experiment.objects.select_related("owner").filter(pk=experiment_id).first()
    if experiment is None or not experiment.is_final:
        return
    with transaction.atomic():
        if not Experiment.objects.filter(pk=experiment.pk, told_at=None).update(
            told_at=timezone.now()
        ):
            return  # told already
        if experiment.state == Experiment.State.CANCELLED and experiment.cancel_requested_at:
            return  # its owner stopped it: nothing to tell them
        best = experiment.best_of(list(experiment.trials.all()))
        message = for_experiment(experiment, best)
        url = reverse("experiment-detail", args=[experiment.pk])
        told(
            Notification.record(
                experiment.owner, Event.EXPERIMENT_FINISHED, message, url, experiment=experiment
            )
        )


# What the sweep below leaves alone: the normal path's own time to run.
OWED_AFTER = timedelta(minutes=2)
OWED_BATCH = 200


@shared_task(name="jobs.notifications.tasks.sweep_owed")
def sweep_owed() -> dict[str, int]:
    """Periodic (beat): hand over again what a lost task message still owes. A job's
    notifications have the outbox (jobs/outbox.py); here are the rest: an ended experiment
    not yet told (its ``told_at``), and emails still pending well after their delivery
    was queued (the broker lost the delivery task). Both deliveries are idempotent (told
    once; an email sends what is pending, under its per-person lock and rate)."""
    settled = timezone.now() - OWED_AFTER
    untold = list(
        Experiment.objects.filter(told_at=None, ended_at__lt=settled)
        .exclude(state=Experiment.State.RUNNING)
        .values_list("pk", flat=True)[:OWED_BATCH]
    )
    for pk in untold:
        notify_experiment(pk)
    # An email held by the person's rate goes when their window ends: only one pending
    # for longer than the window and the batch was lost.
    held = timedelta(
        minutes=settings.PORTAL_NOTIFY_EMAIL_WINDOW_MINUTES,
        seconds=settings.PORTAL_NOTIFY_BATCH_SECONDS,
    )
    waiting = list(
        Notification.objects.filter(email=Notification.Email.PENDING, created_at__lt=settled - held)
        .order_by()
        .values_list("recipient_id", flat=True)
        .distinct()[:OWED_BATCH]
    )
    for user_id in waiting:
        deliver_email.delay(user_id)
    return {"experiments": len(untold), "emails": len(waiting)}


def told(notification: Notification | None) -> None:
    """After a notification is recorded: its recipient's pages hear of it, and its email
    is queued."""
    if notification is None:
        return
    if notification.in_portal:
        broadcast.publish_on_commit(notification)
    if notification.email == Notification.Email.PENDING:
        queue_delivery(notification.recipient_id)
    if notification.webhook == Notification.Email.PENDING:
        pk = notification.pk
        transaction.on_commit(lambda: deliver_webhook.delay(pk))


def queue_delivery(user_id: int, delay: float | None = None) -> None:
    """Send the person's pending emails after a short wait, so that what happens at once
    (a burst of jobs ending in one sync) goes in one message."""
    countdown = settings.PORTAL_NOTIFY_BATCH_SECONDS if delay is None else delay
    transaction.on_commit(lambda: deliver_email.apply_async((user_id,), countdown=countdown))


@shared_task(
    name="jobs.notifications.tasks.deliver_email",
    autoretry_for=(smtplib.SMTPException, OSError),
    retry_backoff=True,
    retry_backoff_max=600,
    max_retries=8,
)
def deliver_email(user_id: int) -> int:
    """Send the person's pending notifications as one email (a digest when several);
    returns how many it carried (0: none pending, or the rate limit holds them)."""
    # One delivery per person at a time (a burst queues several): two can neither both
    # pass the rate limit nor send one notification twice. A cache lock, not the user's
    # row: SMTP may take EMAIL_TIMEOUT several times over, and nothing else (a sign-in)
    # should wait for it. The one that finds it held tries again shortly.
    lock_seconds = int(settings.EMAIL_TIMEOUT or 20) * 6 + 60
    with single_flight(f"notify-deliver:{user_id}", lock_seconds) as mine:
        if not mine:
            queue_delivery(user_id)
            return 0
        return _deliver(user_id)


def _deliver(user_id: int) -> int:
    """The delivery itself, under deliver_email's lock (so no row lock is needed, and none
    is held while SMTP talks: marking a notification read never waits for a mail server)."""
    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None:
        return 0
    pending = list(
        Notification.objects.filter(recipient=user, email=Notification.Email.PENDING).order_by(
            "created_at", "id"
        )
    )
    if not pending:
        return 0
    ids = [n.pk for n in pending]
    if not user.email:
        Notification.objects.filter(pk__in=ids).update(email=Notification.Email.NONE)
        return 0
    wait = SentEmail.next_slot(user)
    if wait > timedelta(0):
        # Past the limit: what gathers until the window ends goes as one digest then.
        queue_delivery(user_id, wait.total_seconds() + 1)
        return 0
    # Marked sent only once the server took it: if SMTP fails the task retries (a message
    # the server took just before a crash may come twice, never not at all).
    try:
        mail.build(user, pending).send()
    except Exception:
        metrics.NOTIFICATIONS_FAILED.labels("email").inc()
        raise
    metrics.NOTIFICATIONS_SENT.labels("email").inc(len(pending))
    with transaction.atomic():
        now = timezone.now()
        Notification.objects.filter(pk__in=ids).update(
            email=Notification.Email.SENT, emailed_at=now
        )
        SentEmail.objects.create(recipient=user, sent_at=now, notifications=len(pending))
    log.info("emailed %d notification(s) to user %s", len(pending), user_id)
    return len(pending)


@shared_task(name="jobs.notifications.tasks.deliver_webhook", bind=True, max_retries=None)
def deliver_webhook(self, notification_id: int) -> str:
    """Post the recipient's pending webhook notifications (this one among them): one as
    itself, several (gathered while the person's rate held them) as one digest. On no
    answer, a 5xx or 429, try again with back-off (at most PORTAL_WEBHOOK_RETRIES times).
    Every failed attempt, and a 2xx slower than PORTAL_WEBHOOK_SLOW_SECONDS, counts towards
    turning the webhook off; a success resets the count. Runs on its own queue
    (PORTAL_WEBHOOK_QUEUE). Returns the outcome."""
    recipient = (
        Notification.objects.filter(pk=notification_id, webhook=Notification.Email.PENDING)
        .values_list("recipient_id", flat=True)
        .first()
    )
    if recipient is None:
        return "gone"  # posted meanwhile (in a digest), or no longer wanted
    # One delivery per person at a time: two can neither both pass the rate nor post one
    # notification twice. The one that finds it held comes back shortly.
    lock_seconds = int(settings.PORTAL_WEBHOOK_TIMEOUT * 2 + 30)
    with single_flight(f"webhook-deliver:{recipient}", lock_seconds) as mine:
        if not mine:
            deliver_webhook.apply_async((notification_id,), countdown=2)
            return "waiting"
        outcome = _deliver_webhook(self, notification_id, recipient)
    if outcome == "retry":  # after the lock (an eager retry runs at once)
        raise self.retry(countdown=webhook.backoff_seconds(self.request.retries))
    return outcome


def _deliver_webhook(task, notification_id: int, recipient: int) -> str:
    hook = Webhook.objects.filter(user_id=recipient, enabled=True).first()
    if hook is None:
        Notification.objects.filter(
            recipient_id=recipient, webhook=Notification.Email.PENDING
        ).update(webhook=Notification.Email.NONE)
        return "off"
    wait = hook.next_slot()
    if wait > 0:
        # Past the person's rate: what gathers until then goes as one digest.
        deliver_webhook.apply_async((notification_id,), countdown=wait + 1)
        return "held"
    pending = list(
        Notification.objects.select_related("job", "experiment")
        .filter(recipient_id=recipient, webhook=Notification.Email.PENDING)
        .order_by("created_at", "id")[: webhook.DIGEST_MAX]
    )
    if not any(n.pk == notification_id for n in pending):
        return "gone"
    ids = [n.pk for n in pending]
    body = webhook.payload(pending[0]) if len(pending) == 1 else webhook.digest(pending)
    hook.count_attempt()
    outcome = webhook.post(hook.url, body, hook.secret)
    if outcome.delivered:
        metrics.NOTIFICATIONS_SENT.labels("webhook").inc(len(ids))
    else:
        metrics.NOTIFICATIONS_FAILED.labels("webhook").inc()
    if outcome.ok:
        hook.succeeded()
        Notification.objects.filter(pk__in=ids).update(webhook=Notification.Email.SENT)
        return "sent"
    log.info("webhook of user %s failed: %s %s", hook.user_id, outcome.status, outcome.error)
    turned_off = hook.failed(f"{outcome.status or 'no answer'}: {outcome.error}")
    if turned_off:
        tell_webhook_off(hook)
    if outcome.delivered:  # slow, but the receiver has it: not posted again
        Notification.objects.filter(pk__in=ids).update(webhook=Notification.Email.SENT)
        return "slow"
    retries = task.request.retries
    if hook.enabled and outcome.retryable and retries < settings.PORTAL_WEBHOOK_RETRIES:
        return "retry"
    Notification.objects.filter(pk__in=ids).update(webhook="failed")
    return "failed"


def tell_webhook_off(hook: Webhook) -> None:
    """The owner learns in the portal and by email that their webhook was turned off, why,
    and how to turn it on again (not a choice: otherwise they would never know)."""
    path = reverse("notification-settings")
    text = (
        f"Your webhook was turned off after {hook.failures} failed deliveries in a row "
        f"(last: {hook.last_error}); check the receiver and save it again on your "
        "notification settings page to turn it back on."
    )
    user = hook.user
    notification = Notification.objects.create(
        recipient=user,
        event=Event.WEBHOOK_DISABLED,
        url=path,
        text=one_line(text, TEXT_MAX),
        in_portal=True,
        email=Notification.Email.PENDING if user.email else Notification.Email.NONE,
    )
    told(notification)
