"""`make test` ends by naming what it left running as the dev cluster's users
(devtools/leftovers.py): a process of theirs is named, and is no longer once it ends."""

import subprocess
from pathlib import Path

import pytest
from django.conf import settings

from devtools import leftovers
from tests import polling

pytestmark = pytest.mark.devcluster


def child_of(pid: int) -> str:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, timeout=10)
    return found.stdout.split()[0] if found.stdout.split() else ""


def named(users: list[str], pid: str) -> list[str]:
    return [line for line in leftovers.left(users) if line.split()[1:2] == [pid]]


def test_a_process_left_as_a_cluster_user_is_named(devcluster_info):
    users = leftovers.cluster_users(Path(settings.DEVCLUSTER_DIR))
    assert set(devcluster_info["users"]) <= set(users)
    runner = subprocess.Popen(["runuser", "-u", "hpcuser2", "--", "sleep", "300"])
    pid = ""
    try:
        pid = polling.until(lambda: child_of(runner.pid), 10, "the sleep to start")
        (line,) = named(users, pid)
        assert line.split()[0] == "hpcuser2" and line.endswith("sleep 300")
    finally:
        if pid:
            subprocess.run(["kill", pid], check=False)
        runner.wait(10)
    assert not named(users, pid)
