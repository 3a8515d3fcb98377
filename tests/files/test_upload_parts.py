"""The parts of an upload that need no cluster: the digest read from what the cluster
printed."""

import hashlib
import shutil
import subprocess

import pytest

from files import uploads
from jobs.cluster import ssh


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
