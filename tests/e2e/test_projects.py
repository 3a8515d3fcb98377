"""A project in Chromium, on the served stack and the dev cluster's Slurm accounts: the
colleague (hpcuser2, a viewer of vision) follows the owner's vision run with its chart
growing live and no way to cancel it, and finds the owner's nlp run and a private vision
run nowhere: not as pages (404) nor as websockets (refused; the in-process tests see
the 4404 the server closes with)."""

import pytest

from devtools import demo_catalog
from devtools import devcluster as devcluster_mod
from jobs import lifecycle
from jobs.models import ContainerImage
from projects import sync
from tests import factories
from tests.e2e.pages import page_errors, sign_in

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]

PLOTTED = "() => Number(document.getElementById('metrics').dataset.plottedPoints)"
# Whether the browser's socket opened at all (a refused handshake never does: the browser
# reports 1006 for it, whatever code the server chose).
SOCKET_OPENS = """async (url) => await new Promise((done) => {
    const socket = new WebSocket(url);
    let opened = false;
    socket.onopen = () => { opened = true; setTimeout(() => socket.close(1000), 300); };
    socket.onclose = () => done(opened);
})"""


def test_a_viewer_follows_a_colleagues_run_live_and_sees_nothing_else(
    browser, stack, devcluster_info, owner, screenshot
):
    demo_catalog.load()
    colleague = factories.user("colleague", "colleague-pass-123")
    first = devcluster_info["default_user"]
    second = next(u for u in sorted(devcluster_info["users"]) if u != first)
    cluster = devcluster_mod.register(devcluster_info, {"owner": first, "colleague": second})
    assert sync.sync_cluster(cluster).read
    digits = ContainerImage.objects.get(slug="digits-demo")

    def launch(account: str, command: str, private: bool = False):
        job = factories.job(
            owner, cluster, command, image=digits, partition="cpu", account=account, save=False
        )
        job.private = private
        return lifecycle.launch_job(job)

    shown = launch("vision", "train-digits --epochs 12 --delay 0.08")
    hidden = launch("nlp", "sleep 1")
    private = launch("vision", "sleep 1", private=True)

    page = sign_in(browser, stack, "colleague", "colleague-pass-123")
    errors = page_errors(page)
    page.goto(f"{stack.url}/?project={shown.project_id}")
    page.locator(f'tr[data-job-id="{shown.pk}"]').wait_for()
    assert page.locator(f'tr[data-job-id="{private.pk}"]').count() == 0
    page.goto(f"{stack.url}/jobs/{shown.pk}/")
    page.evaluate("() => { window.__noReload = true; }")
    assert page.locator("[data-owner]").text_content() == "owner"
    assert page.locator("[data-cancel]").count() == 0  # no button
    page.wait_for_function(f"() => ({PLOTTED})() > 0", timeout=120_000)
    readings = [page.evaluate(PLOTTED)]
    for _ in range(2):
        page.wait_for_function(f"() => ({PLOTTED})() > {readings[-1]}", timeout=30_000)
        readings.append(page.evaluate(PLOTTED))
    assert readings == sorted(set(readings)), readings
    page.locator("[data-badge]", has_text="Running").wait_for(timeout=30_000)
    screenshot(page, "60-project-viewer-live")
    assert page.evaluate("() => window.__noReload") is True

    api = factories.api_client(colleague)
    assert api.post(f"/api/v1/jobs/{shown.pk}/cancel/").status_code == 403
    ws = stack.url.replace("http", "ws", 1)
    for job in (hidden, private):
        assert page.goto(f"{stack.url}/jobs/{job.pk}/").status == 404
        assert api.get(f"/api/v1/jobs/{job.pk}/").status_code == 404
        page.goto(f"{stack.url}/")
        for path in (f"/ws/jobs/{job.pk}/", f"/ws/jobs/{job.pk}/metrics/"):
            assert page.evaluate(SOCKET_OPENS, f"{ws}{path}") is False, path
    assert page.evaluate(SOCKET_OPENS, f"{ws}/ws/jobs/{shown.pk}/") is True
    assert errors == []
