"""The seam between the portal and a batch scheduler (Open OnDemand's ood_core adapters,
cut to what the portal needs).

An adapter turns its scheduler's commands and output into ``Status``: the portal's state
(jobs/models/choices.py), the reason in words, the node, times and exit code. ``Job``
applies only these neutral values (``Job.apply_scheduler_status``). Two adapters:
Slurm (jobs/slurm/: commands in operations.py, parsing in parsers.py, mapping in
status.py, #SBATCH header in scripts.py) and HTCondor (jobs/htcondor/, the same split, its
submit description in submit.py); both build on the scheduler-neutral jobs/cluster/ (SSH,
work directories, the job script's body) and never on each other. ``Cluster.scheduler``
chooses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from jobs.models.choices import State

if TYPE_CHECKING:
    from jobs.cluster.ssh import Connection
    from jobs.models import Cluster, Job

# Bound of a stored pending reason (Job.pending_reason's max_length).
REASON_MAX_LENGTH = 200


@dataclass(frozen=True)
class Status:
    """One job as its scheduler reports it, in the portal's words."""

    state: State
    reason: str = ""  # pending: why it waits, in words
    message: str = ""  # why it changed, where the state alone does not say ("the node failed")
    node: str = ""
    started: bool = False  # the scheduler has a start time for it
    exit_code: int | None = None
    signal: int | None = None
    attempt: int | None = None  # restarts so far (requeues); None: the scheduler did not say
    queue_position: int | None = None  # pending: 1 = next in its queue
    estimated_start: datetime | None = None  # pending: the scheduler's estimate
    # Set when the scheduler reported something the adapter cannot read (an unknown
    # state): the job is left as it was, and this is logged.
    unreadable: str = ""
    # A line for the job's timeline without a change of state: something of the report
    # the adapter refused (a node its job ad names that the machine does not confirm).
    note: str = ""


@dataclass(frozen=True)
class Attempt:
    """One run of a job, from accounting: a requeued job has several."""

    scheduler_state: str  # the scheduler's word for how it ended (or RUNNING)
    node: str
    started_at: datetime
    ended_at: datetime | None
    elapsed_seconds: int
    gpus: int  # held over all its nodes
    cpus: int
    account: str = ""  # charged to


@dataclass(frozen=True)
class Submission:
    scheduler_id: str
    adopted: bool  # True when an earlier attempt had already submitted it


class Scheduler(Protocol):
    """What the portal asks of a scheduler, over an SSH connection to its login node."""

    name: str
    # Runs an array's members at most N at a time by itself (Slurm's --array=0-9%N); else
    # the portal submits no more members than may run at once.
    throttles_arrays: bool

    def render(
        self,
        job: Job,
        work_dir: str,
        register_url: str = "",
        metrics_url: str = "",
        system_interval: float = 0,
    ) -> str:
        """What ``submit`` sends for ``job``; kept as the job's script (shown on its page)."""
        ...

    def render_array(self, array, members: list, work_dir: str, system_interval: float = 0) -> str:
        """What ``submit_array`` sends for an array's members (jobs.cluster.jobscript.Member)."""
        ...

    def member_id(self, array_id: str, index: int) -> str:
        """The scheduler's id of an array's member (Slurm "12_3", HTCondor "12.3")."""
        ...

    def submit(
        self,
        conn: Connection,
        work_dir: str,
        job_name: str,
        script: str,
        secret: str = "",
        metrics_token: str = "",
    ) -> Submission: ...

    def submit_array(
        self,
        conn: Connection,
        work_dir: str,
        name: str,
        script: str,
        tokens: list[tuple[int, str]],
    ) -> Submission:
        """Submit (or adopt) a job array: one script, members ``<id>_<index>``."""
        ...

    def statuses(self, conn: Connection, username: str, jobs: Sequence[Job]) -> dict[str, Status]:
        """Status of ``jobs`` by scheduler id, in O(1) commands; unknown jobs left out."""
        ...

    def attempts(
        self, conn: Connection, username: str, jobs: Sequence[Job]
    ) -> dict[str, list[Attempt]]:
        """Each run of ``jobs`` with what it held, oldest first, from accounting, in O(1)
        commands ({} where the scheduler keeps no accounting)."""
        ...

    def cancel(self, conn: Connection, scheduler_id: str, job_name: str) -> None: ...

    def release(
        self, conn: Connection, username: str, scheduler_id: str, job_name: str
    ) -> None: ...


def for_cluster(cluster: Cluster) -> Scheduler:
    """The adapter for ``cluster``'s scheduler."""
    if cluster.scheduler == "htcondor":
        from jobs.htcondor.scheduler import HTCONDOR

        return HTCONDOR
    from jobs.slurm.scheduler import SLURM

    return SLURM


# How an adapter starts a pending reason that means "held" in the scheduler's own words
# (HTCondor's HoldReason): "held: <reason>".
HELD_PREFIX = "held: "


def is_held_reason(reason: str) -> bool:
    """A stored pending reason that means 'held': the job waits until it is released."""
    from jobs.slurm.status import HELD_TEXTS

    return reason in HELD_TEXTS or reason.startswith(HELD_PREFIX)
