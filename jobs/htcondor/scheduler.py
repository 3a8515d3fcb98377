"""HTCondor behind the scheduler seam (jobs/schedulers.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from jobs.htcondor import operations, parsers, submit
from jobs.htcondor.status import to_status
from jobs.models.choices import State
from jobs.schedulers import Attempt, Status, Submission

if TYPE_CHECKING:
    from jobs.models import Job
    from jobs.slurm.ssh import Connection


# How far before the oldest submission the history is read (ads leave the queue roughly,
# not strictly, in the order their state last changed).
HISTORY_SLACK_SECONDS = 3600


def since(jobs) -> int | None:
    """Epoch seconds before any of ``jobs`` was submitted (None: one has no time)."""
    times = [j.submitted_at or j.created_at for j in jobs]
    if not times or any(t is None for t in times):
        return None
    return int(min(times).timestamp()) - HISTORY_SLACK_SECONDS


class HTCondor:
    name = "HTCondor"
    # Late materialization (max_materialize) would hide the waiting procs from condor_q;
    # the experiment controller submits only as many as may run instead.
    throttles_arrays = False

    def render(
        self,
        job: Job,
        work_dir: str,
        register_url: str = "",
        metrics_url: str = "",
        system_interval: float = 0,
    ) -> str:
        return submit.render(job, work_dir, register_url, metrics_url, system_interval)

    def render_array(self, array, members: list, work_dir: str, system_interval: float = 0) -> str:
        return submit.render_array(array, members, work_dir, system_interval)

    def member_id(self, array_id: str, index: int) -> str:
        return f"{array_id}.{int(index)}"

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
        statuses: dict[str, Status] = {}
        by_id = {}
        for job in jobs:
            if parsers.SCHEDULER_ID.match(job.scheduler_job_id):
                by_id[job.scheduler_job_id] = job
            else:  # e.g. submitted while the cluster ran Slurm: left as it is, said so
                statuses[job.scheduler_job_id] = Status(
                    state=State(job.state),
                    unreadable=f"{job.scheduler_job_id!r} is not an HTCondor job id",
                )
        found = operations.jobs(
            conn, username, {i: j.slurm_name for i, j in by_id.items()}, since(by_id.values())
        )
        for scheduler_id, ad in found.items():
            try:
                statuses[scheduler_id] = to_status(ad)
            except ValueError as exc:  # a JobStatus this portal does not know
                job = by_id[scheduler_id]
                statuses[scheduler_id] = Status(state=State(job.state), unreadable=str(exc))
        return statuses

    def attempts(
        self, conn: Connection, username: str, jobs: Sequence[Job]
    ) -> dict[str, list[Attempt]]:
        readable = [j for j in jobs if parsers.SCHEDULER_ID.match(j.scheduler_job_id)]
        return operations.attempts(
            conn, username, {j.scheduler_job_id: j.slurm_name for j in readable}, since(readable)
        )

    def cancel(self, conn: Connection, scheduler_id: str, job_name: str) -> None:
        operations.cancel(conn, scheduler_id, job_name)

    def release(self, conn: Connection, username: str, scheduler_id: str, job_name: str) -> None:
        operations.release(conn, username, scheduler_id, job_name)


HTCONDOR = HTCondor()
