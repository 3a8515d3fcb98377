"""Render a job (its plain description, schedulers.seam.JobSpec) into an HTCondor submit
description and the job script it runs.

The job script is the same body as on Slurm (schedulers/jobscript.py: wrapper, metrics
client, payloads) under a header of plain shell lines instead of #SBATCH directives. What
the portal submits and keeps as the job's script is both, one after the other: the submit
description (``job.sub``), a separator line, then the script (``job.sh``).

Every value in the description is either a number or checked against a strict pattern
right here, whatever the models already validated: the description is HTCondor's own
language, and nothing typed may add a command to it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from clusters.workdir import ScriptError
from common.choices import Runtime
from schedulers import jobscript
from schedulers.htcondor.status import TIME_LIMIT_ATTRIBUTE
from schedulers.launchers import is_distributed
from schedulers.seam import ArraySpec, ImageSpec, JobSpec, Member

# Between job.sub and job.sh in what is submitted (never a line of the description).
SEPARATOR = "#-- portal: end of job.sub; job.sh follows --"

_PATH = re.compile(r"/[A-Za-z0-9_./-]{1,4000}\Z")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\Z")
_IMAGE = re.compile(r"[A-Za-z0-9/][A-Za-z0-9_./:@+-]{0,500}\Z")
_DEVICE = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._()-]{0,99}\Z")
_TIME_CLASS = re.compile(r"[a-z]{1,16}\Z")

# The script's first lines on HTCondor: a job starts with an almost empty environment
# (no HOME, USER or PATH; bash supplies a PATH), which tools such as Jupyter need.
HEADER = [
    "# Started by HTCondor (condor_submit job.sub): see job.sub beside this script.",
    'export HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"',
    'export USER="${USER:-$(id -un)}"',
]
# A job without GPUs gets CUDA_VISIBLE_DEVICES=10000 from HTCondor (no such device); empty
# says the same to CUDA and to the wrapper's "has GPUs" checks (the idle-GPU sampler).
NO_GPUS = 'if [ "${CUDA_VISIBLE_DEVICES:-}" = 10000 ]; then export CUDA_VISIBLE_DEVICES=; fi'


def header(job: JobSpec) -> list[str]:
    return HEADER if job.resources.gpus else [*HEADER, NO_GPUS]


def _checked(pattern: re.Pattern, value: str, what: str) -> str:
    if not pattern.match(value):
        raise ScriptError(f"refusing to render {what} {value!r}: unexpected characters")
    return value


def container_image(image: ImageSpec) -> str:
    """``container_image`` for the image (HTCondor starts it with Apptainer); '' for the
    host environment. A Podman image's registry reference is pulled as docker://."""
    if image.runtime == Runtime.NONE:
        return ""
    location = _checked(_IMAGE, image.location, "the image")
    if image.runtime == Runtime.PODMAN and "://" not in location:
        return f"docker://{location}"
    return location


def gpu_lines(job: JobSpec) -> list[str]:
    """request_gpus with HTCondor's own minimums (capability, memory in MB); a GPU type
    the job names becomes a requirement on the device's name (its described model)."""
    asked = job.resources
    if not asked.gpus:
        return []
    lines = [f"request_gpus = {int(asked.gpus)}"]
    if asked.min_gpu_capability is not None:
        lines.append(f"gpus_minimum_capability = {float(asked.min_gpu_capability):g}")
    if asked.min_gpu_memory_gb is not None:
        lines.append(f"gpus_minimum_memory = {int(asked.min_gpu_memory_gb) * 1024}")
    if asked.gpu_type:
        model = asked.gpu_model or asked.gpu_type
        lines.append(f'require_gpus = DeviceName == "{_checked(_DEVICE, model, "GPU model")}"')
    return lines


def description(
    job: JobSpec, work_dir: str, name: str, executable: str, *, array_size: int = 0
) -> list[str]:
    """The submit description's lines for ``job`` (an array's first member with
    ``array_size`` procs: each works in ``<work_dir>/<proc>``)."""
    if is_distributed(job):
        raise ScriptError("multi-node and launcher jobs need Slurm; this cluster runs HTCondor")
    if job.resumable:
        raise ScriptError("resumable jobs need Slurm; this cluster runs HTCondor")
    if job.staging is not None and job.image.runtime != Runtime.NONE:
        # The script runs inside HTCondor's container, which may not see the folder.
        raise ScriptError(
            "stage-in on HTCondor needs an image without a container; this cluster runs "
            "HTCondor, which starts the container around the whole job script"
        )
    work_dir = _checked(_PATH, work_dir, "the work directory")
    name = _checked(_NAME, name, "the job name")
    member = "/$(ProcId)" if array_size else ""
    environment = [
        "PORTAL_SCHEDULER=htcondor",
        "PORTAL_SCHEDULER_JOB_ID=$(ClusterId).$(ProcId)",
    ]
    if array_size:
        environment.append("PORTAL_ARRAY_INDEX=$(ProcId)")
    lines = [
        f"# HTCondor submit description for {name}, rendered by the HPC portal.",
        "universe = vanilla",
        f"executable = {_checked(_PATH, executable, 'the script')}",
        "transfer_executable = false",
        # The portal reads logs, metrics and notebooks' files in the work directory while
        # the job runs: the access point and the execute machines share the file system.
        "should_transfer_files = NO",
        f"initialdir = {work_dir}{member}",
        "output = stdout.log",
        "error = stderr.log",
        f"log = {work_dir}/condor.log",
        f"batch_name = {name}",
        f'+PortalName = "{name}"',
        f'environment = "{" ".join(environment)}"',
        f"request_cpus = {int(job.resources.cpus) * int(job.resources.tasks_per_node)}",
        f"request_memory = {int(job.resources.memory_gb) * 1024}",
        *gpu_lines(job),
        # The walltime: HTCondor has no time limit of its own that ends a job; this one
        # removes it (the portal reads the remove reason as "timeout").
        f"+{TIME_LIMIT_ATTRIBUTE} = {int(job.time_limit_minutes) * 60}",
        "periodic_remove = JobStatus == 2 && "
        f"time() - JobCurrentStartExecutingDate > {TIME_LIMIT_ATTRIBUTE}",
    ]
    if job.account:
        lines.append(f"accounting_group = {_checked(_NAME, job.account, 'the account')}")
    time_class = job.partition.time_class
    if time_class and job.resources.gpus:  # CHTC's GPU job length classes (short/medium/long)
        lines.append(f'+GPUJobLength = "{_checked(_TIME_CLASS, time_class, "time class")}"')
    image = container_image(job.image)
    if image:
        lines.append(f"container_image = {image}")
    lines.append(f"queue {int(array_size)}" if array_size else "queue")
    for line in lines:
        if "\n" in line or "\r" in line or line == SEPARATOR:
            raise ScriptError("a submit description line may not break")
    return lines


def combined(description_lines: list[str], script: str) -> str:
    return "\n".join([*description_lines, SEPARATOR, script])


def render(
    job: JobSpec,
    work_dir: str,
    register_url: str = "",
    metrics_url: str = "",
    system_interval: float = 0,
) -> str:
    script = jobscript.render(
        job,
        work_dir,
        register_url,
        metrics_url,
        system_interval,
        header=header(job),
        container=False,
    )
    lines = description(job, work_dir, job.name, f"{work_dir}/job.sh")
    return combined(lines, script)


def render_array(
    array: ArraySpec, members: Sequence[Member], work_dir: str, system_interval: float = 0
) -> str:
    """One cluster of procs for an array's members (``queue N``; HTCondor's job array)."""
    if not members:
        raise ScriptError("an array needs members")
    script = jobscript.render_array(
        array, members, work_dir, system_interval, header=header(members[0].job), container=False
    )
    lines = description(
        members[0].job,
        work_dir,
        array.name,
        f"{work_dir}/job.sh",
        array_size=len(members),
    )
    return combined(lines, script)
