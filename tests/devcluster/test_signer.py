"""The CA key lives where the signing happens (#39): `manage.py ssh_signer` is the only
process with the key; this test process (as a web or worker process would) has none, asks
the signer for each certificate, and the real sshd accepts them. The signer applies the
account rule on its own: a typed row is refused even when the asking process skips it."""

import os
import signal
import subprocess
import sys

import pytest

from clusters import certs, signer
from clusters.models import ClusterAccount
from devtools import devcluster as devcluster_mod
from jobs import tasks
from jobs.models import Job
from tests import factories, polling
from tests.devcluster.helpers import SshdLog, run_until
from tests.livestack import ROOT, database_url

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def signer_process(devcluster, devcluster_info, trusted_ca, tmp_path, settings):
    """The dev cluster in certificate mode, a signer holding its CA, and this process
    pointed at the signer with no CA key of its own."""
    ca = trusted_ca(devcluster_info)
    cluster = devcluster_mod.register(
        devcluster_info, {"owner": devcluster_info["default_user"]}, "certificate"
    )
    socket_path = str(tmp_path / "signer.sock")
    log = open(tmp_path / "signer.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [sys.executable, "manage.py", "ssh_signer", "--socket", socket_path],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": database_url(), "PORTAL_SSH_CA_KEY_FILES": str(ca)},
        stdout=log,
        stderr=subprocess.STDOUT,
    )

    def listening() -> bool:
        if os.path.exists(socket_path):
            return True
        assert process.poll() is None, (tmp_path / "signer.log").read_text()
        return False

    polling.until(listening, 30, "the signer to start", interval=0.1)
    settings.PORTAL_SSH_SIGNER_SOCKET = socket_path
    settings.PORTAL_SSH_CA_KEY_FILES = [str(tmp_path / "no-key-here")]
    try:
        yield cluster, process
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=10)
        log.close()


def test_jobs_run_on_certificates_from_the_signer_which_applies_its_own_rule(
    signer_process, devcluster_info, owner, monkeypatch
):
    cluster, process = signer_process
    with pytest.raises(certs.CAMissing):
        certs.signing_key()  # this process cannot sign
    sshd = SshdLog(devcluster_info["sshd_log"])
    job = factories.job(owner, cluster, "echo signed-$((6*7))")
    tasks.submit_job.apply(args=[job.pk])
    job = run_until(job, {"completed", "failed"}, timeout=120)
    assert job.state == Job.State.COMPLETED, job.message
    assert f"ID portal:owner:hpcuser@devcluster:submit_job_{job.pk}:" in sshd.text()

    # This process skips the rule (as a compromised web process would): the signer refuses.
    monkeypatch.setattr(signer, "signing_refusal", lambda account, requester="": "")
    ClusterAccount.objects.filter(user=owner, cluster=cluster).update(mapped_by="")
    typed = factories.job(owner, cluster, "echo never")
    tasks.submit_job.apply(args=[typed.pk])
    typed.refresh_from_db()
    assert typed.state == Job.State.SUBMIT_FAILED, typed.message
    assert "typed, not proven" in typed.message

    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=10) == 0
    assert not os.path.exists(signer_process_socket(process))


def signer_process_socket(process) -> str:
    return process.args[process.args.index("--socket") + 1]
