"""A real JupyterLab started through Slurm on the dev cluster, reached through the session proxy."""

import re
import time
from datetime import UTC, datetime

import pytest

from clusters import files, pool
from clusters.models import ClusterAccount
from jobs.models import Job
from proxy.models import SessionLink
from tests import factories, polling
from tests.e2e.pages import launch, sign_in

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def notebook_image(db):
    return factories.image("python-host", "Python (host)", offers_notebook=True, offers_batch=True)


def test_owner_opens_jupyterlab_over_https_and_runs_a_cell(
    tls_browser, stack, owner, outsider, staff, notebook_image, screenshot
):
    page = sign_in(tls_browser, stack, "owner", "owner-pass-123")
    launch(page, stack, "Python (host)", "Notebook session")
    job = Job.objects.get()

    # The card offers the notebook by itself once Jupyter listens (callback from the job).
    open_link = page.locator("#session [data-open-session]")
    open_link.wait_for(state="visible", timeout=120_000)
    session = SessionLink.objects.get(job=job)
    assert session.state == "ready"
    # Within two seconds of Jupyter listening (its own log line says when it did).
    job.refresh_from_db()
    log = files.read_job_log(job, "stderr").text
    match = re.search(r"\[I (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) ServerApp\] .*is running at", log)
    assert match, log[-2000:]
    listening = datetime.fromisoformat(match.group(1)).replace(tzinfo=UTC)  # the node logs UTC here
    delay = (session.ready_at - listening).total_seconds()
    assert delay < 2.0, f"the portal learned of the notebook {delay:.2f}s after Jupyter listened"
    print(f"\nsession registered {delay:.2f}s after Jupyter listened")
    # The page says what the link already knows: running, and where.
    assert page.locator("#job [data-badge]").inner_text() == "Running"
    assert page.locator("[data-node]").inner_text() == job.node != ""
    screenshot(page, "20-notebook-ready")

    with page.context.expect_page() as new_tab:
        open_link.click()
    lab = new_tab.value
    kernel_sockets = []
    lab.on("websocket", lambda ws: kernel_sockets.append(ws) if "/channels" in ws.url else None)
    lab.wait_for_url(
        f"https://{session.public_id}.sessions.localhost:{stack.proxy_port}/lab**", timeout=60_000
    )
    # JupyterLab restores the cluster user's last workspace (~/.jupyter/lab/workspaces: an
    # earlier session's open notebook, not the launcher); ?reset starts from a clean one.
    lab.goto(f"https://{session.public_id}.sessions.localhost:{stack.proxy_port}/lab?reset")
    try:
        lab.locator(".jp-LauncherCard").first.wait_for(timeout=60_000)
    except Exception:
        screenshot(lab, "21-jupyterlab-failed")
        print(stack.logs())
        raise
    screenshot(lab, "21-jupyterlab")
    # The Jupyter token is HAProxy's to add: the page does not carry it.
    token = SessionLink.objects.get(pk=session.pk).upstream_token()
    assert len(token) > 16 and token not in lab.content()
    assert token not in lab.evaluate("document.documentElement.outerHTML")
    # A new notebook, one cell, run through the kernel websocket behind the proxy.
    lab.locator('.jp-LauncherCard[data-category="Notebook"]').first.click()
    cell = lab.locator(".jp-Cell .cm-content").first
    cell.wait_for(timeout=60_000)
    lab.get_by_text("Python 3 (ipykernel) | Idle").wait_for(
        timeout=60_000
    )  # kernel connected via the proxy
    cell.click()
    lab.keyboard.type("import os; print(6*7, os.getcwd())")
    lab.keyboard.press("Shift+Enter")
    try:
        lab.locator(".jp-OutputArea-output", has_text="42").first.wait_for(timeout=60_000)
    except Exception:
        screenshot(lab, "22-cell-failed")
        raise
    # No news pop-up (the job makes "never" the default of JupyterLab's fetchNews setting).
    assert (
        lab.get_by_text("Would you like to get notified about official Jupyter news?").count() == 0
    )
    screenshot(lab, "22-cell-42")
    # It opened in the user's home, not in the portal's hidden work directory.
    account = ClusterAccount.for_user(job.cluster, job.owner)
    home = job.cluster.work_dir_root("home", account.username)
    assert lab.locator(".jp-OutputArea-output").first.inner_text().strip() == f"42 {home}"
    lab.keyboard.press("Control+s")
    notebook = lab.locator(".jp-mod-current .lm-TabBar-tabLabel").inner_text().strip()
    assert re.fullmatch(r"Untitled\d*\.ipynb", notebook), notebook
    listing = lab.locator(".jp-DirListing-content")
    listing.get_by_text(notebook, exact=True).wait_for(timeout=20_000)
    assert listing.get_by_text("connection.json").count() == 0

    # Another signed-in user is refused, by the portal and by the proxy.
    other = sign_in(tls_browser, stack, "outsider", "outsider-pass-123")
    assert other.goto(f"{stack.url}/sessions/{session.public_id}/open/").status == 404
    lab_url = f"https://{session.public_id}.sessions.localhost:{stack.proxy_port}/lab"
    response = other.goto(lab_url)  # no proxy cookie: sent to the portal, which shows them nothing
    assert response.status == 404

    # Nobody signed in: sent to sign in.
    anonymous = tls_browser.new_context().new_page()
    anonymous.goto(lab_url)
    assert "/accounts/login/" in anonymous.url

    # Cancelling closes the kernel's open WebSocket within two seconds, then the link
    # shows the closed page.
    page.goto(f"{stack.url}/jobs/{job.pk}/")
    page.get_by_role("button", name="Cancel job").click()
    open_sockets = [ws for ws in kernel_sockets if not ws.is_closed()]
    assert open_sockets, "JupyterLab holds no kernel WebSocket"
    closed_at: list[float] = []
    for ws in open_sockets:
        ws.on("close", lambda _ws: closed_at.append(time.monotonic()))
    page.locator("#cancel-dialog").get_by_role("button", name="Cancel job").click()
    cancelled_at = time.monotonic()

    def all_closed() -> bool:
        if len(closed_at) >= len(open_sockets):
            return True
        lab.wait_for_timeout(50)  # lets Playwright deliver the events (a sleep would not)
        return False

    polling.until(all_closed, 5, "the kernel WebSocket to close", interval=0)
    delay = max(closed_at) - cancelled_at
    print(f"kernel WebSocket closed {delay:.2f}s after Cancel")
    assert delay < 2.0
    page.locator("#job [data-badge]", has_text="Cancelled").wait_for(timeout=60_000)
    lab.reload()
    lab.get_by_text("This session has ended").wait_for(timeout=20_000)
    screenshot(lab, "23-session-closed")

    # The next session, launched again: the notebook saved in the first one is there.
    page.goto(f"{stack.url}/jobs/{job.pk}/")
    page.get_by_role("link", name="Launch again").click()
    page.get_by_role("button", name="Launch").click()
    page.wait_for_url(f"{stack.url}/jobs/*/")
    try:
        page.locator("#session [data-open-session]").wait_for(state="visible", timeout=120_000)
        with page.context.expect_page() as new_tab:
            page.locator("#session [data-open-session]").click()
        again = new_tab.value
        again.locator(".jp-DirListing-content").get_by_text(notebook, exact=True).wait_for(
            timeout=60_000
        )
        screenshot(again, "24-next-session-sees-the-notebook")
    finally:
        pool.with_connection(account, lambda conn: conn.run(["rm", "-f", f"{home}/{notebook}"]))
