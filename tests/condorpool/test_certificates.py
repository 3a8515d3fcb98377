"""The HTCondor pool in certificate mode: its chrooted sshd (trixie's OpenSSH) checks the
portal's short-lived certificates; the portal keeps no private key (#32)."""

import time

import pytest

from devtools import devcluster as devcluster_mod
from jobs import tasks
from jobs.cluster import acting, certs, files, pool
from jobs.models import AuditEvent, ClusterAccount, Job
from tests import factories
from tests.devcluster.helpers import (
    SshdLog,
    certificate,
    connection_info,
    private_keys_in_key_columns,
    record_issued_keys,
    remote,
    run_until,
    sshd_accepts,
    sync_until,
)

pytestmark = [pytest.mark.condorpool, pytest.mark.django_db]


@pytest.fixture
def cert_pool(condorpool, condorpool_info, trusted_ca):
    trusted_ca(condorpool_info)
    cluster = devcluster_mod.register(
        condorpool_info, {"owner": condorpool_info["default_user"]}, "certificate"
    )
    assert cluster.uses_certificates
    return cluster


def test_jobs_and_a_notebook_run_over_certificates_and_no_private_key_is_kept(
    cert_pool, condorpool_info, owner, monkeypatch
):
    issued = record_issued_keys(monkeypatch)
    log = SshdLog(condorpool_info["sshd_log"])
    account = ClusterAccount.for_user(cert_pool, owner)
    assert account is not None and account.private_key_encrypted == ""

    running = factories.submitted_job(owner, cert_pool, "sleep 300")
    held = factories.submitted_job(owner, cert_pool, "echo released-$((6*7))")
    assert Job.State.PENDING == held.state, held.message
    remote(account, ["condor_hold", "-reason", "by its owner", held.scheduler_job_id])
    sync_until(held, lambda j: j.is_held, 30, lambda: f"to be held ({held.pending_reason})")
    tasks.release_job.apply(args=[held.pk])
    running = run_until(running, {"running"}, timeout=120)
    assert running.request_cancel()
    tasks.cancel_job.apply(args=[running.pk])
    run_until(running, {"cancelled"}, timeout=60)
    held = run_until(held, {"completed", "failed"}, timeout=120)
    assert (held.state, held.exit_code) == ("completed", 0), held.message
    assert "released-42" in files.read_job_log(held, "stdout").text
    entries, _ = pool.with_connection(
        account, lambda conn: files.list_work_dir(conn, held.work_dir, "")
    )
    assert "job.sh" in {entry.name for entry in entries}

    image = factories.image("nb-host", offers_notebook=True)
    notebook = factories.submitted_job(owner, cert_pool, "", kind="notebook", image=image)
    info = connection_info(account, notebook, timeout=180)
    assert info["port"], info
    assert notebook.request_cancel()
    tasks.cancel_job.apply(args=[notebook.pk])

    # The last read above is the portal's own bookkeeping: a certificate named for it ...
    key_id = acting.key_id.get()
    assert key_id.startswith("portal:-:condoruser@condorpool:sync:"), key_id
    text = log.text()
    assert f" ID {key_id} (serial " in text
    # ... and each action's own, naming who asked and what (as the audit log records it).
    audited = AuditEvent.objects.filter(cluster=cert_pool).exclude(key_id="")
    assert {"submit", "release", "cancel"} <= {row.action for row in audited}
    for row in audited:
        named = certs.make_key_id(
            "owner", "condoruser", "condorpool", f"{row.action} {row.target}", 0
        )
        assert row.key_id.startswith(named.rsplit(":", 1)[0] + ":"), row.key_id
        assert f" ID {row.key_id} (serial " in text, row.key_id
    assert issued
    assert private_keys_in_key_columns(issued) == []


def test_the_pools_sshd_refuses_an_expired_certificate_and_one_for_another_user(
    cert_pool, condorpool_info, settings
):
    ca = settings.PORTAL_SSH_CA_KEY_FILES[0]
    log = SshdLog(condorpool_info["sshd_log"])
    now = int(time.time())
    expired = certificate(ca, "condoruser", valid_after=now - 3600, valid_before=now - 600)
    assert not sshd_accepts(condorpool_info, "condoruser", expired)
    mine = certs.issue("condoruser", "owner", cluster="condorpool")
    assert sshd_accepts(condorpool_info, "condoruser", mine)
    assert not sshd_accepts(condorpool_info, "condoruser2", mine)
    text = log.text()
    assert "Certificate invalid: expired" in text
    assert "Certificate does not contain an authorized principal" in text
