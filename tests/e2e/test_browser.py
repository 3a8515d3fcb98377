"""A researcher in Chromium against the live stack and the real dev cluster."""

import pytest

from catalog.models import Tag
from jobs.models import Job
from tests import factories
from tests.e2e.pages import launch, sign_in

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]

# Records every text the job's badge shows, and marks the window so a reload would be noticed.
WATCH_BADGES = """() => {
  window.__noReload = true;
  window.__seen = {};
  const seen = (row) => {
    const id = row.dataset.jobId, text = row.querySelector('[data-badge]').textContent.trim();
    const list = (window.__seen[id] = window.__seen[id] || []);
    if (list[list.length - 1] !== text) list.push(text);
  };
  document.querySelectorAll('tr[data-job-id]').forEach(seen);
  new MutationObserver(() => document.querySelectorAll('tr[data-job-id]').forEach(seen))
    .observe(document.getElementById('job-table'), {subtree: true, childList: true, characterData: true});
}"""


@pytest.fixture
def catalog(db):
    image = factories.image(
        "python-host",
        "Python (host)",
        supports_gpu=True,
        description="The compute node's own Python.",
    )
    image.tags.add(Tag.objects.create(name="python"))
    factories.image("old", "Retired stack", deprecated=True)
    return image


def test_researcher_launches_watches_reads_logs_cancels_and_others_see_nothing(
    browser, stack, owner, outsider, catalog, screenshot
):
    page = sign_in(browser, stack, "owner", "owner-pass-123")
    page.get_by_text("You have no jobs yet.").wait_for()
    screenshot(page, "01-dashboard-empty")

    # The dashboard stays open in a second tab and must follow the job live.
    dashboard = page.context.new_page()
    dashboard.goto(f"{stack.url}/")
    dashboard.evaluate(WATCH_BADGES)

    page.goto(f"{stack.url}/launch/")
    # Deprecated: still offered, last and marked; chosen, it is warned about.
    retired = page.locator(".image-card", has_text="Retired stack")
    assert retired.locator(".tag.deprecated").inner_text() == "deprecated"
    retired.click()
    page.get_by_text("Retired stack is deprecated: it still runs").wait_for()
    page.get_by_text("Python (host)").click()
    assert page.locator("[data-deprecation-warning]").is_hidden()
    screenshot(page, "02-launch")
    # With the workers busy elsewhere (stopped here), the job waits as queued.
    stack.stop_worker()
    job_id = launch(page, stack, "Python (host)", "Batch command", "sleep 4; echo e2e-done")
    screenshot(page, "03-job-page")
    # The job page follows the job too: nothing on it needs a reload.
    page.evaluate("() => { window.__noReload = true; }")
    assert page.locator("[data-work-dir]").inner_text() == "—"
    assert page.locator(".messages").is_visible()  # "Job … queued"

    badge = dashboard.locator(f'tr[data-job-id="{job_id}"] [data-badge]', has_text="Queued")
    badge.wait_for(timeout=20_000)  # row inserted live
    screenshot(dashboard, "04-dashboard-queued")
    stack.start_worker()
    dashboard.wait_for_function(
        f"() => document.querySelector('tr[data-job-id=\"{job_id}\"] [data-badge]').textContent.trim() === 'Completed'",
        timeout=90_000,
    )
    page.locator("[data-work-dir]", has_text="/.portal/jobs/").wait_for(timeout=20_000)
    page.locator("[data-live-part=script] pre", has_text="#SBATCH").wait_for(timeout=20_000)
    page.locator("#timeline", has_text="Completed").wait_for(timeout=20_000)
    assert page.locator(".messages").count() == 0  # the launch's message is old news
    assert page.evaluate("() => window.__noReload") is True, "the job page reloaded"
    seen = dashboard.evaluate(f"() => window.__seen['{job_id}']")
    assert dashboard.evaluate("() => window.__noReload") is True, "the dashboard reloaded"
    assert seen[0] == "Queued" and seen[-1] == "Completed", seen
    assert {"Pending", "Running"} & set(seen), seen
    finished = dashboard.locator(f'tr[data-job-id="{job_id}"]')
    assert not finished.get_by_role("button", name="Cancel").is_visible()  # nothing left to cancel
    assert finished.locator("[data-elapsed]").inner_text().startswith("ran ")
    assert not dashboard.locator("#walltime-warning").is_visible()  # batch jobs are not sessions
    screenshot(dashboard, "05-dashboard-completed")

    # Logs, from the row's link.
    dashboard.locator(f'tr[data-job-id="{job_id}"]').get_by_role("link", name="Logs").click()
    dashboard.locator("[data-log]").filter(has_text="e2e-done").wait_for(timeout=20_000)
    screenshot(dashboard, "06-job-logs")

    # A second job, cancelled from the dashboard with confirmation.
    second = launch(page, stack, "Python (host)", "Batch command", "sleep 300")
    dashboard.goto(f"{stack.url}/")
    row = dashboard.locator(f'tr[data-job-id="{second}"]')
    row.locator("[data-badge]", has_text="Running").wait_for(timeout=60_000)
    row.get_by_role("button", name="Cancel").click()
    dialog = dashboard.locator("#cancel-dialog")
    dialog.get_by_role("button", name="Cancel job").click()
    row.locator("[data-badge]", has_text="Cancelled").wait_for(timeout=60_000)
    screenshot(dashboard, "07-dashboard-cancelled")
    assert Job.objects.get(pk=second).state == "cancelled"

    # Another signed-in user sees neither job.
    other = sign_in(browser, stack, "outsider", "outsider-pass-123")
    other.get_by_text("You have no jobs yet.").wait_for()
    for job in (job_id, second):
        response = other.goto(f"{stack.url}/jobs/{job}/")
        assert response.status == 404
    screenshot(other, "08-other-user-sees-nothing")


def test_launch_form_prevents_impossible_requests_in_the_browser(
    browser, stack, owner, catalog, screenshot
):
    page = sign_in(browser, stack, "owner", "owner-pass-123")
    page.goto(f"{stack.url}/launch/")
    page.get_by_text("Python (host)").click()
    assert page.get_by_label("GPUs").input_value() == "1"  # sensible default on the GPU partition
    page.get_by_label("GPUs").fill("99")
    page.get_by_label("Walltime (minutes)").fill("100000")
    page.get_by_role("button", name="Launch").click()
    page.get_by_text("At most 2 here.").wait_for()  # GPUs per node: a node has 2
    page.get_by_text("At most 1440 here.").wait_for()
    assert page.url.endswith("/launch/") and not Job.objects.exists()
    screenshot(page, "09-launch-limits")
    # What the server refuses stays as typed, beside its message (before: clamped to 4,
    # so "at most 4" sat next to a 4). form.submit() skips the page's own checks.
    page.get_by_label("Walltime (minutes)").fill("60")
    page.evaluate(
        "() => { document.getElementById('id_gpus').value = '9';"
        " document.getElementById('launch-form').submit(); }"
    )
    page.get_by_text("A node of partition gpu has at most 2 GPU(s).").wait_for()
    assert page.get_by_label("GPUs").input_value() == "9"
    assert not Job.objects.exists()
    # Tag filter and search narrow the catalog.
    page.get_by_label("Search").fill("no-such-image")
    page.get_by_text("No image matches your search.").wait_for()


def test_pages_fit_a_phone(browser, stack, owner, catalog, screenshot):
    page = sign_in(
        browser, stack, "owner", "owner-pass-123", viewport={"width": 390, "height": 844}
    )
    for path, name in (
        ("/", "10-phone-dashboard"),
        ("/launch/", "11-phone-launch"),
        ("/account/", "12-phone-account"),
    ):
        page.goto(f"{stack.url}{path}")
        width = page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= 390, f"{path} is {width}px wide on a 390px screen"
        screenshot(page, name)


def test_account_page_tests_the_connection(browser, stack, owner, screenshot):
    page = sign_in(browser, stack, "owner", "owner-pass-123")
    page.goto(f"{stack.url}/account/")
    page.get_by_role("button", name="Test connection").click()
    page.get_by_text("Connected to devcluster as hpcuser.").wait_for(timeout=20_000)
    screenshot(page, "13-account")
