"""Tags, notes and parameters through the API: given at launch, shown on read, changed by the
owner only (PATCH), within their bounds and the token's scopes."""

import pytest

from jobs.models import Job
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    from jobs import tasks

    monkeypatch.setattr(tasks.submit_job, "delay", lambda *a: None)


@pytest.fixture
def api(owner, catalog):
    return factories.api_client(owner, "test")


@pytest.fixture
def job(owner, catalog):
    return factories.training_job(owner, catalog)


def test_a_launch_takes_tags_params_and_keep_diff_and_reads_them_back(api):
    response = api.post(
        "/api/v1/jobs/",
        {
            "command": "python train.py",
            "tags": ["resnet", "seed=3"],
            "params": {"lr": 0.01, "opt": "adam", "seed": 3},
            "keep_diff": True,
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["tags"] == ["resnet", "seed=3"] and body["keep_diff"] is True
    assert body["params"] == {"lr": 0.01, "opt": "adam", "seed": 3}
    job = Job.objects.get(pk=body["id"])
    assert job.tag_names == ["resnet", "seed=3"] and job.params["lr"] == 0.01
    read = api.get(f"/api/v1/jobs/{job.pk}/").json()
    assert read["tags"] == ["resnet", "seed=3"] and read["notes"] == "" and read["reproduce"] == {}
    listed = api.get("/api/v1/jobs/").json()["results"][0]
    assert listed["tags"] == ["resnet", "seed=3"] and listed["params"]["seed"] == 3


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tags", ["two words"]),
        ("tags", [f"t{i}" for i in range(33)]),
        ("params", {"bad name": 1}),
        ("params", {"lr": [0.1]}),
        ("params", {f"p{i}": i for i in range(101)}),
        ("params", {"lr": 1, "LR": 2}),
    ],
)
def test_a_launch_with_bad_tags_or_params_is_refused_and_creates_nothing(api, field, value):
    response = api.post("/api/v1/jobs/", {"command": "true", field: value}, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    assert not Job.objects.exists()


def test_the_owner_changes_the_note_and_tags(api, job):
    url = f"/api/v1/jobs/{job.pk}/"
    response = api.patch(url, {"notes": "lr too high", "tags": ["a", "b"]}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["notes"] == "lr too high" and response.json()["tags"] == ["a", "b"]
    response = api.patch(url, {"add_tags": ["c"], "remove_tags": ["a"]}, format="json")
    assert response.json()["tags"] == ["b", "c"]
    job.refresh_from_db()
    assert job.notes == "lr too high" and job.tag_names == ["b", "c"]


@pytest.mark.parametrize(
    "body",
    [
        {"notes": "x" * 10_001},
        {"tags": ["$(x)"]},
        {"add_tags": [f"t{i}" for i in range(33)]},
        {"tags": ["a"], "add_tags": ["b"]},
        {},
        {"params": {"lr": 1}},  # a run's parameters are what it ran with: not edited
    ],
)
def test_bad_changes_are_refused(api, job, body):
    response = api.patch(f"/api/v1/jobs/{job.pk}/", body, format="json")
    assert response.status_code == 400, response.content
    job.refresh_from_db()
    assert job.notes == "" and job.tag_names == [] and job.params == {}


def test_the_tag_bound_counts_the_tags_a_job_has(api, job):
    job.set_tags([f"t{i}" for i in range(32)])
    response = api.patch(f"/api/v1/jobs/{job.pk}/", {"add_tags": ["more"]}, format="json")
    assert response.status_code == 400 and "at most 32" in str(response.json())


def test_another_users_job_is_a_404_and_staff_may_only_read(job, outsider, staff):
    url = f"/api/v1/jobs/{job.pk}/"
    other = factories.api_client(outsider)
    assert other.patch(url, {"notes": "mine"}, format="json").status_code == 404
    assert factories.api_client(staff).get(url).status_code == 404  # without the admin scope
    admin = factories.api_client(staff, scopes="read,submit,admin")
    assert admin.get(url).status_code == 200
    assert admin.patch(url, {"notes": "mine"}, format="json").status_code == 403
    job.refresh_from_db()
    assert job.notes == ""


def test_a_read_only_token_cannot_change_them(owner, job):
    reader = factories.api_client(owner, "r", scopes="read")
    response = reader.patch(f"/api/v1/jobs/{job.pk}/", {"notes": "x"}, format="json")
    assert response.status_code == 403


def test_a_jobs_own_metrics_token_is_no_api_credential(job):
    from metrics import ingest

    token = ingest.issue_token(job)
    client = factories.bearer_client(token)
    response = client.patch(f"/api/v1/jobs/{job.pk}/", {"notes": "x"}, format="json")
    assert response.status_code == 401
