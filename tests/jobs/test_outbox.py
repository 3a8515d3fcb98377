"""The outbox of jobs' changes (jobs/models/events.py decides, jobs/outbox.py delivers):
what a change owes is written with it and handed over until its consumer says it ran,
whatever the broker did in between."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import outbox
from jobs.models import Job, JobEvent
from schedulers.seam import Status
from tests import factories

pytestmark = pytest.mark.django_db


def owed(job: Job) -> list[list[str]]:
    return [e.due for e in JobEvent.objects.filter(job=job).order_by("id")]


def test_a_failed_job_owes_its_owner_its_tails_and_its_runs(owner, cluster):
    job = factories.job(owner, cluster, state="running", scheduler_job_id="7")
    assert job.apply_scheduler_status(Status(state=Job.State.FAILED, exit_code=2))
    assert owed(job) == [["notify:job_failed", "metrics", "stderr", "attempts"]]


def test_a_trials_job_owes_its_experiment_a_step_and_tells_nobody(owner, cluster):
    from experiments.models import Trial

    experiment = factories.experiment_record(owner, cluster)
    trial = Trial.objects.create(experiment=experiment, number=0, params={})
    job = factories.job(owner, cluster, state="running", scheduler_job_id="7", trial=trial)
    assert job.apply_scheduler_status(Status(state=Job.State.COMPLETED, exit_code=0))
    assert owed(job) == [["metrics", "attempts", "experiment"]]


def test_what_never_reached_the_scheduler_owes_no_tail_and_a_note_owes_nothing(owner, cluster):
    job = factories.job(owner, cluster, state="queued")
    assert job.note("Refused: the image is not allowed.")
    assert job.request_cancel("Stopped by the idle-GPU policy.") is False
    assert owed(job) == [[], ["notify:job_cancelled"]]
    note = JobEvent.objects.filter(job=job).first()
    assert note is not None and note.settled_at is not None  # never swept


def test_a_job_cancelled_after_its_submission_was_sent_owes_a_withdrawal(owner, cluster):
    job = factories.job(owner, cluster, state="queued")
    assert job.mark_submit_sent()  # a try sent it and never heard back
    assert job.request_cancel() is False  # ended at once: nothing for cancel_job to do
    job.refresh_from_db()
    assert job.state == "cancelled"
    assert "whatever the submission started on the cluster is cancelled too" in job.message
    assert owed(job) == [["notify:job_cancelled", "withdraw"]]


def test_a_cancelled_job_is_never_sent(owner, cluster):
    job = factories.job(owner, cluster, state="queued")
    assert job.request_cancel() is False
    assert not job.mark_submit_sent()  # the try that held its claim sends nothing
    assert Job.objects.get(pk=job.pk).submit_sent_at is None


def test_a_failed_submission_that_was_sent_owes_a_withdrawal(owner, cluster):
    job = factories.job(owner, cluster, state="queued")
    job.mark_submit_sent()
    assert job.submit_timed_out(30, "take the job")
    assert owed(job) == [["notify:job_failed", "withdraw"]]


def test_an_array_members_cancel_owes_a_withdrawal_once_its_array_was_sent(owner, cluster):
    from jobs.models import JobArray

    array = JobArray.objects.create(owner=owner, cluster=cluster)
    first, second = (
        factories.job(owner, cluster, state="queued", array=array, array_index=i) for i in (0, 1)
    )
    assert first.request_cancel() is False
    assert owed(first) == [["notify:job_cancelled"]]  # nothing sent yet
    array.mark_submit_sent()
    assert second.request_cancel() is False
    assert owed(second) == [["notify:job_cancelled", "withdraw"]]


def test_a_running_job_seen_running_again_owes_nothing(owner, cluster):
    job = factories.job(owner, cluster, state="running", scheduler_job_id="7", node="n1")
    assert not job.apply_scheduler_status(Status(state=Job.State.RUNNING, node="n1"))
    assert owed(job) == []


def test_a_broker_outage_leaves_the_event_due_and_the_sweep_hands_it_over(
    owner, cluster, monkeypatch
):
    job = factories.job(owner, cluster, state="running", scheduler_job_id="7")
    job.apply_scheduler_status(Status(state=Job.State.FAILED, exit_code=1))
    handed: list[outbox.Due] = []

    def broker_down(dues):
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    for consumer in ("notify", "metrics", "stderr", "attempts"):
        monkeypatch.setitem(outbox.CONSUMERS, consumer, broker_down)
    assert outbox.deliver() == 0
    (event,) = JobEvent.objects.filter(job=job)
    assert event.sent_at is None and event.settled_at is None  # given back, not lost

    for consumer in ("notify", "metrics", "stderr", "attempts"):
        monkeypatch.setitem(outbox.CONSUMERS, consumer, handed.extend)
    assert outbox.deliver() == 1
    assert sorted(d.entry for d in handed) == sorted(event.due)
    assert outbox.deliver() == 0  # claimed: not handed over twice
    for due in handed:
        outbox.done(due.event_id, due.entry)
    event.refresh_from_db()
    assert event.due == [] and event.settled_at is not None


def test_what_was_handed_over_and_never_done_is_handed_over_again_after_the_lease(
    owner, cluster, settings, outbox_dues
):
    """The broker restarted empty, or a worker died holding the task."""
    settings.PORTAL_OUTBOX_LEASE = 600
    job = factories.job(owner, cluster, state="running", scheduler_job_id="7")
    job.apply_scheduler_status(Status(state=Job.State.TIMEOUT))
    assert outbox.deliver() == 1
    first = {d.entry for d in outbox_dues}
    outbox.done(outbox_dues[0].event_id, "stderr")  # one consumer ran
    assert outbox.deliver() == 0  # within the lease
    JobEvent.objects.filter(job=job).update(sent_at=timezone.now() - timedelta(seconds=601))
    outbox_dues.clear()
    assert outbox.deliver() == 1
    assert {d.entry for d in outbox_dues} == first - {"stderr"}


def test_done_by_an_old_task_or_twice_changes_nothing(owner, cluster):
    job = factories.job(owner, cluster, state="running", scheduler_job_id="7")
    job.apply_scheduler_status(Status(state=Job.State.COMPLETED, exit_code=0))
    (event,) = JobEvent.objects.filter(job=job)
    outbox.done(None, "metrics")  # a message queued before the outbox
    outbox.done(event.pk, "metrics")
    outbox.done(event.pk, "metrics")
    outbox.done(event.pk, "no-such-entry")
    event.refresh_from_db()
    assert event.due == ["notify:job_completed", "attempts"] and event.settled_at is None


def test_a_consumer_missing_from_this_version_keeps_its_events_due(owner, cluster, monkeypatch):
    job = factories.job(owner, cluster, state="running", scheduler_job_id="7")
    job.apply_scheduler_status(Status(state=Job.State.COMPLETED, exit_code=0))
    monkeypatch.delitem(outbox.CONSUMERS, "attempts")
    assert outbox.deliver() == 0
    (event,) = JobEvent.objects.filter(job=job)
    assert event.sent_at is None and "attempts" in event.due


def test_real_tasks_take_the_dues_and_say_when_they_ran(owner, cluster, monkeypatch):
    """The consumers' own functions, on Celery's eager mode: each task tells the outbox."""
    from jobs import tasks
    from notifications import receivers
    from portal.celery import app as celery_app
    from tracking import tasks as metric_tasks

    monkeypatch.setitem(celery_app.conf, "task_always_eager", True)
    monkeypatch.setattr("jobs.sync.record_attempts", lambda ids, last_try=False: None)
    monkeypatch.setattr("tracking.tasks.tail_job", lambda job, max_passes: 0)
    monkeypatch.setattr("clusters.files.read_job_log", _no_log)
    monkeypatch.setitem(outbox.CONSUMERS, "notify", receivers.queue_for_job_events)
    monkeypatch.setitem(outbox.CONSUMERS, "metrics", metric_tasks.queue_final_tails)
    monkeypatch.setitem(outbox.CONSUMERS, "stderr", tasks.queue_error_tails)
    monkeypatch.setitem(outbox.CONSUMERS, "attempts", tasks.queue_attempts)
    job = factories.job(
        owner, cluster, state="running", scheduler_job_id="7", ended_at=timezone.now()
    )
    job.apply_scheduler_status(Status(state=Job.State.FAILED, exit_code=1))
    JobEvent.objects.filter(job=job).update(at=timezone.now() - timedelta(minutes=1))
    Job.objects.filter(pk=job.pk).update(ended_at=timezone.now() - timedelta(minutes=1))
    assert outbox.deliver() == 1
    (event,) = JobEvent.objects.filter(job=job)
    assert event.due == [] and event.settled_at is not None


def _no_log(job, name, max_bytes):
    from clusters import ssh

    raise ssh.CommandFailed("stderr.log: No such file or directory", exit_status=1)
