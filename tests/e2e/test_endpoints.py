"""Serving in Chromium (#62): a run on the dev cluster saves the digits model with MLflow;
its owner registers it from the run's page, sets the alias `champion`, serves the
version from its page, makes a key on the endpoint's page (shown once), and after a
program's requests through HAProxy with that key sees them counted there; they stop it.
Another person sees neither the endpoint nor its page."""

import json
import ssl
from pathlib import Path

import httpx
import pytest

from endpoints.models import Endpoint
from tests import polling
from tests.devcluster.helpers import remote
from tests.devcluster.test_endpoints import SAVE, SERVE, running
from tests.devcluster.test_mlflow_jobs import completed, need_training_libraries
from tests.e2e.pages import page_errors, register_with_alias, sign_in
from tests.livestack import LiveStack

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def stack(devcluster, tmp_path):
    need_training_libraries()
    env = {"PORTAL_SERVE_MLFLOW_COMMAND": SERVE, "PORTAL_ENDPOINT_IDLE_INTERVAL": "2"}
    live = LiveStack(tmp_path, env=env).start()
    yield live
    live.stop()


@pytest.mark.timeout(600)
def test_register_alias_serve_and_see_its_requests_on_its_page(
    browser, stack, devcluster, owner, outsider, screenshot, settings
):
    job = completed(owner, devcluster, SAVE)
    inputs = json.loads(remote(job.cluster_account, ["cat", f"{job.work_dir}/inputs.json"]))
    page = sign_in(browser, stack, "owner", "owner-pass-123")
    errors = page_errors(page)
    model = register_with_alias(page, stack, job, "model", "digits", "champion")

    page.goto(f"{stack.url}/models/{model.pk}/versions/1/")
    serve = page.locator("[data-serve-form]")
    serve.get_by_label("Endpoint name").fill("digits")
    serve.get_by_label("memory (GB)").fill("1")
    serve.get_by_role("button", name="Serve").click()
    endpoint = polling.until(lambda: Endpoint.objects.filter(name="digits").first(), 30, "it")
    page.wait_for_url(f"{stack.url}/endpoints/{endpoint.pk}/")
    keys = page.locator("[data-key-form]")
    keys.get_by_label("New key").fill("my program")
    keys.get_by_role("button", name="Make a key").click()
    secret = page.locator("[data-new-key] [data-secret]").text_content().strip()
    assert secret.startswith("pe_")
    page.reload()
    assert page.locator("[data-new-key]").count() == 0  # shown once
    assert page.locator(f'[data-key="{secret[:10]}"]').count() == 1

    endpoint = running(endpoint.pk)
    name = f"ep-{endpoint.public_id}.sessions.localhost"
    trusted = ssl.create_default_context(cafile=str(Path(settings.TLS_DIR) / "ca.pem"))
    with httpx.Client(verify=trusted, timeout=60) as program:
        for _ in range(3):
            answer = program.post(
                f"https://127.0.0.1:{stack.proxy_port}/invocations",
                headers={"Host": f"{name}:{stack.proxy_port}", "Authorization": f"Bearer {secret}"},
                json={"inputs": inputs[:5]},
                extensions={"sni_hostname": name},
            )
            assert answer.status_code == 200, answer.text

    def counted():
        page.reload()
        return int(page.locator("[data-requests]").text_content()) >= 3

    polling.until(counted, 60, "the requests on the endpoint's page", interval=2)
    assert "Running" in page.locator("[data-endpoint-facts]").text_content()
    screenshot(page, "endpoint")
    page.goto(f"{stack.url}/models/{model.pk}/versions/1/")
    assert page.locator("[data-lineage-endpoint]").text_content() == "digits"
    page.goto(f"{stack.url}/endpoints/{endpoint.pk}/")
    page.get_by_role("button", name="Stop").click()
    page.get_by_role("button", name="Start").wait_for()
    assert Endpoint.objects.get(pk=endpoint.pk).state == "stopped"
    assert errors == []

    other = sign_in(browser, stack, "outsider", "outsider-pass-123")
    other.goto(f"{stack.url}/endpoints/")
    assert "digits" not in other.locator("main").text_content()
    assert other.goto(f"{stack.url}/endpoints/{endpoint.pk}/").status == 404
