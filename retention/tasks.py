"""Retention's work on a cluster, as the run's owner and within the task's deadline: a
plan's listing (a dry run), and its application, which lists again and deletes only what
the dry run said it would and still would now (a checkpoint registered meanwhile stays).
Both are audited; the application's row says what was freed."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from celery import shared_task
from django.db import close_old_connections
from django.utils import timezone

from clusters import deadline, pool, ssh
from clusters.models import ClusterAccount
from identity import audit
from jobs.task_helpers import PersonTask, person_limits
from retention import listing, verdicts
from retention.models import Plan
from retention.plan import PlanError

log = logging.getLogger(__name__)


class PlanTask(PersonTask):
    """PersonTask for a task that takes a plan's id (its run's owner)."""

    rows: Any = Plan.objects
    owner_field = "job__owner_id"


def _budget() -> float:
    left = deadline.left()
    return listing.MAX_SECONDS if left is None else max(1.0, min(listing.MAX_SECONDS, left - 5))


def _listed(account: ClusterAccount, plan: Plan) -> list[tuple[str, int]]:
    found = pool.with_connection(
        account,
        lambda conn: listing.read(
            conn, plan.job.work_dir, plan.rule["patterns"], timeout=_budget()
        ),
        retry=False,
    )
    return [(f.path, f.bytes) for f in found]


def _fail(plan: Plan, message: str) -> None:
    Plan.objects.filter(pk=plan.pk).update(
        state=Plan.State.FAILED, message=message[:2000], updated_at=timezone.now()
    )


def _plan_and_account(plan_id: int, state: str) -> tuple[Plan | None, ClusterAccount | None]:
    plan = (
        Plan.objects.select_related("job", "job__cluster", "job__owner")
        .filter(pk=plan_id, state=state)
        .first()
    )
    if plan is None:
        return None, None
    account = ClusterAccount.for_user(plan.job.cluster, plan.job.owner)
    if account is None:
        _fail(plan, f"No account on cluster {plan.job.cluster.name} to read the files as.")
    return plan, account


@shared_task(
    name="retention.tasks.make_plan",
    bind=True,
    acks_late=True,
    max_retries=5,
    **person_limits(PlanTask),
)
def make_plan(self, plan_id: int) -> None:
    """A LISTING plan's checkpoints and verdicts: READY (the dry run) or FAILED with why."""
    try:
        plan, account = _plan_and_account(plan_id, Plan.State.LISTING)
        if plan is None or account is None:
            return
        try:
            with audit.action(
                audit.Action.FILE_LIST,
                user=plan.job.owner,
                account=account,
                target=f"checkpoints of job {plan.job_id} (retention plan {plan.pk})",
            ):
                found = _listed(account, plan)
            items = verdicts.of(plan.job, plan, found)
        except (listing.ListingError, PlanError) as exc:
            _fail(plan, str(exc))
            return
        except ssh.ClusterError as exc:
            if self.request.retries >= self.max_retries:
                _fail(plan, f"The cluster could not be read: {str(exc)[:300]}")
                return
            raise self.retry(countdown=min(60, 2 ** (self.request.retries + 1))) from None
        Plan.objects.filter(pk=plan.pk, state=Plan.State.LISTING).update(
            state=Plan.State.READY,
            items=[i.as_dict() for i in items],
            bytes_on_disk=sum(i.bytes for i in items),
            bytes_to_free=sum(i.bytes for i in items if not i.keep),
            updated_at=timezone.now(),
        )
    finally:
        close_old_connections()


@shared_task(
    name="retention.tasks.apply_plan",
    bind=True,
    acks_late=True,
    max_retries=3,
    **person_limits(PlanTask),
)
def apply_plan(self, plan_id: int) -> None:
    """An APPLYING plan carried out: what the dry run would delete and a fresh listing
    still would, deleted as the run's owner; APPLIED with what went, or FAILED."""
    try:
        plan, account = _plan_and_account(plan_id, Plan.State.APPLYING)
        if plan is None or account is None:
            return
        promised = set(plan.to_delete)
        with audit.action(
            audit.Action.RETENTION,
            user=plan.job.owner,
            account=account,
            target=f"job {plan.job_id} by retention plan {plan.pk}",
        ) as entry:
            try:
                now = verdicts.of(plan.job, plan, _listed(account, plan))
                doomed = [i for i in now if not i.keep and i.path in promised]
                if doomed:
                    pool.with_connection(
                        account,
                        lambda conn: listing.delete(
                            conn, plan.job.work_dir, [i.path for i in doomed], timeout=_budget()
                        ),
                        retry=False,
                    )
                left = {p for p, _ in _listed(account, plan)}
            except (listing.ListingError, PlanError) as exc:
                entry.failed(exc)
                _fail(plan, str(exc))
                return
            except ssh.ClusterError as exc:
                entry.failed(exc)
                if self.request.retries >= self.max_retries:
                    _fail(plan, f"The cluster could not be reached: {str(exc)[:300]}")
                    return
                raise self.retry(countdown=min(60, 2 ** (self.request.retries + 1))) from None
            gone = [i for i in doomed if i.path not in left]
            freed = sum(i.bytes for i in gone)
            entry.message = f"{len(gone)} checkpoint(s) deleted, {freed} bytes freed"
        message = ""
        if len(gone) < len(promised):
            message = (
                f"{len(promised) - len(gone)} of the dry run's deletions were not made: "
                "kept since (registered, or now among the best or latest) or not deletable."
            )
        Plan.objects.filter(pk=plan.pk).update(
            state=Plan.State.APPLIED,
            deleted=[i.path for i in gone],
            bytes_freed=freed,
            message=message,
            applied_at=timezone.now(),
            updated_at=timezone.now(),
        )
        log.info("retention plan %s: %d deleted, %d bytes freed", plan.pk, len(gone), freed)
    finally:
        close_old_connections()


# A plan untouched this long in a working state has lost its task (a worker killed, a
# broker restarted empty): sent again. Each task acts only on a plan still in its state.
RESEND_AFTER = timedelta(minutes=3)


@shared_task(name="retention.tasks.resend_lost")
def resend_lost() -> int:
    stale = Plan.objects.filter(updated_at__lt=timezone.now() - RESEND_AFTER)
    sent = 0
    for state, task in ((Plan.State.LISTING, make_plan), (Plan.State.APPLYING, apply_plan)):
        due = list(stale.filter(state=state).values_list("pk", flat=True)[:500])
        Plan.objects.filter(pk__in=due).update(updated_at=timezone.now())
        for pk in due:
            task.delay(pk)
        sent += len(due)
    return sent
