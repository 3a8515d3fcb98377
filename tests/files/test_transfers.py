"""Transfers on the real path: rclone started by the portal on the dev cluster as the
person, copying to and from a real remote (Debian's ``rclone serve webdav`` on 127.0.0.1),
watched through its JSON log, told by mail at the end, and cancelled by stopping it on the
cluster. The tasks run in this process (the served stack's beat does the same looks in
tests/e2e/test_transfers.py)."""

from __future__ import annotations

import hashlib
import os
import secrets

import pytest

from clusters.models import ClusterAccount
from files import transfers
from files.models import Remote, Transfer
from identity.audit.models import AuditEvent
from notifications.models import Notification
from tests import mailbox as mailbox_mod
from tests.devcluster.helpers import remote
from tests.polling import until

pytestmark = [
    pytest.mark.devcluster,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("eager"),  # no start task left in the broker for another worker
]


def _drive(transfer: Transfer, until_state=Transfer.ACTIVE, timeout=60) -> Transfer:
    """Start it and look at it as the beat would, until it leaves ``until_state``."""
    transfer.refresh_from_db()
    transfers.start(transfer)

    def over():
        transfer.refresh_from_db()
        transfers.poll(transfer)
        transfer.refresh_from_db()
        return transfer.state not in until_state and transfer

    return until(over, timeout, lambda: f"transfer {transfer.pk} to end ({transfer.state})")


@pytest.fixture
def home_folder(filecluster, owner):
    account = ClusterAccount.for_user(filecluster, owner)
    home = filecluster.work_dir_root("home", account.username)
    folder = f"portal-xfer-{secrets.token_hex(3)}"
    remote(
        account,
        [
            "sh",
            "-c",
            f"set -e; mkdir -p {home}/{folder}/data/sub; cd {home}/{folder}/data; "
            "head -c 3000000 /dev/urandom > weights.bin; printf 'x\\n' > 'sub/a b.txt'",
        ],
    )
    yield account, home, folder
    remote(account, ["rm", "-rf", "--", f"{home}/{folder}"])


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.mail
def test_a_folder_goes_to_a_webdav_remote_and_comes_back(
    filecluster, owner, home_folder, webdav, mailbox
):
    account, home, folder = home_folder
    owner.email = mailbox_mod.address("owner-xfer")
    owner.save()
    dav = Remote(owner=owner, name="mydav", kind="webdav")
    dav.options = {"url": webdav.url, "user": webdav.user, "vendor": "other"}
    dav.set_secret(webdav.password)
    dav.save()
    assert webdav.password not in dav.secret_encrypted

    out = transfers.ask(
        owner, filecluster, dav, "to_remote", "home", f"{folder}/data", "incoming/run1"
    )
    done = _drive(out)
    assert done.state == Transfer.State.DONE, done.message
    served = webdav.root / "incoming" / "run1"
    assert (served / "sub" / "a b.txt").read_text() == "x\n"
    on_cluster = remote(account, ["sha256sum", f"{home}/{folder}/data/weights.bin"]).split()[0]
    assert _digest(served / "weights.bin") == on_cluster
    assert (done.files_done, done.total_files) == (2, 2)
    assert done.bytes == done.total_bytes == 3_000_002
    assert done.message.startswith("Copied 2 files")
    texts = list(done.events.values_list("text", flat=True))
    assert texts[0].startswith("Asked for: copy home:") and texts[1].startswith("Started on")
    # Its state folder (the config with the obscured password in it) is gone.
    left = remote(account, ["sh", "-c", f"ls -A {home}/.portal/transfers/ 2>/dev/null || true"])
    # (named by its own state folder: ids start again with each test database, and
    # other runs' folders may be there)
    assert done.state_dir and done.state_dir.rsplit("/", 1)[1] not in left.split(), left
    assert AuditEvent.objects.filter(action="transfer_start", outcome="ok").count() == 1
    told = Notification.objects.get(recipient=owner, event="transfer_done")
    assert "finished" in told.text and "mydav:incoming/run1" in told.text
    (mail,) = mailbox.wait_for(owner.email)
    assert "mydav:incoming/run1" in mail.get_content() and "finished" in mail.get_content()

    back = transfers.ask(
        owner, filecluster, dav, "from_remote", "home", f"{folder}/back", "incoming"
    )
    done = _drive(back)
    assert done.state == Transfer.State.DONE, done.message
    copied = remote(account, ["sha256sum", f"{home}/{folder}/back/run1/weights.bin"]).split()[0]
    assert copied == on_cluster


def test_a_wrong_password_fails_with_rclones_reason(filecluster, owner, home_folder, webdav):
    _account, _home, folder = home_folder
    dav = Remote(
        owner=owner, name="baddav", kind="webdav", options={"url": webdav.url, "user": webdav.user}
    )
    dav.set_secret("not-the-password")
    dav.save()
    failed = _drive(transfers.ask(owner, filecluster, dav, "to_remote", "home", folder, "x"))
    assert failed.state == Transfer.State.FAILED
    assert "401" in failed.message or "Unauthorized" in failed.message, failed.message
    assert Notification.objects.filter(recipient=owner, event="transfer_failed").count() == 1


def test_cancel_stops_rclone_on_the_cluster(filecluster, owner, home_folder, webdav):
    account, home, folder = home_folder
    remote(account, ["sh", "-c", f"head -c 30000000 /dev/zero > {home}/{folder}/data/big.bin"])
    filecluster.transfer_flags = "--bwlimit 2M"
    filecluster.save()
    dav = Remote(
        owner=owner, name="slowdav", kind="webdav", options={"url": webdav.url, "user": webdav.user}
    )
    dav.set_secret(webdav.password)
    dav.save()
    transfer = transfers.ask(owner, filecluster, dav, "to_remote", "home", f"{folder}/data", "slow")
    transfer.refresh_from_db()
    transfers.start(transfer)

    def moving():
        transfers.poll(transfer)
        transfer.refresh_from_db()
        return transfer.bytes > 0 and transfer

    until(moving, 30, "bytes moving")
    assert transfer.state == Transfer.State.RUNNING and transfer.bytes < transfer.total_bytes
    pid = int(remote(account, ["cat", f"{transfer.state_dir}/pid"]))
    group = remote(account, ["ps", "-o", "comm=", "-g", str(pid)]).split()
    assert "rclone" in group

    transfers.cancel(transfer, owner)
    transfer.refresh_from_db()
    until(
        lambda: (transfers.poll(transfer), transfer.refresh_from_db(), transfer.is_final)[2],
        20,
        "the cancel seen",
    )
    assert transfer.state == Transfer.State.CANCELLED, transfer.message
    alive = remote(account, ["sh", "-c", f"ps -o stat=,comm= -g {pid} | grep -v '^Z' || true"])
    assert "rclone" not in alive
    assert not Notification.objects.filter(recipient=owner, event__startswith="transfer").exists()
    assert AuditEvent.objects.filter(action="transfer_cancel", outcome="ok").count() == 1


def test_a_transfer_stays_inside_the_roots(filecluster, owner, outsider, home_folder, webdav):
    account, home, folder = home_folder
    remote(account, ["ln", "-s", "/etc", f"{home}/{folder}/etc-link"])
    dav = Remote.objects.create(owner=owner, name="d", kind="webdav", options={"url": webdav.url})
    with pytest.raises(transfers.Refused, match="inside"):
        transfers.ask(owner, filecluster, dav, "to_remote", "home", "../x", "y")
    with pytest.raises(transfers.Refused, match="'..'"):
        transfers.ask(owner, filecluster, dav, "to_remote", "home", folder, "a/../../b")
    with pytest.raises(transfers.Refused, match="control"):
        transfers.ask(owner, filecluster, dav, "from_remote", "home", "new\nline", "y")
    with pytest.raises(transfers.Refused, match="no folder"):
        transfers.ask(owner, filecluster, dav, "to_remote", "etc", "", "y")
    # Through a link: refused on the cluster before rclone starts.
    failed = _drive(
        transfers.ask(owner, filecluster, dav, "to_remote", "home", f"{folder}/etc-link", "y")
    )
    assert failed.state == Transfer.State.FAILED and "link" in failed.message
    # Someone else's remote is not theirs to use.
    theirs = Remote.objects.create(
        owner=outsider, name="theirs", kind="webdav", options={"url": webdav.url}
    )
    with pytest.raises(transfers.Refused, match="not one you can use"):
        transfers.ask(owner, filecluster, theirs, "to_remote", "home", folder, "y")
    assert not os.listdir(webdav.root)


def test_the_api_starts_follows_and_cancels_a_persons_own_transfers(
    filecluster, owner, outsider, home_folder, webdav
):
    """/api/v1/transfers/ (what `curl` or a script uses): a real copy to the WebDAV remote
    started and followed through the API; another person sees none of it; names no one
    has, roots no one has and paths out of a root are refused before anything starts."""
    from tests.factories import api_client

    account, home, folder = home_folder
    dav = Remote(owner=owner, name="apidav", kind="webdav")
    dav.options = {"url": webdav.url, "user": webdav.user, "vendor": "other"}
    dav.set_secret(webdav.password)
    dav.save()
    api = api_client(owner)

    listed = api.get("/api/v1/remotes/").json()
    assert listed == [{"name": "apidav", "kind": "webdav", "site": False, "cluster": None}]
    asked = {
        "cluster": filecluster.name,
        "root": "home",
        "path": f"{folder}/data",
        "remote": "apidav",
        "remote_path": "from-api",
        "direction": "to_remote",
    }
    made = api.post("/api/v1/transfers/", asked, format="json")
    assert made.status_code == 201, made.content
    pk = made.json()["id"]
    assert made.json()["what"] == f"copy home:{folder}/data to apidav:from-api"
    transfer = Transfer.objects.get(pk=pk)  # started by the task (eager here)
    assert transfer.state_dir, transfer.message

    def over():
        transfers.poll(transfer)
        shown = api.get(f"/api/v1/transfers/{pk}/").json()
        return shown["final"] and shown

    shown = until(over, 60, "the transfer's end through the API")
    assert shown["state"] == "done" and shown["percent"] == 100, shown
    assert (shown["files"], shown["bytes"]) == (2, 3_000_002)
    assert shown["events"][0]["text"].startswith("Asked for:")
    assert (webdav.root / "from-api" / "sub" / "a b.txt").read_text() == "x\n"
    assert api.get("/api/v1/transfers/").json()["results"][0]["id"] == pk

    # Another person: not listed, not found, not cancellable; and not their remote.
    theirs = api_client(outsider)
    assert theirs.get("/api/v1/transfers/").json()["results"] == []
    assert theirs.get(f"/api/v1/transfers/{pk}/").status_code == 404
    assert theirs.post(f"/api/v1/transfers/{pk}/cancel/").status_code == 404
    assert theirs.get("/api/v1/remotes/").json() == []
    refused = theirs.post("/api/v1/transfers/", asked, format="json")
    assert refused.status_code in (400, 404) and Transfer.objects.count() == 1

    # Refused with a sentence, nothing started.
    for change, status, words in [
        ({"remote": "nosuch"}, 400, "has that name"),
        ({"path": "../x"}, 400, "inside"),
        ({"root": "etc"}, 404, "no folder"),
        ({"direction": "sideways"}, 400, "valid choice"),
    ]:
        answer = api.post("/api/v1/transfers/", {**asked, **change}, format="json")
        assert answer.status_code == status and words in answer.content.decode(), answer.content
    assert Transfer.objects.count() == 1
    # A read-only token cannot start one.
    reader = api_client(owner, "r", scopes="read")
    assert reader.post("/api/v1/transfers/", asked, format="json").status_code == 403

    # Cancel through the API (a queued one ends at once; a done one stays done).
    assert api.post(f"/api/v1/transfers/{pk}/cancel/").json()["state"] == "done"
    queued = transfers.ask(owner, filecluster, dav, "to_remote", "home", folder, "later")
    cancelled = api.post(f"/api/v1/transfers/{queued.pk}/cancel/").json()
    assert cancelled["state"] == "cancelled" and cancelled["final"]
