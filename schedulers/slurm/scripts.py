"""Render a job (its plain description, schedulers.seam.JobSpec) into the batch script that
sbatch runs: the #SBATCH directives here, under which the scheduler-neutral body
(schedulers/jobscript.py) runs.

Every value in a directive is either a number or checked against a strict pattern right
here, whatever the models already validated.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from clusters.workdir import ScriptError
from schedulers import jobscript
from schedulers.seam import ArraySpec, JobSpec, Member

# What may appear unquoted in an #SBATCH line (sbatch parses those itself).
_DIRECTIVE_VALUE = re.compile(r"^[A-Za-z0-9_.:/=,+@-]+\Z")


def _directive(option: str, value: object) -> str:
    text = str(value)
    if not _DIRECTIVE_VALUE.match(text):
        raise ScriptError(f"refusing to render --{option}={text!r}: unexpected characters")
    return f"#SBATCH --{option}={text}"


_FEATURE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")


def gres_options(job: JobSpec) -> list[tuple[str, str]]:
    asked = job.resources
    if not asked.gpus:
        return []
    if asked.gpu_constraint:
        # One of several GPU types (features or, with gpu_type_as_constraint, types).
        return [("gres", f"gpu:{asked.gpus}"), ("constraint", asked.gpu_constraint)]
    if asked.gpu_type and job.partition.gpu_type_as_constraint:
        return [("gres", f"gpu:{asked.gpus}"), ("constraint", asked.gpu_type)]
    if asked.gpu_type:
        return [("gres", f"gpu:{asked.gpu_type}:{asked.gpus}")]
    return [("gres", f"gpu:{asked.gpus}")]


def _constraint_directive(value: str) -> str:
    """--constraint=a|b: node features (or type names), each checked whole, joined by "|"."""
    if not all(_FEATURE.match(name) for name in value.split("|")):
        raise ScriptError(f"refusing to render --constraint={value!r}")
    return f"#SBATCH --constraint={value}"


def memory_option(job: JobSpec) -> tuple[str, str]:
    """--mem per node, or --mem-per-gpu where the partition wants it for GPU jobs."""
    asked = job.resources
    if asked.gpus and job.partition.mem_per_gpu:
        return ("mem-per-gpu", f"{-(-asked.memory_gb // asked.gpus)}G")
    return ("mem", f"{asked.memory_gb}G")


def directives(job: JobSpec, work_dir: str, logs: str = "") -> list[str]:
    """The #SBATCH lines; ``logs``: a pattern appended to the work directory for the log
    files' directory (an array's "%a", each member's own)."""
    options: list[tuple[str, object]] = [
        ("job-name", job.name),
        ("comment", job.comment),
        ("partition", job.partition.name),
    ]
    if job.account:
        options.append(("account", job.account))
    options += gres_options(job)  # GRES are per node
    options += [
        ("nodes", job.resources.nodes),
        ("ntasks-per-node", job.resources.tasks_per_node),
        ("cpus-per-task", job.resources.cpus),
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


def array_range(array: ArraySpec, count: int) -> str:
    """``--array``'s value for ``count`` members: '0-19%4' (at most 4 at once)."""
    spec = f"0-{count - 1}"
    return f"{spec}%{array.throttle}" if array.throttle else spec


def _array_directive(spec: str) -> str:
    if not re.fullmatch(r"0-\d{1,7}(%\d{1,7})?", spec):
        raise ScriptError(f"refusing to render --array={spec!r}")
    return f"#SBATCH --array={spec}"


def render(
    job: JobSpec,
    work_dir: str,
    register_url: str = "",
    metrics_url: str = "",
    system_interval: float = 0,
) -> str:
    """The complete batch script for ``job``, to run from ``work_dir``: the #SBATCH
    directives, then the job script's body (jobscript.render)."""
    return jobscript.render(
        job,
        work_dir,
        register_url,
        metrics_url,
        system_interval,
        header=directives(job, work_dir),
    )


def render_array(
    array: ArraySpec, members: Sequence[Member], work_dir: str, system_interval: float = 0
) -> str:
    """One batch script for every member of ``array`` (sbatch --array): the array's
    directives, each member's logs in its own directory ``<work_dir>/<index>``, then the
    body (jobscript.render_array)."""
    if not members:
        raise ScriptError("an array needs members")
    first = members[0].job
    header = [
        _directive("job-name", array.name),
        _directive("comment", array.comment),
        _array_directive(array_range(array, len(members))),
        _directive("chdir", work_dir),
        *[
            line
            for line in directives(first, work_dir, logs="%a")
            if not line.startswith(("#SBATCH --job-name=", "#SBATCH --comment=", "#SBATCH --chdir"))
        ],
    ]
    return jobscript.render_array(array, members, work_dir, system_interval, header=header)
