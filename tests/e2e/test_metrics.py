"""Live training metrics in Chromium: the demo training job on the dev cluster, charted
as it learns, with no reload."""

import pytest

from devtools import demo_catalog
from jobs.models import Job
from metrics.models import MetricPoint, MetricSeries
from tests.e2e.pages import page_errors, sign_in

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]

PLOTTED = "() => Number(document.getElementById('metrics').dataset.plottedPoints)"


def test_demo_training_job_charts_grow_live(browser, stack, owner, screenshot):
    demo_catalog.load()
    page = sign_in(browser, stack, "owner", "owner-pass-123")
    errors = page_errors(page)

    page.goto(f"{stack.url}/launch/")
    page.get_by_text("Digits classifier").click()
    command = page.get_by_label("Command", exact=True)
    assert command.input_value().startswith("train-digits")  # the catalog's suggestion
    command.fill("train-digits --epochs 12 --delay 0.08")
    page.get_by_label("Partition").select_option(label="cpu")
    page.get_by_role("button", name="Launch").click()
    page.wait_for_url(f"{stack.url}/jobs/*/")
    job_id = int(page.url.rstrip("/").split("/")[-1])
    page.evaluate("() => { window.__noReload = true; }")

    # The number of plotted points keeps growing while the job trains.
    page.wait_for_function(f"() => ({PLOTTED})() > 0", timeout=90_000)
    page.locator("[data-badge]", has_text="Running").wait_for(timeout=20_000)
    readings = [page.evaluate(PLOTTED)]
    for _ in range(3):
        page.wait_for_function(f"() => ({PLOTTED})() > {readings[-1]}", timeout=30_000)
        readings.append(page.evaluate(PLOTTED))
    assert readings == sorted(set(readings)), readings
    assert page.evaluate("() => window.__noReload") is True, "the page reloaded"
    for name in ("loss", "val_accuracy"):
        assert page.locator(f'.chart[data-figure="{name}"] .main-svg').count() > 0
    screenshot(page, "20-metrics-live")

    # The chart controls work on live data.
    page.get_by_label("log scale").check()
    page.get_by_label("Charts").select_option("overlay")
    page.locator("[data-smoothing]").fill("0.8")
    page.get_by_label("X axis").select_option("time")
    page.locator('.chart[data-figure="all"]').wait_for()
    screenshot(page, "21-metrics-overlay-smoothed")
    page.get_by_label("Charts").select_option("split")
    page.get_by_label("X axis").select_option("step")

    page.locator("[data-badge]", has_text="Completed").wait_for(timeout=120_000)
    job = Job.objects.get(pk=job_id)
    loss = MetricSeries.objects.get(job=job, key="loss")
    steps = list(
        MetricPoint.objects.filter(series=loss).order_by("step").values_list("step", flat=True)
    )
    assert steps == list(range(len(steps))) and loss.points == len(steps) > 100
    accuracy = MetricSeries.objects.get(job=job, key="epoch_val_accuracy")
    assert accuracy.last_value > 0.85  # it really learned

    # The page holds every point it was sent exactly once (no double-plotted batch).
    page.wait_for_function(
        f"() => ({PLOTTED})() === {sum(s.points for s in MetricSeries.objects.filter(job=job))}",
        timeout=20_000,
    )
    # The portal's own CPU/memory samples: in the System panel, against time.
    system = page.locator("[data-system] .chart").first
    system.locator(".main-svg").first.wait_for()
    assert system.get_attribute("data-figure").startswith("system:sys/")
    assert system.locator(".g-xtitle").text_content().startswith("relative time")
    screenshot(page, "21b-metrics-system")

    # Right-sizing (#41), from those samples: what it used of what it asked for.
    page.reload()
    page.locator("[data-fit-cpu]").wait_for()
    assert "% of " in page.locator("[data-fit-cpu]").text_content()
    assert page.locator("[data-fit-memory]").count() == 1
    assert page.locator("[data-fit-advice]").text_content().strip() != ""

    csv = page.request.get(f"{stack.url}/jobs/{job_id}/metrics/export/?format=csv").text()
    assert len(csv.splitlines()) == 1 + MetricPoint.objects.filter(series__job=job).count()
    assert errors == []
