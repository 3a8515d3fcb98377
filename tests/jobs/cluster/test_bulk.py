"""The life of the processes jobs/cluster/bulk.py starts (with ``sleep`` standing in for
an OpenSSH master): they outlive the request thread that asked for them, and die with
the web worker however it ends."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from jobs.cluster import bulk
from tests import polling

BASE_DIR = Path(__file__).resolve().parents[3]


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
                from jobs.cluster import bulk
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
