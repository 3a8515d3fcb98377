"""The job page's tags, note and Reproduce block; the launch form's parameters and tags, and
"Launch again" reusing what a run recorded."""

import pytest

from jobs.models import Job
from tests import factories

pytestmark = pytest.mark.django_db

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def host(db):
    return factories.image("host", "Host Python")


@pytest.fixture
def signed_in(client, owner, cluster):
    factories.account(cluster, owner, "alice")
    client.force_login(owner)
    return client


@pytest.fixture
def job(owner, cluster, host):
    made = factories.job(
        owner,
        cluster,
        "python train.py",
        image=host,
        params={"lr": 0.01, "seed": 3},
        keep_diff=True,
        reproduce={
            "image": {"runtime": "none", "location": "", "identity": "host"},
            "git": {
                "folder": "/home/alice/proj",
                "commit": COMMIT,
                "branch": "main",
                "modified": True,
                "changed": 2,
                "untracked": 0,
                "diff_bytes": 40,
                "diff_truncated": False,
            },
        },
        git_diff="-lr = 0.1\n+lr = 0.01\n<script>alert(1)</script>\n",
    )
    made.set_tags(["resnet"])
    return made


def test_the_job_page_shows_the_reproduce_block(signed_in, job):
    body = signed_in.get(f"/jobs/{job.pk}/").content.decode()
    assert COMMIT in body and "data-modified>modified</strong>, 2 files changed" in body
    assert "host environment (no container)" in body
    assert "<code>lr=0.01</code> <code>seed=3</code>" in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and "<script>alert(1)" not in body
    assert 'data-tag="resnet"' in body and 'name="notes"' in body


def test_the_diff_is_served_as_plain_text(signed_in, job, client, outsider):
    response = signed_in.get(f"/jobs/{job.pk}/diff/")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response.content.decode() == job.git_diff
    client.force_login(outsider)
    assert client.get(f"/jobs/{job.pk}/diff/").status_code == 404


def test_the_owner_adds_and_removes_tags_and_saves_the_note(signed_in, job):
    url = f"/jobs/{job.pk}/annotations/"
    assert signed_in.post(url, {"add_tags": "seed=3 best"}).status_code == 302
    assert signed_in.post(url, {"remove_tag": "resnet"}).status_code == 302
    assert signed_in.post(url, {"notes": "best so far\r\nkeep"}).status_code == 302
    job.refresh_from_db()
    assert job.tag_names == ["best", "seed=3"] and job.notes == "best so far\nkeep"
    signed_in.post(url, {"add_tags": "bad$tag"})
    assert job.tag_names == ["best", "seed=3"]


def test_staff_see_tags_and_notes_but_do_not_change_them(client, staff, outsider, job):
    client.force_login(staff)
    body = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'data-tag="resnet"' in body and 'name="notes"' not in body
    client.post(f"/jobs/{job.pk}/annotations/", {"notes": "staff"})
    client.force_login(outsider)
    assert client.post(f"/jobs/{job.pk}/annotations/", {"notes": "x"}).status_code == 404
    job.refresh_from_db()
    assert job.notes == ""


def test_launch_again_prefills_command_params_tags_and_shows_the_commit(signed_in, job):
    response = signed_in.get(f"/launch/?from={job.pk}")
    form = response.context["form"]
    assert form.initial["command"] == "python train.py"
    assert form.initial["params"] == {"lr": 0.01, "seed": 3} and form.initial["keep_diff"]
    assert form.initial["tags"] == ["resnet"]
    body = response.content.decode()
    assert "lr=0.01\nseed=3</textarea>" in body and 'value="resnet"' in body
    assert f"ran at commit <code>{COMMIT[:12]}</code>" in body and "modified" in body


def test_the_launch_form_takes_params_and_tags(signed_in, cluster, host, monkeypatch):
    from jobs import tasks

    monkeypatch.setattr(tasks.submit_job, "delay", lambda pk: None)
    data = {
        "image": "host",
        "kind": "batch",
        "cluster": cluster.name,
        "partition": cluster.partitions.get(name="cpu").pk,
        "gpus": 0,
        "cpus": 1,
        "memory_gb": 1,
        "time_limit_minutes": 5,
        "work_dir_kind": "home",
        "command": "python train.py",
        "params": "lr=0.01\r\nseed=3",
        "tags": "resnet seed=3",
        "keep_diff": "on",
    }
    response = signed_in.post("/launch/", data)
    assert response.status_code == 302, response.context["form"].errors
    job = Job.objects.get()
    assert job.params == {"lr": 0.01, "seed": 3} and job.keep_diff
    assert job.tag_names == ["resnet", "seed=3"]
    bad = signed_in.post("/launch/", {**data, "params": "bad name=1"})
    assert bad.status_code == 200 and "params" in bad.context["form"].errors
