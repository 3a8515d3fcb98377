"""A TensorBoard session on the dev cluster (real Slurm, sshd and the node's TensorBoard):
it serves the user's runs only to requests that carry the session's secret, which the
portal's proxy adds; anyone else on the node who finds the port gets a 403."""

import httpx
import pytest

from clusters import pool
from clusters.models import ClusterAccount
from jobs import tasks
from tests import factories, polling
from tests.devcluster.helpers import started_session, tensorboard_runs

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]


def test_tensorboard_serves_the_runs_to_the_sessions_secret_only(devcluster, owner):
    folder, home = tensorboard_runs(devcluster, owner)
    account = ClusterAccount.for_user(devcluster, owner)
    image = factories.image("tb-host", offers_tensorboard=True, offers_notebook=False)
    job = factories.submitted_job(
        owner, devcluster, "", kind="tensorboard", image=image, notebook_dir=folder
    )
    try:
        info = started_session(account, job)
        url = f"http://127.0.0.1:{info['port']}/data/plugin/scalars/tags"

        def tags() -> httpx.Response | None:
            answer = httpx.get(url, headers={"Authorization": f"token {info['secret']}"})
            return answer if answer.status_code == 200 and answer.json() else None

        # connection.json is written the moment it listens; TensorBoard loads the runs.
        answer = polling.until(tags, 60, "TensorBoard to list the runs' tags", interval=1)
        assert answer.status_code == 200 and "loss" in answer.json()["run1"], answer.text
        print("tensorboard tags:", answer.json(), "port", info["port"])
        # Another user of the node who finds the port: nothing without the secret.
        for headers in ({}, {"Authorization": "token guessed"}):
            refused = httpx.get(url, headers=headers)
            assert refused.status_code == 403 and "loss" not in refused.text
        assert httpx.get(f"http://127.0.0.1:{info['port']}/").status_code == 403
        # One port only: TensorBoard's process listens on nothing but the session's port
        # (with --load_fast=false it starts no data server of its own either).
        pids = pool.with_connection(
            account,
            lambda conn: conn.run(["pgrep", "-f", f"serve_tensorboard.py .*{folder}"]).stdout,
        ).split()
        assert pids
        listening = pool.with_connection(account, lambda conn: conn.run(["ss", "-Hltnp"]).stdout)
        ports = {
            line.split()[3].rsplit(":", 1)[1]
            for line in listening.splitlines()
            if any(f"pid={pid}," in line for pid in pids)
        }
        assert ports == {str(info["port"])}, listening
    finally:
        job.request_cancel()
        tasks.cancel_job.apply(args=[job.pk])
        pool.with_connection(
            account, lambda conn: conn.run(["rm", "-rf", "--", f"{home}/{folder}"])
        )
