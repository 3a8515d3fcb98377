"""What a plan holds for what the cluster listed: the policy's metric at each
checkpoint's step (the run's series), the registered versions' files among them, and the
verdicts (plan.py) over both."""

from __future__ import annotations

from django.db.models import Q

from jobs.models import Job
from metrics.models import MetricPoint, MetricSeries
from registry.models import ModelVersion, ancestors
from retention import plan as planning
from retention.models import Plan


def rule_of(plan: Plan) -> planning.Rule:
    r = plan.rule
    return planning.Rule(r["keep_best"], r["metric"], r["mode"], r["keep_latest"])


def values_at(job: Job, metric: str, steps: set[int]) -> dict[int, float | None]:
    """The run's ``metric`` (rank 0, its last attempt) at each step: the value logged at
    the last step at or before it."""
    series = (
        MetricSeries.objects.filter(job=job, key=metric, rank=0, system=False)
        .order_by("-attempt")
        .first()
    )
    if series is None or not steps:
        return {}
    found: dict[int, float | None] = {}
    for step in sorted(steps):
        point = (
            MetricPoint.objects.filter(series=series, step__lte=step)
            .order_by("-step", "-seq")
            .values_list("value", flat=True)
            .first()
        )
        found[step] = point
    return found


def protected_in(job: Job) -> dict[str, str]:
    """Registered versions' files in or over the run's folder: relative path -> what."""
    top = job.work_dir.rstrip("/")
    versions = (
        ModelVersion.objects.filter(cluster_id=job.cluster_id)
        .exclude(status=ModelVersion.Status.FAILED)
        .filter(Q(path__startswith=top + "/") | Q(path__in=ancestors(top)))
        .select_related("model")
    )
    found: dict[str, str] = {}
    for version in versions[:10_000]:
        relative = version.path[len(top) + 1 :] if version.path.startswith(top + "/") else ""
        found[relative or "."] = f"{version.model.name} v{version.version}"
    return found


def of(job: Job, plan: Plan, found: list[tuple[str, int]]) -> list[planning.Item]:
    """The plan's items for what the cluster listed now."""
    rule = rule_of(plan)
    protected = protected_in(job)
    if "." in protected:  # the whole folder (or one over it) is a version's: keep it all
        return [
            planning.Item(p, b, planning.step_of(p), None, True, f"registered: {protected['.']}")
            for p, b in found
        ]
    steps = {s for p, _ in found if (s := planning.step_of(p)) is not None}
    values = values_at(job, rule.metric, steps) if rule.keep_best else {}
    return planning.plan(found, rule, values, protected)
