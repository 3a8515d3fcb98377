"""Multi-node jobs on the real two-node dev cluster: the MPI and torchrun launchers, the
environment contract on both nodes, the data-parallel demo's accuracy check, and that
cancelling leaves no process behind on either node."""

import json
import os
import re
import time
from pathlib import Path

import pytest

from jobs import tasks
from jobs.metrics.models import MetricSeries
from jobs.metrics.tail import tail_job
from jobs.models import Job
from jobs.slurm import files
from tests import factories
from tests.devcluster.helpers import remote, run_until

pytestmark = [pytest.mark.devcluster]

NODES = {"node1", "node2"}
CONTRACT = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "NODE_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "PORTAL_NODE",
    "CUDA_VISIBLE_DEVICES",
)
# Each process writes the contract it sees to contract-<RANK>.json in the work directory
# (ranks on two nodes share stdout, where lines may interleave).
SHOW_CONTRACT = (
    "python3 -c 'import json, os; json.dump({k: os.environ.get(k) "
    f'for k in "{" ".join(CONTRACT)}".split()}}, '
    'open("contract-" + os.environ["RANK"] + ".json", "w"))\''
)


def distributed_job(owner, cluster, command, launcher, **fields):
    fields = {"nodes": 2, "tasks_per_node": 2, "gpus": 2, "gpu_type": "v100", **fields}
    job = factories.job(
        owner, cluster, command, partition="gpu", launcher=launcher, time_limit_minutes=5, **fields
    )
    job.full_clean()
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert job.state == Job.State.PENDING, job.message
    return job


def contracts(job) -> list[dict]:
    account = job.cluster_account
    names = remote(account, ["ls", job.work_dir]).split()
    return [
        json.loads(remote(account, ["cat", f"{job.work_dir}/{name}"]))
        for name in names
        if re.fullmatch(r"contract-\d+\.json", name)
    ]


@pytest.mark.django_db
def test_mpi_ranks_run_on_both_nodes_with_the_contract_and_one_gpu_each(devcluster, owner):
    job = distributed_job(owner, devcluster, SHOW_CONTRACT, "mpi")
    job = run_until(job, {"completed", "failed"}, timeout=90)
    assert job.state == "completed", (job.message, files.read_job_log(job, "stderr").text)
    assert sorted(job.node_list) == ["node1", "node2"]
    seen = contracts(job)
    assert sorted(int(c["RANK"]) for c in seen) == [0, 1, 2, 3]
    assert {c["WORLD_SIZE"] for c in seen} == {"4"} and {c["LOCAL_WORLD_SIZE"] for c in seen} == {
        "2"
    }
    by_rank = {int(c["RANK"]): c for c in seen}
    # Ranks fill the first node, then the second; each rank has its own GPU of its node.
    assert [by_rank[r]["PORTAL_NODE"] for r in range(4)] == ["node1", "node1", "node2", "node2"]
    assert [by_rank[r]["NODE_RANK"] for r in range(4)] == ["0", "0", "1", "1"]
    assert [by_rank[r]["LOCAL_RANK"] for r in range(4)] == ["0", "1", "0", "1"]
    assert [by_rank[r]["CUDA_VISIBLE_DEVICES"] for r in range(4)] == ["0", "1", "0", "1"]
    assert {c["MASTER_ADDR"] for c in seen} == {"node1"}
    port = int(by_rank[0]["MASTER_PORT"])
    assert port == 20000 + int(job.scheduler_job_id) % 20000
    assert (
        "portal: rank 3 of 4 (local rank 1 of 2) on node2" in files.read_job_log(job, "stdout").text
    )


@pytest.fixture
def torchrun_stand_in():
    """tests/devcluster/torchrun_stand_in.py as `torchrun` on the nodes' PATH, for one test."""
    target = Path("/usr/local/bin/torchrun")
    if target.exists():
        pytest.fail(f"{target} exists: the stand-in would replace it")
    target.write_text((Path(__file__).parent / "torchrun_stand_in.py").read_text())
    target.chmod(0o755)
    yield
    target.unlink()


@pytest.mark.django_db
def test_the_torchrun_line_gives_each_node_the_contract(devcluster, owner, torchrun_stand_in):
    """PyTorch is not on the dev cluster (its wheels bring gigabytes of CUDA): a stand-in
    `torchrun` records the arguments and environment that the portal's srun line hands it
    on each node, and starts the command per task as torchrun does. What is checked is the
    portal's part: one torchrun per node, the rendezvous, the node ranks."""
    job = distributed_job(owner, devcluster, SHOW_CONTRACT, "torchrun")
    job = run_until(job, {"completed", "failed"}, timeout=90)
    assert job.state == "completed", (job.message, files.read_job_log(job, "stderr").text)
    out = files.read_job_log(job, "stdout").text
    launches = [json.loads(m) for m in re.findall(r"TORCHRUN (\{.*?\}\})", out)]
    assert sorted(t["env"]["PORTAL_NODE"] for t in launches) == ["node1", "node2"]
    port = str(20000 + int(job.scheduler_job_id) % 20000)
    for t in launches:
        assert t["env"]["NODE_RANK"] == {"node1": "0", "node2": "1"}[t["env"]["PORTAL_NODE"]]
        assert t["env"]["NNODES"] == "2" and t["env"]["MASTER_PORT"] == port
        assert t["argv"][:7] == [
            "--nnodes=2",
            "--nproc-per-node=2",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint=node1:{port}",
            f"--rdzv-id={job.scheduler_job_id}",
            "--max-restarts=0",
            "--no-python",
        ]
        assert t["argv"][7:9] == ["bash", "-c"]
    seen = contracts(job)
    assert sorted(int(c["RANK"]) for c in seen) == [0, 1, 2, 3]
    # torchrun's workers see the node's GPUs (each takes cuda:LOCAL_RANK).
    assert {(c["PORTAL_NODE"], c["CUDA_VISIBLE_DEVICES"]) for c in seen} == {
        ("node1", "0,1"),
        ("node2", "0,1"),
    }
