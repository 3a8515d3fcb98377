"""A new researcher's first hour, in Chromium on the live stack and the dev cluster:
the defaults work as they are."""

from pathlib import Path

import pytest
from django.conf import settings

from clusters import files
from devtools import demo_catalog
from devtools import devcluster as devcluster_mod
from jobs.models import Job
from tests.e2e.pages import page_errors, press_launch, sign_in

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


def test_with_two_clusters_the_form_starts_on_the_default_and_speaks_each_schedulers_words(
    browser, stack, owner, devcluster_info, screenshot
):
    """`make demo`'s two clusters: the HTCondor pool (first by name) and the Slurm dev
    cluster, marked default. The form preselects the dev cluster; choosing the pool names
    the account an accounting group and says what HTCondor runs, in the form itself; back
    on the dev cluster the MPI demo launches with the form's defaults and passes its check."""
    demo_catalog.load()
    pool = devcluster_mod.read_info(Path(settings.CONDORPOOL_DIR), "pool.json", "condorpool")
    devcluster_mod.register(pool, {"owner": pool["default_user"]})  # registered, never used
    devcluster_mod.register(
        devcluster_info, {"owner": devcluster_info["default_user"]}, default=True
    )
    page = sign_in(browser, stack, "owner", "owner-pass-123")
    errors = page_errors(page)
    page.goto(f"{stack.url}/launch/")
    cluster = page.get_by_label("Cluster", exact=True)
    assert cluster.input_value() == "devcluster"
    assert page.get_by_label("Slurm account").is_visible()
    note = page.locator("[data-scheduler-note]")
    assert note.is_hidden()

    cluster.select_option("condorpool")
    assert page.get_by_label("Accounting group").is_visible()
    assert page.get_by_text("Slurm account").count() == 0
    assert "one process on one machine" in note.inner_text() and note.is_visible()
    assert "README" not in page.locator("#launch-form").inner_text()
    assert "README" not in page.content()
    screenshot(page, "32-launch-condorpool-words")

    cluster.select_option("devcluster")
    assert page.get_by_label("Slurm account").is_visible() and note.is_hidden()
    # A fresh form: the demo as it comes, nothing changed but the image.
    page.goto(f"{stack.url}/launch/")
    page.get_by_text("Data-parallel digits").click()
    assert page.get_by_label("MPI: mpirun").is_checked()
    assert page.get_by_label("Nodes", exact=True).input_value() == "2"
    screenshot(page, "33-launch-mpi-demo-defaults")
    job_id = press_launch(page, stack)
    job = Job.objects.get(pk=job_id)
    assert (job.cluster.name, job.partition.name, job.launcher, job.nodes, job.tasks_per_node) == (
        "devcluster",
        "gpu",
        "mpi",
        2,
        2,
    )
    page.locator("[data-badge]", has_text="Completed").wait_for(timeout=300_000)
    job.refresh_from_db()
    out = files.read_job_log(job, "stdout").text
    assert job.exit_code == 0 and "accuracy check: passed" in out, (job.message, out[-2000:])
    screenshot(page, "34-mpi-demo-completed")
    assert not errors, errors
