"""Retention on the real path (#62): a Slurm job on the dev cluster leaves 12 checkpoints
(and a symbolic link and a FIFO named like them) and logs val_loss through the portal's
client; one checkpoint is registered as a model version (its manifest read over SSH).
A dry run, listed over SSH as the person, names the 9 it would delete, keeping the best,
the latest and the registered one; applying it deletes exactly those, as the person,
audited; the link, what it points at and the FIFO are untouched."""

from __future__ import annotations

import pytest

from clusters import pool
from identity.audit.models import AuditEvent
from registry import manifest
from registry import service as registry
from registry import tasks as registry_tasks
from retention import tasks
from retention.models import Plan
from tests import factories, polling
from tests.devcluster.helpers import remote
from tests.devcluster.test_mlflow_jobs import completed

pytestmark = pytest.mark.devcluster

STEPS = list(range(10, 130, 10))
WRITE = (
    "mkdir -p ckpt && for s in " + " ".join(map(str, STEPS)) + "; do "
    "head -c $((s * 1024)) /dev/urandom > ckpt/step-$s.pt; done && "
    "echo kept > outside.bin && ln -s ../outside.bin ckpt/step-130.pt && "
    "mkfifo ckpt/step-140.pt && "
    'python3 -c "import portal_metrics as pm; '
    '[pm.log(step=s, val_loss=abs(s-50)/100) for s in range(10,130,10)]; pm.close()"'
)


@pytest.fixture
def in_request(monkeypatch):
    """The tasks run by the request that sends them (this test has no worker): the tasks
    themselves, over SSH to the dev cluster as the person."""
    for task in (registry_tasks.read_manifest, tasks.make_plan, tasks.apply_plan):
        monkeypatch.setattr(task, "delay", lambda pk, task=task: task.apply((pk,)))


def ckpts(account, job) -> list[str]:
    return sorted(remote(account, ["ls", "-1", f"{job.work_dir}/ckpt"]).split())


@pytest.mark.django_db(transaction=True)
def test_a_dry_run_lists_nine_of_twelve_and_applying_deletes_exactly_those(
    devcluster, owner, live_server, settings, in_request
):
    settings.PORTAL_URL = live_server.url
    job = completed(owner, devcluster, WRITE)
    account = job.cluster_account
    model = registry.create_model(owner, None, "digits")
    version = registry.register(
        owner, model, registry.files_of(job, f"{job.work_dir}/ckpt/step-30.pt"), source="test"
    )
    version.refresh_from_db()
    assert version.status == "READY", version.status_message
    polling.until(
        lambda: job.metric_series.filter(key="val_loss", points=12).exists(), 30, "val_loss"
    )

    api = factories.api_client(owner)
    policy = {"keep_best": 1, "metric": "val_loss", "mode": "min", "keep_latest": 1}
    assert api.put("/api/v1/retention/policy/", policy, format="json").status_code == 200
    asked = api.post(f"/api/v1/jobs/{job.pk}/retention/")
    assert asked.status_code == 202, asked.content
    plan = Plan.objects.get(pk=asked.json()["id"])
    assert plan.state == "ready", plan.message
    doomed = {f"ckpt/step-{s}.pt" for s in STEPS if s not in (30, 50, 120)}
    assert set(plan.to_delete) == doomed and len(doomed) == 9
    kept = {i["path"]: i["why"] for i in plan.items if i["keep"]}
    assert kept == {
        "ckpt/step-30.pt": "registered: digits v1",
        "ckpt/step-50.pt": "one of the best 1 by val_loss",
        "ckpt/step-120.pt": "one of the latest 1",
    }
    # What they cost on disk, read by du as the person: at least their bytes.
    assert plan.bytes_on_disk >= 1024 * sum(STEPS)
    assert plan.bytes_to_free >= 1024 * sum(int(p[10:-3]) for p in doomed)
    assert len(ckpts(account, job)) == 14  # a dry run deletes nothing

    assert api.post(f"/api/v1/retention/plans/{plan.pk}/apply/").status_code == 202
    plan.refresh_from_db()
    assert plan.state == "applied" and set(plan.deleted) == doomed, plan.message
    assert ckpts(account, job) == [
        "step-120.pt",
        "step-130.pt",
        "step-140.pt",
        "step-30.pt",
        "step-50.pt",
    ]
    assert remote(account, ["cat", f"{job.work_dir}/outside.bin"]).strip() == "kept"
    row = AuditEvent.objects.get(action="retention")
    assert row.outcome == "ok" and row.cluster_username == account.username
    assert "9 checkpoint(s) deleted" in row.message
    # The registered version's files are what they were.
    again = pool.with_connection(account, lambda conn: manifest.read(conn, version.path))
    assert again.digest == version.manifest_sha256
