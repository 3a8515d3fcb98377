"""The job script's body, whatever the scheduler: the wrapper (schedulers/on_node/wrapper.sh)
with the job's identity, environment modules, checkpointing, the in-job metrics client
and the payload (a batch command, a session, a distributed launch). The adapter gives the
header: #SBATCH directives (schedulers/slurm/scripts.py) or shell lines under an HTCondor submit
description (schedulers/htcondor/submit.py).

Every value in the script is either shell-quoted (``shlex.quote``) or checked against a
strict pattern right here, whatever the models already validated.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

from clusters.workdir import ScriptError, work_dir_var, work_root
from common.choices import COMMAND_SESSION_KINDS, SESSION_KINDS, Kind
from schedulers import staging
from schedulers.envmodules import MODULE_INIT
from schedulers.launchers import (
    TEMPLATES,
    container_launch,
    distributed_payload,
    heredoc_body,
    is_distributed,
    template,
    word,
)
from schedulers.seam import AppSpec, ArraySpec, ImageSpec, JobSpec, Member

METRICS_MODULE = TEMPLATES / "portal_metrics.py"
SESSION_GUARD = TEMPLATES / "session_guard.py"
PORT_OWNER = TEMPLATES / "port_owner.py"
# Modules an app may ask to have beside portal_metrics in the job's lib/ (AppSpec.helpers).
HELPERS = {"endpoint_meter": TEMPLATES / "endpoint_meter.py"}


def module_lines(image: ImageSpec) -> str:
    modules = image.modules
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
    job: JobSpec,
    work_dir: str,
    register_url: str = "",
    metrics_url: str = "",
    system_interval: float = 0,
    *,
    header: list[str],
    container: bool = True,
) -> str:
    """The complete job script for ``job``, to run from ``work_dir``.

    ``register_url`` is where a notebook job announces itself, ``metrics_url``
    where the metrics client uploads (empty: the portal finds both through the
    job's files instead). ``header``: the adapter's lines after ``#!/bin/bash`` (the
    #SBATCH directives, or HTCondor's environment set-up); ``container``: the script starts the image's runtime itself
    (False where the scheduler does, as HTCondor's ``container_image``).
    """
    identity = "\n".join(
        [
            f"export PORTAL_JOB_ID={shlex.quote(str(job.id))}",
            f"export PORTAL_WORK_DIR={shlex.quote(work_dir)}",
            f"export PORTAL_METRICS_URL={shlex.quote(metrics_url)}",
            # What it alone is told: its parameters, as a trial's (experiments/runs.py).
            *told_lines(job.env, job.files),
        ]
    )
    return _wrap(
        job,
        header,
        identity,
        f"portal job {int(job.id)}",
        _payload(job, work_dir, register_url, shlex.quote(job.command), container),
        system_interval,
    )


_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,63}\Z")
_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\Z")


def render_array(
    array: ArraySpec,
    members: Sequence[Member],
    work_dir: str,
    system_interval: float = 0,
    *,
    header: list[str],
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
    table = [
        "export PORTAL_ARRAY_INDEX=${SLURM_ARRAY_TASK_ID:-${PORTAL_ARRAY_INDEX:-}}",
        'case "$PORTAL_ARRAY_INDEX" in',
    ]
    for index, member in enumerate(members):
        if member.job.array_index != index:
            raise ScriptError(f"array member {member.job.id} is not at index {index}")
        lines = [
            f"export PORTAL_JOB_ID={shlex.quote(str(member.job.id))}",
            f"export PORTAL_METRICS_URL={shlex.quote(member.metrics_url)}",
            f"PORTAL_COMMAND={shlex.quote(member.command)}",
            *told_lines(member.env, member.files),
        ]
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
        f"portal job array {int(array.id)} ({len(members)} members)",
        _payload(first, f"{work_dir}/$PORTAL_ARRAY_INDEX", "", '"$PORTAL_COMMAND"', container),
        system_interval,
    )


def told_lines(env: Mapping[str, str], files: Mapping[str, str]) -> list[str]:
    """What a job alone is told: its environment variables and files in its work directory
    (names checked against a pattern, values quoted)."""
    lines = []
    for name, value in sorted(env.items()):
        if not _ENV_NAME.match(name):
            raise ScriptError(f"refusing to render environment variable {name!r}")
        lines.append(f"export {name}={shlex.quote(value)}")
    for name, text in sorted(files.items()):
        if not _FILE_NAME.match(name):
            raise ScriptError(f"refusing to render file name {name!r}")
        lines.append(f'printf "%s\\n" {shlex.quote(text)} > "{work_dir_var()}/{name}"')
    return lines


def _wrap(
    job: JobSpec,
    options: list[str],
    identity: str,
    rendered_for: str,
    payload: str,
    system_interval: float,
) -> str:
    return template("wrapper.sh").substitute(
        directives="\n".join(options),
        identity=identity,
        rendered_for=rendered_for,
        modules=module_lines(job.image),
        checkpoint=checkpoint_lines(job),
        staging=staging.lines(job),
        metrics_module=metrics_module(),
        system_interval=shlex.quote(f"{float(system_interval):g}"),
        payload=payload,
    )


def checkpoint_lines(job: JobSpec) -> str:
    """A resumable job's part of the wrapper: where checkpoints go, which attempt this is,
    and what the warning before the time limit does (on_node/checkpoint.sh)."""
    if not job.resumable:
        return "_portal_resumable="
    return template("checkpoint.sh").substitute(
        max_attempts=int(job.max_attempts),
        # The script's time to save after the warning; the rest is the requeue's margin.
        grace=max(10, int(job.checkpoint_warning_seconds) - 20),
    )


def _payload(
    job: JobSpec, work_dir: str, register_url: str, command: str, container: bool = True
) -> str:
    """What the job runs, after the wrapper's set-up. ``command`` is the user's command as
    one shell word: quoted text, or ``"$PORTAL_COMMAND"`` in an array's script;
    ``container``: start the image's runtime here (else the scheduler has)."""
    gpus = job.resources.gpus
    if job.kind == Kind.BATCH:
        if not job.command.strip():
            raise ScriptError("a batch job needs a command")
        if is_distributed(job):
            return distributed_payload(job, work_dir, command)
        staged = job.staging is not None
        argv = container_launch(job.image, gpus, work_dir, staged=staged) if container else []
        launch = " ".join(word(a) for a in argv)
        return template("batch/payload.sh").substitute(launch=launch, command=command)
    if job.kind in SESSION_KINDS:
        root = work_root(work_dir)
        argv = container_launch(job.image, gpus, work_dir, bind=root) if container else []
        folder = shlex.quote(f"{root}/{job.notebook_dir}" if job.notebook_dir else root)
        # What every session kind shares: its port and secret, then its registration.
        common = {
            "launch": " ".join(word(a) for a in argv),
            "session_start": template("session_start.sh").substitute(
                register_url=shlex.quote(register_url),
                port_owner=heredoc_body(PORT_OWNER, "PORTAL_PORT_OWNER"),
            ),
            "register": template("session_register.sh").substitute(),
        }
        if job.kind == Kind.NOTEBOOK:
            return template("notebook/payload.sh").substitute(notebook_root=folder, **common)
        if job.kind in COMMAND_SESSION_KINDS:
            if job.app is None:
                raise ScriptError(f"a {job.kind} session needs its app's command")
            return _app_payload(job.app, root, folder, common)
        serve = (TEMPLATES / "tensorboard" / "serve_tensorboard.py").read_text()
        return template("tensorboard/payload.sh").substitute(
            logdir=folder, serve_script=serve, **common
        )
    raise ScriptError(f"unknown job kind {job.kind!r}")


def _app_payload(app: AppSpec, root: str, folder: str, common: dict[str, str]) -> str:
    """A session started by its command behind the session guard (on_node/app/)."""
    if app.listens not in ("socket", "port"):
        raise ScriptError(f"an app listens on a socket or a port, not {app.listens!r}")
    upstream = (
        '"unix:$_portal_socket"' if app.listens == "socket" else '"127.0.0.1:$_portal_app_port"'
    )
    helpers = ""
    for name in app.helpers:
        if name not in HELPERS:
            raise ScriptError(f"no helper module named {name!r}")
        delimiter = f"PORTAL_{name.upper()}"
        body = heredoc_body(HELPERS[name], delimiter)
        helpers += f"cat > \"$PORTAL_WORK_DIR/lib/{name}.py\" <<'{delimiter}'\n{body}{delimiter}\n"
    return template("app/payload.sh").substitute(
        helpers=helpers,
        root=shlex.quote(root),
        folder=folder,
        program=shlex.quote(app.program),
        command=app.command,
        environment=app.environment,
        upstream=upstream,
        ready_path=shlex.quote(app.ready_path),
        ready_status=shlex.quote(app.ready_status),
        guard_script=heredoc_body(SESSION_GUARD, "PORTAL_SESSION_GUARD"),
        **common,
    )


def metrics_module() -> str:
    return heredoc_body(METRICS_MODULE, "PORTAL_METRICS_PY")
