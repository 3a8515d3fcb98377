"""A job, an array and their parts as the scheduler seam's plain values (jobs/seam.py):
built once here from the rows, so that an adapter never reads a row (nor the database)
and its tests need none.

``job_spec`` is what a job's script is rendered from, ``array_spec`` an array's (its
members are ``Member`` values, jobs/experiments/runs.py), ``job_ref`` what a status or
accounting read needs of a submitted job. Reached as ``Job.describe()``, ``Job.ref()`` and
``JobArray.describe()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.models.annotations import PARAMS_FILE, params_env, params_json
from jobs.models.choices import COMMAND_SESSION_KINDS, State
from jobs.seam import (
    AppSpec,
    ArraySpec,
    ImageSpec,
    JobRef,
    JobSpec,
    PartitionSpec,
    Resources,
    Staging,
)

if TYPE_CHECKING:
    from jobs.models.arrays import JobArray
    from jobs.models.catalog import ContainerImage
    from jobs.models.clusters import Partition
    from jobs.models.job import Job


def comment(job: Job) -> str:
    """The portal's own id of the job (pk and uid), which the scheduler keeps with it
    (Slurm's --comment, seen in squeue and sacct); an array's members share the array's."""
    if job.array is not None:
        return array_comment(job.array)
    return f"portal-job-{job.pk}-{job.uid}"


def array_comment(array: JobArray) -> str:
    return f"portal-array-{array.pk}-{array.uid}"


def image_spec(image: ContainerImage) -> ImageSpec:
    return ImageSpec(
        runtime=image.runtime, location=image.location, modules=tuple(image.module_list)
    )


def partition_spec(partition: Partition) -> PartitionSpec:
    return PartitionSpec(
        name=partition.name,
        gpu_type_as_constraint=partition.gpu_type_as_constraint,
        mem_per_gpu=partition.mem_per_gpu,
        time_class=partition.time_class,
        max_gpus_per_node=partition.max_gpus_per_node,
        max_gpus_per_job=partition.max_gpus_per_job,
        max_cpus_per_job=partition.max_cpus_per_job,
    )


def resources(job: Job, *, gpu_model: bool = True) -> Resources:
    """What ``job`` asks for; ``gpu_model``: with the model described for its GPU type (a
    query of its cluster's GPU types, only for a job that names one; none where they were
    prefetched, as for an array's members)."""
    model = ""
    if gpu_model and job.gpus and job.gpu_type:
        described = [t for t in job.cluster.gpu_types.all() if t.name == job.gpu_type]
        model = described[0].model if described else ""
    return Resources(
        nodes=job.nodes,
        tasks_per_node=job.tasks_per_node,
        cpus=job.cpus,
        memory_gb=job.memory_gb,
        gpus=job.gpus,
        gpu_type=job.gpu_type,
        gpu_constraint=job.gpu_constraint,
        gpu_model=model,
        min_gpu_capability=job.min_gpu_capability,
        min_gpu_memory_gb=job.min_gpu_memory_gb,
    )


def account(job: Job) -> str:
    """The account the job is charged to: its own, else its cluster's default ('')."""
    return job.account or job.cluster.default_account


def staging(job: Job) -> Staging | None:
    """What ``job`` copies to its nodes before the command and back after it (None: it
    stages nothing), where on the node its cluster says."""
    asked = job.staging or {}
    if not asked:
        return None
    return Staging(
        source=str(asked.get("in") or ""),
        source_root=str(asked.get("in_root") or ""),
        outputs=tuple(str(p) for p in asked.get("out") or ()),
        destination=str(asked.get("out_to") or ""),
        destination_root=str(asked.get("out_to_root") or ""),
        scratch=job.cluster.node_scratch,
    )


def job_spec(job: Job) -> JobSpec:
    """What ``job``'s script is rendered from (its image, partition, cluster and array
    read here, once)."""
    params = job.params or {}
    return JobSpec(
        id=job.pk,
        name=job.scheduler_name,
        comment=comment(job),
        kind=job.kind,
        command=job.command,
        image=image_spec(job.image),
        resources=resources(job),
        partition=partition_spec(job.partition),
        account=account(job),
        time_limit_minutes=job.time_limit_minutes,
        launcher=job.launcher,
        resumable=job.resumable,
        max_attempts=job.max_attempts,
        checkpoint_warning_seconds=job.checkpoint_warning_seconds,
        notebook_dir=job.notebook_dir,
        # Its parameters (as a trial's, jobs/experiments/runs.py): PORTAL_PARAM_<NAME> and
        # params.json in the work directory.
        env=params_env(params) if params else {},
        files={PARAMS_FILE: params_json(params)} if params else {},
        array_index=job.array_index,
        staging=staging(job),
        app=app_spec(job),
    )


def app_spec(job: Job) -> AppSpec | None:
    """A session started by its app's command (VS Code, an added app); None otherwise."""
    if job.kind not in COMMAND_SESSION_KINDS:
        return None
    from jobs.models.apps import SessionApp

    app = SessionApp.for_job(job)
    return None if app is None else app.spec(job.app_values or {})


def job_ref(job: Job) -> JobRef:
    """What a status or accounting read needs of the submitted ``job``."""
    return JobRef(
        key=job.scheduler_key,
        comment=comment(job),
        state=State(job.state),
        resources=resources(job, gpu_model=False),
        partition=partition_spec(job.partition),
        account=account(job),
        node=job.node,
        submitted_at=job.submitted_at or job.created_at,
    )


def array_spec(array: JobArray) -> ArraySpec:
    return ArraySpec(
        id=array.pk,
        name=array.scheduler_name,
        comment=array_comment(array),
        throttle=array.throttle,
    )
