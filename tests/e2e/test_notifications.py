"""Chromium against the whole stack: the header's unread count and the notification list
update live when a job fails (the notification task in this process publishes on the
channel layer; the stack's web process pushes it over the websocket), and the settings
page saves each event's choices and a webhook, whose secret it shows once."""

import threading

import pytest
from django.db import connection
from django.utils import timezone

from notifications import tasks
from notifications.events import Event
from notifications.models import Preference, Webhook
from tests import factories
from tests.e2e.pages import page_errors, sign_in
from tests.livestack import LiveStack

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def web(tmp_path):
    live = LiveStack(tmp_path).start()
    yield live
    live.stop()


def test_unread_count_and_list_update_live(browser, web, owner, cluster):
    page = sign_in(browser, web, "owner", "owner-pass-123")
    errors = page_errors(page)
    page.goto(f"{web.url}/notifications/")
    assert page.locator("[data-unread-count]").count() == 0
    page.wait_for_timeout(1000)  # the socket is open
    job = factories.job(
        owner, cluster, state="failed", name="<b>train</b>", ended_at=timezone.now()
    )
    job.stderr_tail = "ValueError: boom"
    job.save(update_fields=["stderr_tail"])

    # In a thread of its own: Playwright's event loop runs in this one, and the task
    # publishes through async_to_sync, as it does in a Celery worker.
    def notify() -> None:
        try:
            tasks.notify_job.apply(args=[job.pk, Event.JOB_FAILED])
        finally:
            connection.close()  # this thread's own

    worker = threading.Thread(target=notify)
    worker.start()
    worker.join(timeout=30)
    badge = page.locator("[data-notifications-link] [data-unread-count]")
    badge.wait_for(timeout=10_000)
    assert badge.text_content() == "1"
    item = page.locator(
        f"[data-notifications] li[data-event='job_failed'] a[href='/jobs/{job.pk}/']"
    )
    item.wait_for(timeout=5_000)
    assert item.text_content().startswith(f"Your job {job.pk} (<b>train</b>) failed")
    page.goto(f"{web.url}/")
    assert page.locator("[data-unread-count]").text_content() == "1"
    assert errors == []


def test_settings_page_saves_each_events_choices(browser, web, owner):
    page = sign_in(browser, web, "owner", "owner-pass-123")
    page.goto(f"{web.url}/account/notifications/")
    failed_email = page.get_by_label("A job failed: email")
    ready_portal = page.get_by_label("A notebook or desktop session is ready: in the portal")
    assert failed_email.is_checked() and not ready_portal.is_checked()
    failed_email.uncheck()
    ready_portal.check()
    page.get_by_role("button", name="Save", exact=True).click()
    page.wait_for_url(f"{web.url}/account/notifications/")
    assert page.get_by_text("Notification settings saved.").is_visible()
    assert not page.get_by_label("A job failed: email").is_checked()
    assert page.get_by_label("A notebook or desktop session is ready: in the portal").is_checked()
    choices = Preference.choices_for(owner)
    assert choices[Event.JOB_FAILED] == {"portal": True, "email": False, "webhook": False}
    assert choices[Event.SESSION_READY] == {"portal": True, "email": False, "webhook": False}


def test_settings_page_saves_a_webhook_and_shows_its_secret_once(browser, owner, tmp_path):
    stack = LiveStack(
        tmp_path,
        env={"PORTAL_WEBHOOK_ALLOW_HTTP": "1", "PORTAL_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1/32"},
    ).start()
    try:
        page = sign_in(browser, stack, "owner", "owner-pass-123")
        errors = page_errors(page)
        page.goto(f"{stack.url}/account/notifications/")
        page.get_by_label("A job failed: webhook").check()
        page.get_by_role("button", name="Save", exact=True).click()
        page.wait_for_url(f"{stack.url}/account/notifications/")
        assert page.get_by_label("A job failed: webhook").is_checked()
        page.get_by_label("URL").fill("http://127.0.0.1:9/hooks/portal")
        page.get_by_role("button", name="Save webhook").click()
        shown = page.locator("[data-webhook-secret] code").inner_text().strip()
        hook = Webhook.objects.get(user=owner)
        assert shown == hook.secret and hook.url == "http://127.0.0.1:9/hooks/portal"
        page.goto(f"{stack.url}/account/notifications/")
        assert page.locator("[data-webhook-secret]").count() == 0
        assert hook.secret not in page.content()
        assert page.get_by_label("URL").input_value() == "http://127.0.0.1:9/hooks/portal"
        assert Preference.choices_for(owner)[Event.JOB_FAILED]["webhook"] is True
        assert errors == []
    finally:
        stack.stop()
