"""Through the real mail server (`make mail`): a 20-trial experiment is one email, and the
unsubscribe link in it works without signing in, for that person and event only. The
tasks run in this process (Celery's eager mode), from the models' real signals."""

import time

import pytest

from experiments.models import Trial
from jobs import outbox
from jobs.models import Job
from notifications.events import Event
from notifications.models import Notification, Preference
from portal.celery import app as celery_app
from tests import factories
from tests.mailbox import address

pytestmark = [pytest.mark.mail, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def eager(monkeypatch, settings):
    monkeypatch.setitem(celery_app.conf, "task_always_eager", True)
    # The experiment's own stepping is not what this test is about.
    monkeypatch.setitem(outbox.CONSUMERS, "experiment", lambda dues: None)
    settings.PORTAL_URL = "https://portal.example.org"


def test_a_twenty_trial_experiment_is_one_email_and_its_unsubscribe_link_works(
    mailbox, eager, owner, outsider, cluster, client
):
    owner.email = address("owner")
    owner.save(update_fields=["email"])
    experiment = factories.experiment_record(owner, cluster, name="sweep", max_trials=20)
    for number in range(20):
        trial = Trial.objects.create(
            experiment=experiment,
            number=number,
            params={"lr": 0.01 * (number + 1)},
            state="completed",
            value=number / 100,
        )
        job = factories.job(owner, cluster, state="running", trial=trial)
        # Half fail: a trial's failure is told with its experiment, not by itself.
        assert job.transition(Job.State.FAILED if number % 2 else Job.State.COMPLETED)
    assert experiment.finish("completed")
    (message,) = mailbox.wait_for(owner.email)
    time.sleep(3)  # nothing else follows
    assert len(mailbox.messages(owner.email)) == 1
    assert Notification.objects.filter(recipient=owner).count() == 1
    body = message.get_content()
    assert "the best of its 20 trials is trial 19 with val_accuracy = 0.19" in body
    assert f"https://portal.example.org/experiments/{experiment.pk}/" in body

    link = str(message["List-Unsubscribe"]).strip().strip("<>")
    path = link.removeprefix("https://portal.example.org")
    assert path != link and f"https://portal.example.org{path}" in body
    assert b"Stop these emails" in client.get(path).content  # no sign-in
    assert client.post(path).status_code == 200
    mine = Preference.choices_for(owner)
    assert mine[Event.EXPERIMENT_FINISHED]["email"] is False
    assert mine[Event.JOB_FAILED]["email"] is True
    assert Preference.choices_for(outsider)[Event.EXPERIMENT_FINISHED]["email"] is True
