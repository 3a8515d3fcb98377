"""GPUs chosen by what the work needs, in Chromium on the dev cluster (v100: 7.0, 32 GB on
node1; a100: 8.0, 80 GB on node2): the launch page says which types match as the user
types, names the closest when none does, and a job asking for compute capability 8.0 runs
on node2; an impossible request never reaches Slurm."""

import pytest

from devtools import demo_catalog
from jobs.models import Job
from tests.e2e.pages import fill_launch_form, page_errors, press_launch, sign_in

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]


def test_the_form_matches_gpu_needs_to_the_clusters_types(browser, stack, owner, screenshot):
    demo_catalog.load()
    page = sign_in(browser, stack, "owner", "owner-pass-123")
    errors = page_errors(page)
    fill_launch_form(
        page,
        stack,
        "Python 3 (host environment)",
        "Batch command",
        "echo on $SLURMD_NODENAME",
        "gpu",
    )
    match = page.locator("[data-gpu-match]")
    capability, memory = (
        page.get_by_label("Min. compute capability"),
        page.get_by_label("Min. GPU memory (GB)"),
    )
    assert match.is_hidden()
    memory.fill("20")
    assert match.text_content() == (
        "Matches on gpu: v100 (compute capability 7.0, 32 GB); a100 (compute capability 8.0, 80 GB)."
    )
    memory.fill("")
    capability.fill("9.0")
    assert (
        match.text_content()
        == "No GPU on gpu meets this; closest: a100 (compute capability 8.0, 80 GB); v100 (compute capability 7.0, 32 GB)."
    )
    # Past the page's hint, the server refuses it, naming the closest: nothing is submitted.
    press = page.get_by_role("button", name="Launch")
    press.click()
    page.get_by_text(
        "No GPU on partition gpu has compute capability ≥ 9.0. Closest: a100"
    ).wait_for()
    assert not Job.objects.exists()

    page.get_by_label("Min. compute capability").fill("8.0")
    assert match.text_content() == "Matches on gpu: a100 (compute capability 8.0, 80 GB)."
    assert page.get_by_text("No GPU on partition gpu has").count() == 0  # changed: gone
    capability.blur()
    screenshot(page, "83-launch-gpu-by-capability")
    job_id = press_launch(page, stack)
    page.locator("[data-badge]", has_text="Completed").wait_for(timeout=90_000)
    assert (
        page.locator("[data-gpus]").text_content() == "1 × a100 (asked: compute capability ≥ 8.0)"
    )
    job = Job.objects.get(pk=job_id)
    assert (job.node, job.gpu_type) == ("node2", "a100")
    assert errors == []
