"""files/rclone.py on its own: remotes' options as hostile input, the config file, the
obscured secret rclone reads back, the wrapper run by a real shell, and rclone's JSON log
(captured from Debian's rclone 1.60: tests/files/data/rclone-copy.jsonl) read as data."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from files import rclone
from tests.polling import until

DATA = Path(__file__).parent / "data"


def test_obscure_is_what_rclone_reveals():
    secret = "pa ss=wörd#;x"
    obscured = rclone.obscure(secret)
    assert secret not in obscured and rclone.reveal(obscured) == secret
    if shutil.which("rclone") is None:
        pytest.skip("no rclone here to read it back")
    # base64url may start with "-": after "--" rclone reads it as the argument, not a flag.
    shown = subprocess.run(
        ["rclone", "reveal", "--", obscured], capture_output=True, text=True, check=True
    ).stdout
    assert shown.strip() == secret


@pytest.mark.parametrize(
    ("kind", "options", "message"),
    [
        ("webdav", {"url": "http://x\n[evil]\ntype = local"}, "one line"),
        ("webdav", {"url": "file:///etc"}, "http://"),
        # Before: kept (and shown) in clear in the remote's options.
        ("webdav", {"url": "https://ann:hunter22@dav.example.org/"}, "without a user"),
        ("webdav", {"url": "http://h", "token": "x"}, "no option 'token'"),
        ("sftp", {"host": "-oProxyCommand=sh"}, "host name"),
        ("sftp", {"host": "h", "port": "99999"}, "1 to 65535"),
        ("sftp", {"host": "h", "key_file": "relative/key"}, "starting with"),
        ("s3", {"provider": "Evil"}, "one of"),
        ("local", {}, "kind of remote"),
        ("webdav", {"url": "http://h/" + "a" * 2000}, "at most"),
    ],
)
def test_options_are_checked(kind, options, message):
    with pytest.raises(rclone.BadRemote, match=message):
        rclone.checked_options(kind, options)


def test_config_holds_one_section_and_the_secret_obscured():
    text = rclone.config_text(
        "webdav", {"url": "https://dav.example.org/x", "user": "ann"}, "s3cr3t"
    )
    lines = text.splitlines()
    assert lines[:2] == ["[remote]", "type = webdav"]
    assert "url = https://dav.example.org/x" in lines and "user = ann" in lines
    (pass_line,) = [line for line in lines if line.startswith("pass = ")]
    assert "s3cr3t" not in text and rclone.reveal(pass_line[7:]) == "s3cr3t"
    with pytest.raises(rclone.BadRemote):
        rclone.config_text("webdav", {"url": "https://h"}, "two\nlines")
    s3 = rclone.config_text("s3", {"provider": "Minio", "access_key_id": "AK"}, "SK")
    assert "secret_access_key = SK" in s3  # S3 keys are not obscured by rclone
    assert "env_auth = true" in rclone.config_text("s3", {"provider": "AWS"}, "")


@pytest.mark.parametrize("path", ["a/../b", "..", "x\ny", "x\x1b[31m"])
def test_a_remote_path_stays_a_path(path):
    with pytest.raises(rclone.BadRemote):
        rclone.remote_path(path)


def test_the_captured_log_reads_as_progress():
    data = (DATA / "rclone-copy.jsonl").read_bytes()
    progress = rclone.read_log(data, cut=False)
    assert progress.seen
    assert (progress.bytes, progress.total_bytes) == (3000003, 3000003)
    assert (progress.files, progress.total_files) == (2, 2)
    assert progress.percent == 100 and progress.eta == 0 and progress.speed > 1_000_000
    # Its middle: the stats line seen then.
    middle = b"\n".join(data.split(b"\n")[:3])
    assert rclone.read_log(middle, cut=False).percent == 35


def test_hostile_log_lines_are_data():
    lines = [
        b'{"stats": {"bytes": 1e400, "totalBytes": -5, "transfers": "9", "eta": NaN}}',
        b"not json at all \x1b[2J",
        b'["a list"]',
        b'{"level": "error", "object": "x\\n\\u001b[31m", "msg": "' + b"A" * 5000 + b'"}',
        b'{"stats": {"bytes": 10, "totalBytes": 40, "speed": true, "eta": 3.5}}',
        b'{"stats": "no"',
    ]
    progress = rclone.read_log(b"garbage first piece\n" + b"\n".join(lines), cut=True)
    assert (progress.bytes, progress.total_bytes, progress.percent) == (10, 40, 25)
    assert progress.speed == 0.0 and progress.eta == 3.5
    assert "\x1b" not in progress.last_error and "\n" not in progress.last_error
    assert len(progress.last_error) <= 430


def test_first_error_drops_rclone_date():
    stderr = (
        b'2026/11/27 20:44:08 Failed to create file system for "remote:data2": '
        b"read metadata failed: Unauthorized: 401 Unauthorized\n"
    )
    assert rclone.first_error(stderr).startswith("Failed to create file system")
    assert rclone.first_error(b"\n\n") == ""


@pytest.mark.parametrize(
    ("raw", "pid"), [(b"1234\n", 1234), (b"1", None), (b"12a", None), (b"", None)]
)
def test_pid_and_status_are_small_numbers(raw, pid):
    assert rclone.parse_pid(raw) == pid
    assert rclone.parse_status(b"143\n") == 143 and rclone.parse_status(b"99999") is None


def _fake_rclone(tmp_path: Path, body: str) -> str:
    program = tmp_path / "fake rclone"  # a space: every argument is quoted
    program.write_text(f"#!/bin/sh\n{body}\n")
    program.chmod(0o755)
    return str(program)


def test_the_wrapper_writes_its_status_and_removes_the_config(tmp_path):
    state = tmp_path / "state dir"
    state.mkdir()
    (state / rclone.CONF).write_text("[remote]\n")
    argv_file = tmp_path / "argv"
    program = _fake_rclone(tmp_path, f"printf '%s\\n' \"$@\" > '{argv_file}'; exit 6")
    argv = rclone.command(program, "/src/it's here", "remote:$(touch pwned)", ["--bwlimit", "1M"])
    script = rclone.launch_script(str(state), argv)
    subprocess.run(["sh", "-c", script], check=True, cwd=tmp_path, timeout=10)
    until(lambda: (state / rclone.RC).exists(), 10, "the exit status")
    assert (state / rclone.RC).read_text().strip() == "6"
    assert not (state / rclone.CONF).exists()
    args = argv_file.read_text().splitlines()
    assert args[:3] == ["copy", "/src/it's here", "remote:$(touch pwned)"]
    assert not (tmp_path / "pwned").exists()
    # A second launch (a retried task) starts nothing: the shell's trace ends at the guard.
    again = subprocess.run(
        ["sh", "-x", "-c", script], check=True, cwd=tmp_path, timeout=10, capture_output=True
    )
    assert b"exit 0" in again.stderr and b"setsid" not in again.stderr


def test_a_stop_ends_the_whole_session(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / rclone.CONF).write_text("[remote]\n")
    program = _fake_rclone(tmp_path, "sleep 300 & wait")
    subprocess.run(
        ["sh", "-c", rclone.launch_script(str(state), [program, "copy"])], check=True, timeout=10
    )
    pid = until(
        lambda: rclone.parse_pid((state / rclone.PID).read_bytes()),
        10,
        "its pid",
        ignoring=(FileNotFoundError,),
    )
    until(lambda: b"sleep" in b"".join(_group(pid)), 10, "rclone and its child started")
    subprocess.run(["sh", "-c", rclone.stop_script(pid)], check=True, timeout=10)
    until(lambda: (state / rclone.RC).exists(), 10, "the exit status")
    assert rclone.parse_status((state / rclone.RC).read_bytes()) == rclone.STOPPED
    assert not (state / rclone.CONF).exists()
    until(lambda: not _group(pid), 10, lambda: f"every process of it gone: {_group(pid)}")


def _group(pgid: int) -> list[bytes]:
    """The command lines of the living processes of a process group."""
    found = []
    for p in os.listdir("/proc"):
        if p.isdigit() and _pgid(p) == pgid:
            try:
                found.append(Path(f"/proc/{p}/cmdline").read_bytes())
            except OSError:
                continue
    return found


def _pgid(pid: str) -> int | None:
    """The process group of a living process (None: gone, or a zombie no one reaped yet:
    this machine's init does not reap)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else int(fields[2])


def test_the_log_sample_is_rclones_shape():
    for line in (DATA / "rclone-copy.jsonl").read_text().splitlines():
        assert isinstance(json.loads(line), dict)


def test_a_fatal_error_before_the_json_logger_is_kept():
    log = (
        b'2026/11/27 20:44:08 Failed to create file system for "remote:data2": '
        b"read metadata failed: Unauthorized: 401 Unauthorized\n"
    )
    progress = rclone.read_log(log, cut=False)
    assert progress.last_plain.startswith("Failed to create file system") and not progress.seen
