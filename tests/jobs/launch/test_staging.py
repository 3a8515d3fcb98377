"""Stage-in and stage-out as a launch asks for them (jobs/launch/staging.py): through the
API, the launch page and an experiment's launch, placed in the person's own folders,
hostile paths refused with a field's 400 before anything is made."""

import pytest

from jobs.launch import as_request, trial_fields, validate_request
from jobs.models import Job
from jobs.models.job import staging
from tests import factories

pytestmark = pytest.mark.django_db

BATCH = {"container": "python", "partition": "cpu", "kind": "batch", "command": "python t.py"}


@pytest.fixture
def api(owner, catalog):
    return factories.api_client(owner, "test")


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    from jobs import tasks

    monkeypatch.setattr(tasks.submit_job, "delay", lambda *a: None)


def refused(api, **fields) -> dict[str, list[str]]:
    response = api.post("/api/v1/jobs/", {**BATCH, **fields}, format="json")
    assert response.status_code == 400, response.content
    assert not Job.objects.exists()
    return response.json()["error"]["fields"]


def test_a_folder_in_the_home_is_staged_and_outputs_go_back_to_the_work_directory(api):
    made = api.post(
        "/api/v1/jobs/",
        {**BATCH, "stage_in": " datasets/mnist/ ", "stage_out": ["model.pt", "./results/*.csv"]},
        format="json",
    )
    assert made.status_code == 201, made.content
    body = made.json()
    assert body["stage_in"] == "/home/alice/datasets/mnist"
    assert body["stage_out"] == ["model.pt", "results/*.csv"]
    assert body["stage_out_to"] == ""
    assert Job.objects.get().staging == {
        "in": "/home/alice/datasets/mnist",
        "in_root": "/home/alice",
        "out": ["model.pt", "results/*.csv"],
    }
    assert api.get(f"/api/v1/jobs/{body['id']}/").json()["stage_in"] == body["stage_in"]


def test_absolute_folders_are_placed_in_their_own_root_and_relative_ones_in_the_work_root(
    api,
):
    made = api.post(
        "/api/v1/jobs/",
        {
            **BATCH,
            "workdir": "scratch",
            "stage_in": "/home/alice/data set",
            "stage_out": ["out"],
            "stage_out_to": "runs/3",
        },
        format="json",
    ).json()
    assert Job.objects.get(pk=made["id"]).staging == {
        "in": "/home/alice/data set",
        "in_root": "/home/alice",
        "out": ["out"],
        "out_to": "/scratch/alice/runs/3",
        "out_to_root": "/scratch/alice",
    }


@pytest.mark.parametrize(
    ("fields", "field", "text"),
    [
        ({"stage_in": "../etc"}, "stage_in", "Not a path inside"),
        ({"stage_in": "data/../../../etc"}, "stage_in", "Not a path inside"),
        ({"stage_in": "/home/alice/../bob"}, "stage_in", "Not a path inside"),
        ({"stage_in": "/etc"}, "stage_in", "not inside your folders on testcluster"),
        ({"stage_in": "/home/bob/data"}, "stage_in", "not inside your folders"),
        ({"stage_in": "/home/alicex/data"}, "stage_in", "not inside your folders"),
        ({"stage_in": "data\nset"}, "stage_in", "control characters"),
        ({"stage_in": "data\x1b[31mset"}, "stage_in", "control characters"),
        ({"stage_in": "data\u202eset"}, "stage_in", "control characters"),
        ({"stage_in": "/".join(["d"] * 10_000)}, "stage_in", "no more than 4096"),
        ({"stage_in": "/".join(["d"] * 100)}, "stage_in", "deeper than 64"),
        ({"stage_in": "/home/alice"}, "stage_in", "not all of it"),
        ({"stage_in": "."}, "stage_in", "not all of it"),
        ({"stage_in": ".portal/jobs"}, "stage_in", "the portal's own folder"),
        ({"stage_out": ["/etc/passwd"]}, "stage_out", "relative to $PORTAL_STAGED_DIR"),
        ({"stage_out": ["../../x"]}, "stage_out", "Not a path inside"),
        ({"stage_out": ["a\nb"]}, "stage_out", "control characters"),
        ({"stage_out": ["."]}, "stage_out", "Name a file"),
        ({"stage_out": [f"f{i}" for i in range(33)]}, "stage_out", "no more than 32"),
        ({"stage_out": ["x" * 1025]}, "stage_out", "no more than 1024"),
        ({"stage_out": "model.pt"}, "stage_out", "list"),
        ({"stage_out_to": "runs"}, "stage_out", "Name the outputs"),
        ({"stage_out": ["m"], "stage_out_to": "/tmp"}, "stage_out_to", "not inside"),
        ({"stage_out": ["m"], "stage_out_to": "a/../../b"}, "stage_out_to", "Not a path"),
        ({"stage_in": "data", "kind": "notebook", "command": ""}, "stage_in", "batch jobs"),
    ],
)
def test_hostile_or_impossible_staging_is_a_400_on_its_field(api, fields, field, text):
    errors = refused(api, **fields)
    assert text in " ".join(errors.get(field, [])), errors


def test_a_projects_folder_is_read_by_its_viewers_and_written_only_by_its_members(api, owner):
    from projects.models import Project

    cluster = owner.cluster_accounts.get().cluster
    cluster.project_root = "/proj/{project}"
    cluster.save()
    project = factories.project(cluster, "vision", [owner], role="viewer")
    read = {"stage_in": "/proj/vision/imagenet", "stage_out": ["m"]}
    made = api.post("/api/v1/jobs/", {**BATCH, **read}, format="json")
    assert made.status_code == 201, made.content
    assert Job.objects.get().staging["in_root"] == "/proj/vision"
    Job.objects.all().delete()
    errors = refused(api, **read, stage_out_to="/proj/vision/out")
    assert "Project vision is read-only for you" in errors["stage_out_to"][0]
    Project.objects.filter(pk=project.pk).update(default_role="member")
    made = api.post("/api/v1/jobs/", {**BATCH, **read, "stage_out_to": "/proj/vision/out"})
    assert made.status_code == 201, made.content


def test_a_cluster_of_one_service_account_has_no_folders_of_the_persons_own(api, owner):
    cluster = owner.cluster_accounts.get().cluster
    cluster.login_mode = "service"
    cluster.save()
    factories.account(cluster, None, "svc")  # whose login every job runs under
    errors = refused(api, stage_in="data")
    assert "only as your own cluster user" in errors["stage_in"][0]


def test_on_htcondor_stage_in_needs_an_image_without_a_container(owner):
    pool = factories.cluster("apool", scheduler="htcondor")
    factories.partition(pool, "vanilla", is_default=True)
    factories.account(pool, owner, "alice")
    factories.image("sif", runtime="apptainer", location="/img/x.sif")
    factories.image("plain")
    request = {**BATCH, "cluster": "apool", "partition": "vanilla", "stage_in": "data"}
    checked = validate_request(owner, {**request, "container": "sif"})
    assert "the scheduler starts the image's container" in checked.errors["stage_in"][0]
    assert validate_request(owner, {**request, "container": "plain"}).errors == {}


def test_an_experiments_trials_stage_like_the_launch_and_its_relaunch_request_says_so(
    owner, catalog
):
    checked = validate_request(owner, {**BATCH, "stage_in": "data", "stage_out": ["m.pt"]})
    assert checked.errors == {}
    fixed = trial_fields(checked.job)
    assert fixed["staging"]["in"] == "/home/alice/data"
    again = Job(**fixed, owner=owner, kind=Job.Kind.BATCH)
    request = as_request(again)
    assert (request["stage_in"], request["stage_out"]) == ("/home/alice/data", ["m.pt"])
    assert "stage_out_to" not in request and "staging" not in request
    assert validate_request(owner, {**request, "command": "t"}).job.staging == fixed["staging"]


def test_the_script_is_rendered_from_the_job_with_the_clusters_node_scratch(api, owner):
    cluster = owner.cluster_accounts.get().cluster
    cluster.node_scratch = "$LOCAL_SCRATCH"
    cluster.save()
    api.post("/api/v1/jobs/", {**BATCH, "stage_in": "data"}, format="json")
    spec = Job.objects.get().describe().staging
    assert spec is not None
    assert (spec.source, spec.source_root, spec.scratch) == (
        "/home/alice/data",
        "/home/alice",
        "$LOCAL_SCRATCH",
    )
    assert staging(Job(staging={})) is None  # a job that stages nothing


# --- the launch page -------------------------------------------------------------------------


@pytest.fixture
def signed_in(client, owner, catalog):
    client.force_login(owner)
    return client


def page_data(cluster, **fields):
    return {
        "image": "python",
        "kind": "batch",
        "cluster": cluster.name,
        "partition": cluster.partitions.get(name="cpu").pk,
        "gpus": 0,
        "cpus": 1,
        "memory_gb": 1,
        "time_limit_minutes": 10,
        "work_dir_kind": "home",
        "command": "python t.py",
        **fields,
    }


def test_the_launch_page_shows_the_fields_with_their_help_and_launches_with_them(
    signed_in, cluster
):
    page = signed_in.get("/launch/").content.decode()
    for name in ("stage_in", "stage_out", "stage_out_to"):
        assert f'name="{name}"' in page
    assert "$PORTAL_STAGED_DIR" in page and "sha256" in page
    answer = signed_in.post(
        "/launch/",
        page_data(cluster, stage_in="data", stage_out="model.pt\r\nresults/*.csv\r\n"),
    )
    assert answer.status_code == 302, answer.context["form"].errors
    job = Job.objects.get()
    assert job.stage_out == ["model.pt", "results/*.csv"]
    shown = signed_in.get(f"/jobs/{job.pk}/").content.decode()
    assert "/home/alice/data" in shown and "results/*.csv" in shown
    again = signed_in.get(f"/launch/?from={job.pk}").context["form"]
    assert again.initial["stage_in"] == "/home/alice/data"
    assert again.initial["stage_out"] == ["model.pt", "results/*.csv"]
    assert "model.pt\nresults/*.csv" in signed_in.get(f"/launch/?from={job.pk}").content.decode()


def test_the_launch_page_says_what_is_wrong_beside_the_field(signed_in, cluster):
    answer = signed_in.post("/launch/", page_data(cluster, stage_in="../../etc"))
    assert answer.status_code == 200
    assert "Not a path inside" in " ".join(answer.context["form"].errors["stage_in"])
    assert not Job.objects.exists()
