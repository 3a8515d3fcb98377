"""Uploads whose bytes go through OpenSSH (clusters/bulk.py) onto the dev cluster's
data-transfer node, in certificate mode: one master per person and purpose, logged in
with a certificate naming them, its key gone once it is up; the pinned host key the only
one it accepts; the bytes never written through a link; and over paramiko whenever
OpenSSH cannot log in."""

import hashlib
import logging
import os
import threading
from pathlib import Path

import paramiko
import pytest

from clusters import acting, bulk, openssh, ssh
from clusters import files as job_files
from clusters.models import ClusterAccount
from files.models import Upload
from identity import audit
from identity.audit.models import AuditEvent
from tests import polling
from tests.devcluster.helpers import SshdLog, remote
from tests.files import tus
from tests.files.tus import offset, patch

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]

MiB = 1024 * 1024


def start(client, url, length: int, name: str, folder: str) -> str:
    made = tus.start(client, url, length, filename=name, path=folder)
    assert made.status_code == 201, made.content
    return made["Location"]


@pytest.fixture
def certified(place, filecluster, devcluster_info, trusted_ca, settings, tmp_path):
    """``place`` with the cluster in certificate mode (a CA of the test's own), uploads
    over OpenSSH, the masters' directories in ``tmp_path`` (to look into)."""
    trusted_ca(devcluster_info)
    filecluster.ssh_auth = filecluster.SshAuth.CERTIFICATE
    filecluster.save()
    settings.PORTAL_BULK_TRANSPORT = "openssh"
    settings.PORTAL_BULK_SSH_DIR = str(tmp_path / "run")
    (tmp_path / "run").mkdir()
    settings.PORTAL_UPLOAD_CHUNK_BYTES = MiB
    return place


def fresh(account) -> ClusterAccount:
    """The account as a request loads it (its cluster in certificate mode now)."""
    return ClusterAccount.objects.select_related("cluster").get(pk=account.pk)


def home_of(account) -> str:
    return account.cluster.work_dir_root("home", account.username)


def masters_now() -> list:
    return [slot.master for slot in bulk._registry.slots.values()]


def test_an_uploads_bytes_go_through_one_openssh_master_per_purpose(
    certified, devcluster_info, tmp_path
):
    client, url, folder, account = certified
    sshd = SshdLog(devcluster_info["sshd_log"].replace("sshd.log", "sshd-dtn.log"))
    # A name and a folder no shell may take for anything but a name.
    remote(account, ["mkdir", "--", f"{home_of(account)}/{folder}/sp ace $(touch x)"])
    where, name = f"{folder}/sp ace $(touch x)", 'it\'s "q" `id` -x.bin'
    data = os.urandom(3 * MiB + 777)
    location = start(client, url, len(data), name, where)
    before = dict(bulk.counters)

    assert patch(client, location, 0, data[:MiB]).status_code == 204
    assert bulk.counters["masters"] == before["masters"] + 1
    (master,) = masters_now()
    assert master.process.poll() is None  # up, a child of this process
    assert int(Path(f"/proc/{master.process.pid}/stat").read_text().split()[3]) == os.getpid()
    # Logged in: the key and the certificate are gone, only the socket stays.
    assert os.listdir(master.directory) == ["ctl"]
    assert os.stat(master.directory).st_mode & 0o777 == 0o700
    assert master.key_id.startswith("portal:owner:hpcuser2@devcluster:file_upload_into_home:")

    for at in range(MiB, len(data), MiB):  # the other chunks reuse it
        answer = patch(client, location, at, data[at : at + MiB])
        assert answer.status_code == 204, answer.content
    assert bulk.counters["masters"] == before["masters"] + 1
    assert bulk.counters["writes"] == before["writes"] + 4
    assert masters_now() == [master]

    digest = hashlib.sha256(data).hexdigest()
    assert answer["Upload-Sha256"] == digest
    on_cluster = remote(account, ["sha256sum", "--", f"{home_of(account)}/{where}/{name}"])
    assert on_cluster.split()[0] == digest
    listed = remote(account, ["ls", "-A", "--", f"{home_of(account)}/{where}"])
    assert listed.splitlines() == [name]  # no partial file left, nothing the name ran
    # Each request one audit row, naming the certificate that carried its bytes, which
    # sshd logged as it let the master in.
    rows = AuditEvent.objects.filter(action="file_upload", target__endswith="(bytes)")
    assert sorted(rows.values_list("message", flat=True)) == sorted(
        f"bytes {at:,}+{min(MiB, len(data) - at):,}" for at in range(0, len(data), MiB)
    )
    assert set(rows.values_list("key_id", flat=True)) == {master.key_id}
    assert f"ID {master.key_id} " in sshd.text()
    bulk.close_all()
    assert master.process.poll() is not None and not os.path.exists(master.directory)


def test_openssh_accepts_no_host_key_but_the_pinned_one(
    certified, filecluster, tmp_path, monkeypatch
):
    """The pinned key is the only one OpenSSH knows: another key (what a man in the
    middle presents) is refused and the request fails, never falls back to a way that
    would accept it; nothing is left of the master."""
    client, url, folder, account = certified
    location = start(client, url, 10, "f.bin", folder)
    wrong = f"ssh-ed25519 {_other_ed25519()}"  # a key of the right type, not the cluster's
    # What OpenSSH is told, while paramiko's connection checked the right key.
    real = openssh.known_hosts_line
    monkeypatch.setattr(openssh, "known_hosts_line", lambda h, p, _: real(h, p, wrong))
    answer = patch(client, location, 0, b"0123456789")
    assert answer.status_code == 502, answer.content
    assert "refused the host key" in answer.json()["error"]
    monkeypatch.undo()
    assert offset(client, location) == 0  # no byte written, over OpenSSH or paramiko
    assert not masters_now() and not os.listdir(tmp_path / "run")
    row = AuditEvent.objects.filter(target__endswith="(bytes)").get()
    assert row.outcome == "failed" and "host key" in row.message
    # Pinned wrong in the portal itself: paramiko refuses first, no master is started.
    filecluster.host_key = wrong
    filecluster.save()
    before = bulk.counters["masters"]
    assert patch(client, location, 0, b"0123456789").status_code == 502
    assert bulk.counters["masters"] == before


def _other_ed25519() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    line = (
        ed25519.Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    )
    return line.split()[1].decode()


def test_the_master_refusing_a_wrong_host_key_is_a_mismatch_not_unavailable(certified, tmp_path):
    account = fresh(certified[3])
    account.cluster.host_key = f"ssh-ed25519 {_other_ed25519()}"  # (not saved)
    with audit.action(audit.Action.FILE_UPLOAD, account=account, purpose="test"):
        with pytest.raises(ssh.HostKeyMismatch, match="not the key pinned"):
            bulk.start_master(account)
    assert not os.listdir(tmp_path / "run")


def test_where_openssh_cannot_log_in_the_bytes_go_over_paramiko(certified, caplog, monkeypatch):
    """A master that would not start (here: sshd refusing the key OpenSSH offers) is no
    failure of the upload: that request's bytes go over SFTP, with a log line."""
    client, url, folder, account = certified
    data = os.urandom(MiB + 5)
    location = start(client, url, len(data), "fallback.bin", folder)
    real = openssh.private_key_text
    monkeypatch.setattr(openssh, "private_key_text", lambda _: real(_ed25519_key()))
    with caplog.at_level(logging.WARNING, logger="files.uploads"):
        first = patch(client, location, 0, data[:MiB])
    monkeypatch.undo()
    assert first.status_code == 204, first.content
    assert "over SFTP" in caplog.text and "Permission denied" in caplog.text
    before = dict(bulk.counters)
    last = patch(client, location, MiB, data[MiB:])  # OpenSSH again: it logs in now
    assert last["Upload-Sha256"] == hashlib.sha256(data).hexdigest()
    assert bulk.counters["masters"] == before["masters"] + 1


def _ed25519_key() -> paramiko.PKey:
    """A key sshd was never told of."""
    import io

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    text = (
        ed25519.Ed25519PrivateKey.generate()
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
        .decode()
    )
    return paramiko.Ed25519Key.from_private_key(io.StringIO(text))


def test_a_pin_by_fingerprint_uploads_over_paramiko(place, filecluster, settings):
    """OpenSSH cannot be given a fingerprint to compare with (paramiko can): such a
    cluster's uploads go over SFTP, as before."""
    client, url, folder, account = place
    settings.PORTAL_BULK_TRANSPORT = "openssh"
    key = paramiko.PKey.from_type_string(*_pinned_parts(filecluster.host_key))
    filecluster.host_key = ssh.key_fingerprint(key)
    filecluster.save()
    data = os.urandom(1000)
    location = start(client, url, len(data), "pinned.bin", folder)
    before = dict(bulk.counters)
    answer = patch(client, location, 0, data)
    assert answer["Upload-Sha256"] == hashlib.sha256(data).hexdigest()
    assert bulk.counters == before


def _pinned_parts(line: str) -> tuple[str, bytes]:
    import base64

    kind, blob = line.split()[:2]
    return kind, base64.b64decode(blob)


def test_bytes_are_never_written_through_a_link(certified, tmp_path):
    """The partial file swapped for a link to a file outside the root: the request is
    refused by the SFTP check before any byte, and dd itself (nofollow) refuses the link
    when it is swapped in after that check."""
    client, url, folder, account = certified
    account = fresh(account)
    base = f"{home_of(account)}/{folder}"
    outside = f"/tmp/portal-bulk-{os.urandom(4).hex()}"
    remote(account, ["sh", "-c", 'printf secret > "$1"', "sh", outside])
    try:
        location = start(client, url, 8, "swapped.bin", folder)
        upload = Upload.objects.get()
        assert patch(client, location, 0, b"abcd").status_code == 204
        partial = f"{base}/{upload.partial_name}"
        remote(account, ["ln", "-sfn", "--", outside, partial])
        refused = patch(client, location, 4, b"efgh")
        assert refused.status_code == 400, refused.content
        assert "not a regular file" in refused.json()["error"]
        # Past the SFTP check (the link swapped in meanwhile): dd refuses it too.
        with audit.action(audit.Action.FILE_UPLOAD, account=account, purpose="test"):
            with pytest.raises(job_files.NotARegularFile):
                bulk.write_at(account, partial, 0, [b"XXXXXX"], timeout=30)
            assert acting.key_id.get()  # (carried by a certificate)
        assert remote(account, ["cat", "--", outside]) == "secret"
    finally:
        remote(account, ["rm", "-f", "--", outside])


def test_an_idle_master_is_closed_by_itself(certified, settings, tmp_path):
    client, url, folder, _account = certified
    settings.PORTAL_BULK_SSH_IDLE = 1
    location = start(client, url, 10, "idle.bin", folder)
    assert patch(client, location, 0, b"01234").status_code == 204
    (master,) = masters_now()
    polling.until(lambda: master.process.poll() is not None, 15, "the idle master to end")
    assert not masters_now() and not os.listdir(tmp_path / "run")
    # The next request logs in again.
    assert patch(client, location, 5, b"56789")["Upload-Sha256"]
    assert len(masters_now()) == 1


def test_a_runtime_directory_that_is_not_there_means_sftp(place, settings, tmp_path, caplog):
    """This host's own trouble starting OpenSSH (here: PORTAL_BULK_SSH_DIR missing) is
    no failure of the upload either: its bytes go over SFTP."""
    client, url, folder, _account = place
    settings.PORTAL_BULK_TRANSPORT = "openssh"
    settings.PORTAL_BULK_SSH_DIR = str(tmp_path / "absent")
    data = os.urandom(1000)
    location = start(client, url, len(data), "here.bin", folder)
    with caplog.at_level(logging.WARNING, logger="files.uploads"):
        answer = patch(client, location, 0, data)
    assert answer["Upload-Sha256"] == hashlib.sha256(data).hexdigest()
    assert "OpenSSH cannot be started here" in caplog.text


def test_requests_at_once_share_the_master_and_never_mix_their_bytes(place, settings):
    """A person's files go three at a time (the page's uploader): their requests' clients
    are sessions of the one master side by side (stored-key mode here: no database in
    the threads), each file whole and its own."""
    _client, _url, folder, account = place
    settings.PORTAL_BULK_TRANSPORT = "openssh"
    account = fresh(account)
    base = f"{home_of(account)}/{folder}"
    blobs = {f"part{i}": os.urandom(4 * MiB + i) for i in range(3)}
    remote(account, ["sh", "-c", f"cd {base} && touch warm part0 part1 part2"])
    token = acting.purpose.set("file_upload into home")
    try:
        assert bulk.write_at(account, f"{base}/warm", 0, [b"x"], timeout=30) == 1
    finally:
        acting.purpose.reset(token)  # (the threads' own purpose: the same master)
    before = dict(bulk.counters)
    failures: list[BaseException] = []

    def write(name: str, data: bytes) -> None:
        acting.purpose.set("file_upload into home")  # (a thread starts with no context)
        pieces = (data[at : at + MiB] for at in range(0, len(data), MiB))
        try:
            assert bulk.write_at(account, f"{base}/{name}", 0, pieces, timeout=60) == len(data)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=write, args=item) for item in blobs.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures, failures
    assert bulk.counters["masters"] == before["masters"]
    assert bulk.counters["writes"] == before["writes"] + 3
    sums = remote(account, ["sh", "-c", f"cd {base} && sha256sum part*"])
    got = {line.split()[1]: line.split()[0] for line in sums.splitlines()}
    assert got == {name: hashlib.sha256(data).hexdigest() for name, data in blobs.items()}


def test_a_download_goes_through_the_master_and_stops_dd_when_the_client_goes(certified):
    """A download's bytes come from dd on the cluster through the person's master; a
    client that goes mid-way (the response closed) leaves no dd reading on the cluster."""
    client, url, folder, account = certified
    home = home_of(account)
    remote(account, ["truncate", "-s", "300M", f"{home}/{folder}/huge.bin"])
    whole = client.get(url + "download/", {"path": f"{folder}/big.bin"})
    body = b"".join(whole.streaming_content)
    on_cluster = remote(account, ["sha256sum", "--", f"{home}/{folder}/big.bin"]).split()[0]
    assert hashlib.sha256(body).hexdigest() == on_cluster
    (master,) = masters_now()
    assert master.key_id.startswith("portal:owner:hpcuser2@devcluster:file_download")

    before = bulk.counters["reads"]
    partly = client.get(url + "download/", {"path": f"{folder}/huge.bin"})
    pieces = iter(partly.streaming_content)
    assert len(next(pieces)) == 1024 * 1024 and bulk.counters["reads"] == before + 1

    def readers() -> str:
        return remote(account, ["sh", "-c", 'pgrep -u "$(id -u)" -a dd || true'])

    assert "huge.bin" in readers()  # held back by the client's pace, not done
    partly.close()
    polling.until(lambda: "huge.bin" not in readers(), 20, "dd to stop on the cluster")


def test_a_download_from_a_cluster_pinned_by_fingerprint_goes_over_sftp(
    place, filecluster, settings
):
    client, url, folder, account = place
    settings.PORTAL_BULK_TRANSPORT = "openssh"
    key = paramiko.PKey.from_type_string(*_pinned_parts(filecluster.host_key))
    filecluster.host_key = ssh.key_fingerprint(key)
    filecluster.save()
    before = dict(bulk.counters)
    body = b"".join(client.get(url + "download/", {"path": f"{folder}/big.bin"}).streaming_content)
    assert len(body) == 3_000_000 and bulk.counters == before
