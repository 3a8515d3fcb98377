"""HTCondor behind the scheduler seam (schedulers/seam.py)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from clusters import pool, ssh
from clusters.models.gpus import record_devices
from common.choices import State
from schedulers.htcondor import accounts as condor_accounts
from schedulers.htcondor import operations, parsers, submit
from schedulers.htcondor.status import to_status
from schedulers.seam import AccountsRead, Adapter, Attempt, JobKey, JobRef, Status

if TYPE_CHECKING:
    from clusters.models import Cluster, ClusterAccount
    from clusters.ssh import Connection


log = logging.getLogger(__name__)

# How far before the oldest submission the history is read (ads leave the queue roughly,
# not strictly, in the order their state last changed).
HISTORY_SLACK_SECONDS = 3600


def since(jobs: Iterable[JobRef]) -> int | None:
    """Epoch seconds before any of ``jobs`` was submitted (None: one has no time)."""
    times = [j.submitted_at for j in jobs]
    if not times or any(t is None for t in times):
        return None
    return int(min(t for t in times if t is not None).timestamp()) - HISTORY_SLACK_SECONDS


def confirmed(
    status: Status,
    ad: parsers.CondorJob,
    job: JobRef,
    username: str,
    claims: list[parsers.Claim] | None,
) -> Status:
    """``status`` with the node a startd confirms, never one the job ad alone names (its
    owner can condor_qedit RemoteHost to any text). Running: the machine of the slot
    RemoteHost names, if that slot's startd reports it claimed by this job of this user;
    when the startd reports the job in another slot, no node (its session is not routed)
    and a line for the timeline; while the collector has not heard of the claim yet, no
    node. ``claims`` None (the collector did not answer): the node confirmed before, while
    the ad still names its machine. Other states keep the node confirmed last (a job
    not running has no route)."""
    if status.state == State.PENDING:
        return status
    if status.state != State.RUNNING:
        # No session is routed to a job that is not running: the ad's machine is shown
        # only where no startd confirmed one (a job that ended between two syncs).
        return dataclasses.replace(status, node=job.node or ad.node)
    if claims is None:
        kept = job.node if job.node and job.node == ad.node else ""
        return dataclasses.replace(status, node=kept)
    mine = [c for c in claims if c.job_id == ad.scheduler_id and c.owner == username]
    claim = next((c for c in mine if ad.slot and c.slot == ad.slot), None)
    if claim is not None:
        return dataclasses.replace(status, node=claim.machine)
    note = ""
    if mine:
        note = (
            f"HTCondor's job ad says it runs in slot {ad.slot or '(none)'!r}, but the machine "
            f"running it reports slot {mine[0].slot!r}: the portal routes its session to "
            "neither while they disagree."
        )
    return dataclasses.replace(status, node="", note=note)


def charged(run: Attempt, job: JobRef) -> Attempt:
    """What a run is charged: its GPUs and CPUs as HTCondor provisioned them (its ad),
    never less than the portal asked for (job.sub) nor more than a node of its partition
    has, under the account the portal submitted it to (accounting_group), never the ad's
    AcctGroup: the job can edit its ad, not the portal's own record."""
    partition, asked = job.partition, job.resources
    gpus_asked = int(asked.gpus)
    cpus_asked = int(asked.cpus) * int(asked.tasks_per_node)
    most_gpus = partition.max_gpus_per_node or partition.max_gpus_per_job
    most_cpus = partition.max_cpus_per_job
    return dataclasses.replace(
        run,
        gpus=min(max(run.gpus, gpus_asked), max(most_gpus, gpus_asked)),
        cpus=min(max(run.cpus, cpus_asked), max(most_cpus, cpus_asked)),
        account=job.account,
        node=job.node or run.node,
    )


class HTCondor(Adapter):
    name = "HTCondor"
    # One process on one machine per job, and it requeues nothing itself.
    supports_multi_node = False
    supports_launchers = False
    supports_resumable = False
    # With container_image the job script runs inside HTCondor's container, which may not
    # see the folder to stage in: stage-in only for images without a container.
    stages_in_containers = False
    # Late materialization (max_materialize) would hide the waiting procs from condor_q;
    # the experiment controller submits only as many as may run instead.
    array_throttle = False
    gpu_discovery_command = "condor_status"
    account_label = "Accounting group"
    account_help = (
        "The group the job's usage is charged to (accounting_group); empty: the cluster's default."
    )
    launch_note = (
        "This cluster runs HTCondor: each job runs as one process on one machine, with GPUs "
        "chosen by compute capability and memory. For a job on several nodes, a launcher "
        "(torchrun, mpirun) or checkpoint and requeue, choose a Slurm cluster."
    )

    scripts = submit
    operations = operations

    def member_id(self, array_id: str, index: int) -> str:
        return f"{array_id}.{int(index)}"

    def statuses(
        self, conn: Connection, username: str, jobs: Sequence[JobRef]
    ) -> dict[JobKey, Status]:
        statuses: dict[JobKey, Status] = {}
        by_key = {}
        for job in jobs:
            if parsers.SCHEDULER_ID.match(job.key.scheduler_id):
                by_key[job.key] = job
            else:  # e.g. submitted while the cluster ran Slurm: left as it is, said so
                statuses[job.key] = Status(
                    state=job.state,
                    unreadable=f"{job.key.scheduler_id!r} is not an HTCondor job id",
                )
        found = operations.jobs(conn, username, by_key.keys(), since(by_key.values()))
        # Where the running ones run, as their startds report it: one condor_status.
        claims: list[parsers.Claim] | None = None
        running = [ad.scheduler_id for ad in found.values() if ad.status == parsers.RUNNING]
        if running:
            try:
                claims = operations.claims(conn, running)
            except ssh.ClusterError as exc:
                log.warning("condor_status: claims unknown, nodes as confirmed before: %s", exc)
        for key, ad in found.items():
            job = by_key[key]
            try:
                status = to_status(ad)
            except ValueError as exc:  # a JobStatus this portal does not know
                statuses[key] = Status(state=job.state, unreadable=str(exc))
                continue
            statuses[key] = confirmed(status, ad, job, username, claims)
        return statuses

    def attempts(
        self, conn: Connection, username: str, jobs: Sequence[JobRef]
    ) -> dict[JobKey, list[Attempt]]:
        readable = {j.key: j for j in jobs if parsers.SCHEDULER_ID.match(j.key.scheduler_id)}
        runs = operations.attempts(conn, username, readable.keys(), since(readable.values()))
        return {k: [charged(run, readable[k]) for run in rs] for k, rs in runs.items()}

    def discover_gpu_types(self, account: ClusterAccount, cluster: Cluster) -> list[str] | None:
        devices = pool.with_connection(account, operations.gpu_devices)
        return None if devices is None else record_devices(cluster, devices)

    def accounts(self, conn: Connection) -> AccountsRead:
        return condor_accounts.read(conn)


HTCONDOR = HTCondor()
