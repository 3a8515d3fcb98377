"""The Slurm adapter's translation: one job in Slurm's words (``SlurmJob``, what parsers.py
reads) and its states, reasons and free resources into the portal's neutral status
(schedulers/seam.py). This is where a Slurm state is mapped."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from common.choices import FINAL_STATES, State
from schedulers.seam import Status
from schedulers.slurm.sinfo import NodeFree

if TYPE_CHECKING:
    from schedulers.seam import Resources

# Every Slurm job state, mapped onto the portal's vocabulary.
STATE_MAP = {
    "PENDING": "pending",
    "CONFIGURING": "pending",
    "REQUEUED": "pending",
    "REQUEUE_FED": "pending",
    "REQUEUE_HOLD": "pending",
    "SUSPENDED": "pending",  # not running now; the reason says why
    "RESV_DEL_HOLD": "pending",
    "RUNNING": "running",
    "RESIZING": "running",
    "SIGNALING": "running",
    "STOPPED": "running",
    "COMPLETING": "completing",
    "STAGE_OUT": "completing",
    "COMPLETED": "completed",
    "FAILED": "failed",
    "NODE_FAIL": "failed",
    "BOOT_FAIL": "failed",
    "OUT_OF_MEMORY": "failed",
    "PREEMPTED": "failed",
    "SPECIAL_EXIT": "failed",
    "REVOKED": "cancelled",
    "CANCELLED": "cancelled",
    "TIMEOUT": "timeout",
    "DEADLINE": "timeout",
}

# Why a job ended in a portal state that does not say it by itself.
STATE_MESSAGES = {
    "NODE_FAIL": "The compute node failed while the job ran.",
    "BOOT_FAIL": "The compute node failed to boot for the job.",
    "OUT_OF_MEMORY": "The job ran out of memory; ask for more memory.",
    "PREEMPTED": "The job was preempted by a higher-priority job.",
    "DEADLINE": "The job reached its deadline.",
    "SUSPENDED": "Suspended by the scheduler.",
    "REVOKED": "The job was revoked (it ran on another cluster of a federation).",
}

# Pending reasons in plain words.
REASON_TEXT = {
    "Resources": "waiting for free resources (a free GPU or node)",
    "Priority": "waiting behind higher-priority jobs",
    "Dependency": "waiting for another job to finish",
    "DependencyNeverSatisfied": "its dependency can never be satisfied",
    "BeginTime": "waiting for its start time",
    "JobHeldUser": "held by you",
    "JobHeldAdmin": "held by an administrator",
    "ReqNodeNotAvail": "the requested nodes are not available (maintenance?)",
    "PartitionDown": "the partition is down",
    "PartitionInactive": "the partition is inactive",
    "PartitionTimeLimit": "the time limit exceeds the partition's limit",
    "PartitionNodeLimit": "the request exceeds the partition's node limit",
    "QOSMaxGRESPerUser": "you are at your GPU limit; waiting for your other jobs",
    "QOSMaxCpuPerUserLimit": "you are at your CPU limit; waiting for your other jobs",
    "QOSMaxJobsPerUserLimit": "you are at your job limit; waiting for your other jobs",
    "AssocGrpGRES": "your group is at its GPU limit",
    "AssocGrpCpuLimit": "your group is at its CPU limit",
    "AssociationJobLimit": "your account is at its job limit",
    "Reservation": "waiting for its reservation",
    "NodeDown": "a required node is down",
    "BadConstraints": "no node satisfies the requested constraints",
    "InvalidAccount": "the account is not valid",
    "InvalidQOS": "the QOS is not valid",
    "launch failed requeued held": "the node could not start it and Slurm holds it: "
    "release it to try again, or cancel it",
    "JobArrayTaskLimit": "waiting for other tasks of its array to finish",
    "Licenses": "waiting for a free license",
    "Cleaning": "waiting while Slurm cleans up after its previous run",
    "Prolog": "its node is running the prolog",
    "QOSMaxWallDurationPerJobLimit": "its walltime is longer than your QOS allows",
    "AssocMaxWallDurationPerJobLimit": "its walltime is longer than your account allows",
    "QOSGrpGRES": "your QOS is at its GPU limit",
    "QOSGrpCpuLimit": "your QOS is at its CPU limit",
    "AssocMaxJobsLimit": "your account is at its job limit",
    "AssocGrpJobsLimit": "your group is at its job limit",
    "FrontEndDown": "the front-end node is down",
    "SystemFailure": "a Slurm, file system or network failure",
    "JobLaunchFailure": "the job could not be launched",
}

# Pending reasons that mean "held": nothing happens until the job is released.
HELD_REASONS = ("JobHeldUser", "JobHeldAdmin", "launch failed requeued held")


def reason_text(reason: str) -> str:
    """A pending reason in plain words ('' for none); one Slurm has no words for here is
    still said as a reason, never shown bare."""
    if not reason or reason in {"None", "(null)"}:
        return ""
    if reason in REASON_TEXT:
        return REASON_TEXT[reason]
    code = reason if re.fullmatch(r"[A-Za-z][A-Za-z0-9_ ,:()-]{0,60}", reason) else "unknown"
    if reason.startswith("QOS"):
        return f"a limit of your quality of service holds it (Slurm: {code})"
    if reason.startswith("Assoc") or reason.startswith("MaxGRESPer"):
        return f"a limit of your account holds it (Slurm: {code})"
    return f"waiting (Slurm: {code})"


def map_state(slurm_state: str) -> str:
    """'CANCELLED by 1001' -> 'cancelled'. Unknown states raise ValueError."""
    key = slurm_state.split()[0].rstrip("+") if slurm_state else ""
    try:
        return STATE_MAP[key]
    except KeyError:
        raise ValueError(f"unknown Slurm job state {slurm_state!r}") from None


def waiting_for(
    nodes: tuple[NodeFree, ...],
    cpus: int,
    memory_gb: int,
    gpus: int,
    gpu_type: str = "",
    count: int = 1,
) -> str:
    """Which resource a job pending for 'Resources' waits for, in words, from what the
    partition's nodes have free now. The job asks for ``cpus``, ``memory_gb`` and ``gpus``
    on each of ``count`` nodes."""
    usable = [n for n in nodes if n.usable]
    if not usable:
        return "waiting for a node: every node of its partition is down, drained or reserved"
    if count > 1:
        return _waiting_for_nodes(usable, cpus, memory_gb, gpus, gpu_type, count)
    best_cpus = max(n.cpus for n in usable)
    best_mb = max(n.memory_mb for n in usable)
    best_gpus = max(n.free_gpus(gpu_type) for n in usable)
    short = []
    if gpus > best_gpus:
        kind = f"{gpu_type} GPUs" if gpu_type else "GPUs"
        short.append(f"{kind}: {gpus} asked, {best_gpus} free")
    if cpus > best_cpus:
        short.append(f"CPUs: {cpus} asked, {best_cpus} free")
    if memory_gb * 1024 > best_mb:
        short.append(f"memory: {memory_gb} GB asked, {best_mb / 1024:.3g} GB free")
    if short:
        return "waiting for " + "; ".join(short) + " (at most, on one node)"
    fits = any(
        n.cpus >= cpus and n.memory_mb >= memory_gb * 1024 and n.free_gpus(gpu_type) >= gpus
        for n in usable
    )
    if not fits:
        return "waiting for one node with the CPUs, memory and GPUs it asks all free at once"
    return "waiting for the scheduler: what it asks is free now"


def _waiting_for_nodes(
    usable: list[NodeFree], cpus: int, memory_gb: int, gpus: int, gpu_type: str, count: int
) -> str:
    """The multi-node case: how many nodes have each resource free, against ``count``."""
    if len(usable) < count:
        return (
            f"waiting for {count} nodes: only {len(usable)} of its partition can take jobs "
            "now (the others are down, drained or reserved)"
        )
    short = []
    with_gpus = sum(n.free_gpus(gpu_type) >= gpus for n in usable)
    if gpus and with_gpus < count:
        kind = f"{gpu_type} GPUs" if gpu_type else "GPUs"
        short.append(f"{gpus} {kind} free on {with_gpus}")
    with_cpus = sum(n.cpus >= cpus for n in usable)
    if with_cpus < count:
        short.append(f"{cpus} CPUs free on {with_cpus}")
    with_memory = sum(n.memory_mb >= memory_gb * 1024 for n in usable)
    if with_memory < count:
        short.append(f"{memory_gb} GB of memory free on {with_memory}")
    if short:
        return f"waiting for {count} nodes with what it asks on each; now " + ", ".join(short)
    fits = sum(
        n.cpus >= cpus and n.memory_mb >= memory_gb * 1024 and n.free_gpus(gpu_type) >= gpus
        for n in usable
    )
    if fits < count:
        return (
            f"waiting for {count} nodes with the CPUs, memory and GPUs it asks all free at "
            f"once ({fits} have them now)"
        )
    return "waiting for the scheduler: what it asks is free now"


def to_status(raw: SlurmJob, asked: Resources) -> Status:
    """What Slurm says of a job that ``asked`` for these resources, in the portal's words.
    Unknown states raise ValueError."""
    state = State(map_state(raw.slurm_state))
    pending = state == State.PENDING
    reason = reason_text(raw.reason) if pending else ""
    if pending and raw.free is not None:
        reason = waiting_for(
            raw.free,
            asked.cpus * asked.tasks_per_node,
            asked.memory_gb,
            asked.gpus,
            asked.gpu_type,
            count=asked.nodes,
        )
    key = raw.slurm_state.split()[0] if raw.slurm_state else ""
    return Status(
        state=state,
        reason=reason,
        message=STATE_MESSAGES.get(key, ""),
        node="" if pending else raw.node,
        started=raw.start is not None,
        exit_code=raw.exit_code,
        signal=raw.signal,
        attempt=raw.restarts,
        queue_position=raw.queue_position if pending else None,
        estimated_start=raw.estimated_start if pending else None,
        held=pending and raw.reason in HELD_REASONS,
    )


@dataclass(frozen=True)
class SlurmJob:
    """One job as Slurm reports it, in Slurm's words (status.py turns it into the portal's)."""

    scheduler_id: str
    slurm_state: str
    reason: str = ""
    node: str = ""
    start: datetime | None = None
    end: datetime | None = None
    name: str = ""
    comment: str = ""
    exit_code: int | None = None
    signal: int | None = None
    restarts: int | None = None
    user: str = ""
    # Pending jobs: place among the partition's pending jobs (1 = next), Slurm's estimate.
    queue_position: int | None = None
    estimated_start: datetime | None = None
    partition: str = ""
    # Pending for Resources: what the partition's nodes have free (from sinfo), if known.
    free: tuple[NodeFree, ...] | None = None

    @property
    def state(self) -> str:
        """The portal's state for this job."""
        return map_state(self.slurm_state)

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES

    def carries(self, name: str, comment: str = "") -> bool:
        """Whether this record carries the portal job's ``name`` (and its ``comment``, as
        comment_agrees() says)."""
        return bool(name) and self.name == name and comment_agrees(self.comment, comment)


def comment_agrees(found: str, expected: str) -> bool:
    """A record's comment agrees with the portal's ``expected`` one (JobSpec.comment, the
    script's --comment; "": not asked) unless both are there and differ. It never makes a record a job's: a
    job's owner can change its comment (``scontrol update comment=``) as they can its
    name, so the name is what is checked and the comment can only refuse. Records without
    one: sacct's, unless the site stores comments (AccountingStoreFlags=job_comment)."""
    return not found or not expected or found == expected
