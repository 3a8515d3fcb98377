"""`make demo` as a newcomer runs it, from a data directory where no one has signed in:
the console says one way in (the address, one user, one password), signing in that way in
Chromium lands on the dashboard at the first try, /docs/ serves this version's docs with
their search, and a minute of the idle stack's console holds no health-check, beat or
task line (ops/logs.py's Chatter, ops/middleware.py)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import pytest

from tests import idp, polling
from tests.livestack import ROOT, free_port

pytestmark = [pytest.mark.devcluster, pytest.mark.idp, pytest.mark.timeout(1200)]

SIGN_IN = re.compile(r"Sign in at (http://localhost:\d+/) as (\S+), password (\S+)")
CHATTER = re.compile(r"/healthz|/readyz|Sending due task|\] received|\] succeeded in")
IDLE_SECONDS = 60


class Console:
    """The demo's console, as written to a file (nothing is lost while nobody reads)."""

    def __init__(self, path) -> None:
        self.path = path
        self.offset = 0

    def text(self) -> str:
        return self.path.read_text(errors="replace")

    def new(self) -> str:
        text = self.text()
        fresh, self.offset = text[self.offset :], len(text)
        return fresh


@pytest.fixture
def demo(tmp_path, idp_provider):
    """`make demo` on its own data directory and ports, stopped with Ctrl-C afterwards."""
    if os.geteuid() != 0:
        pytest.skip("make demo's dev cluster, pool and provider need root")
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    port, session_port = free_port(), free_port()
    console = Console(tmp_path / "console.log")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "MAKEFLAGS")}
    # The provider keeps `make test`'s configuration (its demo URL is the default port's):
    # this stack's callback is registered, and removed afterwards, like a test stack's.
    env.update(PORTAL_DATA_DIR=str(data), PORTAL_IDP_DEMO_URL="http://localhost:8000")
    with idp.redirect_uris(idp_provider, f"http://localhost:{port}"):
        with open(console.path, "wb") as out:
            process = subprocess.Popen(
                ["make", "--no-print-directory", "demo", f"PORT={port}"]
                + [f"SESSION_PORT={session_port}"],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            yield process, console, data
        finally:
            stop(process)
            subprocess.run(
                ["bash", "deploy/redis.sh", "stop"],
                cwd=ROOT,
                env={**env, "PORTAL_DATA_DIR": str(data)},
                timeout=60,
                check=False,
            )


def stop(process: subprocess.Popen) -> None:
    """Ctrl-C, as a person stops it; what is left after a minute is killed."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


def test_make_demo_says_one_way_in_that_works_and_then_stays_quiet(demo, browser, idp_provider):
    process, console, data = demo
    found = polling.until(
        lambda: SIGN_IN.search(console.text()) or process.poll() is not None and "exited",
        900,
        lambda: f"make demo's sign-in line: {console.text()[-3000:]}",
        interval=1,
    )
    assert found != "exited", console.text()[-5000:]
    url, user, password = found.groups()
    text = console.text()
    assert len(SIGN_IN.findall(text)) == 1 and user == "demo"
    # One password: the provider's, never also the local one.
    assert password == idp_provider.users["demo"].password
    assert (data / "demo-password").read_text().strip() not in text

    page = browser.new_context().new_page()
    page.goto(url)
    page.get_by_role("link", name=re.compile("^Sign in with")).click()
    page.wait_for_url(f"{idp_provider.origin}/**")
    page.fill("#username", user)
    page.fill("#password", password)
    page.click("#loginbut")
    page.get_by_role("button", name="Continue").click()
    page.wait_for_url(url)
    page.get_by_role("button", name="Sign out demo").wait_for()

    # The docs of this version, offline, with their search.
    page.goto(f"{url}docs/")
    assert "HPC portal" in page.title()
    page.goto(f"{url}docs/search.html?q=notebook")
    page.locator("#search-results li").first.wait_for(timeout=30_000)
    page.context.close()

    console.new()
    started = time.monotonic()
    idle = ""
    while time.monotonic() - started < IDLE_SECONDS:
        idle += console.new()
        chatter = [line for line in idle.splitlines() if CHATTER.search(line)]
        assert not chatter, chatter[:5]
        assert process.poll() is None, console.text()[-3000:]
        time.sleep(1)
    print(f"\nthe idle minute's console ({len(idle.splitlines())} lines):\n{idle[-2000:]}")
