"""The seam between the portal and a batch scheduler (Open OnDemand's ood_core adapters,
cut to what the portal needs): the neutral types an adapter is given and answers in, and
``Adapter``: what an adapter must do (its methods, over an SSH connection to the login
node) and what it can (its capabilities). Imports no model: models, adapters and tasks all
import it; it imports none of them.

On the way in an adapter takes plain values, never a row, as ood_core's take a ``Script``:
``JobSpec`` (with ``ImageSpec``, ``Resources``, ``PartitionSpec``) is what a job's script
is rendered from, ``ArraySpec`` and ``Member`` a job array's, and ``JobRef`` what a status
or accounting read needs of a submitted job. The jobs app builds them once from its rows
(jobs/models/job.py: ``Job.describe()``, ``Job.ref()``; ``JobArray.describe()``).

On the way out an adapter turns its scheduler's commands and output into ``Status``: the
portal's state (common/choices.py), the reason in words, the node, times and exit
code, each under the ``JobKey`` (scheduler id and name) of the job it is about. ``Job``
applies only these neutral values (``Job.apply_scheduler_status``). Adapters are found
through the registry in schedulers/registry.py; ``Cluster.scheduler`` chooses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, NamedTuple, Protocol

if TYPE_CHECKING:
    from clusters.models import Cluster, ClusterAccount
    from clusters.ssh import Connection
    from common.choices import State

# Bound of a stored pending reason (Job.pending_reason's max_length).
REASON_MAX_LENGTH = 200


class JobKey(NamedTuple):
    """Which portal job a scheduler's record is: its scheduler id and the name the portal
    gave it (Job.scheduler_key). An id alone is not enough: a scheduler that lost its state
    (a controller killed and restarted without it) hands the same id to another job, of
    the same person even. Every answer an adapter gives is keyed by both, so two portal
    jobs holding one id each get the record under their own name, or none."""

    scheduler_id: str
    name: str


@dataclass(frozen=True)
class ImageSpec:
    """The image a job runs in: its runtime (common.choices.Runtime: "apptainer",
    "singularity", "podman", or "none" for the node's own environment), where the image is,
    and the environment modules loaded before it starts, in order."""

    runtime: str
    location: str = ""
    modules: tuple[str, ...] = ()


@dataclass(frozen=True)
class Resources:
    """What a job asks for: ``nodes``, each with ``tasks_per_node`` processes of ``cpus``
    CPUs, ``memory_gb`` and ``gpus``; the GPUs by type (one, or several as a constraint
    "a100|h100") or by minimums."""

    nodes: int
    tasks_per_node: int
    cpus: int  # per task
    memory_gb: int  # per node
    gpus: int = 0  # per node
    gpu_type: str = ""
    gpu_constraint: str = ""
    # The model the cluster's admin described for gpu_type (GpuType.model, e.g.
    # "A100-SXM4-40GB"); "": none described.
    gpu_model: str = ""
    min_gpu_capability: Decimal | None = None
    min_gpu_memory_gb: int | None = None


@dataclass(frozen=True)
class PartitionSpec:
    """The partition (queue) a job runs in: its name, how it wants GPUs asked for, and the
    bounds of one node of it (what a run is charged at most)."""

    name: str
    gpu_type_as_constraint: bool = False  # a GPU type is a node feature, not a GRES type
    mem_per_gpu: bool = False  # memory per GPU rather than per node, for GPU jobs
    time_class: str = ""  # HTCondor's GPU job length class (short/medium/long)
    max_gpus_per_node: int = 0  # 0: as many as max_gpus_per_job
    max_gpus_per_job: int = 0
    max_cpus_per_job: int = 0


@dataclass(frozen=True)
class Staging:
    """Stage-in and stage-out around a batch command (docs/use/stage-in.md). ``source``: a
    folder on the cluster copied to node-local scratch before the command, checked there
    against a manifest of its checksums, and given to the job as ``PORTAL_STAGED_DIR``
    ("": none; the folder is made empty, for outputs). ``outputs``: paths or globs, relative
    to the staged copy (else to the work directory), copied after the command into
    ``destination`` ("": the job's work directory). ``source_root`` and
    ``destination_root``: the person's root each lies in (home, scratch, a project's
    folder): no link between a root and its path is followed. ``scratch``: the folder on
    each node the copy goes into (the cluster's ``node_scratch``; "": ``$SLURM_TMPDIR``,
    else HTCondor's scratch directory, else ``$TMPDIR``, else /tmp)."""

    source: str = ""
    source_root: str = ""
    outputs: tuple[str, ...] = ()
    destination: str = ""
    destination_root: str = ""
    scratch: str = ""


@dataclass(frozen=True)
class AppSpec:
    """A session started by its command behind the session guard (VS Code, an app a
    centre added: catalog.models.SessionApp), rendered already (catalog/app_command.py):
    ``program`` its first word and ``command`` its words, each quoted for the shell;
    ``environment`` its ``export PORTAL_APP_…`` lines; where it ``listens`` ("socket" or
    "port"); the readiness check (``ready_path``, ``ready_status``); the on-node
    ``helpers`` (modules of schedulers/on_node/) written into the job's lib/ for it."""

    program: str
    command: str
    environment: str = ""
    listens: str = "socket"
    ready_path: str = "/"
    ready_status: str = "200-399"
    helpers: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobSpec:
    """What a job's script is rendered from (``Adapter.render``): the plain values of a
    job, its image and partition, built once from the rows (Job.describe())."""

    id: int  # the portal's job id (PORTAL_JOB_ID)
    name: str  # its name on the scheduler (an array member's is its array's)
    comment: str  # the portal's own id of it, seen in the scheduler's records
    kind: str  # common.choices.Kind
    command: str
    image: ImageSpec
    resources: Resources
    partition: PartitionSpec
    account: str  # charged to; "": the scheduler's default
    time_limit_minutes: int
    launcher: str = "none"  # common.choices.Launcher
    # Checkpoint and requeue: warned this long before the time limit, up to max_attempts.
    resumable: bool = False
    max_attempts: int = 1
    checkpoint_warning_seconds: int = 120
    notebook_dir: str = ""  # sessions: the folder under the work root they open in
    # What the job alone is told (its parameters): environment variables and files in its
    # work directory.
    env: Mapping[str, str] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)
    array_index: int | None = None
    # Batch jobs: a folder copied to the node before the command, outputs back after it.
    staging: Staging | None = None
    # Sessions started by a command behind the session guard (VS Code, admin-added apps).
    app: AppSpec | None = None


@dataclass(frozen=True)
class ArraySpec:
    """A job array, as its one script and submission need it (the members are ``Member``)."""

    id: int
    name: str  # every member's name on the scheduler
    comment: str
    throttle: int = 0  # at most this many members run at once; 0: no limit


@dataclass(frozen=True)
class Member:
    """One member of a job array: its job, what it alone is told (environment variables
    and files in its directory) and the command it runs."""

    job: JobSpec
    command: str
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    metrics_url: str = ""


@dataclass(frozen=True)
class JobRef:
    """What reading a submitted job's status or runs needs of it (``Adapter.statuses``,
    ``attempts``), built once from its row (Job.ref()): which job it is (its key and
    comment), what the portal holds of it now (its state, the node confirmed last), when it
    was submitted, and what it asked for (a run is charged at least that)."""

    key: JobKey
    comment: str
    state: State
    resources: Resources
    partition: PartitionSpec
    account: str = ""  # charged to, as submitted
    node: str = ""
    submitted_at: datetime | None = None  # (or made, before it was submitted)


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
    # Pending and held (by the user, an administrator, or the scheduler after a failed
    # launch): it waits until released. Set by the adapter's status parser.
    held: bool = False
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


@dataclass(frozen=True)
class AccountRecord:
    """One of the scheduler's accounts (a Slurm account, an HTCondor accounting group) as
    the portal reads it: the cluster users associated with it and its coordinators."""

    name: str
    users: frozenset[str]
    coordinators: frozenset[str] = frozenset()


@dataclass(frozen=True)
class AccountsRead:
    """What ``Adapter.accounts`` read: the accounts, and each cluster user's default."""

    accounts: tuple[AccountRecord, ...]
    defaults: Mapping[str, str]


@dataclass(frozen=True)
class UsageLine:
    """One user's use of an account in one month (of the runs' starts), from accounting."""

    user: str
    month: str  # YYYY-MM
    jobs: int
    gpu_seconds: int
    cpu_seconds: int


@dataclass(frozen=True)
class AccountUsage:
    """What an account spent and may spend, as the scheduler tells it: per user and month
    (``lines``), its limits (``limits``: {"GrpTRESMins": {"gres/gpu": 6000}, ...}; absent
    when unset) and its fair-share (``norm_shares``: its part of the cluster;
    ``effective_usage``: its part of recent use, decayed; None where not kept)."""

    lines: tuple[UsageLine, ...]
    limits: Mapping[str, Mapping[str, int]]
    norm_shares: float | None = None
    effective_usage: float | None = None


@dataclass(frozen=True)
class Reservation:
    """A reservation of nodes the scheduler keeps (a maintenance window among them): when,
    and the partitions whose nodes it takes (a job there that would run into it waits)."""

    name: str
    start: datetime
    end: datetime
    maintenance: bool
    partitions: frozenset[str]


class Scripts(Protocol):
    """What an adapter's script module provides (schedulers/slurm/scripts.py,
    schedulers/htcondor/submit.py): the text that is submitted, from plain descriptions."""

    def render(
        self,
        job: JobSpec,
        work_dir: str,
        register_url: str = "",
        metrics_url: str = "",
        system_interval: float = 0,
    ) -> str: ...

    def render_array(
        self,
        array: ArraySpec,
        members: Sequence[Member],
        work_dir: str,
        system_interval: float = 0,
    ) -> str: ...


class Operations(Protocol):
    """What an adapter's operations module provides (schedulers/slurm/operations.py,
    schedulers/htcondor/operations.py): the commands that submit, cancel and release."""

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
    ) -> Submission: ...

    def cancel(self, conn: Connection, scheduler_id: str, job_name: str) -> None: ...

    def cancel_named(self, conn: Connection, username: str, job_name: str) -> None: ...

    def release(
        self, conn: Connection, username: str, scheduler_id: str, job_name: str
    ) -> None: ...


class Adapter:
    """What the portal asks of a scheduler, and what every adapter shares: its capabilities, with the defaults of a full batch
    scheduler (Slurm); an adapter overrides what its scheduler cannot do. The launch page
    gets them as data (``capabilities``), job validation asks them (jobs/models/request.py)."""

    name = ""
    # Jobs over several nodes (or several tasks on one) are run.
    supports_multi_node = True
    # A launcher (torchrun, mpirun, srun) starts the job's processes.
    supports_launchers = True
    # A job checkpoints and is requeued by the scheduler (resumable, max_attempts).
    supports_resumable = True
    # Stage-in (JobSpec.staging) for an image's job: the copy runs in the job script, on the
    # host, before the script starts the container. False where the scheduler starts the
    # container and the script runs inside it (HTCondor's container_image), where the
    # folder to copy and the node's scratch may not be mounted: refused at launch.
    stages_in_containers = True
    # Runs an array's members at most N at a time by itself (Slurm's --array=0-9%N); else
    # the portal submits no more members than may run at once.
    array_throttle = False
    # What the admin's GPU discovery runs (named when it does not answer).
    gpu_discovery_command = ""
    # statuses_of_owners() reads several users' jobs in one pass (a cluster whose
    # ``sync_reads_all_jobs`` names an account allowed to see them all).
    reads_all_jobs = False
    # The launch form's words for this scheduler: what the account a job is charged to is
    # called and what it is, and a line said when this scheduler's cluster is chosen (what
    # it runs differently; empty: nothing to say). The words a person reads, never a pointer
    # elsewhere.
    account_label = "Account"
    account_help = "Charged for the job; empty: the cluster's default."
    launch_note = ""

    # The adapter's modules, typed (Scripts, Operations above): each adapter names its own.
    scripts: Scripts
    operations: Operations

    def render(
        self,
        job: JobSpec,
        work_dir: str,
        register_url: str = "",
        metrics_url: str = "",
        system_interval: float = 0,
    ) -> str:
        """What ``submit`` sends for ``job``; kept as the job's script (shown on its page).
        ``register_url``: where a session announces itself, ``metrics_url``: where the
        metrics client uploads (empty: the portal reads both from the job's files)."""
        return self.scripts.render(job, work_dir, register_url, metrics_url, system_interval)

    def render_array(
        self,
        array: ArraySpec,
        members: Sequence[Member],
        work_dir: str,
        system_interval: float = 0,
    ) -> str:
        """What ``submit_array`` sends for an array's members (in index order)."""
        return self.scripts.render_array(array, members, work_dir, system_interval)

    def submit(
        self,
        conn: Connection,
        work_dir: str,
        job_name: str,
        script: str,
        secret: str = "",
        metrics_token: str = "",
    ) -> Submission:
        """Submit (or adopt, found by ``job_name``) the rendered ``script`` from
        ``work_dir``, with the job's private files (session secret, metrics token)."""
        return self.operations.submit(conn, work_dir, job_name, script, secret, metrics_token)

    def submit_array(
        self,
        conn: Connection,
        work_dir: str,
        name: str,
        script: str,
        tokens: list[tuple[int, str]],
    ) -> Submission:
        """Submit (or adopt) a job array: one script, members ``<id>_<index>``."""
        return self.operations.submit_array(conn, work_dir, name, script, tokens)

    def cancel(self, conn: Connection, scheduler_id: str, job_name: str) -> None:
        """Cancel the job, only while ``scheduler_id`` still carries ``job_name``."""
        self.operations.cancel(conn, scheduler_id, job_name)

    def cancel_named(self, conn: Connection, username: str, job_name: str) -> None:
        """Cancel every job of ``username`` named ``job_name``: what a submission the portal
        never heard back from may have started (withdrawn when its job is cancelled)."""
        self.operations.cancel_named(conn, username, job_name)

    def release(self, conn: Connection, username: str, scheduler_id: str, job_name: str) -> None:
        """Release the held job, only while ``scheduler_id`` still carries ``job_name``."""
        self.operations.release(conn, username, scheduler_id, job_name)

    def member_id(self, array_id: str, index: int) -> str:
        """The scheduler's id of an array's member (Slurm "12_3", HTCondor "12.3")."""
        raise NotImplementedError

    def statuses(
        self, conn: Connection, username: str, jobs: Sequence[JobRef]
    ) -> dict[JobKey, Status]:
        """Status of ``jobs`` by their key, in O(1) commands: a record counts for a
        job only under its id and its name; unknown jobs left out."""
        raise NotImplementedError

    def statuses_of_owners(
        self, conn: Connection, jobs: Mapping[str, Sequence[JobRef]]
    ) -> dict[str, dict[JobKey, Status]]:
        """statuses() of several owners' jobs ({user name: jobs}) at once, in O(1) commands
        on a connection that may see every user's jobs (``reads_all_jobs``)."""
        raise NotImplementedError

    def attempts(
        self, conn: Connection, username: str, jobs: Sequence[JobRef]
    ) -> dict[JobKey, list[Attempt]]:
        """Each run of ``jobs`` with what it held, oldest first, from accounting, in O(1)
        commands, by their key like statuses() ({} where the scheduler keeps no
        accounting)."""
        raise NotImplementedError

    def attempts_of_owners(
        self, conn: Connection, jobs: Mapping[str, Sequence[JobRef]]
    ) -> dict[str, dict[JobKey, list[Attempt]]]:
        """attempts() of several owners' jobs at once, like statuses_of_owners()."""
        raise NotImplementedError

    def discover_gpu_types(self, account: ClusterAccount, cluster: Cluster) -> list[str] | None:
        """Describe the GPU types the cluster's nodes report (lines for the admin); None
        when the scheduler did not answer."""
        raise NotImplementedError

    def reservations(self, conn: Connection) -> list[Reservation] | None:
        """The scheduler's reservations that have not ended, in O(1) commands; None where
        it keeps none."""
        return None

    def lower_time_limit(
        self, conn: Connection, username: str, scheduler_id: str, job_name: str, minutes: int
    ) -> None:
        """Lower a pending job's time limit (what its owner may do), only while
        ``scheduler_id`` still carries ``job_name``."""
        raise NotImplementedError

    def account_usage(self, conn: Connection, account: str, since: str) -> AccountUsage | None:
        """What ``account`` spent since ``since`` (YYYY-MM-DD) per user and month, its limits
        and fair-share, in O(1) commands; None where the scheduler keeps no accounting."""
        return None

    def accounts(self, conn: Connection) -> AccountsRead | None:
        """The scheduler's accounts with their users and coordinators, as far as the
        connection's user may read them, in O(1) commands (projects/sync.py); None where
        the scheduler has no such thing."""
        return None

    def capabilities(self) -> dict[str, object]:
        """The capabilities, as data for the page."""
        return {
            "scheduler_name": self.name,
            "supports_multi_node": self.supports_multi_node,
            "supports_launchers": self.supports_launchers,
            "supports_resumable": self.supports_resumable,
            "stages_in_containers": self.stages_in_containers,
            "array_throttle": self.array_throttle,
            "account_label": self.account_label,
            "account_help": self.account_help,
            "launch_note": self.launch_note,
        }
