"""The unsubscribe link: no sign-in, a confirmation page, and it turns off one event's
email for one person only; a token for anything else, or altered, is refused."""

import pytest
from django.core import signing

from notifications import mail
from notifications.events import Event
from notifications.models import Preference


def path_of(user, event: str) -> str:
    return f"/notifications/unsubscribe/{mail.unsubscribe_token(user.pk, event)}/"


def test_get_asks_and_changes_nothing(client, owner):
    page = client.get(path_of(owner, Event.JOB_FAILED))
    assert page.status_code == 200 and b"Stop these emails" in page.content
    assert Preference.choices_for(owner)[Event.JOB_FAILED]["email"] is True


def test_post_without_sign_in_stops_that_event_for_that_person_only(client, owner, outsider):
    Preference.set(owner, Event.SESSION_READY, email=True)
    response = client.post(path_of(owner, Event.JOB_FAILED))
    assert response.status_code == 200 and b"data-unsubscribed" in response.content
    mine = Preference.choices_for(owner)
    assert mine[Event.JOB_FAILED] == {"portal": True, "email": False, "webhook": False}
    assert mine[Event.JOB_TIMEOUT]["email"] is True
    assert mine[Event.SESSION_READY]["email"] is True
    assert Preference.choices_for(outsider)[Event.JOB_FAILED]["email"] is True


def test_one_click_post_from_a_mail_client(client, owner):
    client = type(client)(enforce_csrf_checks=True)
    response = client.post(path_of(owner, Event.JOB_TIMEOUT), {"List-Unsubscribe": "One-Click"})
    assert response.status_code == 200
    assert Preference.choices_for(owner)[Event.JOB_TIMEOUT]["email"] is False


@pytest.mark.parametrize(
    "token",
    [
        "nonsense",
        signing.dumps([1, "job_failed"]),  # signed, but not for unsubscribing
        signing.dumps([1, "job_failed"], salt="other"),
        signing.dumps(["1", "job_failed"], salt=mail.UNSUBSCRIBE_SALT),
        signing.dumps([1, "no_such_event"], salt=mail.UNSUBSCRIBE_SALT),
    ],
)
def test_other_tokens_are_refused(client, owner, token):
    assert client.post(f"/notifications/unsubscribe/{token}/").status_code == 404
    assert not Preference.objects.exists()


def test_an_altered_token_is_refused(client, owner, outsider):
    token = mail.unsubscribe_token(owner.pk, Event.JOB_FAILED)
    value, _, signature = token.rpartition(":")
    forged = signing.dumps([outsider.pk, Event.JOB_FAILED], salt=mail.UNSUBSCRIBE_SALT)
    swapped = f"{forged.rpartition(':')[0]}:{signature}"
    assert client.post(f"/notifications/unsubscribe/{swapped}/").status_code == 404
    assert not Preference.objects.exists()
