"""Slurm behind the scheduler seam (schedulers/seam.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from clusters import pool
from clusters.models.gpus import record_discovery
from schedulers.seam import (
    AccountsRead,
    AccountUsage,
    Adapter,
    Attempt,
    JobKey,
    JobRef,
    Reservation,
    Status,
)
from schedulers.slurm import accounts as slurm_accounts
from schedulers.slurm import operations, scripts
from schedulers.slurm import reservations as slurm_reservations
from schedulers.slurm.status import to_status

if TYPE_CHECKING:
    from clusters.models import Cluster, ClusterAccount
    from clusters.ssh import Connection


class Slurm(Adapter):
    name = "Slurm"
    array_throttle = True
    reads_all_jobs = True
    gpu_discovery_command = "sinfo"
    account_label = "Slurm account"
    account_help = "Charged for the job (sbatch --account); empty: the cluster's default."

    scripts = scripts
    operations = operations

    def member_id(self, array_id: str, index: int) -> str:
        return f"{array_id}_{int(index)}"

    def statuses(
        self, conn: Connection, username: str, jobs: Sequence[JobRef]
    ) -> dict[JobKey, Status]:
        return self.statuses_of_owners(conn, {username: jobs}).get(username, {})

    def statuses_of_owners(
        self, conn: Connection, jobs: Mapping[str, Sequence[JobRef]]
    ) -> dict[str, dict[JobKey, Status]]:
        by_owner = {owner: {j.key: j for j in owned} for owner, owned in jobs.items()}
        raw = operations.query_owners(conn, _expected(by_owner))
        statuses: dict[str, dict[JobKey, Status]] = {}
        for owner, found in raw.items():
            mine = statuses.setdefault(owner, {})
            for key, slurm_job in found.items():
                job = by_owner[owner][key]
                try:
                    mine[key] = to_status(slurm_job, job.resources)
                except Exception as exc:  # noqa: BLE001 - e.g. a state this portal does not know
                    mine[key] = Status(state=job.state, unreadable=str(exc))
        return statuses

    def attempts(
        self, conn: Connection, username: str, jobs: Sequence[JobRef]
    ) -> dict[JobKey, list[Attempt]]:
        return self.attempts_of_owners(conn, {username: jobs}).get(username, {})

    def attempts_of_owners(
        self, conn: Connection, jobs: Mapping[str, Sequence[JobRef]]
    ) -> dict[str, dict[JobKey, list[Attempt]]]:
        by_owner = {owner: {j.key: j for j in owned} for owner, owned in jobs.items()}
        return operations.attempts_owners(conn, _expected(by_owner))

    def discover_gpu_types(self, account: ClusterAccount, cluster: Cluster) -> list[str] | None:
        nodes = pool.with_connection(account, operations.free_on_nodes)
        return None if nodes is None else record_discovery(cluster, nodes)

    def reservations(self, conn: Connection) -> list[Reservation]:
        return slurm_reservations.read(conn)

    def lower_time_limit(
        self, conn: Connection, username: str, scheduler_id: str, job_name: str, minutes: int
    ) -> None:
        operations.lower_time_limit(conn, username, scheduler_id, job_name, minutes)

    def accounts(self, conn: Connection) -> AccountsRead:
        return slurm_accounts.read(conn)

    def account_usage(self, conn: Connection, account: str, since: str) -> AccountUsage:
        return slurm_accounts.read_usage(conn, account, since)


def _expected(by_owner: dict[str, dict[JobKey, JobRef]]) -> operations.Expected:
    """What the operations look records up by: each job's key with its comment."""
    return {
        owner: {key: job.comment for key, job in by_key.items()}
        for owner, by_key in by_owner.items()
    }


SLURM = Slurm()
