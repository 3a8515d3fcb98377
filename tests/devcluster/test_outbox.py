"""What a job's end owes survives a broker outage (jobs/outbox.py), on the real path.

Redis is stopped while five jobs end on the dev cluster (two complete, two fail, one
reaches its time limit) and an experiment's trial finishes; a sync runs through it as a
worker holding one would (its own process, the stack's Redis). Then Redis starts again,
with a worker and beat: every email, stderr tail, final metrics tail, accounting record
and experiment step happens, once. Before the outbox, each was queued at the moment of
the change and only logged when the broker refused: all of it was lost."""

import pwd
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from experiments.models import Trial
from jobs import tasks
from jobs.models import Job, JobAttempt, JobEvent
from metrics.models import MetricPoint
from notifications.events import Event
from notifications.models import Notification, Preference
from tests import factories
from tests.livestack import ROOT, LiveStack, Redis
from tests.mailbox import address

pytestmark = [pytest.mark.devcluster, pytest.mark.mail, pytest.mark.django_db(transaction=True)]

METRICS = """python3 - <<'EOF'
import portal_metrics as pm
for s in range(40):
    pm.log(step=s, loss=1.0 / (s + 1))
pm.close()
EOF"""

# Each job waits for the test's word (a file in its owner's home) before it ends, so they
# all end while Redis is down.
GATE = 'while [ ! -e "$HOME/{gate}" ]; do sleep 0.5; done; '


def sync_in_a_process(stack: LiveStack, ids: list[int], seconds: float) -> str:
    """Sync these jobs until every one is final, in a process of the stack's own (its
    Redis, its settings), as the worker that holds a sync when Redis goes away."""
    code = (
        "import time\n"
        "from jobs.models import Job\n"
        "from jobs.tasks import sync_jobs\n"
        f"ids = {ids!r}\n"
        f"deadline = time.monotonic() + {seconds}\n"
        "while time.monotonic() < deadline:\n"
        "    rows = Job.objects.filter(pk__in=ids)\n"
        "    sync_jobs(rows)\n"
        "    if all(j.is_final for j in rows.all()):\n"
        "        break\n"
        "    time.sleep(1)\n"
    )
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=seconds + 60,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stderr


def test_a_broker_outage_while_jobs_end_loses_nothing_and_repeats_nothing(
    devcluster, owner, mailbox, tmp_path, settings
):
    owner.email = address("outbox")
    owner.save(update_fields=["email"])
    for event in (Event.JOB_COMPLETED, Event.JOB_FAILED, Event.JOB_TIMEOUT):
        Preference.set(owner, event, email=True, portal=True)
    # Nothing reaches the portal over HTTP: the points are only in the job's files.
    settings.PORTAL_URL = "http://127.0.0.1:9"
    gate = f"outbox-gate-{owner.pk}-{time.monotonic_ns()}"
    experiment = factories.experiment_record(owner, devcluster, max_trials=1, state="running")
    trial = Trial.objects.create(experiment=experiment, number=0, params={}, state="running")
    jobs = {
        "completed with metrics": factories.job(
            owner, devcluster, GATE.format(gate=gate) + METRICS
        ),
        "completed": factories.job(owner, devcluster, GATE.format(gate=gate) + "echo ok"),
        "failed": factories.job(
            owner, devcluster, GATE.format(gate=gate) + "echo 'boom-one' >&2; exit 3"
        ),
        "failed again": factories.job(
            owner, devcluster, GATE.format(gate=gate) + "echo 'boom-two' >&2; exit 4"
        ),
        "timed out": factories.job(
            owner, devcluster, "echo 'slow-one' >&2; sleep 600", time_limit_minutes=1
        ),
        "trial": factories.job(
            owner, devcluster, GATE.format(gate=gate) + "echo trial", trial=trial
        ),
    }
    for job in jobs.values():
        tasks.submit_job.apply(args=[job.pk])
        job.refresh_from_db()
        assert job.state == Job.State.PENDING, job.message
    ids = [job.pk for job in jobs.values()]
    user = jobs["completed"].cluster_account.username

    broker = Redis(tmp_path)
    broker.start()
    stack = LiveStack(
        tmp_path,
        env={
            "REDIS_URL": broker.url,
            "PORTAL_CACHE_PREFIX": "outbox",
            "EMAIL_HOST": mailbox.host,
            "EMAIL_PORT": str(mailbox.port),
            "PORTAL_NOTIFY_BATCH_SECONDS": "1",
            "PORTAL_NOTIFY_LONG_JOB_MINUTES": "0",
            "PORTAL_OUTBOX_INTERVAL": "1",
            # Only the outbox steps the experiment (beat's first periodic step is an hour off).
            "PORTAL_EXPERIMENT_INTERVAL": "3600",
            "PORTAL_EXPERIMENT_SETTLE": "0",
            "PORTAL_SYNC_INTERVAL": "3600",
        },
    )
    try:
        broker.kill()  # Redis is down from here until every job has ended
        Path(pwd.getpwnam(user).pw_dir, gate).touch()
        log = sync_in_a_process(stack, ids, seconds=240)
        states = dict(Job.objects.filter(pk__in=ids).values_list("pk", "state"))
        expected = {
            jobs["completed with metrics"].pk: "completed",
            jobs["completed"].pk: "completed",
            jobs["failed"].pk: "failed",
            jobs["failed again"].pk: "failed",
            jobs["timed out"].pk: "timeout",
            jobs["trial"].pk: "completed",
        }
        assert states == expected, (
            list(Job.objects.filter(pk__in=ids).values("state", "message")),
            log[-3000:],
        )
        owed = JobEvent.objects.filter(job_id__in=ids, settled_at__isnull=True)
        assert owed.count() == 6, "every end is still owed while the broker is down"
        assert not Notification.objects.filter(job_id__in=ids).exists()

        broker.start()  # back, empty
        stack.start_worker()
        stack._spawn_beat()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and owed.exists():
            time.sleep(1)
        assert not owed.exists(), (list(owed.values("job_id", "due")), stack.logs()[-6000:])
        messages = mailbox.wait_for(
            owner.email,
            timeout=60,
            until=lambda got: all(
                any(f"/jobs/{pk}/" in m.get_content() for m in got) for pk in ids[:5]
            ),
        )
    finally:
        stack.stop()
        broker.kill()
        Path(pwd.getpwnam(user).pw_dir, gate).unlink(missing_ok=True)

    # Told once each: one notification per job, each job in exactly one email.
    told = list(Notification.objects.filter(job_id__in=ids).values_list("job_id", "event"))
    assert sorted(told) == sorted(
        [
            (jobs["completed with metrics"].pk, Event.JOB_COMPLETED),
            (jobs["completed"].pk, Event.JOB_COMPLETED),
            (jobs["failed"].pk, Event.JOB_FAILED),
            (jobs["failed again"].pk, Event.JOB_FAILED),
            (jobs["timed out"].pk, Event.JOB_TIMEOUT),
        ]
    )
    for pk in ids[:5]:
        assert sum(f"/jobs/{pk}/" in m.get_content() for m in messages) == 1, pk
    # The stderr tails, once read.
    tails = dict(Job.objects.filter(pk__in=ids).values_list("pk", "stderr_tail"))
    assert "boom-one" in tails[jobs["failed"].pk]
    assert "boom-two" in tails[jobs["failed again"].pk]
    assert "slow-one" in tails[jobs["timed out"].pk]
    # The final metrics tail: every point, once.
    seqs = MetricPoint.objects.filter(series__job=jobs["completed with metrics"]).values_list(
        "series__key", "seq"
    )
    assert sorted(seqs) == [("loss", s) for s in range(40)]
    # Accounting's record of each run, once.
    for pk in ids:
        assert JobAttempt.objects.filter(job_id=pk).count() == 1, pk
    # The experiment stepped: its one trial is scored and it has ended.
    experiment.refresh_from_db()
    trial.refresh_from_db()
    assert trial.is_final and experiment.is_final, (trial.state, experiment.state)
    assert django_settings.PORTAL_OUTBOX_LEASE > 120  # nothing above was a second delivery
