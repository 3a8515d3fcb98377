"""The parts of an upload that need no cluster: how much one SFTP write carries (what
the server says it takes), and the digest read from what the cluster printed."""

import hashlib
import shutil
import subprocess

import pytest
from paramiko import Message

from clusters import ssh
from files import remote, uploads


class Server:
    """An SFTP client's _request, answering limits@openssh.com as a server would."""

    def __init__(self, answer):
        self.answer = answer

    def _request(self, kind, name):
        assert name == "limits@openssh.com"
        if isinstance(self.answer, Exception):
            raise self.answer
        msg = Message()
        for value in self.answer:
            msg.add_int64(value)
        msg.rewind()
        return 201, msg


@pytest.mark.parametrize(
    "answer, size",
    [
        ((262144, 261120, 261120, 64), remote.WRITE_SIZE),  # OpenSSH 8.6 and later
        ((65536, 65536, 40000, 64), 40000),  # a server that takes less
        ((8192, 8192, 8192, 64), 8192),  # less than servers should: still what it says
        ((0, 0, 0, 0), remote.WRITE_SIZE),  # no limits set
        (OSError("Operation unsupported"), 32 * 1024),  # no limits: what every server takes
    ],
)
def test_an_upload_writes_as_much_at_once_as_the_server_says_it_takes(answer, size):
    assert remote.write_size(Server(answer)) == size


def test_a_timeout_asking_the_limits_is_not_taken_for_no_answer():
    with pytest.raises(TimeoutError):
        remote.write_size(Server(TimeoutError()))


@pytest.mark.parametrize(
    "out",
    [
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 */home/u/.x.portal-upload",
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08  /home/u/.x\n",
        "\\9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08  /home/u/a\\\\b\n",
    ],
)
def test_the_clusters_digest_is_read_from_openssl_or_sha256sum(out):
    digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    assert uploads._digest(out) == digest


@pytest.mark.parametrize("out", ["", "sh: 1: openssl: not found", "deadbeef  x"])
def test_anything_else_is_no_digest(out):
    with pytest.raises(ssh.ClusterError):
        uploads._digest(out)


@pytest.mark.parametrize("openssl", [True, False])
def test_the_hash_is_openssls_or_sha256sums_where_there_is_no_openssl(tmp_path, openssl):
    target = tmp_path / "a\\b"  # a name sha256sum escapes
    target.write_bytes(b"hello")
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("openssl", "sha256sum") if openssl else ("sha256sum",):
        (tools / tool).symlink_to(shutil.which(tool) or tool)
    out = subprocess.run(
        ["/bin/sh", "-c", uploads.HASH, "sh", str(target)],
        env={"PATH": str(tools)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert ("*" in out) == openssl  # (openssl -r marks the name with "*")
    assert uploads._digest(out) == hashlib.sha256(b"hello").hexdigest()
