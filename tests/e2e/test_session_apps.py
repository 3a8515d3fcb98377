"""An app a centre adds in the admin, without code: staff add it in the admin in Chromium
(a command that is not words an app starts with is refused there), a person launches it
from the launch form with a hostile value in its field, and its page answers through its
session link on the dev cluster, with that value as one literal argument."""

import json

import pytest

from catalog.models import SessionApp
from jobs import lifecycle
from jobs.models import Job
from proxy.models import SessionLink
from tests import factories
from tests.e2e.pages import sign_in

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]

HOSTILE = "$(id); echo pwned\nsecond line"


def test_staff_add_an_app_in_the_admin_and_a_person_opens_it_from_the_launch_form(
    tls_browser, stack, owner, outsider, staff, devcluster, screenshot
):
    factories.image("python-host", "Python (host)", offers_notebook=True, offers_batch=True)
    admin = sign_in(tls_browser, stack, "staff", "staff-pass-123")
    admin.goto(f"{stack.url}/admin/jobs/sessionapp/add/")
    admin.get_by_label("Name").fill("Echo")
    admin.get_by_label("Image").select_option(label="Python (host)")
    admin.get_by_label("Command").fill("python3 -m http.server")  # where does it listen?
    admin.get_by_role("button", name="Save", exact=True).click()
    admin.locator(".errorlist").get_by_text("exactly one of {port}").wait_for()
    code = factories.ECHO_APP_CODE.replace("{", "{{").replace("}", "}}")
    admin.get_by_label("Command").fill(
        "python3 -c '" + code.replace("'", "'\"'\"'") + "' {port} {message} --folder={folder}"
    )
    admin.get_by_label("Fields").fill(
        json.dumps([{"name": "message", "label": "Message", "type": "text", "max_length": 100}])
    )
    admin.get_by_role("button", name="Save", exact=True).click()
    try:
        admin.get_by_text("was added successfully").wait_for()
    except Exception:
        screenshot(admin, "50-app-add-failed")
        raise
    app = SessionApp.objects.get(name="Echo")  # its slug made from the name by the admin
    assert app.builtin == "" and app.image.slug == "python-host"
    screenshot(admin, "50-app-added")

    page = sign_in(tls_browser, stack, "owner", "owner-pass-123")
    try:
        page.goto(f"{stack.url}/launch/")
        page.get_by_text("Python (host)").click()
        page.get_by_label("App session").check()
        page.get_by_label("App", exact=True).select_option(label="Echo")
        page.get_by_label("Message").fill(HOSTILE)
        page.get_by_label("Partition").select_option(label="cpu")
        page.get_by_role("button", name="Launch").click()
        page.wait_for_url(f"{stack.url}/jobs/*/")
        job = Job.objects.get()
        assert (job.kind, job.app_id, job.app_values) == ("app", app.pk, {"message": HOSTILE})
        open_link = page.locator("#session [data-open-session]")
        open_link.wait_for(state="visible", timeout=120_000)
        assert open_link.inner_text() == "Open Echo"
        session = SessionLink.objects.get(job=job)
        screenshot(page, "51-app-ready")

        with page.context.expect_page() as new_tab:
            open_link.click()
        echo = new_tab.value
        origin = f"https://{session.public_id}.sessions.localhost:{stack.proxy_port}"
        echo.wait_for_url(f"{origin}/**", timeout=60_000)
        seen = json.loads(echo.locator("body").inner_text())
        assert seen["argv"][1] == HOSTILE and seen["env"]["PORTAL_APP_MESSAGE"] == HOSTILE
        assert "uid=" not in echo.content() and "PORTAL_SESSION_TOKEN" not in seen["env"]
        screenshot(echo, "52-app-page")

        other = sign_in(tls_browser, stack, "outsider", "outsider-pass-123")
        assert other.goto(f"{stack.url}/sessions/{session.public_id}/open/").status == 404
        assert other.goto(f"{origin}/").status == 404
        assert HOSTILE.split("\n")[0] not in other.content()
    finally:
        for job in Job.objects.filter(state__in=Job.ACTIVE_STATES):
            lifecycle.cancel(job)
