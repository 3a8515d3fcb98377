"""What jobs used, from accounting (JobAttempt: each run's GPUs, CPUs and elapsed time, every
attempt of a requeued job): GPU-hours, CPU-hours and wall hours per month, user, Slurm
account and cluster, the figures an allocation request needs. And which running jobs hold
GPUs idle, from the metrics client's nvidia-smi samples."""

from __future__ import annotations

import csv
import io
import re
import time
from dataclasses import dataclass
from datetime import date

from django.conf import settings
from django.db.models import Count, F, Max, Min, Q, Sum, Value
from django.db.models.functions import Coalesce, NullIf, TruncMonth

from common.text import spreadsheet_cell
from jobs.models import Job, JobAttempt
from metrics.models import MetricPoint
from projects.access import sees_every_job

# The sampler's per-GPU utilisation series: "sys/gpu<index>_util_percent@<node>".
GPU_UTIL = Q(series__key__startswith="sys/gpu") & Q(series__key__contains="_util_percent@")


@dataclass(frozen=True)
class UsageRow:
    month: date
    user: str
    account: str
    cluster: str
    jobs: int
    gpu_hours: float
    cpu_hours: float
    wall_hours: float


def attempts_for(user, everyone: bool = False):
    """The runs whose usage ``user`` may see: their own, or everyone's (staff)."""
    runs = JobAttempt.objects.filter(started_at__isnull=False)
    return runs if everyone else runs.filter(job__owner=user)


def monthly(runs, since: date | None = None, until: date | None = None) -> list[UsageRow]:
    """Usage per month (of each run's start), user, Slurm account and cluster, newest month
    first; one query however many runs."""
    if since:
        runs = runs.filter(started_at__date__gte=since)
    if until:
        runs = runs.filter(started_at__date__lt=until)
    rows = (
        runs.annotate(
            month=TruncMonth("started_at"),
            # As accounting recorded it; else as asked (the cluster's default if nothing).
            slurm_account=Coalesce(
                NullIf(F("account"), Value("")),
                NullIf(F("job__account"), Value("")),
                F("job__cluster__default_account"),
            ),
        )
        .values("month", "job__owner__username", "slurm_account", "job__cluster__name")
        .annotate(
            jobs=Count("job", distinct=True),
            gpu_seconds=Sum(F("gpus") * F("elapsed_seconds")),
            cpu_seconds=Sum(F("cpus") * F("elapsed_seconds")),
            wall_seconds=Sum("elapsed_seconds"),
        )
        .order_by("-month", "job__owner__username", "slurm_account", "job__cluster__name")
    )
    return [
        UsageRow(
            month=row["month"].date() if hasattr(row["month"], "date") else row["month"],
            user=row["job__owner__username"],
            account=row["slurm_account"] or "",
            cluster=row["job__cluster__name"],
            jobs=row["jobs"],
            gpu_hours=(row["gpu_seconds"] or 0) / 3600,
            cpu_hours=(row["cpu_seconds"] or 0) / 3600,
            wall_hours=(row["wall_seconds"] or 0) / 3600,
        )
        for row in rows[: settings.PORTAL_USAGE_MAX_ROWS]
    ]


MONTH = re.compile(r"(\d{4})-(\d{2})\Z")


def parse_month(raw: str) -> date:
    """'2026-11' -> 1 November 2026; ValueError with the reason otherwise."""
    match = MONTH.match(raw.strip())
    if not (match and 1 <= int(match[2]) <= 12 and 2000 <= int(match[1]) <= 2999):
        raise ValueError(f"{raw[:20]!r} is not a month like 2026-11.")
    return date(int(match[1]), int(match[2]), 1)


def next_month(day: date) -> date:
    return date(day.year + day.month // 12, day.month % 12 + 1, 1)


def query(user, params) -> tuple[list[UsageRow], dict[str, str]]:
    """The rows the Usage page and API show for ``params`` (``from``/``to``: months, both
    included; ``user``: staff only; ``cluster``), and a message per parameter that could
    not be used (that filter is then left out)."""
    everyone = sees_every_job(user)
    errors: dict[str, str] = {}
    months: dict[str, date | None] = {"from": None, "to": None}
    for name in months:
        raw = (params.get(name) or "").strip()
        if raw:
            try:
                months[name] = parse_month(raw)
            except ValueError as exc:
                errors[name] = str(exc)
    runs = attempts_for(user, everyone)
    who = (params.get("user") or "").strip()[:150]
    if who and everyone:
        runs = runs.filter(job__owner__username=who)
    elif who:
        errors["user"] = "Only staff see other users' usage."
    cluster = (params.get("cluster") or "").strip()[:64]
    if cluster:
        runs = runs.filter(job__cluster__name=cluster)
    until = months["to"]
    return monthly(runs, months["from"], next_month(until) if until else None), errors


def totals(rows: list[UsageRow]) -> dict[str, float]:
    """The rows' sums (a job whose runs span two months counts in each)."""
    return {
        "jobs": sum(r.jobs for r in rows),
        "gpu_hours": sum(r.gpu_hours for r in rows),
        "cpu_hours": sum(r.cpu_hours for r in rows),
        "wall_hours": sum(r.wall_hours for r in rows),
        "truncated": len(rows) >= settings.PORTAL_USAGE_MAX_ROWS,
    }


def as_csv(rows: list[UsageRow]) -> str:
    """One line per row; text cells that a spreadsheet would run as a formula are quoted."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(
        ["month", "user", "account", "cluster", "jobs", "gpu_hours", "cpu_hours", "wall_hours"]
    )
    for r in rows:
        writer.writerow(
            [
                r.month.strftime("%Y-%m"),
                spreadsheet_cell(r.user),
                spreadsheet_cell(r.account),
                spreadsheet_cell(r.cluster),
                r.jobs,
                f"{r.gpu_hours:.3f}",
                f"{r.cpu_hours:.3f}",
                f"{r.wall_hours:.3f}",
            ]
        )
    return out.getvalue()


def of_jobs(jobs) -> dict[str, float]:
    """GPU-hours, CPU-hours and wall hours of ``jobs`` in all (an experiment's trials)."""
    found = JobAttempt.objects.filter(job__in=jobs).aggregate(
        gpu=Sum(F("gpus") * F("elapsed_seconds")),
        cpu=Sum(F("cpus") * F("elapsed_seconds")),
        wall=Sum("elapsed_seconds"),
    )
    return {
        "gpu_hours": (found["gpu"] or 0) / 3600,
        "cpu_hours": (found["cpu"] or 0) / 3600,
        "wall_hours": (found["wall"] or 0) / 3600,
    }


# -- GPUs held idle ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Idle:
    job_id: int
    peak_percent: float  # the highest utilisation of any of its GPUs in the window
    minutes: float  # the window: idle for at least this long

    @property
    def window_text(self) -> str:
        """'30 minutes', '18 seconds'."""
        if self.minutes >= 1:
            return f"{self.minutes:g} minute{'s' if self.minutes != 1 else ''}"
        return f"{round(self.minutes * 60)} seconds"


def idle_gpu_jobs(
    jobs,
    now: float | None = None,
    *,
    minutes: float | None = None,
    percent: float | None = None,
) -> dict[int, Idle]:
    """Running GPU jobs among ``jobs`` whose every GPU sample of the last ``minutes``
    (PORTAL_GPU_IDLE_MINUTES) is at most ``percent`` (PORTAL_GPU_IDLE_PERCENT), sampled over
    that whole window and recently (a job whose sampler stopped is not judged). Two queries."""
    now = time.time() if now is None else now
    minutes = settings.PORTAL_GPU_IDLE_MINUTES if minutes is None else minutes
    percent = settings.PORTAL_GPU_IDLE_PERCENT if percent is None else percent
    window = minutes * 60
    ids = list(jobs.filter(state=Job.State.RUNNING, gpus__gt=0).values_list("pk", flat=True)[:5000])
    if not ids:
        return {}
    # The current run only: a requeued job's earlier attempt says nothing of this one.
    points = MetricPoint.objects.filter(
        GPU_UTIL, series__job_id__in=ids, series__attempt=F("series__job__attempt")
    )
    recent = (
        points.filter(time__gte=now - window)
        .values("series__job_id")
        .annotate(peak=Max("value"), last=Max("time"), n=Count("seq"))
    )
    first = dict(
        points.values("series__job_id")
        .annotate(first=Min("time"))
        .values_list("series__job_id", "first")
    )
    idle = {}
    for row in recent:
        job_id = row["series__job_id"]
        sampled_since = first.get(job_id)
        if (
            row["peak"] <= percent
            and sampled_since is not None
            and sampled_since <= now - window
            and row["last"] >= now - max(300.0, window / 6)
        ):
            idle[job_id] = Idle(job_id, row["peak"], minutes)
    return idle


# -- The staff's efficiency digest ---------------------------------------------------------------
MAX_DIGEST_JOBS = 20000


@dataclass
class Efficiency:
    """One user's GPU jobs on one partition: GPU-hours held (accounting) and the part of
    them at or below PORTAL_GPU_IDLE_PERCENT (the share of its nvidia-smi samples that were;
    a job without samples counts as not idle), worst jobs first: (job id, idle GPU-hours)."""

    user: str
    partition: str
    jobs: int = 0
    gpu_hours: float = 0.0
    idle_gpu_hours: float = 0.0
    worst: list[tuple[int, float]] | None = None

    @property
    def idle_share(self) -> float:
        return self.idle_gpu_hours / self.gpu_hours if self.gpu_hours else 0.0


def efficiency(since, until=None, worst: int = 3) -> list[Efficiency]:
    """Per user and partition, the GPU runs that started in [since, until): most idle
    GPU-hours first. Three queries, bounded."""
    runs = JobAttempt.objects.filter(started_at__gte=since, gpus__gt=0)
    if until is not None:
        runs = runs.filter(started_at__lt=until)
    held = dict(
        runs.values("job_id")
        .annotate(seconds=Sum(F("gpus") * F("elapsed_seconds")))
        .values_list("job_id", "seconds")[:MAX_DIGEST_JOBS]
    )
    samples = {
        row["series__job_id"]: row
        for row in MetricPoint.objects.filter(GPU_UTIL, series__job_id__in=list(held))
        .values("series__job_id")
        .annotate(
            n=Count("seq"), low=Count("seq", filter=Q(value__lte=settings.PORTAL_GPU_IDLE_PERCENT))
        )
    }
    groups: dict[tuple[str, str], Efficiency] = {}
    per_job: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for job in Job.objects.filter(pk__in=list(held)).values(
        "pk", "owner__username", "partition__cluster__name", "partition__name"
    ):
        key = (
            job["owner__username"],
            f"{job['partition__cluster__name']}/{job['partition__name']}",
        )
        row = groups.setdefault(key, Efficiency(*key))
        hours = (held[job["pk"]] or 0) / 3600
        sampled = samples.get(job["pk"])
        idle = hours * sampled["low"] / sampled["n"] if sampled and sampled["n"] else 0.0
        row.jobs += 1
        row.gpu_hours += hours
        row.idle_gpu_hours += idle
        per_job.setdefault(key, []).append((job["pk"], idle))
    for key, row in groups.items():
        row.worst = sorted((j for j in per_job[key] if j[1] > 0), key=lambda j: -j[1])[:worst]
    return sorted(groups.values(), key=lambda r: (-r.idle_gpu_hours, r.user, r.partition))


def digest_text(rows: list[Efficiency], days: int, base_url: str) -> str:
    """The weekly email: one line per user and partition, worst jobs linked."""
    lines = [
        f"GPU efficiency of the last {days} days: GPU-hours held and at or below "
        f"{settings.PORTAL_GPU_IDLE_PERCENT:g}% utilisation, per user and partition.",
        "",
    ]
    for r in rows:
        lines.append(
            f"{r.user} on {r.partition}: {r.jobs} jobs, {r.gpu_hours:.1f} GPU-h held, "
            f"{r.idle_gpu_hours:.1f} idle ({r.idle_share:.0%})"
        )
        lines += [
            f"  job {pk}: {idle:.1f} idle GPU-h {base_url}/jobs/{pk}/" for pk, idle in r.worst or []
        ]
    if not rows:
        lines.append("No GPU jobs started in that time.")
    lines += ["", f"The page: {base_url}/usage/efficiency/?days={days}"]
    return "\n".join(lines)
