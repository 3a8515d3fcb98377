"""TensorBoard without an SSH tunnel: the digits demo job runs through Slurm and writes
its scalars with TensorBoard's own writer; "TensorBoard" on its page starts a TensorBoard
session on its runs, which Chromium opens through HAProxy for its owner only."""

import pytest

from jobs import lifecycle
from jobs.models import Job
from proxy.models import SessionLink
from tests import factories
from tests.e2e.pages import launch, sign_in

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]


def test_owner_opens_tensorboard_on_a_demo_jobs_runs_through_the_data_path(
    tls_browser, stack, owner, outsider, devcluster, screenshot
):
    factories.image(
        "digits-host",
        "Digits (host)",
        offers_notebook=False,
        offers_batch=True,
        offers_tensorboard=True,
        default_command="train-digits --epochs 2 --delay 0",
    )
    page = sign_in(tls_browser, stack, "owner", "owner-pass-123")
    try:
        launch(page, stack, "Digits (host)", "Batch command")
        training = Job.objects.get()
        page.locator("#job [data-badge]", has_text="Completed").wait_for(timeout=120_000)

        # Its page offers TensorBoard on its runs: the launch form comes filled in.
        page.get_by_role("link", name="TensorBoard", exact=True).click()
        page.wait_for_url(f"{stack.url}/launch/?tensorboard_for={training.pk}")
        assert page.get_by_label("TensorBoard session").is_checked()
        training.refresh_from_db()
        folder = training.work_dir.split("/.portal/", 1)[1]
        assert page.get_by_label("Folder", exact=True).input_value() == f".portal/{folder}"
        page.get_by_label("Partition").select_option(label="cpu")
        page.get_by_role("button", name="Launch").click()
        page.wait_for_url(f"{stack.url}/jobs/*/")
        board_job = Job.objects.exclude(pk=training.pk).get()
        assert (board_job.kind, board_job.gpus) == ("tensorboard", 0)
        open_link = page.locator("#session [data-open-session]")
        open_link.wait_for(state="visible", timeout=120_000)
        assert open_link.inner_text() == "Open TensorBoard"
        session = SessionLink.objects.get(job=board_job)

        with page.context.expect_page() as new_tab:
            open_link.click()
        board = new_tab.value
        board.wait_for_url(
            f"https://{session.public_id}.sessions.localhost:{stack.proxy_port}/**",
            timeout=60_000,
        )
        try:  # the demo's scalars, from the run it wrote (./tensorboard in its directory)
            board.get_by_text("val_accuracy", exact=True).first.wait_for(timeout=60_000)
            board.get_by_text("tensorboard", exact=True).first.wait_for(timeout=30_000)
        except Exception:
            screenshot(board, "31-tensorboard-failed")
            print(stack.logs())
            raise
        screenshot(board, "30-tensorboard")

        # Another signed-in user: the portal shows them nothing, the link sends them there.
        other = sign_in(tls_browser, stack, "outsider", "outsider-pass-123")
        assert other.goto(f"{stack.url}/sessions/{session.public_id}/open/").status == 404
        url = f"https://{session.public_id}.sessions.localhost:{stack.proxy_port}/"
        assert other.goto(url).status == 404
        assert "val_accuracy" not in other.content()
    finally:
        for job in Job.objects.filter(state__in=Job.ACTIVE_STATES):
            lifecycle.cancel(job)
