"""The demo experiment from the browser, on the dev cluster: the Experiments page's own
spec (docs/examples/digits-sweep.yaml: Bayesian search over 4 parameters, 20 trials, 5-fold,
4 jobs at a time, median early stopping) runs as throttled Slurm arrays while its page's
table and charts update live; then the best configuration runs again."""

import time

import pytest
from playwright.sync_api import expect

from devtools import demo_catalog
from experiments.models import Experiment
from jobs.models import Job
from tests import polling
from tests.devcluster.helpers import remote
from tests.e2e.pages import page_errors, sign_in

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]


@pytest.mark.timeout(900)
def test_the_demo_sweep_runs_from_the_experiments_page(
    browser, stack, devcluster, owner, screenshot
):
    demo_catalog.load()
    account = devcluster.accounts.get(user=owner)
    page = sign_in(browser, stack, "owner", "owner-pass-123")
    errors = page_errors(page)
    page.get_by_role("link", name="Experiments").click()
    box = page.get_by_label("Spec")
    assert "container: digits-sweep-demo" in box.input_value()
    assert "folds: 5" in box.input_value() and "method: bayesian" in box.input_value()
    screenshot(page, "69-experiments-new")
    started = time.monotonic()
    page.get_by_role("button", name="Start experiment").click()
    page.wait_for_url(f"{stack.url}/experiments/*/")
    experiment = Experiment.objects.get()

    # Live: rows appear and the curves gain traces without reloading the page.
    page.wait_for_selector("[data-trial-rows] tr[data-state='running']", timeout=90_000)
    throttled = []
    seen_traces = set()

    def ended() -> bool:
        experiment.refresh_from_db()
        if experiment.is_final:
            return True
        queue = remote(account, ["squeue", "-h", "-o", "%i %t %r"])
        throttled.extend(line for line in queue.splitlines() if "%" in line.split()[0])
        seen_traces.add(page.locator("[data-chart='curves']").get_attribute("data-traces"))
        if len(seen_traces) == 3:
            screenshot(page, "70-experiment-running")
        return False

    polling.until(ended, 600, lambda: f"the sweep to end ({experiment.message})", interval=2)
    took = time.monotonic() - started
    assert experiment.state == "completed", experiment.message
    print(f"demo sweep: {took:.0f} s, {experiment.message}")
    assert throttled, "no array task waited behind its % throttle"
    assert len(seen_traces - {None}) >= 3  # the curves chart grew while we watched

    trials = list(experiment.trials.all())
    assert len(trials) == 20
    jobs = Job.objects.filter(trial__experiment=experiment)
    assert all("_" in j.scheduler_job_id for j in jobs)
    completed = [t for t in trials if t.state == "completed"]
    assert len(completed) >= 5 and all(len(t.fold_values) == 5 for t in completed)
    best = experiment.best_of(trials)
    assert best.value > 0.9, best.value  # digits: a decent configuration is found
    for trial in trials:
        if trial.state == "stopped":
            assert trial.message.startswith("Stopped early by the median rule")
            assert all(j.state in ("cancelled", "completed") for j in trial.jobs.all())

    # The page after its last refresh: the table, parallel coordinates, history, curves.
    page.wait_for_function(
        "() => document.querySelector('[data-exp-state]').textContent.trim() === 'completed'",
        timeout=30_000,
    )
    rows = page.locator("[data-trial-rows] tr")
    assert rows.count() == 20
    assert page.locator("[data-trial-rows] tr.best").get_attribute("data-trial") == str(best.number)
    # Parallel coordinates are drawn just after the other charts (WebGL, the slowest).
    expect(page.locator("[data-chart='parallel']")).to_have_attribute(
        "data-points", str(len(completed))
    )
    assert int(page.locator("[data-chart='importance']").get_attribute("data-bars")) == 4
    stopped = [t for t in trials if t.state == "stopped"]
    if stopped:
        page.get_by_label("State").select_option("stopped")
        assert page.locator("[data-trial-rows] tr").count() == len(stopped)
        assert (
            "Stopped early by the median rule" in page.locator("[data-trial-rows]").text_content()
        )
        page.get_by_label("State").select_option("")
    # Sort by the objective: the best trial first (maximised, so descending).
    header = page.locator("[data-trial-head] button", has_text="val_accuracy")
    header.click()
    header.click()
    assert page.locator("[data-trial-rows] tr").first.get_attribute("data-trial") == str(
        best.number
    )
    screenshot(page, "71-experiment-done")

    with page.expect_download() as download:
        page.get_by_role("link", name="Export CSV").click()
    assert download.value.suggested_filename == f"experiment-{experiment.pk}.csv"

    page.get_by_role("button", name="Launch the best configuration again").click()
    page.wait_for_url(f"{stack.url}/jobs/*/")
    job = Job.objects.get(pk=int(page.url.rstrip("/").split("/")[-1]))
    assert job.trial_id is None and f"PORTAL_PARAM_LR={best.params['lr']!r}" in job.command

    def final() -> bool:
        job.refresh_from_db()
        return job.is_final

    polling.until(final, 120, lambda: f"the relaunched job to end ({job.state})", interval=1)
    assert job.state == "completed", job.message
    screenshot(page, "72-best-configuration-again")
    # The dashboard lists the relaunched job, and counts the sweep's fold jobs aside.
    page.goto(f"{stack.url}/")
    assert page.locator("[data-hidden-trials]").get_attribute("data-hidden-trials") == str(
        jobs.count()
    )
    assert page.locator("#job-table tbody tr").count() == 1
    assert page.locator(f"tr[data-job-id='{job.pk}']").count() == 1
    assert errors == []
