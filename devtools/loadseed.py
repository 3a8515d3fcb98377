"""A centre's population generated straight into PostgreSQL, for the load harness (#35,
`manage.py seed_load`, bench/load.py): at scale 1.0, 1,000 users with accounts on the
cluster ``load``, 100,000 finished and 5,000 active jobs, 200 experiments (one of 2,000
trials) and 100 million metric points in 100,000 series with their counts, last values
and 64-bucket summaries (metrics/summary.py) as ingest() would have left them.

Everything is set-based SQL (``INSERT ... SELECT generate_series``), not the ORM and not a
cluster: rows are made by the database at its own speed. Every value is a function of the
row's number, so two runs at one scale make the same data. The cluster's description
records the scale once seeding has finished: a second run at that scale does nothing, and
``reset()`` removes what was made (the users, their cluster, jobs, experiments, metrics).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import connection, models, transaction
from django.utils import timezone

from catalog.models import ContainerImage
from clusters.models import Cluster, ClusterAccount, Partition
from experiments.models import Experiment, Trial
from jobs.models import Job, JobTag
from metrics import summary as summaries
from metrics.models import MetricPoint, MetricSeries

CLUSTER = "load"
USER_PREFIX = "load-"
DONE = "seed_load: complete at scale "
KEYS = ("loss", "val_loss", "accuracy", "lr")
POINTS = 1000  # per series: 100 million = 25,000 jobs x 4 series x 1,000 steps
SERIES_PER_BATCH = 400  # 400,000 points per statement
TAGS = ("baseline", "ablation", "sweep", "prod", "debug", "resnet", "bert", "llm")
NAMES = (
    "train-resnet50",
    "bert-finetune",
    "llama-lora",
    "vit-pretrain",
    "unet-seg",
    "gnn-molecules",
    "ppo-atari",
    "whisper-asr",
    "jupyter",
    "preprocess",
)


class SeedError(Exception):
    """Why seeding cannot run (wrong database, a half-made or other-scale population)."""


@dataclass(frozen=True)
class Sizes:
    users: int
    finished: int
    active: int
    experiments: int
    big_trials: int  # the one experiment the experiment-page figure opens
    trials_each: int  # the others'
    metric_jobs: int

    @classmethod
    def at(cls, scale: float) -> Sizes:
        def n(full: int, least: int = 1) -> int:
            return max(least, round(full * scale))

        return cls(
            users=n(1000),
            finished=n(100_000, 10),
            active=n(5000, 2),
            experiments=n(200, 2),  # one running (every tenth from the second)
            big_trials=n(2000, 2),
            trials_each=20 if scale >= 0.05 else 3,
            metric_jobs=n(25_000),
        )

    @classmethod
    def big_pages(cls) -> Sizes:
        """The two heaviest pages at full size and little else (bench/bigpages.py): an
        experiment of 2,000 trials whose owner has 2,000 completed runs with metrics, a
        comparison of 1,000 of which is the other page. Seeded in minutes, not half an hour."""
        return cls(
            users=10,
            finished=2400,
            active=20,
            experiments=2,
            big_trials=2000,
            trials_each=3,
            metric_jobs=2100,  # the trials' first
        )

    @property
    def trials(self) -> int:
        return self.big_trials + (self.experiments - 1) * self.trials_each

    @property
    def points(self) -> int:
        return self.metric_jobs * len(KEYS) * POINTS


@dataclass
class Report:
    scale: str
    made: bool
    counts: dict[str, int]
    seconds: dict[str, float]

    def lines(self) -> list[str]:
        head = "seeded" if self.made else "already seeded (nothing to do; --reset to redo)"
        out = [f"{head} at scale {self.scale} on the cluster {CLUSTER!r}:"]
        out += [f"  {name}: {count:,}" for name, count in self.counts.items()]
        if self.made:
            out += [f"  {step}: {s:.1f} s" for step, s in self.seconds.items()]
            out.append(f"  total: {sum(self.seconds.values()):.1f} s")
        return out


def _table(model: type[models.Model]) -> str:
    return model._meta.db_table


def _insert_select(
    model: type[models.Model],
    given: dict[str, str | tuple[str, list]],
    source: str,
    params: list | None = None,
) -> int:
    """``INSERT INTO model (every column) SELECT ... FROM source``: the columns in ``given``
    from their SQL expressions, the others from the field's default (NULL when none,
    now() for auto_now) so no NOT NULL column is forgotten as the models grow."""
    columns, values, args = [], [], []
    for f in model._meta.concrete_fields:
        if (f.primary_key and isinstance(f, models.AutoField)) or f.column is None:
            continue
        columns.append(connection.ops.quote_name(f.column))
        if f.column in given:
            value = given[f.column]
            if isinstance(value, tuple):  # (SQL with %s, its parameters)
                values.append(value[0])
                args.extend(value[1])
            else:
                values.append(value)
        elif getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False):
            values.append("now()")
        elif f.has_default():
            values.append("%s")
            args.append(f.get_db_prep_save(f.get_default(), connection))
        elif f.null:
            values.append("NULL")
        elif f.empty_strings_allowed and f.blank:  # Django's "" for a blank text field
            values.append("''")
        else:
            raise SeedError(f"{model.__name__}.{f.name} needs a value")
    unknown = set(given) - {f.column for f in model._meta.concrete_fields}
    if unknown:
        raise SeedError(f"{model.__name__} has no column {sorted(unknown)}")
    sql = f"INSERT INTO {_table(model)} ({', '.join(columns)}) SELECT {', '.join(values)} {source}"  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(sql, args + (params or []))
        return cursor.rowcount


def check_database() -> None:
    if connection.vendor != "postgresql":
        raise SeedError(
            f"seed_load generates its rows with PostgreSQL's generate_series; this database "
            f"is {connection.vendor}. Point DATABASE_URL at PostgreSQL (postgres://...)."
        )


def seeded_scale() -> tuple[str | None, bool]:
    """(scale, finished) of what an earlier run made, the scale as it was written
    (``"0.01"``, ``"big-pages"``); (None, False) if nothing."""
    cluster = Cluster.objects.filter(name=CLUSTER).first()
    if cluster is None:
        return None, False
    if cluster.description.startswith(DONE):
        return cluster.description.removeprefix(DONE), True
    started = get_user_model().objects.filter(username__startswith=USER_PREFIX).exists()
    return ("", False) if started or cluster.jobs.exists() else (None, False)


def label(scale: float | str) -> str:
    """How a scale is recorded: ``0.01`` as ``"0.01"``, a preset by its name."""
    return scale if isinstance(scale, str) else f"{scale:g}"


def counts() -> dict[str, int]:
    cluster = Cluster.objects.filter(name=CLUSTER).first()
    if cluster is None:
        return {}
    jobs = Job.objects.filter(cluster=cluster)
    series = MetricSeries.objects.filter(job__cluster=cluster)
    return {
        "users": ClusterAccount.objects.filter(cluster=cluster, user__isnull=False).count(),
        "finished jobs": jobs.filter(state__in=Job.FINAL_STATES).count(),
        "active jobs": jobs.filter(state__in=Job.ACTIVE_STATES).count(),
        "experiments": Experiment.objects.filter(cluster=cluster).count(),
        "trials": Trial.objects.filter(experiment__cluster=cluster).count(),
        "metric series": series.count(),
        "metric points": series.aggregate(n=models.Sum("points"))["n"] or 0,
    }


def reset() -> None:
    """Remove what seeding made, children first, in set-based DELETEs."""
    check_database()
    cluster = Cluster.objects.filter(name=CLUSTER).first()
    users = get_user_model().objects.filter(username__startswith=USER_PREFIX)
    if cluster is not None:
        jobs = f"SELECT id FROM {_table(Job)} WHERE cluster_id = %s"  # noqa: S608
        series = f"SELECT id FROM {_table(MetricSeries)} WHERE job_id IN ({jobs})"  # noqa: S608
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {_table(MetricPoint)} WHERE series_id IN ({series})",  # noqa: S608
                [cluster.pk],
            )
        Job.objects.filter(cluster=cluster).delete()
        Experiment.objects.filter(cluster=cluster).delete()
        cluster.delete()
    users.delete()


PRESETS = {"big-pages": Sizes.big_pages}


def seed(scale: float | str, *, say: Callable[[str], None] = lambda _: None) -> Report:
    """Seed at ``scale`` (1.0: the full sizes; or a preset's name, ``"big-pages"``); a
    no-op when that scale is already there."""
    check_database()
    if isinstance(scale, str):
        if scale not in PRESETS:
            raise SeedError(f"no preset {scale!r}: the presets are {', '.join(PRESETS)}")
        sizes = PRESETS[scale]()
    elif 0 < scale <= 10:
        sizes = Sizes.at(scale)
    else:
        raise SeedError("the scale is a number above 0 and at most 10 (1.0: the full sizes)")
    done, finished = seeded_scale()
    if done is not None:
        if finished and done == label(scale):
            return Report(label(scale), False, counts(), {})
        what = f"seeded at scale {done}" if finished else "partly seeded (interrupted)"
        raise SeedError(f"the cluster {CLUSTER!r} is {what}: run with --reset to redo it")
    seconds: dict[str, float] = {}

    def step(name: str, fn: Callable[[], object]) -> None:
        t = time.perf_counter()
        with transaction.atomic():
            fn()
        seconds[name] = time.perf_counter() - t
        say(f"{name}: {seconds[name]:.1f} s")

    ctx = _Context(sizes)
    step("cluster, users and accounts", ctx.users)
    step("experiments and trials", ctx.experiments)
    step("jobs, tags and events", ctx.jobs)
    t = time.perf_counter()
    ctx.metrics(say)
    seconds["metric series and points"] = time.perf_counter() - t
    t = time.perf_counter()
    # The state autovacuum leaves a table in: planner statistics, and the visibility map,
    # without which PostgreSQL cannot count a user's jobs from the index alone (an
    # unvacuumed count of the busiest user's 12,000 jobs read 4,081 heap pages: 9.4 ms
    # against 0.9). VACUUM runs outside a transaction only: inside a caller's (a test's),
    # the statistics alone.
    command = "ANALYZE" if connection.in_atomic_block else "VACUUM (ANALYZE)"
    with connection.cursor() as cursor:
        for model in (Job, JobTag, MetricSeries, MetricPoint, Trial, Experiment):
            cursor.execute(f"{command} {_table(model)}")
    seconds["vacuum and analyze"] = time.perf_counter() - t
    Cluster.objects.filter(name=CLUSTER).update(description=f"{DONE}{label(scale)}")
    return Report(label(scale), True, counts(), seconds)


# -- the generators ---------------------------------------------------------------------


# A deterministic pseudo-random number in [0, 1) from an integer expression (no random():
# two runs at one scale make the same rows).
def _rnd(expr: str, salt: int) -> str:
    return f"(mod(({expr}) * 2654435761::bigint + {salt * 40503}, 1000003) / 1000003.0::float8)"


class _Context:
    def __init__(self, sizes: Sizes):
        self.sizes = sizes
        self.now = timezone.now()

    def users(self) -> None:
        s = self.sizes
        self.cluster = Cluster.objects.create(
            name=CLUSTER,
            description="seed_load: being seeded",
            ssh_host="login.load.example.org",
            host_key="SHA256:" + "L" * 43,
        )
        self.cpu = Partition.objects.create(cluster=self.cluster, name="cpu", is_default=True)
        self.gpu = Partition.objects.create(cluster=self.cluster, name="gpu", default_gpus=1)
        self.image = ContainerImage.objects.get_or_create(
            slug="load-pytorch", defaults={"name": "PyTorch (load)", "runtime": "none"}
        )[0]
        user = get_user_model()
        _insert_select(
            user,
            {
                "username": f"'{USER_PREFIX}' || lpad(g::text, 4, '0')",
                "password": "'!'",  # unusable: these people sign in through OIDC
                "email": f"'{USER_PREFIX}' || g || '@example.org'",
                "first_name": "'Load'",
                "last_name": "'User ' || g",
                "is_active": "true",
                "is_staff": "false",
                "is_superuser": "false",
                "date_joined": "now() - (g || ' hours')::interval",
                "last_login": "NULL",
            },
            "FROM generate_series(0, %s - 1) AS g",
            [s.users],
        )
        _insert_select(
            ClusterAccount,
            {
                "cluster_id": str(self.cluster.pk),
                "user_id": "u.id",
                "username": "'lu' || substr(u.username, 6)",
                "disabled_at": "NULL",
            },
            f"FROM {_table(user)} u WHERE u.username LIKE %s",  # noqa: S608
            [USER_PREFIX + "%"],
        )
        # The users by number, for the generators below: n -> (user, account).
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE IF EXISTS seed_load_users")
            cursor.execute(
                "CREATE TEMP TABLE seed_load_users (n int PRIMARY KEY, user_id int, account_id int)"
            )
            cursor.execute(
                f"INSERT INTO seed_load_users SELECT substr(u.username, 6)::int, u.id, a.id "  # noqa: S608
                f"FROM {_table(user)} u JOIN {_table(ClusterAccount)} a ON a.user_id = u.id "
                f"AND a.cluster_id = %s WHERE u.username LIKE %s",
                [self.cluster.pk, USER_PREFIX + "%"],
            )

    def experiments(self) -> None:
        s = self.sizes
        launch = {
            "kind": "batch",
            "command": "python train.py",
            "image": self.image.pk,
            "partition": self.gpu.pk,
            "gpus": 1,
            "cpus": 4,
            "memory_gb": 16,
            "time_limit_minutes": 120,
        }
        parameters = {
            "lr": {"type": "float", "low": 1e-5, "high": 0.1, "log": True},
            "batch_size": {"type": "choice", "values": [32, 64, 128, 256]},
            "dropout": {"type": "float", "low": 0.0, "high": 0.5, "log": False},
        }
        # Experiment 0 (the big one) is user 0's; the others spread over everyone.
        _insert_select(
            Experiment,
            {
                "owner_id": "u.user_id",
                "cluster_id": str(self.cluster.pk),
                "uid": "'le' || lpad(g::text, 8, '0')",
                "name": "'sweep-' || (ARRAY['resnet','bert','vit','unet','gnn'])[1 + mod(g, 5)] "
                "|| '-' || g",
                "launch": ("%s::jsonb", [_json(launch)]),
                "parameters": ("%s::jsonb", [_json(parameters)]),
                "parameter_names": '\'["lr", "batch_size", "dropout"]\'::jsonb',
                "method": "'bayesian'",
                "metric": "'val_loss'",
                "goal": "'minimize'",
                "max_trials": f"CASE WHEN g = 0 THEN {s.big_trials} ELSE {s.trials_each} END",
                "state": "CASE WHEN mod(g, 10) = 1 THEN 'running' ELSE 'completed' END",
                "created_at": "now() - ((g + 1) || ' days')::interval",
                "ended_at": "CASE WHEN mod(g, 10) = 1 THEN NULL ELSE now() - (g || ' days')::interval "
                "END",
            },
            f"FROM generate_series(0, %s - 1) AS g JOIN seed_load_users u "
            f"ON u.n = mod((g * 7), {s.users})",
            [s.experiments],
        )
        r = _rnd("e.id * 100000 + t", 1)
        r2 = _rnd("e.id * 100000 + t", 2)
        value = f"0.2 + 0.6 * {r} * {r2}"
        _insert_select(
            Trial,
            {
                "experiment_id": "e.id",
                "number": "t",
                "params": f"jsonb_build_object('lr', power(10, -5 + 4 * {r}), 'batch_size', "
                f"(ARRAY[32, 64, 128, 256])[1 + mod(t, 4)], 'dropout', round((0.5 * {r2})::numeric, 3))",
                "state": f"CASE WHEN e.state = 'running' AND t >= e.max_trials - 2 THEN 'waiting' "
                f"WHEN {r} < 0.05 THEN 'failed' ELSE 'completed' END",
                "value": f"CASE WHEN e.state = 'running' AND t >= e.max_trials - 2 OR {r} < 0.05 "
                f"THEN NULL ELSE {value} END",
                "fold_values": f"jsonb_build_array({value})",
                "last_step": "999",
                "last_value": value,
                # The objective every 50 steps: the page's overlaid curves.
                "intermediate": f"(SELECT jsonb_object_agg(k * 50, round(({value} + "
                "exp(-k / 4.0))::numeric, 4)) FROM generate_series(0, 19) AS k)",
                "created_at": "e.created_at + (t || ' minutes')::interval",
                "ended_at": "e.created_at + ((t + 30) || ' minutes')::interval",
            },
            f"FROM {_table(Experiment)} e, generate_series(0, e.max_trials - 1) AS t "  # noqa: S608
            f"WHERE e.cluster_id = %s",
            [self.cluster.pk],
        )

    def jobs(self) -> None:
        """Job i: a trial's job for i < trials (the experiment's owner's), then finished
        jobs over the last year, then the active ones (created in the last two days).
        Owners are skewed: user 0 has about a tenth of all jobs (``(u ** 3) * users``)."""
        s = self.sizes
        total = s.finished + s.active
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE IF EXISTS seed_load_trials")
            cursor.execute(
                f"CREATE TEMP TABLE seed_load_trials AS SELECT row_number() OVER "  # noqa: S608
                f"(ORDER BY e.id, t.number) - 1 AS i, t.id, t.state, u.n AS owner_n "
                f"FROM {_table(Trial)} t JOIN {_table(Experiment)} e ON e.id = t.experiment_id "
                f"JOIN seed_load_users u ON u.user_id = e.owner_id WHERE e.cluster_id = %s "
                # A running experiment's last two trials wait for their jobs: none yet.
                f"AND t.state <> 'waiting'",
                [self.cluster.pk],
            )
            cursor.execute("CREATE INDEX ON seed_load_trials (i)")
        trials = s.trials
        r = _rnd("g", 3)
        final = (
            f"CASE WHEN {r} < 0.75 THEN 'completed' WHEN {r} < 0.87 THEN 'failed' "
            f"WHEN {r} < 0.95 THEN 'cancelled' ELSE 'timeout' END"
        )
        state = (
            f"CASE WHEN tr.id IS NOT NULL THEN (CASE tr.state WHEN 'failed' THEN 'failed' "
            f"ELSE 'completed' END) "
            f"WHEN g >= {s.finished} THEN (CASE WHEN {_rnd('g', 4)} < 0.6 THEN 'pending' "
            f"ELSE 'running' END) ELSE {final} END"
        )
        year = 365 * 24 * 3600
        created = (
            f"now() - make_interval(secs => CASE WHEN g >= {s.finished} THEN "
            f"172800 * {_rnd('g', 5)} ELSE {year}.0 * ({s.finished} - g) / {s.finished}.0 END)"
        )
        name = f"(ARRAY{list(NAMES)!r})[1 + mod(g, {len(NAMES)})] || '-' || g"
        gpu = f"{_rnd('g', 6)} < 0.4"
        _insert_select(
            Job,
            {
                "uid": "'lj' || lpad(g::text, 8, '0')",
                "owner_id": "u.user_id",
                "cluster_id": str(self.cluster.pk),
                "partition_id": f"CASE WHEN {gpu} THEN {self.gpu.pk} ELSE {self.cpu.pk} END",
                "image_id": str(self.image.pk),
                "kind": f"CASE WHEN tr.id IS NULL AND mod(g, {len(NAMES)}) = 8 THEN 'notebook' "
                "ELSE 'batch' END",
                "name": name,
                "command": f"'python train.py --config configs/' || {name} || '.yaml'",
                "params": "jsonb_build_object('lr', round((0.1 * "
                f"{_rnd('g', 7)})::numeric, 4), 'seed', mod(g, 5))",
                "gpus": f"CASE WHEN {gpu} THEN 1 + (mod(g, 4)) ELSE 0 END",
                "cpus": "1 + (mod(g, 16))",
                "memory_gb": "4 * (1 + mod(g, 8))",
                "time_limit_minutes": "60 * (1 + mod(g, 24))",
                "cluster_account_id": "u.account_id",
                "state": "st.state",
                "scheduler_job_id": "(1000000 + g)::text",
                "pending_reason": "CASE WHEN st.state = 'pending' THEN "
                "(ARRAY['Priority','Resources','QOSMaxGRESPerUser'])[1 + mod(g, 3)] ELSE '' END",
                "queue_position": "CASE WHEN st.state = 'pending' THEN 1 + mod(g, 500) END",
                "node": "CASE WHEN st.state <> 'pending' THEN 'node' || lpad((mod(g, 128))::text, "
                "3, '0') ELSE '' END",
                "exit_code": "CASE st.state WHEN 'completed' THEN 0 WHEN 'failed' THEN 1 END",
                "message": "CASE st.state WHEN 'failed' THEN 'exit code 1' WHEN 'timeout' "
                "THEN 'DUE TO TIME LIMIT' ELSE '' END",
                "work_dir": "'/home/lu' || lpad(u.n::text, 4, '0') || '/portal/lj' || g",
                "trial_id": "tr.id",
                "fold": "CASE WHEN tr.id IS NOT NULL THEN 0 END",
                "created_at": "c.at",
                "submitted_at": "c.at + interval '2 seconds'",
                "started_at": "CASE WHEN st.state <> 'pending' THEN c.at + make_interval("
                f"secs => 600 * {_rnd('g', 8)}) END",
                "ended_at": "CASE WHEN st.state NOT IN ('pending', 'running') THEN c.at + "
                f"make_interval(secs => 600 + 36000 * {_rnd('g', 9)}) END",
            },
            f"FROM generate_series(0, {total} - 1) AS g "
            f"LEFT JOIN seed_load_trials tr ON tr.i = g AND g < {trials} "
            f"JOIN seed_load_users u ON u.n = COALESCE(tr.owner_n, "
            f"floor(power({_rnd('g', 10)}, 3) * {s.users})::int) "
            f"CROSS JOIN LATERAL (SELECT {state} AS state) st "
            f"CROSS JOIN LATERAL (SELECT {created} AS at) c",
        )
        jobs = f"FROM {_table(Job)} j WHERE j.cluster_id = {self.cluster.pk}"  # noqa: S608
        # Tags on a third of the jobs (one or two), as people label runs.
        _insert_select(
            JobTag,
            {"job_id": "j.id", "name": f"(ARRAY{list(TAGS)!r})[1 + mod(j.id, {len(TAGS)})]"},
            f"{jobs} AND mod(j.id, 3) = 0",
        )
        _insert_select(
            JobTag,
            {
                "job_id": "j.id",
                "name": f"(ARRAY{list(TAGS)!r})[1 + mod((j.id / 3 + 1), {len(TAGS)})]",
            },
            f"{jobs} AND mod(j.id, 9) = 0 AND mod((j.id / 3 + 1), {len(TAGS)}) <> mod(j.id, {len(TAGS)})",
        )
        from jobs.models import JobEvent  # noqa: PLC0415 - with its model's siblings above

        _insert_select(
            JobEvent,
            {
                "job_id": "j.id",
                "at": "j.created_at",
                "from_state": "''",
                "to_state": "'queued'",
                "settled_at": "j.created_at",
            },
            jobs,
        )
        _insert_select(
            JobEvent,
            {
                "job_id": "j.id",
                "at": "COALESCE(j.ended_at, j.started_at, j.submitted_at)",
                "from_state": "'pending'",
                "to_state": "j.state",
                "settled_at": "COALESCE(j.ended_at, j.started_at, j.submitted_at)",
            },
            f"{jobs} AND j.state <> 'pending'",
        )

    def metrics(self, say: Callable[[str], None]) -> None:
        """Four series of 1,000 steps for each of the first ``metric_jobs`` jobs (the
        trials' first, then the newest finished and running ones), points in batches with
        each batch's summaries built from the same statement's rows."""
        s = self.sizes
        with transaction.atomic():
            _insert_select(
                MetricSeries,
                {
                    "job_id": "j.id",
                    "key": "k.key",
                    "rank": "0",
                    "attempt": "0",
                    "system": "false",
                    "node": "j.node",
                    "points": "0",
                },
                f"FROM (SELECT id, node FROM {_table(Job)} WHERE cluster_id = %s "  # noqa: S608
                f"AND state <> 'pending' ORDER BY trial_id IS NULL, state <> 'running', id DESC "
                f"LIMIT %s) j "
                f"CROSS JOIN unnest(%s::text[]) AS k(key)",
                [self.cluster.pk, s.metric_jobs, list(KEYS)],
            )
        ids = list(
            MetricSeries.objects.filter(job__cluster=self.cluster)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        width = summaries.width_for(POINTS - 1)
        fast_keys = _superuser()
        if not fast_keys:
            say("  (not a superuser: every point's foreign key is checked, about half the speed)")
        t = time.perf_counter()
        for lo in range(0, len(ids), SERIES_PER_BATCH):
            batch = ids[lo : lo + SERIES_PER_BATCH]
            with transaction.atomic(), connection.cursor() as cursor:
                # Nothing waits on these commits: a crash mid-way is redone with --reset.
                cursor.execute("SET LOCAL synchronous_commit = off")
                cursor.execute("SET LOCAL work_mem = '256MB'")  # the summaries' sort
                cursor.execute("SET LOCAL jit = off")
                if fast_keys:
                    # No per-row check of the series foreign key, queued to the commit
                    # (half the time): every point's series exists, it was made above.
                    cursor.execute("SET LOCAL session_replication_role = replica")
                _points(batch[0], batch[-1], width)
            done = lo + len(batch)
            if done == len(ids) or (lo // SERIES_PER_BATCH) % 25 == 24:
                rate = done * POINTS / (time.perf_counter() - t)
                say(f"  {done:,}/{len(ids):,} series, {rate:,.0f} points/s")


def _superuser() -> bool:
    """May this connection skip foreign-key triggers (session_replication_role)?"""
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        row = cursor.fetchone()
    return bool(row and row[0])


def _json(value: object) -> str:
    import json  # noqa: PLC0415

    return json.dumps(value)


# The value of series s (job j, key k) at step g: a decaying, noisy training curve.
_VALUE = (
    "CASE ser.key WHEN 'lr' THEN 0.01::float8 * (1 - g / 1000.0::float8) "
    "WHEN 'accuracy' THEN 1 - 0.9::float8 * exp(-(0.3::float8 + mod(ser.job_id, 17) / 10.0::float8) "
    f"* g / 200.0::float8) - 0.05 * {_rnd('ser.id * 1000 + g', 11)} "
    "ELSE exp(-(0.3::float8 + mod(ser.job_id, 17) / 10.0::float8) * g / 200.0::float8) "
    f"+ 0.05 * {_rnd('ser.id * 1000 + g', 12)} "
    "+ CASE ser.key WHEN 'val_loss' THEN 0.1 ELSE 0 END END"
)


def _points(first: int, last: int, width: int) -> None:
    """Points of series ``first``..``last`` (ids), and from the rows the INSERT returns,
    each series' 64-bucket summary, count and last value: one statement, no re-read."""
    sql = f"""
        WITH ins AS (
            INSERT INTO {_table(MetricPoint)} (series_id, seq, step, value, time)
            SELECT ser.id, g, g, {_VALUE},
                   extract(epoch FROM COALESCE(j.started_at, j.created_at)) + g * 6.0
            FROM {_table(MetricSeries)} ser JOIN {_table(Job)} j ON j.id = ser.job_id
                 -- the series outside (the lateral reference), so each series' rows come
                 -- in key order and append to the indexes instead of splitting their pages
                 CROSS JOIN LATERAL generate_series(ser.id * 0, {POINTS - 1}) AS g
            WHERE ser.id BETWEEN %s AND %s
            RETURNING series_id, step, value, time
        )
        SELECT series_id, b, GROUPING(b),
               COUNT(*), SUM(value), MIN(value), MAX(value), SUM(time), MIN(time), MAX(step),
               (array_agg(step ORDER BY value, step))[1],
               (array_agg(step ORDER BY value DESC, step))[1],
               (array_agg(value ORDER BY step DESC))[1]
        FROM (SELECT *, CASE WHEN step > 0 THEN step / {width} ELSE 0 END AS b FROM ins) x
        GROUP BY GROUPING SETS ((series_id, b), (series_id))
    """  # noqa: S608
    built: dict[int, summaries.Summary] = {}
    ends: dict[int, tuple[int, int, float]] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, [first, last])
        for (
            sid,
            b,
            whole,
            n,
            total,
            lo,
            hi,
            t,
            t0,
            top,
            low_step,
            high_step,
            final,
        ) in cursor.fetchall():
            s = built.setdefault(sid, summaries.Summary(width=width))
            if whole:
                s.t0, s.low, s.low_step, s.high, s.high_step = t0, lo, low_step, hi, high_step
                ends[sid] = (n, top, final)
            else:
                s.n[b], s.total[b], s.lo[b], s.hi[b], s.t[b] = n, total, lo, hi, t
        rows = [(sid, *ends[sid], built[sid].to_bytes()) for sid in built]
        cursor.execute(
            f"UPDATE {_table(MetricSeries)} AS ser SET points = v.points, "  # noqa: S608
            "last_step = v.last_step, last_value = v.last_value, summary = v.summary, "
            "updated_at = now() FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], "
            "%s::float8[], %s::bytea[]) AS v(id, points, last_step, last_value, summary) "
            "WHERE ser.id = v.id",
            [list(col) for col in zip(*rows, strict=True)],
        )
