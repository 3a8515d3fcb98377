"""What a notification says: one plain, bounded sentence and a bounded stderr tail, whatever
the job's name, message and stderr hold."""

from datetime import timedelta

from django.utils import timezone

from notifications import events
from notifications.events import Event
from tests import factories

HOSTILE = "<script>alert(1)</script>\x1b[31mred\x1b[0m\r\n\x00\x07" * 200


def test_failed_job_text_is_one_bounded_plain_line(owner, cluster):
    job = factories.job(owner, cluster, state="failed")
    job.name, job.message = HOSTILE[:100], HOSTILE  # as read back (PostgreSQL stores no NUL)
    job.stderr_tail = "\n".join(f"line {i} \x1b[1mbold\x1b[0m" for i in range(5000))
    message = events.for_job(Event.JOB_FAILED, job)
    assert len(message.text) <= events.TEXT_MAX
    assert "\n" not in message.text and "\x1b" not in message.text and "\x00" not in message.text
    assert message.text.startswith(f"Your job {job.pk} (<script>")  # kept as text, not markup
    lines = message.detail.splitlines()
    assert len(lines) <= events.DETAIL_LINES and len(message.detail) <= events.DETAIL_MAX
    assert lines[-1] == "line 4999 bold"


def test_each_job_event_says_what_to_do(owner, cluster):
    now = timezone.now()
    job = factories.job(
        owner,
        cluster,
        name="train",
        state="completed",
        submitted_at=now - timedelta(hours=3),
        started_at=now - timedelta(hours=2),
        ended_at=now,
    )
    assert "after running 2 h 0 min" in events.for_job(Event.JOB_COMPLETED, job).text
    assert "after waiting 1 h 0 min" in events.for_job(Event.JOB_STARTED, job).text
    assert "reached its time limit of 5 minutes" in events.for_job(Event.JOB_TIMEOUT, job).text
    text = events.for_job(Event.JOB_CANCELLED, job, cancelled_by="staff").text
    assert "was cancelled by staff" in text and "launch it again" in text


def test_experiment_text_names_its_best_trial(owner, cluster):
    from experiments.models import Trial

    experiment = factories.experiment_record(owner, cluster, name="sweep", state="completed")
    for number, value in enumerate([0.5, 0.9, 0.7]):
        Trial.objects.create(
            experiment=experiment,
            number=number,
            params={"lr": 0.1 * (number + 1)},
            state="completed",
            value=value,
        )
    best = experiment.best_of(list(experiment.trials.all()))
    text = events.for_experiment(experiment, best).text
    assert "the best of its 3 trials is trial 1 with val_accuracy = 0.9" in text
    assert text.endswith("compare its trials on its page.")
