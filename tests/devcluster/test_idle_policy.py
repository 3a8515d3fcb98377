"""The idle-GPU policy on the real dev cluster: a notebook session holding a GPU it does not
use (the fake nvidia-smi reports 0 % while JupyterLab's kernel may be busy) is sampled by
its metrics client over SSH; in a dry run the policy only lists it (staff page) and cancels
nothing; enforced, it warns the owner (banner with Keep it, timeline, notification), the
owner's Keep it extends the grace once, and after the grace the portal scancels it with the
policy's reason in its timeline and the cancellation's notification. Minutes are fractions
so that the test takes about two minutes."""

import pytest
from django.test import override_settings
from django.utils import timezone

from clusters.models import Partition
from jobs import tasks
from jobs.models import Job
from notifications import tasks as notify
from notifications.events import Event
from notifications.models import Notification
from tests import factories, polling
from tests.devcluster.helpers import run_until
from tracking.tail import tail_job
from usage import idle_policy

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]


@pytest.fixture(autouse=True)
def no_worker(monkeypatch, notify_now):
    """No Celery worker here: what the portal queues runs at once, in this process."""
    monkeypatch.setattr(tasks.record_attempts, "delay", lambda *a, **k: None)
    monkeypatch.setattr(tasks.cancel_job, "delay", lambda *a: tasks.cancel_job.apply(args=a))


def evaluate_until(job, capture, what: str, done, timeout: float = 120):
    """Sample the job's GPUs (its metrics client's files over SSH) and run the policy's
    pass (as beat would) until ``done(pass)``."""

    def evaluated() -> tuple | None:
        tail_job(job, max_passes=5)
        with capture(execute=True):
            result = idle_policy.evaluate()
        return (result,) if done(result) else None

    (result,) = polling.until(evaluated, timeout, f"the policy's pass to have {what}", 2)
    job.refresh_from_db()
    return result


@override_settings(PORTAL_SYSTEM_METRICS_INTERVAL=2)
def test_an_idle_notebook_is_listed_in_dry_run_then_warned_kept_once_and_cancelled(
    devcluster, owner, staff, client, django_capture_on_commit_callbacks
):
    devcluster.metrics_over_ssh = True
    devcluster.save()
    gpu = Partition.objects.get(cluster=devcluster, name="gpu")
    Partition.objects.filter(pk=gpu.pk).update(
        idle_policy=Partition.IdlePolicy.DRY_RUN,
        idle_percent=5,
        idle_minutes=0.3,  # 18 s
        idle_grace_minutes=0.25,  # 15 s
        idle_keep_minutes=0.25,
    )
    job = factories.job(
        owner, devcluster, "", kind=Job.Kind.NOTEBOOK, partition="gpu", gpus=1, time_limit_minutes=6
    )
    tasks.submit_job.apply(args=[job.pk])
    job = run_until(job, {"running"}, timeout=90)
    capture = django_capture_on_commit_callbacks

    # Dry run: listed with when it would be cancelled; past that time, nothing is cancelled.
    evaluate_until(job, capture, "listed", lambda p: job.pk in p.would_cancel)
    would = job.idle_cancel_at
    assert would is not None and job.idle_warned_at is None
    client.force_login(staff)
    page = client.get("/usage/idle-policy/").content.decode()
    assert f'<tr data-job="{job.pk}">' in page and "would be" in page
    evaluate_until(
        job, capture, "past its would-be time", lambda p: timezone.now() > would and p.would_cancel
    )
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING and job.cancel_requested_at is None
    assert not Notification.objects.filter(job=job).exists()

    # Enforced: warned (banner, timeline, notification) with the time it will be cancelled.
    Partition.objects.filter(pk=gpu.pk).update(idle_policy=Partition.IdlePolicy.ENFORCE)
    evaluate_until(job, capture, "warned", lambda p: job.pk in p.warned)
    warned_until = job.idle_cancel_at
    assert job.idle_warned_at is not None and job.state == Job.State.RUNNING
    note = Notification.objects.get(job=job, event=Event.GPU_IDLE)
    assert "idle-GPU policy of partition gpu will cancel it at" in note.text
    client.force_login(owner)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "data-idle-warning" in page and "data-keep-gpus" in page

    # Keep it: once, by its owner; a second press changes nothing.
    client.post(f"/jobs/{job.pk}/keep-gpus/")
    job.refresh_from_db()
    kept_until = job.idle_cancel_at
    assert job.idle_kept_by == owner and (kept_until - warned_until).total_seconds() == 15
    client.post(f"/jobs/{job.pk}/keep-gpus/")
    job.refresh_from_db()
    assert job.idle_cancel_at == kept_until

    # After the (extended) grace the portal cancels it, with the policy's reason.
    evaluate_until(job, capture, "cancelled", lambda p: job.pk in p.cancelled)
    cancelled_at = timezone.now()
    assert cancelled_at >= kept_until
    job = run_until(job, {"cancelled"}, timeout=60)
    gpu.refresh_from_db()
    reason = idle_policy.reason(gpu)
    assert job.cancel_reason == reason and job.events.last().message == reason
    notify.notify_job.apply(args=[job.pk, Event.JOB_CANCELLED])
    text = Notification.objects.get(job=job, event=Event.JOB_CANCELLED).text
    assert "cancelled by a policy" in text and "idle-GPU policy of partition devcluster/gpu" in text
    print(
        f"job {job.pk}: would cancel at {would:%H:%M:%S}, warned until {warned_until:%H:%M:%S}, "
        f"kept until {kept_until:%H:%M:%S}, cancelled at {cancelled_at:%H:%M:%S}"
    )
