"""Notebook sessions: what the reverse proxy routes to, and who may use it."""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.db import models
from django.urls import reverse
from django.utils import timezone

from common import crypto
from common import prometheus as metrics
from jobs import signals
from jobs.models import Job


def new_public_id() -> str:
    """128 random bits as 32 lowercase hex characters: a valid DNS label."""
    return secrets.token_hex(16)


SESSION_ID = re.compile(r"^[0-9a-f]{32}\Z")  # what new_public_id() makes


def session_origin(public_id: str) -> str:
    """The session's own origin: <scheme>://<id>.<PROXY_SESSION_DOMAIN>[:port]."""
    port = f":{settings.PROXY_SESSION_PUBLIC_PORT}" if settings.PROXY_SESSION_PUBLIC_PORT else ""
    return f"{settings.PROXY_SESSION_SCHEME}://{public_id}.{settings.PROXY_SESSION_DOMAIN}{port}"


class SessionLinkQuerySet(models.QuerySet):
    def maybe_open(self) -> SessionLinkQuerySet:
        """What the database can tell of is_open (which still decides, per session)."""
        return self.filter(
            state=SessionLink.State.READY,
            job__state=Job.State.RUNNING,
            job__cancel_requested_at=None,
            job__owner__is_active=True,
        ).select_related("job", "job__owner")


class SessionLink(models.Model):
    """A session job's link: where its web app (notebook, TensorBoard) listens, and
    whether the link is open. Not Django's session (a browser's sign-in)."""

    class State(models.TextChoices):
        STARTING = "starting", "Starting"
        READY = "ready", "Ready"
        CLOSED = "closed", "Closed"

    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="session")
    public_id = models.CharField(max_length=32, unique=True, default=new_public_id, editable=False)
    state = models.CharField(max_length=16, choices=State.choices, default=State.STARTING)
    # One-time secret the job presents when it registers; only its hash is kept.
    register_secret_hash = models.CharField(max_length=64, blank=True, editable=False)
    host = models.CharField(max_length=253, blank=True)
    port = models.PositiveIntegerField(null=True, blank=True)
    upstream_token_encrypted = models.TextField(blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    ready_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    objects = SessionLinkQuerySet.as_manager()

    class Meta:
        db_table = "proxy_session"  # the table's name before the rename: no schema change
        # Staff see every job, but opening someone else's notebook is a shell as that
        # person: a permission of its own (proxy/access.py), granted deliberately.
        permissions = [
            ("open_others_sessions", "Can open other people's notebook and TensorBoard sessions")
        ]

    def __str__(self) -> str:
        return f"session {self.public_id[:8]}… of job {self.job_id} ({self.state})"

    @classmethod
    def for_job(cls, job: Job) -> SessionLink:
        return cls.objects.get_or_create(job=job)[0]

    @property
    def url(self) -> str:
        """https://<id>.<PROXY_SESSION_DOMAIN>[:port]/"""
        return session_origin(self.public_id) + "/"

    @property
    def origin(self) -> str:
        return session_origin(self.public_id)

    @property
    def is_open(self) -> bool:
        """Usable now: registered, not revoked, and the job still running (its cancel not
        asked for) on the node it registered from (after a requeue elsewhere the old
        node:port is someone else's), for an owner whose account is active. HAProxy routes
        exactly the open sessions."""
        return (
            self.state == self.State.READY
            and self.job.state == Job.State.RUNNING
            and self.job.cancel_requested_at is None
            and bool(self.host)
            and self.host == self.job.node
            and self.job.owner.is_active
        )

    @property
    def display_state(self) -> str:
        if self.state == self.State.CLOSED or self.job.is_final or self.job.cancel_requested_at:
            return "closed"
        return "ready" if self.is_open else "starting"  # ready: what HAProxy routes

    def issue_register_secret(self) -> str:
        secret = secrets.token_urlsafe(32)
        SessionLink.objects.filter(pk=self.pk).update(
            register_secret_hash=crypto.secret_hash(secret)
        )
        self.register_secret_hash = crypto.secret_hash(secret)
        return secret

    def check_register_secret(self, secret: str) -> bool:
        return crypto.secret_matches(self.register_secret_hash, secret)

    def upstream_token(self) -> str:
        return (
            crypto.decrypt(self.upstream_token_encrypted) if self.upstream_token_encrypted else ""
        )

    def mark_ready(self, host: str, port: int, token: str) -> bool:
        """Record where the notebook listens. Once per run of the job: a second
        registration is refused until a requeue resets the session."""
        now = timezone.now()
        updated = SessionLink.objects.filter(pk=self.pk, state=self.State.STARTING).update(
            state=self.State.READY,
            host=host,
            port=port,
            upstream_token_encrypted=crypto.encrypt(token),
            ready_at=now,
        )
        if updated:
            self.refresh_from_db()
            if not self.job.attempt:  # launch to ready (a requeued run's start is not timed)
                metrics.SESSION_READY_SECONDS.labels(self.job.kind).observe(
                    max(0.0, (now - self.job.created_at).total_seconds())
                )
            # Told durably (the outbox), once per run: the line names the run.
            run = f" (run {self.job.attempt + 1})" if self.job.attempt else ""
            self.job.note(f"Session ready on {host}{run}.", tell="session_ready")
        return bool(updated)

    @classmethod
    def restart_for(cls, job: Job) -> bool:
        """The job was requeued or moved: forget where its notebook was (node, port,
        token) and wait for the new run to register; the old route is never used again."""
        updated = cls.objects.filter(job=job, state=cls.State.READY).update(
            state=cls.State.STARTING,
            host="",
            port=None,
            upstream_token_encrypted="",
            ready_at=None,
        )
        if updated:
            signals.job_updated.send(sender=Job, job=job)
        return bool(updated)

    def close(self) -> None:
        if (
            SessionLink.objects.filter(pk=self.pk)
            .exclude(state=self.State.CLOSED)
            .update(state=self.State.CLOSED, closed_at=timezone.now(), upstream_token_encrypted="")
        ):
            self.refresh_from_db()
            signals.job_updated.send(sender=Job, job=self.job)

    # -- what jobs/ asks of session links (jobs.sessions.SessionLinks) ------------------
    @classmethod
    def prepare(cls, job: Job) -> tuple[str, str]:
        session = cls.for_job(job)
        secret = session.issue_register_secret()
        return secret, settings.PORTAL_URL + reverse("session-register", args=[session.public_id])

    @classmethod
    def waiting(cls, jobs: Sequence[Job]) -> list[Job]:
        starting = cls.objects.filter(job__in=jobs, state=cls.State.STARTING)
        ids = set(starting.values_list("job_id", flat=True))
        return [job for job in jobs if job.pk in ids]

    @classmethod
    def found(cls, job: Job, host: str, port: int, secret: str) -> bool:
        session = cls.objects.filter(job=job, state=cls.State.STARTING).first()
        return session is not None and session.mark_ready(host, port, secret)

    @classmethod
    def payload(cls, job: Job) -> dict:
        none = {"session_state": None, "session_open_url": None}
        if not job.has_session:  # a batch job has no link: no query for it
            return none
        try:
            session = job.session
        except ObjectDoesNotExist:
            return none
        state = session.display_state
        return {
            "session_state": state,
            "session_open_url": (
                reverse("session-open", args=[session.public_id]) if state == "ready" else None
            ),
        }


class SessionShare(models.Model):
    """Someone besides its owner may open a session (proxy/access.py decides, HAProxy
    enforces: proxy/routes.py pushes one map entry per person who may): a named person,
    every member of the job's project who may see the job, or a holder of
    ``proxy.open_others_sessions`` who opened it (kept so HAProxy lets their cookie
    through, and dropped with their permission)."""

    class Kind(models.TextChoices):
        PERSON = "person", "a named person"
        PROJECT = "project", "the job's project"
        STAFF = "staff", "an administrator who opened it"

    session = models.ForeignKey(SessionLink, on_delete=models.CASCADE, related_name="shares")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    # The named person or the administrator; empty for the project.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    granted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # A notebook shared acts as its owner: given only with the warning accepted.
    acts_as_owner = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "kind", "user"], name="one_share_per_person_and_kind"
            ),
            models.UniqueConstraint(
                fields=["session"],
                condition=models.Q(kind="project"),
                name="one_project_share_per_session",
            ),
        ]

    def __str__(self) -> str:
        who = "the project" if self.kind == self.Kind.PROJECT else str(self.user)
        return f"{self.session} shared with {who}"
