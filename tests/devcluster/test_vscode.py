"""A VS Code session on the dev cluster (real Slurm, sshd and the node's code-server): the
only TCP port it opens is the session guard's, which answers the session's secret only;
code-server itself listens on a Unix socket only its user can open."""

import httpx
import pytest

from clusters import pool
from clusters.models import ClusterAccount
from jobs import tasks
from tests import factories
from tests.devcluster.helpers import started_session

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]


def test_code_server_is_reached_only_through_the_guard_with_the_secret(devcluster, owner):
    account = ClusterAccount.for_user(devcluster, owner)
    image = factories.image("vscode-host", offers_vscode=True, offers_notebook=False)
    job = factories.submitted_job(owner, devcluster, "", kind="vscode", image=image)
    try:
        info = started_session(account, job)
        base = f"http://127.0.0.1:{info['port']}"
        # Ready when registered: the guard listens only once code-server answers /healthz.
        alive = httpx.get(f"{base}/healthz", headers={"Authorization": f"token {info['secret']}"})
        assert alive.status_code == 200 and alive.json()["status"] in ("alive", "expired")
        for headers in ({}, {"Authorization": "token guessed"}):
            refused = httpx.get(f"{base}/", headers=headers)
            assert refused.status_code == 403 and "code-server" not in refused.text

        def run(argv: list[str]) -> str:
            return pool.with_connection(account, lambda conn: conn.run(argv).stdout)

        # The job's only TCP port is the guard's: code-server and whatever it starts
        # (its server, extension host, terminals) listen on Unix sockets only.
        # (Asked of the job's node's slurmd: the dev cluster runs both nodes' on one host,
        # and without a name scontrol asks whichever answers first.)
        node = run(["squeue", "-h", "-j", job.scheduler_job_id, "-o", "%N"]).strip()
        listed = run(["scontrol", "listpids", job.scheduler_job_id, node]).splitlines()[1:]
        pids = {line.split()[0] for line in listed if line.split()}
        assert len(pids) >= 3, listed  # the script, the guard, code-server's processes
        listening = run(["ss", "-Hltnp"])
        ports = {
            line.split()[3].rsplit(":", 1)[1]
            for line in listening.splitlines()
            if any(f"pid={pid}," in line for pid in pids)
        }
        assert ports == {str(info["port"])}, listening
        # Its socket: in the job's private work directory, mode 600.
        mode = run(["stat", "-c", "%a %F", f"{job.work_dir}/app.sock"]).strip()
        assert mode == "600 socket", mode
    finally:
        job.request_cancel()
        tasks.cancel_job.apply(args=[job.pk])
