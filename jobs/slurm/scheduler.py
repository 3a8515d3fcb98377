"""Slurm behind the scheduler seam (jobs/schedulers.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from jobs.models.choices import State
from jobs.schedulers import Attempt, Status, Submission
from jobs.slurm import operations, scripts
from jobs.slurm.status import to_status

if TYPE_CHECKING:
    from jobs.cluster.ssh import Connection
    from jobs.models import Job


class Slurm:
    name = "Slurm"
    throttles_arrays = True

    def render(
        self,
        job: Job,
        work_dir: str,
        register_url: str = "",
        metrics_url: str = "",
        system_interval: float = 0,
    ) -> str:
        return scripts.render(job, work_dir, register_url, metrics_url, system_interval)

    def render_array(self, array, members: list, work_dir: str, system_interval: float = 0) -> str:
        return scripts.render_array(array, members, work_dir, system_interval)

    def member_id(self, array_id: str, index: int) -> str:
        return f"{array_id}_{int(index)}"

    def submit(
        self,
        conn: Connection,
        work_dir: str,
        job_name: str,
        script: str,
        secret: str = "",
        metrics_token: str = "",
    ) -> Submission:
        return operations.submit(conn, work_dir, job_name, script, secret, metrics_token)

    def submit_array(
        self,
        conn: Connection,
        work_dir: str,
        name: str,
        script: str,
        tokens: list[tuple[int, str]],
    ) -> Submission:
        return operations.submit_array(conn, work_dir, name, script, tokens)

    def statuses(self, conn: Connection, username: str, jobs: Sequence[Job]) -> dict[str, Status]:
        by_id = {job.scheduler_job_id: job for job in jobs}
        raw = operations.query(conn, username, {i: j.slurm_name for i, j in by_id.items()})
        statuses = {}
        for scheduler_id, found in raw.items():
            job = by_id[scheduler_id]
            try:
                statuses[scheduler_id] = to_status(found, job)
            except Exception as exc:  # noqa: BLE001 - e.g. a state this portal does not know
                statuses[scheduler_id] = Status(state=State(job.state), unreadable=str(exc))
        return statuses

    def attempts(
        self, conn: Connection, username: str, jobs: Sequence[Job]
    ) -> dict[str, list[Attempt]]:
        return operations.attempts(conn, username, {j.scheduler_job_id: j.slurm_name for j in jobs})

    def cancel(self, conn: Connection, scheduler_id: str, job_name: str) -> None:
        operations.cancel(conn, scheduler_id, job_name)

    def release(self, conn: Connection, username: str, scheduler_id: str, job_name: str) -> None:
        operations.release(conn, username, scheduler_id, job_name)


SLURM = Slurm()
