import subprocess

import pytest

from jobs.models import Job
from jobs.slurm import pool


@pytest.fixture(autouse=True)
def _fresh_pool():
    pool.close_all()
    yield
    pool.close_all()


@pytest.fixture(autouse=True)
def _cancel_leftover_slurm_jobs(request, db):
    """Even when a test fails, its Slurm jobs must not hold GPUs for the next one."""
    yield
    if "devcluster" not in request.fixturenames:
        return
    info = request.getfixturevalue("devcluster_info")
    ids = list(Job.objects.exclude(scheduler_job_id="").values_list("scheduler_job_id", flat=True))
    if ids:
        subprocess.run(
            ["scancel", "-u", info["default_user"], *ids], capture_output=True, timeout=30
        )
