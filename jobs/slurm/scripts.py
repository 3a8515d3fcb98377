"""Render a Job into the batch script that sbatch runs.

Every value in the script is either shell-quoted (``shlex.quote``) or checked
against a strict pattern right here, whatever the models already validated.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

from django.core.exceptions import ValidationError

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


def work_dir_root(cluster, kind: str, cluster_username: str) -> str:
    """The cluster's home or scratch root for that user; a cluster without one (or, with
    per-user accounts, one without {user}) ends the submission with the model's message."""
    try:
        return cluster.work_dir_root(kind, cluster_username)
    except ValidationError as exc:
        raise ScriptError(" ".join(exc.messages)) from None


def job_work_dir(job: Job, cluster_username: str) -> str:
    """``<root>/.portal/jobs/<job id>-<uid>`` under the cluster user's home or scratch."""
    root = work_dir_root(job.cluster, job.work_dir_kind, cluster_username)
    return f"{root.rstrip('/')}{WORK_DIRS}{job.pk}-{job.uid}"


def work_root(work_dir: str) -> str:
    """The home or scratch directory a job's work directory is in: where a notebook
    opens, so that what the user saves is there in the next session too (the portal's
    own files stay in the hidden .portal directory)."""
    root, sep, _ = work_dir.rpartition(WORK_DIRS)
    if not sep or not root:
        raise ScriptError(f"not a portal work directory: {work_dir!r}")
    return root


_FEATURE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")


def gres_options(job: Job) -> list[tuple[str, str]]:
    if not job.gpus:
        return []
    if job.gpu_constraint:
        # One of several GPU types (features or, with gpu_type_as_constraint, types).
        return [("gres", f"gpu:{job.gpus}"), ("constraint", job.gpu_constraint)]
    if job.gpu_type and job.partition.gpu_type_as_constraint:
        return [("gres", f"gpu:{job.gpus}"), ("constraint", job.gpu_type)]
    if job.gpu_type:
        return [("gres", f"gpu:{job.gpu_type}:{job.gpus}")]
    return [("gres", f"gpu:{job.gpus}")]


def _constraint_directive(value: str) -> str:
    """--constraint=a|b: node features (or type names), each checked whole, joined by "|"."""
    if not all(_FEATURE.match(name) for name in value.split("|")):
        raise ScriptError(f"refusing to render --constraint={value!r}")
    return f"#SBATCH --constraint={value}"


def memory_option(job: Job) -> tuple[str, str]:
    """--mem per node, or --mem-per-gpu where the partition wants it for GPU jobs."""
    if job.gpus and job.partition.mem_per_gpu:
        return ("mem-per-gpu", f"{-(-job.memory_gb // job.gpus)}G")
    return ("mem", f"{job.memory_gb}G")


def directives(job: Job, work_dir: str, logs: str = "") -> list[str]:
    """The #SBATCH lines; ``logs``: a pattern appended to the work directory for the log
    files' directory (an array's "%a", each member's own)."""
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
        memory_option(job),
        ("time", job.time_limit_minutes),
        ("chdir", work_dir),
        ("output", f"{work_dir}/stdout.log"),
        ("error", f"{work_dir}/stderr.log"),
        ("open-mode", "append"),
    ]
    if job.resumable:
        # Warned (USR2 to the batch shell) before the time limit; the wrapper has the job
        # checkpoint and requeue itself (on_node/wrapper.sh).
        options.append(("signal", f"B:USR2@{int(job.checkpoint_warning_seconds)}"))
    lines = [
        _constraint_directive(str(value)) if option == "constraint" else _directive(option, value)
        for option, value in options
    ]
    if job.resumable:
        lines.append("#SBATCH --requeue")
    if logs == "%a":
        lines = [
            line.replace("/stdout.log", "/%a/stdout.log").replace("/stderr.log", "/%a/stderr.log")
            if line.startswith(("#SBATCH --output=", "#SBATCH --error="))
            else line
            for line in lines
        ]
    return lines


def container_launch(
    image: ContainerImage, gpus: int, work_dir: str, bind: str | None = None
) -> list[str]:
    """The argv prefix that runs a command inside the image (empty for the host), in
    ``work_dir``, with ``bind`` (default: the work directory) mounted."""
    bind = bind or work_dir
    # An array's script names its member's directory by $PORTAL_ARRAY_INDEX: those words
    # are left for the batch shell to expand (Expand checks them against its pattern).
    work_dir, volume, bind = (
        Expand(w) if "$" in w else w for w in (work_dir, f"{bind}:{bind}", bind)
    )
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
        ):
            argv += ["--env", name]
        return argv + ["--volume", volume, "--workdir", work_dir, image.location]
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
    *,
    header: list[str] | None = None,
    container: bool = True,
) -> str:
    """The complete job script for ``job``, to run from ``work_dir``.

    ``register_url`` is where a notebook job announces itself, ``metrics_url``
    where the metrics client uploads (empty: the portal finds both through the
    job's files instead). ``header``: the lines after ``#!/bin/bash`` (default: the
    #SBATCH directives); ``container``: the script starts the image's runtime itself
    (False where the scheduler does, as HTCondor's ``container_image``).
    """
    identity = "\n".join(
        [
            f"export PORTAL_JOB_ID={shlex.quote(str(job.pk))}",
            f"export PORTAL_WORK_DIR={shlex.quote(work_dir)}",
            f"export PORTAL_METRICS_URL={shlex.quote(metrics_url)}",
        ]
    )
    return _wrap(
        job,
        directives(job, work_dir) if header is None else header,
        identity,
        f"portal job {int(job.pk)}",
        _payload(job, work_dir, register_url, shlex.quote(job.command), container),
        system_interval,
    )


@dataclass(frozen=True)
class Member:
    """One member of a job array: its job, what it alone is told (environment variables
    and files in its directory) and the command it runs."""

    job: Job
    command: str
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    metrics_url: str = ""


_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,63}\Z")
_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\Z")


def render_array(
    array,
    members: list[Member],
    work_dir: str,
    system_interval: float = 0,
    *,
    header: list[str] | None = None,
    container: bool = True,
) -> str:
    """One script for every member of ``array`` (the scheduler runs it once per array task
    or proc): the shared request, then a table from ``$PORTAL_ARRAY_INDEX`` (Slurm's
    ``$SLURM_ARRAY_TASK_ID``, or set by the scheduler's submit description) to the
    member's job id, work directory ``<work_dir>/<index>``, command, environment and
    files. The members share everything else (image, resources, launcher): they come
    from one launch. ``header`` and ``container`` as for ``render``."""
    if not members:
        raise ScriptError("an array needs members")
    first = members[0].job
    if header is None:
        header = [
            _directive("job-name", array.slurm_name),
            _directive("comment", array.slurm_comment),
            _array_directive(array.task_spec(len(members))),
            _directive("chdir", work_dir),
            *[
                line
                for line in directives(first, work_dir, logs="%a")
                if not line.startswith(
                    ("#SBATCH --job-name=", "#SBATCH --comment=", "#SBATCH --chdir")
                )
            ],
        ]
    table = [
        "export PORTAL_ARRAY_INDEX=${SLURM_ARRAY_TASK_ID:-${PORTAL_ARRAY_INDEX:-}}",
        'case "$PORTAL_ARRAY_INDEX" in',
    ]
    for index, member in enumerate(members):
        if member.job.array_index != index:
            raise ScriptError(f"array member {member.job.pk} is not at index {index}")
        lines = [
            f"export PORTAL_JOB_ID={shlex.quote(str(member.job.pk))}",
            f"export PORTAL_METRICS_URL={shlex.quote(member.metrics_url)}",
            f"PORTAL_COMMAND={shlex.quote(member.command)}",
        ]
        for name, value in sorted(member.env.items()):
            if not _ENV_NAME.match(name):
                raise ScriptError(f"refusing to render environment variable {name!r}")
            lines.append(f"export {name}={shlex.quote(value)}")
        for name, text in sorted(member.files.items()):
            if not _FILE_NAME.match(name):
                raise ScriptError(f"refusing to render file name {name!r}")
            lines.append(f'printf "%s\\n" {shlex.quote(text)} > "{work_dir_var()}/{name}"')
        table.append(f"{index})")
        table += [f"    {line}" for line in lines]
        table.append("    ;;")
    table += [
        '*) echo "portal: array task ${PORTAL_ARRAY_INDEX:-?} is not in this script" >&2; exit 1 ;;',
        "esac",
    ]
    identity = "\n".join(
        [
            "# Which member of the array this task is: its job, command and parameters.",
            *table[:1],
            f'export PORTAL_WORK_DIR={shlex.quote(work_dir)}/"$PORTAL_ARRAY_INDEX"',
            *table[1:],
        ]
    )
    return _wrap(
        first,
        header,
        identity,
        f"portal job array {int(array.pk)} ({len(members)} members)",
        _payload(first, f"{work_dir}/$PORTAL_ARRAY_INDEX", "", '"$PORTAL_COMMAND"', container),
        system_interval,
    )


def _array_directive(spec: str) -> str:
    if not re.fullmatch(r"0-\d{1,7}(%\d{1,7})?", spec):
        raise ScriptError(f"refusing to render --array={spec!r}")
    return f"#SBATCH --array={spec}"


def work_dir_var() -> str:
    return "$PORTAL_WORK_DIR"


def array_work_dir(array, cluster_username: str, kind: str) -> str:
    """``<root>/.portal/jobs/a<array id>-<uid>``: members work in ``<index>`` below it."""
    root = work_dir_root(array.cluster, kind, cluster_username)
    return f"{root.rstrip('/')}{WORK_DIRS}a{array.pk}-{array.uid}"


def _wrap(
    job: Job,
    options: list[str],
    identity: str,
    rendered_for: str,
    payload: str,
    system_interval: float,
) -> str:
    return _template("wrapper.sh").substitute(
        directives="\n".join(options),
        identity=identity,
        rendered_for=rendered_for,
        modules=module_lines(job.image),
        checkpoint=checkpoint_lines(job),
        metrics_module=metrics_module(),
        system_interval=shlex.quote(f"{float(system_interval):g}"),
        payload=payload,
    )


def checkpoint_lines(job: Job) -> str:
    """A resumable job's part of the wrapper: where checkpoints go, which attempt this is,
    and what the warning before the time limit does (on_node/checkpoint.sh)."""
    if not job.resumable:
        return "_portal_resumable="
    return _template("checkpoint.sh").substitute(
        max_attempts=int(job.max_attempts),
        # The script's time to save after the warning; the rest is the requeue's margin.
        grace=max(10, int(job.checkpoint_warning_seconds) - 20),
    )


def _payload(
    job: Job, work_dir: str, register_url: str, command: str, container: bool = True
) -> str:
    """What the job runs, after the wrapper's set-up. ``command`` is the user's command as
    one shell word: quoted text, or ``"$PORTAL_COMMAND"`` in an array's script;
    ``container``: start the image's runtime here (else the scheduler has)."""
    if job.kind == Job.Kind.BATCH:
        if not job.command.strip():
            raise ScriptError("a batch job needs a command")
        if job.is_distributed:
            return distributed_payload(job, work_dir, command)
        argv = container_launch(job.image, job.gpus, work_dir) if container else []
        launch = " ".join(_word(a) for a in argv)
        return _template("batch/payload.sh").substitute(launch=launch, command=command)
    if job.kind in Job.SESSION_KINDS:
        root = work_root(work_dir)
        argv = container_launch(job.image, job.gpus, work_dir, bind=root) if container else []
        folder = shlex.quote(f"{root}/{job.notebook_dir}" if job.notebook_dir else root)
        # What every session kind shares: its port and secret, then its registration.
        common = {
            "launch": " ".join(_word(a) for a in argv),
            "session_start": _template("session_start.sh").substitute(
                register_url=shlex.quote(register_url)
            ),
            "register": _template("session_register.sh").substitute(),
        }
        if job.kind == Job.Kind.NOTEBOOK:
            return _template("notebook/payload.sh").substitute(notebook_root=folder, **common)
        serve = (TEMPLATES / "tensorboard" / "serve_tensorboard.py").read_text()
        return _template("tensorboard/payload.sh").substitute(
            logdir=folder, serve_script=serve, **common
        )
    raise ScriptError(f"unknown job kind {job.kind!r}")


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


def launcher_argv(job: Job, work_dir: str, command: str | None = None) -> list[str]:
    """The argv that starts the job's processes on its nodes (``Expand`` words are left
    for the batch shell to expand; ``command``: a word other than the job's own command,
    e.g. an array member's ``$PORTAL_COMMAND``)."""
    inner = container_launch(job.image, job.gpus, work_dir)
    user = ["bash", "-c", job.command if command is None else Expand(command)]
    rank_script = ["bash", Expand("$PORTAL_WORK_DIR/lib/portal_rank.sh")]
    if job.launcher == Job.Launcher.NONE:
        return inner + user
    if job.launcher == Job.Launcher.TORCHRUN:
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
            f"--cpus-per-task={job.cpus * job.tasks_per_node}",
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
    if job.launcher == Job.Launcher.MPI:
        # mpirun finds the allocation from Slurm's environment and starts its daemons on
        # the nodes with srun; a rank that fails aborts every rank.
        return ["mpirun", "-np", Expand("$WORLD_SIZE"), *rank_script, "rank", *inner, *user]
    raise ScriptError(f"unknown launcher {job.launcher!r}")


def distributed_payload(job: Job, work_dir: str, command: str = "") -> str:
    return _template("distributed/payload.sh").substitute(
        shape=job.shape,
        launcher=job.launcher,
        nodes=int(job.nodes),
        tasks_per_node=int(job.tasks_per_node),
        rank_script=heredoc_body(RANK_SCRIPT, "PORTAL_RANK_SH"),
        start=" ".join(
            _word(a)
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


def metrics_module() -> str:
    return heredoc_body(METRICS_MODULE, "PORTAL_METRICS_PY")
