"""The audit log (identity/audit/__init__.py): one row per action on a cluster for someone, with its
outcome and the key id of the connection it ran on; read-only for staff in the admin,
hidden from everyone else; old rows removed by the retention task."""

import pytest
from django.db import DatabaseError
from django.urls import reverse

from clusters import acting, files, ssh
from identity import audit
from identity.audit.models import MESSAGE_MAX, TARGET_MAX, AuditEvent
from jobs import tasks
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def account(cluster, owner):
    return factories.account(cluster, owner, "alice")


def only_row() -> AuditEvent:
    rows = list(AuditEvent.objects.all())
    assert len(rows) == 1, rows
    return rows[0]


def test_an_action_that_succeeds_is_one_ok_row_with_who_and_where(owner, account):
    with audit.action(audit.Action.CANCEL, user=owner, account=account, target="job 7"):
        pass
    row = only_row()
    assert (row.user, row.username, row.cluster, row.cluster_name) == (
        owner,
        "owner",
        account.cluster,
        "testcluster",
    )
    assert (row.cluster_username, row.action, row.target, row.outcome, row.message) == (
        "alice",
        "cancel",
        "job 7",
        "ok",
        "",
    )


def test_a_failed_action_is_recorded_and_its_exception_goes_on(owner, account):
    with pytest.raises(ssh.ClusterError, match="scancel: boom"):
        with audit.action(audit.Action.CANCEL, user=owner, account=account, target="job 7"):
            raise ssh.ClusterError("scancel: boom")
    row = only_row()
    assert (row.outcome, row.message) == ("failed", "scancel: boom")


def test_a_refusal_by_rule_is_recorded_as_refused(owner, account):
    with pytest.raises(files.BadPath):
        with audit.action(audit.Action.FILE_DOWNLOAD, user=owner, account=account, target="../x"):
            raise files.BadPath("Not a path inside the job's work directory.")
    assert only_row().outcome == "refused"


def test_message_and_target_are_bounded_to_one_line(owner, account):
    huge = "line\n" * 10_000
    with pytest.raises(RuntimeError):
        with audit.action(audit.Action.FILE_READ, user=owner, account=account, target=huge):
            raise RuntimeError(huge)
    row = only_row()
    assert len(row.message) == MESSAGE_MAX and row.message.endswith("…")
    assert len(row.target) == TARGET_MAX and "\n" not in row.target + row.message


def test_the_key_id_the_connection_sets_is_recorded(owner, account):
    acting.key_id.set("stale id from an earlier action")
    with audit.action(audit.Action.SUBMIT, user=owner, account=account, target="job 9"):
        assert acting.key_id.get() == ""  # each action starts without one
        acting.key_id.set("portal:owner:alice:submit job 9")  # as the pool does
    assert only_row().key_id == "portal:owner:alice:submit job 9"
    assert acting.key_id.get() == "stale id from an earlier action"  # put back


def test_the_purpose_names_the_action_during_the_block_only(owner, account):
    with audit.action(audit.Action.SUBMIT, user=owner, account=account, target="job 9"):
        assert acting.purpose.get() == "submit job 9"
    assert acting.purpose.get() == ""


def test_a_failing_write_never_turns_a_success_into_an_error(owner, account, monkeypatch, caplog):
    def broken(**row):
        raise DatabaseError("disk full")

    monkeypatch.setattr(AuditEvent.objects, "create", broken)
    with audit.action(audit.Action.CANCEL, user=owner, account=account, target="job 7"):
        done = True
    assert done and "audit: could not record cancel job 7" in caplog.text


def test_a_followed_log_is_one_row_per_window(owner, account):
    for _ in range(3):
        with audit.action(
            audit.Action.FILE_READ,
            user=owner,
            account=account,
            target="job 1 stdout.log",
            repeat_window=audit.FOLLOW_WINDOW,
        ):
            pass
    assert AuditEvent.objects.count() == 1


def test_entry_outcomes_set_by_the_block(owner, account):
    with audit.action(audit.Action.GPU_DISCOVERY, user=owner, account=account) as entry:
        entry.failed("no answer")
    assert (only_row().outcome, only_row().message) == ("failed", "no answer")


def test_the_row_outlives_the_user_and_the_cluster(owner, account):
    with audit.action(audit.Action.CANCEL, user=owner, account=account, target="job 7"):
        pass
    cluster = account.cluster
    owner.delete()
    cluster.delete()
    row = only_row()
    assert (row.user, row.cluster, row.username, row.cluster_name) == (
        None,
        None,
        "owner",
        "testcluster",
    )


# --- where the portal acts: a cancel task, the log page, an admin action --------------


def test_the_cancel_task_records_the_owner_and_the_cluster_error(
    owner, cluster, account, monkeypatch
):
    job = factories.job(owner, cluster, state="running", scheduler_job_id="123")
    job.cluster_account = account
    job.save()

    def refuse(acct, operation):
        raise ssh.ClusterError("scancel: Invalid job id specified")

    monkeypatch.setattr(tasks.pool, "with_connection", refuse)
    tasks.cancel_job.apply(args=[job.pk])
    row = only_row()
    assert (row.username, row.cluster_username, row.action, row.outcome) == (
        "owner",
        "alice",
        "cancel",
        "failed",
    )
    assert row.target == f"job {job.pk} (123)" and "Invalid job id" in row.message


def test_staff_cancelling_someones_job_is_recorded_as_staff(
    client, staff, owner, cluster, account, monkeypatch, django_capture_on_commit_callbacks
):
    """The row names who asked, not the owner whose cluster account ran the scancel."""
    job = factories.job(owner, cluster, state="running", scheduler_job_id="77")
    job.cluster_account = account
    job.save()
    monkeypatch.setattr(tasks.pool, "with_connection", lambda acct, op, **_: None)
    monkeypatch.setattr(tasks, "sync_jobs", lambda jobs: None)
    monkeypatch.setattr(
        tasks.cancel_job, "delay", lambda pk, by=None: tasks.cancel_job.apply(args=[pk, by])
    )
    client.force_login(staff)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("job-cancel", args=[job.pk]))
    row = only_row()
    assert (row.username, row.cluster_username, row.action, row.outcome) == (
        "staff",
        "alice",
        "cancel",
        "ok",
    )


def test_staff_reading_someones_log_is_recorded_as_staff(
    client, staff, owner, cluster, account, monkeypatch
):
    job = factories.job(owner, cluster, state="running", work_dir="/home/alice/w")
    job.cluster_account = account
    job.save()
    monkeypatch.setattr(
        files.pool, "with_connection", lambda acct, op: files.LogTail("hi", 2, False)
    )
    client.force_login(staff)
    assert client.get(reverse("job-logs", args=[job.pk, "stdout"])).status_code == 200
    row = only_row()
    assert (row.username, row.cluster_username, row.action, row.target, row.outcome) == (
        "staff",
        "alice",
        "file_read",
        f"job {job.pk} stdout.log",
        "ok",
    )


# --- the admin ------------------------------------------------------------------------


def test_staff_filter_the_log_by_action_cluster_and_user(client, staff, cluster):
    factories.audit_event("alice-portal", "cancel", cluster=cluster, cluster_name=cluster.name)
    factories.audit_event("bob-portal", "submit")
    client.force_login(staff)
    url = reverse("admin:jobs_auditevent_changelist")
    page = client.get(url, {"action__exact": "cancel", "cluster__id__exact": cluster.pk})
    assert page.status_code == 200
    assert "alice-portal" in page.content.decode() and "bob-portal" not in page.content.decode()
    found = client.get(url, {"q": "bob-portal"}).content.decode()
    assert "bob-portal" in found and "alice-portal" not in found


def test_the_admin_can_neither_add_change_nor_delete_a_row(client, staff):
    row = factories.audit_event()
    client.force_login(staff)
    assert client.get(reverse("admin:jobs_auditevent_add")).status_code == 403
    assert client.get(reverse("admin:jobs_auditevent_delete", args=[row.pk])).status_code == 403
    client.post(reverse("admin:jobs_auditevent_change", args=[row.pk]), {"outcome": "failed"})
    row.refresh_from_db()
    assert row.outcome == "ok"


def test_non_staff_never_see_the_log(client, owner):
    factories.audit_event("secret-row")
    client.force_login(owner)
    response = client.get(reverse("admin:jobs_auditevent_changelist"))
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_the_csv_export_defuses_formulas(client, staff):
    row = factories.audit_event(target="=HYPERLINK(1)")
    client.force_login(staff)
    response = client.post(
        reverse("admin:jobs_auditevent_changelist"),
        {"action": "export_csv", "_selected_action": [row.pk]},
    )
    assert response["Content-Type"].startswith("text/csv")
    assert "'=HYPERLINK(1)" in response.content.decode()


# --- retention ------------------------------------------------------------------------


def test_retention_removes_only_rows_older_than_the_setting(settings):
    settings.PORTAL_AUDIT_RETENTION_DAYS = 30
    old = [factories.audit_event(days_ago=31 + i) for i in range(3)]
    kept = factories.audit_event(days_ago=29)
    assert tasks.prune_audit_log.apply().get() == 3
    assert list(AuditEvent.objects.all()) == [kept]
    assert not AuditEvent.objects.filter(pk__in=[r.pk for r in old]).exists()


def test_retention_deletes_in_batches():
    for i in range(5):
        factories.audit_event(days_ago=500 + i)
    assert audit.prune(400, batch=2) == 5
    assert not AuditEvent.objects.exists()


def test_retention_runs_from_the_beat_schedule(settings):
    tasks_run = {e["task"] for e in settings.CELERY_BEAT_SCHEDULE.values()}
    assert "jobs.tasks.prune_audit_log" in tasks_run


# --- a session job's registration -----------------------------------------------------


def _register(client, link, secret: str):
    return client.post(
        f"/sessions/register/{link.public_id}/",
        '{"port": 8888, "token": "' + "t" * 32 + '"}',
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )


def test_registration_with_a_wrong_secret_is_a_refused_row_then_accepted_ok(
    client, running_notebook
):
    from proxy.models import SessionLink

    link = SessionLink.for_job(running_notebook)
    secret = link.issue_register_secret()
    assert _register(client, link, "wrong").status_code == 403
    assert _register(client, link, secret).status_code == 204
    refused, accepted = AuditEvent.objects.order_by("pk")
    assert (refused.action, refused.outcome, refused.username) == (
        "session_register",
        "refused",
        "owner",
    )
    assert "wrong secret" in refused.message and str(link.public_id) in refused.target
    assert (accepted.outcome, accepted.message) == ("ok", "accepted: 127.0.0.1 port 8888")
