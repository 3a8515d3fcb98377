"""Charts as W&B/TensorBoard users expect them, in Chromium on the served stack: compared
runs in distinct colours named in the legends, system metrics in their own panel against
time, step / relative / wall-time axes, a stable chart order live and after a reload,
overlays with one y-axis per metric family and legends clear of the axis titles."""

import json
import time
import urllib.request

import pytest

from metrics import ingest
from tests import factories
from tests.e2e.pages import SCREENSHOTS, page_errors, sign_in

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]

DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}

# Plotly's own view of each chart: figure key, trace names/colours/modes, axis titles.
CHARTS = """() => [...document.querySelectorAll('#metrics .chart')].map((box) => {
  const div = box.querySelector('.js-plotly-plot');
  const layout = div._fullLayout;
  return {
    key: box.dataset.figure,
    panel: box.closest('[data-system]') ? 'system' : 'metrics',
    traces: div.data.map((t) => ({
      name: t.name, color: t.line.color, mode: t.mode, yaxis: t.yaxis || 'y', x0: t.x[0],
    })),
    xtitle: layout.xaxis.title.text,
    yaxes: Object.keys(layout).filter((k) => /^yaxis\\d*$/.test(k)).sort()
      .map((k) => layout[k].title.text),
    legend: [...box.querySelectorAll('.legendtext')].map((t) => t.textContent),
  };
})"""

# Every legend must keep clear of every axis title in its chart.
OVERLAPS = """() => {
  const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  const found = [];
  document.querySelectorAll('#metrics .chart').forEach((box) => {
    const legend = box.querySelector('.legend');
    if (!legend) return;
    const l = legend.getBoundingClientRect();
    box.querySelectorAll('.g-xtitle, [class*="g-y"][class*="title"]').forEach((title) => {
      const r = title.getBoundingClientRect();
      if (r.width && hit(l, r)) found.push(box.dataset.figure + ': ' + title.textContent);
    });
  });
  return found;
}"""


def records(start_time: float, steps: int, *, scale: float, seq0: int = 0) -> list[dict]:
    """A small training: loss every step, val_accuracy every 10th, CPU every 5th (system)."""
    out, seq = [], seq0
    for step in range(steps):
        when = start_time + step * 2.0
        metrics = {"loss": scale / (step + 1)}
        if step % 10 == 0:
            metrics["val_accuracy"] = min(0.99, 0.5 + step / (steps * 2.0 * scale))
        out.append({"seq": seq, "step": step, "time": when, "metrics": metrics})
        seq += 1
        if step % 5 == 0:
            cpu = {"sys/cpu_percent": 40.0 * scale + step % 20}
            if step == 0:  # one lone point: it must still be drawn
                cpu["sys/memory_gb"] = 0.12
            out.append({"seq": seq, "time": when, "system": True, "node": "n1", "metrics": cpu})
            seq += 1
    return out


def upload(stack, job, token: str, batch: list[dict]) -> None:
    """Over HTTP, as the in-job client uploads."""
    request = urllib.request.Request(
        f"{stack.url}/api/v1/jobs/{job.pk}/metrics/ingest/",
        data=json.dumps(batch).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert json.loads(response.read())["inserted"] > 0


def chart_keys(page) -> list[str]:
    return page.eval_on_selector_all("#metrics .chart", "els => els.map((e) => e.dataset.figure)")


def test_compared_runs_have_distinct_colours_and_names(
    browser, stack, devcluster, owner, screenshot
):
    cluster = devcluster
    # Two earlier runs of the same owner, at other clock times (a day and an hour ago).
    earlier = []
    for name, hours, scale in (("baseline", 24, 2.0), ("wider", 1, 1.5)):
        run = factories.job(owner, cluster, name=name, state="completed")
        batch = ingest.parse_batch(records(time.time() - hours * 3600, 80, scale=scale))
        ingest.ingest(run, batch.records)
        earlier.append(run)
    current = factories.job(owner, cluster, name="current", state="running")
    token = ingest.issue_token(current)
    upload(stack, current, token, records(time.time() - 120, 40, scale=1.0))

    page = sign_in(browser, stack, "owner", "owner-pass-123", viewport=DESKTOP)
    errors = page_errors(page)
    page.goto(f"{stack.url}/jobs/{current.pk}/")
    page.locator('.chart[data-figure="system:sys/memory_gb"] .main-svg').first.wait_for()

    # Sorted by name, system metrics last and in their own panel, against time.
    charts = page.evaluate(CHARTS)
    assert [c["key"] for c in charts] == [
        "loss",
        "val_accuracy",
        "system:sys/cpu_percent",
        "system:sys/memory_gb",
    ]
    assert [c["panel"] for c in charts] == ["metrics", "metrics", "system", "system"]
    by_key = {c["key"]: c for c in charts}
    assert by_key["loss"]["xtitle"] == "step"
    assert by_key["system:sys/cpu_percent"]["xtitle"] == "relative time (s)"
    assert by_key["system:sys/cpu_percent"]["yaxes"] == ["%"]
    lone = by_key["system:sys/memory_gb"]["traces"][0]
    assert lone["mode"] == "lines+markers" and lone["x0"] == 0  # visible, at the run's start

    # Compare with both earlier runs: one colour per run in every chart, legends name them.
    page.get_by_text("Compare runs").click()
    names = {r.pk: f"#{r.pk} {r.name}" for r in (current, *earlier)}
    for run in earlier:
        page.get_by_label(names[run.pk]).check()
    page.wait_for_function(
        "() => document.querySelector('.chart[data-figure=\"loss\"] .js-plotly-plot').data.length === 3"
    )
    page.get_by_text("Compare runs").click()  # close the list
    charts = page.evaluate(CHARTS)
    colours = {}
    for chart in charts:
        assert sorted(t["name"] for t in chart["traces"]) == sorted(names.values()), chart
        assert sorted(chart["legend"]) == sorted(names.values()), chart
        for trace in chart["traces"]:
            assert colours.setdefault(trace["name"], trace["color"]) == trace["color"], chart
    assert len(set(colours.values())) == 3, colours
    swatches = page.eval_on_selector_all(
        "[data-compare] input:checked + [data-swatch]", "els => els.map((e) => e.style.background)"
    )
    assert len(set(swatches)) == 2 and all(swatches), swatches

    # Relative time: runs a day apart start together at 0.
    page.get_by_label("X axis").select_option("relative")
    page.wait_for_function(
        "() => document.querySelector('.chart[data-figure=\"loss\"] .js-plotly-plot')"
        "._fullLayout.xaxis.title.text.startsWith('relative time')"
    )
    loss = next(c for c in page.evaluate(CHARTS) if c["key"] == "loss")
    assert [t["x0"] for t in loss["traces"]] == [0, 0, 0]
    assert page.evaluate(OVERLAPS) == []
    screenshot(page, "40-metrics-compare-desktop")

    # Zooming on relative time reads each run's own steps of that span (2 s a step: 0-10).
    zoomed = """() => document.querySelector('.chart[data-figure="loss"] .js-plotly-plot')
      .data.map((t) => t.x.length)"""
    page.evaluate(
        """() => Plotly.relayout(document.querySelector('.chart[data-figure="loss"] .js-plotly-plot'),
        {'xaxis.range[0]': 0, 'xaxis.range[1]': 20})"""
    )
    page.wait_for_function(f"() => ({zoomed})().every((n) => n === 11)")
    page.evaluate(
        """() => Plotly.relayout(document.querySelector('.chart[data-figure="loss"] .js-plotly-plot'),
        {'xaxis.autorange': true})"""
    )
    page.wait_for_function(f"() => ({zoomed})().join() === '40,80,80'")

    # Overlaid: loss and accuracy on their own y-axes, legends still clear of the titles.
    page.get_by_label("Charts").select_option("overlay")
    page.locator('.chart[data-figure="all"] .main-svg').first.wait_for()
    overlay = page.evaluate(CHARTS)[0]
    assert overlay["key"] == "all" and overlay["yaxes"] == ["accuracy", "loss"]
    axes = {t["name"]: t["yaxis"] for t in overlay["traces"]}
    assert axes[f"{names[current.pk]} · loss"] == "y2"
    assert axes[f"{names[current.pk]} · val_accuracy"] == "y"
    assert page.evaluate(OVERLAPS) == []
    screenshot(page, "41-metrics-compare-overlay")
    page.get_by_label("Charts").select_option("split")
    page.get_by_label("X axis").select_option("step")

    # Live: a new metric takes its place in name order without a reload, and keeps it after one.
    page.evaluate("() => { window.__noReload = true; }")
    now = time.time()
    upload(
        stack,
        current,
        token,
        [{"seq": 1000, "step": 40, "time": now, "metrics": {"accuracy": 0.9, "loss": 0.02}}],
    )
    page.locator('.chart[data-figure="accuracy"] .main-svg').first.wait_for(timeout=20_000)
    live_order = chart_keys(page)
    assert live_order[0] == "accuracy" and page.evaluate("() => window.__noReload")
    # Points appended live are drawn once each.
    more = [
        {"seq": 1001 + i, "step": 41 + i, "time": now + i, "metrics": {"loss": 0.02}}
        for i in (0, 1)
    ]
    upload(stack, current, token, more)
    own_loss = (
        "() => document.querySelector('.chart[data-figure=\"loss\"] .js-plotly-plot').data[0].x"
    )
    page.wait_for_function(f"() => ({own_loss})().includes(42)")
    assert page.evaluate(own_loss) == list(range(43))
    page.reload()
    page.locator('.chart[data-figure="system:sys/memory_gb"] .main-svg').first.wait_for()
    assert chart_keys(page) == live_order

    # The phone: same charts, one column, legends readable.
    phone = sign_in(browser, stack, "owner", "owner-pass-123", viewport=PHONE, is_mobile=True)
    page_errors(phone, errors)
    phone.goto(f"{stack.url}/jobs/{current.pk}/")
    phone.locator('.chart[data-figure="system:sys/memory_gb"] .main-svg').first.wait_for()
    phone.get_by_text("Compare runs").click()
    for run in earlier:
        phone.get_by_label(names[run.pk]).check()
    phone.wait_for_function(
        "() => document.querySelector('.chart[data-figure=\"loss\"] .js-plotly-plot').data.length === 3"
    )
    phone.get_by_text("Compare runs").click()
    assert phone.evaluate(OVERLAPS) == []
    widths = phone.eval_on_selector_all("#metrics .chart", "els => els.map((e) => e.clientWidth)")
    assert all(w <= PHONE["width"] for w in widths), widths
    screenshot(phone, "42-metrics-compare-phone")
    phone.locator("#metrics").screenshot(
        path=str(SCREENSHOTS / "43-metrics-compare-phone-charts.png")
    )
    assert errors == []
