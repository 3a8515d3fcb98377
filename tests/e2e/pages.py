"""What a person does in the browser, step by step, for the end-to-end tests."""

from pathlib import Path

from proxy.models import SessionLink
from registry.models import ModelVersion, RegisteredModel
from tests import polling

SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"

# Debian's chromium, headless, as every browser test and bench/load.py launch it.
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def sign_in(browser, stack, username: str, password: str, **context_args):
    """A new browser context signed in on the sign-in page; returns its page, on the
    dashboard."""
    context = browser.new_context(**context_args)
    page = context.new_page()
    page.goto(f"{stack.url}/accounts/login/")
    page.get_by_label("User name").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{stack.url}/")
    return page


def fill_launch_form(
    page, stack, image: str, kind: str, command: str | None = None, partition: str = "cpu"
) -> None:
    """On the launch page: ``image`` (its card's text) as ``kind`` (the label: "Batch
    command", "Notebook session") on ``partition``, typing ``command`` if given."""
    page.goto(f"{stack.url}/launch/")
    page.get_by_text(image).click()
    page.get_by_label(kind).check()
    if command is not None:
        page.get_by_label("Command", exact=True).fill(command)
    page.get_by_label("Partition").select_option(label=partition)


def press_launch(page, stack) -> int:
    """Press Launch; the new job's id, from the job page it lands on."""
    page.get_by_role("button", name="Launch").click()
    page.wait_for_url(f"{stack.url}/jobs/*/")
    return int(page.url.rstrip("/").split("/")[-1])


def launch(page, stack, image: str, kind: str, command: str | None = None) -> int:
    """Launch ``image`` as ``kind`` on partition cpu (fill_launch_form, press_launch)."""
    fill_launch_form(page, stack, image, kind, command)
    return press_launch(page, stack)


def page_errors(page, errors: list[str] | None = None) -> list[str]:
    """The page's uncaught JavaScript errors from now on, added to ``errors`` if given."""
    errors = [] if errors is None else errors
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return errors


def open_session(page, stack, job):
    """On ``job``'s page: wait for its session's link (the notebook registered), open it
    in a new tab and wait for the session's host; returns (its SessionLink, the tab, on a
    fresh JupyterLab workspace)."""
    open_link = page.locator("#session [data-open-session]")
    open_link.wait_for(state="visible", timeout=120_000)
    session = SessionLink.objects.get(job=job)
    assert session.state == "ready"
    with page.context.expect_page() as new_tab:
        open_link.click()
    tab = new_tab.value
    host = f"https://{session.public_id}.sessions.localhost:{stack.proxy_port}"
    tab.wait_for_url(f"{host}/lab**", timeout=60_000)
    # The cluster user's home outlives sessions, and JupyterLab restores the last workspace
    # (an earlier session's notebook, not the launcher): start from a clean one.
    tab.goto(f"{host}/lab?reset")
    return session, tab


def register_with_alias(page, stack, job, path: str, name: str, alias: str) -> RegisteredModel:
    """On ``job``'s page, register ``path`` of its work directory as model ``name``; on the
    model's page (once the worker read its manifest), point ``alias`` at version 1."""
    page.goto(f"{stack.url}/jobs/{job.pk}/")
    form = page.locator("[data-register-form]")
    form.get_by_label("File or folder").fill(path)
    form.get_by_label("as model").fill(name)
    form.get_by_role("button", name="Register").click()
    model = polling.until(
        lambda: RegisteredModel.objects.filter(name=name).first(), 30, "the model"
    )
    page.wait_for_url(f"{stack.url}/models/{model.pk}/")
    polling.until(
        lambda: ModelVersion.objects.filter(model=model, status="READY").exists(),
        60,
        "the manifest read by the worker",
    )
    page.get_by_role("textbox", name="Alias").fill(alias)
    page.get_by_role("button", name="Set alias").click()
    page.locator(f'[data-alias="{alias}"]').wait_for()
    return model
