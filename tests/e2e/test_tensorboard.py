"""TensorBoard without an SSH tunnel: a TensorBoard session started through Slurm on the
dev cluster, opened in Chromium through HAProxy for its owner only, showing a scalar
written with TensorBoard's own summary writer."""

import secrets

import pytest

from jobs.models import ClusterAccount, ContainerImage, Job
from jobs.slurm import operations
from proxy.models import Session
from tests.devcluster.test_tensorboard import PYTHON, WRITE_EVENTS
from tests.e2e.conftest import sign_in

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]


def test_owner_opens_tensorboard_through_the_data_path(
    tls_browser, stack, owner, outsider, devcluster, screenshot
):
    ContainerImage.objects.create(
        name="TensorBoard (host)",
        slug="tensorboard-host",
        runtime="none",
        offers_notebook=False,
        offers_batch=False,
        offers_tensorboard=True,
    )
    folder = f"portal-test-{secrets.token_hex(3)}"
    account = ClusterAccount.for_user(devcluster, owner)
    home = devcluster.workdir_root("home", account.username)
    operations.on_account(
        account, lambda conn: conn.run([PYTHON, "-c", WRITE_EVENTS, f"{home}/{folder}/digits"])
    )
    try:
        page = sign_in(tls_browser, stack, "owner", "owner-pass-123")
        page.goto(f"{stack.url}/launch/")
        page.get_by_text("TensorBoard (host)").click()
        page.get_by_label("TensorBoard session").check()
        page.get_by_label("Partition").select_option(label="cpu")
        page.get_by_label("Folder").fill(folder)
        page.get_by_role("button", name="Launch").click()
        page.wait_for_url(f"{stack.url}/jobs/*/")
        job = Job.objects.get()
        assert job.kind == "tensorboard" and job.notebook_dir == folder
        open_link = page.locator("#session [data-open-session]")
        open_link.wait_for(state="visible", timeout=120_000)
        assert open_link.inner_text() == "Open TensorBoard"
        session = Session.objects.get(job=job)

        with page.context.expect_page() as new_tab:
            open_link.click()
        board = new_tab.value
        board.wait_for_url(
            f"https://{session.public_id}.sessions.localhost:{stack.proxy_port}/**",
            timeout=60_000,
        )
        try:  # the scalar's card, with the run it came from
            board.get_by_text("loss", exact=True).first.wait_for(timeout=60_000)
            board.get_by_text("digits").first.wait_for(timeout=30_000)
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
        assert "loss" not in other.content()
    finally:
        for job in Job.objects.filter(state__in=Job.ACTIVE_STATES):
            if job.request_cancel():
                job.enqueue_cancel()
        operations.on_account(
            account, lambda conn: conn.run(["rm", "-rf", "--", f"{home}/{folder}"])
        )
