"""The file manager in Chromium, on the served stack and the dev cluster: a file and a
folder uploaded from the page with the tus client in 1 MiB chunks, each file's sha256
computed on the cluster shown on the page and equal to the local one; then a rename, a
move and a delete with its confirmation, each in the audit log."""

import hashlib
import os
import secrets

import pytest

from clusters.models import ClusterAccount
from identity.audit.models import AuditEvent
from tests.devcluster.helpers import remote
from tests.e2e.pages import page_errors, sign_in
from tests.livestack import LiveStack

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def chunked_stack(filecluster, tmp_path):
    live = LiveStack(tmp_path, env={"PORTAL_UPLOAD_CHUNK_BYTES": str(1024 * 1024)}).start()
    yield live
    live.stop()


def test_a_file_and_a_folder_upload_from_the_page_with_their_sha256(
    browser, chunked_stack, filecluster, owner, tmp_path, screenshot
):
    stack = chunked_stack
    account = ClusterAccount.for_user(filecluster, owner)
    home = filecluster.work_dir_root("home", account.username)
    folder = f"portal-upload-{secrets.token_hex(3)}"
    remote(account, ["mkdir", "-p", f"{home}/{folder}"])
    big = tmp_path / "weights.bin"
    big.write_bytes(os.urandom(5 * 1024 * 1024 + 7))
    tree = tmp_path / "dataset"
    for i in range(40):
        (tree / f"part{i % 4}").mkdir(parents=True, exist_ok=True)
        (tree / f"part{i % 4}" / f"sample-{i}.txt").write_text(f"sample {i}\n" * (i + 1))
    try:
        page = sign_in(browser, stack, "owner", "owner-pass-123")
        errors = page_errors(page)
        page.goto(f"{stack.url}/files/{filecluster.name}/home/?path={folder}")
        page.locator("[data-upload-files]").set_input_files(str(big))
        done = page.locator("li.upload[data-done]")
        done.first.wait_for(timeout=120_000)
        assert done.first.get_attribute("data-done") == "ok", done.first.inner_text()
        local = hashlib.sha256(big.read_bytes()).hexdigest()
        assert done.first.get_attribute("data-sha256") == local
        assert local in done.first.inner_text()
        on_cluster = remote(account, ["sha256sum", "--", f"{home}/{folder}/weights.bin"])
        assert on_cluster.split()[0] == local

        page.locator("[data-upload-folder]").set_input_files(str(tree))
        page.wait_for_function(
            "() => document.querySelectorAll('li.upload[data-done]').length === 41",
            timeout=180_000,
        )
        failed = page.locator("li.upload[data-done=failed]")
        assert failed.count() == 0, failed.all_inner_texts()
        screenshot(page, "70-file-manager-uploads")
        listing = remote(
            account, ["sh", "-c", f"cd {home}/{folder} && find dataset -type f | sort"]
        )
        assert len(listing.split()) == 40
        sample = remote(account, ["cat", f"{home}/{folder}/dataset/part3/sample-7.txt"])
        assert sample == "sample 7\n" * 8

        # Rename, move and delete (with its confirmation) from the page.
        page.goto(f"{stack.url}/files/{filecluster.name}/home/?path={folder}")
        row = page.locator("tr[data-name='weights.bin']")
        row.locator("summary", has_text="Rename or move").click()
        row.get_by_label("Name").fill("model.bin")
        row.get_by_role("button", name="Move").click()
        page.get_by_text("Moved to").wait_for()
        row = page.locator("tr[data-name='model.bin']")
        row.locator("summary", has_text="Rename or move").click()
        row.get_by_label("Into folder").fill(f"{folder}/dataset")
        row.get_by_role("button", name="Move").click()
        page.get_by_text("Moved to").wait_for()
        assert page.locator("tr[data-name='model.bin']").count() == 1  # now in dataset/
        page.locator("tr[data-name='part0']").get_by_role("button", name="Delete…").click()
        survey = page.locator("[data-survey]")
        assert "10 files" in survey.inner_text() and "1 folder" in survey.inner_text()
        page.locator("[data-confirm-delete]").click()
        page.get_by_text("Deleted").wait_for()
        assert page.locator("tr[data-name='part0']").count() == 0
        left = remote(account, ["sh", "-c", f"cd {home}/{folder} && ls -A . dataset"])
        assert "weights.bin" not in left and "model.bin" in left and "part0" not in left
        done = AuditEvent.objects.filter(user=owner, outcome="ok")
        assert done.filter(action="file_rename").count() == 2
        assert done.filter(action="file_delete").count() == 1
        assert done.filter(action="file_upload").count() >= 2 * 41  # a start and bytes each
        assert errors == []
    finally:
        remote(account, ["rm", "-rf", "--", f"{home}/{folder}"])


def test_an_upload_whose_request_stalls_is_started_again(
    browser, chunked_stack, filecluster, owner, tmp_path
):
    """A request that never answers (a connection lost without a reset) held its upload's
    place in the queue for good: the page starts such an upload again from what the
    portal has (here after 2 s of silence, set on the panel; a minute by default)."""
    stack = chunked_stack
    account = ClusterAccount.for_user(filecluster, owner)
    home = filecluster.work_dir_root("home", account.username)
    folder = f"portal-stall-{secrets.token_hex(3)}"
    remote(account, ["mkdir", "-p", f"{home}/{folder}"])
    data = tmp_path / "stalled.bin"
    data.write_bytes(os.urandom(1024 * 1024 + 3))
    held = []

    def hold_the_first_patch(route):
        if route.request.method == "PATCH" and not held:
            held.append(route)  # never answered: the request hangs
            return
        route.continue_()

    try:
        page = sign_in(browser, stack, "owner", "owner-pass-123")
        page.goto(f"{stack.url}/files/{filecluster.name}/home/?path={folder}")
        page.route("**/uploads/**", hold_the_first_patch)
        page.evaluate("document.querySelector('[data-endpoint]').dataset.stallMs = '2000'")
        page.locator("[data-upload-files]").set_input_files(str(data))
        done = page.locator("li.upload[data-done]")
        done.first.wait_for(timeout=60_000)
        assert done.first.get_attribute("data-done") == "ok", done.first.inner_text()
        assert len(held) == 1
        local = hashlib.sha256(data.read_bytes()).hexdigest()
        assert done.first.get_attribute("data-sha256") == local
    finally:
        remote(account, ["rm", "-rf", "--", f"{home}/{folder}"])
