"""GET /api/v1/compare/: the page's data over the API, read scope, errors, schema."""

import pytest
import yaml
from rest_framework.test import APIClient

from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs(owner, cluster):
    return [
        factories.compared_run(
            owner,
            cluster,
            tags=("sweep", f"seed={seed}"),
            params={"lr": lr},
            curves={"loss": [1.0, lr]},
        )
        for lr in (0.01, 0.1)
        for seed in (1, 2)
    ]


def test_a_read_token_compares_the_owners_runs_grouped(owner, runs):
    api = factories.api_client(owner, scopes="read")
    response = api.get("/api/v1/compare/", {"q": "tag:sweep", "group": "param.lr"})
    assert response.status_code == 200, response.content
    data = response.json()
    assert data["count"] == 4 and data["groups"] == ["0.01", "0.1"]
    assert data["columns"] == ["tags", "param.lr"]
    (chart,) = data["charts"]
    assert [len(g["runs"]) for g in chart["groups"]] == [2, 2]
    assert chart["groups"][1]["y"] == [1.0, 0.1]


def test_a_bad_query_is_a_400_naming_the_term(owner):
    api = factories.api_client(owner, scopes="read")
    response = api.get("/api/v1/compare/", {"q": "param.lr<" + "x" * 500})
    assert response.status_code == 400
    message = response.json()["error"]["fields"]["q"][0]
    assert "wants a number" in message and len(message) < 200


def test_another_user_sees_none_of_them(outsider, runs):
    api = factories.api_client(outsider, scopes="read")
    ids = ",".join(str(j.pk) for j in runs)
    data = api.get("/api/v1/compare/", {"q": "tag:sweep", "ids": ids}).json()
    assert data["count"] == 0 and data["runs"] == [] and data["charts"] == []


def test_it_is_in_the_schema():
    schema = yaml.safe_load(APIClient().get("/api/schema/").content)
    operation = schema["paths"]["/api/v1/compare/"]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {"q", "ids", "group", "baseline"}


def test_the_page_draws_the_same_data_and_refuses_bad_options(client, owner, runs):
    client.force_login(owner)
    page = client.get("/compare/", {"q": "tag:sweep", "group": "param.lr", "baseline": "group:0.1"})
    assert page.status_code == 200
    assert b'id="compare-data"' in page.content and b"frontend/compare.js" in page.content
    assert page.context["data"]["charts"][0]["baseline"]["name"] == "group 0.1"
    bad = client.get("/compare/", {"q": "state:asleep"})
    assert bad.status_code == 400 and b"is not one of" in bad.content
    dashboard = client.get("/")
    assert b'form="compare-form" name="ids"' in dashboard.content


def test_an_experiments_page_links_to_its_trials_compared(client, owner, cluster):
    experiment = factories.experiment_record(owner, cluster)
    client.force_login(owner)
    page = client.get(f"/experiments/{experiment.pk}/").content.decode()
    assert f'href="/compare/?q=experiment:{experiment.pk}"' in page


def test_more_runs_than_the_limit_are_refused_with_the_limit(client, owner, runs, settings):
    """Before: no bound, so one request could ask for every run there is (#39)."""
    settings.PORTAL_COMPARE_MAX_RUNS = 3
    api = factories.api_client(owner, scopes="read")
    ids = ",".join(str(j.pk) for j in runs)
    for query in ({"q": "tag:sweep"}, {"ids": ids}):
        response = api.get("/api/v1/compare/", query)
        assert response.status_code == 400
        assert "at most 3 can be compared" in response.json()["error"]["fields"]["q"][0]
    client.force_login(owner)
    page = client.get("/compare/", {"q": "tag:sweep"})
    assert page.status_code == 400 and b"at most 3 can be compared at once" in page.content
    settings.PORTAL_COMPARE_MAX_RUNS = 4  # up to the limit: compared
    assert api.get("/api/v1/compare/", {"q": "tag:sweep", "ids": ids}).json()["count"] == 4
