"""Pages of many rows in Chromium on the served stack (#43): past 200 rows a table holds
only the rows in view (Portal.rows), scrolls in its own box, and still reaches every row,
sorted and filtered over all of them; an experiment's curves past 100 trials are a few
joined traces, not one per trial. bench/bigpages.py measures the same pages at 2,000
trials and 1,000 runs."""

import pytest
from playwright.sync_api import expect

from experiments.models import Trial
from jobs.models import Job
from tests import factories
from tests.e2e.pages import page_errors, sign_in

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]

TRIALS = 300
DESKTOP = {"width": 1366, "height": 900}


@pytest.fixture
def big_experiment(devcluster, owner):
    experiment = factories.experiment_record(
        owner, devcluster, max_trials=TRIALS, state="completed"
    )
    Trial.objects.bulk_create(
        Trial(
            experiment=experiment,
            number=n,
            params={"lr": 0.001 * (n + 1), "act": "relu" if n % 2 else "tanh"},
            state="failed" if n % 50 == 7 else "completed",
            value=None if n % 50 == 7 else 0.5 + (n * 37 % TRIALS) / (2 * TRIALS),
            last_step=40,
            last_value=0.5,
            intermediate={str(s * 10): 0.1 + s / 10 + n / 10_000 for s in range(5)},
        )
        for n in range(TRIALS)
    )
    return experiment


def rows_in_view(page, tbody: str) -> list[str]:
    return page.locator(f"{tbody} tr:not(.spacer)").evaluate_all(
        "(rows) => rows.map((r) => r.dataset.trial || r.dataset.runId)"
    )


def test_an_experiment_of_300_trials_draws_the_rows_in_view_and_joined_curves(
    browser, stack, big_experiment
):
    best = max(big_experiment.trials.exclude(value=None), key=lambda t: t.value)
    page = sign_in(browser, stack, "owner", "owner-pass-123", viewport=DESKTOP)
    errors = page_errors(page)
    page.goto(f"{stack.url}/experiments/{big_experiment.pk}/")
    curves = page.locator("[data-chart='curves']")
    expect(curves).to_have_attribute("data-traces", str(TRIALS))
    # Three traces (faded, the rest, the best) hold all 300 curves, each point naming its trial.
    traces = curves.evaluate(
        "(el) => el.data.map((t) => [t.name, t.x.filter((x) => x !== null).length])"
    )
    failed = TRIALS // 50  # trials 7, 57, ...: five points each
    assert traces == [
        ["stopped or failed", failed * 5],
        ["trials", (TRIALS - failed - 1) * 5],
        [f"best: trial {best.number}", 5],
    ], traces

    table = page.locator("[data-trials]")
    assert table.get_attribute("aria-rowcount") == str(TRIALS + 1)
    shown = rows_in_view(page, "[data-trial-rows]")
    assert 0 < len(shown) < 150, len(shown)  # the rows in view and a margin, not 300
    assert shown[0] == "0"
    # Scrolled to its end, the box shows the last trial.
    page.locator(".table-box").evaluate("(box) => { box.scrollTop = box.scrollHeight; }")
    expect(page.locator("[data-trial-rows] tr[data-trial='299']")).to_be_visible()
    assert page.locator("[data-trial-rows] tr[data-trial='299']").get_attribute(
        "aria-rowindex"
    ) == str(TRIALS + 1)
    # Sorting and filtering work on all the rows, not the ones drawn.
    page.locator(".table-box").evaluate("(box) => { box.scrollTop = 0; }")
    header = page.locator("[data-trial-head] button", has_text="val_accuracy")
    header.click()
    header.click()
    expect(page.locator("[data-trial-rows] tr:not(.spacer)").first).to_have_attribute(
        "data-trial", str(best.number)
    )
    page.get_by_label("State").select_option("failed")
    expect(page.locator("[data-trial-rows] tr")).to_have_count(6)  # few: every row, no box
    assert page.locator("[data-trials]").get_attribute("aria-rowcount") is None
    expect(page.locator("[data-chart='parallel']")).to_have_attribute(
        "data-points", str(TRIALS - 6)
    )
    assert errors == []


def test_a_comparison_of_250_runs_draws_the_rows_in_view(browser, stack, devcluster, owner):
    runs = [
        factories.compared_run(
            owner,
            devcluster,
            params={"seed": n % 5},
            curves={"loss": [1.0 / (s + 1 + n) for s in range(4)]},
            name=f"run-{n}",
        )
        for n in range(250)
    ]
    page = sign_in(browser, stack, "owner", "owner-pass-123", viewport=DESKTOP)
    errors = page_errors(page)
    ids = ",".join(str(r.pk) for r in runs)
    page.goto(f"{stack.url}/compare/?ids={ids}&group=param.seed")
    page.wait_for_selector("[data-compare-charts][data-drawn]")
    assert page.locator("[data-compare-table]").get_attribute("aria-rowcount") == "251"
    shown = rows_in_view(page, "[data-compare-table] tbody")
    assert 0 < len(shown) < 150, len(shown)
    # Sorted by id, either way, over all 250 runs: the first and the last run on top.
    by_id = page.locator("[data-compare-table] th[data-sort-key='id'] button")
    first_row = page.locator("[data-compare-table] tbody tr:not(.spacer)").first
    by_id.click()
    expect(first_row).to_have_attribute("data-run-id", str(runs[0].pk))
    by_id.click()
    expect(first_row).to_have_attribute("data-run-id", str(runs[-1].pk))
    assert Job.objects.filter(pk__in=[r.pk for r in runs]).count() == 250
    assert errors == []
