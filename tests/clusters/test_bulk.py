"""clusters/bulk.py on this machine alone: the processes it starts (``sleep`` standing
in for an OpenSSH master) outlive the request thread that asked for them and die with
the web worker however it ends; its leftovers are swept; and its writer (``sh`` standing
in for a multiplexed client, this machine's GNU dd for the cluster's) puts the bytes at
the offset, keeps what arrived of a broken body, tells dd's refusals from ssh's
failures, and times out on a cluster that takes nothing instead of buffering."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from clusters import bulk, files, openssh, ssh
from tests import polling

BASE_DIR = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_master_outlives_the_request_thread_that_started_it():
    """PR_SET_PDEATHSIG fires when the thread that forked ends: masters are forked by the
    process's own launcher thread, not by the request's."""
    started = []
    thread = threading.Thread(
        target=lambda: started.append(bulk._launcher.popen(["sleep", "30"])), name="request"
    )
    thread.start()
    thread.join()
    process = started[0]
    try:
        time.sleep(0.3)
        assert process.poll() is None
    finally:
        process.kill()
        process.wait()


def test_a_master_dies_with_its_web_worker_even_killed():
    """A worker killed outright (SIGKILL: no atexit) still takes its masters with it."""
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
                import django, sys, time
                django.setup()
                from clusters import bulk
                print(bulk._launcher.popen(["sleep", "60"]).pid, flush=True)
                time.sleep(60)
                """
            ),
        ],
        cwd=BASE_DIR,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings", "PORTAL_DEMO": "1"},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None
        master = int(worker.stdout.readline())
        assert _alive(master)
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        polling.until(lambda: not _alive(master), 10, "the master to end with its worker", 0.05)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()


def test_a_masters_directory_left_behind_is_removed_by_the_next_start(tmp_path):
    """A worker killed outright leaves its master's directory (the master ends with it,
    taking its socket): with no socket and older than any login, it goes; a live master's
    (its socket there), one still logging in (recent) and anything else stay."""
    old = time.time() - bulk.STALE_SECONDS - 1
    for name, socket in (("bulk-left", False), ("bulk-live", True), ("bulk-new", False)):
        (tmp_path / name).mkdir(mode=0o700)
        (tmp_path / name / ("ctl" if socket else "key")).write_text("x")
        if name != "bulk-new":
            os.utime(tmp_path / name, (old, old))
    (tmp_path / "other").mkdir()
    os.utime(tmp_path / "other", (old, old))
    (tmp_path / "bulk-link").symlink_to(tmp_path / "other")
    bulk._remove_stale(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "bulk-link",
        "bulk-live",
        "bulk-new",
        "other",
    ]


def _local(tmp_path, run=None) -> bulk.Master:
    """A Master whose "multiplexed client" runs the command here with sh: _send's own
    logic (pipe, statuses, messages) against this machine's GNU dd."""
    return bulk.Master(
        process=None,  # (_send never looks at the master process)
        directory=str(tmp_path),
        argv_for=run or (lambda command: ["sh", "-c", command]),
        key_id="",
        expires_at=None,
    )


def test_the_bytes_land_at_the_offset_and_the_count_is_what_was_sent(tmp_path):
    target = tmp_path / "partial"
    target.write_bytes(b"head")
    pieces = [os.urandom(700_000) for _ in range(5)]  # more than the pipe holds
    command = openssh.writer_command(str(target), 4)
    assert bulk._send(_local(tmp_path), command, pieces, timeout=30) == 3_500_000
    assert target.read_bytes() == b"head" + b"".join(pieces)


def test_a_body_that_breaks_off_keeps_what_arrived_and_says_why(tmp_path):
    target = tmp_path / "partial"
    target.write_bytes(b"")

    def body():
        yield b"first "
        yield b"second"
        raise OSError("the client went away")

    command = openssh.writer_command(str(target), 0)
    with pytest.raises(OSError, match="went away"):
        bulk._send(_local(tmp_path), command, body(), timeout=30)
    assert target.read_bytes() == b"first second"


def test_dd_refusing_or_failing_and_ssh_failing_are_told_apart(tmp_path):
    (tmp_path / "outside").write_bytes(b"secret")
    (tmp_path / "link").symlink_to(tmp_path / "outside")
    link = openssh.writer_command(str(tmp_path / "link"), 0)
    with pytest.raises(files.NotARegularFile):
        bulk._send(_local(tmp_path), link, [b"x" * 3_000_000], timeout=30)
    assert (tmp_path / "outside").read_bytes() == b"secret"
    missing = openssh.writer_command(str(tmp_path / "gone"), 0)
    with pytest.raises(ssh.CommandFailed, match="No such file") as failed:
        bulk._send(_local(tmp_path), missing, [b"x"], timeout=30)
    assert failed.value.exit_status == 1 and len(failed.value.stderr) <= bulk.STDERR_MAX
    lost = _local(tmp_path, lambda _: ["sh", "-c", "echo 'mux_client: master gone' >&2; exit 255"])
    with pytest.raises(ssh.ClusterUnreachable, match="master gone"):
        bulk._send(lost, missing, [b"x"], timeout=30)


def test_a_cluster_that_takes_nothing_times_out_instead_of_buffering(tmp_path):
    stalled = _local(tmp_path, lambda _: ["sleep", "30"])  # never reads its stdin
    started = time.monotonic()
    with pytest.raises(ssh.CommandTimedOut, match="took no bytes"):
        bulk._send(stalled, "", iter([b"x" * 1024 * 1024] * 8), timeout=0.5)
    assert time.monotonic() - started < 10
