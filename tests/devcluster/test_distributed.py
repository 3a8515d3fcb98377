"""Multi-node jobs on the real two-node dev cluster: the MPI and torchrun launchers (a real
PyTorch DDP job over gloo), the environment contract on both nodes, the data-parallel demo's accuracy check, and that
cancelling leaves no process behind on either node."""

import json
import os
import re
import time
from pathlib import Path

import pytest

from clusters import files
from jobs import tasks
from jobs.models import Job
from metrics import ranks
from metrics.models import MetricSeries
from tests import factories, polling
from tests.devcluster.helpers import need_part, remote, run_until
from tracking.tail import tail_job

# The file takes every GPU (two nodes, two each): it runs while no other Slurm test does
# (tests/conftest.py).
pytestmark = [pytest.mark.devcluster, pytest.mark.alone]

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
    # One port for all, drawn at random on the first node (not worked out from the job id).
    assert len({c["MASTER_PORT"] for c in seen}) == 1
    assert 20000 <= int(by_rank[0]["MASTER_PORT"]) < 32000
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


def two_nodes_of_two_ranks(job) -> dict[int, dict]:
    """A 2 × 2 torchrun job's workers, by rank: each allreduced over both nodes, and a
    node's two workers (local ranks 0 and 1) are consecutive ranks with the portal's node
    rank (the static rendezvous orders the nodes by it)."""
    seen = {int(c["RANK"]): c for c in contracts(job)}
    assert sorted(seen) == [0, 1, 2, 3]
    assert {c["sum"] for c in seen.values()} == {6.0}  # 0 + 1 + 2 + 3, over both nodes
    assert {c["size"] for c in seen.values()} == {4}
    assert {c["WORLD_SIZE"] for c in seen.values()} == {"4"}
    nodes = {(c["PORTAL_NODE"], c["NODE_RANK"], c["LOCAL_RANK"]) for c in seen.values()}
    assert nodes == {
        ("node1", "0", "0"),
        ("node1", "0", "1"),
        ("node2", "1", "0"),
        ("node2", "1", "1"),
    }
    for rank, c in seen.items():
        assert rank == 2 * int(c["group_rank"]) + int(c["LOCAL_RANK"])
    return seen


def need_torchrun() -> None:
    need_part(
        Path("/usr/local/bin/torchrun").exists(),
        "the dev cluster has no PyTorch (/usr/local/bin/torchrun): `make devcluster` installs "
        "it only from a CPU wheel on this machine (pip's find-links, e.g. /opt/wheels)",
    )


@pytest.mark.django_db
def test_a_real_torchrun_job_joins_its_ranks_across_both_nodes(devcluster, owner):
    """PyTorch's own torchrun (the CPU build the dev cluster installs where this machine has
    its wheel) under the portal's srun line: one torchrun per node, static rendezvous on the
    first node at MASTER_PORT, four workers that allreduce over gloo across the nodes."""
    need_torchrun()
    job = distributed_job(owner, devcluster, DDP, "torchrun", gpus=0, gpu_type="")
    job = run_until(job, {"completed", "failed"}, timeout=180)
    assert job.state == "completed", (job.message, files.read_job_log(job, "stderr").text)
    seen = two_nodes_of_two_ranks(job)
    out = files.read_job_log(job, "stdout").text
    port = seen[0]["MASTER_PORT"]
    assert {c["MASTER_PORT"] for c in seen.values()} == {port}  # torchrun's store's port
    assert f"MASTER_ADDR=node1 MASTER_PORT={port}" in out
    assert "portal: node rank 1 of 2 is node2" in out


# Like DDP, but the workers, once in their process group, wait for a file "go" in the work
# directory (at most two minutes) before they allreduce: a 2-node job that stays running.
DDP_WAITING = DDP.replace(
    'dist.init_process_group("gloo")\n',
    'dist.init_process_group("gloo")\n'
    "import time\n"
    'open("started-" + os.environ["RANK"], "w").close()\n'
    "deadline = time.monotonic() + 120\n"
    'while not os.path.exists("go") and time.monotonic() < deadline:\n'
    "    time.sleep(0.5)\n",
)

# Another cluster user's attack on a torchrun job's rendezvous store: a TCPStore client to
# node1:PORT sets the rendezvous keys, c10d's and the static rendezvous's, to a pickle that
# runs `id -un > MARKER` when unpickled (base64 too, as c10d's rendezvous keeps its state).
# Prints "wrote" if it got in.
ATTACK = r"""
import base64, datetime, os, pickle, sys
from torch.distributed import TCPStore

marker, run_id, port = sys.argv[1], sys.argv[2], int(sys.argv[3])

class Payload:
    def __reduce__(self):
        return (os.system, ("id -un > " + marker,))

raw = pickle.dumps(Payload())
keys = {}
for prefix in ("", run_id + "/"):  # the static rendezvous's keys are under its run id
    keys[prefix + "torch.rendezvous." + run_id] = base64.b64encode(raw)
    for i in (0, 1):
        for name in ("torchelastic/role_info/", "torchelastic/assigned_ranks/"):
            keys[prefix + name + str(i)] = raw
store = TCPStore(
    "node1", port, is_master=False, timeout=datetime.timedelta(seconds=10),
    wait_for_workers=False,
)
for key, value in keys.items():
    store.set(key, value)
print("wrote")
"""


def attack(marker: Path, run_id: str, ports: list[int]) -> set[int]:
    """ATTACK as hpcuser2 on node1 at each of ``ports`` (at once); the ports where it
    wrote the keys."""
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    def one(port: int) -> bool:
        argv = ["runuser", "-u", "hpcuser2", "--", "torch-python", "-c", ATTACK]
        try:
            done = subprocess.run(
                [*argv, str(marker), run_id, str(port)],
                capture_output=True,
                text=True,
                timeout=60,  # what is not a store may keep the connection without a word
                cwd="/tmp",
            )
        except subprocess.TimeoutExpired:
            return False
        return done.returncode == 0 and done.stdout.strip() == "wrote"

    with ThreadPoolExecutor(len(ports)) as pool:
        return {port for port, wrote in zip(ports, pool.map(one, ports), strict=True) if wrote}


def is_torch(pid: int, scheduler_job_id: str) -> bool:
    """Whether process ``pid`` runs the dev cluster's PyTorch Python (torchrun, workers)
    in Slurm job ``scheduler_job_id``."""
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return (
        argv0.startswith(b"/opt/portal-devcluster/torch/bin/python")
        and f"SLURM_JOB_ID={scheduler_job_id}".encode() in env
    )


def listening_ports(pids) -> set[int]:
    """The TCP ports that the processes ``pids`` (of this host) listen on."""
    inodes = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


@pytest.mark.django_db
def test_another_users_store_writes_do_nothing_to_a_running_torchrun_job(devcluster, owner):
    """While a 2-node torchrun job runs, hpcuser2 writes pickles under the rendezvous keys
    of every port the job's processes listen on (its store's among them) and of the port
    the job id used to give: nothing runs them, and the job ends with its true ranks. (With
    c10d's rendezvous, both nodes' torchrun unpickled them at their next keep-alive.)"""
    import uuid

    need_torchrun()
    marker = Path(f"/tmp/portal-rendezvous-pickle-{uuid.uuid4().hex}")
    job = distributed_job(owner, devcluster, DDP_WAITING, "torchrun", gpus=0, gpu_type="")
    try:
        job = run_until(job, {"running"}, timeout=60)
        account = job.cluster_account
        polling.until(  # every worker is in the process group
            lambda: (
                len(
                    [
                        n
                        for n in remote(account, ["ls", job.work_dir]).split()
                        if n.startswith("started-")
                    ]
                )
                == 4
            ),
            90,
            "the four workers to start",
            interval=1,
        )
        # The ports of the job's PyTorch processes: both nodes' torchrun and their workers
        # (not srun's, which a silent connection holds up: a matter of Slurm's, not this).
        torch = [pid for pid in job_processes(job) if is_torch(pid, job.scheduler_job_id)]
        ports = listening_ports(torch)
        old_port = 20000 + int(job.scheduler_job_id) % 20000
        tried = sorted(ports | {old_port})
        written = attack(marker, job.scheduler_job_id, tried)
        # The attack reached the job's store (the workers' and torchrun's): writes land...
        assert written, (tried, torch)
        time.sleep(15)  # ... c10d's agents synced their state every 5 s
        assert not marker.exists(), f"the job ran the pickle as {marker.read_text().strip()}"
        remote(account, ["touch", f"{job.work_dir}/go"])
        job = run_until(job, {"completed", "failed"}, timeout=120)
        assert not marker.exists(), f"the job ran the pickle as {marker.read_text().strip()}"
    finally:
        marker.unlink(missing_ok=True)
    assert job.state == "completed", (job.message, files.read_job_log(job, "stderr").text)
    seen = two_nodes_of_two_ranks(job)
    assert int(seen[0]["MASTER_PORT"]) in written  # the store the attack wrote to


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


def no_processes_left(job: Job, timeout: float = 30) -> None:
    left: dict = {}

    def none_left() -> bool:
        nonlocal left
        left = job_processes(job)
        return left == {}

    polling.until(none_left, timeout, lambda: f"job {job.pk}'s processes to end: {left}")


@pytest.mark.django_db
def test_cancelling_a_two_node_job_leaves_no_process_on_either_node(devcluster, owner):
    job = distributed_job(owner, devcluster, UNSYNCED.format(steps=100_000), "mpi")
    job = run_until(job, {"running"}, timeout=60)
    running: dict = {}

    def all_ranks() -> bool:
        nonlocal running
        running = job_processes(job)
        return set(running.values()) >= NODES and len(running) >= 8

    polling.until(all_ranks, 30, lambda: f"every rank to start on both nodes: {running}")
    assert job.request_cancel()
    tasks.cancel_job.apply(args=[job.pk])
    job = run_until(job, {"cancelled"}, timeout=60)
    no_processes_left(job)  # Slurm's KillWait is 5 s


@pytest.mark.django_db
def test_one_failing_rank_stops_every_rank_on_every_node(devcluster, owner):
    command = 'if [ "$RANK" = 3 ]; then sleep 2; echo rank 3 fails >&2; exit 7; fi; sleep 300'
    job = distributed_job(owner, devcluster, command, "mpi")
    job = run_until(job, {"failed", "completed"}, timeout=90)
    assert job.state == "failed" and job.exit_code != 0, job.message
    assert (job.ended_at - job.started_at).total_seconds() < 60  # not the others' 300 s
    no_processes_left(job)
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
    from devtools import demo_catalog

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
