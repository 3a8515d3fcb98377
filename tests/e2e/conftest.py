import os
from pathlib import Path

import pytest

from tests.e2e.pages import CHROMIUM, CHROMIUM_ARGS, SCREENSHOTS
from tests.livestack import LiveStack, MultiStack


@pytest.fixture(scope="package")
def playwright():
    """Package scope: Playwright's sync API keeps an event loop in this thread,
    which later (non-browser) tests must not inherit."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("PORTAL_REQUIRE_DEVCLUSTER") == "1":
            pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium as root")
        pytest.skip(f"{CHROMIUM} is missing")
    # Playwright's loop runs in this thread; the test code's database calls are
    # still synchronous and safe.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    try:
        with sync_playwright() as p:
            yield p
    finally:
        del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]


@pytest.fixture(scope="package")
def browser(playwright):
    browser = playwright.chromium.launch(
        executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
    )
    yield browser
    browser.close()


@pytest.fixture
def stack(devcluster, tmp_path):
    live = LiveStack(tmp_path, env={"PORTAL_EXPERIMENT_INTERVAL": "2"}).start()
    yield live
    live.stop()


@pytest.fixture
def multistack(devcluster, tmp_path):
    """Two web instances and two workers behind HAProxy (tests/livestack.MultiStack)."""
    live = MultiStack(tmp_path).start()
    yield live
    live.stop()


@pytest.fixture
def tls_browser(playwright, stack):
    """Chromium that trusts exactly the proxy's dev certificate key (no blanket ignore of TLS errors)."""
    from proxy.management.commands.make_dev_certs import spki_hash

    args = CHROMIUM_ARGS + [f"--ignore-certificate-errors-spki-list={spki_hash(stack.cert)}"]
    browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=args)
    yield browser
    browser.close()


@pytest.fixture
def screenshot():
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(page, name: str) -> None:
        page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)

    return take
