"""The registry in Chromium (#62): a run on the dev cluster leaves a model folder; its
owner registers it from the run's page, the stack's worker reads the manifest over SSH
as them, they set the alias `champion` on the model's page and see the files on the
version's page. Another person sees no model and no page of it."""

import pytest

from registry.models import ModelVersion
from tests import factories
from tests.devcluster.helpers import run_until
from tests.e2e.pages import page_errors, register_with_alias, sign_in

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]

WRITE = (
    "mkdir -p model && printf 'weights' > model/weights.bin && echo 'flavors: {}' > model/MLmodel"
)


@pytest.mark.timeout(300)
def test_register_from_the_run_page_set_an_alias_and_nobody_else_sees_it(
    browser, stack, devcluster, owner, outsider, screenshot
):
    job = run_until(factories.submitted_job(owner, devcluster, WRITE), {"completed", "failed"})
    assert job.state == "completed", job.message
    page = sign_in(browser, stack, "owner", "owner-pass-123")
    errors = page_errors(page)
    model = register_with_alias(page, stack, job, "model", "digits", "champion")
    assert ModelVersion.objects.filter(model=model).count() == 1
    assert "version 1" in page.locator('[data-alias="champion"]').text_content()
    page.locator('[data-version="1"] a').first.click()
    page.locator("[data-manifest]").wait_for()
    manifest = page.locator("[data-manifest]").text_content()
    assert "weights.bin" in manifest and "MLmodel" in manifest
    assert "@champion" in page.locator("[data-version-facts]").text_content()
    screenshot(page, "registry-version")
    page.goto(f"{stack.url}/jobs/{job.pk}/")
    assert "digits version 1" in page.locator("[data-registered]").text_content()
    assert errors == []

    other = sign_in(browser, stack, "outsider", "outsider-pass-123")
    other.goto(f"{stack.url}/models/")
    assert "digits" not in other.locator("main").text_content()
    answer = other.goto(f"{stack.url}/models/{model.pk}/")
    assert answer.status == 404
    answer = other.goto(f"{stack.url}/models/{model.pk}/versions/1/")
    assert answer.status == 404
