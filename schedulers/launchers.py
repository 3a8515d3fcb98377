"""How the job script starts the user's processes, whatever the scheduler: the container
runtime's command line, the distributed launchers (torchrun, mpirun) with the contract's
environment, and the on-node templates (schedulers/on_node/) they are rendered from.

Every value is either shell-quoted (``shlex.quote``) or checked against a strict pattern
right here (``Expand``), whatever the models already validated.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from string import Template
from typing import Any

from clusters.workdir import ScriptError
from common.choices import Launcher, Runtime
from schedulers.seam import ImageSpec, JobSpec

# What runs on the compute node: the templates and the in-job metrics client.
TEMPLATES = Path(__file__).resolve().parent / "on_node"

# What every process of a distributed job is told (docs/use/distributed.md).
DISTRIBUTED_ENV = (
    "NNODES",
    "NPROC_PER_NODE",
    "WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "RANK",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "NODE_RANK",
    "PORTAL_NODE",
    "PORTAL_NODES",
    "PORTAL_NODE_GPUS",
)
RANK_SCRIPT = TEMPLATES / "distributed" / "portal_rank.sh"


def template(name: str) -> Template:
    return Template((TEMPLATES / name).read_text())


def is_distributed(job: JobSpec) -> bool:
    """Started on several processes, or through a launcher (Job.is_distributed)."""
    shape = job.resources
    return shape.nodes * shape.tasks_per_node > 1 or job.launcher != Launcher.NONE


def container_launch(
    image: ImageSpec, gpus: int, work_dir: str, bind: str | None = None, *, staged: bool = False
) -> list[str]:
    """The argv prefix that runs a command inside the image (empty for the host), in
    ``work_dir``, with ``bind`` (default: the work directory) mounted, and with
    ``staged`` the stage-in's copy on the node (``$PORTAL_STAGED_DIR``) too."""
    bind = bind or work_dir
    # An array's script names its member's directory by $PORTAL_ARRAY_INDEX: those words
    # are left for the batch shell to expand (Expand checks them against its pattern).
    work_dir, volume, bind = (
        Expand(w) if "$" in w else w for w in (work_dir, f"{bind}:{bind}", bind)
    )
    runtime = image.runtime
    if runtime == Runtime.NONE:
        return []
    if runtime in (Runtime.APPTAINER, Runtime.SINGULARITY):
        argv = [runtime, "exec"]
        if gpus:
            argv.append("--nv")
        if staged:
            argv += ["--bind", Expand("$PORTAL_STAGED_DIR")]
        return argv + ["--bind", bind, "--pwd", work_dir, image.location]
    if runtime == Runtime.PODMAN:
        argv = ["podman", "run", "--rm", "--network=host"]
        if gpus:
            argv += ["--device", "nvidia.com/gpu=all"]
        for name in (
            "CUDA_VISIBLE_DEVICES",
            "PORTAL_JOB_ID",
            "PORTAL_WORK_DIR",
            "JUPYTER_PORT",
            "JUPYTER_TOKEN",
            "PORTAL_SESSION_PORT",
            "PORTAL_SESSION_TOKEN",
            "JUPYTER_CONFIG_PATH",
            "PYTHONPATH",
            "PORTAL_METRICS_DIR",
            "PORTAL_METRICS_URL",
            "PORTAL_METRICS_TOKEN_FILE",
            "MLFLOW_TRACKING_URI",
            "MLFLOW_TRACKING_TOKEN",
            "MLFLOW_ALLOW_FILE_STORE",
            "PORTAL_SYSTEM_METRICS_INTERVAL",
            "SLURM_PROCID",
            "SLURM_RESTART_COUNT",
            # Checkpoint and requeue (on_node/checkpoint.sh).
            "PORTAL_CHECKPOINT_DIR",
            "PORTAL_CHECKPOINT_REQUEST",
            "PORTAL_ATTEMPT",
            "PORTAL_MAX_ATTEMPTS",
            # The distributed-training contract (on_node/distributed/), and what torchrun
            # reads of it (portal_rank.sh).
            *DISTRIBUTED_ENV,
            "PET_NODE_RANK",
            "PET_MASTER_PORT",
            # The run's parameters (jobs/models/annotations.py): every PORTAL_PARAM_<NAME>.
            "PORTAL_PARAM_*",
            # Stage-in's copy on the node (schedulers/staging.py).
            "PORTAL_STAGED_DIR",
        ):
            argv += ["--env", name]
        if staged:
            argv += ["--volume", Expand("$PORTAL_STAGED_DIR:$PORTAL_STAGED_DIR")]
        return argv + ["--volume", volume, "--workdir", work_dir, image.location]
    raise ScriptError(f"unknown container runtime {runtime!r}")


class Expand(str):
    """A word of the job script that names the contract's variables (``$NNODES``): double-
    quoted so that the batch shell expands them, unlike everything else, which is quoted
    whole. Only words of this file are marked; they are checked against a pattern."""

    PATTERN = re.compile(r"^[A-Za-z0-9_./:=-]*(\$[A-Z_]+[A-Za-z0-9_./:=-]*)+\Z")

    def shell(self) -> str:
        if not self.PATTERN.match(self):
            raise ScriptError(f"refusing to render {self!r}: unexpected characters")
        return f'"{self}"'


def word(arg: str) -> str:
    return arg.shell() if isinstance(arg, Expand) else shlex.quote(arg)


def launcher_argv(job: JobSpec, work_dir: str, command: str | None = None) -> list[str]:
    """The argv that starts the job's processes on its nodes (``Expand`` words are left
    for the batch shell to expand; ``command``: a word other than the job's own command,
    e.g. an array member's ``$PORTAL_COMMAND``)."""
    inner = container_launch(
        job.image, job.resources.gpus, work_dir, staged=job.staging is not None
    )
    user = ["bash", "-c", job.command if command is None else Expand(command)]
    rank_script = ["bash", Expand("$PORTAL_WORK_DIR/lib/portal_rank.sh")]
    if job.launcher == Launcher.NONE:
        return inner + user
    if job.launcher == Launcher.TORCHRUN:
        # One torchrun per node (srun). The static rendezvous: the first node's torchrun
        # serves the job's store at MASTER_ADDR:MASTER_PORT (a random free port, from the
        # job script) and fails if it cannot; each node's rank is the portal's NODE_RANK.
        # It exchanges only JSON there, where c10d's rendezvous unpickled what anyone who
        # reached its store wrote (and joined whatever held its port). The node's rank and
        # the port come as PET_NODE_RANK and PET_MASTER_PORT (portal_rank.sh), the port so
        # that no other user reads it in ps before torchrun listens on it.
        # --kill-on-bad-exit: one node failing stops the others; torchrun itself stops its
        # workers when one fails.
        return [
            "srun",
            Expand("--nodes=$NNODES"),
            Expand("--ntasks=$NNODES"),
            "--ntasks-per-node=1",
            f"--cpus-per-task={job.resources.cpus * job.resources.tasks_per_node}",
            "--kill-on-bad-exit=1",
            *rank_script,
            "node",
            *inner,
            "torchrun",
            Expand("--nnodes=$NNODES"),
            Expand("--nproc-per-node=$NPROC_PER_NODE"),
            "--rdzv-backend=static",
            Expand("--master-addr=$MASTER_ADDR"),
            Expand("--rdzv-id=$SLURM_JOB_ID"),
            "--max-restarts=0",
            "--no-python",
            *user,
        ]
    if job.launcher == Launcher.MPI:
        # mpirun finds the allocation from Slurm's environment and starts its daemons on
        # the nodes with srun; a rank that fails aborts every rank.
        return ["mpirun", "-np", Expand("$WORLD_SIZE"), *rank_script, "rank", *inner, *user]
    raise ScriptError(f"unknown launcher {job.launcher!r}")


def distributed_payload(job: JobSpec, work_dir: str, command: str = "") -> str:
    return template("distributed/payload.sh").substitute(
        shape=shape(job.resources),
        launcher=job.launcher,
        nodes=int(job.resources.nodes),
        tasks_per_node=int(job.resources.tasks_per_node),
        rank_script=heredoc_body(RANK_SCRIPT, "PORTAL_RANK_SH"),
        start=" ".join(
            word(a)
            for a in launcher_argv(
                job, work_dir, "$PORTAL_COMMAND" if command == '"$PORTAL_COMMAND"' else None
            )
        ),
    )


def heredoc_body(path: Path, delimiter: str) -> str:
    """A file copied into the job script by a quoted here-document ending in ``delimiter``:
    its text, ending in a newline, refused if a line of it would end the document early."""
    text = path.read_text()
    if f"\n{delimiter}\n" in text:
        raise ScriptError(f"{path.name} contains its here-document delimiter")
    return text if text.endswith("\n") else text + "\n"


def shape(layout: Any) -> str:
    """'2 nodes × 2 tasks', '1 node': how a job (or its Resources) is laid out."""
    nodes = f"{layout.nodes} node{'s' if layout.nodes != 1 else ''}"
    if layout.tasks_per_node == 1:
        return nodes
    return f"{nodes} × {layout.tasks_per_node} tasks"
