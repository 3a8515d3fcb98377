"""A notebook opens in the folder the user chose inside their home, made if missing, and
without JupyterLab's news pop-up (real Slurm, sshd and the dev cluster's JupyterLab)."""

import json
import re
import secrets
import time

import httpx
import pytest

from jobs import tasks
from jobs.models import ClusterAccount
from jobs.slurm import operations
from tests import factories

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]


def test_a_notebook_opens_in_the_folder_chosen_and_makes_it(devcluster, owner):
    folder = f"portal-test-{secrets.token_hex(3)}/my project"
    image = factories.host_image("nb-host", offers_notebook=True)
    job = factories.submitted_job(
        owner, devcluster, "", kind="notebook", image=image, notebook_dir=folder
    )
    account = ClusterAccount.for_user(devcluster, owner)
    home = devcluster.workdir_root("home", account.username)
    try:
        deadline, log = time.monotonic() + 120, ""
        while time.monotonic() < deadline and "is running at" not in log:
            time.sleep(1)
            log = operations.read_job_log(job, "stderr").text
        assert f"Serving notebooks from local directory: {home}/{folder}" in log, log[-3000:]

        # JupyterLab does not ask about (or fetch) Jupyter news: the page it serves has the
        # announcements plugin disabled by the job's own page_config.json.
        info = operations.on_account(
            account, lambda conn: operations.read_connection_file(conn, job.work_dir)
        )
        page = httpx.get(
            f"http://127.0.0.1:{info['port']}/lab",
            headers={"Authorization": f"token {info['secret']}"},
            timeout=30,
        ).text
        config = json.loads(
            re.search(r'id="jupyter-config-data"[^>]*>\s*(\{.*?\})\s*</script>', page, re.S).group(
                1
            )
        )
        assert "@jupyterlab/apputils-extension:announcements" in config["disabledExtensions"]
    finally:
        job.request_cancel()
        tasks.cancel_job.apply(args=[job.pk])
        top = f"{home}/{folder.split('/')[0]}"
        operations.on_account(account, lambda conn: conn.run(["rm", "-rf", "--", top]))
