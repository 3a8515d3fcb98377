"""Multi-node jobs on the real two-node dev cluster: the MPI and torchrun launchers (a real
PyTorch DDP job over gloo), the environment contract on both nodes, the data-parallel demo's accuracy check, and that
cancelling leaves no process behind on either node."""

import json
import os
import re
import time
from pathlib import Path

import pytest

from jobs import tasks
from jobs.metrics import ranks
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
    # Any GPU type: the two nodes have different ones (v100, a100).
    fields = {"nodes": 2, "tasks_per_node": 2, "gpus": 2, **fields}
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


# A PyTorch DDP worker: joins the process group through torchrun's rendezvous, sums its
# rank over gloo with every other worker, and writes what it saw like SHOW_CONTRACT.
DDP = f"""torch-python - <<'EOF'
import json, os
import torch, torch.distributed as dist
dist.init_process_group("gloo")
total = torch.tensor([float(dist.get_rank())])
dist.all_reduce(total)
seen = {{k: os.environ.get(k) for k in {list(CONTRACT)!r}}}
seen.update(sum=total.item(), group_rank=os.environ.get("GROUP_RANK"), size=dist.get_world_size())
json.dump(seen, open("contract-" + os.environ["RANK"] + ".json", "w"))
dist.destroy_process_group()
EOF"""


@pytest.mark.django_db
def test_a_real_torchrun_job_joins_its_ranks_across_both_nodes(devcluster, owner):
    """PyTorch's own torchrun (the CPU build the dev cluster installs where this machine has
    its wheel) under the portal's srun line: one torchrun per node, c10d rendezvous on the
    first node at MASTER_PORT, four workers that allreduce over gloo across the nodes."""
    if not Path("/usr/local/bin/torchrun").exists():
        pytest.skip("the dev cluster has no PyTorch: this machine has no CPU wheel of it")
    job = distributed_job(owner, devcluster, DDP, "torchrun", gpus=0, gpu_type="")
    job = run_until(job, {"completed", "failed"}, timeout=180)
    assert job.state == "completed", (job.message, files.read_job_log(job, "stderr").text)
    seen = {int(c["RANK"]): c for c in contracts(job)}
    assert sorted(seen) == [0, 1, 2, 3]
    assert {c["sum"] for c in seen.values()} == {6.0}  # 0 + 1 + 2 + 3, over both nodes
    assert {c["size"] for c in seen.values()} == {4} and {
        c["WORLD_SIZE"] for c in seen.values()
    } == {"4"}
    # Each node's two workers, local ranks 0 and 1, with the node's rank from the portal.
    nodes = {(c["PORTAL_NODE"], c["NODE_RANK"], c["LOCAL_RANK"]) for c in seen.values()}
    assert nodes == {
        ("node1", "0", "0"),
        ("node1", "0", "1"),
        ("node2", "1", "0"),
        ("node2", "1", "1"),
    }
    # A node's workers are consecutive ranks (torchrun's rendezvous orders the nodes).
    for rank, c in seen.items():
        assert rank == 2 * int(c["group_rank"]) + int(c["LOCAL_RANK"])
    out = files.read_job_log(job, "stdout").text
    port = 20000 + int(job.scheduler_job_id) % 20000
    assert f"MASTER_ADDR=node1 MASTER_PORT={port}" in out
    assert "portal: node rank 1 of 2 is node2" in out


def job_processes(job) -> dict[int, str]:
    """The processes of ``job`` on this host, whichever node they belong to: pid -> node
    (SLURMD_NODENAME; the batch script's own shell and its children included). Every
    process the job starts inherits PORTAL_JOB_ID."""
    found = {}
    mark = f"PORTAL_JOB_ID={job.pk}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if mark in env:
            node = next((v[16:].decode() for v in env if v.startswith(b"SLURMD_NODENAME=")), "")
            found[int(entry)] = node
    return found


# Every rank loops on its own (no collective), rank 1 slower: it falls behind, and
# the rank panel must name it. The ranks sleep, so the job also serves for cancelling.
UNSYNCED = """python3 - <<'EOF'
import os, time, portal_metrics as pm
rank = int(os.environ["RANK"])
for step in range({steps}):
    pm.log(step=step, loss=1.0 / (step + 1))
    time.sleep(0.2 if rank == 1 else 0.05)
pm.close()
EOF"""


@pytest.mark.django_db
def test_cancelling_a_two_node_job_leaves_no_process_on_either_node(devcluster, owner):
    job = distributed_job(owner, devcluster, UNSYNCED.format(steps=100_000), "mpi")
    job = run_until(job, {"running"}, timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # until every rank has started on both nodes
        running = job_processes(job)
        if set(running.values()) >= NODES and len(running) >= 8:
            break
        time.sleep(0.5)
    assert set(running.values()) >= NODES, running
    assert job.request_cancel()
    tasks.cancel_job.apply(args=[job.pk])
    job = run_until(job, {"cancelled"}, timeout=60)
    deadline = time.monotonic() + 30  # Slurm's KillWait is 5 s
    while job_processes(job) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert job_processes(job) == {}


@pytest.mark.django_db
def test_one_failing_rank_stops_every_rank_on_every_node(devcluster, owner):
    command = 'if [ "$RANK" = 3 ]; then sleep 2; echo rank 3 fails >&2; exit 7; fi; sleep 300'
    job = distributed_job(owner, devcluster, command, "mpi")
    job = run_until(job, {"failed", "completed"}, timeout=90)
    assert job.state == "failed" and job.exit_code != 0, job.message
    assert (job.ended_at - job.started_at).total_seconds() < 60  # not the others' 300 s
    deadline = time.monotonic() + 30
    while job_processes(job) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert job_processes(job) == {}
    assert "rank 3 fails" in files.read_job_log(job, "stderr").text


@pytest.mark.django_db
def test_the_rank_panel_names_a_deliberately_slowed_rank(devcluster, owner):
    job = distributed_job(
        owner, devcluster, UNSYNCED.format(steps=60), "mpi", tasks_per_node=1, gpus=1
    )
    job = run_until(job, {"completed", "failed"}, timeout=120)
    assert job.state == "completed", job.message
    tail_job(job)
    progress = ranks.job_progress(job.pk)
    assert {r.rank: r.node for r in progress.ranks} == {0: "node1", 1: "node2"}
    assert progress.slowest == 1
    by_rank = {r.rank: r for r in progress.ranks}
    assert by_rank[1].steps_per_second < 0.5 * by_rank[0].steps_per_second


@pytest.mark.django_db
def test_the_data_parallel_demo_matches_one_process_on_two_nodes(devcluster, owner):
    """The catalog's MPI demo, as the launch page starts it: 2 nodes × 2 ranks; rank 0
    compares the final accuracy with a one-process run of the same code."""
    from jobs import demo_catalog

    image = next(i for i in demo_catalog.load() if i.slug == "digits-mpi-demo")
    job = distributed_job(
        owner,
        devcluster,
        image.default_command.replace("--delay 0.05", "--delay 0"),
        image.default_launcher,
        image=image,
        nodes=image.default_nodes,
        tasks_per_node=image.default_tasks_per_node,
        gpus=0,
        gpu_type="",
    )
    job = run_until(job, {"completed", "failed"}, timeout=180)
    out = files.read_job_log(job, "stdout").text
    assert job.state == "completed", (job.message, out[-2000:])
    check = re.search(r"accuracy check: passed \(4 ranks ([0-9.]+), one process ([0-9.]+)", out)
    assert check, out[-2000:]
    assert float(check[1]) > 0.9
    tail_job(job)
    loss = MetricSeries.objects.filter(job=job, key="loss")
    assert {(s.rank, s.node) for s in loss} == {
        (0, "node1"),
        (1, "node1"),
        (2, "node2"),
        (3, "node2"),
    }
    assert ranks.job_progress(job.pk).as_dict()["nodes"] == ["node1", "node2"]
