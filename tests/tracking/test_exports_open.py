"""An exported TensorBoard file opens in TensorBoard itself (#46's "done when"): the
server TensorBoard runs (``tensorboard --logdir``, this repository's pinned 2.21) serves
the exported run's scalars through its own HTTP API, the same points as stored."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.livestack import free_port
from tests.polling import until
from tests.tracking.test_exports import as_tensorboard, body, logged_job, stored

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.tracking.test_exports")]


def get(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def test_an_exported_event_file_opens_in_tensorboards_own_server(client, owner, cluster, tmp_path):
    job = logged_job(owner, cluster)
    client.force_login(owner)
    response = client.get(f"/jobs/{job.pk}/metrics/export/tensorboard/")
    name = response["Content-Disposition"].split('filename="')[1].rstrip('"')
    logdir = tmp_path / "logs"
    logdir.mkdir()
    (logdir / Path(name).name).write_bytes(body(response))
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tensorboard.main",
            f"--logdir={logdir}",
            f"--port={port}",
            "--host=127.0.0.1",
            "--load_fast=false",
            "--reload_interval=1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        base = f"http://127.0.0.1:{port}/data/plugin/scalars"
        tags = until(
            lambda: get(f"{base}/tags").get(".", {}),
            60,
            "TensorBoard to list the exported run's scalars",
            ignoring=(urllib.error.URLError, ConnectionError),
        )
        want = stored(job)
        assert set(tags) == set(want)
        for tag, points in want.items():
            query = urllib.parse.urlencode({"run": ".", "tag": tag})
            served = get(f"{base}/scalars?{query}")  # [[wall time, step, value], ...]
            got = [(step, value, wall) for wall, step, value in served]
            assert got == as_tensorboard(points), tag
    finally:
        server.terminate()
        server.wait(timeout=30)
