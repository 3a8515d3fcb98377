"""Per-person choices per event and channel, the settings page, the list and its count."""

import pytest

from notifications.events import DEFAULT_ON, Event, Message
from notifications.models import Notification, Preference
from tests import factories


def test_defaults_turn_failures_and_long_ends_on_and_the_rest_off(owner):
    choices = Preference.choices_for(owner)
    assert set(choices) == set(Event.values)
    for event in (Event.JOB_FAILED, Event.JOB_TIMEOUT, Event.JOB_COMPLETED):
        assert choices[event] == {"portal": True, "email": True, "webhook": False}
    for event in (Event.JOB_STARTED, Event.SESSION_READY):
        assert choices[event] == {"portal": False, "email": False, "webhook": False}
    assert DEFAULT_ON < set(Event.values)


def test_settings_page_saves_each_events_choices(client, owner, outsider):
    client.force_login(owner)
    page = client.get("/account/notifications/")
    assert page.status_code == 200
    assert b'name="job_failed:email" aria-label="A job failed: email" checked' in page.content
    response = client.post(
        "/account/notifications/",
        {"job_failed:portal": "on", "session_ready:email": "on", "session_ready:portal": "on"},
    )
    assert response.status_code == 302
    choices = Preference.choices_for(owner)
    assert choices[Event.JOB_FAILED] == {"portal": True, "email": False, "webhook": False}
    assert choices[Event.SESSION_READY] == {"portal": True, "email": True, "webhook": False}
    assert choices[Event.JOB_COMPLETED] == {"portal": False, "email": False, "webhook": False}
    assert Preference.choices_for(outsider)[Event.JOB_FAILED]["email"] is True


def test_settings_page_needs_sign_in(client):
    assert client.get("/account/notifications/").status_code == 302


def test_record_follows_the_choices_and_happens_once(owner, cluster):
    owner.email = "owner@example.org"
    owner.save()
    job = factories.job(owner, cluster)
    message = Message("x.")
    first = Notification.record(owner, Event.JOB_FAILED, message, "/jobs/1/", job=job)
    assert first is not None and first.email == "pending" and first.in_portal
    assert Notification.record(owner, Event.JOB_FAILED, message, "/jobs/1/", job=job) is None
    assert Notification.record(owner, Event.SESSION_READY, message, "/", job=job) is None
    Preference.set(owner, Event.JOB_TIMEOUT, email=False)
    only_listed = Notification.record(owner, Event.JOB_TIMEOUT, message, "/", job=job)
    assert only_listed is not None and only_listed.email == "none"


@pytest.mark.parametrize("who", ["owner", "outsider"])
def test_list_and_unread_count_show_only_ones_own(client, owner, outsider, who):
    factories.notification(owner, text="Owner's job failed.")
    factories.notification(owner, text="Owner's old news.", read=True)
    factories.notification(owner, text="Owner's email only.", in_portal=False)
    user = owner if who == "owner" else outsider
    client.force_login(user)
    page = client.get("/notifications/").content.decode()
    if who == "owner":
        assert "Owner&#x27;s job failed." in page and "Owner&#x27;s old news." in page
        assert "email only" not in page
        assert 'data-unread-count aria-label="1 unread">1<' in page
    else:
        assert "Owner" not in page and "data-unread-count" not in page


def test_marking_read_touches_only_ones_own(client, owner, outsider):
    mine = factories.notification(owner)
    theirs = factories.notification(outsider)
    client.force_login(outsider)
    client.post("/notifications/read/", {"id": mine.pk})
    mine.refresh_from_db()
    assert not mine.read
    client.post("/notifications/read/")
    theirs.refresh_from_db()
    mine.refresh_from_db()
    assert theirs.read and not mine.read
