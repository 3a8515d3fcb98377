"""What a job may ask for: its layout (nodes, tasks, launcher) on its own, then against its
partition. Each message names the limit and the way out; JobRequest.request_errors()
(jobs/models/request.py) collects them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs import schedulers
from jobs.models.choices import SESSION_KINDS, Launcher
from jobs.models.gpus import NoGpuMatches, choose, wants

if TYPE_CHECKING:
    from jobs.models.clusters import Partition
    from jobs.models.request import JobRequest


def layout_errors(job: JobRequest) -> dict[str, str]:
    """Nodes, tasks and launcher must make sense together (before any partition)."""
    errors: dict[str, str] = {}
    if job.kind in SESSION_KINDS and (
        job.nodes > 1 or job.tasks_per_node > 1 or job.launcher != Launcher.NONE
    ):
        errors["nodes"] = (
            f"A {job.get_kind_display().lower()} runs as one process on one node: "
            "choose 1 node, 1 task per node and no launcher."
        )
        return errors
    if job.launcher == Launcher.TORCHRUN and job.gpus and job.tasks_per_node != job.gpus:
        errors["tasks_per_node"] = (
            f"torchrun starts one process per task and each drives one GPU: ask for as many "
            f"tasks per node as GPUs per node ({job.gpus}), or for no GPUs."
        )
    elif (
        job.launcher == Launcher.MPI
        and job.gpus
        and job.tasks_per_node % job.gpus
        and job.gpus % job.tasks_per_node
    ):
        errors["tasks_per_node"] = (
            f"Each MPI rank is pinned to an equal share of its node's {job.gpus} GPUs: ask "
            f"for tasks per node that divide them evenly (one per GPU: {job.gpus}) or a "
            "multiple of them."
        )
    return errors


def partition_errors(job: JobRequest, partition: Partition) -> dict[str, str]:
    """The request must fit the partition; each message names the limit and the way out."""
    errors: dict[str, str] = {}
    name = partition.name
    if job.nodes > partition.max_nodes:
        errors["nodes"] = (
            f"Partition {name} allows at most {partition.max_nodes} node(s) per job."
            if partition.max_nodes > 1
            else f"Partition {name} runs single-node jobs only: choose 1 node."
        )
    per_node = partition.gpus_per_node_limit
    if job.gpus and not partition.max_gpus_per_job:
        errors["gpus"] = f"Partition {name} has no GPUs."
    elif job.gpus > per_node and per_node < partition.max_gpus_per_job:
        # (per_node > 0 here: a partition without GPUs took the branch above)
        more = -(-job.gpus * job.nodes // per_node)
        hint = (
            f" For {job.gpus * job.nodes} GPUs, ask for {per_node} per node on {more} nodes."
            if 1 < more <= partition.max_nodes and more * per_node <= partition.max_gpus_per_job
            else ""
        )
        errors["gpus"] = f"A node of partition {name} has at most {per_node} GPU(s).{hint}"
    elif job.total_gpus > partition.max_gpus_per_job:
        errors["gpus"] = (
            f"Partition {name} allows at most {partition.max_gpus_per_job} GPU(s) per job"
            + (
                f"; {job.nodes} nodes × {job.gpus} GPUs is {job.total_gpus}."
                if job.nodes > 1
                else "."
            )
        )
    elif job.gpu_type and job.gpu_type not in partition.gpu_type_list:
        offered = ", ".join(partition.gpu_type_list) or "none"
        errors["gpu_type"] = f"Partition {name} offers GPU types: {offered}."
    node_cpus = job.cpus * job.tasks_per_node
    if node_cpus > partition.max_cpus_per_job:
        errors["cpus"] = (
            f"Partition {name} allows at most {partition.max_cpus_per_job} CPUs per job."
            if job.tasks_per_node == 1
            else f"Partition {name} allows at most {partition.max_cpus_per_job} CPUs per "
            f"node; {job.tasks_per_node} tasks × {job.cpus} CPUs is {node_cpus}."
        )
    if job.memory_gb > partition.max_memory_gb:
        errors["memory_gb"] = (
            f"Partition {name} allows at most {partition.max_memory_gb} GB of memory per "
            f"{'node' if job.nodes > 1 else 'job'}."
        )
    if job.time_limit_minutes > partition.max_time_minutes:
        errors["time_limit_minutes"] = (
            f"Partition {name} allows at most {partition.max_time_minutes} minutes."
        )
    errors.update(scheduler_errors(job, partition.cluster))
    return errors


def scheduler_errors(job, cluster) -> dict[str, str]:
    """What the cluster's scheduler cannot run: its adapter's capabilities (README,
    'Schedulers')."""
    scheduler = schedulers.for_cluster(cluster)
    errors: dict[str, str] = {}
    if (not scheduler.supports_multi_node and (job.nodes > 1 or job.tasks_per_node > 1)) or (
        not scheduler.supports_launchers and job.launcher != Launcher.NONE
    ):
        errors["nodes"] = (
            f"Cluster {cluster.name} runs {scheduler.name}: one process on one machine per "
            "job (multi-node jobs and launchers need a Slurm cluster)."
        )
    if job.resumable and not scheduler.supports_resumable:
        errors["resumable"] = (
            f"Cluster {cluster.name} runs {scheduler.name}: checkpoint and requeue need a "
            "Slurm cluster here."
        )
    return errors


def gpu_requirement_errors(job, partition) -> dict[str, str]:
    """A request by compute capability and memory: the matching GPU types of ``partition``
    become the job's gpu_type (one type) or gpu_constraint (one of several); refused with
    the closest alternatives when none matches."""
    capability, memory = job.min_gpu_capability, job.min_gpu_memory_gb
    job.gpu_constraint = ""
    if capability is None and memory is None:
        return {}
    field = "min_gpu_capability" if capability is not None else "min_gpu_memory_gb"
    if not job.gpus:
        return {field: "Choose a GPU count for these GPU requirements."}
    described = list(partition.cluster.gpu_types.all())
    if job.gpu_type:
        chosen = next((t for t in described if t.name == job.gpu_type), None)
        if chosen is None:
            return {field: f"GPU type {job.gpu_type} is not described: choose “any” type."}
        if not chosen.satisfies(capability, memory):
            return {
                field: f"{chosen.name} has {chosen.describe()}, not {wants(capability, memory)}."
            }
        return {}
    try:
        choice = choose(partition, described, capability, memory)
    except NoGpuMatches as exc:
        return {field: str(exc)}
    if len(choice.constraint) > GPU_CONSTRAINT_MAX:
        return {field: f"Too many GPU types match ({len(choice.types)}): ask for more."}
    job.gpu_type, job.gpu_constraint = choice.gres_type, choice.constraint
    return {}


# Job.gpu_constraint's max_length: an OR of more types than fits is refused, not cut.
GPU_CONSTRAINT_MAX = 400
