"""One request id from an API submission, found where an operator looks for it: the web
server's JSON log line, the worker's lines for the task it queued, the audit row of the
submission and sshd's log of the certificate login on the dev cluster. And no secret the
run used (the API token, the job's upload token) in any line of any of its logs."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from identity.audit.models import AuditEvent
from identity.tokens import ApiToken
from jobs.models import Job
from metrics import ingest
from tests import factories, polling
from tests.livestack import LiveStack

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]

SSHD_LOG = Path("/var/lib/portal-devcluster/log/sshd.log")


def _json_lines(text: str) -> list[dict]:
    lines = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                lines.append(json.loads(line))
            except ValueError:
                pass
    return lines


def test_a_submissions_request_id_is_in_every_log_and_no_secret_is(
    devcluster, devcluster_info, trusted_ca, owner, tmp_path
):
    factories.image("rid-host")
    ca = trusted_ca(devcluster_info)  # certificate mode: the key id names the request
    devcluster.ssh_auth = devcluster.SshAuth.CERTIFICATE
    devcluster.save()
    env = {"PORTAL_LOG_FORMAT": "json", "LOG_LEVEL": "INFO", "PORTAL_SSH_CA_KEY_FILES": str(ca)}
    stack = LiveStack(tmp_path, env=env).start()
    _, token = ApiToken.issue(owner, "request-id")
    try:
        answer = httpx.post(
            f"{stack.url}/api/v1/jobs/",
            json={
                "container": "rid-host",
                "kind": "batch",
                "partition": "cpu",
                "cpus": 1,
                "memory_gb": 1,
                "time_limit": 5,
                "command": "echo traced",
            },
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert answer.status_code == 201, answer.text
        rid = answer.headers["X-Request-ID"]
        job = Job.objects.get(pk=answer.json()["id"])

        def audited() -> AuditEvent | None:
            return AuditEvent.objects.filter(
                action=AuditEvent.Action.SUBMIT, target=f"job {job.pk}"
            ).first()

        row = polling.until(audited, 120, "the submission's audit row", interval=0.5)
        assert row.request_id == rid and row.outcome == "ok", (row.request_id, rid)
        assert f":req={rid}:" in row.key_id  # the certificate it ran on names the request
        logins = polling.until(
            lambda: (
                [line for line in SSHD_LOG.read_text().splitlines() if f"req={rid}" in line] or None
            ),
            30,
            "sshd's log of the certificate login",
        )
        # (the submission's own login among them: the audit row names its key id)
        assert any("Accepted publickey for" in line and row.key_id in line for line in logins)

        web = _json_lines((tmp_path / "web.log").read_text())
        assert any(line.get("request_id") == rid for line in web), "no web line has the id"
        worker = polling.until(
            lambda: (
                [
                    line
                    for line in _json_lines((tmp_path / "worker.log").read_text())
                    if line.get("request_id") == rid
                ]
                or None
            ),
            30,
            "the worker's lines of the submit task",
        )
        assert any("submit_job" in line["message"] for line in worker), worker
        assert any(line.get("job") == str(job.pk) for line in worker), worker  # (bound)

        # The job's upload token through the same stack, then: none of the secrets in any log.
        upload = ingest.issue_token(job)
        httpx.post(
            f"{stack.url}/api/v1/jobs/{job.pk}/metrics/ingest/",
            json=factories.metric_records(3),
            headers={"Authorization": f"Bearer {upload}"},
            timeout=30,
        )
        httpx.get(f"{stack.url}/api/v1/jobs/?password=hunter2secret&token={token}", timeout=30)
    finally:
        stack.stop()
    logs = {path.name: path.read_text() for path in tmp_path.glob("*.log")}
    assert {"web.log", "worker.log", "beat.log"} <= set(logs)
    for secret in (token, upload, "hunter2secret"):
        leaked = [name for name, text in logs.items() if secret in text]
        assert not leaked, f"a secret reached {leaked}"
