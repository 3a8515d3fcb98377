"""What a comparison of runs shows, in one place: the page, the API and ``portal compare``
all call ``compare()``.

**The table** has a row per run and a column per field whose value *differs* between the
runs (image, cluster, partition, resources, the command's words, each parameter, tags);
fields equal for all are folded into ``same``. A command column shows only the words not
shared by every command; a tags column only the tags not on every run. Per metric each
row has the *last* value (rank 0, latest attempt), the *best* and the *step of best*. Best
is the minimum for metrics whose name says they should fall (it contains ``loss``,
``err``, ``perplexity``, ``ppl``, ``mse``, ``mae``, ``wer``, ``cer``, ``regret``, ``time``
or ``latency``) and the maximum for every other one (accuracy, reward, ...). Rows sort
by any column (``sort=param.lr``, ``sort=-metric.val_accuracy.best``).

**The curves** (one chart per metric) never read metric points. Each series carries a
summary of 64 step buckets (metrics/summary.py) kept up to date at ingest; a
chart brings every run's summary to the widest bucket width among them (exact, widths
are powers of two), takes each run's mean per bucket, and, when grouping, each group's
mean with a band of ± one (population) standard deviation or min–max *across the runs'
bucket means*. A page of 1,000 runs × 5 metrics therefore reads 5,000 rows of 2.6 kB in
one query, whatever the runs' lengths (one numpy array over all their bytes does the
merging and the group statistics; jobs and tags are read as values, not model
instances), and draws at most 64 points per curve: the group
curves are downsampled per group, server-side, and single runs are drawn faded beneath
from the same buckets. ``x=time`` places a bucket at its points' mean time since the
run's first point. A requeued job's attempts are merged into one curve.

A comparison covers at most ``PORTAL_COMPARE_MAX_RUNS`` runs (1,000 by default, what
bench/compare.py and bench/load.py measure): past it, it is refused with a message that
says the limit (a 400 from the API, the page's error), never computed.

A **baseline** is a run (``baseline=123``, added to the selection if the person may see
it) or a group (``baseline=group:0.01``), drawn on every chart.
"""

from __future__ import annotations

import re
import shlex
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from django.conf import settings
from django.db.models import QuerySet
from django.urls import reverse

from jobs.models import Job, JobTag
from metrics.compare.query import BadQuery, parse, parse_ids, quote, select
from metrics.models import MetricSeries
from metrics.summary import BUCKETS, Summary, mean_matrix

FALLING = re.compile(r"loss|err|perplexity|ppl|mse|mae|wer|cer|regret|time|latency", re.I)
GROUP = re.compile(
    r"^(image|cluster|partition|state|experiment|tag:[A-Za-z0-9._:=+-]{1,64}|param\.[A-Za-z0-9_.@/+-]{1,100})\Z"
)
SORT = re.compile(r"^-?[A-Za-z0-9_.:@/+=-]{1,200}\Z")
NONE = "(none)"
FIELDS = ("image", "cluster", "partition", "resources", "command", "tags")


def goal(metric: str) -> str:
    """ "min" for a metric that should fall (loss, error, ...), else "max"."""
    return "min" if FALLING.search(metric) else "max"


@dataclass(frozen=True)
class Options:
    q: str = ""
    ids: tuple[int, ...] = ()
    group: str = ""
    baseline: str = ""
    x: str = "step"
    band: str = "std"
    sort: str = ""

    @classmethod
    def parse(cls, params) -> Options:
        """From a page's or the API's query string (a QueryDict or dict); BadQuery if bad."""
        get = params.get
        q = get("q") or ""
        parse(q)  # fail early, with the term's message
        group = get("group") or ""
        if group and not GROUP.match(group):
            raise BadQuery(
                f"group: {quote(group)} is not image, cluster, partition, state, experiment, "
                "tag:PREFIX or param.NAME."
            )
        baseline = get("baseline") or ""
        if baseline and not (re.fullmatch(r"\d{1,18}", baseline) or baseline.startswith("group:")):
            raise BadQuery(f"baseline: a run's id or group:VALUE, not {quote(baseline)}.")
        x = get("x") or "step"
        if x not in ("step", "time"):
            raise BadQuery(f"x: step or time, not {quote(x)}.")
        band = get("band") or "std"
        if band not in ("std", "minmax"):
            raise BadQuery(f"band: std or minmax, not {quote(band)}.")
        sort = get("sort") or ""
        if sort and not SORT.match(sort):
            raise BadQuery(f"sort: a column name, not {quote(sort)}.")
        ids = ",".join(params.getlist("ids")) if hasattr(params, "getlist") else get("ids")
        return cls(q, parse_ids(ids or ""), group, baseline[:200], x, band, sort)

    def as_dict(self) -> dict:
        return {
            "q": self.q,
            "ids": ",".join(map(str, self.ids)),
            "group": self.group,
            "baseline": self.baseline,
            "x": self.x,
            "band": self.band,
            "sort": self.sort,
        }


# -- the runs' fields -----------------------------------------------------------------------


def _words(command: str) -> list[str]:
    if not any(c in command for c in "\"'\\"):
        return command.split()  # nothing quoted: what shlex would say, 20x sooner
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


@dataclass
class Row:
    """What a comparison reads of a job (one values() query, no model instances)."""

    pk: int
    name: str
    state: str
    command: str
    params: dict
    cpus: int
    memory_gb: int
    time_limit_minutes: int
    gpus: int
    gpu_type: str
    nodes: int
    tasks_per_node: int
    image: str
    cluster: str
    partition: str
    experiment: int | None


ROW = (
    "pk",
    "name",
    "state",
    "command",
    "params",
    "cpus",
    "memory_gb",
    "time_limit_minutes",
    "gpus",
    "gpu_type",
    "nodes",
    "tasks_per_node",
    "image__slug",
    "cluster__name",
    "partition__name",
    "trial__experiment_id",
)


def resources(job: Row) -> str:
    text = f"{job.cpus} CPU, {job.memory_gb} GB, {job.time_limit_minutes} min"
    if job.gpus:
        text = f"{job.gpus} GPU{' ' + job.gpu_type if job.gpu_type else ''}, " + text
    if job.nodes > 1 or job.tasks_per_node > 1:
        text += f", {job.nodes}×{job.tasks_per_node} tasks"
    return text


def _fields(job: Row, tags: list[str]) -> dict[str, object]:
    out: dict[str, object] = {
        "image": job.image,
        "cluster": job.cluster,
        "partition": job.partition,
        "resources": resources(job),
        "command": job.command,
        "tags": tags,
    }
    for key, value in sorted((job.params or {}).items()):
        out[f"param.{key}"] = value
    return out


def group_of(option: str, job: Row, fields: dict[str, object]) -> str:
    if not option:
        return ""
    if option == "state":
        return job.state
    if option == "experiment":
        return NONE if job.experiment is None else str(job.experiment)
    if option.startswith("tag:"):
        prefix = option[4:]
        tags = fields["tags"]
        assert isinstance(tags, list)
        return next((t for t in tags if t.startswith(prefix)), NONE)
    value = fields.get(option)
    return NONE if value is None else str(value)


def _natural(value: str) -> tuple:
    """Sort key putting numbers in numeric order ("2" before "10", "lr=0.001" < "lr=0.01")."""
    parts = re.split(r"(-?\d+(?:\.\d+)?(?:e-?\d+)?)", value)
    return tuple((0, float(p), "") if i % 2 else (1, 0.0, p) for i, p in enumerate(parts))


# -- the comparison -------------------------------------------------------------------------


@dataclass
class Comparison:
    options: Options
    runs: list[dict] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    same: list[dict] = field(default_factory=list)
    metrics: list[dict] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    charts: list[dict] = field(default_factory=list)
    group_choices: list[str] = field(default_factory=list)  # what "group by" can take here

    def as_dict(self) -> dict:
        return {
            "options": self.options.as_dict(),
            "count": len(self.runs),
            "columns": self.columns,
            "same": self.same,
            "metrics": self.metrics,
            "groups": self.groups,
            "runs": self.runs,
            "charts": self.charts,
            "group_choices": self.group_choices,
            "buckets": BUCKETS,
        }


def _jobs(user, options: Options) -> QuerySet[Job]:
    ids = options.ids
    if options.baseline.isdigit():
        ids = (*ids, int(options.baseline))
    return select(user, options.q, ids).order_by("pk")


def _summaries(jobs: QuerySet[Job]) -> dict[int, dict[str, tuple[Summary, float | None, int]]]:
    """Per job and metric: the merged summary of rank 0's attempts, the latest attempt's
    last value, and its attempt number. One query."""
    rows = (
        MetricSeries.objects.filter(job__in=jobs.values("pk"), rank=0, system=False)
        .exclude(key__startswith="sys/")
        .order_by("job_id", "key", "attempt")
        .values_list("job_id", "key", "attempt", "last_value", "summary")
    )
    out: dict[int, dict[str, tuple[Summary, float | None, int]]] = defaultdict(dict)
    for job_id, key, attempt, last, raw in rows:
        summary = Summary.from_bytes(raw)
        if key in out[job_id]:
            summary = out[job_id][key][0].merge(summary)
        out[job_id][key] = (summary, last, attempt)
    return out


def _sort(runs: list[dict], sort: str) -> None:
    if not sort:
        return
    reverse = sort.startswith("-")
    name = sort.lstrip("-")

    def key(run: dict):
        if name in ("id", "name", "state", "group"):
            value = run[name]
        elif name.startswith("metric.") and name.count(".") >= 2:
            metric, _, part = name[7:].rpartition(".")
            value = (run["metrics"].get(metric) or {}).get(part)
        else:
            value = run["all"].get(name)
        if value is None:
            return (1, 0, "")
        if isinstance(value, int | float) and not isinstance(value, bool):
            return (0, value, "")
        return (0, 0, str(value))

    present = [r for r in runs if key(r)[0] == 0]
    missing = [r for r in runs if key(r)[0] == 1]
    present.sort(key=key, reverse=reverse)
    runs[:] = present + missing  # runs without the value last, either way


def _list(values: np.ndarray) -> list[float | None]:
    """JSON-ready: NaN (an empty bucket) is None, a gap in the curve."""
    return [None if v != v else v for v in values.tolist()]


def _band(values: np.ndarray, band: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per column (bucket), over the rows (runs) that have a value: mean and band."""
    empty = np.isnan(values)
    count = (~empty).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(empty, 0.0, values).sum(axis=0) / count
        if band == "minmax":
            return (
                mean,
                np.where(count, np.where(empty, np.inf, values).min(axis=0), np.nan),
                np.where(count, np.where(empty, -np.inf, values).max(axis=0), np.nan),
            )
        std = np.sqrt(np.where(empty, 0.0, (values - mean) ** 2).sum(axis=0) / count)
    return mean, mean - std, mean + std


def _chart(
    metric: str,
    ids: list[int],
    values: np.ndarray,
    times: np.ndarray,
    width: int,
    groups: dict[str, list[int]],
    options: Options,
) -> dict:
    filled = np.flatnonzero(~np.isnan(values).all(axis=0))
    used = int(filled[-1]) + 1 if len(filled) else 0
    values, times = values[:, :used], times[:, :used]
    row = {job_id: i for i, job_id in enumerate(ids)}
    by_time = options.x == "time"
    grid = [i * width + (width - 1) / 2 for i in range(used)]
    runs = []
    for i, job_id in enumerate(ids):
        run: dict = {"id": job_id, "y": _list(values[i])}
        if by_time:
            run["x"] = _list(times[i])
        runs.append(run)

    def aggregate(name: str, members: list[int]) -> dict:
        rows = [row[j] for j in members]
        mean, lower, upper = _band(values[rows], options.band)
        out = {
            "name": name,
            "runs": members,
            "y": _list(mean),
            "lower": _list(lower),
            "upper": _list(upper),
        }
        if by_time:
            out["x"] = _list(_band(times[rows], "std")[0])
        return out

    chart_groups = [
        aggregate(name, present)
        for name, members in groups.items()
        if (present := [j for j in members if j in row])
    ]
    baseline = None
    if options.baseline.isdigit() and int(options.baseline) in row:
        job_id = int(options.baseline)
        baseline = runs[row[job_id]] | {"name": f"run {job_id}"}
        del baseline["id"]
    elif options.baseline.startswith("group:"):
        wanted = options.baseline[6:]
        found = next((g for g in chart_groups if g["name"] == wanted), None)
        if found is not None:
            baseline = {
                "name": f"group {wanted}",
                "y": found["y"],
                **({"x": found["x"]} if by_time else {}),
            }
    return {
        "metric": metric,
        "goal": goal(metric),
        "width": width,
        "x": grid,
        "runs": runs,
        "groups": chart_groups if options.group else [],
        "baseline": baseline,
    }


def too_many_runs(limit: int) -> BadQuery:
    """The refusal of a comparison of more than PORTAL_COMPARE_MAX_RUNS runs: the work and
    the page grow with the runs, so one request may not ask for unboundedly many."""
    return BadQuery(
        f"This comparison selects more than {limit:,} runs; at most {limit:,} can be compared "
        "at once. Narrow the query or choose fewer runs."
    )


def compare(user, options: Options) -> Comparison:
    """The comparison of the runs ``options`` select among those ``user`` may see."""
    result = Comparison(options)
    limit = settings.PORTAL_COMPARE_MAX_RUNS
    if len(set(options.ids)) > limit:  # before any query
        raise too_many_runs(limit)
    jobs = _jobs(user, options)
    tags_of: dict[int, list[str]] = defaultdict(list)
    # One more than the limit says whether the query matched too many, in the same query.
    job_list = [Row(*values) for values in jobs.values_list(*ROW)[: limit + 1]]
    if len(job_list) > limit:
        raise too_many_runs(limit)
    tags = JobTag.objects.filter(job__in=jobs.values("pk")).order_by("name")
    for job_id, name in tags.values_list("job_id", "name"):
        tags_of[job_id].append(name)
    if not job_list:
        return result
    summaries = _summaries(jobs)

    # the table: fields that differ, and those the same for all
    fields = {job.pk: _fields(job, tags_of[job.pk]) for job in job_list}
    names = list(dict.fromkeys(k for f in fields.values() for k in f))
    words = {job.pk: _words(job.command) for job in job_list}
    common_words = set.intersection(*(set(w) for w in words.values()))
    common_tags = set.intersection(*(set(tags_of[job.pk]) for job in job_list))
    for name in names:
        seen = [f.get(name) for f in fields.values()]
        if all(v == seen[0] for v in seen):
            first = seen[0]
            result.same.append(
                {"field": name, "value": ", ".join(first) if isinstance(first, list) else first}
            )
        else:
            result.columns.append(name)

    prefixes = {re.split(r"[=:]", t, maxsplit=1)[0] for tags in tags_of.values() for t in tags}
    params = sorted(n for n in names if n.startswith("param."))
    result.group_choices = [
        "image",
        "cluster",
        "partition",
        "state",
        "experiment",
        *params,
        *(f"tag:{p}" for p in sorted(prefixes)),
    ]
    metric_names = sorted({k for per in summaries.values() for k in per})
    result.metrics = [{"name": m, "goal": goal(m)} for m in metric_names]
    groups: dict[str, list[int]] = defaultdict(list)
    jobs_url = reverse("job-detail", args=[0]).removesuffix("0/")
    for job in job_list:
        f = fields[job.pk]
        shown: dict[str, object] = {}
        for name in result.columns:
            value = f.get(name)
            if name == "command":
                value = " ".join(w for w in words[job.pk] if w not in common_words)
            elif name == "tags":
                value = [t for t in tags_of[job.pk] if t not in common_tags]
            shown[name] = value
        group = group_of(options.group, job, f) if options.group else str(job.pk)
        groups[group].append(job.pk)
        metrics = {}
        for m, (summary, last, _) in summaries.get(job.pk, {}).items():
            if not summary.count:
                continue
            best, step = (
                (summary.low, summary.low_step)
                if goal(m) == "min"
                else (summary.high, summary.high_step)
            )
            metrics[m] = {"last": last, "best": best, "best_step": step}
        result.runs.append(
            {
                "id": job.pk,
                "name": job.name or f"job {job.pk}",
                "url": f"{jobs_url}{job.pk}/",
                "state": job.state,
                "group": group if options.group else "",
                "fields": shown,
                "all": f,
                "metrics": metrics,
            }
        )
    _sort(result.runs, options.sort)
    ordered = sorted(groups, key=_natural) if options.group else list(groups)
    groups = {g: groups[g] for g in ordered}
    result.groups = ordered if options.group else []

    # the curves: one chart per metric, every run's summary at the chart's widest width
    for m in metric_names:
        present = {j: per[m][0] for j, per in summaries.items() if m in per and per[m][0].count}
        if not present:
            continue
        width = max(s.width for s in present.values())
        values, times = mean_matrix(list(present.values()), width)
        result.charts.append(_chart(m, list(present), values, times, width, groups, options))
    for run in result.runs:
        del run["all"]
    return result
