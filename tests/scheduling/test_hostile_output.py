"""What users' jobs write into the scheduler's output is data, never structure, on both real
schedulers: another user's job (or, on HTCondor, one of the same user outside the portal)
named like a portal job never speaks for it; a job that renames itself is no longer taken
for the portal's. What each scheduler lets a job write differs (Slurm: names and comments
squeue prints; HTCondor: attributes of its ad), so each forges in its own way. Separators
in Slurm's output, a qedited RemoteHost: tests/devcluster/ and tests/condorpool/
test_hostile_output.py."""

import subprocess

import pytest

from jobs import tasks
from jobs.models import Job
from tests import factories
from tests.conftest import as_pool_root
from tests.devcluster.helpers import as_user, remote, run_until, sync_until
from tests.scheduling.helpers import NODES

pytestmark = [pytest.mark.django_db]


def forge_on_slurm(victim: Job, other: str) -> list[str]:
    """The other user's job, held, names the victim in its name and comment with a fake
    state, exit code and node. (Before: `scontrol show job -o` listed every user's jobs
    and the last `Key=` of a line won, so the victim showed the forged state.) Returns
    what removes it."""
    forged = (
        f" JobId={victim.scheduler_job_id} JobState=FAILED Reason=None ExitCode=7:0 "
        "NodeList=evil StartTime=2026-01-01T00:00:00"
    )
    options = ["--hold", "-J", forged, f"--comment={forged}", "--wrap", "true"]
    job_id = as_user(other, "sbatch", "--parsable", "-p", "cpu", "-t", "5", *options)
    return ["runuser", "-u", other, "--", "scancel", job_id]


HTCONDOR_FORGED = """executable = /bin/sh
arguments = "-c 'exit 7'"
initialdir = /home/{user}
+PortalName = "{name}"
+ExitCode = 7
queue
"""


def forge_on_htcondor(victim: Job, other: str) -> list[str]:
    """The other user's job and one of the owner's own, submitted outside the portal under
    the victim's name, both ending with exit code 7 before it. They end by themselves."""
    description = HTCONDOR_FORGED.format(user=other, name=victim.scheduler_name)
    as_pool_root(
        "runuser", "-u", other, "--", "sh", "-c", f"cat <<'EOF' | condor_submit -\n{description}EOF"
    )
    account = victim.cluster_account
    mine = HTCONDOR_FORGED.format(user=account.username, name=victim.scheduler_name)
    remote(account, ["bash", "-c", 'printf "%s" "$1" | condor_submit -terse -', "x", mine])
    return []


FORGE = {"slurm": forge_on_slurm, "htcondor": forge_on_htcondor}


@pytest.fixture
def forge_like(scheduler_cluster, scheduler_info):
    """forge_like(victim): the scheduler's forgery of ``victim`` by its cluster's second
    user, removed afterwards."""
    user = scheduler_info["default_user"]
    other = next(name for name in sorted(scheduler_info["users"]) if name != user)
    removals: list[list[str]] = []
    yield lambda victim: removals.append(FORGE[scheduler_cluster.scheduler](victim, other))
    for argv in removals:
        if argv:
            subprocess.run(argv, capture_output=True, timeout=30)


def test_another_users_job_named_like_a_portal_job_never_speaks_for_it(
    scheduler_cluster, owner, forge_like
):
    victim = factories.submitted_job(owner, scheduler_cluster, "sleep 5")
    assert victim.state == Job.State.PENDING, victim.message
    forge_like(victim)
    # Each sync reads all the cluster's scheduled jobs, as the periodic sync does.
    scheduled = Job.objects.filter(cluster=scheduler_cluster, state__in=tasks.SCHEDULED_STATES)
    victim = run_until(victim, {"completed", "failed"}, timeout=90, jobs=scheduled)
    assert (victim.state, victim.exit_code) == ("completed", 0), victim.message
    # Where the scheduler ran it, never a forged "evil".
    assert victim.node in NODES[scheduler_cluster.scheduler], victim.node


# A job that renames itself from inside (its own name is what the portal knows it by).
RENAME = {
    "slurm": "scontrol update JobId=$SLURM_JOB_ID JobName=someone-else",
    "htcondor": 'condor_qedit "$PORTAL_SCHEDULER_JOB_ID" PortalName \'"someone-else"\'',
}


def test_a_job_that_renames_itself_is_no_longer_taken_for_the_portals(scheduler_cluster, owner):
    rename = RENAME[scheduler_cluster.scheduler]
    job = factories.submitted_job(owner, scheduler_cluster, f"{rename}; sleep 60")
    sync_until(job, lambda j: j.scheduler_unseen_since is not None, 30, "to go unseen")
    # Not ended (nor moved) by what it wrote: its grace period runs.
    assert job.state in {"pending", "running"}
    assert job.scheduler_unseen_since is not None
