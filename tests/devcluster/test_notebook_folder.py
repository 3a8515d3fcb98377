"""A notebook opens in the folder the user chose inside their home, made if missing, and
without JupyterLab's news pop-up (real Slurm, sshd and the dev cluster's JupyterLab)."""

import json
import secrets

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from clusters import files, pool
from clusters.models import ClusterAccount
from jobs import tasks
from tests import factories, polling
from tests.devcluster.helpers import connection_info

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]


def kernel_info_request(pad: int) -> str:
    """A kernel_info_request (Jupyter's JSON WebSocket protocol) padded to ``pad`` bytes."""
    header = {"msg_id": secrets.token_hex(8), "msg_type": "kernel_info_request"}
    header.update(username="", session="s", date="", version="5.3")
    message = {"header": header, "parent_header": {}, "content": {}, "channel": "shell"}
    message["metadata"] = {"pad": "x" * pad}
    return json.dumps(message)


def test_a_notebook_opens_in_the_folder_chosen_and_makes_it(devcluster, owner):
    folder = f"portal-test-{secrets.token_hex(3)}/my project"
    image = factories.image("nb-host", offers_notebook=True)
    job = factories.submitted_job(
        owner, devcluster, "", kind="notebook", image=image, notebook_dir=folder
    )
    account = ClusterAccount.for_user(devcluster, owner)
    home = devcluster.work_dir_root("home", account.username)
    try:

        def started() -> str | None:
            log = files.read_job_log(job, "stderr").text
            return log if "is running at" in log else None

        log = polling.until(started, 120, "Jupyter to say it is running", interval=1)
        assert f"Serving notebooks from local directory: {home}/{folder}" in log, log[-3000:]

        # JupyterLab does not ask about (or fetch) Jupyter news or updates: the job's own
        # default_setting_overrides.json makes "never" the default of both settings, as the
        # settings API of the JupyterLab it started says (what the user saved still wins).
        # connection.json follows Jupyter's "is running at" by up to a moment.
        info = connection_info(account, job, timeout=30, interval=0.2)
        answer = httpx.get(
            f"http://127.0.0.1:{info['port']}/lab/api/settings/"
            "@jupyterlab/apputils-extension:notification",
            headers={"Authorization": f"token {info['secret']}"},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        defaults = answer.json()["schema"]["properties"]
        assert defaults["fetchNews"]["default"] == "false"
        assert defaults["checkForUpdates"]["default"] is False

        # Kernel WebSocket messages have a size bound (Tornado's 10 MiB default, which
        # Jupyter keeps): a bigger one closes the socket (1009) instead of being buffered.
        base = f"127.0.0.1:{info['port']}"
        auth = {"Authorization": f"token {info['secret']}"}
        kernel = httpx.post(f"http://{base}/api/kernels", headers=auth, json={}, timeout=60)
        assert kernel.status_code == 201, kernel.text
        with connect(
            f"ws://{base}/api/kernels/{kernel.json()['id']}/channels",
            additional_headers=auth,
            max_size=None,
        ) as socket:
            socket.send(kernel_info_request(pad=1024 * 1024))  # 1 MiB: answered
            assert json.loads(socket.recv(timeout=30))["channel"] in ("iopub", "shell")
            with pytest.raises(ConnectionClosed) as closed:
                socket.send(kernel_info_request(pad=10 * 1024 * 1024))
                socket.recv(timeout=30)
        # "message too big", or the reset of a socket closed while the message was sent
        assert closed.value.rcvd is None or closed.value.rcvd.code == 1009
    finally:
        job.request_cancel()
        tasks.cancel_job.apply(args=[job.pk])
        top = f"{home}/{folder.split('/')[0]}"
        pool.with_connection(account, lambda conn: conn.run(["rm", "-rf", "--", top]))
