"""A second `make demo` on the data directory of a running stack: it stops with a message
before touching anything, and the running stack's notebooks still open."""

import fcntl
import os
import subprocess
import time

import pytest

from jobs.models import Job
from tests import factories
from tests.e2e.pages import launch, open_session, sign_in
from tests.livestack import ROOT, free_port

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]


def test_a_second_make_demo_refuses_and_the_first_stacks_notebook_still_opens(
    tls_browser, stack, owner
):
    factories.image("python-host", "Python (host)", offers_notebook=True, offers_batch=True)
    proxy_dir = stack.tmp / "proxy"
    admin_socket = proxy_dir / "admin.sock"
    before = (admin_socket.stat().st_ino, (proxy_dir / "haproxy.cfg").read_bytes())
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "MAKEFLAGS")}
    started = time.monotonic()
    second = subprocess.run(
        ["make", "demo", f"PORT={free_port()}", f"SESSION_PORT={free_port()}"],
        cwd=ROOT,
        env={**env, "PORTAL_DATA_DIR": str(stack.tmp)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.monotonic() - started
    assert second.returncode != 0, second.stdout[-2000:]
    assert "a portal stack already runs from" in second.stderr, second.stderr[-2000:]
    assert "Nothing was changed" in second.stderr
    print(f"\nsecond make demo refused in {took:.1f}s: {second.stderr.strip()}")
    # Nothing of the running proxy was touched: the same socket, the same configuration.
    assert (admin_socket.stat().st_ino, (proxy_dir / "haproxy.cfg").read_bytes()) == before
    assert not stack.exited(), stack.logs()

    # The running stack's routes still reach HAProxy: a notebook launched now opens.
    page = sign_in(tls_browser, stack, "owner", "owner-pass-123")
    launch(page, stack, "Python (host)", "Notebook session")
    job = Job.objects.get()
    _, lab = open_session(page, stack, job)
    lab.locator(".jp-LauncherCard").first.wait_for(timeout=60_000)
    page.goto(f"{stack.url}/jobs/{job.pk}/")
    page.get_by_role("button", name="Cancel job").click()
    page.locator("#cancel-dialog").get_by_role("button", name="Cancel job").click()
    page.locator("#job [data-badge]", has_text="Cancelled").wait_for(timeout=60_000)


def test_a_second_run_proxy_refuses_before_touching_the_running_ones_socket(stack):
    """With the same folder, or another one (--workdir) but the same admin socket and map
    from the settings, which are what a second HAProxy would take over."""
    proxy_dir = stack.tmp / "proxy"
    before = {p.name: p.stat().st_mtime_ns for p in proxy_dir.iterdir()}
    for workdir in (proxy_dir, stack.tmp / "elsewhere"):
        second = subprocess.run(
            [".venv/bin/python", "manage.py", "run_proxy", "--workdir", str(workdir)],
            cwd=ROOT,
            env=stack.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode != 0
        assert "belongs to a running run_proxy (PID" in second.stderr, second.stderr
        assert {p.name: p.stat().st_mtime_ns for p in proxy_dir.iterdir()} == before
    assert not stack.exited(), stack.logs()


def test_make_demo_refuses_while_another_make_demo_holds_the_data_directory(tmp_path):
    """The first `make demo` holds DATA_DIR/demo.lock from before its set-up; a second one
    stops at once, before set-up (nothing in the folder but the lock)."""
    data = tmp_path / "var"
    data.mkdir()
    fd = os.open(data / "demo.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "MAKEFLAGS")}
        second = subprocess.run(
            ["make", "demo", f"PORT={free_port()}", f"SESSION_PORT={free_port()}"],
            cwd=ROOT,
            env={**env, "PORTAL_DATA_DIR": str(data)},
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        os.close(fd)
    assert second.returncode != 0, second.stdout[-2000:] + second.stderr[-2000:]
    assert "its make demo holds" in second.stderr and "Nothing was changed" in second.stderr
    assert [p.name for p in data.iterdir()] == ["demo.lock"]
