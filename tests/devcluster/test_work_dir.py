"""A job's work directory, browsed and downloaded from its page (real sshd, SFTP, Slurm):
outputs are one click away, and nothing the job makes there leads the portal elsewhere."""

import pytest

from clusters import files
from tests.devcluster.helpers import run_job

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]

MAKE_OUTPUTS = (
    "mkdir -p outputs/ckpt && seq 1 3000 > outputs/ckpt/model.txt && echo done > outputs/a.txt; "
    "ln -s /etc/passwd outputs/passwd; ln -s /etc escape; mkfifo outputs/pipe; "
    "touch \"outputs/$(printf 'bad\\nname\\033[31m')\""
)


@pytest.fixture
def job(devcluster, owner):
    return run_job(owner, devcluster, MAKE_OUTPUTS)


def test_the_owner_browses_and_downloads_outputs(client, owner, job, settings):
    client.force_login(owner)
    root = client.get(f"/jobs/{job.pk}/files/")
    assert root.status_code == 200
    names = [r["entry"].name for r in root.context["rows"]]
    assert {"outputs", "escape", "job.sh", "stdout.log"} <= set(names)
    # The portal's secrets are not shown, nor served, to anyone.
    assert not {".portal_secret", ".portal_metrics_token"} & set(names)
    assert client.get(f"/jobs/{job.pk}/files/download/?path=.portal_secret").status_code == 400

    outputs = client.get(f"/jobs/{job.pk}/files/?path=outputs")
    kinds = {r["shown"]: r["entry"].kind for r in outputs.context["rows"]}
    assert kinds == {
        "ckpt": "dir",
        "a.txt": "file",
        "passwd": "a symbolic link",
        "pipe": "a FIFO",
        "bad\\nname\\x1b[31m": "file",  # shown escaped: no newline, no escape in the page
    }
    assert "(a FIFO; not served)" in outputs.content.decode()
    # Its owner registers a file or folder as a model from here (the run's page's form).
    register = f'href="/jobs/{job.pk}/?register=outputs/ckpt#register" data-register-file'
    assert register in outputs.content.decode()
    assert outputs.content.decode().count("data-register-file") == 3  # not the link, not the FIFO
    assert b"\x1b" not in outputs.content
    # The owner's work directory is in their home: the file manager opens it too.
    manager = outputs.context["manager"]
    assert manager.startswith(f"/files/{job.cluster.name}/home/?path=.portal%2Fjobs%2F")
    assert manager.endswith("%2Foutputs") and client.get(manager).status_code == 200

    settings.PORTAL_DOWNLOAD_CHUNK_BYTES = 4096  # 14 kB in several SFTP reads
    got = client.get(f"/jobs/{job.pk}/files/download/?path=outputs/ckpt/model.txt")
    assert got.status_code == 200 and got["Content-Disposition"].endswith('"model.txt"')
    body = b"".join(got.streaming_content)
    assert body == "".join(f"{i}\n" for i in range(1, 3001)).encode()
    assert int(got["Content-Length"]) == len(body)
    # A broken download resumes where it stopped (curl -C - sends this).
    rest = client.get(
        f"/jobs/{job.pk}/files/download/?path=outputs/ckpt/model.txt",
        HTTP_RANGE="bytes=10000-",
        HTTP_IF_RANGE=got["ETag"],
    )
    assert (
        rest.status_code == 206
        and rest["Content-Range"] == f"bytes 10000-{len(body) - 1}/{len(body)}"
    )
    assert b"".join(rest.streaming_content) == body[10000:]


@pytest.mark.parametrize(
    ("path", "status", "text"),
    [
        ("outputs/passwd", 400, "passwd is a symbolic link"),
        ("outputs/pipe", 400, "pipe is a FIFO"),
        ("escape/passwd", 400, "escape is not a directory"),  # a link on the way
        ("../../../etc/passwd", 400, "Not a path inside"),
        ("outputs/none.txt", 404, "No such file"),
    ],
)
def test_links_fifos_and_paths_out_are_refused(client, owner, job, path, status, text):
    client.force_login(owner)
    response = client.get(f"/jobs/{job.pk}/files/download/", {"path": path})
    assert response.status_code == status and text in response.content.decode()


def test_a_file_too_big_to_serve_says_how_to_copy_it(client, owner, job, settings):
    settings.PORTAL_DOWNLOAD_MAX_BYTES = 1000
    client.force_login(owner)
    response = client.get(f"/jobs/{job.pk}/files/download/?path=outputs/ckpt/model.txt")
    assert response.status_code == 413
    assert f"scp or rsync from 127.0.0.1:{job.work_dir}/outputs/ckpt/model.txt" in (
        response.content.decode()
    )


def test_another_user_sees_nothing(client, outsider, job):
    client.force_login(outsider)
    assert client.get(f"/jobs/{job.pk}/files/").status_code == 404
    assert client.get(f"/jobs/{job.pk}/files/download/?path=job.sh").status_code == 404


def test_path_parts_are_plain_names_inside_the_directory():
    assert files.work_path_parts("a//b/./c") == ["a", "b", "c"]
    assert files.work_path_parts("") == []
    for bad in ("..", "a/../..", "a\x00b", "x" * 256, "/".join("a" * 33)):
        with pytest.raises(files.BadPath):
            files.work_path_parts(bad)
