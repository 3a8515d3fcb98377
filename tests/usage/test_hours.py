"""Usage from accounting: GPU-/CPU-hours per month, user, account and cluster (one query),
the CSV, the Usage page for users and staff, and GPUs held idle from nvidia-smi samples."""

import time
from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings

from jobs.models import Job
from tests import factories
from usage import hours as usage

pytestmark = pytest.mark.django_db

NOV = datetime(2026, 11, 3, 10, tzinfo=UTC)
OCT = datetime(2026, 10, 30, 23, tzinfo=UTC)


@pytest.fixture
def runs(owner, cluster):
    other = factories.user("bob")
    a = factories.job(owner, cluster, partition="gpu", gpus=2, account="proj1", state="completed")
    factories.job_attempt(
        a, 0, started_at=OCT, elapsed_seconds=1800, gpus=2, cpus=4, state="REQUEUED"
    )
    factories.job_attempt(a, 1, started_at=NOV, elapsed_seconds=3600, gpus=2, cpus=4)
    b = factories.job(other, cluster, partition="gpu", gpus=1, account="=cmd|x", state="completed")
    factories.job_attempt(b, 0, started_at=NOV, elapsed_seconds=7200, gpus=1, cpus=2)
    return a, b


def test_monthly_usage_per_user_account_and_cluster_counts_every_attempt(runs, owner):
    rows = usage.monthly(usage.attempts_for(owner, everyone=True))
    assert [
        (r.month.isoformat(), r.user, r.account, r.jobs, r.gpu_hours, r.cpu_hours) for r in rows
    ] == [
        ("2026-11-01", "bob", "=cmd|x", 1, 2.0, 4.0),
        ("2026-11-01", "owner", "proj1", 1, 2.0, 4.0),
        ("2026-10-01", "owner", "proj1", 1, 1.0, 2.0),
    ]
    mine = usage.monthly(usage.attempts_for(owner))
    assert {r.user for r in mine} == {"owner"} and usage.totals(mine)["gpu_hours"] == 3.0


def test_the_csv_quotes_cells_a_spreadsheet_would_run(runs, owner):
    text = usage.as_csv(usage.monthly(usage.attempts_for(owner, everyone=True)))
    lines = text.splitlines()
    assert lines[0] == "month,user,account,cluster,jobs,gpu_hours,cpu_hours,wall_hours"
    assert lines[1] == "2026-11,bob,'=cmd|x,testcluster,1,2.000,4.000,2.000"


def test_the_usage_page_shows_own_usage_and_staff_see_everyones(runs, client, owner, staff):
    client.force_login(owner)
    page = client.get("/usage/").content.decode()
    assert "proj1" in page and "bob" not in page and "=cmd|x" not in page
    client.force_login(staff)
    page = client.get("/usage/?user=bob").content.decode()
    assert "=cmd|x" in page and "proj1" not in page
    csv = client.get("/usage/?from=2026-10&to=2026-10&format=csv")
    assert csv["Content-Type"].startswith("text/csv")
    assert csv.content.decode().splitlines()[1:] == [
        "2026-10,owner,proj1,testcluster,1,1.000,2.000,0.500"
    ]
    bad = client.get("/usage/?from=last-year").content.decode()
    assert "From: &#x27;last-year&#x27; is not a month like 2026-11. Ignored." in bad


@override_settings(PORTAL_GPU_IDLE_MINUTES=30, PORTAL_GPU_IDLE_PERCENT=5)
def test_a_job_whose_gpus_stayed_idle_for_the_window_is_flagged(owner, cluster, client):
    now = time.time()
    idle = factories.job(owner, cluster, partition="gpu", gpus=1, state="running", kind="notebook")
    factories.gpu_samples(idle, [0, 1, 0, 2, 0, 0, 1, 0] * 5, end=now - 10)  # 40 min
    busy = factories.job(owner, cluster, partition="gpu", gpus=1, state="running")
    factories.gpu_samples(busy, [0] * 30 + [90] + [0] * 9, end=now - 10)  # busy 9 min ago
    young = factories.job(owner, cluster, partition="gpu", gpus=1, state="running")
    factories.gpu_samples(young, [0] * 10, end=now - 10)  # only 9 minutes of samples
    stale = factories.job(owner, cluster, partition="gpu", gpus=1, state="running")
    factories.gpu_samples(stale, [0] * 40, end=now - 3600)  # its sampler stopped long ago
    ended = factories.job(owner, cluster, partition="gpu", gpus=1, state="completed")
    factories.gpu_samples(ended, [0] * 40, end=now - 10)
    flagged = usage.idle_gpu_jobs(Job.objects.all(), now=now)
    assert set(flagged) == {idle.pk}
    assert flagged[idle.pk].peak_percent == 2

    client.force_login(owner)
    banner = "This job's 1 GPU has been idle for the last 30 minutes (at most 2% utilisation)"
    assert banner in client.get(f"/jobs/{idle.pk}/").content.decode()
    assert "idle for the last" not in client.get(f"/jobs/{busy.pk}/").content.decode()
    page = client.get("/usage/").content.decode()
    assert f'href="/jobs/{idle.pk}/"' in page and f'href="/jobs/{busy.pk}/"' not in page


def test_the_usage_api_gives_the_same_rows_and_refuses_bad_months(runs, owner, staff):
    api = factories.api_client(owner)
    assert api.get("/api/v1/usage/").json() == [
        {
            "month": "2026-11",
            "user": "owner",
            "account": "proj1",
            "cluster": "testcluster",
            "jobs": 1,
            "gpu_hours": 2.0,
            "cpu_hours": 4.0,
            "wall_hours": 1.0,
        },
        {
            "month": "2026-10",
            "user": "owner",
            "account": "proj1",
            "cluster": "testcluster",
            "jobs": 1,
            "gpu_hours": 1.0,
            "cpu_hours": 2.0,
            "wall_hours": 0.5,
        },
    ]
    refused = api.get("/api/v1/usage/?from=2026-13&user=bob")
    assert refused.status_code == 400
    fields = refused.json()["error"]["fields"]
    assert fields == {
        "from": ["'2026-13' is not a month like 2026-11."],
        "user": ["Only staff see other users' usage."],
    }
    # Staff powers through the API need a token with the admin scope.
    admin = factories.api_client(staff, scopes="read,admin")
    everyone = admin.get("/api/v1/usage/?from=2026-11&to=2026-11").json()
    assert {r["user"] for r in everyone} == {"owner", "bob"}


def test_accounting_reads_never_go_back_and_the_account_charged_counts(owner, cluster):
    from jobs.models import JobAttempt
    from schedulers.seam import Attempt

    job = factories.job(owner, cluster, partition="gpu", gpus=1, account="asked")
    running = Attempt("RUNNING", "node1", NOV, None, 60, 1, 2, account="charged")
    ended = Attempt("COMPLETED", "node1", NOV, NOV + timedelta(seconds=90), 90, 1, 2, "charged")
    assert JobAttempt.record(job, [ended]) == 1 and JobAttempt.settled(job)
    assert JobAttempt.record(job, [running]) == 0  # an older snapshot, read later
    row = job.attempts.get()
    assert (row.scheduler_state, row.elapsed_seconds, row.ended_at) == (
        "COMPLETED",
        90,
        ended.ended_at,
    )
    [usage_row] = usage.monthly(usage.attempts_for(owner))
    assert usage_row.account == "charged"


@override_settings(PORTAL_GPU_IDLE_MINUTES=30, PORTAL_GPU_IDLE_PERCENT=5)
def test_an_earlier_attempts_samples_do_not_make_a_requeued_job_idle(owner, cluster):
    now = time.time()
    job = factories.job(owner, cluster, partition="gpu", gpus=1, state="running", attempt=1)
    old = factories.gpu_samples(job, [0] * 40, end=now - 700)  # attempt 0, long idle
    old.attempt = 0
    old.save()
    factories.gpu_samples(job, [0] * 10, end=now - 10, gpu=1)  # attempt 1: 9 minutes so far
    job.metric_series.filter(key__startswith="sys/gpu1").update(attempt=1)
    assert usage.idle_gpu_jobs(Job.objects.all(), now=now) == {}


@override_settings(PORTAL_GPU_IDLE_PERCENT=5, PORTAL_URL="https://portal.example.org")
def test_the_efficiency_digest_splits_gpu_hours_held_and_idle_per_user_and_partition(
    owner, staff, cluster, client
):
    from django.core import mail as outbox
    from django.utils import timezone

    from usage import tasks

    now, started = time.time(), timezone.now() - timedelta(days=1)
    idle = factories.job(owner, cluster, partition="gpu", gpus=2, state="completed")
    factories.job_attempt(idle, started_at=started, elapsed_seconds=7200, gpus=2)
    factories.gpu_samples(idle, [0, 0, 0, 90], end=now)  # 3 of 4 samples idle: 3 of 4 GPU-h
    busy = factories.job(owner, cluster, partition="gpu", gpus=1, state="completed")
    factories.job_attempt(busy, started_at=started, elapsed_seconds=3600, gpus=1)
    factories.gpu_samples(busy, [80, 95], end=now)
    old = factories.job(owner, cluster, partition="gpu", gpus=1, state="completed")
    factories.job_attempt(
        old, started_at=started - timedelta(days=30), elapsed_seconds=3600, gpus=1
    )
    cpu = factories.job(owner, cluster, partition="cpu", gpus=0, state="completed")
    factories.job_attempt(cpu, started_at=started, elapsed_seconds=3600, gpus=0)

    rows = usage.efficiency(timezone.now() - timedelta(days=7))
    assert [(r.user, r.partition, r.jobs, r.gpu_hours, r.idle_gpu_hours) for r in rows] == [
        ("owner", "testcluster/gpu", 2, 5.0, 3.0)
    ]
    assert rows[0].worst == [(idle.pk, 3.0)]

    client.force_login(owner)
    assert client.get("/usage/efficiency/").status_code == 404
    client.force_login(staff)
    page = client.get("/usage/efficiency/?days=7").content.decode()
    assert "<td data-held>5.00</td><td data-idle>3.00</td>" in page
    assert f'href="/jobs/{idle.pk}/"' in page and f'href="/jobs/{busy.pk}/"' not in page

    staff.email = "staff@example.org"
    staff.save()
    assert tasks.send_efficiency_digest.apply().get() == 1
    (sent,) = outbox.outbox
    assert sent.to == ["staff@example.org"]
    assert "owner on testcluster/gpu: 2 jobs, 5.0 GPU-h held, 3.0 idle (60%)" in sent.body
    assert f"https://portal.example.org/jobs/{idle.pk}/" in sent.body
