"""From a job's end to an email: the task records what the person chose, and their
pending emails leave as one message, within the per-person rate limit, past which they are
gathered into one digest sent when the window ends. (locmem backend; the real server is in
tests/devcluster/test_notifications_mail.py.)"""

from datetime import timedelta

import pytest
from django.core import mail as outbox
from django.utils import timezone

from jobs import outbox as jobs_outbox
from jobs.models import Job
from notifications import tasks
from notifications.events import Event
from notifications.models import Notification, Preference, SentEmail
from schedulers.seam import Status
from tests import factories


@pytest.fixture
def person(db):
    return factories.user("owner", "owner-pass-123", email="owner@example.org")


@pytest.fixture
def limits(settings):
    settings.PORTAL_NOTIFY_EMAIL_MAX = 2
    settings.PORTAL_NOTIFY_EMAIL_WINDOW_MINUTES = 60
    settings.PORTAL_URL = "https://portal.example.org"
    return settings


def failed(person, cluster, **fields):
    values = dict(state="failed", message="The job exited with status 3.", ended_at=timezone.now())
    values.update(fields)
    return factories.job(person, cluster, stderr_tail="Traceback\nValueError: boom", **values)


def test_a_failed_jobs_email_has_its_stderr_tail_link_and_unsubscribe(person, cluster, limits):
    job = failed(person, cluster)
    tasks.notify_job.apply(args=[job.pk, Event.JOB_FAILED])
    assert tasks.deliver_email.apply(args=[person.pk]).get() == 1
    (message,) = outbox.outbox
    assert message.to == ["owner@example.org"]
    assert f"https://portal.example.org/jobs/{job.pk}/" in message.body
    assert "    ValueError: boom" in message.body
    assert message.extra_headers["List-Unsubscribe"].startswith(
        "<https://portal.example.org/notifications/unsubscribe/"
    )
    assert message.extra_headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert Notification.objects.get().email == "sent"


def test_rate_limit_gathers_the_rest_into_one_digest_when_the_window_ends(
    person, cluster, limits, django_capture_on_commit_callbacks
):
    jobs = [failed(person, cluster, name=f"run {i}") for i in range(5)]
    for job in jobs[:2]:  # two emails: the limit
        tasks.notify_job.apply(args=[job.pk, Event.JOB_FAILED])
        assert tasks.deliver_email.apply(args=[person.pk]).get() == 1
    for job in jobs[2:]:
        tasks.notify_job.apply(args=[job.pk, Event.JOB_FAILED])
    with django_capture_on_commit_callbacks(execute=False) as later:
        assert tasks.deliver_email.apply(args=[person.pk]).get() == 0  # held
    assert len(later) == 1  # a delivery queued for when the window ends
    assert len(outbox.outbox) == 2
    assert Notification.objects.filter(email="pending").count() == 3
    SentEmail.objects.update(sent_at=timezone.now() - timedelta(minutes=61))
    assert tasks.deliver_email.apply(args=[person.pk]).get() == 3
    digest = outbox.outbox[-1]
    assert digest.subject == "3 notifications from the HPC portal"
    for job in jobs[2:]:
        assert f"/jobs/{job.pk}/" in digest.body
    assert "List-Unsubscribe" in digest.extra_headers  # all one event


def test_a_burst_of_a_hundred_failures_is_one_email(person, cluster, limits):
    for _ in range(100):
        tasks.notify_job.apply(args=[failed(person, cluster).pk, Event.JOB_FAILED])
    assert tasks.deliver_email.apply(args=[person.pk]).get() == 100
    assert tasks.deliver_email.apply(args=[person.pk]).get() == 0
    assert len(outbox.outbox) == 1


def test_rules_per_event(person, cluster, limits, staff):
    limits.PORTAL_NOTIFY_LONG_JOB_MINUTES = 30
    now = timezone.now()
    short = factories.job(person, cluster, state="completed", started_at=now, ended_at=now)
    long = factories.job(
        person, cluster, state="completed", started_at=now - timedelta(hours=1), ended_at=now
    )
    by_owner = factories.job(person, cluster, state="cancelled", cancel_requested_at=now)
    by_policy = factories.job(
        person, cluster, state="cancelled", cancel_requested_at=now, cancel_reason="Stopped early."
    )
    by_staff = factories.job(person, cluster, state="cancelled", cancel_requested_at=now)
    factories.audit_event("staff", "cancel", target=f"job {by_staff.pk} (123)", user=staff)
    for job, event in [
        (short, Event.JOB_COMPLETED),
        (long, Event.JOB_COMPLETED),
        (by_owner, Event.JOB_CANCELLED),
        (by_policy, Event.JOB_CANCELLED),
        (by_staff, Event.JOB_CANCELLED),
    ]:
        tasks.notify_job.apply(args=[job.pk, event])
    told = {n.job_id: n.text for n in Notification.objects.all()}
    assert set(told) == {long.pk, by_policy.pk, by_staff.pk}
    assert "cancelled by the portal (Stopped early.)" in told[by_policy.pk]
    assert "cancelled by staff" in told[by_staff.pk]


def told_of(outbox_dues) -> list[tuple[int, str]]:
    """(job id, notification event) of what the changes so far owe their owners."""
    jobs_outbox.deliver()
    return [(d.job_id, d.argument) for d in outbox_dues if d.consumer == "notify"]


def test_trials_jobs_do_not_notify_one_by_one(person, cluster, outbox_dues):
    from experiments.models import Trial

    experiment = factories.experiment_record(person, cluster)
    trial = Trial.objects.create(experiment=experiment, number=0, params={})
    alone = factories.job(person, cluster, state="running", scheduler_job_id="1")
    in_trial = factories.job(person, cluster, state="running", scheduler_job_id="2", trial=trial)
    for job in (in_trial, alone):
        job.apply_scheduler_status(Status(state=Job.State.FAILED, exit_code=1))
    assert told_of(outbox_dues) == [(alone.pk, Event.JOB_FAILED)]
    # The trial's experiment steps instead (it tells its owner when it ends).
    assert [(d.job_id, d.entry) for d in outbox_dues if d.consumer == "experiment"] == [
        (in_trial.pk, "experiment")
    ]


def test_started_after_a_long_wait_and_session_ready_are_owed_by_the_outbox(
    person, cluster, settings, outbox_dues
):
    from proxy.models import SessionLink

    settings.PORTAL_NOTIFY_STARTED_AFTER_MINUTES = 30
    now = timezone.now()
    waited = factories.job(
        person,
        cluster,
        state="pending",
        submitted_at=now - timedelta(hours=1),
        scheduler_job_id="1",
    )
    quick = factories.job(
        person,
        cluster,
        state="pending",
        submitted_at=now - timedelta(minutes=5),
        scheduler_job_id="2",
    )
    for job in (waited, quick):
        job.apply_scheduler_status(Status(state=Job.State.RUNNING, started=True, node="n1"))
    link = SessionLink.objects.create(job=quick)
    assert link.mark_ready("n1", 8888, "token")
    assert not link.mark_ready("n1", 8889, "again")  # once per run
    queued = told_of(outbox_dues)
    assert queued == [(waited.pk, Event.JOB_STARTED), (quick.pk, Event.SESSION_READY)]
    assert quick.events.filter(message="Session ready on n1.").count() == 1
    for args in queued:
        Preference.set(person, args[1], portal=True)
        tasks.notify_job.apply(args=args)
    texts = sorted(Notification.objects.values_list("event", flat=True))
    assert texts == [Event.JOB_STARTED, Event.SESSION_READY]


def test_an_experiment_is_told_when_it_ends_by_itself_not_when_its_owner_stops_it(person, cluster):
    done = factories.experiment_record(person, cluster, name="done", state="completed")
    stopped = factories.experiment_record(
        person, cluster, name="stopped", state="cancelled", cancel_requested_at=timezone.now()
    )
    for experiment in (done, stopped):
        tasks.notify_experiment.apply(args=[experiment.pk])
    (told,) = Notification.objects.all()
    assert told.experiment_id == done.pk and told.url == f"/experiments/{done.pk}/"
    assert "has completed: none of its 0 trials has a score" in told.text


def test_a_delivery_already_running_for_the_person_sends_nothing_and_comes_back(
    person, cluster, limits, monkeypatch
):
    """One delivery per person at a time, by a cache lock (never the user's row, which a
    sign-in would wait on while SMTP talks): the second finds it held and is queued again."""
    from django.core.cache import cache

    job = failed(person, cluster)
    tasks.notify_job.apply(args=[job.pk, Event.JOB_FAILED])
    again = []
    monkeypatch.setattr(tasks, "queue_delivery", lambda user_id, delay=None: again.append(user_id))
    cache.add(f"notify-deliver:{person.pk}", "another worker", timeout=60)
    try:
        assert tasks.deliver_email.apply(args=[person.pk]).get() == 0
    finally:
        cache.delete(f"notify-deliver:{person.pk}")
    assert outbox.outbox == [] and again == [person.pk]
    assert tasks.deliver_email.apply(args=[person.pk]).get() == 1


def test_held_and_requeued_jobs_are_queued_once_each_and_off_by_default(
    person, cluster, outbox_dues
):
    held = factories.job(person, cluster, state="pending", scheduler_job_id="1")
    requeued = factories.job(
        person, cluster, state="running", started_at=timezone.now(), scheduler_job_id="2"
    )
    plain = factories.job(person, cluster, state="pending", scheduler_job_id="3")
    hold = Status(state=Job.State.PENDING, held=True, reason="launch failed requeued held")
    for _ in range(2):  # a second sync that sees the same tells nothing new
        held.apply_scheduler_status(hold)
        requeued.apply_scheduler_status(Status(state=Job.State.RUNNING, attempt=1, node="n1"))
        plain.apply_scheduler_status(Status(state=Job.State.PENDING, reason="Priority"))
    queued = told_of(outbox_dues)
    assert queued == [(held.pk, Event.JOB_HELD), (requeued.pk, Event.JOB_REQUEUED)]
    tasks.notify_job.apply(args=queued[0])
    assert not Notification.objects.exists()  # off unless the person turns them on
    for args in queued:
        Preference.set(person, args[1], portal=True)
        tasks.notify_job.apply(args=args)
        tasks.notify_job.apply(args=args)  # queued twice: told once
    texts = dict(Notification.objects.values_list("event", "text"))
    assert len(texts) == 2
    assert "is held by the scheduler (launch failed requeued held)" in texts[Event.JOB_HELD]
    assert "release it from its page" in texts[Event.JOB_HELD]
    assert "was requeued (run 2)" in texts[Event.JOB_REQUEUED]


def test_a_running_job_is_told_once_15_minutes_before_its_time_limit(person, cluster, outbox_dues):
    now = timezone.now()
    ending = factories.job(
        person,
        cluster,
        state="running",
        time_limit_minutes=60,
        started_at=now - timedelta(minutes=50),
    )
    factories.job(  # 40 minutes left: not yet
        person,
        cluster,
        state="running",
        time_limit_minutes=60,
        started_at=now - timedelta(minutes=20),
    )
    assert tasks.warn_walltime_ending.apply().get() == 1
    assert tasks.warn_walltime_ending.apply().get() == 0  # the next pass: once is enough
    queued = told_of(outbox_dues)
    assert queued == [(ending.pk, Event.WALLTIME_ENDING)]
    assert ending.events.filter(message__startswith="Reaches its time limit at ").count() == 1
    Preference.set(person, Event.WALLTIME_ENDING, portal=True)
    tasks.notify_job.apply(args=queued[0])
    text = Notification.objects.get().text
    assert "reaches its time limit in 9 min" in text or "reaches its time limit in 10 min" in text
    assert "save your work now" in text


def test_the_sweep_tells_an_experiment_whose_message_was_lost_once(person, cluster):
    """The broker lost notify_experiment (restarted empty): its ``told_at`` is still empty,
    so the sweep tells it, once; one that just ended is left to its own message."""
    lost = factories.experiment_record(person, cluster, name="lost", state="completed")
    fresh = factories.experiment_record(person, cluster, name="fresh", state="completed")
    now = timezone.now()
    type(lost).objects.filter(pk=lost.pk).update(ended_at=now - timedelta(minutes=5))
    type(fresh).objects.filter(pk=fresh.pk).update(ended_at=now)
    assert tasks.sweep_owed.apply().get()["experiments"] == 1
    assert tasks.sweep_owed.apply().get()["experiments"] == 0
    tasks.notify_experiment.apply(args=[lost.pk])  # the lost message, delivered late after all
    (told,) = Notification.objects.all()
    assert told.experiment_id == lost.pk
    lost.refresh_from_db()
    assert lost.told_at is not None


def test_the_sweep_hands_over_emails_pending_past_the_rate_window(
    person, cluster, limits, queued_notifications
):
    """A delivery task the broker lost leaves emails pending; one held by the person's rate
    limit is pending too, but only until its window ends: only the first is handed over."""
    job = failed(person, cluster)
    tasks.notify_job.apply(args=[job.pk, Event.JOB_FAILED])
    assert tasks.sweep_owed.apply().get()["emails"] == 0  # its delivery is on its way
    Notification.objects.update(created_at=timezone.now() - timedelta(minutes=63))
    queued_notifications.clear()
    assert tasks.sweep_owed.apply().get()["emails"] == 1
    assert [a[0] for a, _ in queued_notifications] == [(person.pk,)]
