"""API token scopes (read, submit, admin), their maximum lifetime, and revocation when a
person is deactivated."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.utils import timezone

from identity.tokens import ApiToken
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    from jobs import tasks

    monkeypatch.setattr(tasks.submit_job, "delay", lambda *a: None)
    monkeypatch.setattr(tasks.cancel_job, "delay", lambda *a: None)


def test_a_read_token_reads_but_cannot_cancel(owner, cluster):
    job = factories.job(owner, cluster, state="running", scheduler_job_id="7")
    reader = factories.api_client(owner, scopes="read")
    assert reader.get(f"/api/v1/jobs/{job.pk}/").status_code == 200
    refused = reader.post(f"/api/v1/jobs/{job.pk}/cancel/")
    assert refused.status_code == 403 and "submit scope" in refused.json()["error"]["message"]
    submitter = factories.api_client(owner, scopes="read,submit")
    assert submitter.post(f"/api/v1/jobs/{job.pk}/cancel/").status_code in (200, 202)


def test_a_submit_only_token_cannot_read(owner):
    assert factories.api_client(owner, scopes="submit").get("/api/v1/jobs/").status_code == 403


def test_only_staff_may_hold_the_admin_scope(owner, staff):
    with pytest.raises(ValidationError):
        ApiToken.issue(owner, "x", scopes="read,admin")
    with pytest.raises(ValidationError):
        ApiToken.issue(owner, "x", scopes="read,root")
    with pytest.raises(ValidationError):
        ApiToken.issue(owner, "x", scopes="")
    assert ApiToken.issue(staff, "x", scopes="admin,read")[0].scopes == "read,admin"


def test_a_staff_token_acts_as_staff_only_with_the_admin_scope(owner, staff, cluster):
    theirs = factories.job(owner, cluster)
    plain = factories.api_client(staff, scopes="read,submit")
    assert plain.get(f"/api/v1/jobs/{theirs.pk}/").status_code == 404
    assert plain.get("/api/v1/jobs/").json()["count"] == 0
    admin = factories.api_client(staff, scopes="read,submit,admin")
    assert admin.get(f"/api/v1/jobs/{theirs.pk}/").status_code == 200


def test_a_staff_member_demoted_loses_the_admin_scope_at_once(owner, staff, cluster):
    theirs = factories.job(owner, cluster)
    admin = factories.api_client(staff, scopes="read,admin")
    staff.is_staff = False
    staff.save()
    assert admin.get(f"/api/v1/jobs/{theirs.pk}/").status_code == 404


def test_tokens_live_at_most_the_maximum_lifetime(owner, settings):
    settings.PORTAL_API_TOKEN_MAX_DAYS = 30
    never, _ = ApiToken.issue(owner, "never")
    long, _ = ApiToken.issue(owner, "long", days=365)
    short, _ = ApiToken.issue(owner, "short", days=7)
    now = timezone.now()
    assert abs(never.expires_at - (now + timedelta(days=30))) < timedelta(minutes=1)
    assert abs(long.expires_at - (now + timedelta(days=30))) < timedelta(minutes=1)
    assert abs(short.expires_at - (now + timedelta(days=7))) < timedelta(minutes=1)


def test_a_token_from_before_the_limit_without_expiry_ends_at_the_limit(owner, settings):
    settings.PORTAL_API_TOKEN_MAX_DAYS = 30
    row, token = ApiToken.issue(owner, "old")
    client = factories.bearer_client(token)
    ApiToken.objects.filter(pk=row.pk).update(
        expires_at=None, created_at=timezone.now() - timedelta(days=29)
    )
    assert client.get("/api/v1/jobs/").status_code == 200
    ApiToken.objects.filter(pk=row.pk).update(created_at=timezone.now() - timedelta(days=31))
    assert client.get("/api/v1/jobs/").status_code == 401


def test_deactivating_a_person_revokes_every_token(owner):
    clients = [factories.api_client(owner, name) for name in ("laptop", "ci", "notebook")]
    owner.is_active = False
    owner.save()
    assert ApiToken.objects.filter(user=owner, revoked_at__isnull=True).count() == 0
    owner.is_active = True  # reactivated: the old tokens stay revoked
    owner.save()
    assert all(c.get("/api/v1/jobs/").status_code == 401 for c in clients)


def test_the_account_page_and_issue_token_set_scopes(owner, staff):
    client = factories.bearer_client("unused")
    client.force_login(owner)
    client.post("/account/tokens/", {"name": "reader", "scopes": ["read"]})
    assert ApiToken.objects.get(user=owner, name="reader").scopes == "read"
    client.post("/account/tokens/", {"name": "boss", "scopes": ["read", "admin"]})
    assert not ApiToken.objects.filter(user=owner, name="boss").exists()
    assert "data-scopes" in client.get("/account/").content.decode()
    out = io.StringIO()
    call_command("issue_token", "staff", "--scopes", "read,admin", stdout=out, stderr=io.StringIO())
    assert ApiToken.objects.get(user=staff).scopes == "read,admin"
    with pytest.raises(CommandError):
        call_command("issue_token", "owner", "--scopes", "admin", stdout=out, stderr=out)


def test_tokens_made_before_scopes_keep_their_owners_powers(owner, staff):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    ApiToken.issue(owner, "o")
    ApiToken.issue(staff, "s")
    migration = MigrationExecutor(connection).loader.get_migration("jobs", "0027_identity_fields")
    forward = next(op for op in migration.operations if hasattr(op, "code"))
    from django.apps import apps

    forward.code(apps, None)
    assert ApiToken.objects.get(user=owner).scopes == "read,submit"
    assert ApiToken.objects.get(user=staff).scopes == "read,submit,admin"


def _token_rows(action: str) -> list:
    from identity.audit.models import AuditEvent

    return list(AuditEvent.objects.filter(action=action).order_by("pk"))


def test_making_and_revoking_a_token_on_the_account_page_is_audited(owner):
    """Before: no audit row for a token's creation or revocation (#39)."""
    from identity.audit.models import AuditEvent

    client = factories.bearer_client("unused")
    client.force_login(owner)
    client.post("/account/tokens/", {"name": "laptop", "scopes": ["read"]})
    row = ApiToken.objects.get(user=owner, name="laptop")
    (made,) = _token_rows(AuditEvent.Action.TOKEN_CREATE)
    assert (made.user, made.username, made.outcome) == (owner, "owner", "ok")
    assert made.target == f"token {row.pk} ({row.hint}…, 'laptop', read) of owner"
    client.post(f"/account/tokens/{row.pk}/revoke/")
    client.post(f"/account/tokens/{row.pk}/revoke/")  # again: already revoked, no new row
    (revoked,) = _token_rows(AuditEvent.Action.TOKEN_REVOKE)
    assert (revoked.user, revoked.target) == (owner, made.target)


def test_issue_token_is_audited_as_an_administrators_act(owner):
    from identity.audit.models import AuditEvent

    call_command("issue_token", "owner", stdout=io.StringIO(), stderr=io.StringIO())
    (made,) = _token_rows(AuditEvent.Action.TOKEN_CREATE)
    assert made.user == owner and "manage.py issue_token" in made.message
    assert made.target.endswith("'issued by an administrator', read,submit) of owner")


def test_a_withdrawn_person_has_one_revocation_row_per_live_token(owner):
    from identity.audit.models import AuditEvent
    from identity.signin import withdraw

    laptop, _ = ApiToken.issue(owner, "laptop")
    ci, _ = ApiToken.issue(owner, "ci")
    ApiToken.issue(owner, "old")[0].revoke()  # revoked before: not revoked again
    withdraw(owner)
    rows = _token_rows(AuditEvent.Action.TOKEN_REVOKE)
    assert sorted(r.target.split()[1] for r in rows) == sorted([str(laptop.pk), str(ci.pk)])
    assert all(r.user == owner and r.message == "withdrawn at a refused sign-in" for r in rows)
    assert ApiToken.objects.revoke_all(owner) == []  # nothing left to revoke, nothing listed


def test_deactivation_revokes_each_live_token_with_its_row(owner):
    from identity.audit.models import AuditEvent

    tokens = [ApiToken.issue(owner, name)[0] for name in ("laptop", "ci")]
    owner.is_active = False
    owner.save()
    owner.save()  # saved again while inactive: nothing left to revoke, no new row
    rows = _token_rows(AuditEvent.Action.TOKEN_REVOKE)
    assert sorted(r.target.split()[1] for r in rows) == sorted(str(t.pk) for t in tokens)
    assert {r.message for r in rows} == {"the person was deactivated"}
