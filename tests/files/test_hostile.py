"""Hostile input to every field of the file manager, its uploads and its transfers, on the
dev cluster: ``../`` and absolute paths, a 10,000-deep path, names with a newline and an
escape sequence, a link to a folder outside the root the person could write (a bug that
followed it would change it), a FIFO, an upload offset past the file's end, two uploads
to one name at once. Each is a clear 4xx, and nothing outside the root changes."""

from __future__ import annotations

import secrets

import pytest

from files.models import Remote
from tests.devcluster.helpers import remote
from tests.files.tus import TUS, patch, start

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]

DEEP = "/".join(["d"] * 10_000)


@pytest.fixture
def outside(place):
    """A folder outside every root that the person may write, reached by a link inside
    the root (``out-link``); yields a function listing it with each file's content."""
    _client, _url, folder, account = place
    home = account.cluster.work_dir_root("home", account.username)
    there = f"/tmp/portal-outside-{secrets.token_hex(4)}"
    remote(
        account,
        [
            "sh",
            "-c",
            f"mkdir -p {there}/keep && printf precious > {there}/keep/file && "
            f"ln -s {there} {home}/{folder}/out-link",
        ],
    )

    def state() -> str:
        return remote(account, ["sh", "-c", f"cd {there} && find . | sort && cat keep/file"])

    yield state
    remote(account, ["rm", "-rf", "--", there])


def test_every_field_refuses_what_leaves_the_root(place, outside):
    client, url, folder, _account = place
    before = outside()
    escapes = ["../..", "/etc", f"{folder}/out-link", f"{folder}/out-link/keep", DEEP]
    bad_names = ["a\nb", "x\x1b[31m", "../up", "a/b", ".."]

    def refused(response, what):
        assert 400 <= response.status_code < 500, (what, response.status_code)
        assert b"\x1b" not in response.content, what
        return response

    for path in escapes:
        refused(client.get(url, {"path": path}), ("browse", path))
        refused(client.get(url + "view/", {"path": f"{path}/file"}), ("view", path))
        refused(client.get(url + "raw/", {"path": f"{path}/file"}), ("raw", path))
        refused(client.get(url + "download/", {"path": f"{path}/file"}), ("download", path))
        refused(client.get(url + "zip/", {"path": path}), ("zip", path))
        refused(client.post(url + "mkdir/", {"path": path, "name": "new"}), ("mkdir in", path))
        # (Deleting the link itself is allowed: it goes as a link, its target stays.)
        refused(client.post(url + "delete/", {"path": f"{path}/keep"}), ("delete", path))
        refused(
            client.post(url + "rename/", {"path": f"{folder}/notes.txt", "name": "n", "to": path}),
            ("move into", path),
        )
        refused(
            client.post(url + "rename/", {"path": f"{path}/keep", "name": "n", "to": folder}),
            ("move out of", path),
        )
        refused(start(client, url, 3, filename="up", path=path), ("upload into", path))
    for name in bad_names:
        refused(client.post(url + "mkdir/", {"path": folder, "name": name}), ("mkdir", name))
        refused(
            client.post(
                url + "rename/", {"path": f"{folder}/notes.txt", "name": name, "to": folder}
            ),
            ("rename to", name),
        )
        refused(start(client, url, 3, filename=name, path=folder), ("upload as", name))
    # A FIFO is never read, whichever way it is asked for.
    for view in ("view/", "raw/", "download/"):
        refused(client.get(url + view, {"path": f"{folder}/pipe"}), ("fifo", view))
    # Past the end of an upload, and two uploads to one name at once.
    first = start(client, url, 4, filename="twice", path=folder)
    assert first.status_code == 201
    assert patch(client, first["Location"], 10, b"data").status_code == 409
    second = start(client, url, 4, filename="twice", path=folder)
    assert second.status_code == 409 and "already being uploaded" in second.json()["error"]
    assert client.delete(first["Location"], **TUS).status_code == 204
    assert outside() == before


def test_a_transfer_form_refuses_what_leaves_the_root(place, outside, webdav, settings):
    client, _url, folder, account = place
    before = outside()
    dav = Remote.objects.create(
        owner=account.user, name="dav", kind="webdav", options={"url": webdav.url}
    )
    new = f"/files/{account.cluster.name}/home/transfer/"
    for path, remote_path in (
        ("../..", "x"),
        (DEEP, "x"),
        (folder, "a/../../b"),
        (folder, "line\nbreak"),
        ("new\x1b[31m", "x"),
    ):
        page = client.post(
            new,
            {
                "path": path,
                "remote": dav.pk,
                "direction": "from_remote",
                "remote_path": remote_path,
            },
        )
        assert page.status_code == 200, (path, remote_path)  # the form again, with why
        assert b"\x1b" not in page.content
        assert [str(m) for m in page.context["messages"]], (path, remote_path)
    assert not dav.transfers.exists()
    # The remotes page refuses an option that would add a line to rclone's config.
    page = client.post(
        "/remotes/",
        {"kind": "webdav", "name": "evil", "webdav-url": "http://h\n[x]\ntype = local"},
        follow=True,
    )
    assert "one line" in page.content.decode() and not Remote.objects.filter(name="evil").exists()
    assert outside() == before
