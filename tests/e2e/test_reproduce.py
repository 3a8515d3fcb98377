"""A run's tags, note and Reproduce block in Chromium on the served stack, and "Launch again"
sending the same command and parameters."""

import pytest

from jobs.models import Job
from tests import factories
from tests.e2e.pages import page_errors, sign_in

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def test_tags_note_reproduce_and_launch_again(browser, stack, devcluster, owner, screenshot):
    job = factories.job(
        owner,
        devcluster,
        "python3 -c 'import os; print(os.environ[\"PORTAL_PARAM_LR\"])'",
        name="lr sweep",
        state="completed",
        params={"lr": 0.01, "seed": 3},
        keep_diff=True,
        reproduce={
            "image": {"runtime": "none", "location": "", "identity": "host"},
            "git": {
                "folder": "/home/hpcuser/proj",
                "commit": COMMIT,
                "branch": "main",
                "modified": True,
                "changed": 1,
                "untracked": 0,
                "diff_bytes": 22,
                "diff_truncated": False,
            },
        },
        git_diff="-lr = 0.1\n+lr = 0.01\n",
    )
    page = sign_in(browser, stack, "owner", "owner-pass-123")
    errors = page_errors(page)
    page.goto(f"{stack.url}/jobs/{job.pk}/")

    # Tags: add two, remove one; the note: saved, still there after a reload.
    page.get_by_label("Add tags").fill("resnet seed=3")
    page.get_by_role("button", name="Add", exact=True).click()
    page.locator('[data-tag="seed=3"]').wait_for()
    page.get_by_role("button", name="Remove tag resnet").click()
    page.locator('[data-tag="resnet"]').wait_for(state="detached")
    page.get_by_label("Note", exact=True).fill("lr 0.01 converges; try seed 4")
    with page.expect_navigation():  # the form posts and comes back: then reload
        page.get_by_role("button", name="Save note").click()
    page.reload()
    assert page.get_by_label("Note", exact=True).input_value() == "lr 0.01 converges; try seed 4"
    assert page.locator("[data-tags] [data-tag]").all_text_contents()[0].startswith("seed=3")
    job.refresh_from_db()
    assert job.tag_names == ["seed=3"] and job.notes == "lr 0.01 converges; try seed 4"

    # The Reproduce block: the image, the commit and "modified", the parameters, the diff.
    block = page.locator("#reproduce")
    assert COMMIT in block.locator("[data-commit]").inner_text()
    assert block.locator("[data-modified]").inner_text() == "modified"
    assert block.locator("[data-repro-params]").inner_text() == "lr=0.01 seed=3"
    assert "host environment" in block.locator("[data-repro-image]").inner_text()
    block.locator("[data-diff] summary").click()
    assert "+lr = 0.01" in block.locator("[data-diff] pre").inner_text()
    screenshot(page, "job-reproduce")

    # "Launch again": the same command and parameters, prefilled, launched unchanged.
    block.locator("[data-launch-again]").click()
    page.wait_for_url(f"{stack.url}/launch/?from={job.pk}")
    assert page.get_by_label("Command", exact=True).input_value() == job.command
    assert page.get_by_label("Parameters").input_value() == "lr=0.01\nseed=3"
    assert page.get_by_label("Tags").input_value() == "seed=3"
    assert COMMIT[:12] in page.locator("[data-reproduced-from]").inner_text()
    screenshot(page, "launch-again-prefilled")
    page.get_by_role("button", name="Launch").click()
    page.wait_for_url(f"{stack.url}/jobs/*/")
    again = Job.objects.get(pk=int(page.url.rstrip("/").split("/")[-1]))
    assert again.pk != job.pk
    assert (again.command, again.params, again.keep_diff) == (job.command, job.params, True)
    assert again.tag_names == ["seed=3"]
    assert errors == []
