"""Distributed training from the browser, on the two-node dev cluster: the data-parallel
demo launched from the form runs 2 × 2 MPI ranks on both nodes, its page shows where each
rank ran and per-rank charts, and the rank panel names a deliberately slowed rank."""

import pytest

from devtools import demo_catalog
from jobs.models import Job
from tests.e2e.pages import fill_launch_form, page_errors, press_launch, sign_in

# The file takes every GPU (two nodes, two each): it runs while no other Slurm test does
# (tests/conftest.py).
pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True), pytest.mark.alone]

# Ranks that do not wait for each other; rank 1 is four times slower.
UNSYNCED = """python3 - <<'EOF'
import os, time, portal_metrics as pm
rank = int(os.environ["RANK"])
for step in range(400):
    pm.log(step=step, loss=1.0 / (step + 1))
    time.sleep(0.2 if rank == 1 else 0.05)
EOF"""


def test_the_data_parallel_demo_runs_on_both_nodes_from_the_form(browser, stack, owner, screenshot):
    demo_catalog.load()
    page = sign_in(browser, stack, "owner", "owner-pass-123")
    errors = page_errors(page)
    page.goto(f"{stack.url}/launch/")
    page.get_by_text("Data-parallel digits").click()
    # The catalog entry brings its launcher and layout with its command.
    assert page.get_by_label("MPI: mpirun").is_checked()
    assert page.get_by_label("Nodes", exact=True).input_value() == "2"
    assert page.get_by_label("Tasks per node").input_value() == "2"
    assert page.get_by_label("Command", exact=True).input_value().startswith("train-digits-mpi")
    page.get_by_label("Partition").select_option(label="cpu")
    summary = page.locator("[data-layout-summary]")
    assert summary.text_content().startswith("2 nodes × 2 tasks = 4 processes; mpirun starts 4")
    screenshot(page, "60-launch-distributed")
    job_id = press_launch(page, stack)

    # Where each rank runs, live: four ranks on the two nodes.
    panel = page.locator("[data-ranks-panel]")
    panel.wait_for(state="visible", timeout=90_000)
    page.wait_for_function(
        "() => document.querySelectorAll('[data-ranks-panel] tbody tr').length === 4",
        timeout=60_000,
    )
    nodes = [
        page.locator(f'[data-ranks-panel] tr[data-rank="{r}"] td').nth(1).text_content()
        for r in range(4)
    ]
    assert nodes == ["node1", "node1", "node2", "node2"]
    assert "4 ranks on 2 nodes (node1, node2)" in panel.text_content()

    # Per-rank charts: every rank, one rank, or a band across them.
    ranks = page.get_by_label("Ranks")
    ranks.wait_for(state="visible")
    page.wait_for_function(
        "() => { const d = document.querySelector('.chart[data-figure=\"loss\"] div').data;"
        " return d && d.length === 4; }",
        timeout=30_000,
    )
    ranks.select_option("rank:2")
    page.wait_for_function(
        "() => document.querySelector('.chart[data-figure=\"loss\"] div').data.length === 1"
    )
    assert "[rank 2]" in page.evaluate(
        "() => document.querySelector('.chart[data-figure=\"loss\"] div').data[0].name"
    )
    ranks.select_option("band")
    page.wait_for_function(
        "() => { const d = document.querySelector('.chart[data-figure=\"loss\"] div').data;"
        " return d.length === 3 && d[1].fill === 'tonexty' && /mean of 4 ranks/.test(d[2].name); }"
    )
    screenshot(page, "61-distributed-band")
    ranks.select_option("all")

    page.locator("[data-badge]", has_text="Completed").wait_for(timeout=180_000)
    assert page.locator("[data-node]").text_content() == "node1, node2"
    page.get_by_role("button", name="Refresh").click()
    page.locator("[data-log]", has_text="accuracy check: passed").wait_for(timeout=20_000)
    screenshot(page, "62-distributed-job-page")
    job = Job.objects.get(pk=job_id)
    assert (job.nodes, job.tasks_per_node, job.launcher) == (2, 2, "mpi")
    # The dashboard's row says how the job was laid out, and where it ran.
    page.goto(f"{stack.url}/")
    row = page.locator(f'tr[data-job-id="{job_id}"]')
    assert row.locator("[data-shape]").text_content() == "2×2"
    assert row.locator("[data-nodes]").text_content() == "node1, node2"
    assert errors == []


def test_the_rank_panel_names_a_slowed_rank_live(browser, stack, owner, screenshot):
    demo_catalog.load()
    page = sign_in(browser, stack, "owner", "owner-pass-123")
    errors = page_errors(page)
    fill_launch_form(page, stack, "Python 3 (host environment)", "Batch command", UNSYNCED)
    page.get_by_label("MPI: mpirun").check()
    page.get_by_label("Nodes", exact=True).fill("2")
    page.get_by_label("Tasks per node").fill("1")
    job_id = press_launch(page, stack)
    straggler = page.locator("[data-ranks-panel] tr.straggler")
    straggler.wait_for(timeout=120_000)
    assert straggler.get_attribute("data-rank") == "1"
    assert (
        page.locator("[data-straggler]").text_content().startswith("Rank 1 on node2 is the slowest")
    )
    screenshot(page, "63-rank-panel-straggler")
    page.get_by_role("button", name="Cancel job").click()
    page.locator("#cancel-dialog").get_by_role("button", name="Cancel job").click()
    page.locator("[data-badge]", has_text="Cancelled").wait_for(timeout=60_000)
    assert Job.objects.get(pk=job_id).state == "cancelled"
    assert errors == []


def test_a_request_bigger_than_the_partition_is_refused_before_submission(browser, stack, owner):
    demo_catalog.load()
    page = sign_in(browser, stack, "owner", "owner-pass-123")
    fill_launch_form(page, stack, "Python 3 (host environment)", "Batch command", "hostname", "gpu")
    page.get_by_label("MPI: mpirun").check()
    # The page knows the partition's shape: 2 nodes of 2 GPUs.
    page.get_by_label("Nodes", exact=True).fill("3")
    page.get_by_label("GPUs per node").fill("3")
    before = Job.objects.count()
    page.get_by_role("button", name="Launch").click()
    assert page.locator(".client-error").all_text_contents() == [
        "At most 2 here.",
        "At most 2 here.",
    ]
    # Past the page's own check (a script, an old page), the portal refuses and says why.
    page.evaluate(
        "() => document.querySelectorAll('input[type=number]').forEach((i) => i.removeAttribute('max'))"
    )
    page.get_by_role("button", name="Launch").click()
    page.locator(".field.invalid").first.wait_for()
    text = page.locator("form#launch-form").text_content()
    assert "Partition gpu allows at most 2 node(s) per job." in text
    assert "A node of partition gpu has at most 2 GPU(s)." in text
    assert Job.objects.count() == before
