"""Runs side by side, in Chromium on the served stack and the Slurm dev cluster: nine runs
of the digits demo (three learning rates × three seeds, tagged) launched through
``POST /api/v1/jobs/``; the dashboard selects them, the comparison shows only the fields
that differ, grouping by learning rate draws three bands, a pinned baseline is on every
chart, and the URL reopens the same view."""

import json
import urllib.request

import pytest

from devtools import demo_catalog
from identity.tokens import ApiToken
from jobs.models import Job
from metrics.models import MetricSeries
from tests import polling
from tests.e2e.pages import page_errors, sign_in

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]

LRS = (0.01, 0.05, 0.2)
SEEDS = (1, 2, 3)

# Plotly's own view of each chart: its metric and its traces' roles (compare.js sets meta).
CHARTS = """() => [...document.querySelectorAll('[data-compare-charts] [data-chart]')].map((el) => ({
  metric: el.dataset.chart,
  bands: el.data.filter((t) => t.meta === 'band').length,
  means: el.data.filter((t) => t.meta === 'mean').map((t) => t.name),
  baseline: el.data.filter((t) => t.meta === 'baseline').map((t) => t.name),
}))"""


def launch(stack, token: str, lr: float, seed: int) -> int:
    body = {
        "container": "digits-sweep-demo",
        "cluster": "devcluster",
        "partition": "cpu",
        "command": f"sweep-digits --epochs 6 --delay 0 --lr {lr} --seed {seed}",
        "cpus": 1,
        "memory_gb": 1,
        "time_limit": 10,
        "name": f"digits lr={lr} seed={seed}",
        "tags": ["digits", f"seed={seed}"],
        "params": {"lr": lr, "seed": seed},
    }
    request = urllib.request.Request(
        f"{stack.url}/api/v1/jobs/",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["id"]


@pytest.mark.timeout(900)
def test_nine_digits_runs_compared_grouped_by_learning_rate(
    browser, stack, devcluster, owner, screenshot
):
    demo_catalog.load()
    _, token = ApiToken.issue(owner, "e2e")
    ids = []
    for lr in LRS:
        for seed in SEEDS:
            job_id = launch(stack, token, lr, seed)
            job = Job.objects.get(pk=job_id)  # tagged and with its parameters, by the API
            assert (job.params, sorted(t.name for t in job.tags.all())) == (
                {"lr": lr, "seed": seed},
                ["digits", f"seed={seed}"],
            )
            ids.append(job_id)
    polling.until(
        lambda: (
            set(Job.objects.filter(pk__in=ids).values_list("state", flat=True))
            <= set(Job.FINAL_STATES)
        ),
        600,
        "the nine runs to end",
        interval=3,
    )
    jobs = list(Job.objects.filter(pk__in=ids))
    assert {j.state for j in jobs} == {"completed"}, [(j.pk, j.state, j.message) for j in jobs]
    logged = MetricSeries.objects.filter(job_id__in=ids, key="val_accuracy", points__gte=6)
    polling.until(  # the last metrics may follow the end by a sync
        lambda: logged.count() == len(ids),
        120,
        lambda: f"every run's metrics ({logged.count()} of {len(ids)})",
        interval=2,
    )

    # The dashboard: tick the nine, press Compare.
    page = sign_in(
        browser, stack, "owner", "owner-pass-123", viewport={"width": 1366, "height": 900}
    )
    errors = page_errors(page)
    for job_id in ids:
        page.locator(f"tr[data-job-id='{job_id}'] [data-compare-pick]").check()
    screenshot(page, "80-compare-dashboard-selected")
    page.get_by_role("button", name="Compare selected").click()
    page.wait_for_url(f"{stack.url}/compare/?*")
    page.wait_for_selector("[data-compare-charts][data-drawn]")  # every chart drawn
    rows = page.locator("[data-compare-table] tbody tr")
    assert rows.count() == 9
    # Only what differs: the command's own words, the seed tag, lr and seed; the image,
    # cluster, partition and resources are folded into "same for all".
    headers = page.locator("[data-compare-table] th[data-column]").all_inner_texts()
    assert headers == ["command", "tags", "param.lr", "param.seed"], headers
    same = page.locator("[data-same] dt").all_text_contents()  # folded: not drawn
    assert {"image", "cluster", "partition", "resources"} <= set(same), same
    cells = rows.first.locator("td").all_inner_texts()
    assert cells[1:5] == ["0.01 1", "seed=1", "0.01", "1"], cells  # lr 0.01, seed 1

    # Group by learning rate, baseline the first lr's group: three bands, baseline on every chart.
    with page.expect_navigation():
        page.get_by_label("Group by").select_option("param.lr")
    with page.expect_navigation():
        page.get_by_label("Baseline").select_option(f"group:{LRS[0]}")
    page.wait_for_selector("[data-compare-charts][data-drawn]")  # every chart drawn
    charts = page.evaluate(CHARTS)
    assert {c["metric"] for c in charts} >= {"loss", "val_loss", "val_accuracy"}, charts
    for chart in charts:
        assert chart["bands"] == 3, chart
        assert chart["means"] == [f"{lr} (3)" for lr in LRS], chart
        assert chart["baseline"] == [f"baseline: group {LRS[0]}"], chart
    page.locator("[data-compare-table] th[data-sort-key='metric.val_accuracy.best'] button").click()
    screenshot(page, "81-compare-grouped-by-lr")
    url = page.url
    assert "group=param.lr" in url and "baseline=group%3A0.01" in url and "sort=" in url

    # The URL reopens the same view in a fresh browser context.
    again = sign_in(
        browser, stack, "owner", "owner-pass-123", viewport={"width": 1366, "height": 900}
    )
    again.goto(url)
    again.wait_for_selector("[data-compare-charts][data-drawn]")  # every chart drawn
    assert again.evaluate(CHARTS) == charts
    assert again.get_by_label("Group by").input_value() == "param.lr"
    first_ids = lambda p: p.locator("[data-compare-table] tbody tr").evaluate_all(  # noqa: E731
        "(rows) => rows.map((r) => r.dataset.runId)"
    )
    assert first_ids(again) == first_ids(page)
    screenshot(again, "82-compare-reopened")
    assert errors == [] and page_errors(again) == []
