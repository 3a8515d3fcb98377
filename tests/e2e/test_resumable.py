"""A resumable job in Chromium: launched from the form with checkpoint and requeue, requeued
on the dev cluster while it trains, it resumes from its checkpoint and its charts show one
continuous curve per metric with a marker where the second attempt starts; its runs come
from accounting."""

import contextlib
import subprocess

import pytest

from devtools import demo_catalog
from jobs.models import Job
from metrics.models import MetricSeries
from tests import polling
from tests.devcluster.helpers import start_now_if_held_for_requeue
from tests.e2e.pages import page_errors, press_launch, sign_in

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]

PLOTTED = "() => Number(document.getElementById('metrics').dataset.plottedPoints)"
LOSS = '.chart[data-figure="loss"]'


def requeue_and_let_go(scheduler_id: str) -> None:
    """`scontrol requeue`, then the credential-lifetime hold (BeginTime, 120 s) lifted."""
    subprocess.run(["scontrol", "requeue", scheduler_id], check=True)
    with contextlib.suppress(AssertionError):  # never held: it starts by itself
        polling.until(lambda: start_now_if_held_for_requeue(scheduler_id), 30, "the hold")


@pytest.mark.timeout(420)
def test_a_requeued_resumable_job_is_one_curve_with_an_attempt_marker(
    browser, stack, owner, screenshot
):
    demo_catalog.load()
    page = sign_in(browser, stack, "owner", "owner-pass-123")
    errors = page_errors(page)
    page.goto(f"{stack.url}/launch/")
    page.get_by_text("Digits classifier").click()
    page.get_by_label("Command", exact=True).fill(
        "train-digits --epochs 10 --delay 0.12 --checkpoint-every 10"
    )
    page.get_by_label("Partition").select_option(label="cpu")
    page.get_by_label("Walltime (minutes)").fill("10")
    page.get_by_label("Checkpoint and requeue").check()
    page.get_by_label("Attempts").fill("3")
    summary = page.locator("[data-resumable-summary]")
    assert summary.text_content().startswith("Up to 3 attempts of 10 min")
    job_id = press_launch(page, stack)
    job = Job.objects.get(pk=job_id)
    assert (job.resumable, job.max_attempts, job.checkpoint_warning_seconds) == (True, 3, 120)
    page.evaluate("() => { window.__noReload = true; }")

    # Training: past a few checkpoints, then requeued (as a preemption would).
    page.wait_for_function(f"() => ({PLOTTED})() > 80", timeout=120_000)
    job.refresh_from_db()
    requeue_and_let_go(job.scheduler_job_id)
    page.locator("[data-attempt-now]", has_text="attempt 2 of 3").wait_for(timeout=90_000)
    page.locator("[data-badge]", has_text="Completed").wait_for(timeout=150_000)
    job.refresh_from_db()
    assert job.attempt == 1 and job.state == Job.State.COMPLETED, job.message

    # All points of both attempts on the page, the loss chart one legend entry, one marker.
    total = sum(s.points for s in MetricSeries.objects.filter(job=job))
    page.wait_for_function(f"() => ({PLOTTED})() === {total}", timeout=30_000)
    assert sorted(
        MetricSeries.objects.filter(job=job, key="loss").values_list("attempt", flat=True)
    ) == [0, 1]
    chart = page.locator(f"{LOSS} > div")
    assert chart.get_attribute("data-attempt-markers") == "1"
    traces = page.evaluate(
        f"() => document.querySelector('{LOSS} > div').data.map(t => [t.showlegend !== false, t.meta && t.meta.attempt, Boolean(t.meta && t.meta.overlapped), t.x.length])"
    )
    assert [t for t in traces if t[0]] == [traces[0]]  # one legend entry: one curve
    assert {t[1] for t in traces} == {1, 2}
    # The steps the second attempt redid (after the last checkpoint) stay, faded.
    kept = [t for t in traces if not t[2]]
    assert sum(t[3] for t in kept) == page.evaluate(
        f"() => Math.max(...document.querySelector('{LOSS} > div').data.flatMap(t => t.x)) + 1"
    )
    page.locator(LOSS).scroll_into_view_if_needed()
    screenshot(page, "81-resumable-one-curve")

    # Its runs from accounting, on the page without a reload.
    page.locator("[data-attempts] tbody tr").nth(1).wait_for(timeout=60_000)
    states = page.locator("[data-attempts] tbody tr td:nth-child(6)").all_text_contents()
    assert states == ["requeued", "completed"]
    assert (
        "Completed on attempt 2 (requeued 1 time(s))."
        in page.locator("[data-message]").first.text_content()
    )
    assert page.evaluate("() => window.__noReload") is True, "the page reloaded"
    page.locator("[data-attempts]").scroll_into_view_if_needed()
    screenshot(page, "82-resumable-runs")
    assert errors == []
