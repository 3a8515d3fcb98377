"""Retention through the REST API (retention/api.py, service.py, tasks.py): policies and
who sets them, a dry run and its application by the run's owner alone, what a colleague
and a stranger see, bad policies, and a checkpoint registered between the dry run and the
application. The cluster is this machine's sh (HereConnection); the dev cluster's test
takes the SSH path."""

from __future__ import annotations

import json
import os

import pytest

from clusters import pool
from identity.audit.models import AuditEvent
from metrics.models import MetricPoint, MetricSeries
from projects.models import Membership
from registry.models import ModelVersion, RegisteredModel
from retention import tasks
from retention.models import Plan
from tests import factories
from tests.retention.test_plan import HereConnection

# Transactions as in production: the tasks close the connection when done with it.
pytestmark = pytest.mark.django_db(transaction=True)

STEPS = range(10, 130, 10)


@pytest.fixture
def here(monkeypatch):
    """Tasks run in the request (no worker), on this machine's sh for the cluster."""
    monkeypatch.setattr(
        pool, "with_connection", lambda account, operation, retry=True: operation(HereConnection())
    )
    monkeypatch.setattr(tasks.make_plan, "delay", lambda pk: tasks.make_plan.apply((pk,)))
    monkeypatch.setattr(tasks.apply_plan, "delay", lambda pk: tasks.apply_plan.apply((pk,)))


def run_of(owner, cluster, tmp_path, **fields):
    """An ended run with 12 checkpoints (step s: s kB) and val_loss best at step 50."""
    if not owner.cluster_accounts.filter(cluster=cluster).exists():
        factories.account(cluster, owner, owner.username)
    job = factories.training_job(owner, cluster, state="completed")
    for key, value in {"work_dir": str(tmp_path / f"work-{job.pk}"), **fields}.items():
        setattr(job, key, value)
    job.save()
    os.makedirs(f"{job.work_dir}/ckpt")
    for s in STEPS:
        with open(f"{job.work_dir}/ckpt/step-{s}.pt", "wb") as out:
            out.write(os.urandom(s * 100))
    series = MetricSeries.objects.create(job=job, key="val_loss")
    MetricPoint.objects.bulk_create(
        MetricPoint(series=series, seq=i, step=s, value=abs(s - 50) / 100, time=0)
        for i, s in enumerate(STEPS)
    )
    return job


def register(job, step: int) -> ModelVersion:
    model, _ = RegisteredModel.objects.get_or_create(owner=job.owner, name="m")
    return ModelVersion.add(
        model,
        cluster=job.cluster,
        path=f"{job.work_dir}/ckpt/step-{step}.pt",
        job=job,
        registered_by=job.owner,
        status=ModelVersion.Status.READY,
    )


POLICY = {"keep_best": 1, "metric": "val_loss", "mode": "min", "keep_latest": 1}


def test_the_owner_sets_a_policy_dry_runs_it_and_applies_exactly_what_it_listed(
    owner, cluster, tmp_path, here
):
    job = run_of(owner, cluster, tmp_path)
    register(job, 30)
    api = factories.api_client(owner)
    answer = api.put("/api/v1/retention/policy/", POLICY, format="json")
    assert answer.status_code == 200 and answer.json()["set"], answer.content
    answer = api.post(f"/api/v1/jobs/{job.pk}/retention/", {}, format="json")
    assert answer.status_code == 202, answer.content
    plan = api.get(f"/api/v1/retention/plans/{answer.json()['id']}/").json()
    assert plan["state"] == "ready", plan
    gone = [c["path"] for c in plan["checkpoints"] if not c["keep"]]
    assert sorted(gone) == sorted(f"ckpt/step-{s}.pt" for s in STEPS if s not in (30, 50, 120))
    assert plan["bytes_on_disk"] >= sum(STEPS) * 100
    assert {c["path"]: c["why"] for c in plan["checkpoints"] if c["keep"]} == {
        "ckpt/step-30.pt": "registered: m v1",
        "ckpt/step-50.pt": "one of the best 1 by val_loss",
        "ckpt/step-120.pt": "one of the latest 1",
    }
    # A dry run deletes nothing.
    assert len(os.listdir(f"{job.work_dir}/ckpt")) == 12

    answer = api.post(f"/api/v1/retention/plans/{plan['id']}/apply/")
    assert answer.status_code == 202, answer.content
    done = api.get(f"/api/v1/retention/plans/{plan['id']}/").json()
    assert done["state"] == "applied" and sorted(done["deleted"]) == sorted(gone), done
    assert done["bytes_freed"] == plan["bytes_to_free"] and done["message"] == ""
    assert sorted(os.listdir(f"{job.work_dir}/ckpt")) == [
        "step-120.pt",
        "step-30.pt",
        "step-50.pt",
    ]
    row = AuditEvent.objects.get(action="retention")
    assert row.outcome == "ok" and row.username == owner.username
    assert f"job {job.pk}" in row.target and "9 checkpoint(s) deleted" in row.message
    # Applied once: a second application is refused.
    again = api.post(f"/api/v1/retention/plans/{plan['id']}/apply/")
    assert again.status_code == 409 and "applied" in again.json()["error"]["message"]


def test_a_checkpoint_registered_after_the_dry_run_is_spared(owner, cluster, tmp_path, here):
    job = run_of(owner, cluster, tmp_path)
    api = factories.api_client(owner)
    plan = api.post(f"/api/v1/jobs/{job.pk}/retention/", POLICY, format="json").json()
    plan = Plan.objects.get(pk=plan["id"])
    assert len(plan.to_delete) == 10
    register(job, 70)
    api.post(f"/api/v1/retention/plans/{plan.pk}/apply/")
    plan.refresh_from_db()
    assert plan.state == "applied" and len(plan.deleted) == 9
    assert "ckpt/step-70.pt" not in plan.deleted and "1 of the dry run's" in plan.message
    assert os.path.exists(f"{job.work_dir}/ckpt/step-70.pt")


def test_only_the_owner_plans_colleagues_see_and_strangers_find_nothing(
    owner, outsider, cluster, tmp_path, here
):
    colleague = factories.user("colleague")
    manager = factories.user("manager")
    project = factories.project(cluster, "lab", [colleague], role="member", coordinators=[manager])
    Membership.objects.create(project=project, user=owner, cluster_user=owner.username)
    job = run_of(owner, cluster, tmp_path, project=project)
    factories.api_client(owner).post(f"/api/v1/jobs/{job.pk}/retention/", POLICY, format="json")
    plan = Plan.objects.get()

    seen = factories.api_client(colleague)
    assert seen.get(f"/api/v1/jobs/{job.pk}/retention/").json()["results"][0]["id"] == plan.pk
    refused = seen.post(f"/api/v1/jobs/{job.pk}/retention/", POLICY, format="json")
    assert refused.status_code == 403 and "owner" in refused.json()["error"]["message"]
    assert seen.post(f"/api/v1/retention/plans/{plan.pk}/apply/").status_code == 403
    # The project's policy: its managers', not its members'.
    url = f"/api/v1/retention/policy/?project={project.pk}"
    assert seen.put(url, POLICY, format="json").status_code == 403
    changed = factories.api_client(manager).put(url, {**POLICY, "keep_latest": 2}, format="json")
    assert changed.status_code == 200, changed.content
    # ... and the project's runs follow it.
    answer = factories.api_client(owner).post(f"/api/v1/jobs/{job.pk}/retention/")
    assert answer.status_code == 202 and answer.json()["rule"]["keep_latest"] == 2

    stranger = factories.api_client(outsider)
    assert stranger.get(f"/api/v1/jobs/{job.pk}/retention/").status_code == 404
    assert stranger.get(f"/api/v1/retention/plans/{plan.pk}/").status_code == 404
    assert stranger.post(f"/api/v1/retention/plans/{plan.pk}/apply/").status_code == 404
    assert stranger.get(url).status_code == 404
    assert Plan.objects.filter(state="applied").count() == 0
    assert len(os.listdir(f"{job.work_dir}/ckpt")) == 12


@pytest.mark.parametrize(
    ("sent", "said"),
    [
        ({"keep_best": -1}, "whole number"),
        ({"keep_best": True}, "whole number"),
        ({"keep_best": 10**9}, "whole number"),
        ({"keep_best": 0, "keep_latest": 0}, "at least one"),
        ({"keep_best": 1, "metric": ""}, "needs the metric"),
        ({"mode": "median"}, "mode is"),
        ({"patterns": ["../*.pt"]}, "patterns is"),
        ({"patterns": ["*.pt"] * 21}, "patterns is"),
        ({"patterns": "*.pt"}, "patterns is"),
        ({"metric": "a\nb"}, "metric is"),
        ({"shell": "rm -rf ~"}, "Unknown field"),
    ],
)
def test_a_bad_policy_is_refused_with_what_is_wrong(owner, sent, said):
    answer = factories.api_client(owner).put(
        "/api/v1/retention/policy/", {**POLICY, **sent}, format="json"
    )
    assert answer.status_code == 400 and said in answer.json()["error"]["message"], answer.content


def test_a_running_run_and_a_run_without_policy_get_clear_answers(owner, cluster, tmp_path, here):
    job = run_of(owner, cluster, tmp_path)
    api = factories.api_client(owner)
    answer = api.post(f"/api/v1/jobs/{job.pk}/retention/")
    assert answer.status_code == 400 and "no retention policy" in answer.json()["error"]["message"]
    job.state = "running"
    job.save(update_fields=["state"])
    answer = api.post(f"/api/v1/jobs/{job.pk}/retention/", POLICY, format="json")
    assert answer.status_code == 409 and "not ended" in answer.json()["error"]["message"]
    assert not Plan.objects.exists()


def test_a_metric_never_logged_fails_the_plan_and_deletes_nothing(owner, cluster, tmp_path, here):
    job = run_of(owner, cluster, tmp_path)
    api = factories.api_client(owner)
    answer = api.post(
        f"/api/v1/jobs/{job.pk}/retention/", {**POLICY, "metric": "acc"}, format="json"
    )
    plan = api.get(f"/api/v1/retention/plans/{answer.json()['id']}/").json()
    assert plan["state"] == "failed" and "logged no acc" in plan["message"]
    assert api.post(f"/api/v1/retention/plans/{plan['id']}/apply/").status_code == 409
    assert len(os.listdir(f"{job.work_dir}/ckpt")) == 12


def test_the_run_page_shows_the_checkpoints_cost_and_its_owner_plans_and_applies(
    owner, outsider, cluster, tmp_path, here, client
):
    job = run_of(owner, cluster, tmp_path)
    policy = factories.api_client(owner).put("/api/v1/retention/policy/", POLICY, format="json")
    assert policy.status_code == 200
    client.force_login(owner)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "data-retention-plan" in page and "Not listed yet" in page
    answer = client.post(f"/jobs/{job.pk}/retention/", {"action": "plan"})
    assert answer.status_code == 302
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    plan = Plan.objects.get()
    assert "12 checkpoints" in page and "Dry run: 10 to delete" in page, page
    assert "data-retention-apply" in page
    client.post(f"/jobs/{job.pk}/retention/", {"action": "apply", "plan": plan.pk})
    plan.refresh_from_db()
    assert plan.state == "applied" and len(plan.deleted) == 10
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "(10 deleted)" in page and "data-retention-apply" not in page
    # Another person neither sees the run nor acts on it.
    client.force_login(outsider)
    assert client.get(f"/jobs/{job.pk}/").status_code == 404
    assert client.post(f"/jobs/{job.pk}/retention/", {"action": "plan"}).status_code == 404
    assert Plan.objects.count() == 1


def test_the_cli_sets_the_policy_dry_runs_and_applies(
    owner, cluster, tmp_path, here, live_server, monkeypatch, capsys
):
    from identity.tokens import ApiToken
    from portal_client import cli

    _, token = ApiToken.issue(owner, "cli")
    monkeypatch.setenv("PORTAL_URL", live_server.url)
    monkeypatch.setenv("PORTAL_TOKEN", token)
    monkeypatch.setenv("PORTAL_CONFIG", str(tmp_path / "absent.toml"))
    job = run_of(owner, cluster, tmp_path)

    def portal(*argv):
        code = cli.main(list(argv))
        return code, capsys.readouterr().out

    code, out = portal("retention", "policy")
    assert code == 0 and "no retention policy" in out
    argv = ("--keep-best", "1", "--metric", "val_loss", "--keep-latest", "2")
    code, out = portal("retention", "policy", *argv)
    assert code == 0 and out.startswith("keep the best 1 by val_loss (min) and the latest 2")
    code, out = portal("retention", "plan", str(job.pk), "--wait")
    assert code == 0 and "9 to delete" in out and "DELETE" in out, out
    lines = out.splitlines()
    assert lines[1].startswith("DELETE") and lines[1].endswith(
        "ckpt/step-10.pt  (not among the best 1 by val_loss nor the latest 2)"
    ), out
    assert lines[5].startswith("keep") and "KiB  ckpt/step-50.pt  (one of the best 1" in lines[5]
    plan = Plan.objects.get()
    code, out = portal("--json", "retention", "apply", str(plan.pk), "--wait")
    assert code == 0 and len(json.loads(out)["deleted"]) == 9
    assert len(os.listdir(f"{job.work_dir}/ckpt")) == 3
    # A refusal is the API's message, and a non-zero exit.
    assert cli.main(["retention", "apply", str(plan.pk)]) != 0
    assert "only a ready dry run" in capsys.readouterr().err
