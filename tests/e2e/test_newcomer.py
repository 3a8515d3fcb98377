"""A newcomer's path, tried as a new user would in Chromium: from the portal's home page
to the Start tutorial for the first notebook (served by the portal at /docs/), then
following it to an open JupyterLab. Each thing clicked or checked is first found in the
tutorial's own text, so no step is one the page does not say."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from devtools import demo_catalog
from jobs.models import Job
from proxy.models import SessionLink
from tests.e2e.pages import sign_in
from tests.livestack import ROOT, LiveStack

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def docs_html(tmp_path_factory) -> Path:
    """This checkout's docs as `make docs` builds them (make test has, before the tests)."""
    built = ROOT / "var" / "docs-html"
    if (built / "start" / "first-notebook.html").is_file():
        return built
    built = tmp_path_factory.mktemp("docs-html")
    command = [sys.executable, "-m", "sphinx", "-q", "-b", "html", str(ROOT / "docs"), str(built)]
    subprocess.run(command, check=True, timeout=600, capture_output=True)
    return built


@pytest.fixture
def stack(devcluster, tmp_path, docs_html):
    """The served stack, with the docs (tls_browser trusts its session certificate)."""
    live = LiveStack(tmp_path, env={"PORTAL_DOCS_DIR": str(docs_html)}).start()
    yield live
    live.stop()


def test_a_newcomer_follows_the_first_notebook_tutorial_from_the_home_page_to_jupyterlab(
    tls_browser, stack, owner, screenshot
):
    demo_catalog.load()
    page = sign_in(tls_browser, stack, "owner", "owner-pass-123")
    page.goto(f"{stack.url}/")
    with page.context.expect_page() as docs_tab:  # the help opens beside the portal
        page.get_by_role("link", name="your first notebook").click()
    docs = docs_tab.value
    docs.wait_for_url(f"{stack.url}/docs/start/first-notebook.html")
    tutorial = docs.locator("article").inner_text()

    def said(*words: str) -> None:
        for word in words:
            assert word in tutorial, f"the tutorial never says {word!r}"

    # 1. Launch, the card, a notebook session.
    said("Press **Launch** in the menu".replace("**", ""), "Python 3 (host", "Notebook session")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Launch").click()
    page.get_by_text("Python 3 (host environment)").click()
    kind = page.get_by_label("Notebook session")
    if not kind.is_checked():  # "set to Notebook session"
        kind.check()
    # 2. One GPU on the gpu partition, as the form already asks.
    said("Partition", "gpu", "GPUs per node", "1")
    assert page.get_by_label("Partition").locator("option:checked").inner_text().startswith("gpu")
    assert page.get_by_label("GPUs per node").input_value() == "1"
    # 3. Launch: the job's page, queued.
    page.get_by_role("button", name="Launch").click()
    page.wait_for_url(f"{stack.url}/jobs/*/")
    job = Job.objects.get(pk=int(page.url.rstrip("/").split("/")[-1]))
    assert (job.kind, job.gpus, job.partition.name) == ("notebook", 1, "gpu")
    # 4. Wait without reloading for Open notebook; 5. press it: a new tab.
    said("Open notebook")
    open_link = page.locator("#session [data-open-session]")
    open_link.wait_for(state="visible", timeout=240_000)
    assert open_link.inner_text().strip() == "Open notebook"
    with page.context.expect_page() as new_tab:
        open_link.click()
    lab = new_tab.value
    session = SessionLink.objects.get(job=job)
    said(".sessions.localhost:8443/lab")
    lab.wait_for_url(
        f"https://{session.public_id}.sessions.localhost:{stack.proxy_port}/lab**", timeout=60_000
    )
    # 6. JupyterLab, open (its Launcher for a first session; the dev cluster's user has had
    # others, whose workspace JupyterLab restores).
    said("JupyterLab shows its **Launcher**".replace("**", ""))
    lab.locator(".jp-LabShell").first.wait_for(timeout=120_000)
    screenshot(lab, "25-newcomer-jupyterlab")
    # 11. Stopped again, as the tutorial ends.
    said("Cancel job")
    page.locator("[data-cancel]").click()
    page.get_by_role("dialog").get_by_role("button", name="Cancel job").click()
    page.locator("[data-badge]", has_text="Cancelled").first.wait_for(timeout=120_000)
