"""An app a centre added in the admin, on the dev cluster (real Slurm and sshd, the node's
python3): started by its command behind the session guard, on a Unix socket or a
loopback port, with a person's hostile value reaching it as one literal argument and as
PORTAL_APP_MESSAGE, never as shell; the node's port answers only the session's secret."""

import httpx
import pytest

from clusters import pool
from clusters.models import ClusterAccount
from jobs import tasks
from tests import factories
from tests.devcluster.helpers import started_session

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]

HOSTILE = "$(touch ~/pwned-by-app); echo `id` > ~/pwned-too\nsecond line; exit 1"


@pytest.mark.parametrize("socket", [True, False], ids=["unix-socket", "loopback-port"])
def test_an_added_app_gets_a_hostile_value_as_a_literal_word(devcluster, owner, socket):
    account = ClusterAccount.for_user(devcluster, owner)
    app = factories.session_app(socket=socket)
    job = factories.submitted_job(
        owner, devcluster, "", kind="app", image=app.image, app=app,
        app_values={"message": HOSTILE}, notebook_dir="apps/echo",
    )  # fmt: skip
    try:
        info = started_session(account, job)
        base = f"http://127.0.0.1:{info['port']}"
        seen = httpx.get(f"{base}/x?y=1", headers={"Authorization": f"token {info['secret']}"})
        assert seen.status_code == 200, seen.text
        echo = seen.json()
        home = devcluster.work_dir_root("home", account.username)
        assert echo["argv"][1:] == [HOSTILE, f"--folder={home}/apps/echo"]
        assert echo["env"]["PORTAL_APP_MESSAGE"] == HOSTILE
        assert "PORTAL_SESSION_TOKEN" not in echo["env"] and echo["path"] == "/x?y=1"
        if socket:
            assert echo["argv"][0].endswith("/app.sock")
        else:
            assert echo["argv"][0].isdigit() and echo["argv"][0] != str(info["port"])
        for headers in ({}, {"Authorization": "token guessed"}):
            assert httpx.get(f"{base}/", headers=headers).status_code == 403
        listing = pool.with_connection(account, lambda conn: conn.run(["ls", "-a", home]).stdout)
        assert "pwned" not in listing  # nothing of the value ran
    finally:
        job.request_cancel()
        tasks.cancel_job.apply(args=[job.pk])
