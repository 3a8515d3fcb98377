"""The file manager on the dev cluster: real sshd, SFTP as the person's own cluster user
(hpcuser), in a folder of its home the test makes and removes. Hostile entries made by
"a job": a link to /etc, a FIFO, a name with a newline and an escape sequence."""

import hashlib

import pytest

from clusters import bulk
from files import remote as sftp_ops
from identity.audit.models import AuditEvent
from tests.devcluster.helpers import remote

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]


def test_list_view_and_hostile_entries(place):
    client, url, folder, _ = place
    page = client.get(url, {"path": folder})
    assert page.status_code == 200
    names = {row["shown"]: row["entry"].kind for row in page.context["rows"]}
    assert names == {
        "sub": "dir",
        "notes.txt": "file",
        "big.bin": "file",
        "pic.png": "file",
        "etc-link": "link",
        "pipe": "fifo",
        "evil\\nname\\x1b[31m": "file",
    }
    assert b"\x1b" not in page.content  # the escape never reaches the page
    # Sorted by size, descending: folders first, then the biggest file.
    page = client.get(url, {"path": folder, "sort": "size", "order": "desc"})
    assert [r["shown"] for r in page.context["rows"]][:2] == ["sub", "big.bin"]
    # Nothing through the link, nothing from the FIFO, nothing above the root.
    assert client.get(url, {"path": f"{folder}/etc-link"}).status_code == 400
    assert client.get(url + "view/", {"path": f"{folder}/etc-link/passwd"}).status_code == 400
    assert client.get(url + "view/", {"path": f"{folder}/pipe"}).status_code == 400
    assert client.get(url, {"path": "../.."}).status_code == 400
    assert client.get(url, {"path": "/".join(["d"] * 10_000)}).status_code == 400
    text = client.get(url + "view/", {"path": f"{folder}/notes.txt"})
    assert text.context["text"] == "hello\nworld\n"
    image = client.get(url + "view/", {"path": f"{folder}/pic.png"})
    raw = client.get(image.context["image"])
    assert raw["Content-Type"] == "image/png" and "sandbox" in raw["Content-Security-Policy"]
    assert client.get(url + "view/", {"path": f"{folder}/big.bin"}).context["binary"]


@pytest.mark.parametrize("transport", ["openssh", "paramiko"])
def test_a_download_resumes_where_it_broke(place, settings, transport):
    client, url, folder, account = place
    settings.PORTAL_BULK_TRANSPORT = transport
    reads = bulk.counters["reads"]
    whole = client.get(url + "download/", {"path": f"{folder}/big.bin"})
    assert whole.status_code == 200 and whole["Accept-Ranges"] == "bytes"
    body = b"".join(whole.streaming_content)
    expected = remote(account, ["sha256sum", "--", f"{whole.wsgi_request.GET['path']}"])
    assert len(body) == 3_000_000
    # What `curl -C -` sends after the first 1,234,567 bytes arrived.
    rest = client.get(
        url + "download/",
        {"path": f"{folder}/big.bin"},
        HTTP_RANGE="bytes=1234567-",
        HTTP_IF_RANGE=whole["ETag"],
    )
    assert rest.status_code == 206
    assert rest["Content-Range"] == "bytes 1234567-2999999/3000000"
    joined = body[:1234567] + b"".join(rest.streaming_content)
    assert joined == body
    assert hashlib.sha256(joined).hexdigest() == sha256_on_cluster(account, folder, "big.bin")
    beyond = client.get(
        url + "download/", {"path": f"{folder}/big.bin"}, HTTP_RANGE="bytes=9999999-"
    )
    assert beyond.status_code == 416 and beyond["Content-Range"] == "bytes */3000000"
    del expected
    assert bulk.counters["reads"] - reads == (2 if transport == "openssh" else 0)


@pytest.mark.parametrize(
    ("ciphers", "through_openssh"),
    [("aes256-ctr", True), ("openssh", True), ("no-such-cipher@example.org", False)],
)
def test_a_download_through_the_ciphers_a_master_is_given(
    place, settings, ciphers, through_openssh
):
    """The masters' Ciphers reach the real sshd; one OpenSSH does not know stops the
    master from starting and the download goes over SFTP, whole."""
    client, url, folder, account = place
    settings.PORTAL_BULK_TRANSPORT = "openssh"
    settings.PORTAL_BULK_SSH_CIPHERS = ciphers
    bulk.close_all()  # (a master of an earlier test was given other ciphers)
    try:
        reads = bulk.counters["reads"]
        whole = client.get(url + "download/", {"path": f"{folder}/big.bin"})
        body = b"".join(whole.streaming_content)
        assert hashlib.sha256(body).hexdigest() == sha256_on_cluster(account, folder, "big.bin")
        assert bulk.counters["reads"] - reads == (1 if through_openssh else 0)
    finally:
        bulk.close_all()


def test_a_download_asks_for_more_than_a_server_answers_at_once(place, monkeypatch, settings):
    """Reads larger than OpenSSH's sftp-server answers (255 KiB): each short answer is
    followed by a read for the rest, and smaller reads from then on."""
    client, url, folder, account = place
    settings.PORTAL_BULK_TRANSPORT = "paramiko"  # (SFTP's reads, not OpenSSH's dd)
    monkeypatch.setattr(sftp_ops, "READ_SIZE", 1024 * 1024)
    monkeypatch.setattr(sftp_ops, "READS_AHEAD", 3)
    whole = client.get(url + "download/", {"path": f"{folder}/big.bin"})
    body = b"".join(whole.streaming_content)
    assert hashlib.sha256(body).hexdigest() == sha256_on_cluster(account, folder, "big.bin")
    part = client.get(
        url + "download/", {"path": f"{folder}/big.bin"}, HTTP_RANGE="bytes=1000001-2345678"
    )
    assert b"".join(part.streaming_content) == body[1000001:2345679]


def sha256_on_cluster(account, folder: str, name: str) -> str:
    home = account.cluster.work_dir_root("home", account.username)
    return remote(account, ["sha256sum", "--", f"{home}/{folder}/{name}"]).split()[0]


def test_make_rename_move_and_delete_with_a_confirmation_all_audited(place):
    client, url, folder, account = place
    page = client.post(url + "mkdir/", {"path": folder, "name": "runs"}, follow=True)
    assert b"Made the folder runs." in page.content
    page = client.post(url + "mkdir/", {"path": folder, "name": "bad\nname"}, follow=True)
    assert b"control characters" in page.content
    page = client.post(url + "mkdir/", {"path": folder, "name": "runs"}, follow=True)
    assert b"runs already exists." in page.content
    # Rename, then move into runs/; never over something, never into itself.
    client.post(url + "rename/", {"path": f"{folder}/notes.txt", "name": "readme.txt"})
    page = client.post(
        url + "rename/",
        {"path": f"{folder}/readme.txt", "to": f"{folder}/runs", "name": "readme.txt"},
        follow=True,
    )
    assert b"Moved to" in page.content
    listed = client.get(url, {"path": f"{folder}/runs"})
    assert [r["shown"] for r in listed.context["rows"]] == ["readme.txt"]
    page = client.post(
        url + "rename/", {"path": f"{folder}/sub", "to": f"{folder}/sub/deeper"}, follow=True
    )
    assert b"cannot move into itself" in page.content
    page = client.post(
        url + "rename/", {"path": f"{folder}/etc-link/passwd", "name": "x"}, follow=True
    )
    assert b"not a folder" in page.content
    # Delete: first what would go, counted on the cluster; then, confirmed, gone.
    ask = client.post(url + "delete/", {"path": f"{folder}/sub"})
    assert ask.status_code == 200
    survey = ask.context["survey"]
    assert (survey.files, survey.folders, survey.bytes) == (2, 2, 3)
    assert b"2 files (3 bytes), 2 folders" in ask.content
    other = client.post(
        url + "delete/", {"path": f"{folder}/runs", "confirm": ask.context["token"]}, follow=True
    )
    assert b"not for this" in other.content  # a confirmation is for one path only
    done = client.post(
        url + "delete/", {"path": f"{folder}/sub", "confirm": ask.context["token"]}, follow=True
    )
    assert b"Deleted" in done.content
    names = {r["shown"] for r in client.get(url, {"path": folder}).context["rows"]}
    assert "sub" not in names and "runs" in names
    # The link is removed as a link: /etc is untouched.
    ask = client.post(url + "delete/", {"path": f"{folder}/etc-link"})
    client.post(url + "delete/", {"path": f"{folder}/etc-link", "confirm": ask.context["token"]})
    assert (
        remote(
            account,
            [
                "test",
                "-f",
                "/etc/passwd",
                "-a",
                "!",
                "-e",
                f"{account.cluster.work_dir_root('home', account.username)}/{folder}/etc-link",
            ],
        )
        == ""
    )
    actions = set(AuditEvent.objects.filter(username="owner").values_list("action", "outcome"))
    assert {
        ("file_mkdir", "ok"),
        ("file_rename", "ok"),
        ("file_delete", "ok"),
        ("file_list", "ok"),
    } <= actions
    assert ("file_mkdir", "refused") in actions or ("file_mkdir", "failed") in actions


def test_a_folder_downloads_as_a_zip_of_its_regular_files(place, settings):
    import io
    import zipfile

    client, url, folder, account = place
    settings.PORTAL_DOWNLOAD_CHUNK_BYTES = 65536  # the 3 MB file in many reads
    got = client.get(url + "zip/", {"path": folder})
    assert got.status_code == 200 and got["Content-Type"] == "application/zip"
    assert got["Content-Disposition"].endswith(f'"{folder}.zip"')
    archive = zipfile.ZipFile(io.BytesIO(b"".join(got.streaming_content)))
    names = set(archive.namelist())
    # Regular files only: the link to /etc and the FIFO are left out.
    assert names == {
        "notes.txt",
        "big.bin",
        "pic.png",
        "sub/a",
        "sub/deeper/b",
        "evil\nname\x1b[31m",  # their own file, as it is
    }
    assert archive.read("sub/deeper/b") == b"yy"
    digest = hashlib.sha256(archive.read("big.bin")).hexdigest()
    assert digest == sha256_on_cluster(account, folder, "big.bin")
    settings.PORTAL_DOWNLOAD_MAX_BYTES = 1_000_000
    too_big = client.get(url + "zip/", {"path": folder})
    assert too_big.status_code == 400 and b"copy it with rsync" in too_big.content


def test_a_projects_folder_is_offered_to_its_members_read_only_for_viewers(
    place, filecluster, owner
):
    from projects.models import Membership, Project

    client, url, folder, account = place
    home = filecluster.work_dir_root("home", account.username)
    remote(account, ["mkdir", "-p", f"{home}/{folder}/proj/vision/data"])
    filecluster.project_root = f"{home}/{folder}/proj/{{project}}"
    filecluster.save()
    # The dev cluster's accounts (registered with it): the owner in vision only.
    vision, _ = Project.objects.update_or_create(
        cluster=filecluster, name="vision", defaults={"default_role": "viewer"}
    )
    Project.objects.get_or_create(cluster=filecluster, name="nlp")
    Membership.objects.create(project=vision, user=owner, cluster_user=account.username)
    index = client.get("/files/").content.decode()
    assert "Project vision" in index and "Project nlp" not in index
    shared = f"/files/{filecluster.name}/project-vision/"
    page = client.get(shared)
    assert [r["shown"] for r in page.context["rows"]] == ["data"]
    assert b"data-read-only" in page.content and b"data-mkdir" not in page.content
    refused = client.post(shared + "mkdir/", {"path": "", "name": "mine"}, follow=True)
    assert b"read-only for you here" in refused.content
    assert client.get(f"/files/{filecluster.name}/project-nlp/").status_code == 404
    Project.objects.filter(pk=vision.pk).update(default_role="member")
    made = client.post(shared + "mkdir/", {"path": "", "name": "mine"}, follow=True)
    assert b"Made the folder mine." in made.content
