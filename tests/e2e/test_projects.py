"""A project in Chromium, on the served stack and the dev cluster's Slurm accounts: the
colleague (hpcuser2, a viewer of vision) follows the owner's vision run with its chart
growing live and no way to cancel it, and finds the owner's nlp run and a private vision
run nowhere: not as pages (404) nor as websockets (refused; the in-process tests see
the 4404 the server closes with). The owner shares a running TensorBoard with the
colleague, who opens it through HAProxy until the share is withdrawn."""

import time

import pytest

from catalog.models import ContainerImage
from clusters import pool
from clusters.models import ClusterAccount
from devtools import demo_catalog
from devtools import devcluster as devcluster_mod
from identity.audit.models import AuditEvent
from jobs import lifecycle
from jobs.models import Job
from projects import sync
from proxy.models import SessionLink
from tests import factories
from tests.devcluster.helpers import tensorboard_runs
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


# What TensorBoard answers a page's own request with, without following a redirect.
FETCH_TAGS = """async () => {
    const answer = await fetch('/data/plugin/scalars/tags', {redirect: 'manual'});
    return answer.type === 'opaqueredirect' ? 'redirected' : String(answer.status);
}"""


def test_the_owner_shares_a_running_tensorboard_and_withdraws_it(
    tls_browser, stack, devcluster_info, owner, screenshot
):
    factories.user("colleague", "colleague-pass-123")
    first = devcluster_info["default_user"]
    second = next(u for u in sorted(devcluster_info["users"]) if u != first)
    cluster = devcluster_mod.register(devcluster_info, {"owner": first, "colleague": second})
    assert sync.sync_cluster(cluster).read
    folder, home = tensorboard_runs(cluster, owner)
    account = ClusterAccount.for_user(cluster, owner)
    image = factories.image("tb-host", offers_tensorboard=True, offers_notebook=False)
    job = factories.job(
        owner,
        cluster,
        "",
        image=image,
        kind="tensorboard",
        notebook_dir=folder,
        account="vision",
        save=False,
    )
    job = lifecycle.launch_job(job)
    try:
        page = sign_in(tls_browser, stack, "owner", "owner-pass-123")
        page.goto(f"{stack.url}/jobs/{job.pk}/")
        open_link = page.locator("#session [data-open-session]")
        open_link.wait_for(state="visible", timeout=120_000)
        session = SessionLink.objects.get(job=job)
        with page.context.expect_page() as tab:
            open_link.click()
        tab.value.get_by_text("loss", exact=True).first.wait_for(timeout=60_000)

        page.reload()  # the share form is drawn once the session exists (it is now)
        page.locator("[data-session-share] summary").click()
        page.get_by_label("Members of vision (user names)").fill("colleague")
        page.get_by_role("button", name="Share", exact=True).click()
        page.get_by_text("Shared with colleague.").wait_for()

        theirs = sign_in(tls_browser, stack, "colleague", "colleague-pass-123")
        theirs.goto(f"{stack.url}/jobs/{job.pk}/")
        with theirs.context.expect_page() as tab:
            theirs.locator("#session [data-open-session]").click()
        board = tab.value
        # Someone else's session: the portal asks first (a form, so no other site can).
        board.get_by_role("button", name="Open", exact=True).click()
        board.wait_for_url(
            f"https://{session.public_id}.sessions.localhost:{stack.proxy_port}/**",
            timeout=60_000,
        )
        board.get_by_text("loss", exact=True).first.wait_for(timeout=60_000)
        assert board.evaluate(FETCH_TAGS) == "200"
        screenshot(board, "61-shared-tensorboard")

        page.reload()
        page.locator('[data-share="colleague"] [data-withdraw]').click()
        page.get_by_text("Share withdrawn").wait_for()
        started = time.monotonic()
        answer = board.evaluate(FETCH_TAGS)
        refused_after = time.monotonic() - started
        assert answer == "redirected", answer  # to the portal, which now says no
        assert refused_after < 1, refused_after
        print(f"\nwithdrawn: the colleague's next request refused {refused_after * 1000:.0f} ms on")
        assert (
            board.goto(f"https://{session.public_id}.sessions.localhost:{stack.proxy_port}/").status
            == 404
        )
        opens = AuditEvent.objects.filter(target__contains=session.public_id).values_list(
            "action", "username"
        )
        assert set(opens) >= {("session_open", "owner"), ("session_open_other", "colleague")}
        page.reload()
        assert "colleague at " in page.locator("[data-session-opens]").inner_text()
    finally:
        for active in Job.objects.filter(state__in=Job.ACTIVE_STATES):
            lifecycle.cancel(active)
        pool.with_connection(
            account, lambda conn: conn.run(["rm", "-rf", "--", f"{home}/{folder}"])
        )
