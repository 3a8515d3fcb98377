"""A second `make demo` on the data directory of a running stack: it stops with a message
before touching anything, and the running stack's notebooks still open."""

import os
import subprocess
import time

import pytest

from jobs.models import Job
from proxy.models import SessionLink
from tests import factories
from tests.e2e.pages import launch, sign_in
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
    open_link = page.locator("#session [data-open-session]")
    open_link.wait_for(state="visible", timeout=120_000)
    session = SessionLink.objects.get(job=job)
    with page.context.expect_page() as new_tab:
        open_link.click()
    lab = new_tab.value
    lab.wait_for_url(
        f"https://{session.public_id}.sessions.localhost:{stack.proxy_port}/lab**", timeout=60_000
    )
    lab.locator(".jp-LauncherCard").first.wait_for(timeout=60_000)
    page.goto(f"{stack.url}/jobs/{job.pk}/")
    page.get_by_role("button", name="Cancel job").click()
    page.locator("#cancel-dialog").get_by_role("button", name="Cancel job").click()
    page.locator("#job [data-badge]", has_text="Cancelled").wait_for(timeout=60_000)


def test_a_second_run_proxy_on_the_same_folder_refuses_before_touching_it(stack):
    proxy_dir = stack.tmp / "proxy"
    before = {p.name: p.stat().st_mtime_ns for p in proxy_dir.iterdir()}
    second = subprocess.run(
        [".venv/bin/python", "manage.py", "run_proxy", "--workdir", str(proxy_dir)],
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
