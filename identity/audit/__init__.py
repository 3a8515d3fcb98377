"""The audit log's one writer: every action the portal takes on a cluster on someone's
behalf is recorded here, as one ``AuditEvent`` row (identity/audit/models.py).

Recorded, where the portal user is known (the code that acts calls ``action()``):
submitting, cancelling and releasing jobs (jobs/tasks.py: the owner's account; a job
array's submission too), reading a job's log, listing its work directory and
downloading a file (the pages and the API: the user who asked, staff included, and the
job's account), a session job's registration (proxy/views.py: accepted or refused),
the catalog check and GPU type discovery (the admin's actions), the test of a
cluster account from the Account page; and, acting on no cluster, an open of someone
else's session (proxy/access.py) and API tokens made and revoked (``token_changed``:
the Account page, ``manage.py issue_token``, a sign-in that withdraws a person's access).

Not recorded: the portal's own bookkeeping, done for nobody in particular — the periodic
sync (squeue/sacct/condor_q), reading accounting, the metrics tail, reading a failed
job's stderr for its page, finding a session's connection file, and pinning a host key
(no login). These run on the same accounts but act for no one who asked.

A row says who (portal user and cluster user), what (action and target: a job id, a
path, an image, bounded), for which request (its request id, common/context.py), with which key (the certificate's key id the connection pool
sets in ``clusters.acting.key_id``; "" for a stored key) and the outcome: ``ok``,
``refused`` (the portal or the cluster said no by rule: a path outside the work
directory, a wrong registration secret) or ``failed`` (an error; its start is kept).
Writing the row never breaks the action: a failed write is logged and the action's own
result or exception goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import DatabaseError, transaction
from django.utils import timezone

from clusters import acting, files
from common import context
from identity.audit.models import KEY_ID_MAX, MESSAGE_MAX, TARGET_MAX, AuditEvent, bounded
from identity.tokens import ApiToken

log = logging.getLogger(__name__)

Action = AuditEvent.Action
Outcome = AuditEvent.Outcome

# A log followed by a page (every 5 s) or `portal logs -f` is read again and again: a
# successful read repeated within this many seconds (same user, account, target and key)
# is the row already written, not a new one.
FOLLOW_WINDOW = 300

# Exceptions that are the portal saying no by rule or to bad input (recorded as refused,
# not failed).
REFUSALS: tuple[type[Exception], ...] = (
    files.BadPath,
    files.NotARegularFile,
    PermissionDenied,
    ValidationError,
)


@dataclass
class Entry:
    """What the block tells the row when the outcome is not an exception: an action that
    catches its own errors (a check that records its findings, a task that keeps the
    error on the job) calls ``failed()`` or ``refused()``."""

    outcome: str = Outcome.OK
    message: str = ""

    def failed(self, message: object) -> None:
        self.outcome, self.message = Outcome.FAILED, str(message)

    def refused(self, message: object) -> None:
        self.outcome, self.message = Outcome.REFUSED, str(message)

    def note(self, message: object) -> None:
        """A remark on a successful action (e.g. a download's size)."""
        self.message = str(message)


@contextmanager
def action(
    what: str,
    *,
    user=None,
    account=None,
    cluster=None,
    target: object = "",
    repeat_window: int = 0,
    purpose: str = "",
) -> Iterator[Entry]:
    """Record the block as one action ``what`` (an ``AuditEvent.Action``) by ``user`` on
    ``account`` (a ClusterAccount; its cluster unless ``cluster`` is given). While it
    runs, ``acting.purpose`` names it and ``acting.requester`` the user (a certificate
    signed meanwhile carries both: the pool opens a connection per action) and
    ``acting.key_id`` starts empty; afterwards the row takes the key id the connection
    set. An exception is recorded (refused for REFUSALS, else failed) and re-raised.
    With ``repeat_window`` (seconds) a success the same as one recorded that recently
    adds no row (see FOLLOW_WINDOW). ``purpose``: what the certificate names instead of
    the action and its target (the requests of one upload into a folder share one
    connection, each still its own row)."""
    target_text = bounded(str(target), TARGET_MAX)
    entry = Entry()
    purpose_token = acting.purpose.set(bounded(purpose or f"{what} {target_text}".strip(), 200))
    action_token = acting.action.set(str(what))
    asked_by = user.get_username() if getattr(user, "is_authenticated", False) else ""
    requester = acting.requester.set(asked_by)
    key = acting.key_id.set("")
    where = cluster or (account.cluster if account is not None else None)
    try:
        with context.bind(user=asked_by or None, cluster=getattr(where, "name", None)):
            yield entry
    except REFUSALS as exc:
        entry.refused(exc)
        raise
    except BaseException as exc:
        entry.failed(f"{type(exc).__name__}: {exc}" if not str(exc) else exc)
        raise
    finally:
        used_key = acting.key_id.get()
        acting.key_id.reset(key)
        acting.requester.reset(requester)
        acting.purpose.reset(purpose_token)
        acting.action.reset(action_token)
        _write(what, user, account, cluster, target_text, used_key, entry, repeat_window)


def read_job_log(user, job, stream: str, offset: int | None = None) -> files.LogTail:
    """A job's log read for ``user`` (a page or the API), recorded as one file_read; a log
    followed by polling is one row per FOLLOW_WINDOW."""
    with action(
        Action.FILE_READ,
        user=user,
        account=job.cluster_account,
        cluster=job.cluster,
        target=f"job {job.pk} {stream}.log",
        repeat_window=FOLLOW_WINDOW,
    ):
        return files.read_job_log(job, stream, offset=offset)


def record(
    what: str,
    outcome: str,
    *,
    user=None,
    account=None,
    cluster=None,
    target: object = "",
    message: object = "",
) -> None:
    """Record an action that is not a block of code run here (a job's registration call:
    accepted or refused)."""
    entry = Entry(outcome, str(message))
    _write(what, user, account, cluster, bounded(str(target), TARGET_MAX), "", entry)


def token_changed(what: str, token, *, by=None, message: object = "") -> None:
    """One TOKEN_CREATE or TOKEN_REVOKE row for API token ``token``. The row's user is
    ``by``, the portal user who acted, or the token's owner when no portal user did (an
    administrator's ``manage.py issue_token``, the portal withdrawing a person's access):
    ``message`` then says who. The target names the token (id, first characters, name,
    scopes), never its secret."""
    owner = token.user
    name = " ".join(str(token.name).split())[:100]
    record(
        what,
        Outcome.OK,
        user=by if by is not None else owner,
        target=f"token {token.pk} ({token.hint}…, '{name}', {token.scopes}) of "
        f"{owner.get_username()}",
        message=message,
    )


def revoke_tokens_when_deactivated(sender, instance, **kwargs) -> None:
    """post_save of the user model (connected in JobsConfig.ready): a person deactivated
    in the portal (admin, a script, an OIDC refusal) loses every token at once, each with
    its TOKEN_REVOKE row."""
    if not instance.is_active:
        for token in ApiToken.objects.revoke_all(instance):
            token_changed(Action.TOKEN_REVOKE, token, message="the person was deactivated")


def _write(
    what, user, account, cluster, target: str, key_id: str, entry: Entry, repeat_window: int = 0
) -> None:
    if account is not None and cluster is None:
        cluster = account.cluster
    if user is not None and not getattr(user, "is_authenticated", False):
        user = None
    row = {
        "user": user,
        "username": user.get_username() if user is not None else "",
        "cluster": cluster,
        "cluster_name": cluster.name if cluster is not None else "",
        "cluster_username": account.username if account is not None else "",
        "action": what,
        "target": target,
        "key_id": bounded(key_id, KEY_ID_MAX),
        "outcome": entry.outcome,
    }
    try:
        if repeat_window and entry.outcome == Outcome.OK:
            since = timezone.now() - timedelta(seconds=repeat_window)
            if AuditEvent.objects.filter(at__gte=since, **row).exists():
                return
        # Its own savepoint: a failed write never spoils the caller's transaction.
        with transaction.atomic():
            AuditEvent.objects.create(
                message=bounded(entry.message, MESSAGE_MAX),
                request_id=context.current(),
                **row,
            )
    except (DatabaseError, ValueError, TypeError, AttributeError):
        # The action has happened (or failed) already: its result must not be lost.
        log.exception("audit: could not record %s %s (%s)", what, target, entry.outcome)


def prune(days: int, batch: int = 1000) -> int:
    """Delete rows older than ``days``, ``batch`` at a time (short transactions on a big
    table). Returns how many went."""
    removed = 0
    old = AuditEvent.objects.older_than(days)
    while True:
        ids = list(old.order_by("at").values_list("pk", flat=True)[:batch])
        if not ids:
            return removed
        removed += AuditEvent.objects.filter(pk__in=ids).delete()[0]
