"""The REST API: tokens, every endpoint, one error format, cross-user 404s."""

import io
import re
from datetime import timedelta

import pytest
import yaml
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from catalog.models import ContainerImage
from identity.token_auth import TokenRateThrottle
from identity.tokens import ApiToken
from jobs.models import Job
from metrics import ingest
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(owner, catalog):
    return factories.api_client(owner, "test")


def error(response):
    body = response.json()["error"]
    assert (
        set(body) == {"status", "code", "message", "fields"}
        and body["status"] == response.status_code
    )
    return body


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    from jobs import tasks

    sent = []
    monkeypatch.setattr(tasks.submit_job, "delay", lambda *a: sent.append(("submit", a)))
    monkeypatch.setattr(tasks.cancel_job, "delay", lambda *a: sent.append(("cancel", a)))
    return sent


# --- tokens ------------------------------------------------------------------------------------


def test_issue_token_command_prints_a_working_token_and_stores_its_hash(owner):
    out = io.StringIO()
    call_command("issue_token", "owner", "--days", "7", stdout=out, stderr=io.StringIO())
    token = out.getvalue().strip()
    row = ApiToken.objects.get(user=owner)
    assert token.startswith("pp_") and token not in row.token_hash and row.expires_at
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert client.get("/api/v1/jobs/").status_code == 200


def test_bad_revoked_and_expired_tokens_are_refused(owner):
    row, token = ApiToken.issue(owner, "x")
    client = APIClient()
    for header in ("Bearer pp_nope", "Bearer ", "Bearer pm_job-token"):
        client.credentials(HTTP_AUTHORIZATION=header)
        response = client.get("/api/v1/jobs/")
        assert response.status_code == 401 and error(response)["message"]
    row.revoke()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert client.get("/api/v1/jobs/").status_code == 401
    row2, token2 = ApiToken.issue(owner, "old", days=1)
    ApiToken.objects.filter(pk=row2.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token2}")
    assert client.get("/api/v1/jobs/").status_code == 401
    assert APIClient().get("/api/v1/jobs/").status_code == 401  # nothing at all


def test_session_auth_works_for_the_browser(owner):
    client = APIClient()
    client.force_login(owner)
    assert client.get("/api/v1/jobs/").status_code == 200


def test_throttling_is_per_token(owner, monkeypatch):
    # New tokens, new keys: no other test's counts are seen (and a shared Redis is not flushed).
    monkeypatch.setattr(TokenRateThrottle, "THROTTLE_RATES", {"api": "3/min"})
    first, second = factories.api_client(owner), factories.api_client(owner)
    assert [first.get("/api/v1/jobs/").status_code for _ in range(4)] == [200, 200, 200, 429]
    assert second.get("/api/v1/jobs/").status_code == 200
    assert error(first.get("/api/v1/jobs/"))["code"] == "throttled"


def test_account_page_creates_shows_once_and_revokes_tokens(owner):
    client = APIClient()
    client.force_login(owner)
    client.post("/account/tokens/", {"name": "laptop", "days": "30", "scopes": ["read", "submit"]})
    page = client.get("/account/").content.decode()
    row = ApiToken.objects.get(user=owner, name="laptop")
    assert "data-new-token" in page
    assert "data-new-token" not in client.get("/account/").content.decode()  # shown once
    client.post(f"/account/tokens/{row.pk}/revoke/")
    row.refresh_from_db()
    assert row.revoked_at is not None


# --- catalog and clusters -------------------------------------------------------------------------


def test_containers_and_clusters(api):
    containers = api.get("/api/v1/containers/").json()
    # Disabled: not offered. Deprecated: offered last, marked, with the admins' note.
    assert [c["slug"] for c in containers] == ["python", "legacy"]
    assert [c["deprecated"] for c in containers] == [False, True]
    assert containers[1]["deprecation_note"] == "Use Python."
    assert containers[0]["default_command"] == "python train.py"
    clusters = api.get("/api/v1/clusters/").json()
    gpu = next(p for p in clusters[0]["partitions"] if p["name"] == "gpu")
    assert gpu["gpu_types"] == ["v100", "a100"] and gpu["max_gpus_per_job"] == 4
    assert api.get("/api/v1/containers/old/").status_code == 404


# --- jobs ---------------------------------------------------------------------------------------


def test_create_job_validates_like_the_form_and_queues_it(
    api, owner, no_broker, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            "/api/v1/jobs/",
            {
                "container": "python",
                "partition": "gpu",
                "kind": "batch",
                "command": "python train.py",
                "gpus": 2,
                "gpu_type": "a100",
                "cpus": 4,
                "memory_gb": 8,
                "time_limit": 30,
            },
            format="json",
        )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["state"] == "queued" and body["gpus"] == 2 and body["time_limit"] == 30
    assert body["cluster"] == "testcluster" and body["session_url"] is None
    assert no_broker == [("submit", (body["id"],))]


def test_a_multi_node_job_takes_its_layout_or_the_images_and_shows_its_shape(
    api, owner, cluster, no_broker
):
    from catalog.models import ContainerImage
    from clusters.models import Partition

    Partition.objects.filter(cluster=cluster, name="gpu").update(max_nodes=2, max_gpus_per_node=2)
    body = {"container": "python", "partition": "gpu", "command": "python train.py"}
    layout = {"nodes": 2, "tasks_per_node": 2, "gpus": 2, "launcher": "torchrun"}
    made = api.post("/api/v1/jobs/", {**body, **layout}, format="json").json()
    assert (made["nodes"], made["tasks_per_node"], made["launcher"]) == (2, 2, "torchrun")
    assert made["shape"] == "2 nodes × 2 tasks" and made["node_list"] == []
    # Left out, the layout is the image's (here the MPI demo's), as on the launch page.
    ContainerImage.objects.filter(slug="python").update(
        default_launcher="mpi", default_nodes=2, default_tasks_per_node=2
    )
    made = api.post("/api/v1/jobs/", {**body, "gpus": 0}, format="json").json()
    assert (made["nodes"], made["tasks_per_node"], made["launcher"]) == (2, 2, "mpi")
    # Any part of the layout given, the rest is one process on one node, not the image's.
    made = api.post("/api/v1/jobs/", {**body, "launcher": "none"}, format="json").json()
    assert (made["nodes"], made["tasks_per_node"], made["launcher"]) == (1, 1, "none")
    # On a single-node partition the image's nodes are capped, as on the launch page.
    made = api.post("/api/v1/jobs/", {**body, "partition": "cpu"}, format="json").json()
    assert (made["nodes"], made["tasks_per_node"], made["launcher"]) == (1, 2, "mpi")
    # A notebook is one process on one node, whatever the image suggests for batch jobs.
    made = api.post(
        "/api/v1/jobs/", {"container": "python", "kind": "notebook"}, format="json"
    ).json()
    assert (made["nodes"], made["tasks_per_node"], made["launcher"]) == (1, 1, "none")
    refused = api.post("/api/v1/jobs/", {**body, "nodes": 3}, format="json")
    assert error(refused)["fields"]["nodes"] == ["Partition gpu allows at most 2 node(s) per job."]


def test_gpus_by_capability_and_memory_by_the_api(api, owner, cluster, no_broker):
    factories.gpu_type(cluster, "v100", "7.0", 32, feature="v100")
    factories.gpu_type(cluster, "a100", "8.0", 80, feature="a100")
    body = {"container": "python", "partition": "gpu", "command": "python train.py"}
    made = api.post("/api/v1/jobs/", {**body, "min_gpu_capability": "8.0"}, format="json").json()
    assert (made["gpus"], made["gpu_type"], made["gpu_constraint"]) == (1, "a100", "")
    made = api.post("/api/v1/jobs/", {**body, "min_gpu_memory_gb": 16}, format="json").json()
    assert (made["gpu_type"], made["gpu_constraint"]) == ("", "v100|a100")
    refused = api.post("/api/v1/jobs/", {**body, "min_gpu_capability": "9.0"}, format="json")
    assert error(refused)["fields"]["min_gpu_capability"][0].startswith(
        "No GPU on partition gpu has compute capability ≥ 9.0. Closest: a100"
    )
    gpu = next(
        p
        for p in api.get("/api/v1/clusters/testcluster/").json()["partitions"]
        if p["name"] == "gpu"
    )
    assert [(g["name"], g["compute_capability"], g["memory_gb"]) for g in gpu["gpus"]] == [
        ("v100", "7.0", 32),
        ("a100", "8.0", 80),
    ]


def test_a_resumable_job_by_the_api_and_its_refusals(api, owner, cluster, no_broker):
    body = {
        "container": "python",
        "partition": "gpu",
        "command": "python train.py",
        "time_limit": 30,
    }
    made = api.post(
        "/api/v1/jobs/", {**body, "resumable": True, "max_attempts": 4}, format="json"
    ).json()
    assert (made["resumable"], made["max_attempts"], made["checkpoint_warning_seconds"]) == (
        True,
        4,
        120,
    )
    assert made["attempt"] == 0
    refused = api.post(
        "/api/v1/jobs/",
        {**body, "resumable": True, "checkpoint_warning_seconds": 900},
        format="json",
    )
    assert "at most a third" in error(refused)["fields"]["checkpoint_warning_seconds"][0]
    refused = api.post("/api/v1/jobs/", {**body, "max_attempts": 3}, format="json")
    assert error(refused)["fields"]["max_attempts"] == [
        "Only a resumable job runs several attempts."
    ]


@pytest.mark.parametrize(
    ("payload", "field", "text"),
    [
        ({"gpus": 9, "partition": "gpu"}, "gpus", "at most 4"),
        ({"partition": "nope"}, "partition", "no partition 'nope'"),
        ({"container": "old"}, "container", "catalog"),
        ({"kind": "batch", "command": ""}, "command", ""),
        ({"time_limit": 100000, "partition": "cpu"}, "time_limit", "at most 30"),
        ({"gpus": "many"}, "gpus", "valid integer"),
        ({"workdir": "tmp"}, "workdir", "valid choice"),
        ({"kind": "batch", "command": "x" * 100_001}, "command", "at most 100000"),
    ],
)
def test_bad_job_requests_get_field_errors(api, payload, field, text):
    body = {"kind": "batch", "command": "true", **payload}
    response = api.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 400, response.content
    err = error(response)
    assert field in err["fields"], err
    assert text in " ".join(err["fields"][field])
    assert not Job.objects.exists()


def test_list_filter_paginate_and_other_users_jobs_are_404(api, owner, outsider, cluster):
    image = ContainerImage.objects.get(slug="python")
    for i in range(25):
        factories.training_job(
            owner, cluster, "running" if i % 5 == 0 else "completed", image=image
        )
    theirs = factories.training_job(outsider, cluster, "queued", image=image)
    page = api.get("/api/v1/jobs/").json()
    assert page["count"] == 25 and len(page["results"]) == 20 and page["next"]
    assert api.get("/api/v1/jobs/?state=active").json()["count"] == 5
    assert api.get("/api/v1/jobs/?state=running,completed&page_size=100").json()["count"] == 25
    bogus = error(api.get("/api/v1/jobs/?state=bogus"))
    assert "Unknown state" in bogus["message"] + str(bogus["fields"])
    assert api.get("/api/v1/jobs/?created_after=yesterday").status_code == 400
    assert api.get("/api/v1/jobs/?page=99").status_code == 404
    for path in ("", "cancel/", "logs/", "metrics/"):
        method = api.post if path == "cancel/" else api.get
        response = method(f"/api/v1/jobs/{theirs.pk}/{path}")
        assert response.status_code == 404 and error(response)
    assert api.get("/api/v1/jobs/abc/").status_code == 404


def test_jobs_of_an_experiment_or_outside_experiments(api, owner, outsider, cluster):
    from experiments.models import Trial

    experiment = factories.experiment_record(owner, cluster)
    trial = Trial.objects.create(experiment=experiment, number=3, params={"lr": 0.1})
    folds = [factories.job(owner, cluster, "train", trial=trial, fold=f) for f in range(2)]
    own = factories.job(owner, cluster, "echo mine")
    theirs = factories.experiment_record(outsider, cluster)
    listed = api.get("/api/v1/jobs/").json()["results"]
    assert {(j["id"], j["experiment"], j["trial"], j["fold"]) for j in listed} == {
        (own.pk, None, None, None),
        *((f.pk, experiment.pk, 3, f.fold) for f in folds),
    }
    outside = api.get("/api/v1/jobs/?experiment=none").json()["results"]
    assert [j["id"] for j in outside] == [own.pk]
    inside = api.get(f"/api/v1/jobs/?experiment={experiment.pk}").json()["results"]
    assert sorted(j["id"] for j in inside) == sorted(f.pk for f in folds)
    assert api.get(f"/api/v1/jobs/?experiment={theirs.pk}").json()["count"] == 0
    for bad in ("x", "\u00b2", "1" * 19):
        response = api.get("/api/v1/jobs/", {"experiment": bad})
        assert response.status_code == 400 and "experiment" in error(response)["fields"]


def test_cancel_and_metrics(api, owner, cluster, no_broker, django_capture_on_commit_callbacks):
    image = ContainerImage.objects.get(slug="python")
    job = factories.training_job(owner, cluster, "running", image=image)
    ingest.ingest(job, ingest.parse_batch(factories.metric_records(50)).records)
    data = api.get(f"/api/v1/jobs/{job.pk}/metrics/?lo=10&hi=19").json()
    loss = next(s for s in data["series"] if s["key"] == "loss")
    assert loss["step"] == list(range(10, 20)) and not loss["downsampled"]
    csv = b"".join(api.get(f"/api/v1/jobs/{job.pk}/metrics/?format=csv").streaming_content)
    assert len(csv.decode().splitlines()) == 101
    assert api.get(f"/api/v1/jobs/{job.pk}/metrics/?lo=x").status_code == 400
    assert api.get(f"/api/v1/jobs/{job.pk}/logs/?stream=secret").status_code == 400
    for offset in ("-1", "x", "\u00b2", str(2**70)):
        response = api.get(f"/api/v1/jobs/{job.pk}/logs/", {"offset": offset})
        assert response.status_code == 400 and "offset" in error(response)["fields"]
    logs = api.get(f"/api/v1/jobs/{job.pk}/logs/?offset=0").json()  # not submitted: no file
    assert logs == {
        "stream": "stdout",
        "text": "",
        "size": 0,
        "truncated": False,
        "offset": 0,
        "next_offset": 0,
        "final": False,
    }
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(f"/api/v1/jobs/{job.pk}/cancel/")
    assert response.status_code == 202 and ("cancel", (job.pk, owner.pk)) in no_broker
    job.transition("cancelled")
    assert api.post(f"/api/v1/jobs/{job.pk}/cancel/").status_code == 200


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/containers/a%00b/",
        "/api/v1/clusters/a%00b/",
        "/api/v1/jobs/?container=a%00b",
        "/api/v1/jobs/?created_after=0001-01-01T00:00:00%2B05:00",
        "/api/v1/jobs/?created_after=2026-02-30T00:00:00",
        "/api/v1/jobs/{job}/metrics/?lo=99999999999999999999999",
        "/api/v1/jobs/{job}/metrics/?series=99999999999999999999999",
    ],
)
def test_odd_input_is_a_400_on_every_database(api, owner, cluster, url):
    job = factories.training_job(
        owner, cluster, "running", image=ContainerImage.objects.get(slug="python")
    )
    response = api.get(url.format(job=job.pk))
    assert response.status_code == 400, response.content
    assert error(response)["message"]


def test_dates_with_offsets_filter_in_utc(api, owner, cluster):
    """PostgreSQL refuses an offset such as +20:02 (a 500 schemathesis found): the filter
    converts to UTC first."""
    job = factories.training_job(
        owner, cluster, "running", image=ContainerImage.objects.get(slug="python")
    )
    after = (job.created_at - timedelta(minutes=1)).astimezone(
        timezone.get_fixed_timezone(20 * 60 + 2)
    )
    found = api.get("/api/v1/jobs/", {"created_after": after.isoformat()}).json()
    assert [j["id"] for j in found["results"]] == [job.pk]
    old = api.get("/api/v1/jobs/", {"created_before": "0555-09-18T22:43:52+20:02"})
    assert old.status_code == 200 and old.json()["count"] == 0


def test_job_detail_lists_every_state_change(api, owner, cluster):
    job = factories.training_job(
        owner, cluster, "queued", image=ContainerImage.objects.get(slug="python")
    )
    for state in ("pending", "running", "completed"):
        job.transition(state)
    detail = api.get(f"/api/v1/jobs/{job.pk}/").json()
    assert [(e["from_state"], e["to_state"]) for e in detail["events"]] == [
        ("queued", "pending"),
        ("pending", "running"),
        ("running", "completed"),
    ]
    assert "events" not in api.get("/api/v1/jobs/").json()["results"][0]


def test_every_job_says_whether_it_is_active_final_or_a_session_like_its_live_updates(
    api, owner, cluster
):
    from jobs.broadcast import job_payload

    job = factories.training_job(
        owner, cluster, "running", image=ContainerImage.objects.get(slug="python")
    )
    flags = ("is_active", "is_final", "has_session")
    detail = api.get(f"/api/v1/jobs/{job.pk}/").json()
    assert [detail[f] for f in flags] == [True, False, False]
    job.transition("completed")
    Job.objects.filter(pk=job.pk).update(kind=Job.Kind.NOTEBOOK)
    job.refresh_from_db()
    listed = api.get("/api/v1/jobs/").json()["results"][0]
    assert [listed[f] for f in flags] == [False, True, True]
    assert [job_payload(job)[f] for f in flags] == [False, True, True]


def test_schema_and_offline_docs(api, capsys):
    client = APIClient()
    schema = client.get("/api/schema/")
    assert "Error" not in capsys.readouterr().err  # drf-spectacular understood every view
    assert schema.status_code == 200
    paths = yaml.safe_load(schema.content)["paths"]
    assert "/api/v1/jobs/{id}/metrics/ingest/" in paths  # the in-job client's endpoint too
    assert "offset" in str(paths["/api/v1/jobs/{id}/logs/"])
    page = client.get("/api/docs/").content.decode()
    # Offline: every script and style from the portal itself, none from a CDN (a random
    # nonce in the page may spell "cdn", so the URLs are what is read).
    assert "drf_spectacular_sidecar" in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page), page
    assert not re.search(r"""https?://[^\s"']*cdn""", page.lower()), page


def test_redis_down_is_a_503_with_retry_after_not_a_500(api, settings):
    """Throttling (and the broker) live in Redis; while it is down nothing is changed and
    the client is told to come back. A real refused connection, not a mock."""
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:9/0",  # discard port: nothing listens
        }
    }
    response = api.get("/api/v1/jobs/")
    assert response.status_code == 503 and response["Retry-After"] == "5"
    assert error(response)["code"] == "unavailable"
    assert api.post("/api/v1/jobs/", {}, format="json").status_code == 503


def test_the_schema_documents_launching_apart_from_listing(api, capsys):
    schema = yaml.safe_load(APIClient().get("/api/schema/").content)
    assert "Error" not in capsys.readouterr().err
    jobs = schema["paths"]["/api/v1/jobs/"]
    assert jobs["get"]["summary"] == "List your jobs"
    assert jobs["post"]["summary"] == "Launch a job"
    assert jobs["get"]["description"] != jobs["post"]["description"]
    assert "partition's defaults" in jobs["post"]["description"]
    refused = jobs["post"]["responses"]["400"]
    assert refused["content"]["application/json"]["schema"]["$ref"].endswith("/Error")
    example = next(iter(refused["content"]["application/json"]["examples"].values()))
    assert example["value"]["error"]["fields"]["gpus"]


def test_the_documented_refusal_is_what_the_api_answers(api, no_broker):
    """The schema's 400 example is not made up: the same request gets exactly that answer,
    and nothing is created or queued."""
    schema = yaml.safe_load(APIClient().get("/api/schema/").content)
    refused = schema["paths"]["/api/v1/jobs/"]["post"]["responses"]["400"]
    documented = next(iter(refused["content"]["application/json"]["examples"].values()))
    response = api.post("/api/v1/jobs/", {"partition": "gpu", "gpus": 5}, format="json")
    assert response.status_code == 400
    assert response.json() == documented["value"]
    assert not Job.objects.exists() and not no_broker


def test_a_tensorboard_session_reads_a_folder_or_one_of_the_users_own_job_directories(
    api, owner, outsider, catalog
):
    ContainerImage.objects.filter(slug="python").update(supports_gpu=True, offers_tensorboard=True)
    python = ContainerImage.objects.get(slug="python")
    mine, theirs = (
        factories.job(user, catalog, "train", partition="gpu", image=python)
        for user in (owner, outsider)
    )

    def create(**fields):
        body = {"container": "python", "partition": "gpu", **fields}
        return api.post("/api/v1/jobs/", body, format="json")

    response = create(kind="tensorboard", notebook_dir="runs/mnist")
    assert response.status_code == 201, response.json()
    job = Job.objects.get(pk=response.json()["id"])
    assert (job.kind, job.notebook_dir, job.gpus) == ("tensorboard", "runs/mnist", 0)  # no GPU
    response = create(kind="tensorboard", notebook_dir=f".portal/jobs/{mine.pk}-{mine.uid}")
    assert response.status_code == 201, response.json()
    for kind, folder, message in [
        ("tensorboard", f".portal/jobs/{theirs.pk}-{theirs.uid}", "not the directory of one"),
        ("tensorboard", f".portal/jobs/{mine.pk}-{'0' * 10}", "not the directory of one"),
        ("notebook", f".portal/jobs/{mine.pk}-{mine.uid}", "Only TensorBoard sessions"),
    ]:
        response = create(kind=kind, notebook_dir=folder)
        assert response.status_code == 400
        assert message in error(response)["fields"]["notebook_dir"][0]
    response = create(kind="tensorboard", notebook_dir="runs", gpus=1)
    assert "TensorBoard needs no GPU" in error(response)["fields"]["gpus"][0]


def test_a_tensorboard_session_reads_a_job_array_or_one_of_its_members_directories(
    api, owner, outsider, catalog
):
    """A trial's job works in its array's folder (a<id>-<uid>/<index>): its page's
    TensorBoard link, and the whole array's runs side by side."""
    from jobs.models import JobArray

    ContainerImage.objects.filter(slug="python").update(offers_tensorboard=True)
    mine, theirs = (JobArray.objects.create(owner=u, cluster=catalog) for u in (owner, outsider))
    for array in (mine, theirs):
        for index in (0, 1):
            factories.job(array.owner, catalog, "train", array=array, array_index=index)

    def create(folder):
        body = {"container": "python", "kind": "tensorboard", "notebook_dir": folder}
        return api.post("/api/v1/jobs/", body, format="json")

    for folder in (f"a{mine.pk}-{mine.uid}", f"a{mine.pk}-{mine.uid}/1"):
        response = create(f".portal/jobs/{folder}")
        assert response.status_code == 201, response.json()
    for folder in (
        f"a{theirs.pk}-{theirs.uid}",  # another user's array
        f"a{theirs.pk}-{theirs.uid}/0",
        f"a{mine.pk}-{'0' * 10}",  # a guessed uid
        f"a{mine.pk}-{mine.uid}/7",  # no such member
        f"a{mine.pk}-{mine.uid}/{'9' * 30}",  # nor an index the database could hold
    ):
        response = create(f".portal/jobs/{folder}")
        assert response.status_code == 400, folder
        assert "not the directory of one" in error(response)["fields"]["notebook_dir"][0]
    assert (
        "letters, digits"
        in error(create(f".portal/jobs/a{mine.pk}-{mine.uid}/../x"))["fields"]["notebook_dir"][0]
    )
    # A digit outside ASCII is no index (int() would choke on it): refused as a folder name.
    assert (
        "letters, digits"
        in error(create(f".portal/jobs/a{mine.pk}-{mine.uid}/\u00b2"))["fields"]["notebook_dir"][0]
    )


def test_the_job_list_reads_in_queries_that_do_not_grow_with_its_rows(
    api, owner, cluster, monkeypatch
):
    """Image, cluster, partition and owner are joined; session, trial, project and tags
    are read apart, once a page (joining all seven cost PostgreSQL 15 ms of planning a
    request, #43). (Each page built: none from the cached listings, jobs/listing.py.)"""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from jobs import listing
    from proxy.models import SessionLink

    monkeypatch.setattr(listing, "scope", lambda user: None)

    project = factories.project(cluster, "team", members=[owner])

    def add(n: int) -> None:
        for _ in range(n):
            job = factories.job(owner, cluster, kind=Job.Kind.NOTEBOOK, state=Job.State.RUNNING)
            SessionLink.objects.create(job=job, state=SessionLink.State.READY)
            Job.objects.filter(pk=job.pk).update(project=project)
            job.change_tags(add=["a", "b"])

    def listed() -> tuple[int, list]:
        with CaptureQueriesContext(connection) as queries:
            response = api.get("/api/v1/jobs/")
        assert response.status_code == 200
        return len(queries), response.json()["results"]

    add(2)
    listed()  # the token's first use of the day is noted (one UPDATE)
    few, rows = listed()
    add(10)
    many, rows = listed()
    assert many == few and len(rows) == 12
    assert all(
        r["project"] == "team" and r["has_session"] and r["tags"] == ["a", "b"] for r in rows
    )
