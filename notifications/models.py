"""A person's notifications (the in-portal list, and the email each one is waiting for),
their choices per event and channel, and the emails sent (the rate limit counts them)."""

from __future__ import annotations

import secrets
import time
from datetime import timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, models, transaction
from django.utils import timezone

from common import crypto
from notifications.events import Channel, Event, Message, default


class Preference(models.Model):
    """A person's choice for one event; without a row, the defaults (events.DEFAULT_ON)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_prefs"
    )
    event = models.CharField(max_length=32, choices=Event.choices)
    portal = models.BooleanField()
    email = models.BooleanField()
    webhook = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "event"], name="notify_pref_unique")]

    def __str__(self) -> str:
        return f"{self.user_id} {self.event}: portal={self.portal} email={self.email}"

    @classmethod
    def choices_for(cls, user) -> dict[str, dict[str, bool]]:
        """{event: {channel: on}} for every event, the person's rows over the defaults."""
        rows = {p.event: p for p in cls.objects.filter(user=user)}
        return {
            event: {
                Channel.PORTAL: rows[event].portal if event in rows else default(event, "portal"),
                Channel.EMAIL: rows[event].email if event in rows else default(event, "email"),
                Channel.WEBHOOK: (
                    rows[event].webhook if event in rows else default(event, Channel.WEBHOOK)
                ),
            }
            for event in Event.values
        }

    @classmethod
    def set(cls, user, event: str, **channels: bool) -> Preference:
        current = cls.choices_for(user)[event]
        values = {
            "portal": channels.get("portal", current[Channel.PORTAL]),
            "email": channels.get("email", current[Channel.EMAIL]),
            "webhook": channels.get("webhook", current[Channel.WEBHOOK]),
        }
        return cls.objects.update_or_create(user=user, event=event, defaults=values)[0]


class NotificationQuerySet(models.QuerySet):
    def listed(self) -> NotificationQuerySet:
        """What the person's list shows (an email-only notification is not listed)."""
        return self.filter(in_portal=True)

    def unread(self) -> NotificationQuerySet:
        return self.listed().filter(read=False)


class Notification(models.Model):
    class Email(models.TextChoices):
        NONE = "none", "Not emailed"
        PENDING = "pending", "Waiting to be sent"
        SENT = "sent", "Sent"

    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications"
    )
    event = models.CharField(max_length=32, choices=Event.choices)
    job = models.ForeignKey(
        "jobs.Job", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    experiment = models.ForeignKey(
        "experiments.Experiment",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
    )
    # Its page, as a path (the email makes it absolute with PORTAL_URL).
    url = models.CharField(max_length=200)
    text = models.CharField(max_length=500)
    # Plain lines that follow the sentence in the email and on the list (a stderr tail).
    detail = models.TextField(blank=True)
    in_portal = models.BooleanField(default=True)
    read = models.BooleanField(default=False)
    email = models.CharField(max_length=8, choices=Email.choices, default=Email.NONE)
    emailed_at = models.DateTimeField(null=True, blank=True)
    # The person's webhook: NONE (not chosen), PENDING, SENT or FAILED (after the retries).
    webhook = models.CharField(
        max_length=8, choices=Email.choices + [("failed", "Failed")], default=Email.NONE
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    objects = NotificationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # Once per person, event and job (or experiment): a repeated signal adds nothing.
            models.UniqueConstraint(
                fields=["recipient", "event", "job"],
                condition=models.Q(job__isnull=False),
                name="notify_once_per_job",
            ),
            models.UniqueConstraint(
                fields=["recipient", "event", "experiment"],
                condition=models.Q(experiment__isnull=False),
                name="notify_once_per_experiment",
            ),
        ]
        indexes = [models.Index(fields=["recipient", "email"])]

    def __str__(self) -> str:
        return f"{self.recipient_id} {self.event}: {self.text[:60]}"

    @classmethod
    def record(
        cls, recipient, event: str, message: Message, url: str, *, job=None, experiment=None
    ) -> Notification | None:
        """Keep one notification as the person chose (None: both channels off, or it was
        recorded before)."""
        wants = Preference.choices_for(recipient)[event]
        email = wants[Channel.EMAIL] and bool(recipient.email)
        hook = (
            wants[Channel.WEBHOOK] and Webhook.objects.filter(user=recipient, enabled=True).exists()
        )
        if not (wants[Channel.PORTAL] or email or hook):
            return None
        try:
            # Its own savepoint: a duplicate must not spoil the caller's transaction.
            with transaction.atomic():
                return cls.objects.create(
                    recipient=recipient,
                    event=event,
                    job=job,
                    experiment=experiment,
                    url=url,
                    text=message.text,
                    detail=message.detail,
                    in_portal=wants[Channel.PORTAL],
                    email=cls.Email.PENDING if email else cls.Email.NONE,
                    webhook=cls.Email.PENDING if hook else cls.Email.NONE,
                )
        except IntegrityError:
            return None

    @classmethod
    def tell(cls, recipient, event: str, message: Message, url: str) -> Notification:
        """A notice that is not the person's choice (events.NOT_CHOSEN): always in the
        portal, and by email when they have an address; never deduplicated."""
        return cls.objects.create(
            recipient=recipient,
            event=event,
            url=url,
            text=message.text,
            detail=message.detail,
            in_portal=True,
            email=cls.Email.PENDING if recipient.email else cls.Email.NONE,
        )


class SentEmail(models.Model):
    """One email sent to a person (one notification, or a digest of several): the rate
    limit counts these per window."""

    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    sent_at = models.DateTimeField(default=timezone.now, db_index=True)
    notifications = models.PositiveIntegerField()

    def __str__(self) -> str:
        return f"{self.recipient_id} at {self.sent_at}: {self.notifications}"

    @classmethod
    def next_slot(cls, recipient) -> timedelta:
        """How long until the person may be sent another email (zero: now)."""
        window = timedelta(minutes=settings.PORTAL_NOTIFY_EMAIL_WINDOW_MINUTES)
        since = timezone.now() - window
        recent = list(
            cls.objects.filter(recipient=recipient, sent_at__gt=since)
            .order_by("-sent_at")
            .values_list("sent_at", flat=True)[: settings.PORTAL_NOTIFY_EMAIL_MAX]
        )
        if len(recent) < settings.PORTAL_NOTIFY_EMAIL_MAX:
            return timedelta(0)
        # The oldest of the last MAX leaves the window then.
        return max(recent[-1] + window - timezone.now(), timedelta(0))


class Webhook(models.Model):
    """A person's webhook: where their chosen notifications are posted, and the secret
    they are signed with (shown once when made; kept encrypted, as it must sign)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="webhook"
    )
    url = models.CharField(max_length=2000)
    secret_encrypted = models.TextField()
    enabled = models.BooleanField(default=True)
    # Failed attempts in a row (a success resets it); at PORTAL_WEBHOOK_MAX_FAILURES the
    # webhook is turned off and its owner told.
    failures = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=200, blank=True)
    disabled_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.user_id} {self.url[:60]} ({'on' if self.enabled else 'off'})"

    @classmethod
    def configure(cls, user, url: str) -> tuple[Webhook, str]:
        """Set the person's URL (checked by the caller) and turn it on; a new secret when
        there was none (returned, to be shown once; '' when the old one stays)."""
        hook = Webhook.objects.filter(user=user).first() or Webhook(user=user)
        secret = ""
        if not hook.secret_encrypted:
            secret = hook._new_secret()
        hook.url = url
        hook.enabled = True
        hook.failures = 0
        hook.last_error = ""
        hook.disabled_at = None
        hook.save()
        return hook, secret

    def rotate_secret(self) -> str:
        secret = self._new_secret()
        self.save(update_fields=["secret_encrypted", "updated_at"])
        return secret

    def _new_secret(self) -> str:
        secret = "whsec_" + secrets.token_urlsafe(32)
        self.secret_encrypted = crypto.encrypt(secret)
        return secret

    @property
    def secret(self) -> str:
        return crypto.decrypt(self.secret_encrypted)

    def succeeded(self) -> None:
        Webhook.objects.filter(pk=self.pk).update(failures=0, last_error="")

    # -- the per-person rate (attempts kept in the cache: a lost count errs on posting) ----
    def _attempts_key(self) -> str:
        return f"webhook-attempts:{self.user_id}"

    def _recent_attempts(self) -> list[float]:
        since = time.time() - settings.PORTAL_WEBHOOK_RATE_WINDOW
        return [t for t in cache.get(self._attempts_key(), []) if t > since]

    def next_slot(self) -> float:
        """Seconds until the person's webhook may be posted to again (0: now): at most
        PORTAL_WEBHOOK_RATE_MAX attempts per PORTAL_WEBHOOK_RATE_WINDOW seconds."""
        recent = self._recent_attempts()
        most = settings.PORTAL_WEBHOOK_RATE_MAX
        if len(recent) < most:
            return 0.0
        # The oldest of the last ``most`` leaves the window then.
        return max(0.0, sorted(recent)[-most] + settings.PORTAL_WEBHOOK_RATE_WINDOW - time.time())

    def count_attempt(self) -> None:
        """One attempt made (its caller holds the person's delivery lock)."""
        recent = self._recent_attempts()[-settings.PORTAL_WEBHOOK_RATE_MAX :] + [time.time()]
        cache.set(
            self._attempts_key(), recent, timeout=int(settings.PORTAL_WEBHOOK_RATE_WINDOW) + 1
        )

    def failed(self, error: str) -> bool:
        """Count a failed attempt; True when this one turned the webhook off."""
        with transaction.atomic():
            hook = Webhook.objects.select_for_update().get(pk=self.pk)
            if not hook.enabled:
                return False
            hook.failures += 1
            hook.last_error = error[:200]
            turned_off = hook.failures >= settings.PORTAL_WEBHOOK_MAX_FAILURES
            if turned_off:
                hook.enabled = False
                hook.disabled_at = timezone.now()
            hook.save(update_fields=["failures", "last_error", "enabled", "disabled_at"])
        self.refresh_from_db()
        return turned_off
