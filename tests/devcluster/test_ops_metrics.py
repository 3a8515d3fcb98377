"""The metrics of a job's life on the dev cluster (real sshd, real Slurm): its sbatch,
the sync's squeue/sacct and the SSH connection are counted under the cluster's name."""

import pytest
from prometheus_client import REGISTRY

from tests.devcluster.helpers import run_job

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]


def _count(name: str, labels: dict) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_a_jobs_commands_and_its_sync_are_counted(devcluster, owner, client):
    cluster = devcluster.name
    sbatch = {"cluster": cluster, "command": "sbatch"}
    before = _count("portal_scheduler_command_duration_seconds_count", sbatch)
    connects = _count("portal_ssh_connects_total", {"cluster": cluster})
    run_job(owner, devcluster, "echo counted")
    assert _count("portal_scheduler_command_duration_seconds_count", sbatch) == before + 1
    assert _count("portal_ssh_connects_total", {"cluster": cluster}) > connects
    assert REGISTRY.get_sample_value(
        "portal_sync_last_success_timestamp_seconds", {"cluster": cluster}
    )
    exposition = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    reads = [
        line
        for line in exposition.splitlines()
        if line.startswith("portal_scheduler_command_duration_seconds_count")
        and f'cluster="{cluster}"' in line
        and ('command="squeue"' in line or 'command="sacct"' in line)
    ]
    assert reads, "the sync's reads of the scheduler are not counted"
    assert "counted" not in exposition  # (nothing of the job's own text is a label)
