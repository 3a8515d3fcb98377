"""The same portal on the real HTCondor pool (make condorpool), in Chromium: a batch job
launched from the form runs to completed with its output; a notebook session opens
through the session proxy and runs a cell."""

import pytest

from jobs.models import Job
from tests import factories
from tests.devcluster.helpers import remote
from tests.e2e.pages import launch, open_session, sign_in
from tests.livestack import LiveStack

pytestmark = [pytest.mark.condorpool, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def stack(condorpool, tmp_path):
    """The live stack with the HTCondor pool as its only cluster."""
    live = LiveStack(tmp_path).start()
    yield live
    live.stop()


@pytest.fixture
def python_host(db):
    return factories.image("python-host", "Python (host)", offers_notebook=True, offers_batch=True)


def test_batch_job_from_the_browser_runs_on_htcondor_with_its_output(
    browser, stack, owner, python_host, screenshot
):
    page = sign_in(browser, stack, "owner", "owner-pass-123")
    job_id = launch(
        page, stack, "Python (host)", "Batch command", "echo condor-e2e-done on $(hostname)"
    )
    page.locator("#job [data-badge]", has_text="Completed").wait_for(timeout=90_000)
    job = Job.objects.get(pk=job_id)
    assert job.cluster.scheduler == "htcondor" and job.scheduler_job_id.endswith(".0")
    # The page shows what was submitted: HTCondor's submit description, then the script.
    page.locator("[data-live-part=script] pre", has_text="request_cpus = ").wait_for(timeout=20_000)
    page.locator("#timeline", has_text="Completed").wait_for(timeout=20_000)
    screenshot(page, "90-htcondor-job-completed")
    assert page.locator("dt", has_text="HTCondor job").count() == 1
    page.get_by_text("condor-e2e-done on vm").wait_for(timeout=20_000)  # its stdout, live
    assert "CUDA_VISIBLE_DEVICES=;" in page.content()  # no GPUs asked: none visible


def test_notebook_on_htcondor_opens_through_the_proxy_and_runs_a_cell(
    tls_browser, stack, owner, python_host, screenshot
):
    page = sign_in(tls_browser, stack, "owner", "owner-pass-123")
    launch(page, stack, "Python (host)", "Notebook session")
    job = Job.objects.get()
    _, lab = open_session(page, stack, job)
    lab.locator('.jp-LauncherCard[data-category="Notebook"]').first.click()
    cell = lab.locator(".jp-Cell .cm-content").first
    cell.wait_for(timeout=60_000)
    lab.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=60_000)
    cell.click()
    lab.keyboard.type("print(6*7)")
    lab.keyboard.press("Shift+Enter")
    try:
        lab.locator(".jp-OutputArea-output", has_text="42").first.wait_for(timeout=60_000)
    finally:
        screenshot(lab, "92-htcondor-notebook-cell-42")
        remote(job.cluster_account, ["bash", "-c", "rm -f ~/Untitled*.ipynb"])
    page.goto(f"{stack.url}/jobs/{job.pk}/")
    page.get_by_role("button", name="Cancel job").click()
    page.locator("#cancel-dialog").get_by_role("button", name="Cancel job").click()
    page.locator("#job [data-badge]", has_text="Cancelled").wait_for(timeout=60_000)


def test_the_launch_form_says_what_htcondor_runs(browser, stack, owner, python_host, screenshot):
    page = sign_in(browser, stack, "owner", "owner-pass-123")
    page.goto(f"{stack.url}/launch/")
    page.get_by_text("Python (host)").click()
    page.get_by_label("Batch command").check()
    assert page.get_by_label("Cluster").locator("option:checked").inner_text() == (
        "condorpool (HTCondor)"
    )
    page.locator("[data-scheduler-note]").wait_for(state="visible")
    # One machine per job, no requeue: those sections are not offered.
    assert page.locator("#distributed-fields").is_hidden()
    assert page.locator("#resumable-fields").is_hidden()
    screenshot(page, "93-htcondor-launch-form")


def test_the_portal_command_submits_to_htcondor_and_waits_for_the_exit_code(stack, owner, tmp_path):
    """`portal submit --wait --logs` on the pool: the job's exit code, its output, and the
    GPU HTCondor chose for a minimum capability."""
    import subprocess
    import sys
    from pathlib import Path

    from devtools import demo_catalog
    from identity.tokens import ApiToken

    demo_catalog.load()
    _, token = ApiToken.issue(owner, "e2e")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PORTAL_URL": stack.url,
        "PORTAL_TOKEN": token,
    }
    portal = str(Path(sys.executable).parent / "portal")

    def run(*argv):
        return subprocess.run([portal, *argv], env=env, capture_output=True, text=True, timeout=180)

    clusters = run("clusters")
    assert clusters.returncode == 0 and "HTCondor" in clusters.stdout, clusters.stdout
    done = run(
        "submit",
        "--cluster",
        "condorpool",
        "--container",
        "shell-host",
        "--partition",
        "gpu",
        "--gpus",
        "1",
        "--gpu-capability",
        "7.5",
        "--time",
        "5",
        "--wait",
        "--logs",
        "--",
        'echo "devices=$CUDA_VISIBLE_DEVICES"; exit 3',
    )
    assert done.returncode == 3, done.stderr
    assert "devices=GPU-b1223334" in done.stdout  # the simulated A100
    job = Job.objects.get(pk=int(done.stdout.splitlines()[0]))
    assert (job.state, job.exit_code, job.cluster.name) == ("failed", 3, "condorpool")
    show = run("show", str(job.pk))
    assert "Scheduler job:" in show.stdout and job.scheduler_job_id in show.stdout
