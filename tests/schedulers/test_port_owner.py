"""A session's port taken first by another user of a shared node (#59): the registration
and the session guard refuse it, so the proxy never routes to that user's server. The
kernel's tables parsed as captured, then real processes of the dev cluster's two users on
this host (hpcuser2 holds the port, hpcuser's job finds it)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from devtools.ports import free_port
from schedulers.launchers import TEMPLATES, template

sys.path.insert(0, str(TEMPLATES))
import port_owner  # noqa: E402 - the node's module, as the job runs it

# /proc/net/tcp as Linux prints it: a listener of uid 1001 on 127.0.0.1:8888 (0x22B8), one
# of uid 0 on 0.0.0.0:22, and an established connection of uid 1002 from port 8888.
CAPTURED = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:22B8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1001        0 51234 1 0000000000000000 100 0 0 10 0
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4321 1 0000000000000000 100 0 0 10 0
   2: 0100007F:22B8 0100007F:A1B2 01 00000000:00000000 00:00000000 00000000  1002        0 61234 1 0000000000000000 20 4 30 10 -1
   3: garbage
"""


def test_the_listeners_of_a_port_are_read_from_the_table():
    assert port_owner.parse(CAPTURED, 8888) == {1001}  # not the connected socket's 1002
    assert port_owner.parse(CAPTURED, 22) == {0}
    assert port_owner.parse(CAPTURED, 9999) == set()
    assert port_owner.listeners(8888, tables=("/nonexistent",)) is None


def cluster_users() -> tuple[str, str]:
    try:
        pwd.getpwnam("hpcuser")
        pwd.getpwnam("hpcuser2")
    except KeyError:
        pytest.skip("the dev cluster's users are not on this host: `make devcluster`")
    if os.geteuid() != 0:
        pytest.skip("needs root, to run as the dev cluster's users")
    return "hpcuser", "hpcuser2"


def held_by(user: str, port: int) -> subprocess.Popen:
    """``user`` listens on 127.0.0.1:``port`` (a plain HTTP server)."""
    proc = subprocess.Popen(
        ["runuser", "-u", user, "--", "python3", "-m", "http.server", "-b", "127.0.0.1", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while port_owner.listeners(port) in (None, set()):
        assert time.monotonic() < deadline, f"{user}'s server did not listen"
        time.sleep(0.05)
    return proc


@pytest.fixture
def folder():
    """A work directory of hpcuser's with the two node modules (outside pytest's own
    temporary tree, which only root may enter)."""
    me, _ = cluster_users()
    made = Path(tempfile.mkdtemp(prefix="portal-port-owner-"))
    made.chmod(0o755)
    for name in ("port_owner.py", "session_guard.py"):
        shutil.copy(TEMPLATES / name, made)
        (made / name).chmod(0o644)
    shutil.chown(made, me)
    yield made
    shutil.rmtree(made, ignore_errors=True)


def registration() -> str:
    """The Python of session_register.sh, as the job's shell hands it to python3."""
    text = template("session_register.sh").substitute()
    return text.split("<<'PORTAL_REGISTER' &\n", 1)[1].split("\nPORTAL_REGISTER", 1)[0]


def register_as(user: str, folder: Path, port: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            "runuser",
            "-u",
            user,
            "--",
            "env",
            "PORTAL_SESSION_TOKEN=t",
            "PORTAL_REGISTER_URL=",
            "python3",
            "-",
            str(port),
        ],
        input=registration(),
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("holder", ["hpcuser2", "hpcuser"])
def test_a_port_another_user_holds_is_never_registered(folder, holder):
    me, _ = cluster_users()
    port = free_port()
    server = held_by(holder, port)
    try:
        done = register_as(me, folder, port)
    finally:
        server.terminate()
        server.wait(10)
    if holder == me:  # its own app: registered as always
        assert done.returncode == 0, done.stderr
        assert (folder / "connection.json").exists()
    else:
        assert done.returncode == 1
        assert f"port {port} on this node is held by another user" in done.stderr
        assert not (folder / "connection.json").exists()


def test_the_guard_never_forwards_to_another_users_server(folder):
    me, other = cluster_users()
    port, guarded = free_port(), free_port()
    server = held_by(other, port)
    try:
        done = subprocess.run(
            [
                "runuser",
                "-u",
                me,
                "--",
                "env",
                "PORTAL_SESSION_TOKEN=" + "s" * 32,
                "python3",
                "session_guard.py",
                "--port",
                str(guarded),
                "--upstream",
                f"127.0.0.1:{port}",
                "--ready-path",
                "/",
                "--ready-seconds",
                "3",
                "--",
                "sleep",
                "30",
            ],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        server.terminate()
        server.wait(10)
    assert done.returncode == 3, (done.returncode, done.stderr)
    assert f"port {port} is held by another user" in done.stderr
