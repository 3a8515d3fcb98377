"""The live figures of `make bench-load` (issue #35): the websocket fan-out of job state
changes and metric ingest, against the served stack (bench/loadstack.py).

bench/load.py calls ``run(stack)`` and prints the ``Row``s it returns. Alone,

    .venv/bin/python bench/load_live.py [--quick] [--dashboards 500] [--changes 1000]
        [--window 10] [--ingest-jobs 200] [--points 50] [--ingest-seconds 30] [--viewers 10]

starts its own stack on the PostgreSQL database loadlive_bench (created and migrated if
missing), Redis database 12 and key prefix "loadlive".

1. Fan-out: --dashboards users, each with the dashboard's socket (/ws/jobs/) open, held by
   bench/wsbench.c (C, "listen": one connection per user with that user's session
   cookie, every message's arrival time read from CLOCK_REALTIME right after its read()).
   A driver (--driver-procs forked processes of --driver-threads threads, as the sync
   runs in Celery workers) moves --changes of their jobs from pending to running, on a
   schedule even over --window seconds, through the sync's own code path
   (Job.apply_scheduler_status: the row lock, the update, the timeline event, then on
   commit jobs.broadcast.publish_job on the channel layer), and takes the time in a
   transaction.on_commit callback registered before the change's own. Figure: commit to
   arrival at the client, p50/p95/p99/max; every expected message is checked for (lost),
   and a message on another user's socket counts as a failure (cross-user).
2. Ingest: --ingest-jobs jobs upload at once, each with its own metrics token, --points
   points a second in the in-job client's batches (one POST a second: its flush
   interval), measured by wrk (C) with bench/load/ingest.lua, one connection per job
   paced with wrk's delay() on a fixed schedule; meanwhile a second wrk
   (bench/load/chart.lua) reads --viewers jobs' charts (GET /jobs/<id>/metrics/?width=1200,
   as the job page does, with the owner's session) once a second each. Once the server
   has drained, the rows are counted against the answers: every acknowledged point stored,
   none twice, nothing beyond what was sent (calls wrk stopped waiting for are counted
   apart), the series' counters equal to the rows; and the rate acknowledged vs offered.

Each figure comes with the SQL queries behind one request of its kind, counted in this
process (CaptureQueriesContext around the same code path or Django's test client), at two
sizes, so an N+1 shows as a count that grows. Each part runs in a child process with the
stack's environment, so its ORM, channel layer and cache are the served processes' own.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
if str(ROOT) not in sys.path:  # run as a script: bench/ is on the path, not the root
    sys.path.insert(0, str(ROOT))

from bench.loadstack import LoadStack, Row  # noqa: E402

DATABASE = "loadlive_bench"
REDIS_DB = 12
PREFIX = "loadlive"
USER_PREFIX = "loadlive-"
PLACE = "loadlive"  # the cluster of the bench's jobs
CHART_WIDTH = 1200

FULL = {
    "dashboards": 500,
    "changes": 1000,
    "window": 10.0,
    "driver_procs": 2,
    "driver_threads": 4,
    "ingest_jobs": 200,
    "points": 50,
    "metrics": 2,
    "ingest_seconds": 30.0,
    "viewers": 10,
    "chart_history": 20000,
}
QUICK = {
    **FULL,
    "dashboards": 50,
    "changes": 100,
    "window": 5.0,
    "ingest_jobs": 20,
    "ingest_seconds": 8.0,
    "viewers": 4,
    "chart_history": 2000,
}


# -- the parent: run(stack) ---------------------------------------------------------------


def run(stack: LoadStack, *, quick: bool = False, **options: float) -> list[Row]:
    """Both figures against ``stack`` (started): one child process per part."""
    scale = {**(QUICK if quick else FULL), **options}
    for tool in ("wrk", "gcc"):
        if not shutil.which(tool):
            sys.exit(f"bench/load_live.py: {tool} is missing (apt-get install {tool})")
    rows: list[Row] = []
    for part in ("fanout", "ingest"):
        rows += _child(stack, part, scale)
    return rows


def _child(stack: LoadStack, part: str, scale: dict) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix=f"loadlive-{part}-") as tmp:
        out = Path(tmp) / "rows.json"
        argv = [sys.executable, __file__, "--part", part, "--port", str(stack.port)]
        argv += ["--rows-out", str(out), "--workdir", tmp]
        argv += [
            f"--{key.replace('_', '-')}={value}" for key, value in scale.items() if key != "keep"
        ]
        argv += ["--keep"] if scale.get("keep") else []
        env = {**stack.env, "DJANGO_SETTINGS_MODULE": "portal.settings"}
        done = subprocess.run(argv, cwd=ROOT, env=env)
        if done.returncode or not out.exists():
            return [Row(f"live: {part}", f"FAILED (exit {done.returncode}; see above)")]
        return [Row(**row) for row in json.loads(out.read_text())]


# -- shared by the parts (child processes, Django set up) ---------------------------------


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least q of them at or below it."""
    if not sorted_values:
        return math.nan
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


def kv(line: str) -> dict[str, float]:
    """A "name key=value ..." line of wsbench's or of the Lua scripts' done()."""
    out = {}
    for word in line.split()[1:]:
        key, _, value = word.partition("=")
        try:
            out[key] = float(value)
        except ValueError:
            continue
    return out


def fresh_users(kind: str, count: int) -> list:
    """``count`` users named loadlive-<kind>-NNNN, made anew (an earlier run's, and what
    hangs off them, deleted), with unusable passwords."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password

    model = get_user_model()
    model.objects.filter(username__startswith=f"{USER_PREFIX}{kind}-").delete()
    password = make_password(None)
    return model.objects.bulk_create(
        [model(username=f"{USER_PREFIX}{kind}-{n:04d}", password=password) for n in range(count)]
    )


def drop_users(kind: str) -> None:
    """The bench's users of ``kind`` and what hangs off them; its cluster once unused."""
    from django.contrib.auth import get_user_model

    from clusters.models import Cluster
    from jobs.models import Job

    get_user_model().objects.filter(username__startswith=f"{USER_PREFIX}{kind}-").delete()
    if not Job.objects.filter(cluster__name=PLACE).exists():
        Cluster.objects.filter(name=PLACE).delete()


def cookies(users: list) -> list[str]:
    """A logged-in session per user, written with the session engine itself, as a login
    writes it: the Cookie header value ("name=key") of each."""
    from importlib import import_module

    from django.conf import settings
    from django.contrib.auth import (
        BACKEND_SESSION_KEY,
        HASH_SESSION_KEY,
        SESSION_KEY,
        load_backend,
    )

    # The backend a login through the test client would record (Client.force_login).
    backend = next(
        path for path in settings.AUTHENTICATION_BACKENDS if hasattr(load_backend(path), "get_user")
    )
    store_class = import_module(settings.SESSION_ENGINE).SessionStore
    out = []
    for user in users:
        store = store_class()
        store[SESSION_KEY] = user._meta.pk.value_to_string(user)
        store[BACKEND_SESSION_KEY] = backend
        store[HASH_SESSION_KEY] = user.get_session_auth_hash()
        store.create()
        out.append(f"{settings.SESSION_COOKIE_NAME}={store.session_key}")
    return out


def place():
    """The cluster, partition and image the bench's jobs use."""
    from tests import factories

    cluster = factories.cluster(PLACE, ssh_host="localhost")
    return cluster, factories.partition(cluster, "cpu"), factories.image()


def count_queries(call) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        call()
    return len(ctx.captured_queries)


def queries_text(small: int, large: int, what: str) -> str:
    trend = "flat" if small == large else f"grows with {what}"
    return f"{small} -> {large} ({trend})"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}" if seconds >= 0.01 else f"{seconds * 1000:.1f}"


# -- 1. websocket fan-out -----------------------------------------------------------------


def _running():
    from jobs.models import Job
    from schedulers.seam import Status

    return Status(state=Job.State.RUNNING, started=True, node="c001")


def drive(mine: list, t0: float, spacing: float, args, results) -> None:
    """One driver process: its changes, each at its time, on --driver-threads threads;
    puts ({job id: commit time}, [seconds behind schedule], CPU seconds) on ``results``."""
    from django.db import connection, transaction

    running = _running()
    commits: dict[int, float] = {}
    behind: list[float] = []
    threads = int(args.driver_threads)

    def work(part: list) -> None:
        try:
            for k, job in part:
                wait = t0 + k * spacing - time.time()
                if wait > 0:
                    time.sleep(wait)
                else:
                    behind.append(-wait)
                with transaction.atomic():
                    # Registered before the change's own callbacks, so it runs first: right
                    # after COMMIT, before the publish.
                    transaction.on_commit(lambda pk=job.pk: commits.__setitem__(pk, time.time()))
                    job.apply_scheduler_status(running)
        finally:
            connection.close()

    cpu = time.process_time()
    workers = [threading.Thread(target=work, args=(mine[t::threads],)) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    results.put((commits, behind, time.process_time() - cpu))


def fanout(args) -> list[dict]:
    from django.db import connection
    from django.utils import timezone

    from jobs.models import Job, JobAttempt, JobEvent

    n_users, n_changes = int(args.dashboards), int(args.changes)
    print(
        f"\n1. websocket fan-out: {n_users} dashboards (/ws/jobs/, wsbench listen), {n_changes}"
        f" job state changes over {args.window:g} s, driver: {args.driver_procs} processes x"
        f" {args.driver_threads} threads"
    )
    users = fresh_users("ws", n_users + 1)
    watchers, probe_owner = users[:-1], users[-1]
    cluster, partition, image = place()
    per_user = -(-n_changes // n_users)
    now = timezone.now()

    def new_job(owner, n: int) -> Job:
        return Job(
            owner=owner,
            cluster=cluster,
            partition=partition,
            image=image,
            kind=Job.Kind.BATCH,
            name=f"loadlive-{n}",
            command="sleep 600",
            state=Job.State.PENDING,
            scheduler_job_id=str(900000 + n),
            submitted_at=now,
        )

    # Round robin over the users: consecutive changes go to different dashboards.
    jobs = Job.objects.bulk_create(
        [new_job(watchers[n % n_users], n) for n in range(per_user * n_users)]
    )[:n_changes]
    owner_of = {job.pk: job.owner_id for job in jobs}
    conn_owner = [user.pk for user in watchers]
    headers: list[str] = []
    for cookie in cookies(watchers):
        headers += ["--", f"Cookie: {cookie}", f"Origin: http://127.0.0.1:{args.port}"]

    wsbench = Path(args.workdir) / "wsbench"
    subprocess.run(
        ["gcc", "-O2", "-Wall", "-o", str(wsbench), str(BENCH / "wsbench.c")], check=True
    )
    t_open = time.monotonic()
    listener = subprocess.Popen(
        [str(wsbench), "listen", str(args.port), "/ws/jobs/", str(n_users), "3600", *headers[1:]],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert listener.stdout is not None
    words = listener.stdout.readline().split()  # "open N failed F"
    opened = {"open": int(words[1]), "failed": int(words[3])} if len(words) == 4 else {}
    open_seconds = time.monotonic() - t_open
    print(
        f"   {int(opened.get('open', 0))} sockets open, {int(opened.get('failed', 0))} refused,"
        f" in {open_seconds:.1f} s"
    )
    messages: list[tuple[int, float, int, int]] = []
    tail: list[str] = []

    def read() -> None:
        for line in listener.stdout:  # type: ignore[union-attr]
            if line.startswith("m "):
                _, conn, arrival, job_id, owner = line.split()
                messages.append((int(conn), float(arrival), int(job_id), int(owner)))
            else:
                tail.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    # The driver: change k at t0 + k * spacing, in process k % procs (forked: each with its
    # own database connection and channel-layer loop, like the sync's Celery workers).
    spacing = args.window / n_changes
    t0 = time.time() + 0.5
    procs = int(args.driver_procs)
    results = multiprocessing.get_context("fork").SimpleQueue()
    connection.close()
    forked = [
        multiprocessing.get_context("fork").Process(
            target=drive,
            args=(
                [(k, j) for k, j in enumerate(jobs) if k % procs == p],
                t0,
                spacing,
                args,
                results,
            ),
        )
        for p in range(procs)
    ]
    for proc in forked:
        proc.start()
    commits: dict[int, float] = {}
    behind: list[float] = []
    cpu = 0.0
    for _ in forked:
        got_commits, got_behind, got_cpu = results.get()
        commits.update(got_commits)
        behind += got_behind
        cpu += got_cpu
    for proc in forked:
        proc.join()
    last_commit = max(commits.values(), default=t0)
    deadline = time.monotonic() + 15
    while len(messages) < n_changes and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # a late duplicate or a cross-user message would show now
    listener.send_signal(signal.SIGTERM)
    listener.wait(30)
    reader.join(10)
    summary = kv(tail[-1]) if tail else {}

    latencies, seen = [], set()
    cross = duplicates = other = 0
    for conn, arrival, job_id, owner in messages:
        if job_id not in owner_of:
            other += 1
        elif owner_of[job_id] != conn_owner[conn] or owner != conn_owner[conn]:
            cross += 1
        elif (conn, job_id) in seen:
            duplicates += 1
        else:
            seen.add((conn, job_id))
            if job_id in commits:
                latencies.append(arrival - commits[job_id])
    lost = n_changes - len(seen)
    latencies.sort()
    p50, p95, p99 = (percentile(latencies, q) for q in (0.5, 0.95, 0.99))
    worst = latencies[-1] if latencies else math.nan
    achieved = len(commits) / max(last_commit - t0, 1e-9)
    cpu_ms = 1000 * cpu / max(len(commits), 1)
    late = sum(1 for b in behind if b > 0.1)
    print(
        f"   driver: {len(commits)} changes committed in {last_commit - t0:.1f} s"
        f" ({achieved:.0f}/s; offered {n_changes / args.window:.0f}/s); {late} started more"
        f" than 100 ms behind schedule (worst {max(behind, default=0) * 1000:.0f} ms);"
        f" driver CPU {cpu_ms:.1f} ms per change (transition + publish)"
    )
    print(
        f"   commit -> message at the client, ms: p50 {ms(p50)}, p95 {ms(p95)}, p99 {ms(p99)},"
        f" max {ms(worst)} over {len(latencies)} messages"
    )
    print(
        f"   delivery: {len(seen)} of {n_changes} expected, lost {lost}, cross-user {cross},"
        f" duplicates {duplicates}, other {other}; wsbench: still open"
        f" {int(summary.get('still_open', 0))}, closed {int(summary.get('closed', 0))},"
        f" bad {int(summary.get('bad', 0))}, pings answered {int(summary.get('pings', 0))}"
    )

    # Queries behind one change, publish included: a fresh job, and one with a long past.
    def probe(history: int) -> int:
        job = new_job(probe_owner, 990000 + history)
        job.save()
        JobEvent.objects.bulk_create(
            [
                JobEvent(
                    job=job, from_state="queued", to_state="pending", settled_at=timezone.now()
                )
                for _ in range(history)
            ]
        )
        JobAttempt.objects.bulk_create(
            [JobAttempt(job=job, number=n, scheduler_state="FAILED") for n in range(history)]
        )
        return count_queries(lambda: job.apply_scheduler_status(running))

    running = _running()
    fresh, old = probe(0), probe(50)
    print(
        f"   queries per state change (transition + publish): {queries_text(fresh, old, 'history')}"
        " (a fresh job -> one with 50 events and runs)"
    )
    if not args.keep:
        drop_users("ws")
    ok = not (lost or cross or duplicates) and opened.get("failed", 1) == 0
    figure = (
        f"WS fan-out: {n_users} dashboards, {n_changes} state changes in {args.window:g} s,"
        " commit -> client"
    )
    value = (
        f"p95 {ms(p95)} ms (p50 {ms(p50)}, p99 {ms(p99)}, max {ms(worst)}); lost {lost},"
        f" cross-user {cross}{'' if ok else ' FAILED'}; driver {achieved:.0f}/s of"
        f" {n_changes / args.window:.0f}/s"
    )
    return [
        {
            "figure": figure,
            "value": value,
            "queries": f"{queries_text(fresh, old, 'history')} per change",
        }
    ]


# -- 2. metric ingest ---------------------------------------------------------------------


def ingest_part(args) -> list[dict]:
    import secrets

    from django.db import connection
    from django.test import Client
    from django.utils import timezone

    from common import crypto
    from jobs.models import Job
    from metrics import ingest
    from metrics.models import MetricPoint, MetricSeries

    n_jobs, viewers = int(args.ingest_jobs), int(args.viewers)
    metrics = int(args.metrics)
    records = max(1, int(args.points) // metrics)  # one POST a second: the client's flush
    per_call = records * metrics
    period_ms = 1000.0 * per_call / args.points
    print(
        f"\n2. metric ingest: {n_jobs} jobs at once, each {args.points:g} points/s as"
        f" {records} records x {metrics} metrics every {period_ms:.0f} ms"
        f" (wrk, bench/load/ingest.lua), {args.ingest_seconds:g} s; meanwhile {viewers} chart"
        f" readers (bench/load/chart.lua) once a second each"
    )
    users = fresh_users("ingest", n_jobs + 1)
    cluster, partition, image = place()
    now = timezone.now()
    tokens = ["pm_" + secrets.token_urlsafe(32) for _ in range(n_jobs + 1)]
    jobs = Job.objects.bulk_create(
        [
            Job(
                owner=users[n],
                cluster=cluster,
                partition=partition,
                image=image,
                kind=Job.Kind.BATCH,
                name=f"loadlive-train-{n}",
                command="python train.py",
                state=Job.State.RUNNING,
                scheduler_job_id=str(800000 + n),
                submitted_at=now,
                started_at=now,
                metrics_token_hash=crypto.secret_hash(tokens[n]),
            )
            for n in range(n_jobs + 1)
        ]
    )
    probe, jobs = jobs[-1], jobs[:-1]
    names = ["loss", "acc", "lr", "grad_norm", "tokens_per_s", "val_loss", "val_acc", "epoch"]

    def batch(start: int, count: int, keys: list[str]) -> list:
        return [
            ingest.Record(s, 0, 0, s, 1.7e9 + s, {k: 1.0 / (s + i + 1) for i, k in enumerate(keys)})
            for s in range(start, start + count)
        ]

    # What the charts read already holds: a long history for the viewed jobs.
    t = time.monotonic()
    history = {}
    for n, job in enumerate(jobs):
        steps = int(args.chart_history) if n < viewers else 10
        for start in range(0, steps, 5000):
            ingest.ingest(job, batch(start, min(5000, steps - start), names[:metrics]))
        history[job.pk] = steps
    ids = [job.pk for job in jobs]
    before = MetricPoint.objects.filter(series__job_id__in=ids).count()
    print(f"   seeded {before:,} points of history in {time.monotonic() - t:.1f} s")

    work = Path(args.workdir)
    jobs_file, viewers_file = work / "jobs.txt", work / "viewers.txt"
    jobs_file.write_text(
        "".join(f"{job.pk} {tokens[n]} {history[job.pk]}\n" for n, job in enumerate(jobs))
    )
    viewer_cookies = cookies(users[:viewers])
    viewers_file.write_text("".join(f"{jobs[n].pk} {viewer_cookies[n]}\n" for n in range(viewers)))
    base = f"http://127.0.0.1:{args.port}"
    # wrk's threads are up by then; no connection idles before its first call for longer
    # than the server's keep-alive (gunicorn's 2 s), which would close it under that call.
    start_ms = time.time() * 1000 + 800
    run_for = f"{math.ceil(args.ingest_seconds + 2 + 5)}s"  # 5 s for the last answers
    ingest_wrk = subprocess.Popen(
        ["wrk", "-t", str(n_jobs), "-c", str(n_jobs), "-d", run_for, "--timeout", "10s"]
        + ["-s", str(BENCH / "load" / "ingest.lua"), base, "--", str(jobs_file)]
        + [
            f"{period_ms:.3f}",
            str(records),
            str(metrics),
            str(args.ingest_seconds),
            f"{start_ms:.0f}",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    chart_wrk = subprocess.Popen(
        ["wrk", "-t", str(viewers), "-c", str(viewers), "-d", run_for, "--timeout", "10s"]
        + ["-s", str(BENCH / "load" / "chart.lua"), base, "--", str(viewers_file)]
        + ["1000", str(CHART_WIDTH), str(args.ingest_seconds), f"{start_ms:.0f}"],
        stdout=subprocess.PIPE,
        text=True,
    )
    out_ingest, out_chart = ingest_wrk.communicate()[0], chart_wrk.communicate()[0]
    got = next(
        (kv(line) for line in out_ingest.splitlines() if line.startswith("ingest_result")), None
    )
    chart = next(
        (kv(line) for line in out_chart.splitlines() if line.startswith("chart_result")), None
    )
    if got is None or chart is None:
        print(out_ingest, out_chart)
        raise SystemExit("bench/load_live.py: wrk printed no result line")

    # Calls wrk gave up on may still be queued in the server: counted once it has drained
    # (the rows stop changing), rows and the series' counters in one statement (one snapshot).
    def counts() -> tuple[int, int]:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT (SELECT count(*) FROM {MetricPoint._meta.db_table} p"  # noqa: S608
                f" JOIN {MetricSeries._meta.db_table} s ON s.id = p.series_id"
                " WHERE s.job_id = ANY(%s)),"
                f" (SELECT coalesce(sum(points), 0) FROM {MetricSeries._meta.db_table}"
                " WHERE job_id = ANY(%s))",
                [ids, ids],
            )
            rows, counters = cursor.fetchone()
        return rows - before, counters - before

    last, deadline = counts(), time.monotonic() + 120
    while time.monotonic() < deadline:
        time.sleep(2)
        now_counts = counts()
        if now_counts == last:
            break
        last = now_counts
    stored, counted = last
    acked = int(got["ok"]) * per_call
    late_calls = (stored - acked) // per_call  # stored, answered after wrk stopped
    # Exactly once: every acknowledged point stored, none twice (the answers' duplicates and
    # the unique (series, seq)), nothing beyond what was sent, the counters agree.
    exactly_once = (
        acked == got["inserted"]
        and acked <= stored <= int(got["sent"]) * per_call
        and (stored - acked) % per_call == 0
        and not got["duplicates"]
        and counted == stored
    )
    offered = n_jobs * args.points
    achieved = acked / args.ingest_seconds
    errors = ", ".join(f"{k} {int(got[k])}" for k in ("connect", "read", "write", "timeout"))
    print(
        f"   ingest call, ms: p50 {got['p50'] / 1000:.1f}, p90 {got['p90'] / 1000:.1f},"
        f" p99 {got['p99'] / 1000:.1f}, max {got['max'] / 1000:.1f}; {int(got['sent'])} sent,"
        f" {int(got['ok'])} 2xx, {int(got['refused'])} refused,"
        f" {int(got['sent'] - got['ok'] - got['refused'])} unanswered; socket errors: {errors}"
        " (read: the server closing idle keep-alive connections after the run);"
        f" {int(got['late'])} sent >100 ms behind schedule (worst {got['max_lag_ms']:.0f} ms)"
    )
    print(
        f"   stored (once the server drained): {stored:,} new points; {int(got['ok'])} calls x"
        f" {per_call} acknowledged ({acked:,}; the answers said inserted"
        f" {int(got['inserted']):,}, duplicates {int(got['duplicates'])}) + {late_calls} calls"
        f" wrk stopped waiting for; series counters {counted:,}:"
        f" {'exactly once' if exactly_once else 'MISMATCH'}"
    )
    print(
        f"   rate: {achieved:,.0f} points/s acknowledged of {offered:,.0f} offered"
        f" ({100 * achieved / offered:.1f} %), {got['requests'] / args.ingest_seconds:.0f} calls/s"
    )
    chart_errors = ", ".join(
        f"{k} {int(chart[k])}" for k in ("connect", "read", "write", "timeout")
    )
    print(
        f"   chart read meanwhile ({args.chart_history:,.0f} steps x {metrics} series, width"
        f" {CHART_WIDTH}), ms: p50 {chart['p50'] / 1000:.1f}, p90 {chart['p90'] / 1000:.1f},"
        f" p99 {chart['p99'] / 1000:.1f}, max {chart['max'] / 1000:.1f};"
        f" {int(chart['ok'])} ok of {int(chart['sent'])}, {int(chart['refused'])} refused,"
        f" socket errors: {chart_errors}"
    )

    # Queries behind one call of each kind, at two sizes.
    client = Client(HTTP_HOST="127.0.0.1")
    url = f"/api/v1/jobs/{probe.pk}/metrics/ingest/"
    seq = [0]

    def post(keys: list[str]) -> None:
        body = [
            {"seq": s, "step": s, "time": 1.7e9 + s, "metrics": {k: 0.5 for k in keys}}
            for s in range(seq[0], seq[0] + records)
        ]
        seq[0] += records
        response = client.post(
            url,
            json.dumps(body),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {tokens[-1]}",
        )
        assert response.status_code == 200, response.content

    wide = names + [f"m{n}" for n in range(20 - len(names))]
    post(names[:metrics]), post(wide)  # the series exist: steady state is measured
    q_ingest = (count_queries(lambda: post(names[:metrics])), count_queries(lambda: post(wide)))
    client.force_login(users[-1])
    chart_url = f"/jobs/{probe.pk}/metrics/?width={CHART_WIDTH}"
    q_chart_wide = count_queries(lambda: client.get(chart_url))
    MetricSeries.objects.filter(job=probe).exclude(key__in=names[:metrics]).delete()
    q_chart = count_queries(lambda: client.get(chart_url))
    print(
        f"   queries per ingest call ({metrics} -> {len(wide)} metrics a record):"
        f" {queries_text(*q_ingest, 'metrics')}; per chart read ({metrics} -> {len(wide)}"
        f" series): {queries_text(q_chart, q_chart_wide, 'series')}"
    )
    if not args.keep:
        drop_users("ingest")
    return [
        {
            "figure": (
                f"metric ingest: {n_jobs} jobs x {args.points:g} points/s ({records} records x"
                f" {metrics} metrics a call), {args.ingest_seconds:g} s: ingest call"
            ),
            "value": (
                f"p99 {got['p99'] / 1000:.1f} ms (p50 {got['p50'] / 1000:.1f}); {achieved:,.0f} of"
                f" {offered:,.0f} points/s; {'stored exactly once' if exactly_once else 'MISMATCH'}"
            ),
            "queries": f"{queries_text(*q_ingest, 'metrics')} ({metrics} -> {len(wide)} metrics)",
        },
        {
            "figure": (
                f"chart read meanwhile: {viewers} viewers x 1/s, {args.chart_history:,.0f} steps"
            ),
            "value": f"p99 {chart['p99'] / 1000:.1f} ms (p50 {chart['p50'] / 1000:.1f})",
            "queries": f"{queries_text(q_chart, q_chart_wide, 'series')} ({metrics} -> {len(wide)} series)",
        },
    ]


# -- alone: own database and stack --------------------------------------------------------


def database_url() -> str:
    return os.environ.get("LOADLIVE_DATABASE_URL", f"postgres://postgres@127.0.0.1:5432/{DATABASE}")


def ensure_database(url: str) -> None:
    """The bench's database, created if missing, migrated."""
    name = url.rsplit("/", 1)[1]
    host = url.split("@")[1].split("/")[0].split(":")[0]
    listed = subprocess.run(
        ["psql", "-h", host, "-U", "postgres", "-Atc", "select datname from pg_database"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if name not in listed:
        subprocess.run(["createdb", "-h", host, "-U", "postgres", name], check=True)
    env = {**os.environ, "DATABASE_URL": url, "PORTAL_DEMO": "1"}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small scale, for development")
    parser.add_argument("--part", choices=["fanout", "ingest"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rows-out", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument("--keep", action="store_true", help="keep the bench's users and jobs")
    parser.add_argument("--only", choices=["fanout", "ingest"], help="run one part")
    for key, value in FULL.items():
        parser.add_argument(f"--{key.replace('_', '-')}", type=type(value), default=None)
    args = parser.parse_args()

    if args.part:  # a child of run(): Django on the stack's environment
        for key, value in (QUICK if args.quick else FULL).items():
            if getattr(args, key) is None:
                setattr(args, key, value)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
        import django

        django.setup()
        rows = fanout(args) if args.part == "fanout" else ingest_part(args)
        Path(args.rows_out).write_text(json.dumps(rows))
        return

    options = {k: getattr(args, k) for k in FULL if getattr(args, k) is not None}
    if args.keep:
        options["keep"] = True
    url = database_url()
    ensure_database(url)
    tmp = Path(tempfile.mkdtemp(prefix="loadlive-"))
    stack = LoadStack(url, tmp, redis_db=REDIS_DB, prefix=PREFIX)
    print(
        f"bench/load_live.py: database {url.rsplit('/', 1)[1]}, {stack.cores} cores, {stack.web_workers} web workers"
    )
    with stack:
        rows = (
            run(stack, quick=args.quick, **options)
            if not args.only
            else _only(stack, args, options)
        )
    width = max(len(r.figure) for r in rows)
    print(f"\n{'figure':{width}}  {'value':60}  queries behind one request")
    for row in rows:
        print(f"{row.figure:{width}}  {row.value:60}  {row.queries}")
    if any("FAIL" in row.value or "MISMATCH" in row.value for row in rows):
        print(f"the stack's logs: {tmp}")
        sys.exit(1)
    shutil.rmtree(tmp, ignore_errors=True)


def _only(stack: LoadStack, args, options: dict) -> list[Row]:
    scale = {**(QUICK if args.quick else FULL), **options}
    return _child(stack, args.only, scale)


if __name__ == "__main__":
    main()
