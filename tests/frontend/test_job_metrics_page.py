"""The metrics part of the job page: which runs it offers to compare, and the markup
metrics.js draws into (the charts themselves are tested in Chromium, tests/e2e)."""

import re

import pytest

from metrics import ingest
from tests import factories

pytestmark = pytest.mark.django_db


def with_metrics(job):
    ingest.ingest(job, [ingest.Record(0, 0, 0, 0, 1.7e9, {"loss": 1.0})])
    return job


def metrics_section(client, job) -> str:
    response = client.get(f"/jobs/{job.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    return html[html.index('<section id="metrics"') : html.index('<section id="logs"')]


def offered(section: str) -> dict[int, str]:
    """The runs the compare list offers: {job id: the name legends give it}."""
    boxes = re.findall(r'<input type="checkbox" value="(\d+)"\s+data-run-name="([^"]*)"', section)
    return {int(pk): name for pk, name in boxes}


def test_compare_offers_only_the_owners_other_runs_with_metrics(client, owner, outsider, cluster):
    job = with_metrics(factories.job(owner, cluster, name="current"))
    other = with_metrics(factories.job(owner, cluster, name="wider"))
    factories.job(owner, cluster, name="no-metrics")
    with_metrics(factories.job(outsider, cluster, name="not-yours"))
    client.force_login(owner)

    section = metrics_section(client, job)

    assert offered(section) == {other.pk: f"#{other.pk} wider"}
    assert f'data-run-name="#{job.pk} current"' in section.split(">", 1)[0]


def test_a_run_without_a_name_is_named_by_its_image(client, owner, cluster):
    job = with_metrics(factories.job(owner, cluster))
    other = with_metrics(factories.job(owner, cluster))
    client.force_login(owner)

    assert offered(metrics_section(client, job)) == {other.pk: f"#{other.pk} Host"}


def test_staff_compare_with_the_owners_runs_not_their_own(client, owner, staff, cluster):
    job = with_metrics(factories.job(owner, cluster))
    other = with_metrics(factories.job(owner, cluster))
    with_metrics(factories.job(staff, cluster))
    client.force_login(staff)

    assert set(offered(metrics_section(client, job))) == {other.pk}


def test_no_other_runs_no_compare_control(client, owner, cluster):
    job = with_metrics(factories.job(owner, cluster))
    client.force_login(owner)

    assert "data-compare" not in metrics_section(client, job)


def test_page_has_the_x_axis_choices_and_a_hidden_system_panel(client, owner, cluster):
    job = factories.job(owner, cluster)
    client.force_login(owner)

    section = metrics_section(client, job)

    xaxis = section[
        section.index("data-xaxis") : section.index("</select>", section.index("data-xaxis"))
    ]
    assert re.findall(r'<option value="(\w+)"', xaxis) == ["step", "relative", "time"]
    assert "<div data-system hidden>" in section and "data-system-charts" in section
