"""The audit log on the real path: a job submitted, its log read and a file downloaded
through the pages, a bad path refused, and the job cancelled, by the same code the
workers and views run, over real sshd to real Slurm; each action is one row naming the
portal user, the cluster user, the action and its outcome."""

import pytest

from catalog import checks as image_checks
from identity.audit.models import AuditEvent
from jobs import tasks
from jobs.models import Job
from tests import factories, polling
from tests.devcluster.helpers import run_until

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]


def rows(action: str) -> list[tuple[str, str, str, str]]:
    return [
        (r.username, r.cluster_username, r.target, r.outcome)
        for r in AuditEvent.objects.filter(action=action).order_by("pk")
    ]


def test_submit_read_download_refuse_and_cancel_are_each_recorded(
    client, devcluster, devcluster_info, owner, staff
):
    login = devcluster_info["default_user"]
    job = factories.job(owner, devcluster, "echo hello-audit; sleep 300", partition="gpu")
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert job.state == Job.State.PENDING, job.message
    [submit] = AuditEvent.objects.filter(action="submit")
    assert (submit.username, submit.cluster_username, submit.cluster, submit.outcome) == (
        "owner",
        login,
        devcluster,
        "ok",
    )
    assert submit.target == f"job {job.pk}" and job.scheduler_job_id in submit.message
    assert submit.key_id == ""  # a stored key, no certificate

    job = run_until(job, {"running"})
    client.force_login(staff)  # staff read the owner's job: the row names staff
    polling.until(
        lambda: "hello-audit" in client.get(f"/jobs/{job.pk}/logs/stdout/").json()["text"],
        30,
        "stdout to show the job's output",
    )
    assert rows("file_read") == [("staff", login, f"job {job.pk} stdout.log", "ok")]

    client.force_login(owner)
    got = client.get(f"/jobs/{job.pk}/files/download/?path=stdout.log")
    assert got.status_code == 200 and b"hello-audit" in b"".join(got.streaming_content)
    bad = client.get(f"/jobs/{job.pk}/files/download/?path=../../../etc/passwd")
    assert bad.status_code == 400
    assert rows("file_download") == [
        ("owner", login, f"job {job.pk} stdout.log", "ok"),
        ("owner", login, f"job {job.pk} ../../../etc/passwd", "refused"),
    ]

    assert job.request_cancel()
    tasks.cancel_job.apply(args=[job.pk])
    assert run_until(job, {"cancelled"}, timeout=30).state == "cancelled"
    assert rows("cancel") == [("owner", login, f"job {job.pk} ({job.scheduler_job_id})", "ok")]


def test_a_catalog_check_is_recorded_as_the_admin_who_ran_it(devcluster, devcluster_info, owner):
    image = factories.image("host-audit", "Host (audit)")
    (check,) = image_checks.run([image], devcluster, owner)
    assert check.checked_as == devcluster_info["default_user"]
    [row] = AuditEvent.objects.filter(action="catalog_check")
    assert (row.username, row.cluster_username, row.target, row.outcome) == (
        "owner",
        devcluster_info["default_user"],
        "host-audit",
        "ok",
    )
