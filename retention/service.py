"""Retention's rules, written once for the REST API, the CLI and the pages: whose policy a
run follows, who may set one, who may ask for a plan and apply it (verdicts.py: what a
plan holds).
Errors are RetentionError: a message for the person and an HTTP status."""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction

from common.api_errors import Refusal
from jobs.models import Job
from projects import access
from projects.models import Role, at_least
from retention import tasks
from retention.models import MAX_PATTERNS, PATTERN_CHARS, Plan, Policy

MAX_KEEP = 1000
METRIC = re.compile(r"[^\x00-\x1f]{1,100}\Z")
PATTERN = re.compile(r"[^\x00-\x1f/]{1,100}\Z")


class RetentionError(Refusal):
    """A rule of retention said no (the API answers it with common.api_errors.Refused)."""


def check_rule(data: Any, base: Policy | None = None) -> dict[str, Any]:
    """A policy's fields from what a person sent (unknown keys refused), over ``base``'s."""
    if not isinstance(data, dict):
        raise RetentionError("A policy is an object.")
    known = {"keep_best", "metric", "mode", "keep_latest", "patterns"}
    if unknown := sorted(set(data) - known)[:5]:
        raise RetentionError(f"Unknown field(s): {', '.join(map(str, unknown))[:200]}.")
    rule: dict[str, Any] = {
        "keep_best": base.keep_best if base else 1,
        "metric": base.metric if base else "",
        "mode": base.mode if base else "min",
        "keep_latest": base.keep_latest if base else 1,
        "patterns": list(base.patterns) if base else Policy._meta.get_field("patterns").default(),
    }
    rule.update(data)
    for key in ("keep_best", "keep_latest"):
        value = rule[key]
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_KEEP:
            raise RetentionError(f"{key} is a whole number from 0 to {MAX_KEEP}.")
    if rule["keep_best"] + rule["keep_latest"] < 1:
        raise RetentionError("A policy keeps at least one checkpoint (keep_best or keep_latest).")
    metric = rule["metric"]
    if not isinstance(metric, str) or (metric and not METRIC.match(metric)):
        raise RetentionError("metric is a metric's name: up to 100 characters, no control ones.")
    if rule["keep_best"] and not metric:
        raise RetentionError("keep_best needs the metric that says which is best.")
    if rule["mode"] not in Policy.Mode.values:
        raise RetentionError("mode is 'min' (lower is better) or 'max' (higher is better).")
    patterns = rule["patterns"]
    if (
        not isinstance(patterns, list)
        or not 1 <= len(patterns) <= MAX_PATTERNS
        or not all(isinstance(p, str) and PATTERN.match(p) for p in patterns)
    ):
        raise RetentionError(
            f"patterns is a list of 1 to {MAX_PATTERNS} names (shell globs, up to "
            f"{PATTERN_CHARS} characters, no '/')."
        )
    return rule


def policy_of(job: Job) -> Policy | None:
    """The policy a run follows: its project's, else its owner's own (None: neither)."""
    if job.project_id is not None:
        found = Policy.objects.filter(project_id=job.project_id).first()
        if found is not None:
            return found
    return Policy.objects.filter(owner_id=job.owner_id).first()


def may_set(user: Any, project_id: int | None) -> bool:
    """A person's own policy: theirs; a project's: its managers' (and staff's)."""
    if project_id is None:
        return bool(getattr(user, "is_authenticated", False))
    if access.sees_every_job(user):
        return True
    return at_least(access.role_in(user, project_id) or "", Role.MANAGER)


def set_policy(user: Any, project_id: int | None, data: Any) -> Policy:
    if not may_set(user, project_id):
        raise RetentionError("Only the project's managers set its retention policy.", 403)
    where = {"project_id": project_id} if project_id is not None else {"owner_id": user.pk}
    with transaction.atomic():
        current = Policy.objects.select_for_update().filter(**where).first()
        rule = check_rule(data, current)
        policy = current or Policy(**where)
        for key, value in rule.items():
            setattr(policy, key, value)
        policy.updated_by = user
        policy.save()
    return policy


def may_plan(user: Any, job: Job) -> bool:
    """A plan deletes as the run's owner on the cluster: theirs alone to ask for and apply
    (never staff's nor a colleague's: nobody else may be them there)."""
    return access.may_enter(user, job.owner_id)


def ask(user: Any, job: Job, data: Any = None) -> Plan:
    """A dry run of the run's policy (or of ``data``, a policy's fields over it), made by a
    task; the plan starts LISTING."""
    if not may_plan(user, job):
        raise RetentionError("Only the run's owner plans its retention.", 403)
    if not job.is_final:
        raise RetentionError("The run has not ended: its checkpoints may still be in use.", 409)
    if not job.work_dir:
        raise RetentionError("The run has no work folder on the cluster.", 409)
    policy = policy_of(job)
    if policy is None and not data:
        raise RetentionError(
            "There is no retention policy for this run: set yours (or the project's "
            "managers theirs), or send keep_best, metric and keep_latest with the request."
        )
    rule = check_rule(data or {}, policy)
    rule["policy"] = policy.pk if policy else None
    plan = Plan.objects.create(job=job, requested_by=user, rule=rule)
    transaction.on_commit(lambda: tasks.make_plan.delay(plan.pk))
    return plan


def apply(user: Any, plan: Plan) -> Plan:
    if not may_plan(user, plan.job):
        raise RetentionError("Only the run's owner applies its retention.", 403)
    moved = Plan.objects.filter(pk=plan.pk, state=Plan.State.READY).update(
        state=Plan.State.APPLYING, message=""
    )
    if not moved:
        raise RetentionError(f"The plan is {plan.state}: only a ready dry run is applied.", 409)
    plan.refresh_from_db()
    transaction.on_commit(lambda: tasks.apply_plan.delay(plan.pk))
    return plan
