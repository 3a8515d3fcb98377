"""Both real clusters in certificate mode: the portal signs a short-lived certificate for
each connection and keeps no private key; the cluster's real sshd (the dev cluster's, the
pool's chrooted one: trixie's OpenSSH) checks it (#32)."""

import time

import pytest

from clusters import acting, certs, files, pool
from clusters.models import ClusterAccount
from devtools import devcluster as devcluster_mod
from identity.audit.models import AuditEvent
from jobs import tasks
from jobs.models import Job
from tests import factories
from tests.devcluster.helpers import (
    SshdLog,
    certificate,
    connection_info,
    private_keys_in_key_columns,
    record_issued_keys,
    run_until,
    sshd_accepts,
    sync_until,
)
from tests.scheduling.helpers import EVERY_GPU, hold

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def cert_cluster(scheduler_cluster, scheduler_info, trusted_ca):
    """The cluster under test registered in certificate mode, a test CA of its own trusted."""
    trusted_ca(scheduler_info)
    cluster = devcluster_mod.register(
        scheduler_info, {"owner": scheduler_info["default_user"]}, "certificate"
    )
    assert cluster.uses_certificates
    return cluster


def sync_until_held(job: Job, held: bool, timeout: float = 60) -> Job:
    return sync_until(
        job,
        lambda j: j if j.is_held == held and j.state == Job.State.PENDING else None,
        timeout,
        lambda: f"to be pending with held={held} (held={job.is_held})",
    )


@pytest.mark.alone  # it takes every GPU (tests/conftest.py)
def test_jobs_and_a_notebook_run_over_certificates_and_no_private_key_is_kept(
    cert_cluster, scheduler_info, owner, monkeypatch
):
    issued = record_issued_keys(monkeypatch)
    log = SshdLog(scheduler_info["sshd_log"])
    account = ClusterAccount.for_user(cert_cluster, owner)
    assert account is not None and account.private_key_encrypted == ""

    # A job followed to running; a second one queued behind it (both take every GPU).
    every_gpu = EVERY_GPU[cert_cluster.scheduler]
    first = factories.job(owner, cert_cluster, "sleep 300", **every_gpu)
    second = factories.job(owner, cert_cluster, "echo released-$((6*7))", **every_gpu)
    tasks.submit_job.apply(args=[first.pk])
    first = run_until(first, {"running"}, timeout=180)
    tasks.submit_job.apply(args=[second.pk])
    second.refresh_from_db()
    assert second.state == Job.State.PENDING, second.message
    # Held by its owner (over the portal's connection), then released by the portal.
    hold(second)
    second = sync_until_held(second, True)
    tasks.release_job.apply(args=[second.pk])
    second = sync_until_held(second, False)
    # The first cancelled; the second then runs, and its log and files are read.
    assert first.request_cancel()
    tasks.cancel_job.apply(args=[first.pk])
    run_until(first, {"cancelled"}, timeout=30)
    second = run_until(second, {"completed", "failed"}, timeout=120)
    assert (second.state, second.exit_code) == ("completed", 0), second.message
    assert "released-42" in files.read_job_log(second, "stdout").text
    entries, _ = pool.with_connection(
        account, lambda conn: files.list_work_dir(conn, second.work_dir, "")
    )
    assert "job.sh" in {entry.name for entry in entries}

    # A notebook session opens (its connection file read over SFTP).
    image = factories.image("nb-host", offers_notebook=True)
    notebook = factories.submitted_job(owner, cert_cluster, "", kind="notebook", image=image)
    info = connection_info(account, notebook, timeout=180)
    assert info["port"], info
    assert notebook.request_cancel()
    tasks.cancel_job.apply(args=[notebook.pk])

    # Every login was a certificate of the portal's, named in sshd's log by its key id:
    # the portal's own bookkeeping (the last read above) as the portal's ("-", sync) ...
    where = f"{account.username}@{cert_cluster.name}"
    key_id = acting.key_id.get()
    assert key_id.startswith(f"portal:-:{where}:sync:"), key_id
    text = log.text()
    assert f" ID {key_id} (serial " in text, text[-2000:]
    assert issued  # (stored-key logins of other tests may share the log: none counted)
    # ... and each action by who asked and what kind of action, as the audit log records it
    # (a connection is kept per person and kind of action: the two submits share one, whose
    # key id names the first target; each row keeps its own target).
    audited = AuditEvent.objects.filter(cluster=cert_cluster).exclude(key_id="")
    assert {"submit", "release", "cancel"} <= {row.action for row in audited}
    for row in audited:
        named = certs.make_key_id("owner", account.username, cert_cluster.name, row.action, 0)
        assert row.key_id.startswith(named.rsplit(":", 1)[0]), row.key_id
        assert f" ID {row.key_id} (serial " in text, row.key_id
    # No private key for the user anywhere in the database's key columns.
    assert private_keys_in_key_columns(issued) == []
    assert not ClusterAccount.objects.exclude(private_key_encrypted="").exists()


def test_sshd_refuses_an_expired_certificate_and_one_for_another_user(
    cert_cluster, scheduler_info, settings
):
    user = scheduler_info["default_user"]
    other = next(name for name in sorted(scheduler_info["users"]) if name != user)
    ca = settings.PORTAL_SSH_CA_KEY_FILES[0]
    log = SshdLog(scheduler_info["sshd_log"])
    now = int(time.time())
    fresh = certificate(ca, user, valid_after=now - 60, valid_before=now + 300)
    assert sshd_accepts(scheduler_info, user, fresh)  # the CA is trusted
    expired = certificate(ca, user, valid_after=now - 3600, valid_before=now - 600)
    assert not sshd_accepts(scheduler_info, user, expired)
    assert "Certificate invalid: expired" in log.text()
    # The portal's own certificate for the user, presented as another user.
    mine = certs.issue(user, "owner", cluster=cert_cluster.name)
    assert sshd_accepts(scheduler_info, user, mine)
    assert not sshd_accepts(scheduler_info, other, mine)
    assert "Certificate does not contain an authorized principal" in log.text()


def test_a_running_job_is_followed_across_a_ca_rotation(
    cert_cluster, scheduler_info, owner, trusted_ca, settings
):
    old_ca = settings.PORTAL_SSH_CA_KEY_FILES[0]
    job = factories.submitted_job(owner, cert_cluster, "sleep 300")
    job = run_until(job, {"running"}, timeout=120)
    before = acting.key_id.get()
    old_fingerprint = certs.ca_fingerprint()
    log = SshdLog(scheduler_info["sshd_log"])

    # Rotation: the new CA trusted beside the old one and signing first.
    trusted_ca(scheduler_info, "new")
    assert settings.PORTAL_SSH_CA_KEY_FILES[1] == old_ca
    assert certs.ca_fingerprint() != old_fingerprint
    tasks.sync_jobs(Job.objects.filter(pk=job.pk))
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING, job.message
    after = acting.key_id.get()
    assert after and after != before  # a new connection, with the new CA's certificate
    accepted = [line for line in log.text().splitlines() if f" ID {after} " in line]
    assert accepted and accepted[0].endswith(f"CA ED25519 {certs.ca_fingerprint()}"), accepted
    assert job.request_cancel()
    tasks.cancel_job.apply(args=[job.pk])
    run_until(job, {"cancelled"}, timeout=30)
