"""Resumable uploads (tus 1.0) onto the dev cluster, as the person's own cluster user:
the offset is the partial file's size on the cluster, a chunk cut off mid-way is sent
again from there, the sha256 is computed on the cluster, and nothing is ever written
over an existing file unless replacing it was confirmed."""

import hashlib
import os

import pytest
from django.test import Client

from clusters import pool, ssh
from files import remote as sftp_ops
from files.models import Upload
from identity.audit.models import AuditEvent
from tests import factories
from tests.devcluster.helpers import remote
from tests.files.tus import TUS, offset, patch, start

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]


def home_of(account) -> str:
    return account.cluster.work_dir_root("home", account.username)


def test_an_upload_cut_twice_continues_from_the_clusters_offset(place, settings):
    client, url, folder, account = place
    settings.PORTAL_UPLOAD_CHUNK_BYTES = 1024 * 1024
    data = os.urandom(3 * 1024 * 1024 + 12345)
    options = client.options(url + "uploads/")
    assert options["Tus-Version"] == "1.0.0" and "creation" in options["Tus-Extension"]
    made = start(client, url, len(data), filename="model.pt", path=folder)
    assert made.status_code == 201, made.content
    location = made["Location"]
    assert offset(client, location) == 0
    # Chunk by chunk, with two "cuts": a chunk that never arrived (the client asks the
    # offset and sends it again) and a client that lost count (sends from an old offset).
    at, cuts = 0, 0
    while at < len(data):
        piece = data[at : at + 1024 * 1024]
        if at == 1024 * 1024 and cuts == 0:
            cuts += 1  # the connection broke before this chunk reached the portal
            at = offset(client, location)
            continue
        if at == 2 * 1024 * 1024 and cuts == 1:
            cuts += 1
            stale = patch(client, location, 0, data[: 1024 * 1024])
            assert stale.status_code == 409 and "not 0" in stale.json()["error"]
            at = offset(client, location)
            continue
        answer = patch(client, location, at, piece)
        assert answer.status_code == 204, answer.content
        at = int(answer["Upload-Offset"])
    assert cuts == 2
    digest = hashlib.sha256(data).hexdigest()
    assert answer["Upload-Sha256"] == digest
    on_cluster = remote(account, ["sha256sum", "--", f"{home_of(account)}/{folder}/model.pt"])
    assert on_cluster.split()[0] == digest
    listed = {r["shown"] for r in client.get(url, {"path": folder}).context["rows"]}
    assert "model.pt" in listed and not any("portal-upload" in n for n in listed)
    upload = Upload.objects.get()
    assert upload.finished_at and upload.sha256 == digest
    rows = AuditEvent.objects.filter(action="file_upload").values_list("target", "message")
    assert any("(done)" in t and m == f"sha256 {digest}" for t, m in rows)


def test_an_uploads_chunks_share_one_connection_and_each_is_audited(place, settings):
    client, url, folder, account = place
    settings.PORTAL_UPLOAD_CHUNK_BYTES = 1024 * 1024
    data = os.urandom(4 * 1024 * 1024)
    location = start(client, url, len(data), filename="chunks.bin", path=folder)["Location"]
    before = ssh.counters["connections"]
    for at in range(0, 3 * 1024 * 1024, 1024 * 1024):  # all but the last (it hashes)
        assert patch(client, location, at, data[at : at + 1024 * 1024]).status_code == 204
    # Not one per chunk: the start's connection carries them (one purpose per root).
    assert ssh.counters["connections"] - before == 0
    last = patch(client, location, 3 * 1024 * 1024, data[3 * 1024 * 1024 :])
    assert last["Upload-Sha256"] == hashlib.sha256(data).hexdigest()
    rows = AuditEvent.objects.filter(action="file_upload", target__endswith="(bytes)")
    assert sorted(rows.values_list("message", flat=True)) == [
        f"bytes {at:,}+1,048,576" for at in range(0, 4 * 1024 * 1024, 1024 * 1024)
    ]


def test_the_dev_clusters_sshd_takes_bigger_writes(place):
    _, _, _, account = place

    def size(conn):
        with conn.sftp_session() as sftp:
            return sftp_ops.write_size(sftp)

    assert pool.with_connection(account, size) == sftp_ops.WRITE_SIZE  # OpenSSH 9.2


def test_what_an_upload_may_not_do(place, settings):
    client, url, folder, account = place
    # An existing name is never replaced unless confirmed.
    exists = start(client, url, 5, filename="notes.txt", path=folder)
    assert exists.status_code == 409 and "confirm" in exists.json()["error"]
    replace = start(client, url, 5, filename="notes.txt", path=folder, overwrite="yes")
    assert replace.status_code == 201
    # Two uploads to the same name at once.
    again = start(client, url, 5, filename="notes.txt", path=folder, overwrite="yes")
    assert again.status_code == 409 and "already being uploaded" in again.json()["error"]
    # Past the end, a wrong type, too big a chunk.
    location = replace["Location"]
    assert patch(client, location, 3, b"abc").status_code == 409  # offset beyond the file
    assert patch(client, location, 0, b"abcdef").status_code == 409  # past its length
    settings.PORTAL_UPLOAD_CHUNK_BYTES = 65536
    big = start(client, url, 100_000, filename="big", path=folder)
    assert patch(client, big["Location"], 0, b"x" * 70_000).status_code == 413
    assert patch(client, location, 0, b"hello").status_code == 204
    text = remote(account, ["cat", "--", f"{home_of(account)}/{folder}/notes.txt"])
    assert text == "hello"
    # Hostile names and folders.
    for fields, status in (
        ({"filename": "bad\nname", "path": folder}, 400),
        ({"filename": "x", "path": f"{folder}/../.."}, 400),
        ({"filename": "x", "path": f"{folder}/etc-link"}, 400),
        ({"filename": "../x", "path": folder}, 400),
    ):
        assert start(client, url, 1, **fields).status_code == status, fields
    assert client.post(url + "uploads/", HTTP_UPLOAD_LENGTH="1", **TUS).status_code == 400
    settings.PORTAL_UPLOAD_MAX_BYTES = 10
    assert start(client, url, 11, filename="y", path=folder).status_code == 413
    # Another person's upload is nobody's business; DELETE removes the partial file.
    stranger = Client()
    stranger.force_login(factories.user("stranger"))
    assert stranger.head(big["Location"], **TUS).status_code == 404
    assert client.delete(big["Location"], **TUS).status_code == 204
    listed = remote(account, ["ls", "-A", f"{home_of(account)}/{folder}"])
    assert "portal-upload" not in listed
    # A folder swapped for a link while its upload runs: the next request is refused.
    remote(account, ["mkdir", f"{home_of(account)}/{folder}/deep"])
    moving = start(client, url, 4, filename="later", path=f"{folder}/deep")
    assert moving.status_code == 201
    swap = f"cd {home_of(account)}/{folder} && mv deep deep.real && ln -s /tmp deep"
    remote(account, ["sh", "-c", swap])
    refused = patch(client, moving["Location"], 0, b"data")
    assert refused.status_code == 400 and "link" in refused.json()["error"]
    # Without the protocol's header: 412.
    assert client.head(location).status_code == 412


def test_threads_sharing_one_connection_never_mix_their_bytes(place):
    """A web process serves each request in a thread of its own, all on the person's one
    pooled connection: parallel uploads, and a cancelled upload's thread still writing
    while the resumed client asks for the offset. paramiko sends SFTP packets outside its
    lock, so without the connection's own lock sftp-server took one thread's request as
    another's data (found by tests/e2e/test_upload_big.py: an LSTAT packet inside a 2 GB
    file)."""
    import threading

    from clusters import pool

    _client, _url, folder, account = place
    base = f"{home_of(account)}/{folder}"
    blobs = {f"part{i}": bytes([i]) * 8 + os.urandom(3 * 1024 * 1024) for i in range(4)}
    failures: list[BaseException] = []

    def write(name: str, data: bytes) -> None:
        def on(conn):
            with conn.sftp_session() as sftp, sftp.open(f"{base}/{name}", "w") as handle:
                handle.set_pipelined(True)
                for at in range(0, len(data), 32768):
                    handle.write(data[at : at + 32768])

        try:
            pool.with_connection(account, on, retry=False)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    def stat_once(conn):
        with conn.sftp_session() as sftp:
            return sftp.lstat(base)

    def stat_often() -> None:
        try:
            for _ in range(200):
                pool.with_connection(account, stat_once, retry=False)
        except BaseException as exc:  # noqa: BLE001
            failures.append(exc)

    threads = [threading.Thread(target=write, args=item) for item in blobs.items()]
    threads.append(threading.Thread(target=stat_often))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures, failures
    sums = remote(account, ["sh", "-c", f"cd {base} && sha256sum part*"])
    got = {line.split()[1]: line.split()[0] for line in sums.splitlines()}
    assert got == {name: hashlib.sha256(data).hexdigest() for name, data in blobs.items()}


@pytest.mark.django_db(transaction=True)  # (the second request comes from another thread)
def test_while_one_request_writes_an_upload_another_is_told_to_wait(place, owner, monkeypatch):
    """The same chunk sent again while the first request still writes it (a client that
    retried after a cut): a 423 that tus-js-client retries, not two writers at one offset."""
    import threading

    from files import uploads

    client, url, folder, account = place
    location = start(client, url, 8, filename="twice.bin", path=folder)["Location"]
    real, inside, go_on = uploads._write, threading.Event(), threading.Event()

    def held_first(*args):
        if not inside.is_set():
            inside.set()
            go_on.wait(20)
        return real(*args)

    monkeypatch.setattr(uploads, "_write", held_first)
    answers = {}
    other = Client()
    other.force_login(owner)
    first = threading.Thread(
        target=lambda: answers.setdefault("first", patch(other, location, 0, b"abcdefgh"))
    )
    first.start()
    assert inside.wait(20)
    second = patch(client, location, 0, b"ABCDEFGH")
    # Asking the offset meanwhile waits for the writer to end (else it would be stale).
    asked = Client()
    asked.force_login(owner)
    head = threading.Thread(target=lambda: answers.setdefault("head", offset(asked, location)))
    head.start()
    head.join(0.5)
    assert head.is_alive() and "head" not in answers
    go_on.set()
    first.join(30)
    head.join(30)
    assert second.status_code == 423 and "HEAD" in second.json()["error"], second.content
    assert second["Connection"] == "close"  # (the browser stops sending the refused body)
    assert answers["head"] == 8
    assert answers["first"].status_code == 204, answers["first"].content
    on_cluster = remote(account, ["cat", "--", f"{home_of(account)}/{folder}/twice.bin"])
    assert on_cluster == "abcdefgh"
    # Over: the next request writes (here: the upload is complete, so a 409 says so).
    assert patch(client, location, 8, b"").status_code == 409


@pytest.mark.django_db(transaction=True)  # (the task closes its connection, as a worker)
def test_a_large_uploads_sha256_is_a_task_the_client_asks_after(place, settings, monkeypatch):
    """Past PORTAL_UPLOAD_HASH_INLINE_BYTES (0 here) the last request answers at once,
    ``Upload-Finishing: yes``; HEAD says so until the task has hashed and renamed it, then
    gives the sha256. Before: every hash ran inside the last request, up to 600 s (a login
    environment that sleeps, or a 100 GB file) with a thread and a database connection."""
    from files import tasks, uploads

    client, url, folder, account = place
    settings.PORTAL_UPLOAD_HASH_INLINE_BYTES = 0
    sent: list[tuple] = []
    monkeypatch.setattr(
        uploads.current_app, "send_task", lambda name, args: sent.append((name, args))
    )
    data = os.urandom(100_000)
    made = start(client, url, len(data), filename="large.bin", path=folder)
    assert made.status_code == 201, made.content
    location = made["Location"]
    answer = patch(client, location, 0, data)
    assert answer.status_code == 204 and answer["Upload-Offset"] == str(len(data))
    assert answer["Upload-Finishing"] == "yes" and "Upload-Sha256" not in answer
    head = client.head(location, **TUS)
    assert head["Upload-Offset"] == str(len(data)) and head["Upload-Finishing"] == "yes"
    assert patch(client, location, len(data), b"").status_code == 409  # nothing more
    upload = Upload.objects.get()
    assert sent == [("files.tasks.finish_upload", [upload.pk])]
    tasks.finish_upload.apply(args=[upload.pk])  # what a worker does
    head = client.head(location, **TUS)
    digest = hashlib.sha256(data).hexdigest()
    assert head["Upload-Sha256"] == digest and "Upload-Finishing" not in head
    on_cluster = remote(account, ["sha256sum", "--", f"{home_of(account)}/{folder}/large.bin"])
    assert on_cluster.split()[0] == digest


def test_a_zero_length_upload_finishes_within_the_request_or_in_a_task(place, settings):
    """A file of no bytes is finished by its POST, within the request's cluster deadline;
    a cluster that takes longer than that leaves it to the task."""
    client, url, folder, account = place
    made = start(client, url, 0, filename="empty.txt", path=folder)
    assert made.status_code == 201 and made["Upload-Sha256"] == hashlib.sha256(b"").hexdigest()
