"""A new researcher's first hour, in Chromium on the live stack and the dev cluster:
the defaults work as they are."""

import pytest

from jobs import demo_catalog
from jobs.models import Job
from tests.e2e.pages import page_errors, sign_in

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]


def test_the_digits_demo_launches_with_defaults_only_and_completes(
    browser, stack, owner, screenshot
):
    """Pick "Digits classifier", press Launch: nothing else. It is a CPU-only image on the
    default (GPU) partition: no GPU, no GPU type, the partition's modest defaults."""
    demo_catalog.load()
    page = sign_in(browser, stack, "owner", "owner-pass-123")
    errors = page_errors(page)
    page.goto(f"{stack.url}/launch/")
    page.get_by_text("Digits classifier").click()
    assert page.get_by_label("GPUs").is_disabled()
    assert "CPUs only" in page.locator('[data-limit-for="gpus"]').inner_text()
    screenshot(page, "30-launch-digits-defaults")
    page.get_by_role("button", name="Launch").click()
    page.wait_for_url(f"{stack.url}/jobs/*/")
    job = Job.objects.get(pk=int(page.url.rstrip("/").split("/")[-1]))
    assert (job.image.slug, job.partition.name, job.gpus, job.gpu_type) == (
        "digits-demo",
        "gpu",
        0,
        "",
    )
    assert (job.cpus, job.memory_gb, job.command) == (2, 4, "train-digits --epochs 20 --delay 0.05")
    page.locator("[data-badge]", has_text="Completed").wait_for(timeout=240_000)
    job.refresh_from_db()
    assert job.exit_code == 0, job.message
    screenshot(page, "31-digits-completed")
    assert not errors, errors
