"""The idle-GPU policy on fake nvidia-smi samples: a job whose GPUs all stayed at or below
the partition's threshold for its idle minutes is warned (banner, timeline, notification),
its owner's one Keep it moves the cancellation, after the grace the portal cancels it with
the policy's reason; dry run only lists; jobs without GPUs, busy ones and partitions
without a policy are left alone. (The real path is tests/devcluster/test_idle_policy.py.)"""

import time
from datetime import UTC, datetime, timedelta

import pytest

from clusters.models import Partition
from jobs import tasks
from jobs.models import Job
from notifications import tasks as notify
from notifications.events import Event
from notifications.models import Notification
from schedulers.seam import Status
from tests import factories
from usage import idle_policy

pytestmark = pytest.mark.django_db


@pytest.fixture
def cancels(monkeypatch, notify_now):
    sent = []
    monkeypatch.setattr(tasks.cancel_job, "delay", lambda *a: sent.append(a[0]))
    return sent


def policy(cluster, mode=Partition.IdlePolicy.ENFORCE, name="gpu", **fields):
    values = dict(
        idle_policy=mode,
        idle_percent=5,
        idle_minutes=30,
        idle_grace_minutes=2,
        idle_keep_minutes=3,
    )
    values.update(fields)
    Partition.objects.filter(cluster=cluster, name=name).update(**values)
    return Partition.objects.get(cluster=cluster, name=name)


def idle_job(owner, cluster, now, values=None, **fields):
    job = factories.job(
        owner, cluster, partition="gpu", gpus=1, state="running", kind="notebook", **fields
    )
    # 40 minutes of samples, the last 10 s before ``now``.
    factories.gpu_samples(job, values or [0, 3, 0, 5, 0] * 8, end=now.timestamp() - 10)
    return job


def at(now, minutes):
    return now + timedelta(minutes=minutes)


def test_an_idle_job_is_warned_then_cancelled_after_the_grace_with_the_reason(
    owner, cluster, cancels, django_capture_on_commit_callbacks
):
    now = datetime.fromtimestamp(time.time(), tz=UTC)
    policy(cluster)
    job = idle_job(owner, cluster, now)
    busy = idle_job(owner, cluster, now, values=[0] * 39 + [6])  # 6 % > 5 % a moment ago
    no_gpu = factories.job(owner, cluster, partition="gpu", gpus=0, state="running")
    factories.gpu_samples(no_gpu, [0] * 40, end=now.timestamp() - 10)
    with django_capture_on_commit_callbacks(execute=True):
        done = idle_policy.evaluate(now)
    assert done.warned == [job.pk] and not done.cancelled
    job.refresh_from_db()
    assert job.idle_warned_at == now and job.idle_cancel_at == at(now, 2)
    assert busy.idle_cancel_at is None and no_gpu.idle_cancel_at is None
    timeline = job.events.last().message
    assert "Idle-GPU policy of partition testcluster/gpu" in timeline
    note = Notification.objects.get(recipient=owner, event=Event.GPU_IDLE)
    assert note.in_portal and note.email == Notification.Email.NONE  # email only if chosen
    assert "idle-GPU policy of partition gpu will cancel it at" in note.text

    # Still inside the grace: nothing; a second pass does not warn again.
    with django_capture_on_commit_callbacks(execute=True):
        assert idle_policy.evaluate(at(now, 1.9)).warned == []
    assert cancels == [] and Notification.objects.filter(event=Event.GPU_IDLE).count() == 1
    with django_capture_on_commit_callbacks(execute=True):
        assert idle_policy.evaluate(at(now, 2)).cancelled == [job.pk]
    assert cancels == [job.pk]
    job.refresh_from_db()
    assert job.cancel_reason.startswith("Cancelled by the idle-GPU policy of partition ")
    assert "at or below 5% utilisation for 30 minutes" in job.cancel_reason
    # Slurm's end makes the reason its final message (the timeline) and tells the owner.
    job.apply_scheduler_status(Status(Job.State.CANCELLED, started=True))
    job.refresh_from_db()
    assert job.events.last().message == job.cancel_reason
    notify.notify_job.apply(args=[job.pk, Event.JOB_CANCELLED])
    text = Notification.objects.get(event=Event.JOB_CANCELLED).text
    assert "was cancelled by a policy (the portal's idle-GPU policy) (Cancelled by the idle" in text
    assert idle_policy.evaluate(at(now, 3)).cancelled == []  # once


def test_keep_it_extends_once_only_for_the_owner(owner, cluster, cancels, client):
    now = datetime.fromtimestamp(time.time(), tz=UTC)
    policy(cluster, idle_keep_minutes=2)
    job = idle_job(owner, cluster, now)
    idle_policy.evaluate(now)
    client.force_login(owner)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "data-idle-warning" in page and "data-keep-gpus" in page

    other = factories.user("mallory")
    assert not idle_policy.keep(job, other)
    stranger = factories.user("eve", "eve-pass-123", superuser=True)
    client.force_login(stranger)
    client.post(f"/jobs/{job.pk}/keep-gpus/")
    job.refresh_from_db()
    assert job.idle_kept_at is None and job.idle_cancel_at == at(now, 2)

    client.force_login(owner)
    assert client.post(f"/jobs/{job.pk}/keep-gpus/").status_code == 302
    job.refresh_from_db()
    assert job.idle_kept_by == owner and job.idle_cancel_at == at(now, 4)
    assert job.events.last().message.startswith("Kept by owner against the idle-GPU policy")
    assert not idle_policy.keep(job, owner)  # once
    client.post(f"/jobs/{job.pk}/keep-gpus/")
    job.refresh_from_db()
    assert job.idle_cancel_at == at(now, 4)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "kept once already by owner" in page and "data-keep-gpus" not in page

    assert idle_policy.evaluate(at(now, 2)).cancelled == [] and cancels == []
    assert idle_policy.evaluate(at(now, 3.9)).cancelled == []
    assert idle_policy.evaluate(at(now, 4)).cancelled == [job.pk]
    assert Job.objects.get(pk=job.pk).cancel_requested_at is not None


def test_dry_run_lists_what_it_would_cancel_and_cancels_nothing(
    owner, staff, cluster, cancels, client, django_capture_on_commit_callbacks
):
    now = datetime.fromtimestamp(time.time(), tz=UTC)
    policy(cluster, Partition.IdlePolicy.DRY_RUN)
    job = idle_job(owner, cluster, now)
    with django_capture_on_commit_callbacks(execute=True):
        assert idle_policy.evaluate(now).would_cancel == [job.pk]
        assert idle_policy.evaluate(at(now, 4)).would_cancel == [job.pk]
    job.refresh_from_db()
    assert cancels == [] and job.cancel_requested_at is None
    assert job.idle_warned_at is None and job.idle_cancel_at == at(now, 2)
    assert not Notification.objects.exists() and not idle_policy.keep(job, owner)
    client.force_login(owner)
    assert "data-idle-warning" not in client.get(f"/jobs/{job.pk}/").content.decode()
    assert client.get("/usage/idle-policy/").status_code == 404
    client.force_login(staff)
    page = client.get("/usage/idle-policy/").content.decode()
    assert f'<tr data-job="{job.pk}">' in page and "would be " in page
    assert "dry run (list only)" in page

    # Switched to enforce, a listed job is warned first (its grace starts), not cancelled.
    policy(cluster)
    assert idle_policy.evaluate(at(now, 4.5)).warned == [job.pk] and cancels == []


def test_off_by_default_and_a_job_busy_again_is_no_longer_warned(owner, cluster, cancels):
    now = datetime.fromtimestamp(time.time(), tz=UTC)
    job = idle_job(owner, cluster, now)
    assert Partition.objects.get(cluster=cluster, name="gpu").idle_policy == ""
    assert idle_policy.evaluate(now).warned == []
    policy(cluster, idle_percent=2)  # 3 % and 5 % samples: not idle at this threshold
    assert idle_policy.evaluate(now).warned == []
    policy(cluster, idle_minutes=45)  # only 40 minutes of samples: not judged yet
    assert idle_policy.evaluate(now).warned == []
    policy(cluster)
    assert idle_policy.evaluate(now).warned == [job.pk]
    factories.gpu_samples(job, [80], end=now.timestamp() + 30, gpu=1)  # a second GPU, busy
    assert idle_policy.evaluate(at(now, 1)).cleared == [job.pk]
    job.refresh_from_db()
    assert job.idle_cancel_at is None and idle_policy.evaluate(at(now, 3)).cancelled == []
    assert Job.objects.get(pk=job.pk).cancel_requested_at is None
