"""A transfer in Chromium, on the served stack (its Celery worker and beat) and the dev
cluster: a WebDAV remote added on the Remotes page (a real one: ``rclone serve webdav``),
a folder copied to it from the file manager, its progress moving on the transfer's page
while rclone runs (the cluster's flags hold it to 1 MiB/s), then done, with the person
told in the portal."""

import hashlib
import os
import secrets

import pytest

from clusters.models import ClusterAccount
from files.models import Transfer
from notifications.models import Notification
from tests.devcluster.helpers import remote
from tests.e2e.pages import page_errors, sign_in
from tests.livestack import LiveStack

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def quick_stack(filecluster, tmp_path):
    live = LiveStack(tmp_path, env={"PORTAL_TRANSFER_POLL_INTERVAL": "0.5"}).start()
    yield live
    live.stop()


def test_a_folder_copied_to_a_remote_with_its_progress_live(
    browser, quick_stack, filecluster, owner, webdav, tmp_path, screenshot
):
    stack = quick_stack
    filecluster.transfer_flags = "--bwlimit 1M"
    filecluster.save()
    account = ClusterAccount.for_user(filecluster, owner)
    home = filecluster.work_dir_root("home", account.username)
    folder = f"portal-xfer-{secrets.token_hex(3)}"
    remote(
        account,
        [
            "sh",
            "-c",
            f"set -e; mkdir -p {home}/{folder}/sub; cd {home}/{folder}; "
            "head -c 5000000 /dev/urandom > model.pt; printf 'x' > sub/notes.txt",
        ],
    )
    try:
        page = sign_in(browser, stack, "owner", "owner-pass-123")
        errors = page_errors(page)
        page.goto(f"{stack.url}/remotes/")
        page.locator("details", has_text="WebDAV server").locator("summary").click()
        form = page.locator("form[data-add-remote=webdav]")
        form.get_by_label("Name", exact=True).fill("labdav")
        form.get_by_label("URL").fill(webdav.url)
        form.get_by_label("User name").fill(webdav.user)
        form.get_by_label("Password").fill(webdav.password)
        form.get_by_role("button", name="Add").click()
        page.locator("tr[data-remote=labdav]").wait_for()
        assert webdav.password not in page.content()

        page.goto(f"{stack.url}/files/{filecluster.name}/home/?path={folder}")
        page.locator("a[data-transfer]").click()
        page.get_by_label("Path on the remote").fill("from-cluster")
        page.get_by_role("button", name="Start").click()
        panel = page.locator("[data-transfer-panel]")
        panel.wait_for()
        # Progress moves on the page while rclone runs: some bytes, not all.
        page.wait_for_function(
            """() => { const p = document.querySelector('[data-transfer-panel]');
                       const n = Number(p.dataset.bytes || 0);
                       return p.dataset.state === 'running' && n > 0 && n < 5000001; }""",
            timeout=60_000,
        )
        screenshot(page, "75-transfer-running")
        page.wait_for_function(
            "() => document.querySelector('[data-transfer-panel]').dataset.state === 'done'",
            timeout=60_000,
        )
        assert "Copied 2 files" in panel.inner_text()
        timeline = page.locator("[data-transfer-events] li").all_inner_texts()
        assert len(timeline) == 3 and "Started on" in timeline[1]
        screenshot(page, "76-transfer-done")

        local = hashlib.sha256((webdav.root / "from-cluster" / "model.pt").read_bytes())
        there = remote(account, ["sha256sum", f"{home}/{folder}/model.pt"]).split()[0]
        assert local.hexdigest() == there
        assert os.path.exists(webdav.root / "from-cluster" / "sub" / "notes.txt")
        transfer = Transfer.objects.get(owner=owner)
        assert transfer.state == Transfer.State.DONE
        assert Notification.objects.filter(recipient=owner, event="transfer_done").count() == 1
        page.goto(f"{stack.url}/notifications/")
        assert "labdav:from-cluster" in page.content() and "finished" in page.content()
        assert errors == []
    finally:
        remote(account, ["rm", "-rf", "--", f"{home}/{folder}"])


def test_the_cli_copies_a_folder_and_follows_it_to_its_end(
    quick_stack, filecluster, owner, webdav, tmp_path
):
    """`portal transfer start CLUSTER home:FOLDER NAME:PATH --wait` on the served stack:
    the copy runs on the cluster, the command follows it and exits 0 when it is done."""
    import subprocess
    import sys
    from pathlib import Path

    from files.models import Remote
    from identity.tokens import ApiToken

    account = ClusterAccount.for_user(filecluster, owner)
    home = filecluster.work_dir_root("home", account.username)
    folder = f"portal-xfer-cli-{secrets.token_hex(3)}"
    remote(account, ["sh", "-c", f"mkdir -p {home}/{folder} && echo hi > {home}/{folder}/a.txt"])
    dav = Remote(owner=owner, name="clidav", kind="webdav")
    dav.options = {"url": webdav.url, "user": webdav.user, "vendor": "other"}
    dav.set_secret(webdav.password)
    dav.save()
    _, token = ApiToken.issue(owner, "cli")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PORTAL_URL": quick_stack.url}
    env["PORTAL_TOKEN"] = token
    portal = str(Path(sys.executable).parent / "portal")

    def run(*argv):
        return subprocess.run([portal, *argv], env=env, capture_output=True, text=True, timeout=120)

    try:
        listed = run("remotes")
        assert listed.returncode == 0 and "clidav" in listed.stdout, listed.stderr
        done = run("transfer", "start", filecluster.name, f"home:{folder}", "clidav:cli", "-w")
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert "done. Copied 1 file" in done.stdout
        assert (webdav.root / "cli" / "a.txt").read_text() == "hi\n"
        pk = Transfer.objects.get(owner=owner).pk
        shown = run("transfer", "show", str(pk))
        assert "Started on" in shown.stdout and f"home:{folder}" in shown.stdout
        assert str(pk) in run("transfer", "list").stdout
        missing = run("transfer", "cancel", "999999")
        assert missing.returncode != 0 and "No transfer 999999" in missing.stderr
    finally:
        remote(account, ["rm", "-rf", "--", f"{home}/{folder}"])
