"""Render a Job into the batch script that sbatch runs.

Every value in the script is either shell-quoted (``shlex.quote``) or checked
against a strict pattern right here, whatever the models already validated.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from string import Template

from jobs.models import ContainerImage, Job

# What runs on the compute node: the templates and the in-job metrics client.
TEMPLATES = Path(__file__).resolve().parents[1] / "on_node"
METRICS_MODULE = TEMPLATES / "portal_metrics.py"

# What may appear unquoted in an #SBATCH line (sbatch parses those itself).
_DIRECTIVE_VALUE = re.compile(r"^[A-Za-z0-9_.:/=,+@-]+$")


class ScriptError(ValueError):
    pass


# What every process of a distributed job is told (README, "Distributed training").
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


def _template(name: str) -> Template:
    return Template((TEMPLATES / name).read_text())


def _directive(option: str, value: object) -> str:
    text = str(value)
    if not _DIRECTIVE_VALUE.match(text):
        raise ScriptError(f"refusing to render --{option}={text!r}: unexpected characters")
    return f"#SBATCH --{option}={text}"


WORK_DIRS = "/.portal/jobs/"


def job_work_dir(job: Job, cluster_username: str) -> str:
    """``<root>/.portal/jobs/<job id>-<uid>`` under the cluster user's home or scratch."""
    root = job.cluster.work_dir_root(job.work_dir_kind, cluster_username)
    return f"{root.rstrip('/')}{WORK_DIRS}{job.pk}-{job.uid}"


def work_root(work_dir: str) -> str:
    """The home or scratch directory a job's work directory is in: where a notebook
    opens, so that what the user saves is there in the next session too (the portal's
    own files stay in the hidden .portal directory)."""
    root, sep, _ = work_dir.rpartition(WORK_DIRS)
    if not sep or not root:
        raise ScriptError(f"not a portal work directory: {work_dir!r}")
    return root


def gres_options(job: Job) -> list[tuple[str, str]]:
    if not job.gpus:
        return []
    if job.gpu_type and job.partition.gpu_type_as_constraint:
        return [("gres", f"gpu:{job.gpus}"), ("constraint", job.gpu_type)]
    if job.gpu_type:
        return [("gres", f"gpu:{job.gpu_type}:{job.gpus}")]
    return [("gres", f"gpu:{job.gpus}")]


def directives(job: Job, work_dir: str) -> list[str]:
    options: list[tuple[str, object]] = [
        ("job-name", job.slurm_name),
        ("comment", job.slurm_comment),
        ("partition", job.partition.name),
    ]
    account = job.account or job.cluster.default_account
    if account:
        options.append(("account", account))
    options += gres_options(job)  # GRES are per node
    options += [
        ("nodes", job.nodes),
        ("ntasks-per-node", job.tasks_per_node),
        ("cpus-per-task", job.cpus),
        ("mem", f"{job.memory_gb}G"),
        ("time", job.time_limit_minutes),
        ("chdir", work_dir),
        ("output", f"{work_dir}/stdout.log"),
        ("error", f"{work_dir}/stderr.log"),
        ("open-mode", "append"),
    ]
    return [_directive(option, value) for option, value in options]


def container_launch(
    image: ContainerImage, gpus: int, work_dir: str, bind: str | None = None
) -> list[str]:
    """The argv prefix that runs a command inside the image (empty for the host), in
    ``work_dir``, with ``bind`` (default: the work directory) mounted."""
    bind = bind or work_dir
    runtime = image.runtime
    if runtime == ContainerImage.Runtime.NONE:
        return []
    if runtime in (ContainerImage.Runtime.APPTAINER, ContainerImage.Runtime.SINGULARITY):
        argv = [runtime, "exec"]
        if gpus:
            argv.append("--nv")
        return argv + ["--bind", bind, "--pwd", work_dir, image.location]
    if runtime == ContainerImage.Runtime.PODMAN:
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
            "PORTAL_SYSTEM_METRICS_INTERVAL",
            "SLURM_PROCID",
            "SLURM_RESTART_COUNT",
            # The distributed-training contract (on_node/distributed/).
            *DISTRIBUTED_ENV,
        ):
            argv += ["--env", name]
        return argv + ["--volume", f"{bind}:{bind}", "--workdir", work_dir, image.location]
    raise ScriptError(f"unknown container runtime {runtime!r}")


# Defines `module` in a non-interactive shell (batch scripts and the image check do not
# read the login profile): Lmod's or Environment Modules' bash init, whichever is there.
MODULE_INIT = """if ! command -v module >/dev/null 2>&1; then
    for f in /etc/profile.d/lmod.sh /etc/profile.d/modules.sh /usr/share/lmod/lmod/init/bash; do
        [ -r "$f" ] && . "$f" && break
    done
fi"""


def module_lines(image: ContainerImage) -> str:
    modules = image.module_list
    if not modules:
        return ""
    lines = ["# Environment modules for this image.", MODULE_INIT]
    for module in modules:
        quoted = shlex.quote(module)
        lines.append(
            f"module load {quoted} || {{ echo portal: module load {quoted} failed >&2; exit 1; }}"
        )
    return "\n".join(lines)


def render(
    job: Job,
    work_dir: str,
    register_url: str = "",
    metrics_url: str = "",
    system_interval: float = 0,
) -> str:
    """The complete job script for ``job``, to run from ``work_dir``.

    ``register_url`` is where a notebook job announces itself, ``metrics_url``
    where the metrics client uploads (empty: the portal finds both through the
    job's files instead).
    """
    if job.kind == Job.Kind.BATCH:
        if not job.command.strip():
            raise ScriptError("a batch job needs a command")
        if job.is_distributed:
            payload = distributed_payload(job, work_dir)
        else:
            launch = " ".join(
                shlex.quote(a) for a in container_launch(job.image, job.gpus, work_dir)
            )
            payload = _template("batch/payload.sh").substitute(
                launch=launch, command=shlex.quote(job.command)
            )
    elif job.kind in Job.SESSION_KINDS:
        root = work_root(work_dir)
        argv = container_launch(job.image, job.gpus, work_dir, bind=root)
        folder = shlex.quote(f"{root}/{job.notebook_dir}" if job.notebook_dir else root)
        # What every session kind shares: its port and secret, then its registration.
        common = {
            "launch": " ".join(shlex.quote(a) for a in argv),
            "session_start": _template("session_start.sh").substitute(
                register_url=shlex.quote(register_url)
            ),
            "register": _template("session_register.sh").substitute(),
        }
        if job.kind == Job.Kind.NOTEBOOK:
            payload = _template("notebook/payload.sh").substitute(notebook_root=folder, **common)
        else:
            serve = (TEMPLATES / "tensorboard" / "serve_tensorboard.py").read_text()
            payload = _template("tensorboard/payload.sh").substitute(
                logdir=folder, serve_script=serve, **common
            )
    else:
        raise ScriptError(f"unknown job kind {job.kind!r}")
    return _template("wrapper.sh").substitute(
        directives="\n".join(directives(job, work_dir)),
        portal_job_id=shlex.quote(str(job.pk)),
        work_dir=shlex.quote(work_dir),
        modules=module_lines(job.image),
        metrics_module=metrics_module(),
        metrics_url=shlex.quote(metrics_url),
        system_interval=shlex.quote(f"{float(system_interval):g}"),
        payload=payload,
    )


class Expand(str):
    """A word of the job script that names the contract's variables (``$NNODES``): double-
    quoted so that the batch shell expands them, unlike everything else, which is quoted
    whole. Only words of this file are marked; they are checked against a pattern."""

    PATTERN = re.compile(r"^[A-Za-z0-9_./:=-]*(\$[A-Z_]+[A-Za-z0-9_./:=-]*)+\Z")

    def shell(self) -> str:
        if not self.PATTERN.match(self):
            raise ScriptError(f"refusing to render {self!r}: unexpected characters")
        return f'"{self}"'


def _word(arg: str) -> str:
    return arg.shell() if isinstance(arg, Expand) else shlex.quote(arg)


def launcher_argv(job: Job, work_dir: str) -> list[str]:
    """The argv that starts the job's processes on its nodes (``Expand`` words are left
    for the batch shell to expand)."""
    inner = container_launch(job.image, job.gpus, work_dir)
    user = ["bash", "-c", job.command]
    rank_script = ["bash", Expand("$PORTAL_WORK_DIR/lib/portal_rank.sh")]
    if job.launcher == Job.Launcher.NONE:
        return inner + user
    if job.launcher == Job.Launcher.TORCHRUN:
        # One torchrun per node (srun), rendezvous (c10d) on the first node's MASTER_PORT;
        # the rendezvous id is the Slurm job id. --kill-on-bad-exit: one node failing
        # stops the others; torchrun itself stops its workers when one fails.
        return [
            "srun",
            Expand("--nodes=$NNODES"),
            Expand("--ntasks=$NNODES"),
            "--ntasks-per-node=1",
            f"--cpus-per-task={job.cpus * job.tasks_per_node}",
            "--kill-on-bad-exit=1",
            *rank_script,
            "node",
            *inner,
            "torchrun",
            Expand("--nnodes=$NNODES"),
            Expand("--nproc-per-node=$NPROC_PER_NODE"),
            "--rdzv-backend=c10d",
            Expand("--rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT"),
            Expand("--rdzv-id=$SLURM_JOB_ID"),
            "--max-restarts=0",
            "--no-python",
            *user,
        ]
    if job.launcher == Job.Launcher.MPI:
        # mpirun finds the allocation from Slurm's environment and starts its daemons on
        # the nodes with srun; a rank that fails aborts every rank.
        return ["mpirun", "-np", Expand("$WORLD_SIZE"), *rank_script, "rank", *inner, *user]
    raise ScriptError(f"unknown launcher {job.launcher!r}")


def distributed_payload(job: Job, work_dir: str) -> str:
    return _template("distributed/payload.sh").substitute(
        shape=job.shape,
        launcher=job.launcher,
        nodes=int(job.nodes),
        tasks_per_node=int(job.tasks_per_node),
        rank_script=heredoc_body(RANK_SCRIPT, "PORTAL_RANK_SH"),
        start=" ".join(_word(a) for a in launcher_argv(job, work_dir)),
    )


def heredoc_body(path: Path, delimiter: str) -> str:
    """A file copied into the job script by a quoted here-document ending in ``delimiter``:
    its text, ending in a newline, refused if a line of it would end the document early."""
    text = path.read_text()
    if f"\n{delimiter}\n" in text:
        raise ScriptError(f"{path.name} contains its here-document delimiter")
    return text if text.endswith("\n") else text + "\n"


def metrics_module() -> str:
    return heredoc_body(METRICS_MODULE, "PORTAL_METRICS_PY")
