"""Real accounting on the dev cluster (slurmdbd + MariaDB): sacct answers, and the portal
reads final states and exit codes from it when the controller no longer holds a job."""

import subprocess
import time

import pytest

from clusters import pool
from jobs.models import Job
from schedulers.seam import JobKey
from schedulers.slurm import operations, parsers
from tests import factories, polling

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]


def from_accounting(job: Job, timeout: float = 30) -> parsers.SlurmJob:
    """Ask accounting only (as the sync does once the controller has let the job go)."""
    account = job.cluster_account

    def final() -> parsers.SlurmJob | None:
        found = pool.with_connection(
            account,
            lambda conn: operations.accounting(
                conn, account.username, {job.scheduler_key: job.ref().comment}
            ),
        )
        status = found.get(job.scheduler_key)
        return status if status is not None and status.is_final else None

    return polling.until(final, timeout, f"accounting's final word on job {job.pk}")


def test_sacct_gives_the_final_state_and_exit_code(devcluster, owner):
    failed = factories.submitted_job(owner, devcluster, "echo bye; exit 3")
    killed = factories.submitted_job(owner, devcluster, "kill -9 $$")
    status = from_accounting(failed)
    assert (status.state, status.exit_code, status.signal) == ("failed", 3, 0)
    # One of the two nodes up.sh starts on this machine (node1, node2).
    assert status.node in ("node1", "node2") and status.start is not None
    status = from_accounting(killed)
    # Accounting says what the controller says (it still holds the job: MinJobAge).
    out = subprocess.run(["squeue", "--json"], capture_output=True, text=True).stdout
    live = {j.scheduler_id: j for j in parsers.parse_squeue_json(out, "hpcuser")}
    controller = live[killed.scheduler_job_id]
    # (sacct prints exit codes of 128 and more less 128: the wrapper's 137 is its 9.)
    assert controller.exit_code == 137 and status.exit_code == 137 - 128
    assert status.state == controller.state == "failed"
    # Under another name the same id is not this job (ids are reissued after a crash).
    account = failed.cluster_account
    other = pool.with_connection(
        account,
        lambda conn: operations.accounting(
            conn, account.username, {JobKey(failed.scheduler_job_id, "portal-0-someone"): ""}
        ),
    )
    assert other == {}


def test_sacct_lists_every_attempt_of_a_requeued_job(devcluster, owner):
    job = factories.submitted_job(owner, devcluster, "sleep 60")
    sid = job.scheduler_job_id
    polling.until(
        lambda: (
            subprocess.run(
                ["squeue", "-h", "-j", sid, "-o", "%T"], capture_output=True, text=True
            ).stdout.strip()
            == "RUNNING"
        ),
        30,
        f"job {sid} to run",
    )
    subprocess.run(["scontrol", "requeue", sid], check=True)
    time.sleep(2)
    subprocess.run(["scancel", sid], check=True)
    argv = ["sacct", "-n", "-P", "-X", "-D", f"--delimiter={parsers.FIELD_SEP}", "-j", sid]
    argv += ["-o", ",".join(parsers.SACCT_FIELDS)]
    rows: list[parsers.SlurmJob] = []

    def both_runs() -> bool:  # slurmdbd records the cancelled run a moment after the controller
        nonlocal rows
        text = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        rows = [s for s in parsers.parse_sacct(text, "hpcuser") if s.scheduler_id == sid]
        # This job's runs are the rows under its name (as the portal reads them: an id
        # alone may be an older job's, reissued after a controller lost its state).
        attempts = [s for s in rows if s.name == job.scheduler_name]
        return [a.slurm_state.split()[0] for a in attempts] == ["REQUEUED", "CANCELLED"]

    polling.until(
        both_runs,
        30,
        lambda: (
            f"{job.scheduler_name}: a requeued run and a cancelled one in accounting "
            f"(rows: {[(r.name, r.slurm_state) for r in rows]})"
        ),
    )
