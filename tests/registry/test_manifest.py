"""A version's manifest (registry/manifest.py): its script run by this machine's sh, GNU find
and coreutils on folders a job could leave (names with newlines and bytes that are not
UTF-8, links, FIFOs, too many files), and its parser on what a hostile login prints. The
dev cluster's test (tests/devcluster/test_registry.py) runs it over SSH as the person."""

from __future__ import annotations

import hashlib
import os
import subprocess

import pytest

from clusters import ssh
from registry import manifest


class HereConnection:
    """What manifest.read asks of an SSH connection, run by this machine's sh (the unit
    tests' stand-in; the SSH path is the dev cluster's test)."""

    def __init__(self, banner: bytes = b""):
        self.banner = banner

    def run(self, argv, *, check, timeout, max_bytes):
        done = subprocess.run(argv, capture_output=True, timeout=timeout, check=False)
        out = self.banner + done.stdout
        assert len(out) <= max_bytes
        return ssh.Result(out.decode(errors="replace"), done.stderr.decode(), done.returncode)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_folder_of_files_with_hostile_names_is_listed_with_sizes_and_digests(tmp_path):
    model = tmp_path / "model"
    (model / "sub dir").mkdir(parents=True)
    files = {
        "MLmodel": b"flavors: {}\n",
        "sub dir/weights.bin": os.urandom(70_000),
        "new\nline": b"two\nlines",
        "empty": b"",
    }
    for name, data in files.items():
        (model / name).write_bytes(data)
    os.makedirs(os.fsencode(model) + b"/caf\xe9", exist_ok=True)
    with open(os.fsencode(model) + b"/caf\xe9/x", "wb") as out:
        out.write(b"latin-1 folder")
    # MLflow's client rewrites this one at each load from where the files sit: left out.
    (model / "registered_model_meta").write_text("model_name: digits\n")

    found = manifest.read(HereConnection(), str(model), timeout=30)

    expected = {name: (len(data), sha(data)) for name, data in files.items()}
    expected["caf\ufffd/x"] = (14, sha(b"latin-1 folder"))
    assert {n: (s, h) for n, s, h in found.entries} == expected
    assert [n for n, _, _ in found.entries] == sorted(expected)
    assert found.total_bytes == sum(s for s, _ in expected.values())
    assert found.digest == manifest.digest_of([list(e) for e in found.entries])
    # The same files, read again: the same digest; one byte changed: another.
    assert manifest.read(HereConnection(), str(model), timeout=30).digest == found.digest
    (model / "empty").write_bytes(b"x")
    assert manifest.read(HereConnection(), str(model), timeout=30).digest != found.digest


def test_one_file_is_a_version_of_its_own(tmp_path):
    checkpoint = tmp_path / "epoch-3.ckpt"
    checkpoint.write_bytes(b"weights")
    found = manifest.read(HereConnection(), str(checkpoint), timeout=30)
    assert found.entries == [("epoch-3.ckpt", 7, sha(b"weights"))]


@pytest.mark.parametrize(
    "make, said",
    [
        (lambda d: (d / "link").symlink_to("/etc/passwd"), "link is a symbolic link"),
        (lambda d: os.mkfifo(d / "pipe"), "pipe is a FIFO"),
    ],
)
def test_links_and_fifos_are_refused_and_nothing_blocks(tmp_path, make, said):
    model = tmp_path / "model"
    model.mkdir()
    (model / "weights").write_bytes(b"w")
    make(model)
    with pytest.raises(manifest.ManifestError, match=said):
        manifest.read(HereConnection(), str(model), timeout=30)


def test_what_cannot_be_a_version_says_why(tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "empty")
    many = tmp_path / "many"
    many.mkdir()
    for i in range(4):
        (many / str(i)).write_bytes(b"x" * 10)
    cases = {
        "missing": "there is no file or folder there",
        "link": "the path is a symbolic link",
        "empty": "There are no files there",
    }
    for name, said in cases.items():
        with pytest.raises(manifest.ManifestError, match=said):
            manifest.read(HereConnection(), str(tmp_path / name), timeout=30)
    monkeypatch.setattr(manifest, "MAX_FILES", 3)
    with pytest.raises(manifest.ManifestError, match="more than 3 files"):
        manifest.read(HereConnection(), str(many), timeout=30)
    monkeypatch.setattr(manifest, "MAX_FILES", 10)
    monkeypatch.setattr(manifest, "MAX_BYTES", 39)
    with pytest.raises(manifest.ManifestError, match="40 bytes, over the portal's bound"):
        manifest.read(HereConnection(), str(many), timeout=30)


def test_a_login_banner_and_forged_lines_are_not_the_answer(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "w").write_bytes(b"w")
    banner = b"Welcome!\n0123456789abcdef sizes\n5 ./forged\x00\n"
    found = manifest.read(HereConnection(banner), str(model), timeout=30)
    assert found.entries == [("w", 1, sha(b"w"))]


def test_an_answer_cut_short_or_out_of_step_is_refused():
    nonce = "00112233aabbccdd"
    start = f"\n{nonce} sizes\n".encode() + b"1 ./a\x00" + f"\n{nonce} sums\n".encode()
    digest = sha(b"a").encode()
    with pytest.raises(manifest.ManifestError, match="cut short"):
        manifest.parse(start + digest + b"  ./a\x00", nonce)
    end = f"\n{nonce} end\n".encode()
    assert manifest.parse(start + digest + b"  ./a\x00" + end, nonce).entries == [
        ("a", 1, sha(b"a"))
    ]
    with pytest.raises(manifest.ManifestError, match="changed while"):
        manifest.parse(start + digest + b"  ./b\x00" + end, nonce)
    with pytest.raises(manifest.ManifestError, match="did not read"):
        manifest.parse(start + b"zz  ./a\x00" + end, nonce)
